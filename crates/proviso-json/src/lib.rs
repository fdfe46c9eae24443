//! Strict JSON for model output.
//!
//! This crate answers one question: *is this text exactly one RFC 8259 JSON value, and if not,
//! where and why not?* It is built on `serde_json`'s parser; what it adds is the strictness a
//! contract boundary needs and `serde_json` leaves to its callers:
//!
//! * duplicate object keys are rejected, and both positions are reported;
//! * the input size and the nesting depth are bounded before any work is spent on them;
//! * invalid UTF-8, lone surrogates, `NaN`/`Infinity` and other non-JSON numbers, a byte
//!   order mark and trailing content are all rejected with their own [`ParseErrorKind`];
//! * numbers keep their exact text (serde_json's `arbitrary_precision`), so a 40-digit
//!   integer is never silently rounded through `f64`.
//!
//! ```
//! use proviso_json::{parse, ParseErrorKind, ParseOptions};
//!
//! let value = parse(br#"{"amount_yuan": 750}"#, &ParseOptions::default()).unwrap();
//! assert_eq!(value["amount_yuan"], 750);
//!
//! let err = parse(br#"{"a": 1, "a": 2}"#, &ParseOptions::default()).unwrap_err();
//! assert!(matches!(err.kind(), ParseErrorKind::DuplicateKey { .. }));
//! assert_eq!((err.position().line, err.position().column), (1, 10));
//! ```

mod locate;
mod number;
pub mod refs;
mod value;

use std::fmt;

pub use number::{exact_integer, ExactInteger};
pub use serde_json::{Map, Number, Value};

/// What the parser accepts: bounds applied before and during parsing, and the policy for
/// duplicate keys.
///
/// The defaults suit model output: a tool call is a few hundred bytes, a long cited answer a
/// few tens of kilobytes, and no legitimate contract nests deeper than a few levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParseOptions {
    /// Largest accepted input, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of arrays and objects. The top-level value is depth 1.
    /// Values above 128 are clamped to 128, serde_json's own recursion guard.
    pub max_depth: usize,
    /// What to do when an object names a key twice.
    pub duplicate_keys: DuplicateKeys,
}

proviso_macros::setters!(ParseOptions {
    max_bytes: usize,
    max_depth: usize,
    duplicate_keys: DuplicateKeys,
});

impl Default for ParseOptions {
    fn default() -> Self {
        Self {
            max_bytes: 1 << 20,
            max_depth: 64,
            duplicate_keys: DuplicateKeys::Reject,
        }
    }
}

/// The duplicate-key policy.
///
/// RFC 8259 says names *should* be unique and leaves the meaning of duplicates to each
/// implementation; two parsers reading `{"amount": 600, "amount": 750}` may see different
/// amounts. A contract boundary therefore rejects them, which is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DuplicateKeys {
    /// Reject the input with [`ParseErrorKind::DuplicateKey`].
    #[default]
    Reject,
    /// Accept the input and keep the last value, as serde_json does. Only for checking text
    /// against the bare RFC 8259 grammar; never use it at a contract boundary.
    KeepLast,
}

/// A place in the input text. Lines and columns are 1-based; columns count bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[non_exhaustive]
pub struct Position {
    /// Byte offset from the start of the input.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in bytes from the start of the line.
    pub column: usize,
}

impl Position {
    /// Computes the line and column of a byte offset in `input`.
    #[must_use]
    pub fn at(input: &[u8], offset: usize) -> Self {
        let offset = offset.min(input.len());
        let before = &input[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        Self {
            offset,
            line,
            column: offset - line_start + 1,
        }
    }

    /// Converts serde_json's 1-based line and column back into an offset in `input`.
    fn from_line_column(input: &[u8], line: usize, column: usize) -> Self {
        let mut start = 0;
        for _ in 1..line {
            match input[start..].iter().position(|&b| b == b'\n') {
                Some(i) => start += i + 1,
                None => break,
            }
        }
        // serde_json reports column 0 when the error is at a line start.
        let offset = (start + column.saturating_sub(1)).min(input.len());
        Self::at(input, offset)
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} column {}", self.line, self.column)
    }
}

/// Why a text is not one strict JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The input is empty or only whitespace.
    Empty,
    /// The input is longer than [`ParseOptions::max_bytes`].
    TooLarge {
        /// Size of the input in bytes.
        size: usize,
        /// The limit that was exceeded.
        limit: usize,
    },
    /// Arrays and objects nest deeper than [`ParseOptions::max_depth`].
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// The input starts with a byte order mark, which RFC 8259 forbids senders to add.
    ByteOrderMark,
    /// The text ends before the value is complete (for example a missing closing brace).
    UnexpectedEnd,
    /// A number that JSON does not allow: `NaN`, `Infinity`, a leading `+` or zero, hex, ...
    InvalidNumber,
    /// A `\u` escape names half of a surrogate pair without the other half.
    LoneSurrogate,
    /// An object names the same key twice; `first` is where it was named before.
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// JSON pointer of the object that holds the key.
        pointer: String,
        /// Where the key first appeared.
        first: Position,
    },
    /// More text follows a complete value.
    TrailingContent,
    /// Anything else that is not JSON: a missing comma, a bare word, a control character in
    /// a string, a trailing comma, ...
    Syntax,
}

impl ParseErrorKind {
    /// A stable, machine-readable code for this kind.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "empty_input",
            Self::TooLarge { .. } => "input_too_large",
            Self::TooDeep { .. } => "nesting_too_deep",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::ByteOrderMark => "byte_order_mark",
            Self::UnexpectedEnd => "unexpected_end",
            Self::InvalidNumber => "invalid_number",
            Self::LoneSurrogate => "lone_surrogate",
            Self::DuplicateKey { .. } => "duplicate_key",
            Self::TrailingContent => "trailing_content",
            Self::Syntax => "syntax_error",
        }
    }
}

/// A rejected input: what is wrong, where, and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at {position}")]
pub struct ParseError {
    kind: ParseErrorKind,
    position: Position,
    message: String,
}

impl ParseError {
    fn new(kind: ParseErrorKind, position: Position, message: impl Into<String>) -> Self {
        Self {
            kind,
            position,
            message: message.into(),
        }
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &ParseErrorKind {
        &self.kind
    }

    /// Where it went wrong. For a duplicate key this is the second occurrence.
    #[must_use]
    pub fn position(&self) -> Position {
        self.position
    }

    /// A human-readable description without the position.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Shorthand for `self.kind().code()`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

/// Parses `input` as exactly one strict JSON value.
///
/// # Errors
///
/// Returns a [`ParseError`] naming the first problem found and its position.
pub fn parse(input: &[u8], options: &ParseOptions) -> Result<Value, ParseError> {
    if input.len() > options.max_bytes {
        return Err(ParseError::new(
            ParseErrorKind::TooLarge {
                size: input.len(),
                limit: options.max_bytes,
            },
            Position::default(),
            format!(
                "input is {} bytes, more than the limit of {}",
                input.len(),
                options.max_bytes
            ),
        ));
    }
    let text = match std::str::from_utf8(input) {
        Ok(text) => text,
        Err(e) => {
            return Err(ParseError::new(
                ParseErrorKind::InvalidUtf8,
                Position::at(input, e.valid_up_to()),
                "input is not valid UTF-8",
            ))
        }
    };
    if text.starts_with('\u{feff}') {
        return Err(ParseError::new(
            ParseErrorKind::ByteOrderMark,
            Position::at(input, 0),
            "input starts with a byte order mark",
        ));
    }
    if text.bytes().all(is_json_whitespace) {
        return Err(ParseError::new(
            ParseErrorKind::Empty,
            Position::at(input, input.len()),
            "input holds no JSON value",
        ));
    }
    value::parse_str(text, options.max_depth.min(128), options.duplicate_keys)
        .map_err(|failure| classify(input, failure, options))
}

/// Parses a UTF-8 string; see [`parse`].
///
/// # Errors
///
/// Returns a [`ParseError`] naming the first problem found and its position.
pub fn parse_str(input: &str, options: &ParseOptions) -> Result<Value, ParseError> {
    parse(input.as_bytes(), options)
}

/// Returns where the value at JSON pointer `pointer` starts in `input`, which must be a
/// document this crate accepted. Used to give schema violations a line and column.
#[must_use]
pub fn locate(input: &[u8], pointer: &str) -> Option<Position> {
    locate::pointer(input, pointer).map(|offset| Position::at(input, offset))
}

fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Turns a serde_json failure (plus what our own visitor noticed) into a typed error.
fn classify(input: &[u8], failure: value::Failure, options: &ParseOptions) -> ParseError {
    let value::Failure { error, noticed } = failure;
    let position = Position::from_line_column(input, error.line(), error.column());
    match noticed {
        Some(value::Noticed::Duplicate {
            key,
            pointer,
            first_ordinal,
            second_ordinal,
        }) => {
            let first = locate::nth_key(input, first_ordinal).map(|o| Position::at(input, o));
            let second = locate::nth_key(input, second_ordinal).map(|o| Position::at(input, o));
            let first = first.unwrap_or_default();
            let second = second.unwrap_or(position);
            let message = format!(
                "duplicate key {key:?} in object at {pointer:?} (first at {first})",
                pointer = if pointer.is_empty() { "/" } else { &pointer },
            );
            ParseError::new(
                ParseErrorKind::DuplicateKey {
                    key,
                    pointer,
                    first,
                },
                second,
                message,
            )
        }
        Some(value::Noticed::TooDeep) => too_deep(position, options),
        Some(value::Noticed::BadNumber) => ParseError::new(
            ParseErrorKind::InvalidNumber,
            position,
            "number cannot be represented",
        ),
        None => {
            let text = error.to_string();
            let message = text
                .rsplit_once(" at line ")
                .map_or(text.as_str(), |(m, _)| m)
                .to_owned();
            let kind = if error.is_eof() {
                ParseErrorKind::UnexpectedEnd
            } else if message.contains("recursion limit") {
                return too_deep(position, options);
            } else if message.contains("trailing characters") {
                ParseErrorKind::TrailingContent
            } else if message.contains("surrogate")
                || message.contains("invalid unicode code point")
                || (message.contains("hex escape") && after_high_surrogate(input, position.offset))
            {
                ParseErrorKind::LoneSurrogate
            } else if message.contains("number") || looks_like_number(&input[position.offset..]) {
                ParseErrorKind::InvalidNumber
            } else {
                ParseErrorKind::Syntax
            };
            // serde_json reports an error at the byte that broke it; point at the start of
            // the offending word so that `NaN` is reported where it begins.
            let position = match kind {
                ParseErrorKind::UnexpectedEnd => Position::at(input, input.len()),
                ParseErrorKind::InvalidNumber => {
                    Position::at(input, word_start(input, position.offset))
                }
                _ => position,
            };
            let message = match kind {
                ParseErrorKind::InvalidNumber => {
                    let word = word_at(input, position.offset);
                    format!("{word:?} is not a JSON number")
                }
                _ => message,
            };
            ParseError::new(kind, position, message)
        }
    }
}

fn too_deep(position: Position, options: &ParseOptions) -> ParseError {
    let limit = options.max_depth.min(128);
    ParseError::new(
        ParseErrorKind::TooDeep { limit },
        position,
        format!("arrays and objects nest deeper than {limit} levels"),
    )
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')
}

fn word_start(input: &[u8], offset: usize) -> usize {
    let mut start = offset.min(input.len());
    while start > 0 && is_word_byte(input[start - 1]) {
        start -= 1;
    }
    start
}

fn word_at(input: &[u8], offset: usize) -> String {
    let end = input[offset..]
        .iter()
        .position(|&b| !is_word_byte(b))
        .map_or(input.len(), |i| offset + i);
    String::from_utf8_lossy(&input[offset..end.min(offset + 32)]).into_owned()
}

/// Is there a `\\uD800`-`\\uDBFF` escape just before `offset`? serde_json reports a high
/// surrogate that is not followed by a low one as a malformed escape; this tells the two apart.
fn after_high_surrogate(input: &[u8], offset: usize) -> bool {
    let window = &input[offset.saturating_sub(12)..offset.min(input.len())];
    window.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && w[2].eq_ignore_ascii_case(&b'd')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'b' | b'A'..=b'B')
    })
}

/// Does the text at the error look like an attempt at a number (`NaN`, `-Infinity`, `+1`,
/// `.5`, `0x1F`)? Used only to give such errors their own code.
fn looks_like_number(rest: &[u8]) -> bool {
    let word = |w: &[u8]| rest.starts_with(w);
    word(b"NaN")
        || word(b"Infinity")
        || word(b"-Infinity")
        || word(b"+")
        || word(b"-")
        || word(b".")
        || rest.first().is_some_and(u8::is_ascii_digit)
}
