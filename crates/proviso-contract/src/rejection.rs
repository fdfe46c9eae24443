//! Typed rejections: which gate failed, a stable code, a message, and where.

use std::fmt;

use proviso_json::ParseErrorKind;
use serde::Serialize;

use crate::code::Code;

/// The gates a model output passes, in order. A rejection names the first one that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Gate {
    /// The provider's envelope: stop reason, refusal, content filter.
    Transport,
    /// Strict JSON parsing.
    Parse,
    /// JSON Schema 2020-12 validation.
    Schema,
    /// Rules declared with the contract that a schema cannot express.
    Application,
    /// Argument policies (paths, ID patterns, bounds) of a tool call.
    Policy,
    /// Whether the caller may use the tool or intent class.
    Permission,
    /// Step, call, token, time and cost budgets.
    Budget,
    /// Citations and claims checked against a store of source documents.
    Evidence,
}

impl Gate {
    /// The gate's name as written in verdicts.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport",
            Self::Parse => "parse",
            Self::Schema => "schema",
            Self::Application => "application",
            Self::Policy => "policy",
            Self::Permission => "permission",
            Self::Budget => "budget",
            Self::Evidence => "evidence",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the caller should do next. Refusal, truncation and technical error differ here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NextStep {
    /// The output broke the contract: a bounded retry, showing the model this rejection, may
    /// help.
    Retry,
    /// The output was cut short by a token limit: retry with a larger budget, never
    /// complete the fragment.
    RetryWithLargerBudget,
    /// The provider refused or filtered the output: do not retry the same request and do
    /// not treat the refusal as an empty answer.
    Stop,
}

/// Where in the text, the instance and the schema a problem lies. Every part is optional:
/// a transport failure has no schema path, a parse failure has no instance.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[non_exhaustive]
pub struct Location {
    /// 1-based line in the checked text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column (in bytes) in the checked text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// JSON pointer into the instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_path: Option<String>,
    /// JSON pointer to the failing keyword in the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_path: Option<String>,
}

impl Location {
    /// A location at a position in the checked text.
    #[must_use]
    pub fn at(position: proviso_json::Position) -> Self {
        Self {
            line: Some(position.line),
            column: Some(position.column),
            ..Self::default()
        }
    }

    /// A location at a JSON pointer into the instance.
    #[must_use]
    pub fn instance(path: impl Into<String>) -> Self {
        Self {
            instance_path: Some(path.into()),
            ..Self::default()
        }
    }

    /// Adds line and column, found by following the instance path through `text`.
    #[must_use]
    pub fn with_text_position(mut self, text: &[u8]) -> Self {
        if let Some(path) = &self.instance_path {
            if let Some(p) = proviso_json::locate(text, path) {
                self.line = Some(p.line);
                self.column = Some(p.column);
            }
        }
        self
    }
}

/// One problem found by a gate. A schema gate reports every violation, not just the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Stable machine-readable code, e.g. [`Code::MissingRequired`].
    pub code: Code,
    /// The schema keyword or rule that failed, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
    /// Human-readable message.
    pub message: String,
    /// Where.
    #[serde(flatten)]
    pub location: Location,
}

/// A model output that did not pass a gate.
///
/// The first violation gives the rejection its code, message and location; all violations
/// found by the failing gate are kept in [`Rejection::violations`].
///
/// The fields live behind one `Box` so that `Result<_, Rejection>` stays one pointer wide on
/// the accepted path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{} gate: {}: {}", .0.gate, .0.code, .0.message)]
#[serde(transparent)]
pub struct Rejection(Box<RejectionInner>);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct RejectionInner {
    gate: Gate,
    code: Code,
    message: String,
    next_step: NextStep,
    #[serde(flatten)]
    location: Location,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    violations: Vec<Violation>,
    /// The provider's refusal text, for `refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<String>,
}

impl Rejection {
    /// A rejection with one problem.
    #[must_use]
    pub fn new(gate: Gate, code: Code, message: impl Into<String>, location: Location) -> Self {
        Self(Box::new(RejectionInner {
            gate,
            code,
            message: message.into(),
            next_step: NextStep::Retry,
            location,
            violations: Vec::new(),
            refusal: None,
        }))
    }

    /// A rejection carrying every violation a gate found. The first one names the rejection.
    ///
    /// # Panics
    ///
    /// Never: an empty list yields a generic rejection instead.
    #[must_use]
    pub fn from_violations(gate: Gate, violations: Vec<Violation>) -> Self {
        let Some(first) = violations.first() else {
            return Self::new(gate, Code::Rejected, "rejected", Location::default());
        };
        let message = if violations.len() == 1 {
            first.message.clone()
        } else {
            format!(
                "{} (and {} more violation{})",
                first.message,
                violations.len() - 1,
                if violations.len() == 2 { "" } else { "s" }
            )
        };
        let mut rejection = Self::new(gate, first.code.clone(), message, first.location.clone());
        rejection.0.violations = violations;
        rejection
    }

    /// Sets what the caller should do next.
    #[must_use]
    pub fn with_next_step(mut self, next_step: NextStep) -> Self {
        self.0.next_step = next_step;
        self
    }

    /// Adds line and column (from `text`) to the location and to every violation.
    #[must_use]
    pub fn with_text_position(mut self, text: &[u8]) -> Self {
        let inner = &mut *self.0;
        inner.location = std::mem::take(&mut inner.location).with_text_position(text);
        for violation in &mut inner.violations {
            violation.location = std::mem::take(&mut violation.location).with_text_position(text);
        }
        self
    }

    /// Points the rejection at `pointer` in the instance.
    #[must_use]
    pub fn with_instance_path(mut self, pointer: &str) -> Self {
        self.0.location.instance_path = Some(pointer.to_owned());
        self
    }

    pub(crate) fn with_violations(mut self, violations: Vec<Violation>) -> Self {
        self.0.violations = violations;
        self
    }

    pub(crate) fn with_refusal(mut self, refusal: String) -> Self {
        self.0.refusal = Some(refusal);
        self
    }

    /// A parse-gate rejection for a strict-JSON error, with its position (and, for a
    /// duplicated key, both places the key was written).
    #[must_use]
    pub fn from_parse_error(error: &proviso_json::ParseError) -> Self {
        parse_rejection(error)
    }

    /// The first gate that failed.
    #[must_use]
    pub fn gate(&self) -> Gate {
        self.0.gate
    }

    /// Stable machine-readable code.
    #[must_use]
    pub fn code(&self) -> &Code {
        &self.0.code
    }

    /// Human-readable message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// What the caller should do next.
    #[must_use]
    pub fn next_step(&self) -> NextStep {
        self.0.next_step
    }

    /// Where the first problem lies.
    #[must_use]
    pub fn location(&self) -> &Location {
        &self.0.location
    }

    /// Every problem the failing gate found (empty when there was only one).
    #[must_use]
    pub fn violations(&self) -> &[Violation] {
        &self.0.violations
    }

    /// The provider's refusal text, when the provider refused.
    #[must_use]
    pub fn refusal(&self) -> Option<&str> {
        self.0.refusal.as_deref()
    }
}

fn parse_rejection(e: &proviso_json::ParseError) -> Rejection {
    let location = Location::at(e.position());
    match e.kind() {
        // Both places a duplicated key was written are reported, first one first.
        ParseErrorKind::DuplicateKey {
            key,
            pointer,
            first,
        } => {
            let at = |position: proviso_json::Position, which: &str| Violation {
                code: Code::from(e.kind()),
                keyword: None,
                message: format!("{which} occurrence of key {key:?}"),
                location: Location {
                    instance_path: Some(pointer.clone()),
                    ..Location::at(position)
                },
            };
            let location = Location {
                instance_path: Some(pointer.clone()),
                ..location
            };
            Rejection::new(Gate::Parse, Code::from(e.kind()), e.message(), location)
                .with_violations(vec![at(*first, "first"), at(e.position(), "second")])
        }
        _ => Rejection::new(Gate::Parse, Code::from(e.kind()), e.message(), location),
    }
}
