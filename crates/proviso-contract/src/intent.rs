//! Typed, immutable intents: what an accepted model output *is*.
//!
//! An output that passed every gate becomes exactly one of five intents. Fields are private
//! and have no setters: once the gates have disposed, nobody downstream can change what was
//! approved.
//!
//! # Priority rules
//!
//! Free text is never an answer: an answer is an explicit `final_answer` intent, or the whole
//! output of a contract that declares its output to be the answer. When one response carries
//! more than one candidate intent (message text *and* native tool calls), the rules are, in
//! order:
//!
//! 1. A transport outcome (truncated, refused, filtered) outranks any content; no intent is
//!    produced at all.
//! 2. Inside one JSON envelope the `intent` discriminator decides; fields that belong to a
//!    different intent make the output `ambiguous_intent`, rejected, never guessed.
//! 3. Across channels the safest intent wins: `abort` > `clarification` > `tool_request` >
//!    `plan_update` > `final_answer`. So text that carries an answer next to a tool call
//!    yields the tool request (the harness comes back for the answer after the tool ran), and
//!    an abort next to a tool call yields the abort, so no side effect runs.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::code::Code;
use crate::rejection::{Location, Violation};

/// What a tool does to the world; permissions and budgets key on it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum IntentClass {
    /// Reads state; no side effect.
    Read,
    /// Computes from its arguments; no side effect.
    Compute,
    /// Changes state.
    Mutate,
    /// Sends something outside the system (an order, an e-mail, a filing).
    Submit,
}

impl IntentClass {
    /// Parses `read`, `compute`, `mutate` or `submit`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(Self::Read),
            "compute" => Some(Self::Compute),
            "mutate" => Some(Self::Mutate),
            "submit" => Some(Self::Submit),
            _ => None,
        }
    }

    /// The class's name as written in declarations.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Compute => "compute",
            Self::Mutate => "mutate",
            Self::Submit => "submit",
        }
    }
}

/// One call of a declared tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    name: String,
    arguments: Arc<Map<String, Value>>,
    intent_class: IntentClass,
}

impl ToolCall {
    /// A call; only the gates construct these for model output.
    #[must_use]
    pub fn new(
        id: Option<String>,
        name: String,
        arguments: Map<String, Value>,
        intent_class: IntentClass,
    ) -> Self {
        Self {
            id,
            name,
            arguments: Arc::new(arguments),
            intent_class,
        }
    }

    /// The provider's call id, if any.
    #[must_use]
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The declared tool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The validated arguments.
    #[must_use]
    pub fn arguments(&self) -> &Map<String, Value> {
        &self.arguments
    }

    /// The tool's intent class.
    #[must_use]
    pub fn intent_class(&self) -> IntentClass {
        self.intent_class
    }
}

/// The five intents.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "intent", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Intent {
    /// The agent believes the task is complete.
    FinalAnswer {
        /// The answer, valid under the contract's answer schema.
        answer: Arc<Value>,
        /// Free reasoning the model wrote first, kept for audit, never executed.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// The agent wants the harness to run one or more tools.
    ToolRequest {
        /// The calls, in order (more than one when the format allows parallel calls).
        calls: Vec<ToolCall>,
        /// Optional rationale, for debugging and audit only.
        #[serde(skip_serializing_if = "Option::is_none")]
        rationale: Option<String>,
    },
    /// The agent needs more information from the user.
    Clarification {
        /// The question to ask.
        question: String,
        /// Free reasoning.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// The agent revises its plan.
    PlanUpdate {
        /// The new steps.
        plan: Vec<String>,
        /// Free reasoning.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// The agent cannot or should not continue.
    Abort {
        /// Why.
        reason: String,
        /// Free reasoning.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
}

impl Intent {
    /// The intent's name as written in envelopes and verdicts.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::FinalAnswer { .. } => "final_answer",
            Self::ToolRequest { .. } => "tool_request",
            Self::Clarification { .. } => "clarification",
            Self::PlanUpdate { .. } => "plan_update",
            Self::Abort { .. } => "abort",
        }
    }

    /// Rank under rule 3 of the priority rules (higher wins).
    fn rank(&self) -> u8 {
        match self {
            Self::Abort { .. } => 4,
            Self::Clarification { .. } => 3,
            Self::ToolRequest { .. } => 2,
            Self::PlanUpdate { .. } => 1,
            Self::FinalAnswer { .. } => 0,
        }
    }

    /// The answer, for a final answer.
    #[must_use]
    pub fn answer(&self) -> Option<&Value> {
        match self {
            Self::FinalAnswer { answer, .. } => Some(answer),
            _ => None,
        }
    }

    /// The calls, for a tool request.
    #[must_use]
    pub fn calls(&self) -> &[ToolCall] {
        match self {
            Self::ToolRequest { calls, .. } => calls,
            _ => &[],
        }
    }
}

/// Applies priority rule 3 to intents found in different channels of one response.
/// Returns `None` only for an empty list.
#[must_use]
pub fn resolve(candidates: Vec<Intent>) -> Option<Intent> {
    let mut best: Option<Intent> = None;
    for candidate in candidates {
        best = match best {
            Some(b) if b.rank() >= candidate.rank() => Some(merge(b, candidate)),
            Some(b) => Some(merge(candidate, b)),
            None => Some(candidate),
        };
    }
    best
}

/// Keeps `winner`; a losing answer's text becomes a tool request's rationale, so nothing the
/// model wrote is lost from the record.
fn merge(winner: Intent, loser: Intent) -> Intent {
    match (winner, loser) {
        (
            Intent::ToolRequest {
                mut calls,
                rationale,
            },
            Intent::ToolRequest {
                calls: more,
                rationale: other,
            },
        ) => {
            calls.extend(more);
            Intent::ToolRequest {
                calls,
                rationale: rationale.or(other),
            }
        }
        (Intent::ToolRequest { calls, rationale }, Intent::FinalAnswer { answer, .. }) => {
            Intent::ToolRequest {
                calls,
                rationale: rationale.or_else(|| match answer.as_ref() {
                    Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                }),
            }
        }
        (winner, _) => winner,
    }
}

/// The fields each intent of the proviso envelope may carry besides `intent` and `reasoning`.
const FIELDS: &[(&str, &[&str])] = &[
    ("final_answer", &["answer"]),
    ("tool_request", &["tool", "arguments", "calls"]),
    ("clarification", &["question"]),
    ("plan_update", &["plan"]),
    ("abort", &["reason"]),
];

/// Reads the proviso intent envelope
/// (`{"reasoning": "...", "intent": "tool_request", "tool": "...", "arguments": {...}}`).
/// Tool calls come back with `intent_class` from `class_of`; `None` from it means the tool is
/// not declared.
///
/// # Errors
///
/// A [`Violation`] with code `missing_intent`, `unknown_intent`, `ambiguous_intent`,
/// `malformed_intent` or `unknown_tool`.
pub fn from_envelope(
    value: &Value,
    class_of: &dyn Fn(&str) -> Option<IntentClass>,
) -> Result<Intent, Violation> {
    let fail = |code: Code, message: String, path: &str| Violation {
        code,
        keyword: None,
        message,
        location: Location::instance(path),
    };
    let Some(object) = value.as_object() else {
        return Err(fail(
            Code::MissingIntent,
            "the output is not an intent envelope object".into(),
            "",
        ));
    };
    let Some(kind) = object.get("intent") else {
        return Err(fail(
            Code::MissingIntent,
            "the output names no `intent`; free text or a bare object is never taken as an answer"
                .into(),
            "",
        ));
    };
    let Some(kind) = kind.as_str() else {
        return Err(fail(
            Code::AmbiguousIntent,
            "`intent` must be exactly one intent name".into(),
            "/intent",
        ));
    };
    let Some((_, own)) = FIELDS.iter().find(|(name, _)| *name == kind) else {
        return Err(fail(
            Code::UnknownIntent,
            format!("`{kind}` is not one of final_answer, tool_request, clarification, plan_update, abort"),
            "/intent",
        ));
    };
    for key in object.keys() {
        if key == "intent" || key == "reasoning" || own.contains(&key.as_str()) {
            continue;
        }
        if let Some((other, _)) = FIELDS.iter().find(|(_, f)| f.contains(&key.as_str())) {
            return Err(fail(
                Code::AmbiguousIntent,
                format!("a `{kind}` intent also carries `{key}`, which belongs to `{other}`"),
                &format!("/{key}"),
            ));
        }
    }
    let reasoning = object
        .get("reasoning")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let text = |name: &str| -> Result<String, Violation> {
        object
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| {
                fail(
                    Code::MalformedIntent,
                    format!("a `{kind}` intent needs a string `{name}`"),
                    &format!("/{name}"),
                )
            })
    };
    match kind {
        "final_answer" => match object.get("answer") {
            Some(answer) => Ok(Intent::FinalAnswer {
                answer: Arc::new(answer.clone()),
                reasoning,
            }),
            None => Err(fail(
                Code::MalformedIntent,
                "a `final_answer` intent needs `answer`".into(),
                "/answer",
            )),
        },
        "clarification" => Ok(Intent::Clarification {
            question: text("question")?,
            reasoning,
        }),
        "abort" => Ok(Intent::Abort {
            reason: text("reason")?,
            reasoning,
        }),
        "plan_update" => {
            let plan = object
                .get("plan")
                .and_then(Value::as_array)
                .and_then(|steps| {
                    steps
                        .iter()
                        .map(|s| s.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| {
                    fail(
                        Code::MalformedIntent,
                        "a `plan_update` intent needs `plan`, an array of strings".into(),
                        "/plan",
                    )
                })?;
            Ok(Intent::PlanUpdate { plan, reasoning })
        }
        _ => {
            let calls: Vec<(String, &Value)> = match (object.get("calls"), object.get("tool")) {
                (Some(Value::Array(calls)), None) => calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| (format!("/calls/{i}"), call))
                    .collect(),
                (None, Some(_)) => vec![(String::new(), value)],
                _ => {
                    return Err(fail(
                        Code::MalformedIntent,
                        "a `tool_request` needs either `tool` and `arguments`, or `calls`".into(),
                        "",
                    ))
                }
            };
            let calls = calls
                .into_iter()
                .map(|(base, call)| {
                    let name = call.get("tool").and_then(Value::as_str).ok_or_else(|| {
                        fail(
                            Code::MalformedIntent,
                            "a tool call needs a string `tool`".into(),
                            &format!("{base}/tool"),
                        )
                    })?;
                    let arguments = call
                        .get("arguments")
                        .and_then(Value::as_object)
                        .ok_or_else(|| {
                            fail(
                                Code::MalformedIntent,
                                "a tool call needs an object `arguments`".into(),
                                &format!("{base}/arguments"),
                            )
                        })?;
                    let class = class_of(name).ok_or_else(|| {
                        fail(
                            Code::UnknownTool,
                            format!("`{name}` is not a declared tool"),
                            &format!("{base}/tool"),
                        )
                    })?;
                    Ok(ToolCall::new(
                        None,
                        name.to_owned(),
                        arguments.clone(),
                        class,
                    ))
                })
                .collect::<Result<Vec<_>, Violation>>()?;
            Ok(Intent::ToolRequest {
                calls,
                rationale: reasoning,
            })
        }
    }
}
