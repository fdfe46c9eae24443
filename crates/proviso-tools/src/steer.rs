//! Steering from what already ran: one policy for an agent run in the harness and for a
//! conversation the server receives.
//!
//! A small model repeats itself: given a tool's result, it writes the same call again. Both
//! the harness (which executes calls and knows what ran) and the server (which receives
//! every earlier call and its result in the conversation) narrow the next step from that
//! history with the code here:
//!
//! - [`without_calls`] takes calls that already ran out of the grammar where the grammar can
//!   say so, and otherwise returns them as text for the decoder to avoid;
//! - [`History::read`] reads a chat conversation into the calls made since the last user
//!   turn, their results, whether each failed, and how many tool rounds passed;
//! - [`plan`] decides the next response from a [`History`]: answer (after a round whose
//!   results all came back, or once the round limit is reached), or call again with the
//!   repeats, and tools that failed twice, out of the choice.
//!
//! The gates still judge everything: steering makes the useful move the reachable one.

use std::collections::BTreeSet;

pub use proviso_contract::lexicon::locators;
use proviso_contract::lexicon::{content_words, is_function_word};
use proviso_contract::{Message, Role};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::{finite_arguments, CallFormat, Registry, ToolChoice};

/// Most argument objects a tool may admit for its calls to be enumerated in the grammar.
pub const FINITE_LIMIT: usize = 300;

/// A registry narrowed by calls that already ran.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Narrowed {
    /// The registry: a tool whose argument objects are few is held to those that have not
    /// run; a tool with none left is gone.
    pub registry: Registry,
    /// Calls the grammar could not exclude, as the text the decoder must not complete.
    pub avoid: Vec<String>,
    /// Calls taken out of the grammar, as `tool {arguments}`.
    pub excluded: Vec<String>,
    /// Tools taken out because every call they admit already ran.
    pub exhausted: Vec<String>,
    /// Calls passed to the decoder to avoid, as `tool {arguments}`.
    pub avoided: Vec<String>,
}

/// A call as traces and steering reports name it: `tool {arguments}`.
#[must_use]
pub fn describe(name: &str, arguments: &Map<String, Value>) -> String {
    format!("{name} {}", Value::Object(arguments.clone()))
}

/// Narrows `registry` by the calls in `ran` (tool name and arguments): what already ran
/// cannot be written again where the grammar can say so, and is avoided where it cannot.
#[must_use]
pub fn without_calls(
    registry: &Registry,
    format: CallFormat,
    ran: &[(&str, &Map<String, Value>)],
) -> Narrowed {
    let mut out = Narrowed {
        registry: Registry::default(),
        avoid: Vec::new(),
        excluded: Vec::new(),
        exhausted: Vec::new(),
        avoided: Vec::new(),
    };
    let mut specs = Vec::new();
    for tool in registry.iter() {
        let spec = tool.spec();
        let calls: Vec<&Map<String, Value>> = ran
            .iter()
            .filter(|(name, _)| *name == spec.name())
            .map(|(_, arguments)| *arguments)
            .collect();
        if calls.is_empty() {
            specs.push(spec.clone());
            continue;
        }
        match finite_arguments(spec.parameters(), FINITE_LIMIT) {
            Some(all) => {
                let left: Vec<&Map<String, Value>> =
                    all.iter().filter(|a| !calls.contains(a)).collect();
                for a in &calls {
                    out.excluded.push(describe(spec.name(), a));
                }
                if left.is_empty() {
                    out.exhausted.push(spec.name().to_owned());
                    continue;
                }
                let variants: Vec<Value> = left
                    .iter()
                    .map(|a| json!({"const": Value::Object((*a).clone())}))
                    .collect();
                specs.push(
                    spec.clone()
                        .with_parameters(json!({"type": "object", "anyOf": variants})),
                );
            }
            None => {
                for a in &calls {
                    out.avoid.push(format.call_text(spec.name(), a));
                    out.avoided.push(describe(spec.name(), a));
                }
                specs.push(spec.clone());
            }
        }
    }
    for list in [
        &mut out.avoid,
        &mut out.avoided,
        &mut out.excluded,
        &mut out.exhausted,
    ] {
        list.sort();
        list.dedup();
    }
    // The narrowed schemas are built from the declared ones; should one fail to register,
    // the declared registry is used and the gates judge a repeat as before.
    out.registry = Registry::new(specs).unwrap_or_else(|_| registry.clone());
    out
}

/// One call a conversation made, with what came back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PastCall {
    /// The tool.
    pub name: String,
    /// Its arguments (a call whose arguments are not a JSON object has none).
    pub arguments: Map<String, Value>,
    /// The tool's result, when the conversation holds it.
    pub result: Option<String>,
    /// Whether the result reports a failure ([`reports_failure`]).
    pub failed: bool,
    /// The tool round it was made in since the last user turn, from 1; 0 for a call made
    /// before it (for an earlier request of the conversation).
    pub round: usize,
}

/// The calls a conversation made, with their results: the run's state, as a client that
/// executes the tools itself sends it back.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct History {
    /// Every call of the conversation, in order.
    pub calls: Vec<PastCall>,
    /// How many assistant turns made calls since the last user turn.
    pub rounds: usize,
}

impl History {
    /// Reads `messages`: the assistant turns that made calls, and the tool turns that
    /// answer them (by call id, or in order when ids are missing). Rounds are counted from
    /// the last user turn: calls made for earlier turns are out of the grammar as repeats,
    /// but do not count towards this turn's rounds.
    #[must_use]
    pub fn read(messages: &[Message]) -> Self {
        let start = messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .map_or(0, |i| i + 1);
        let mut history = Self::default();
        // Per call: its index in `calls` and its id, to match results.
        let mut ids: Vec<(usize, String)> = Vec::new();
        for (at, message) in messages.iter().enumerate() {
            match message.role {
                Role::Assistant if !message.tool_calls.is_empty() => {
                    let round = if at >= start {
                        history.rounds += 1;
                        history.rounds
                    } else {
                        0
                    };
                    for call in &message.tool_calls {
                        let arguments = serde_json::from_str::<Value>(&call.arguments)
                            .ok()
                            .and_then(|v| match v {
                                Value::Object(map) => Some(map),
                                _ => None,
                            })
                            .unwrap_or_default();
                        ids.push((history.calls.len(), call.id.clone()));
                        history.calls.push(PastCall {
                            name: call.name.clone(),
                            arguments,
                            result: None,
                            failed: false,
                            round,
                        });
                    }
                }
                Role::Tool => {
                    let by_id = message
                        .tool_call_id
                        .as_deref()
                        .filter(|id| !id.is_empty())
                        .and_then(|id| ids.iter().find(|(_, c)| c == id))
                        .map(|(i, _)| *i);
                    // Without a matching id, the first call still waiting for its result.
                    let index = by_id.or_else(|| {
                        ids.iter()
                            .map(|(i, _)| *i)
                            .find(|i| history.calls[*i].result.is_none())
                    });
                    if let Some(i) = index {
                        let call = &mut history.calls[i];
                        call.failed = reports_failure(&message.content);
                        call.result = Some(message.content.clone());
                    }
                }
                _ => {}
            }
        }
        history
    }

    /// The calls of this turn's last round (none before its first).
    fn last_round(&self) -> impl Iterator<Item = &PastCall> {
        self.calls
            .iter()
            .filter(move |c| self.rounds > 0 && c.round == self.rounds)
    }

    /// Whether a call was made since the last user turn.
    #[must_use]
    pub fn called_this_turn(&self) -> bool {
        self.rounds > 0
    }
}

/// Whether a tool result reports a failure rather than a result: an object with an `error`
/// member, or text that opens by saying an error occurred (as agent frameworks write a
/// tool's exception or a validation failure back to the model).
#[must_use]
pub fn reports_failure(result: &str) -> bool {
    let trimmed = result.trim_start();
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed) {
        return object
            .get("error")
            .is_some_and(|e| !e.is_null() && e != &Value::Bool(false))
            || object.get("is_error") == Some(&Value::Bool(true))
            || object.get("isError") == Some(&Value::Bool(true));
    }
    let head: String = trimmed.chars().take(160).collect::<String>().to_lowercase();
    const OPENINGS: [&str; 5] = ["error", "exception", "traceback", "failed", "failure"];
    const PHRASES: [&str; 4] = [
        "an error occurred",
        "fix the errors and try again",
        "validation error",
        "unknown tool",
    ];
    OPENINGS.iter().any(|o| head.starts_with(o)) || PHRASES.iter().any(|p| head.contains(p))
}

/// How the next response is steered from a conversation's history.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// After this many tool rounds since the last user turn, the next response answers.
    pub max_tool_rounds: usize,
    /// After a round whose calls all returned a result that is not a failure, the next
    /// response answers (under `auto`) or calls another tool (under `required`).
    pub answer_after_results: bool,
    /// How many failed results a tool may have before it leaves the choice: a failed call
    /// may be retried, with changed arguments, this many times minus one.
    pub max_failures: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tool_rounds: 4,
            answer_after_results: true,
            max_failures: 2,
        }
    }
}

impl Limits {
    /// Sets [`Limits::max_tool_rounds`].
    #[must_use]
    pub fn max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds;
        self
    }

    /// Sets [`Limits::answer_after_results`].
    #[must_use]
    pub fn answer_after_results(mut self, on: bool) -> Self {
        self.answer_after_results = on;
        self
    }
}

/// Why the next response answers instead of calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AnswerCause {
    /// Every call of the last round returned a result.
    Results,
    /// The tool-round limit was reached.
    Rounds,
    /// Every call the tools admit already ran, or failed too often.
    ToolsExhausted,
}

impl AnswerCause {
    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Results => "results",
            Self::Rounds => "rounds",
            Self::ToolsExhausted => "tools_exhausted",
        }
    }
}

/// The next response's tool choice and registry, derived from a conversation's history.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Plan {
    /// The tool choice to generate under.
    pub choice: ToolChoice,
    /// The registry to generate and judge under (the declared one narrowed).
    pub registry: Registry,
    /// Calls the decoder must not complete (the grammar could not exclude them).
    pub avoid: Vec<String>,
    /// What was decided, for the response and the log.
    pub report: Report,
}

/// What steering decided for one response, as the server reports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// `answer`, or `call` (with repeats out of the choice).
    pub decision: &'static str,
    /// Why the response answers, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<AnswerCause>,
    /// Tool rounds since the last user turn.
    pub rounds: usize,
    /// Calls since the last user turn.
    pub calls: usize,
    /// Calls whose result reported a failure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// Calls taken out of the grammar.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
    /// Calls the decoder was told to avoid.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub avoided: Vec<String>,
    /// Tools taken out of the choice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools_out: Vec<String>,
    /// Under `required` before any call: a call whose arguments the conversation cannot
    /// trace is written again on the other tools ([`first_call`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retarget: bool,
}

impl Report {
    /// One line for a header or a log: `answer; cause=results; rounds=1; calls=1`.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut parts = vec![self.decision.to_owned()];
        if let Some(cause) = self.cause {
            parts.push(format!("cause={}", cause.as_str()));
        }
        parts.push(format!("rounds={}", self.rounds));
        parts.push(format!("calls={}", self.calls));
        let repeats = self.excluded.len() + self.avoided.len();
        if repeats > 0 {
            parts.push(format!("repeats_out={repeats}"));
        }
        if !self.tools_out.is_empty() {
            parts.push(format!("tools_out={}", self.tools_out.join(",")));
        }
        if self.retarget {
            parts.push("retarget=untraceable".into());
        }
        parts.join("; ")
    }
}

/// Before any call of this turn, under `required` with several tools: whether a call the
/// conversation cannot trace should be written again on the other tools. An agent's output
/// tool (pydantic-ai's `final_result`) written first, with invented values, is the lookup
/// skipped; a call whose values the conversation states is kept as written.
#[must_use]
pub fn first_call(registry: &Registry, choice: &ToolChoice, history: &History) -> Option<Report> {
    (*choice == ToolChoice::Required && registry.len() > 1 && !history.called_this_turn()).then(
        || Report {
            decision: "call",
            retarget: true,
            ..Report::default()
        },
    )
}

/// Decides the next response from `history`: `None` when nothing ran since the last user
/// turn, or the client named the tool to call (its choice is kept as sent).
///
/// Under `auto`, after a round whose results all came back (and under any choice once the
/// round limit is reached, or when nothing is left to call), the response answers: in text,
/// or in the requested response format. Under `required` the client wants a call: tools
/// that already returned a result leave the choice while another remains (an agent's output
/// tool, typically). Otherwise calls that already ran are out of the grammar, and a tool
/// whose results failed `max_failures` times leaves the choice.
#[must_use]
pub fn plan(
    registry: &Registry,
    format: CallFormat,
    choice: &ToolChoice,
    history: &History,
    limits: &Limits,
) -> Option<Plan> {
    if history.calls.is_empty() || matches!(choice, ToolChoice::Named(_) | ToolChoice::None) {
        return None;
    }
    let mut report = Report {
        decision: "call",
        rounds: history.rounds,
        calls: history.calls.len(),
        failed: history.calls.iter().any(|c| c.failed),
        ..Report::default()
    };
    let answered = limits.answer_after_results
        && history.called_this_turn()
        && history
            .last_round()
            .all(|c| c.result.is_some() && !c.failed);
    let answer = |mut report: Report, cause: AnswerCause| {
        report.decision = "answer";
        report.cause = Some(cause);
        Some(Plan {
            choice: ToolChoice::None,
            registry: registry.clone(),
            avoid: Vec::new(),
            report,
        })
    };
    let out_of_rounds = history.rounds >= limits.max_tool_rounds;
    if *choice == ToolChoice::Auto && (out_of_rounds || answered) {
        let cause = if answered {
            AnswerCause::Results
        } else {
            AnswerCause::Rounds
        };
        return answer(report, cause);
    }
    // Tools out of the choice: those that failed too often, and under `required`, after a
    // round of results, those that returned one (while another tool remains).
    let mut out: Vec<String> = failing_tools(
        registry,
        history.calls.iter().map(|c| (c.name.as_str(), c.failed)),
        limits.max_failures,
    );
    if *choice == ToolChoice::Required && (answered || out_of_rounds) {
        let returned: Vec<String> = registry
            .names()
            .into_iter()
            .filter(|name| {
                history
                    .calls
                    .iter()
                    .any(|c| c.name == *name && c.result.is_some() && !c.failed)
            })
            .map(str::to_owned)
            .collect();
        if registry
            .names()
            .iter()
            .any(|n| !returned.iter().any(|r| r == n) && !out.iter().any(|o| o == n))
        {
            out.extend(returned);
        }
    }
    out.sort();
    out.dedup();
    let kept: Vec<crate::ToolSpec> = registry
        .iter()
        .filter(|t| !out.iter().any(|o| o == t.spec().name()))
        .map(|t| t.spec().clone())
        .collect();
    let kept = Registry::new(kept).unwrap_or_else(|_| registry.clone());
    let ran: Vec<(&str, &Map<String, Value>)> = history
        .calls
        .iter()
        .map(|c| (c.name.as_str(), &c.arguments))
        .collect();
    let narrowed = without_calls(&kept, format, &ran);
    report.tools_out = out;
    report.tools_out.extend(narrowed.exhausted.iter().cloned());
    report.excluded = narrowed.excluded;
    report.avoided = narrowed.avoided;
    if narrowed.registry.is_empty() {
        // Nothing is left to call: under `auto` the response answers; under `required` the
        // declared tools stay (the client demands a call), with the repeats avoided.
        if *choice == ToolChoice::Auto {
            return answer(report, AnswerCause::ToolsExhausted);
        }
        let all = without_calls(registry, format, &ran);
        report.tools_out.clear();
        return Some(Plan {
            choice: choice.clone(),
            registry: registry.clone(),
            avoid: all.avoid,
            report,
        });
    }
    Some(Plan {
        choice: choice.clone(),
        registry: narrowed.registry,
        avoid: narrowed.avoid,
        report,
    })
}

/// `text` with the regular-expression metacharacters escaped.
#[must_use]
pub fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A pattern for a short free-text value (a search query, a city) made of the content
/// words of `text`, at most `max_words` of them, separated by spaces: the value can only
/// name what the conversation named.
#[must_use]
pub fn words_pattern(text: &str, max_words: usize) -> Option<String> {
    // Content words only, in the text's order, each at most once: a function word is
    // never what a lookup needs, and a small model left free writes `the the the` or
    // `adverse adverse adverse`.
    let mut seen = BTreeSet::new();
    let content: Vec<String> = content_words(text)
        .into_iter()
        .filter(|w| seen.insert(w.to_lowercase()))
        .map(|w| {
            let lower = w.to_lowercase();
            if lower == w {
                regex_escape(w)
            } else {
                format!("(?:{}|{})", regex_escape(w), regex_escape(&lower))
            }
        })
        .collect();
    if content.is_empty() {
        return None;
    }
    // A value is a run of these words in order, some skipped: one alternative per first
    // word, each later word optional (quadratic in the words, never exponential).
    let starts: Vec<String> = (0..content.len())
        .map(|first| {
            let rest: String = content[first + 1..]
                .iter()
                .take(max_words.saturating_sub(1))
                .map(|w| format!("(?: {w})?"))
                .collect();
            format!("{}{rest}", content[first])
        })
        .collect();
    Some(format!("^(?:{})$", starts.join("|")))
}

/// Whether a property schema is free text: a string with no `enum`, `const`, `pattern` or
/// `format`.
#[must_use]
pub fn is_free_text(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("string")
        && ["enum", "const", "pattern", "format"]
            .iter()
            .all(|k| schema.get(k).is_none())
}

/// The tools of `registry` whose calls failed at least `max_failures` times among `calls`
/// (each a tool name and whether its result reported a failure): they leave the choice,
/// so a run does not spend its budget retrying a tool with other knobs.
#[must_use]
pub fn failing_tools<'a>(
    registry: &Registry,
    calls: impl Iterator<Item = (&'a str, bool)>,
    max_failures: usize,
) -> Vec<String> {
    let mut failures: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (name, failed) in calls {
        if failed {
            *failures.entry(name).or_default() += 1;
        }
    }
    registry
        .names()
        .into_iter()
        .filter(|name| failures.get(name).is_some_and(|n| *n >= max_failures))
        .map(str::to_owned)
        .collect()
}

/// Words that name an argument holding a locator: a path, a file name, a URI.
const LOCATOR_WORDS: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "filepath",
    "uri",
    "url",
    "dir",
    "directory",
    "folder",
    "location",
    "href",
    "link",
];

/// Whether the argument `name` holds a locator (a path, a file name, a URI), by the words
/// of its name: such an argument takes a token the conversation wrote, never a query.
#[must_use]
pub fn is_locator(name: &str) -> bool {
    proviso_contract::lexicon::name_words(name)
        .iter()
        .any(|w| LOCATOR_WORDS.contains(&w.as_str()))
}

/// Holds a tool's arguments object, in the grammar, to the properties it declares
/// (`additionalProperties: false` where the schema leaves it open): a small model adds
/// keys of its own otherwise. Only the grammar is narrowed; the gates check the declared
/// schema, which the narrowed one is a subset of. Returns whether anything changed.
pub fn declared_only(parameters: &mut Value) -> bool {
    let Some(map) = parameters.as_object_mut() else {
        return false;
    };
    let open = map.get("additionalProperties").is_none()
        && map.get("patternProperties").is_none()
        && map.get("unevaluatedProperties").is_none();
    // Declared properties, even none (`"properties": {}` is a tool without arguments); a
    // schema without `properties` declares nothing and is left as it is.
    let has_properties = map.get("properties").is_some_and(Value::is_object);
    if open && has_properties {
        map.insert("additionalProperties".into(), Value::Bool(false));
        return true;
    }
    false
}

/// The names a parameters schema lists under `required`.
fn required(parameters: &Value) -> Vec<String> {
    parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Takes out of the grammar the optional number, integer and boolean arguments the request
/// gives no value for: a number is kept when the request states one, and any of them when
/// the request names it (a stem of its name). A small model otherwise fills optional knobs
/// (`head: 1, tail: 1`) that the request never asked for, and the call fails or means
/// something else. Only the grammar is narrowed; the gates check the declared schema.
/// Returns whether anything changed.
pub fn unasked_options(parameters: &mut Value, asked: &str) -> bool {
    use proviso_contract::lexicon::{content_stems, name_words, stem};
    let required = required(parameters);
    let stems: BTreeSet<String> = content_stems(asked).into_iter().collect();
    // The one number reader: the digits of a name, a path or a date state no amount.
    let states_number = !proviso_contract::lexicon::amounts(asked).is_empty();
    let Some(Value::Object(properties)) = parameters.get_mut("properties") else {
        return false;
    };
    let before = properties.len();
    properties.retain(|name, schema| {
        if required.contains(name) {
            return true;
        }
        let kind = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let named = name_words(name).iter().any(|w| stems.contains(&stem(w)));
        match kind {
            "number" | "integer" => named || states_number,
            "boolean" => named,
            _ => true,
        }
    });
    properties.len() != before
}

/// A tool's parameters narrowed, in the grammar, to what the conversation supports: the
/// object closed to its declared properties ([`declared_only`]), optional knobs the request
/// gives no value for left out ([`unasked_options`]), and each free-text locator argument
/// (a path, a file name, a URI: [`is_locator`]) held to the locators the conversation
/// wrote (`located`), when it wrote any. Returns whether anything changed. One policy for
/// the harness and the server.
pub fn narrow_parameters(parameters: &mut Value, asked: &str, located: &[String]) -> bool {
    let mut changed = declared_only(parameters);
    changed |= unasked_options(parameters, asked);
    if located.is_empty() {
        return changed;
    }
    if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !is_locator(name) {
                continue;
            }
            // A locator, or a list of them (`paths` of a tool that reads several files).
            let target = if is_free_text(property) {
                Some(property)
            } else if property.get("type").and_then(Value::as_str) == Some("array") {
                property
                    .get_mut("items")
                    .filter(|items| is_free_text(items))
            } else {
                None
            };
            if let Some(map) = target.and_then(Value::as_object_mut) {
                map.remove("minLength");
                map.remove("maxLength");
                map.insert("enum".into(), json!(located));
                changed = true;
            }
        }
    }
    changed
}

/// [`narrow_parameters`] over every tool of `registry`, for a conversation whose requests
/// are `asked` and whose turns (requests and results) are `seen`; `None` when nothing
/// changes. Only the grammar is narrowed: the gates check the declared schemas.
#[must_use]
pub fn narrow_arguments(registry: &Registry, asked: &str, seen: &[&str]) -> Option<Registry> {
    let mut located: Vec<String> = Vec::new();
    for text in seen {
        for locator in locators(text) {
            if !located.contains(&locator) {
                located.push(locator);
            }
        }
    }
    registry.narrowed(|parameters| narrow_parameters(parameters, asked, &located))
}

/// The tools of `registry` that the question names best, when it has more than
/// `max_tools`: each tool is scored by the question's content stems its name holds (twice)
/// and its description holds (once), and the tools with the top score are kept. `None`
/// when the question names none, or the top tools are all of them: a small model picks
/// poorly among many tools, and the words of a request are the evidence of which it means.
#[must_use]
pub fn named_tools(registry: &Registry, asked: &str, max_tools: usize) -> Option<Registry> {
    use proviso_contract::lexicon::{content_stems, name_words, stem};
    if registry.len() <= max_tools {
        return None;
    }
    let mut question: BTreeSet<String> = content_stems(asked).into_iter().collect();
    // A locator says what it names: a file (it has an extension) or a directory (it ends
    // with a slash).
    for locator in locators(asked) {
        if locator.ends_with('/') {
            question.insert(stem("directory"));
        } else if !locator.contains("://") {
            question.insert(stem("file"));
        }
    }
    // A question asks to know something: among tools it names equally, the reads.
    let asks = asked.trim_end().ends_with('?');
    let scores: Vec<usize> = registry
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let name: BTreeSet<String> = name_words(spec.name())
                .iter()
                .filter(|w| !is_function_word(w))
                .map(|w| stem(w))
                .collect();
            let description: BTreeSet<String> =
                content_stems(spec.description()).into_iter().collect();
            let reads = asks && spec.class() == proviso_contract::IntentClass::Read;
            2 * name.intersection(&question).count()
                + description.intersection(&question).count()
                + usize::from(reads)
        })
        .collect();
    let top = scores.iter().copied().max().unwrap_or(0);
    // Being a read is a tie-break, not a reason on its own.
    if top <= usize::from(asks) {
        return None;
    }
    let kept: Vec<crate::ToolSpec> = registry
        .iter()
        .zip(&scores)
        .filter(|(_, s)| **s == top)
        .map(|(t, _)| t.spec().clone())
        .collect();
    if kept.len() == registry.len() {
        return None;
    }
    Registry::new(kept).ok()
}

/// The registry with each tool's required free-text arguments held to runs of at most
/// `max_words` content words of `asked` (the user's turns): a lookup's values come from the
/// request, as [`crate::provenance::ground_numbers`] holds its numbers. `None` when no
/// argument changes. Only the grammar is narrowed; the gates check the declared schemas.
#[must_use]
pub fn ground_strings(registry: &Registry, asked: &str, max_words: usize) -> Option<Registry> {
    let pattern = words_pattern(asked, max_words)?;
    registry.narrowed(|parameters| {
        let required = required(parameters);
        let Some(properties) = parameters
            .get_mut("properties")
            .and_then(Value::as_object_mut)
        else {
            return false;
        };
        let mut changed = false;
        for name in required {
            if let Some(Value::Object(schema)) = properties.get_mut(&name) {
                if is_free_text(&Value::Object(schema.clone())) {
                    schema.insert("pattern".into(), Value::String(pattern.clone()));
                    changed = true;
                }
            }
        }
        changed
    })
}

#[cfg(test)]
mod locator_tests {
    use super::*;

    #[test]
    fn locators_are_paths_uris_and_file_names() {
        assert_eq!(
            locators(
                "According to /srv/docs/boiler.txt, when? See notes.md or https://x.invalid/a."
            ),
            ["/srv/docs/boiler.txt", "notes.md", "https://x.invalid/a"]
        );
        assert!(locators("It cost 3.50 in 2024. Then e.g. nothing").is_empty());
        assert!(is_locator("path") && is_locator("filePath") && is_locator("source_url"));
        assert!(!is_locator("query") && !is_locator("pathos_level"));
    }

    #[test]
    fn a_locator_and_a_list_of_locators_hold_to_the_ones_named() {
        let mut parameters = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "query": {"type": "string"}}});
        let named = vec!["/srv/docs/boiler.txt".to_owned()];
        assert!(narrow_parameters(
            &mut parameters,
            "Read /srv/docs/boiler.txt",
            &named
        ));
        let properties = &parameters["properties"];
        assert_eq!(properties["path"]["enum"], json!(named));
        assert_eq!(properties["paths"]["items"]["enum"], json!(named));
        assert_eq!(properties["paths"]["minItems"], 1);
        assert!(properties["query"].get("enum").is_none());
    }

    #[test]
    fn unasked_options_leave_the_grammar() {
        let mut parameters = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "head": {"type": "integer"}, "tail": {"type": "number"},
            "recursive": {"type": "boolean"}, "encoding": {"type": "string"}}});
        assert!(unasked_options(
            &mut parameters,
            "Read /srv/run-15430/a.txt"
        ));
        let kept: Vec<&String> = parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(kept, ["path", "encoding"]);
        let mut parameters = json!({"type": "object", "properties": {
            "head": {"type": "integer"}, "recursive": {"type": "boolean"}}});
        assert!(!unasked_options(
            &mut parameters,
            "the first 5 lines, recursively"
        ));
    }

    #[test]
    fn declared_only_closes_open_objects() {
        let mut open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(declared_only(&mut open));
        assert_eq!(open["additionalProperties"], false);
        let mut closed = json!({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}});
        assert!(!declared_only(&mut closed));
        let mut none = json!({"type": "object", "properties": {}});
        assert!(declared_only(&mut none));
        let mut undeclared = json!({"type": "object"});
        assert!(!declared_only(&mut undeclared));
    }

    #[test]
    fn named_tools_keeps_the_tools_a_request_names() {
        let spec = |name: &str, description: &str| {
            crate::ToolSpec::new(
                name,
                description,
                proviso_contract::IntentClass::Read,
                json!({"type": "object"}),
            )
        };
        let registry = Registry::new(vec![
            spec("fs__read_text_file", "Read a file as text."),
            spec("fs__list_directory", "List a directory."),
            spec("fs__search_files", "Search for files by name."),
            spec("fs__get_file_info", "Metadata of a file."),
        ])
        .unwrap();
        let kept = named_tools(&registry, "Read /srv/a.txt: when was it serviced?", 3).unwrap();
        assert_eq!(kept.names(), ["fs__read_text_file"]);
        assert!(named_tools(&registry, "When was the boiler serviced?", 3).is_none());
        assert!(named_tools(&registry, "Read it", 4).is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proviso_contract::{IntentClass, MessageToolCall};

    fn registry() -> Registry {
        Registry::new(vec![
            crate::ToolSpec::new(
                "get_weather",
                "Weather in a city.",
                IntentClass::Read,
                json!({"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"], "additionalProperties": false}),
            ),
            crate::ToolSpec::new(
                "final_result",
                "The answer.",
                IntentClass::Read,
                json!({"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"], "additionalProperties": false}),
            ),
        ])
        .unwrap()
    }

    fn assistant(calls: &[(&str, &str, &str)]) -> Message {
        let mut m = Message::new(Role::Assistant, "");
        m.tool_calls = calls
            .iter()
            .map(|(id, name, arguments)| MessageToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect();
        m
    }

    fn tool(id: &str, content: &str) -> Message {
        let mut m = Message::new(Role::Tool, content);
        m.tool_call_id = Some(id.into());
        m
    }

    /// The plan under `auto` with the default limits.
    fn auto_plan(history: &History) -> Plan {
        plan(
            &registry(),
            CallFormat::Hermes,
            &ToolChoice::Auto,
            history,
            &Limits::default(),
        )
        .unwrap()
    }

    fn conversation(result: &str) -> Vec<Message> {
        vec![
            Message::new(Role::User, "Weather in Paris?"),
            assistant(&[("call_a", "get_weather", r#"{"city":"Paris"}"#)]),
            tool("call_a", result),
        ]
    }

    #[test]
    fn history_counts_rounds_and_results_since_the_last_user_turn() {
        let mut messages = conversation("sunny");
        messages.push(Message::new(Role::User, "And London?"));
        let before = History::read(&messages);
        assert_eq!((before.rounds, before.calls.len()), (0, 1));
        assert!(!before.called_this_turn());
        messages.push(assistant(&[
            ("", "get_weather", r#"{"city":"London"}"#),
            ("", "get_weather", r#"{"city":"Rome"}"#),
        ]));
        messages.push(Message::new(Role::Tool, "rain"));
        let history = History::read(&messages);
        assert_eq!(history.rounds, 1);
        assert_eq!(history.calls.len(), 3);
        // Without ids, results answer calls in order.
        assert_eq!(history.calls[1].result.as_deref(), Some("rain"));
        assert_eq!(history.calls[2].result, None);
        // An earlier turn's call is out of the grammar as a repeat; this turn's answer
        // waits for every result of its last round.
        let p = auto_plan(&history);
        assert_eq!(p.report.decision, "call");
        assert_eq!(p.avoid.len(), 3);
    }

    #[test]
    fn after_results_auto_answers_and_required_calls_another_tool() {
        let history = History::read(&conversation("sunny, 21 C"));
        let r = registry();
        let limits = Limits::default();
        let auto = plan(&r, CallFormat::Hermes, &ToolChoice::Auto, &history, &limits).unwrap();
        assert_eq!(auto.choice, ToolChoice::None);
        assert_eq!(auto.report.cause, Some(AnswerCause::Results));
        assert_eq!(
            auto.report.summary(),
            "answer; cause=results; rounds=1; calls=1"
        );
        let required = plan(
            &r,
            CallFormat::Hermes,
            &ToolChoice::Required,
            &history,
            &limits,
        )
        .unwrap();
        assert_eq!(required.choice, ToolChoice::Required);
        assert_eq!(required.registry.names(), vec!["final_result"]);
        assert_eq!(required.report.tools_out, vec!["get_weather"]);
        // Named and none are the client's decision.
        assert!(plan(
            &r,
            CallFormat::Hermes,
            &ToolChoice::Named("get_weather".into()),
            &history,
            &limits
        )
        .is_none());
    }

    #[test]
    fn a_failed_call_may_be_retried_with_other_arguments_not_repeated() {
        let history = History::read(&conversation("Error: unknown city"));
        assert!(history.calls[0].failed);
        let p = auto_plan(&history);
        assert_eq!(p.choice, ToolChoice::Auto);
        assert_eq!(p.report.decision, "call");
        assert_eq!(p.avoid.len(), 1);
        assert!(p.avoid[0].contains("Paris"));
        // Two failures take the tool out of the choice.
        let mut messages = conversation("Error: unknown city");
        messages.push(assistant(&[(
            "call_b",
            "get_weather",
            r#"{"city":"Pari"}"#,
        )]));
        messages.push(tool("call_b", r#"{"error": "unknown city"}"#));
        let p = auto_plan(&History::read(&messages));
        assert_eq!(p.registry.names(), vec!["final_result"]);
    }

    #[test]
    fn grounded_strings_name_only_what_was_asked() {
        let grounded =
            ground_strings(&registry(), "What is the weather in Paris today?", 3).unwrap();
        let pattern = grounded.get("get_weather").unwrap().spec().parameters()["properties"]
            ["city"]["pattern"]
            .as_str()
            .unwrap()
            .to_owned();
        let re = regex_lite(&pattern);
        assert!(re("Paris"));
        assert!(re("weather Paris"));
        assert!(!re(".256873.1409, "));
        assert!(!re("London"));
        assert_eq!(ground_strings(&registry(), "the of a", 3).map(|_| ()), None);
    }

    /// A whole-match check for the simple patterns `words_pattern` writes.
    fn regex_lite(pattern: &str) -> impl Fn(&str) -> bool {
        let re = regex::Regex::new(pattern).unwrap();
        move |s| re.is_match(s)
    }

    #[test]
    fn the_round_limit_ends_in_an_answer() {
        let mut messages = vec![Message::new(Role::User, "?")];
        for i in 0..4 {
            let id = format!("c{i}");
            let arguments = format!(r#"{{"city":"C{i}"}}"#);
            messages.push(assistant(&[(&id, "get_weather", &arguments)]));
            messages.push(tool(&id, "Error: down"));
        }
        let p = auto_plan(&History::read(&messages));
        assert_eq!(p.report.cause, Some(AnswerCause::Rounds));
    }

    #[test]
    fn failures_are_read_from_objects_and_openings_not_from_mentions() {
        assert!(reports_failure(r#"{"error": "boom"}"#));
        assert!(reports_failure("Error: boom"));
        assert!(reports_failure(
            "An error occurred while running the tool. Please try again."
        ));
        assert!(!reports_failure(r#"{"error": null, "temp": 3}"#));
        assert!(!reports_failure("The error bars are 3%."));
        assert!(!reports_failure("Sunny"));
    }
}
