//! The worked example: a versioned, cited answer contract.
//!
//! `ka-answer-v1` answers questions about a fictional travel policy. Its `status` has four
//! branches: `answered` (a non-empty answer, at least one citation, no reason), and
//! `abstained` (the evidence cannot justify an answer), `refused` (the provider refused) and
//! `error` (the attempt failed technically or broke the contract), which all carry a null
//! answer and amount, no citations and a non-empty `reason_code`. `if/then/else` in the
//! schema ties `status` to those fields.
//!
//! Version 2 stores the amount in fen rather than yuan. The migration is explicit and
//! tested; a consumer never infers the unit from the size of the number, and an unknown
//! `schema_version` is rejected.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::code::Code;
use crate::rejection::{Gate, Rejection};

/// The `ka-answer-v1` schema with its `x-proviso` declaration.
pub const KA_ANSWER_V1: &str = include_str!("../contracts/ka-answer-v1.schema.json");
/// The `ka-answer-v2` schema with its `x-proviso` declaration.
pub const KA_ANSWER_V2: &str = include_str!("../contracts/ka-answer-v2.schema.json");

/// The four branches of the answer contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStatus {
    /// Answered, with citations.
    Answered,
    /// The available evidence cannot justify an answer.
    Abstained,
    /// The provider refused.
    Refused,
    /// The attempt failed technically or broke the contract.
    Error,
}

/// A citation of lines `line_start..=line_end` of a source version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Citation {
    /// The cited source.
    pub source_id: String,
    /// The cited version.
    pub version: String,
    /// First cited line (1-based).
    pub line_start: u64,
    /// Last cited line (inclusive).
    pub line_end: u64,
    /// The exact text of those lines.
    pub quote: String,
}

/// A typed answer, read from an output the contract accepted, in either version.
/// The amount is held in fen whatever the version, so no consumer converts units by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    status: AnswerStatus,
    answer: Option<String>,
    amount_fen: Option<i128>,
    citations: Vec<Citation>,
    reason_code: Option<String>,
}

impl Answer {
    /// Reads an accepted `ka-answer-v1` or `ka-answer-v2` value.
    ///
    /// # Errors
    ///
    /// A schema-gate [`Rejection`] with code `unknown_schema_version` for any other version,
    /// or `type_mismatch` if the value does not have the contract's shape (which cannot happen
    /// for a value the contract accepted).
    pub fn from_value(value: &Value) -> Result<Self, Rejection> {
        let version = value.get("schema_version").and_then(Value::as_str);
        let (amount_field, scale) = match version {
            Some("ka-answer-v1") => ("amount_yuan", 100),
            Some("ka-answer-v2") => ("amount_fen", 1),
            other => {
                return Err(Rejection::new(
                    Gate::Schema,
                    Code::UnknownSchemaVersion,
                    format!("schema_version {other:?} is not ka-answer-v1 or ka-answer-v2"),
                    crate::rejection::Location::instance("/schema_version"),
                ))
            }
        };
        let shape = |what: &str| {
            Rejection::new(
                Gate::Schema,
                Code::TypeMismatch,
                format!("{what} does not have the answer contract's shape"),
                crate::rejection::Location::default(),
            )
        };
        let amount_fen = match value.get(amount_field) {
            Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                proviso_json::exact_integer(n)
                    .and_then(|i| i.0.checked_mul(scale))
                    .ok_or_else(|| shape(amount_field))?,
            ),
            _ => return Err(shape(amount_field)),
        };
        let field = |name: &str| value.get(name).cloned().unwrap_or(Value::Null);
        Ok(Self {
            status: serde_json::from_value(field("status")).map_err(|_| shape("status"))?,
            answer: serde_json::from_value(field("answer")).map_err(|_| shape("answer"))?,
            amount_fen,
            citations: serde_json::from_value(field("citations"))
                .map_err(|_| shape("citations"))?,
            reason_code: serde_json::from_value(field("reason_code"))
                .map_err(|_| shape("reason_code"))?,
        })
    }

    /// The explicit answer for an output that never reached the contract: a provider
    /// refusal becomes `refused`/`provider_refusal`, anything else `error` with the
    /// rejection's code (`incomplete_response` for a truncated output). Nothing is guessed.
    #[must_use]
    pub fn from_rejection(rejection: &Rejection) -> Self {
        let (status, reason) = match rejection.code() {
            Code::Refused => (AnswerStatus::Refused, "provider_refusal".to_owned()),
            code => (AnswerStatus::Error, code.as_str().to_owned()),
        };
        Self {
            status,
            answer: None,
            amount_fen: None,
            citations: Vec::new(),
            reason_code: Some(reason),
        }
    }

    /// The branch.
    #[must_use]
    pub fn status(&self) -> AnswerStatus {
        self.status
    }

    /// The answer text, for `answered`.
    #[must_use]
    pub fn answer(&self) -> Option<&str> {
        self.answer.as_deref()
    }

    /// The amount in fen (1 yuan = 100 fen), when known.
    #[must_use]
    pub fn amount_fen(&self) -> Option<i128> {
        self.amount_fen
    }

    /// The citations.
    #[must_use]
    pub fn citations(&self) -> &[Citation] {
        &self.citations
    }

    /// Why there is no answer, for the other branches.
    #[must_use]
    pub fn reason_code(&self) -> Option<&str> {
        self.reason_code.as_deref()
    }

    /// Serializes as the current version, `ka-answer-v2`.
    #[must_use]
    pub fn to_v2(&self) -> Value {
        serde_json::json!({
            "schema_version": "ka-answer-v2",
            "status": self.status,
            "answer": self.answer,
            "amount_fen": self.amount_fen.and_then(|a| a.to_string().parse::<serde_json::Number>().ok()),
            "citations": self.citations,
            "reason_code": self.reason_code,
        })
    }
}
