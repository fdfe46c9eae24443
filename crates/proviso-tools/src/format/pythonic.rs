//! The pythonic format: `[get_arm(trial_id="NCT04123456", arm_label="B")]`.
//!
//! The parser reads a list of calls with keyword arguments whose values are Python literals
//! (strings, numbers, `True`/`False`/`None`, lists, tuples, dicts). It is a small
//! recursive-descent reader written here because no maintained crate parses Python literals
//! to JSON strictly; it never evaluates anything, refuses positional arguments and duplicate
//! keywords, and keeps integers exact.
//!
//! The grammar is generated from each tool's schema. Where a regular expression cannot carry
//! a keyword exactly (numeric bounds, formats, `uniqueItems`), the grammar admits a superset
//! and the keyword is listed in [`CallGrammar::verified_only`]; the schema gate then enforces
//! it. Keywords with no pythonic rendering at all (`$ref`, `not`, `allOf`, conditionals) are
//! refused by name.

use std::collections::BTreeSet;
use std::sync::Arc;

use proviso_contract::{Gate, Intent, Location, Rejection};
use proviso_json::Position;
use serde_json::{Map, Number, Value};

use super::{CallGrammar, Grammar, GrammarOptions, Proposal, ProposedCall};
use crate::error::ToolError;
use crate::registry::Registry;
use proviso_contract::Code;

/// Deepest literal nesting the parser accepts.
const MAX_DEPTH: usize = 64;

/// A pythonic syntax error at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PyError {
    /// Stable code.
    pub code: Code,
    /// Message.
    pub message: String,
    /// Byte offset in the text.
    pub offset: usize,
}

/// One parsed call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PyCall {
    /// The function name (dots allowed).
    pub name: String,
    /// Keyword arguments, in written order.
    pub arguments: Map<String, Value>,
}

/// Parses `[f(a=1), g(b="x")]` strictly.
///
/// # Errors
///
/// [`PyError`] at the first byte that does not fit.
pub fn parse_calls(text: &str) -> Result<Vec<PyCall>, PyError> {
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
        depth: 0,
    };
    p.ws();
    p.expect(b'[', "a call list starts with `[`")?;
    p.ws();
    let mut calls = Vec::new();
    if p.peek() == Some(b']') {
        return Err(p.error(Code::EmptyCallList, "the call list is empty"));
    }
    loop {
        calls.push(p.call()?);
        p.ws();
        match p.peek() {
            Some(b',') => {
                p.pos += 1;
                p.ws();
            }
            Some(b']') => {
                p.pos += 1;
                break;
            }
            Some(_) => return Err(p.error(Code::SyntaxError, "expected `,` or `]` after a call")),
            None => return Err(p.error(Code::UnexpectedEnd, "the call list is not closed")),
        }
    }
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.error(Code::TrailingContent, "text follows the call list"));
    }
    Ok(calls)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn error(&self, code: Code, message: impl Into<String>) -> PyError {
        PyError {
            code,
            message: message.into(),
            offset: self.pos,
        }
    }

    fn expect(&mut self, byte: u8, message: &str) -> Result<(), PyError> {
        match self.peek() {
            Some(b) if b == byte => {
                self.pos += 1;
                Ok(())
            }
            None => Err(self.error(Code::UnexpectedEnd, message)),
            Some(_) => Err(self.error(Code::SyntaxError, message)),
        }
    }

    fn identifier(&mut self, dotted: bool) -> Option<&str> {
        let start = self.pos;
        match self.peek() {
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => self.pos += 1,
            _ => return None,
        }
        while let Some(b) = self.peek() {
            if b.is_ascii_alphanumeric() || b == b'_' || (dotted && matches!(b, b'.' | b'-')) {
                self.pos += 1;
            } else {
                break;
            }
        }
        Some(&self.text[start..self.pos])
    }

    fn call(&mut self) -> Result<PyCall, PyError> {
        let Some(name) = self.identifier(true).map(str::to_owned) else {
            return Err(self.error(Code::SyntaxError, "expected a function name"));
        };
        self.ws();
        self.expect(b'(', "a call needs `(` after its name")?;
        self.ws();
        let mut arguments = Map::new();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(PyCall { name, arguments });
        }
        loop {
            let start = self.pos;
            let keyword = self.identifier(false).map(str::to_owned);
            self.ws();
            let Some(keyword) = keyword.filter(|_| self.peek() == Some(b'=')) else {
                self.pos = start;
                return Err(self.error(
                    Code::PositionalArgument,
                    "arguments must be passed by keyword (`name=value`)",
                ));
            };
            self.pos += 1;
            self.ws();
            let value = self.value()?;
            if arguments.contains_key(&keyword) {
                self.pos = start;
                return Err(self.error(
                    Code::DuplicateKey,
                    format!("keyword argument `{keyword}` is given twice"),
                ));
            }
            arguments.insert(keyword, value);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b')') {
                        self.pos += 1;
                        break;
                    }
                }
                Some(b')') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error(Code::UnexpectedEnd, "the call is not closed")),
                Some(_) => return Err(self.error(Code::SyntaxError, "expected `,` or `)`")),
            }
        }
        Ok(PyCall { name, arguments })
    }

    fn value(&mut self) -> Result<Value, PyError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(
                Code::NestingTooDeep,
                format!("literals nest deeper than {MAX_DEPTH}"),
            ));
        }
        match self.peek() {
            None => Err(self.error(Code::UnexpectedEnd, "expected a value")),
            Some(b'"' | b'\'') => self.string().map(Value::String),
            Some(b'[') => self.sequence(b']'),
            Some(b'(') => self.sequence(b')'),
            Some(b'{') => self.dict(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => {
                let start = self.pos;
                match self.identifier(false) {
                    Some("True") => Ok(Value::Bool(true)),
                    Some("False") => Ok(Value::Bool(false)),
                    Some("None") => Ok(Value::Null),
                    Some(other) => {
                        let message = format!("`{other}` is not a literal; only strings, numbers, True, False, None, lists, tuples and dicts are");
                        self.pos = start;
                        Err(self.error(Code::UnsupportedLiteral, message))
                    }
                    None => Err(self.error(Code::SyntaxError, "expected a value")),
                }
            }
        }
    }

    fn sequence(&mut self, close: u8) -> Result<Value, PyError> {
        self.pos += 1;
        self.depth += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(close) {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(close) {
                        self.pos += 1;
                        break;
                    }
                }
                Some(b) if b == close => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error(Code::UnexpectedEnd, "the list is not closed")),
                Some(_) => {
                    return Err(self.error(Code::SyntaxError, "expected `,` or the closing bracket"))
                }
            }
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn dict(&mut self) -> Result<Value, PyError> {
        self.pos += 1;
        self.depth += 1;
        let mut map = Map::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(Value::Object(map));
        }
        loop {
            let start = self.pos;
            if !matches!(self.peek(), Some(b'"' | b'\'')) {
                return Err(self.error(Code::SyntaxError, "dict keys must be strings"));
            }
            let key = self.string()?;
            self.ws();
            self.expect(b':', "expected `:` after a dict key")?;
            self.ws();
            let value = self.value()?;
            if map.contains_key(&key) {
                self.pos = start;
                return Err(self.error(
                    Code::DuplicateKey,
                    format!("dict key {key:?} is given twice"),
                ));
            }
            map.insert(key, value);
            self.ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        break;
                    }
                }
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error(Code::UnexpectedEnd, "the dict is not closed")),
                Some(_) => return Err(self.error(Code::SyntaxError, "expected `,` or `}`")),
            }
        }
        self.depth -= 1;
        Ok(Value::Object(map))
    }

    fn string(&mut self) -> Result<String, PyError> {
        let quote = self.s[self.pos];
        if self.s[self.pos..].starts_with(&[quote, quote, quote]) {
            return Err(self.error(
                Code::UnsupportedLiteral,
                "triple-quoted strings are not accepted",
            ));
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.pos..].chars().next() else {
                return Err(self.error(Code::UnexpectedEnd, "the string is not closed"));
            };
            match c {
                '\n' | '\r' => {
                    return Err(self.error(Code::SyntaxError, "a newline inside a string literal"))
                }
                '\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error(Code::UnexpectedEnd, "the string is not closed"));
                    };
                    self.pos += 1;
                    match e {
                        b'\\' => out.push('\\'),
                        b'\'' => out.push('\''),
                        b'"' => out.push('"'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'0' => out.push('\0'),
                        b'x' => out.push(self.hex_escape(2)?),
                        b'u' => out.push(self.hex_escape(4)?),
                        b'U' => out.push(self.hex_escape(8)?),
                        _ => {
                            self.pos -= 2;
                            return Err(self.error(Code::InvalidEscape, "unknown escape sequence"));
                        }
                    }
                }
                c if c as u32 == u32::from(quote) => {
                    self.pos += 1;
                    return Ok(out);
                }
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn hex_escape(&mut self, digits: usize) -> Result<char, PyError> {
        let start = self.pos - 2;
        let hex = self.text.get(self.pos..self.pos + digits);
        let code = hex
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32);
        match code {
            Some(c) => {
                self.pos += digits;
                Ok(c)
            }
            None => {
                self.pos = start;
                Err(self.error(
                    Code::InvalidEscape,
                    "invalid hexadecimal escape or lone surrogate",
                ))
            }
        }
    }

    fn number(&mut self) -> Result<Value, PyError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos - from
        };
        let int_start = self.pos;
        let n = digits(self);
        if n == 0 {
            return Err(self.error(Code::InvalidNumber, "expected digits"));
        }
        if n > 1 && self.s[int_start] == b'0' {
            self.pos = int_start;
            return Err(self.error(Code::InvalidNumber, "leading zeros are not allowed"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.error(Code::InvalidNumber, "expected digits after `.`"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.error(Code::InvalidNumber, "expected exponent digits"));
            }
        }
        if matches!(
            self.peek(),
            Some(b'_' | b'x' | b'o' | b'b' | b'j' | b'a'..=b'z' | b'A'..=b'Z')
        ) {
            return Err(self.error(Code::InvalidNumber, "only decimal literals are accepted"));
        }
        let text = &self.text[start..self.pos];
        // Integers keep every digit: `Number` holds the literal's text.
        text.parse::<Number>()
            .map(Value::Number)
            .map_err(|_| PyError {
                code: Code::InvalidNumber,
                message: format!("{text} is not a number"),
                offset: start,
            })
    }
}

pub(super) fn parse_step(text: &str) -> Result<Proposal, Rejection> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('[') {
        let answer = text.trim();
        if answer.is_empty() {
            return Err(Rejection::new(
                Gate::Parse,
                Code::EmptyInput,
                "the output is empty",
                Location::default(),
            ));
        }
        return Ok(Proposal {
            calls: Vec::new(),
            other: Some(Intent::FinalAnswer {
                answer: Arc::new(Value::String(answer.to_owned())),
                reasoning: None,
            }),
            rationale: None,
        });
    }
    let calls = parse_calls(text).map_err(|e| {
        Rejection::new(
            Gate::Parse,
            e.code,
            e.message,
            Location::at(Position::at(text.as_bytes(), e.offset)),
        )
    })?;
    Ok(Proposal {
        calls: calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ProposedCall {
                name: c.name,
                arguments: Value::Object(c.arguments),
                pointer: format!("/calls/{i}"),
            })
            .collect(),
        other: None,
        rationale: None,
    })
}

/// Writes a value as a Python literal, the way the grammar spells it.
#[must_use]
pub fn literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", literal(&Value::String(k.clone())), literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Generic Python literal rules, for schemas that constrain nothing.
const GENERIC: &str = r#"pyvalue: PYSTR | PYNUM | "True" | "False" | "None" | pylist | pydict
pylist: "[" (pyvalue (", " pyvalue)*)? "]"
pydict: "{" (PYSTR ": " pyvalue (", " PYSTR ": " pyvalue)*)? "}"
PYSTR: /"(?:[^"\\\x00-\x1f]|\\["\\nrt])*"/
PYNUM: /-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][+-]?[0-9]{1,3})?/
"#;

/// One string character of a pythonic literal (an escape counts as one character).
const STR_CHAR: &str = r#"(?:[^"\\\x00-\x1f]|\\["\\nrt])"#;

struct Builder<'a> {
    tool: &'a str,
    rules: Vec<String>,
    verified_only: BTreeSet<String>,
}

/// Keywords that only annotate.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "$id",
    "$anchor",
    "contentMediaType",
    "contentEncoding",
];

/// Keywords the pythonic grammar has no rendering for.
const REFUSED: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "$defs",
    "definitions",
    "minProperties",
    "maxProperties",
];

impl Builder<'_> {
    fn refuse(&self, pointer: &str, what: &str) -> ToolError {
        ToolError::FormatUnsupported {
            format: "pythonic",
            tool: self.tool.to_owned(),
            pointer: pointer.to_owned(),
            what: format!("`{what}`"),
        }
    }

    fn rule(&mut self, body: String) -> String {
        let name = format!("r{}_{}", self.rules.len(), sanitize(self.tool));
        self.rules.push(format!("{name}: {body}"));
        name
    }

    /// An expression matching the Python literals of `schema`'s instances (or a superset,
    /// with the keywords noted in `verified_only`).
    fn value(&mut self, schema: &Value, pointer: &str) -> Result<String, ToolError> {
        let map = match schema {
            Value::Bool(true) => return Ok("pyvalue".into()),
            Value::Bool(false) => return Err(self.refuse(pointer, "false")),
            Value::Object(map) => map,
            _ => return Err(self.refuse(pointer, "a schema that is not an object")),
        };
        for key in map.keys() {
            if REFUSED.contains(&key.as_str()) {
                return Err(self.refuse(&format!("{pointer}/{key}"), key));
            }
        }
        if let Some(c) = map.get("const") {
            return Ok(lark_string(&literal(c)));
        }
        if let Some(Value::Array(options)) = map.get("enum") {
            if options.is_empty() {
                return Err(self.refuse(&format!("{pointer}/enum"), "an empty enum"));
            }
            let alternatives: Vec<String> =
                options.iter().map(|o| lark_string(&literal(o))).collect();
            return Ok(format!("({})", alternatives.join(" | ")));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = map.get(key) {
                if key == "oneOf" {
                    self.verified_only.insert("oneOf".into());
                }
                let mut alternatives = Vec::new();
                for (i, option) in options.iter().enumerate() {
                    // Sibling keywords apply to every branch.
                    let mut merged = map.clone();
                    merged.remove(key);
                    if let Value::Object(o) = option {
                        for (k, v) in o {
                            merged.insert(k.clone(), v.clone());
                        }
                    }
                    alternatives
                        .push(self.value(&Value::Object(merged), &format!("{pointer}/{key}/{i}"))?);
                }
                return Ok(format!("({})", alternatives.join(" | ")));
            }
        }
        let types: Vec<&str> = match map.get("type") {
            None => {
                // No type: any literal, with whatever else is said verified after.
                for key in map.keys() {
                    if !ANNOTATIONS.contains(&key.as_str()) && !key.starts_with("x-") {
                        self.verified_only.insert(key.clone());
                    }
                }
                return Ok("pyvalue".into());
            }
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(self.refuse(&format!("{pointer}/type"), "type")),
        };
        let mut alternatives = Vec::new();
        for t in types {
            alternatives.push(self.typed(t, map, pointer)?);
        }
        Ok(if alternatives.len() == 1 {
            alternatives.remove(0)
        } else {
            format!("({})", alternatives.join(" | "))
        })
    }

    fn typed(
        &mut self,
        t: &str,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<String, ToolError> {
        let number = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_u64);
        match t {
            "null" => Ok("\"None\"".into()),
            "boolean" => Ok(r#"("True" | "False")"#.into()),
            "integer" | "number" => {
                for key in [
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "multipleOf",
                ] {
                    if map.contains_key(key) {
                        self.verified_only.insert(key.into());
                    }
                }
                let non_negative = map
                    .get("minimum")
                    .and_then(Value::as_f64)
                    .is_some_and(|m| m >= 0.0);
                let sign = if non_negative { "" } else { "-?" };
                Ok(if t == "integer" {
                    format!("/{sign}(?:0|[1-9][0-9]{{0,17}})/")
                } else {
                    format!("/{sign}(?:0|[1-9][0-9]{{0,17}})(?:\\.[0-9]{{1,17}})?(?:[eE][+-]?[0-9]{{1,3}})?/")
                })
            }
            "string" => {
                if map.contains_key("format") {
                    self.verified_only.insert("format".into());
                }
                if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
                    let anchored = pattern.strip_prefix('^').and_then(|p| p.strip_suffix('$'));
                    // An anchored pattern that cannot match a quote, a backslash or a control
                    // character is exactly the content of the literal.
                    if let Some(inner) = anchored.filter(|p| literal_safe(p)) {
                        if map.contains_key("minLength") || map.contains_key("maxLength") {
                            self.verified_only.insert("minLength/maxLength".into());
                        }
                        return Ok(format!("/\"(?:{})\"/", inner.replace('/', "\\/")));
                    }
                    self.verified_only.insert("pattern".into());
                }
                let min = number(map, "minLength").unwrap_or(0);
                Ok(match number(map, "maxLength") {
                    Some(max) => format!("/\"{STR_CHAR}{{{min},{max}}}\"/"),
                    None if min > 0 => format!("/\"{STR_CHAR}{{{min},}}\"/"),
                    None => "PYSTR".into(),
                })
            }
            "array" => {
                for key in ["uniqueItems", "contains", "minContains", "maxContains"] {
                    if map.contains_key(key) {
                        self.verified_only.insert(key.into());
                    }
                }
                let item = match map.get("items") {
                    Some(items) => self.value(items, &format!("{pointer}/items"))?,
                    None => "pyvalue".into(),
                };
                let min = number(map, "minItems").unwrap_or(0);
                let max = number(map, "maxItems");
                let body = match max {
                    Some(0) => "\"[\" \"]\"".to_owned(),
                    _ => {
                        let rest_min = min.saturating_sub(1);
                        let items = match max {
                            Some(1) => item.clone(),
                            Some(max) => {
                                format!("{item} (\", \" {item}){{{rest_min},{}}}", max - 1)
                            }
                            None => format!("{item} (\", \" {item}){{{rest_min},}}"),
                        };
                        if min == 0 {
                            format!("\"[\" ({items})? \"]\"")
                        } else {
                            format!("\"[\" {items} \"]\"")
                        }
                    }
                };
                Ok(self.rule(body))
            }
            "object" => {
                let Some(properties) = map.get("properties").and_then(Value::as_object) else {
                    return Ok("pydict".into());
                };
                // Only the declared keys are written: the grammar is narrower than a schema that
                // allows more, never wider.
                let required: Vec<&str> =
                    crate::registry::required_names(map.get("required")).collect();
                let mut entries = Vec::new();
                for (name, schema) in properties {
                    let value = self.value(schema, &format!("{pointer}/properties/{name}"))?;
                    entries.push((
                        name.clone(),
                        required.contains(&name.as_str()),
                        format!(
                            "{} \": \" {value}",
                            lark_string(&literal(&Value::String(name.clone())))
                        ),
                    ));
                }
                let body = sequence(&entries);
                Ok(self.rule(format!("\"{{\" {body} \"}}\"")))
            }
            other => Err(self.refuse(&format!("{pointer}/type"), &format!("type {other}"))),
        }
    }
}

/// Whether every string a pattern matches is written verbatim inside a `"..."` literal: no
/// quote, backslash, control character or newline can match. Checked conservatively: only
/// literal characters, classes without negation, and the escapes `\d`, `\w`, `\.`, `\-`.
fn literal_safe(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d' | 'w' | '.' | '-' | '_' | ':' | '/' | '+' | '(' | ')' | '[' | ']') => {}
                _ => return false,
            },
            '"' | '.' => return false,
            '[' if chars.clone().next() == Some('^') => return false,
            c if c.is_control() => return false,
            _ => {}
        }
    }
    true
}

/// Required entries in declared order, then optional ones, each optional, all joined by
/// `", "`. Without a required entry, any declared entries in any order (the parser refuses
/// duplicates; the schema gate checks the rest).
fn sequence(entries: &[(String, bool, String)]) -> String {
    let required: Vec<&str> = entries
        .iter()
        .filter(|e| e.1)
        .map(|e| e.2.as_str())
        .collect();
    let optional: Vec<&str> = entries
        .iter()
        .filter(|e| !e.1)
        .map(|e| e.2.as_str())
        .collect();
    if required.is_empty() {
        if optional.is_empty() {
            return String::new();
        }
        let any = format!("({})", optional.join(" | "));
        return format!("({any} (\", \" {any})*)?");
    }
    let mut out = required.join(" \", \" ");
    for entry in optional {
        out.push_str(&format!(" (\", \" {entry})?"));
    }
    out
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// A Lark string literal for `text`.
fn lark_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

pub(super) fn grammar(
    registry: &Registry,
    options: &GrammarOptions,
) -> Result<CallGrammar, ToolError> {
    let mut rules = Vec::new();
    let mut verified_only = BTreeSet::new();
    let mut call_alternatives = Vec::new();
    for tool in registry.iter() {
        let spec = tool.spec();
        if !options.choice.admits(spec.name()) {
            continue;
        }
        let mut builder = Builder {
            tool: spec.name(),
            rules: Vec::new(),
            verified_only: BTreeSet::new(),
        };
        // The pythonic grammar has no references: non-recursive `$ref`s (Pydantic's nested
        // models) are inlined; a recursive one is refused by name below, as before.
        let inlined = proviso_json::refs::inline_refs(
            spec.parameters(),
            &proviso_json::refs::SchemaLimits::default(),
        );
        let parameters = match &inlined {
            Ok(schema) => schema,
            Err(proviso_json::refs::LimitError::Recursive { pointer, .. }) => {
                return Err(builder.refuse(pointer, "$ref"));
            }
            Err(_) => spec.parameters(),
        };
        for key in parameters
            .as_object()
            .map(|m| m.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            if REFUSED.contains(&key.as_str()) {
                return Err(builder.refuse(&format!("/{key}"), &key));
            }
        }
        let required: Vec<&str> =
            crate::registry::required_names(parameters.get("required")).collect();
        let mut entries = Vec::new();
        if let Some(properties) = parameters.get("properties").and_then(Value::as_object) {
            for (name, schema) in properties {
                if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    || name.starts_with(|c: char| c.is_ascii_digit())
                {
                    return Err(builder.refuse(
                        &format!("/properties/{name}"),
                        "an argument name that is not a Python identifier",
                    ));
                }
                let value = builder.value(schema, &format!("/properties/{name}"))?;
                entries.push((
                    name.clone(),
                    required.contains(&name.as_str()),
                    format!("\"{name}=\" {value}"),
                ));
            }
        }
        let body = sequence(&entries);
        let call = builder.rule(format!("{} \"(\" {body} \")\"", lark_string(spec.name())));
        call_alternatives.push(call);
        rules.extend(builder.rules);
        verified_only.extend(builder.verified_only);
    }
    let mut lark = String::from(super::start_rule(options));
    if options.choice.allows_call() {
        let k = options.max_calls.max(1);
        if k == 1 {
            lark.push_str("calls: \"[\" call \"]\"\n");
        } else {
            lark.push_str(&format!(
                "calls: \"[\" call (\", \" call){{0,{}}} \"]\"\n",
                k - 1
            ));
        }
        lark.push_str(&format!("call: {}\n", call_alternatives.join(" | ")));
        for rule in rules {
            lark.push_str(&rule);
            lark.push('\n');
        }
        lark.push_str(GENERIC);
    }
    if options.choice.allows_text() {
        lark.push_str(&super::text_rule(options, "\\[", None));
    }
    Ok(CallGrammar {
        grammar: Grammar::Lark(lark),
        verified_only: verified_only.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_calls_with_literals() {
        let calls = parse_calls(r#" [get_arm(trial_id="NCT04123456", arm_label='B'), math.sum(numbers=[1, 2.5, -3e2, 0.25], opts={"a": (1, 2)}, flag=True, none=None,)] "#).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_arm");
        assert_eq!(calls[0].arguments["arm_label"], "B");
        assert_eq!(calls[1].name, "math.sum");
        // Numbers keep the literal's text, exactly as written.
        assert_eq!(
            calls[1].arguments["numbers"].to_string(),
            "[1,2.5,-3e+2,0.25]"
        );
        assert_eq!(
            Value::Object(calls[1].arguments.clone())["opts"],
            json!({"a": [1, 2]})
        );
        assert_eq!(calls[1].arguments["flag"], json!(true));
        assert_eq!(calls[1].arguments["none"], json!(null));
    }

    #[test]
    fn keeps_delimiters_inside_strings() {
        let calls = parse_calls(r#"[f(q="a, b; c) ] </tool_call> }\n\"x\"")]"#).unwrap();
        assert_eq!(calls[0].arguments["q"], "a, b; c) ] </tool_call> }\n\"x\"");
    }

    #[test]
    fn keeps_big_integers_exact() {
        let calls = parse_calls("[f(n=123456789012345678901234567890)]").unwrap();
        assert_eq!(
            calls[0].arguments["n"].to_string(),
            "123456789012345678901234567890"
        );
    }

    #[test]
    fn refuses_what_is_not_strict() {
        for (text, code) in [
            ("f(x=1)", "syntax_error"),
            ("[f(1)]", "positional_argument"),
            ("[f(x=1, x=2)]", "duplicate_key"),
            ("[f(x=y)]", "unsupported_literal"),
            ("[f(x=0x10)]", "invalid_number"),
            ("[f(x=01)]", "invalid_number"),
            ("[f(x='''a''')]", "unsupported_literal"),
            ("[f(x='a\\q')]", "invalid_escape"),
            ("[f(x=1)] extra", "trailing_content"),
            ("[f(x=1)", "unexpected_end"),
            ("[]", "empty_call_list"),
            ("[f(x=\"a\nb\")]", "syntax_error"),
        ] {
            assert_eq!(parse_calls(text).unwrap_err().code, code, "{text}");
        }
        let deep = format!("[f(x={}{})]", "[".repeat(100), "]".repeat(100));
        assert_eq!(parse_calls(&deep).unwrap_err().code, "nesting_too_deep");
    }

    #[test]
    fn literal_round_trips() {
        let value = json!({"s": "a\"b\\c\nd", "n": [1, -2.5, null, true], "o": {"k": false}});
        let text = format!("[f(x={})]", literal(&value));
        assert_eq!(parse_calls(&text).unwrap()[0].arguments["x"], value);
    }
}
