//! Stable rejection codes.
//!
//! Every rejection and violation carries a [`Code`]. Callers match on its variants instead of
//! comparing strings, and the enum is `#[non_exhaustive]` so that a new gate check is not a
//! breaking change. On the wire a code is the same snake_case string it has always been
//! (`missing_required`, `incomplete_response`, …), so JSON output does not change.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares the fixed codes once: the variant, its wire string and its documentation. The
/// wire string and the parser are generated from the same list, so they cannot drift apart.
macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident => $text:literal, )*) => {
        /// A stable, machine-readable rejection code.
        ///
        /// Two codes are equal when their wire strings are equal. A contract cannot declare
        /// a built-in code for its own rule ([`Code::declared`] refuses it when the
        /// contract is loaded), so a declared code never equals a built-in one.
        #[derive(Debug, Clone)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
            /// Another JSON Schema keyword failed; the string is `schema_` followed by the
            /// keyword in snake_case (`schema_dependent_required`).
            Keyword(Box<str>),
            /// A code declared by the contract's author (an application rule, an answer's
            /// `reason_code`).
            Declared(Box<str>),
        }

        impl Code {
            /// The code as written in verdicts and on the wire.
            #[must_use]
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $text, )*
                    Self::Keyword(code) | Self::Declared(code) => code,
                }
            }

            /// Reads a code from its wire string. A string proviso does not define is a
            /// [`Code::Keyword`] when it starts with `schema_`, and otherwise
            /// [`Code::Declared`].
            #[must_use]
            pub fn parse(text: &str) -> Self {
                match text {
                    $( $text => Self::$variant, )*
                    other if other.starts_with("schema_") => Self::Keyword(other.into()),
                    other => Self::Declared(other.into()),
                }
            }

            /// A code declared by a contract's author: `None` when `text` is one proviso
            /// defines (or a `schema_` keyword code), which an author may not impersonate.
            #[must_use]
            pub fn declared(text: &str) -> Option<Self> {
                match Self::parse(text) {
                    declared @ Self::Declared(_) => Some(declared),
                    _ => None,
                }
            }

            /// Every fixed code, in declaration order (tests check each round-trips).
            #[must_use]
            pub fn fixed() -> &'static [Code] {
                &[ $( Self::$variant, )* ]
            }
        }
    };
}

codes! {
    // Transport.
    /// The output was cut off by a token limit.
    IncompleteResponse => "incomplete_response",
    /// The decoder stopped an output that degenerated into repetition.
    Repetition => "repetition",
    /// The generation was cancelled by its caller.
    Cancelled => "cancelled",
    /// The provider refused.
    Refused => "refused",
    /// A content filter removed output.
    ContentFiltered => "content_filtered",
    /// The provider reported an error.
    ProviderError => "provider_error",
    /// The envelope holds no stop reason.
    MissingStopReason => "missing_stop_reason",
    /// The stop reason is one proviso does not know.
    UnknownStopReason => "unknown_stop_reason",
    /// The envelope holds more than one choice.
    MultipleChoices => "multiple_choices",
    /// The envelope is not a chat completion or a message.
    MalformedEnvelope => "malformed_envelope",
    /// The response carries neither text nor tool calls.
    MissingContent => "missing_content",
    /// Tool calls arrived where none were offered.
    UnexpectedToolCalls => "unexpected_tool_calls",
    // Strict JSON parsing.
    /// The input is empty.
    EmptyInput => "empty_input",
    /// The input is larger than allowed.
    InputTooLarge => "input_too_large",
    /// The input nests deeper than allowed.
    NestingTooDeep => "nesting_too_deep",
    /// The input is not UTF-8.
    InvalidUtf8 => "invalid_utf8",
    /// The input starts with a byte order mark.
    ByteOrderMark => "byte_order_mark",
    /// The input ends inside a value.
    UnexpectedEnd => "unexpected_end",
    /// A number is not a JSON number.
    InvalidNumber => "invalid_number",
    /// A string holds a lone surrogate escape.
    LoneSurrogate => "lone_surrogate",
    /// An object repeats a key.
    DuplicateKey => "duplicate_key",
    /// More text follows a complete value.
    TrailingContent => "trailing_content",
    /// Anything else that is not JSON.
    SyntaxError => "syntax_error",
    // Call formats and intents.
    /// A call's JSON is not valid.
    InvalidJson => "invalid_json",
    /// A call does not have the format's shape.
    MalformedCall => "malformed_call",
    /// Text follows the calls.
    TrailingText => "trailing_text",
    /// A tool-call tag is closed without being opened.
    UnbalancedToolCall => "unbalanced_tool_call",
    /// A tool-call tag is opened and never closed.
    UnclosedToolCall => "unclosed_tool_call",
    /// A call list holds no call.
    EmptyCallList => "empty_call_list",
    /// A string escape the format does not allow.
    InvalidEscape => "invalid_escape",
    /// A call passes an argument by position.
    PositionalArgument => "positional_argument",
    /// A literal the format does not allow.
    UnsupportedLiteral => "unsupported_literal",
    /// The output names no intent.
    MissingIntent => "missing_intent",
    /// The intent's object does not have the intent's shape.
    MalformedIntent => "malformed_intent",
    /// The output names an intent proviso does not know.
    UnknownIntent => "unknown_intent",
    /// The output could be read as more than one intent.
    AmbiguousIntent => "ambiguous_intent",
    /// The output is not one of the choices the request allowed.
    NotAChoice => "not_a_choice",
    /// The intent is not one the caller accepts here.
    UnsupportedIntent => "unsupported_intent",
    // JSON Schema.
    /// A value has the wrong type.
    TypeMismatch => "type_mismatch",
    /// A required property is missing.
    MissingRequired => "missing_required",
    /// A property the schema does not allow.
    UnexpectedProperty => "unexpected_property",
    /// A value differs from `const`.
    ConstMismatch => "const_mismatch",
    /// A value is not in `enum`.
    NotInEnum => "not_in_enum",
    /// A string does not match `pattern`.
    PatternMismatch => "pattern_mismatch",
    /// A string does not have its `format`.
    FormatMismatch => "format_mismatch",
    /// A number is outside its bounds.
    OutOfRange => "out_of_range",
    /// A string is too short or too long.
    LengthOutOfRange => "length_out_of_range",
    /// An array has too few or too many items.
    ItemCountOutOfRange => "item_count_out_of_range",
    /// The schema is `false` here.
    ForbiddenValue => "forbidden_value",
    /// A call names a tool that is not declared.
    UnknownTool => "unknown_tool",
    /// The answer's `schema_version` is not one the contract knows.
    UnknownSchemaVersion => "unknown_schema_version",
    // Application rules.
    /// An ordering rule failed.
    OutOfOrder => "out_of_order",
    /// A call's intent class differs from its tool's.
    IntentClassMismatch => "intent_class_mismatch",
    /// A step holds more calls than allowed.
    TooManyCallsInStep => "too_many_calls_in_step",
    /// The harness refused a call it already ran with the same arguments.
    RepeatedCall => "repeated_call",
    /// `tool_choice` required a call (`required`, or a named tool) and the output made none.
    MissingToolCall => "missing_tool_call",
    /// `tool_choice` named one tool and the output called another.
    ToolChoiceMismatch => "tool_choice_mismatch",
    /// The output does not match the request's grammar (a Lark grammar re-checked on an
    /// upstream's text).
    GrammarMismatch => "grammar_mismatch",
    // Argument policies.
    /// A number argument is outside the policy's bounds.
    OutOfBounds => "out_of_bounds",
    /// A path argument is not a string.
    PathNotString => "path_not_string",
    /// A path argument leaves its root.
    PathOutsideRoot => "path_outside_root",
    /// An argument does not match the policy's pattern.
    PolicyPatternMismatch => "policy_pattern_mismatch",
    // Permission.
    /// The caller's role may not call the tool.
    PermissionDenied => "permission_denied",
    // Budget.
    /// The run's tool-call budget is spent.
    ToolCallBudgetExhausted => "tool_call_budget_exhausted",
    /// The run's cost budget is spent.
    CostBudgetExhausted => "cost_budget_exhausted",
    /// The run's step budget is spent.
    StepBudgetExhausted => "step_budget_exhausted",
    /// The run's token budget is spent.
    TokenBudgetExhausted => "token_budget_exhausted",
    /// The run's time budget is spent.
    TimeBudgetExhausted => "time_budget_exhausted",
    // Evidence.
    /// A claim is not supported by its citations.
    UnsupportedClaim => "unsupported_claim",
    /// A citation names a source the store does not hold.
    UnknownSource => "unknown_source",
    /// A citation names a version the store does not hold.
    UnknownVersion => "unknown_version",
    /// A citation names a version that is not in force.
    VersionNotInForce => "version_not_in_force",
    /// A citation's lines are outside its document.
    LineRangeOutsideDocument => "line_range_outside_document",
    /// A quotation differs from the cited lines.
    QuoteMismatch => "quote_mismatch",
    /// The cited lines or the answer's text do not answer the question asked (its
    /// subject, its qualifiers, the kind of fact it asks for).
    OffQuestion => "off_question",
    /// A rejection that carried no violation.
    Rejected => "rejected",
}

impl Code {
    /// The code for a failed JSON Schema keyword: a named code for the keywords a model most
    /// often breaks, `schema_<keyword>` for the rest.
    #[must_use]
    pub fn for_keyword(keyword: &str) -> Self {
        match keyword {
            "type" => Self::TypeMismatch,
            "required" => Self::MissingRequired,
            "additionalProperties" | "unevaluatedProperties" => Self::UnexpectedProperty,
            "const" => Self::ConstMismatch,
            "enum" => Self::NotInEnum,
            "pattern" => Self::PatternMismatch,
            "format" => Self::FormatMismatch,
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => Self::OutOfRange,
            "minLength" | "maxLength" => Self::LengthOutOfRange,
            "minItems" | "maxItems" => Self::ItemCountOutOfRange,
            "falseSchema" => Self::ForbiddenValue,
            other => {
                let mut code = String::from("schema_");
                for c in other.chars() {
                    if c.is_ascii_uppercase() {
                        code.push('_');
                        code.push(c.to_ascii_lowercase());
                    } else {
                        code.push(c);
                    }
                }
                Self::Keyword(code.into())
            }
        }
    }
}

impl From<&proviso_json::ParseErrorKind> for Code {
    fn from(kind: &proviso_json::ParseErrorKind) -> Self {
        Self::parse(kind.code())
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Code {}

impl Hash for Code {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Code> for str {
    fn eq(&self, other: &Code) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Code> for &str {
    fn eq(&self, other: &Code) -> bool {
        *self == other.as_str()
    }
}

impl Borrow<str> for Code {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::parse(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    #[test]
    fn every_fixed_code_round_trips_through_its_wire_string() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::fixed() {
            assert!(seen.insert(code.as_str()), "{code} is declared twice");
            assert_eq!(Code::parse(code.as_str()), *code);
            assert!(!matches!(
                Code::parse(code.as_str()),
                Code::Declared(_) | Code::Keyword(_)
            ));
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{code}\""));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), *code);
        }
    }

    #[test]
    fn keywords_map_to_named_codes_or_schema_prefixed_ones() {
        assert_eq!(Code::for_keyword("required"), Code::MissingRequired);
        let other = Code::for_keyword("dependentRequired");
        assert_eq!(other.as_str(), "schema_dependent_required");
        assert!(matches!(
            Code::parse("schema_dependent_required"),
            Code::Keyword(_)
        ));
        assert_eq!(Code::parse("type_mismatch"), Code::TypeMismatch);
        assert!(matches!(
            Code::parse("reversed_line_range"),
            Code::Declared(_)
        ));
        // An author's code may not impersonate a built-in one.
        assert!(Code::declared("reversed_line_range").is_some());
        assert!(Code::declared("type_mismatch").is_none());
        assert!(Code::declared("schema_dependent_required").is_none());
    }
}
