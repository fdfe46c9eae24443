//! Steering: each step's grammar derived from the run's state, not only from the registry.
//!
//! The gates dispose of what the model proposed; steering shapes what it can propose, so that
//! the useful next move is the reachable one. From what the run has seen, the harness
//! narrows the next step's grammar:
//!
//! - a call that already ran is taken out of the grammar where the grammar can say so (a
//!   tool whose possible argument objects are few is held to the ones that have not run, and
//!   leaves the choice when none is left), and is otherwise passed to the decoder as text to
//!   avoid, which masks the token that would complete it;
//! - the step after a rejected one, the last step of the step budget, and the step after an
//!   evidence tool returned a result must finish: a final answer, a clarification or an
//!   abort, never another lookup;
//! - when the answer contract checks evidence, the answer's citations can only be lines
//!   that tools returned in this run (and that the source store holds, in force), quoted
//!   exactly; numbers in the answer can only be numbers those lines state.
//!
//! The gates still judge everything: steering makes the right output likely, the gates make
//! a wrong one unacceptable. A step whose narrowed grammar cannot be built falls back to the
//! agent's base grammar, and the gates decide as before.

use std::collections::BTreeSet;

use proviso_contract::lexicon::{content_stems, content_words};
use proviso_contract::{AnswerKind, Claim, Contract, EvidencePolicy, Question, SourceStore};
use proviso_tools::{finite_arguments, CallFormat, Registry, ToolChoice};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::toolbox::ExecutedCall;
use crate::toolbox::ToolOutcome;

use proviso_tools::steer::{is_free_text, regex_escape, words_pattern, FINITE_LIMIT};
/// Most values a grounded free-text argument is enumerated into (beyond it, a pattern).
const MAX_QUERIES: usize = 255;
/// Most observed lines a step ranks for its answer: every line a run's lookups return,
/// bounded only against a pathological result. The answer grammar offers the best of them
/// ([`rank_citations`]); a bound of a few dozen left the lines of a run's third read
/// unseen once a long document filled it.
const MAX_CANDIDATES: usize = 4096;
/// How near in meaning (the sources' measure, [`SourceStore::nearness`]: a sentence
/// encoder's cosine) a line must be to the question to count as sharing one more of its
/// words ([`rank_citations`]). Chosen on the development sets (0.5 and 0.55 let in lines
/// that answer something else; 0.6 let in none).
const NEAR: f32 = 0.6;

/// How the harness narrows each step's grammar from the run's state. Every rule is on by
/// default except `evidence_tools`, which names the agent's own tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Steering {
    /// Take calls that already ran (same tool, same arguments) out of the next steps.
    pub exclude_repeated_calls: bool,
    /// After a rejected step, the next step must finish (answer, clarify or abort).
    pub finish_after_rejection: bool,
    /// The last step of the step budget must finish.
    pub finish_on_last_step: bool,
    /// Once one of these tools returned a result, the next step must finish.
    pub evidence_tools: Vec<String>,
    /// Tools that read a whole source by its id (a document, a record). When the lines
    /// seen do not answer the question, the next step reads the first source the results
    /// named that is about the question's subject and has not been read.
    pub read_tools: Vec<String>,
    /// When the answer contract checks evidence, build the answer grammar from the lines
    /// tools returned in this run.
    pub ground_answers: bool,
    /// Hold free-text tool arguments (strings without `enum`, `const`, `pattern` or
    /// `format`, such as a search query) to the words of the question. Off by default: it
    /// suits lookups, not tools that write new text.
    pub ground_arguments: bool,
}

impl Default for Steering {
    fn default() -> Self {
        Self {
            exclude_repeated_calls: true,
            finish_after_rejection: true,
            finish_on_last_step: true,
            evidence_tools: Vec::new(),
            read_tools: Vec::new(),
            ground_answers: true,
            ground_arguments: false,
        }
    }
}

impl Steering {
    /// No steering: every step is generated under the agent's base grammar.
    #[must_use]
    pub fn off() -> Self {
        Self {
            exclude_repeated_calls: false,
            finish_after_rejection: false,
            finish_on_last_step: false,
            evidence_tools: Vec::new(),
            read_tools: Vec::new(),
            ground_answers: false,
            ground_arguments: false,
        }
    }

    /// Sets [`Steering::ground_arguments`].
    #[must_use]
    pub fn ground_arguments(mut self, on: bool) -> Self {
        self.ground_arguments = on;
        self
    }

    /// Sets [`Steering::evidence_tools`].
    #[must_use]
    pub fn evidence_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.evidence_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`Steering::read_tools`].
    #[must_use]
    pub fn read_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.read_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`Steering::exclude_repeated_calls`].
    #[must_use]
    pub fn exclude_repeated_calls(mut self, on: bool) -> Self {
        self.exclude_repeated_calls = on;
        self
    }

    /// Sets [`Steering::finish_after_rejection`].
    #[must_use]
    pub fn finish_after_rejection(mut self, on: bool) -> Self {
        self.finish_after_rejection = on;
        self
    }

    /// Sets [`Steering::finish_on_last_step`].
    #[must_use]
    pub fn finish_on_last_step(mut self, on: bool) -> Self {
        self.finish_on_last_step = on;
        self
    }

    /// Sets [`Steering::ground_answers`].
    #[must_use]
    pub fn ground_answers(mut self, on: bool) -> Self {
        self.ground_answers = on;
        self
    }
}

/// Why a step was narrowed to finishing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishCause {
    /// The step before was rejected.
    Rejected,
    /// It is the last step of the step budget.
    LastStep,
    /// An evidence tool returned a result.
    Evidence,
    /// Every tool's possible calls already ran.
    ToolsExhausted,
}

impl FinishCause {
    /// The stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::LastStep => "last_step",
            Self::Evidence => "evidence",
            Self::ToolsExhausted => "tools_exhausted",
        }
    }
}

/// What the harness decided for one step's grammar, for the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StepPlan {
    /// The tool choice the step was generated under (`auto`, `required`, `none`, or the
    /// named tool).
    pub choice: String,
    /// Why the step must finish, when it must.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishCause>,
    /// Calls taken out of the grammar, as `tool {arguments}`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
    /// Tools taken out of the choice because every call they admit already ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exhausted: Vec<String>,
    /// Calls the decoder was told to avoid (the grammar could not exclude them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub avoided: Vec<String>,
    /// How many observed lines the answer grammar offers as citations (absent when the
    /// answer is not grounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub citable_lines: Option<usize>,
    /// Whether free-text arguments were held to the question's words.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub grounded_arguments: bool,
    /// The source this step must read, as `tool {arguments}`, when the lines seen do not
    /// answer the question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<String>,
    /// Why the run abstains instead of taking this step: no line seen answers the question
    /// and nothing is left to look up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abstain: Option<String>,
}

impl StepPlan {
    /// Whether the step uses the agent's base grammar unchanged.
    #[must_use]
    pub fn is_base(&self) -> bool {
        self.finish.is_none()
            && self.excluded.is_empty()
            && self.exhausted.is_empty()
            && self.citable_lines.is_none()
            && !self.grounded_arguments
            && self.read.is_none()
    }
}

/// A call as the trace and the abstention name it: `tool {arguments}`.
pub(crate) use proviso_tools::steer::describe;

/// Narrows `registry` by the calls in `executed`, with the policy the server applies to a
/// conversation ([`proviso_tools::steer::without_calls`]). A read of one of `read_tools`
/// that names the same versions of `store`'s sources as one that ran is that read again
/// (`{"source_id": "faq"}` and `{"source_id": "faq", "version": "v1"}` when v1 is in
/// force): it returns the same lines, so it leaves the grammar too, rather than spend a
/// step of the budget.
pub(crate) fn narrow(
    registry: &Registry,
    format: CallFormat,
    executed: &[ExecutedCall],
    store: Option<&SourceStore>,
    read_tools: &[String],
) -> proviso_tools::steer::Narrowed {
    let mut ran: Vec<(&str, Map<String, Value>)> = Vec::new();
    for e in executed.iter().filter(|e| !may_retry(e, executed)) {
        let (name, arguments) = (e.call.name(), e.call.arguments());
        ran.push((name, arguments.clone()));
        let Some(store) = store.filter(|_| read_tools.iter().any(|r| r == name)) else {
            continue;
        };
        // The other arguments that read the same versions (a read's arguments are few).
        let all = registry
            .get(name)
            .and_then(|t| finite_arguments(t.spec().parameters(), FINITE_LIMIT))
            .unwrap_or_default();
        ran.extend(
            all.into_iter()
                .filter(|a| a != arguments && same_read(a, arguments, store))
                .map(|a| (name, a)),
        );
    }
    let ran: Vec<(&str, &Map<String, Value>)> = ran.iter().map(|(n, a)| (*n, a)).collect();
    let mut narrowed = proviso_tools::steer::without_calls(registry, format, &ran);
    // A tool that failed twice leaves the grammar, as in the server's steering, while
    // another tool remains.
    let failing = proviso_tools::steer::failing_tools(
        &narrowed.registry,
        executed
            .iter()
            .map(|e| (e.call.name(), !matches!(e.outcome, ToolOutcome::Ok { .. }))),
        proviso_tools::steer::Limits::default().max_failures,
    );
    if !failing.is_empty() && failing.len() < narrowed.registry.len() {
        let kept: Vec<proviso_tools::ToolSpec> = narrowed
            .registry
            .iter()
            .filter(|t| !failing.iter().any(|f| f == t.spec().name()))
            .map(|t| t.spec().clone())
            .collect();
        if let Ok(registry) = Registry::new(kept) {
            narrowed.registry = registry;
            narrowed.exhausted.extend(failing);
        }
    }
    narrowed
}

/// Whether `call` may be written again although it ran: it timed out, and only in one
/// step (a call written twice in a step runs once). A timeout says nothing of what the
/// call would return, unlike an answer or a refusal: a busy machine or a slow first run
/// must not leave the run with every lookup "done" and nothing learnt. Once more only, so
/// a tool that always hangs costs one retry, not the budget.
pub(crate) fn may_retry(call: &ExecutedCall, executed: &[ExecutedCall]) -> bool {
    let same = |e: &&ExecutedCall| {
        e.call.name() == call.call.name() && e.call.arguments() == call.call.arguments()
    };
    executed
        .iter()
        .filter(same)
        .all(|e| matches!(e.outcome, ToolOutcome::TimedOut { .. }) && e.step == call.step)
}

/// The first call of one of `tools` (in order) that has not run and whose arguments name a
/// source of `store` that `about` accepts: the read that may answer what the lines seen
/// did not. Its tool's arguments are taken from `registry` (already held to the ids the
/// conversation named, in the order they were named). With `earlier` (the question asks
/// about an earlier version), a read of a version no longer in force comes first, taken
/// from `whole` (the tools' own arguments) when no result named one: the version in force
/// cannot say what an earlier one did.
pub(crate) fn next_read(
    registry: &Registry,
    whole: &Registry,
    tools: &[String],
    executed: &[ExecutedCall],
    store: &SourceStore,
    about: impl Fn(&str) -> Option<f64>,
    earlier: bool,
) -> Option<(String, Map<String, Value>)> {
    let superseded = |arguments: &Map<String, Value>| {
        read_versions(arguments, store)
            .iter()
            .any(|(source, version)| {
                store
                    .versions(source)
                    .iter()
                    .any(|d| d.version() == version && !d.in_force())
            })
    };
    if earlier {
        let first = next_read_where(registry, tools, executed, store, &about, &superseded)
            .or_else(|| next_read_where(whole, tools, executed, store, &about, &superseded));
        if first.is_some() {
            return first;
        }
    }
    next_read_where(registry, tools, executed, store, &about, &|_| true)
}

fn next_read_where(
    registry: &Registry,
    tools: &[String],
    executed: &[ExecutedCall],
    store: &SourceStore,
    about: &impl Fn(&str) -> Option<f64>,
    wanted_read: &dyn Fn(&Map<String, Value>) -> bool,
) -> Option<(String, Map<String, Value>)> {
    for name in tools {
        let Some(tool) = registry.get(name) else {
            continue;
        };
        let Some(all) = finite_arguments(tool.spec().parameters(), FINITE_LIMIT) else {
            continue;
        };
        // Of the reads not run yet, the one whose sources `about` ranks highest (a source
        // titled by the question's subject before one that mentions it in passing); among
        // equals, the first, which is the order results named them in.
        let mut best: Option<(f64, Map<String, Value>)> = None;
        for arguments in all {
            let ran = executed
                .iter()
                .any(|e| e.call.name() == name && same_read(e.call.arguments(), &arguments, store));
            if ran || !wanted_read(&arguments) {
                continue;
            }
            let object = Value::Object(arguments.clone());
            let mut values = Vec::new();
            strings(&object, &mut values);
            // A read names sources (and their versions), nothing else: a call that also
            // carries free text is a lookup, not a read.
            let source = |v: &&str| !store.versions(v).is_empty();
            let version = |v: &&str| store.documents().any(|d| d.version() == *v);
            if !values.iter().all(|v| source(v) || version(v)) {
                continue;
            }
            let Some(rank) = values
                .iter()
                .filter(|v| source(v))
                .filter_map(|v| about(v))
                .reduce(f64::max)
            else {
                continue;
            };
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((rank, arguments));
            }
        }
        if let Some((_, arguments)) = best {
            return Some((name.clone(), arguments));
        }
    }
    None
}

/// Whether reads with arguments `a` and `b` return the same lines: the same arguments, or
/// the same versions of `store`'s sources (a read of the version in force, named or not).
fn same_read(a: &Map<String, Value>, b: &Map<String, Value>, store: &SourceStore) -> bool {
    if a == b {
        return true;
    }
    let wanted = read_versions(a, store);
    !wanted.is_empty() && read_versions(b, store) == wanted
}

/// The versions of sources a read's arguments name: each source its string values name,
/// with the version they name or, when they name none of its versions, the one in force.
fn read_versions(
    arguments: &Map<String, Value>,
    store: &SourceStore,
) -> BTreeSet<(String, String)> {
    let object = Value::Object(arguments.clone());
    let mut values = Vec::new();
    strings(&object, &mut values);
    let mut out = BTreeSet::new();
    for v in &values {
        let versions = store.versions(v);
        if versions.is_empty() {
            continue;
        }
        let named = versions
            .iter()
            .find(|d| values.iter().any(|w| *w == d.version()))
            .or_else(|| versions.iter().find(|d| d.in_force()));
        if let Some(d) = named {
            out.insert(((*v).to_owned(), d.version().to_owned()));
        }
    }
    out
}

/// Most lines of one read shown to the model.
const SHOWN_LINES: usize = 12;

/// The outcome as the model is shown it: a result holding more than [`SHOWN_LINES`]
/// numbered lines (`lines`, as a read returns them) shows the ones that share the most
/// words with the question, in their order, and says how many it leaves out. The run keeps
/// the whole result, so every line stays citable: the answer's grammar offers the lines
/// ranked against the question, and a whole document in a small model's context only slows
/// every later step and crowds out the question.
pub(crate) fn shown_outcome(outcome: &ToolOutcome, question: Option<&Question>) -> Value {
    let whole = serde_json::to_value(outcome).unwrap_or(Value::Null);
    let (Some(question), ToolOutcome::Ok { result }) = (question, outcome) else {
        return whole;
    };
    let Some(lines) = result.get("lines").and_then(Value::as_array) else {
        return whole;
    };
    if lines.len() <= SHOWN_LINES {
        return whole;
    }
    let terms: BTreeSet<&String> = question.terms().iter().collect();
    let mut scored: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let text = line.get("text").and_then(Value::as_str).unwrap_or("");
            let shared: BTreeSet<String> = content_stems(text)
                .into_iter()
                .filter(|s| terms.contains(s))
                .collect();
            (shared.len(), i)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut kept: Vec<usize> = scored.iter().take(SHOWN_LINES).map(|(_, i)| *i).collect();
    kept.sort_unstable();
    let mut shown = result.clone();
    if let Some(map) = shown.as_object_mut() {
        map.insert(
            "lines".into(),
            Value::Array(kept.iter().map(|i| lines[*i].clone()).collect()),
        );
        map.insert("lines_not_shown".into(), json!(lines.len() - kept.len()));
    }
    let mut out = whole;
    if let Some(map) = out.as_object_mut() {
        map.insert("result".into(), shown);
    }
    out
}

/// The name of a tool choice, for the trace.
pub(crate) fn choice_name(choice: &ToolChoice) -> String {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Named(name) => name.clone(),
    }
}

/// Every line a tool returned in this run that `store` holds, in force (or in a superseded
/// version too, when `superseded` is set), quoted exactly, as a citation object (quote
/// first, so a model choosing among them reads the text before the numbers).
///
/// A tool result cites lines by carrying objects with `source_id` and `version` and either
/// `lines` (an array of `{line, text}`) or a single `line` and `text`, at any depth.
#[must_use]
pub fn observed_citations(
    executed: &[ExecutedCall],
    store: &SourceStore,
    superseded: bool,
) -> Vec<Value> {
    let results: Vec<&Value> = executed
        .iter()
        .filter_map(|call| match &call.outcome {
            ToolOutcome::Ok { result } => Some(result),
            _ => None,
        })
        .collect();
    cited_lines(&results, store, superseded)
}

/// Whether some line of `store` may answer `question`: a line of a version it may cite (in
/// force, or any when it asks about an earlier one) that [`rank_citations`] keeps. The
/// harness knows its documents: when none holds such a line, no lookup can find one.
#[must_use]
pub fn store_answers(question: &Question, store: &SourceStore) -> bool {
    let earlier = question.asks_earlier_version();
    store
        .documents()
        .filter(|d| d.in_force() || earlier)
        .any(|d| {
            // Every line, without the cap a run's observed lines have.
            let lines: Vec<Value> = d
                .lines()
                .iter()
                .enumerate()
                .filter(|(_, text)| !text.trim().is_empty())
                .map(|(i, text)| {
                    json!({"quote": text, "source_id": d.source_id(), "version": d.version(),
                        "line_start": i + 1, "line_end": i + 1})
                })
                .collect();
            !rank_citations(&lines, question, store, 1).is_empty()
        })
}

/// How much reading `source` whole may answer `question`, or `None` when it is not about
/// the question's subject: the weight of the subject its title states (a source titled by
/// the subject before one that mentions it in passing). One rule for the agent's next read
/// and for the harness's measure of it.
#[must_use]
pub fn read_rank(question: &Question, source: &str) -> Option<f64> {
    question
        .on_subject(source)
        .then(|| question.subject_in_title(source))
}

/// The lines `results` (tool results, in order) cite that `store` holds, as
/// [`observed_citations`] reads them from a run's calls.
#[must_use]
pub fn cited_lines(results: &[&Value], store: &SourceStore, superseded: bool) -> Vec<Value> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for result in results {
        collect(result, store, superseded, &mut found, &mut seen);
    }
    found
}

fn collect(
    value: &Value,
    store: &SourceStore,
    superseded: bool,
    found: &mut Vec<Value>,
    seen: &mut BTreeSet<(String, String, u64)>,
) {
    match value {
        Value::Object(map) => {
            let source = map.get("source_id").and_then(Value::as_str);
            let version = map.get("version").and_then(Value::as_str);
            if let (Some(source), Some(version)) = (source, version) {
                let mut lines: Vec<(u64, &str)> = Vec::new();
                if let Some(Value::Array(items)) = map.get("lines") {
                    for item in items {
                        if let (Some(n), Some(t)) = (
                            item.get("line").and_then(Value::as_u64),
                            item.get("text").and_then(Value::as_str),
                        ) {
                            lines.push((n, t));
                        }
                    }
                }
                if let (Some(n), Some(t)) = (
                    map.get("line").and_then(Value::as_u64),
                    map.get("text").and_then(Value::as_str),
                ) {
                    lines.push((n, t));
                }
                for (n, text) in lines {
                    if found.len() >= MAX_CANDIDATES {
                        return;
                    }
                    if text.trim().is_empty() || !seen.insert((source.into(), version.into(), n)) {
                        continue;
                    }
                    let held = store.versions(source).iter().any(|d| {
                        d.version() == version
                            && (d.in_force() || superseded)
                            && usize::try_from(n)
                                .ok()
                                .and_then(|n| d.excerpt(n, n))
                                .is_some_and(|e| e == text)
                    });
                    if held {
                        found.push(
                            json!({"quote": text, "source_id": source, "version": version,
                            "line_start": n, "line_end": n}),
                        );
                    }
                }
            }
            for v in map.values() {
                collect(v, store, superseded, found, seen);
            }
        }
        Value::Array(items) => {
            for v in items {
                collect(v, store, superseded, found, seen);
            }
        }
        _ => {}
    }
}

/// The schema at a JSON pointer into an instance, followed through `properties` (and the
/// `items` of arrays for numeric segments).
fn schema_at<'a>(schema: &'a mut Value, pointer: &str) -> Option<&'a mut Value> {
    let mut here = schema;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        here = if segment.parse::<usize>().is_ok() {
            here.get_mut("items")?
        } else {
            here.get_mut("properties")?.get_mut(&segment)?
        };
    }
    Some(here)
}

/// A line an answer may cite, with the spans of it that answer the question, best first.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Citable {
    /// The citation object (`quote`, `source_id`, `version`, `line_start`, `line_end`).
    pub citation: Value,
    /// The spans of the quote that answer the question (see [`Question::spans`]).
    pub spans: Vec<String>,
    /// Whether the cited version is no longer in force (cited only when the question asks
    /// about an earlier version; the answer then names it).
    pub superseded: bool,
}

impl Citable {
    /// What an answer citing this line says before its span: its version, when that is no
    /// longer in force (`v1 (superseded): `), so that the answer names it; else nothing.
    #[must_use]
    pub fn version_named(&self) -> String {
        if !self.superseded {
            return String::new();
        }
        let version = self
            .citation
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("");
        format!("{version} (superseded): ")
    }

    /// The answer that states this line's best span, as the answer grammar would write it.
    #[must_use]
    pub fn first_answer(&self) -> String {
        format!(
            "{}{}",
            self.version_named(),
            self.spans.first().map_or("", String::as_str)
        )
    }
}

/// Most answer spans offered per cited line. More than the ranked one: the ranked span may
/// leave out the name a `which` question asks for (a synopsis without its trial's id),
/// which the model's choice among a few keeps.
const SPANS_PER_LINE: usize = 3;

/// How a candidate line ranks before its score is compared, most telling first: it is of a
/// superseded version a question about an earlier version asks for; it names no other
/// record's id; how much of what is asked beyond the subject it states; how many of the
/// things a plural `which` asks for it names; it does not say the sources' writer does what
/// the asker asks to do; it is a body line, not a title.
type RankKey = (bool, bool, usize, usize, bool, bool);

/// The candidates that answer `question` best, best first (at most `keep`); none when no
/// observed line answers it.
///
/// A line is kept when its source is about the question's subject and some span of it
/// answers the question ([`Question::spans`]: the qualifiers, no sibling, the asked kind);
/// it must also share two of the question's words (or its only one). Lines are scored by
/// the words they share with the question, each weighted by how rare it is among the
/// candidates (`breakfast` tells lines apart, `limit` less), plus the pairs of consecutive
/// words they share in order (a phrase says more than its words apart). When the question
/// asks about an earlier version, lines of superseded versions come first; then the lines
/// that themselves state more of what the question asks beyond its subject
/// ([`Question::beyond`]), whatever else they share: a press release's lead sentence names
/// the branch three times but not who does the work. Only lines ranked as high on both are
/// kept, and of those, lines scoring less than half the best are dropped: a small model
/// otherwise copies whichever line starts like the question.
#[must_use]
pub fn rank_citations(
    candidates: &[Value],
    question: &Question,
    store: &SourceStore,
    keep: usize,
) -> Vec<Citable> {
    let terms = content_stems(question.text());
    let distinct: BTreeSet<&String> = terms.iter().collect();
    let lines: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| {
            // A name written by its abbreviation counts as the name's words.
            content_stems(
                &question.unabbreviated(c.get("quote").and_then(Value::as_str).unwrap_or("")),
            )
        })
        .collect();
    let n = candidates.len().max(1) as f64;
    let idf = |term: &String| {
        let df = lines.iter().filter(|l| l.contains(term)).count().max(1) as f64;
        (1.0 + n / df).ln()
    };
    let earlier = question.asks_earlier_version();
    // A question about an earlier version is answered by a version no longer in force, when
    // a source it is about has one: the version in force says what holds now, not then.
    let only_superseded = earlier
        && store
            .documents()
            .any(|d| !d.in_force() && question.on_subject(d.source_id()));
    // A line inherits its source's subject: "altered taste" answers a question about
    // lumeditan's taste in a document about lumeditan.
    let subject = subject_stems(question);
    let kind_of = Question::text_asks_kind_of(question.text());
    let mut scored: Vec<(RankKey, f64, usize, Citable)> = Vec::new();
    for (i, (c, stems)) in candidates.iter().zip(&lines).enumerate() {
        let source = c.get("source_id").and_then(Value::as_str).unwrap_or("");
        let version = c.get("version").and_then(Value::as_str).unwrap_or("");
        let quote = c.get("quote").and_then(Value::as_str).unwrap_or("");
        let Ok((shared, mut spans)) =
            assess(question, &distinct, stems, &subject, source, quote, store)
        else {
            continue;
        };
        if record_for_another(store, question, source, version, quote) {
            continue;
        }
        spans.truncate(SPANS_PER_LINE);
        // A word only the section states counts half: the section is shared by every line
        // under it, and says less about each than the line's own words.
        let own: BTreeSet<&String> = stems.iter().chain(subject.iter()).collect();
        let mut score: f64 = shared
            .iter()
            .map(|t| {
                if own.contains(*t) {
                    idf(t)
                } else {
                    idf(t) / 2.0
                }
            })
            .sum();
        // A record's line (`route: Bus X9; first_last: …`) is also about what the record's
        // other lines state (`an express bus to the airport`): those words count a quarter,
        // so they part lines that share as much of their own.
        let record = record_stems(store, source, version, quote);
        score += distinct
            .iter()
            .filter(|t| !shared.contains(*t) && record.contains(**t))
            .map(|t| idf(t) / 4.0)
            .sum::<f64>();
        let pairs: BTreeSet<(&String, &String)> =
            stems.windows(2).map(|w| (&w[0], &w[1])).collect();
        for w in terms.windows(2) {
            if pairs.contains(&(&w[0], &w[1])) {
                score += (idf(&w[0]) + idf(&w[1])) / 2.0;
            }
        }
        let superseded = store
            .versions(source)
            .iter()
            .any(|d| d.version() == version && !d.in_force());
        if only_superseded && !superseded {
            continue;
        }
        // How much of what the question asks beyond its subject the line itself states
        // (`building work` for "which company is doing the building work at Wren Hill?"):
        // a line that states more of it answers more of the question than one that states
        // the subject more often.
        // A line whose range of age or days holds what the question states (`aged 16–25`
        // for "I'm 22", `Fri–Sat` for "Saturday") answers for that person and day.
        // A line that refers back (`Those who already hold it …`) states what the line it
        // refers to names (`Lifetime membership …`).
        let referred = antecedent(store, source, version, quote);
        let before = referred.map(content_stems).unwrap_or_default();
        let asked = question
            .beyond()
            .iter()
            .filter(|t| stems.contains(*t) || before.contains(*t))
            .count()
            // `They may not join spin classes`, after `14- and 15-year-olds may join yoga`:
            // the line is about whom the line it refers to names.
            + question
                .fitted(quote)
                .max(referred.map_or(0, |b| question.fitted(b)))
            // "I'm on grade M2 … do I get it?": a rule that names the asker's own id
            // settles whether it applies to them.
            + if question.kind() == AnswerKind::YesNo {
                // "Is there a sign-up fee?": a line stating a sum (`a joining fee of £10`)
                // settles it, over one that only names what the fee is for.
                question.ids_stated(quote)
                    + usize::from(question.asks_existence() && question.states_measure(quote))
            } else {
                0
            }
            // "When does it open again": a line saying it reopens, before the hours.
            + usize::from(question.states_event(quote))
            // "The most the fund could give": a line stating a limit (`up to £300`) states
            // what is asked, over one that only names the fund again.
            + 2 * usize::from(question.limit_stated(quote))
            // "Which district is the Hallowmere Central hub in?": a record with a field
            // for it (`dist: Castlegate`), over a line that only names the hub.
            + usize::from(question.keys_asked_in(quote))
            // "What kind of drug is tesoglutide?": the line defining it (`tesoglutide, an
            // … peptide`), over the lines naming its doses.
            + usize::from(
                kind_of
                    .as_deref()
                    .is_some_and(|name| Question::defines_kind(quote, name)),
            );
        // A line naming only other ids (another route's record) gives way to any that
        // does not.
        let own_ids = !question.names_other_ids(quote);
        // A document's title line names the whole document: a line of its body that
        // states as much of what is asked says it of the thing asked about. A record's
        // first line (`NCT…: title: …; status: recruiting.`) is no title: it states its
        // fields as any other record's line does.
        let body = record_key(quote).is_some()
            || !store
                .versions(source)
                .iter()
                .any(|d| d.version() == version && d.title() == Some(quote));
        scored.push((
            (
                earlier && superseded,
                own_ids,
                asked,
                // "Which arms were terminated": a line naming two of them answers more of
                // it than one naming one.
                question.members_named(quote),
                // "How much notice do I have to give?": a line saying what the asker gives
                // (`You may end it by giving us 7 days' notice`) over one saying what the
                // sources' writer gives (`We may end it by giving you 14 days' notice`).
                !question.other_party_does(quote),
                body,
            ),
            score,
            i,
            Citable {
                citation: c.clone(),
                spans,
                superseded,
            },
        ));
    }
    if scored.is_empty() {
        return Vec::new();
    }
    // Among lines that share as much, the shorter says it with less else around it (a
    // sentence before a list of a branch's facilities); then the first found.
    let length = |c: &Citable| c.citation["quote"].as_str().map_or(0, str::len);
    scored.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(length(&a.3).cmp(&length(&b.3)))
            .then(a.2.cmp(&b.2))
    });
    let (first, best) = (scored[0].0, scored[0].1);
    scored
        .into_iter()
        .filter(|(key, s, _, _)| *key == first && s * 2.0 > best)
        .take(keep)
        .map(|(_, _, _, c)| c)
        .collect()
}

/// The line `quote` (of `source` at `version`) refers back to, when it opens with a word
/// standing for what that line names ([`proviso_contract::SourceDocument::antecedents`]).
fn antecedent<'a>(
    store: &'a SourceStore,
    source: &str,
    version: &str,
    quote: &str,
) -> Option<&'a str> {
    store
        .versions(source)
        .iter()
        .filter(|d| d.version() == version)
        .flat_map(|d| d.antecedents())
        .find(|(line, _)| *line == quote)
        .and_then(|(_, before)| before)
}

/// The key a record's line opens with (`route: Bus X9` in `route: Bus X9; runs: …`): its
/// first field, when the line is written as `field: value; field: value`.
fn record_key(quote: &str) -> Option<&str> {
    let (key, _) = quote.split_once("; ")?;
    key.contains(": ").then_some(key)
}

/// The stems of the other lines of the record `quote` belongs to: the lines of its source
/// and version that open with the same key (`route: Bus X9; …`). Empty for a line that is
/// not a record's.
fn record_stems(store: &SourceStore, source: &str, version: &str, quote: &str) -> BTreeSet<String> {
    record_lines(store, source, version, quote)
        .filter(|l| *l != quote)
        .flat_map(content_stems)
        .collect()
}

/// The lines of the record `quote` belongs to, itself among them: the lines of its source
/// and version that open with the same key. None for a line that is not a record's.
fn record_lines<'a>(
    store: &'a SourceStore,
    source: &str,
    version: &'a str,
    quote: &str,
) -> impl Iterator<Item = &'a str> {
    let prefix = record_key(quote).map(|key| format!("{key}; "));
    store
        .versions(source)
        .iter()
        .filter(move |d| d.version() == version)
        .flat_map(|d| d.lines().iter())
        .filter(move |l| prefix.as_ref().is_some_and(|p| l.starts_with(p.as_str())))
        .map(String::as_str)
}

/// Whether the record `quote` is a line of is for another member of a series the question
/// names one of (`id: AR-C01; …; address: …` when another line of it says `region:
/// Central` and the question asks about the South Coast): its other lines say whom it is
/// for, and none says the member asked about.
fn record_for_another(
    store: &SourceStore,
    question: &Question,
    source: &str,
    version: &str,
    quote: &str,
) -> bool {
    let fits: Vec<Option<bool>> = record_lines(store, source, version, quote)
        .map(|l| question.member_fits(l))
        .collect();
    fits.contains(&Some(false)) && !fits.contains(&Some(true))
}

/// The stems that name the question's subject: its rare names and its ids' stems. A line
/// inherits them from its source: "altered taste" answers a question about lumeditan's
/// taste in a document about lumeditan.
fn subject_stems(question: &Question) -> Vec<String> {
    let (ids, names) = question.subject();
    names
        .iter()
        .map(|(n, _)| n.clone())
        .chain(ids.iter().flat_map(|id| content_stems(id)))
        .collect()
}

/// Whether a line of `source` (`quote`, stemmed `stems`) may be offered for `question`:
/// the words of the question (`distinct`) it shares, and the spans of it that answer, or
/// why it may not. It is about the question's subject and states what the question names;
/// it states something (not a heading or a question); it shares two of the question's
/// words (or its only one) beyond those naming the kind of thing asked for, itself, through
/// its source's subject, the qualifiers it states (a record keyed `A:` states `Arm A`), or
/// its section's opening line (the
/// sentences under `Collecting and returning` are about collecting, though none says so);
/// and some span of it answers ([`Question::spans`]).
fn assess<'a>(
    question: &Question,
    distinct: &BTreeSet<&'a String>,
    stems: &[String],
    subject: &[String],
    source: &str,
    quote: &str,
    store: &SourceStore,
) -> Result<(Vec<&'a String>, Vec<String>), String> {
    if !question.on_subject(source) {
        return Err(format!("`{source}` is not about the question's subject"));
    }
    if !question.citable(quote) {
        return Err("a heading or a question states no fact".into());
    }
    if !question.names_stated(quote, source) {
        return Err("it does not state a name the question asks about".into());
    }
    if !question.fits(quote) {
        return Err(
            "it states ages, group sizes, days or a record that leave out those the question states"
                .into(),
        );
    }
    let section = content_stems(question.section(source, quote).unwrap_or(""));
    let qualified = question.qualifier_stems(quote);
    // A line that refers back (`We can send those …`) shares the words of the line it
    // refers to (`… except keys and glasses`), as the gate reads it.
    let before = content_stems(question.antecedent(source, quote).unwrap_or(""));
    // A line that writes a name by its abbreviation (`BMM`) shares the name's words.
    let spelt = content_stems(&question.unabbreviated(quote));
    let set: BTreeSet<&String> = stems
        .iter()
        .chain(spelt.iter())
        .chain(subject.iter())
        .chain(section.iter())
        .chain(qualified.iter())
        .chain(before.iter())
        .collect();
    let shared: Vec<&String> = distinct
        .iter()
        .copied()
        .filter(|t| set.contains(*t))
        .collect();
    // The words that say what kind of thing is asked for (`which trial`) describe the
    // answer, which need not repeat them; they count when stated, never against.
    let typed = |t: &&String| question.answer_type().contains(*t);
    // What the asker says of themselves around the asking part ("Im terrified of the
    // drill") adds no word a line must share.
    let asking: BTreeSet<String> = question.asking_stems().into_iter().collect();
    let needed = distinct
        .iter()
        .filter(|t| !typed(t) && asking.contains(**t))
        .count()
        .clamp(1, 2);
    // "What does AHP mean on the bins page?": the code is all a definition shares.
    let needed = if question.defines().is_some() {
        1
    } else {
        needed
    };
    // A range holding the asker's own age, group size, length of time or release
    // (`children 3–12` for "my 8-year-old") states the words the question gives them in.
    // A line that says the rest in other words (`Rooms can be booked … up to 60 days in
    // advance` for "how far ahead can I reserve a meeting room?") shares it in meaning: a
    // line near the question counts as sharing one more word, never the only one.
    // Measured only where it can decide: a line one word short that shares some.
    let sharing = shared.iter().filter(|t| !typed(t)).count() + question.held(quote);
    let near = (sharing > 0 && sharing + 1 == needed)
        .then(|| store.nearness(question.text(), &[quote]))
        .flatten()
        .and_then(|n| n.first().copied());
    if sharing + usize::from(near.is_some_and(|n| n >= NEAR)) < needed {
        return Err(format!(
            "it shares too few of the question's words ({}{})",
            shared.len(),
            near.map_or(String::new(), |n| format!("; nearness {n:.2}"))
        ));
    }
    let spans = question.spans_in(quote, Some(source));
    if spans.is_empty() {
        return Err(format!(
            "no span of it answers: {}",
            question.misses_in(quote, Some(source)).unwrap_or_default()
        ));
    }
    Ok((shared, spans))
}

/// Why [`rank_citations`] never offers `quote`, a line of `source`, for `question` (see
/// [`assess`]): `None` when it may, and is then ranked against the other lines.
#[must_use]
pub fn refusal(
    question: &Question,
    store: &SourceStore,
    source: &str,
    quote: &str,
) -> Option<String> {
    let terms = content_stems(question.text());
    let distinct: BTreeSet<&String> = terms.iter().collect();
    assess(
        question,
        &distinct,
        &content_stems(quote),
        &subject_stems(question),
        source,
        quote,
        store,
    )
    .err()
}

/// The text an answer citing `cited` may say: one of the first line's spans, then, for each
/// later line in order, optionally one of its spans, at most `max_spans` in all, joined by
/// spaces. A superseded line's span is introduced by its version (`v1 (superseded): `), so
/// the answer names it. The answer restates what the lines say and cannot add a word, a
/// number or a combination they do not contain.
fn span_pattern(cited: &[&Citable], max_spans: usize) -> String {
    let groups: Vec<String> = cited
        .iter()
        .map(|c| {
            let prefix = regex_escape(&c.version_named());
            let alternatives: Vec<String> = c.spans.iter().map(|s| regex_escape(s)).collect();
            format!("{prefix}(?:{})", alternatives.join("|"))
        })
        .collect();
    let Some((first, rest)) = groups.split_first() else {
        return "^$".into();
    };
    let rest: String = rest
        .iter()
        .take(max_spans.max(1) - 1)
        .map(|g| format!("(?: {g})?"))
        .collect();
    format!("^(?:{first}{rest})$")
}

/// The question's content words, in order, each once.
fn query_words(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    content_words(text)
        .into_iter()
        .filter(|w| seen.insert(w.to_lowercase()))
        .map(str::to_owned)
        .collect()
}

/// The first search's queries for `question`, best first: the question itself (its
/// whitespace collapsed), which a re-ranker reads as a question, then its content words, in
/// order, each once, for a query field too short for it. The agent's first search is held
/// to the first that fits ([`ground_arguments`]); the evaluations search with the first, so
/// they measure the search the agent makes.
#[must_use]
pub fn first_queries(question: &str) -> Vec<String> {
    let whole = question.split_whitespace().collect::<Vec<_>>().join(" ");
    let words = query_words(question).join(" ");
    if words.is_empty() {
        return Vec::new();
    }
    vec![whole, words]
}

/// Every run of `words` in order with some skipped (at most `max_words` long), longest
/// first; `None` when there would be more than [`MAX_QUERIES`]. As an `enum`, a query
/// that already ran can be taken out of the grammar.
fn queries(words: &[String], max_words: usize) -> Option<Vec<String>> {
    if words.len() > 8 {
        return None;
    }
    let mut out: Vec<Vec<&str>> = Vec::new();
    for mask in 1_u32..(1 << words.len()) {
        let picked: Vec<&str> = words
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, w)| w.as_str())
            .collect();
        // At least half of the words: a one-word query rarely finds the line.
        if picked.len() <= max_words && picked.len() * 2 >= words.len() {
            out.push(picked);
        }
    }
    if out.len() > MAX_QUERIES {
        return None;
    }
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    Some(out.into_iter().map(|q| q.join(" ")).collect())
}

/// The strings of `value`, at any depth.
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The values in `texts` that match `pattern` whole: identifiers the conversation named
/// (a trial id in the question, a document id in a search result).
fn named_values(pattern: &str, texts: &[&str]) -> Vec<String> {
    let Ok(re) = regex::Regex::new(pattern) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for text in texts {
        let mut candidates: Vec<&str> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .filter(|t| !t.is_empty())
            .collect();
        candidates.push(text);
        for t in candidates {
            if t.len() <= 120 && re.is_match(t) && !out.iter().any(|o| o == t) {
                out.push(t.to_owned());
            }
        }
    }
    out
}

/// `registry` with arguments held to what the conversation named: a free-text argument
/// (such as a search query) to content words of `question` (at most eight), and an
/// argument with a `pattern` (such as an id) to the values in the question or in tool
/// results that match it, when there are any. A small model otherwise fills a query with
/// a loop of invented words and an id with invented digits. Only the grammar is narrowed;
/// the gates check the declared schemas.
pub(crate) fn ground_arguments(
    registry: &Registry,
    question: &str,
    executed: &[ExecutedCall],
    read_tools: &[String],
) -> Option<Registry> {
    let words = words_pattern(question, 8);
    let content = query_words(question);
    // The first search carries the question's whole content (names, ids, numbers,
    // qualifiers): a two-word query finds the subject's title lines, not the sentence that
    // states the fact. Later searches, after the whole question has run, may drop words.
    let first_search = !executed
        .iter()
        .any(|c| matches!(c.outcome, ToolOutcome::Ok { .. }));
    let enumerated = if first_search && !content.is_empty() {
        Some(first_queries(question))
    } else {
        queries(&content, 8)
    };
    let results_seen = !first_search;
    let mut texts: Vec<&str> = vec![question];
    for call in executed {
        if let ToolOutcome::Ok { result } = &call.outcome {
            strings(result, &mut texts);
        }
    }
    // Locators (paths, file names, URIs) the question and the results wrote, verbatim.
    let located: Vec<String> = texts
        .iter()
        .flat_map(|t| proviso_tools::steer::locators(t))
        .fold(Vec::new(), |mut all, l| {
            if !all.contains(&l) {
                all.push(l);
            }
            all
        });
    // Before the first call, among many tools, the ones the question names.
    let named = if executed.is_empty() {
        proviso_tools::steer::named_tools(registry, question, MAX_FIRST_TOOLS)
    } else {
        None
    };
    let registry = named.as_ref().unwrap_or(registry);
    let grounded = registry.narrowed(|parameters| {
        // Closed objects, no unasked knobs, locators from the conversation: the policy the
        // server's steering applies too.
        let mut changed = proviso_tools::steer::narrow_parameters(parameters, question, &located);
        if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                // A path, a file name or a URI is a token the conversation wrote, never a
                // query made of the question's words.
                if proviso_tools::steer::is_locator(name) {
                    continue;
                }
                // An id chosen from a list (a document to read) is held to the ones the
                // results named, best first, once there are results: a small model picks
                // poorly among many.
                if let Some(Value::Array(choices)) = property.get("enum") {
                    let mut named: Vec<Value> = Vec::new();
                    if results_seen {
                        for text in &texts[1..] {
                            let value = Value::String((*text).to_owned());
                            if choices.contains(&value) && !named.contains(&value) {
                                named.push(value);
                            }
                        }
                    }
                    if !named.is_empty() && named.len() < choices.len() {
                        property["enum"] = Value::Array(named);
                        changed = true;
                    }
                    continue;
                }
                let named = match property.get("pattern").and_then(Value::as_str) {
                    Some(p) => named_values(p, &texts),
                    _ => Vec::new(),
                };
                let Some(map) = property.as_object_mut() else {
                    continue;
                };
                if !named.is_empty() {
                    map.remove("minLength");
                    map.remove("maxLength");
                    map.remove("pattern");
                    map.insert("enum".into(), json!(named));
                    changed = true;
                } else if is_free_text(&Value::Object(map.clone())) {
                    let bounds = (
                        map.get("minLength").and_then(Value::as_u64).unwrap_or(0),
                        map.get("maxLength")
                            .and_then(Value::as_u64)
                            .unwrap_or(u64::MAX),
                    );
                    let fits = |q: &String| {
                        let n = q.chars().count() as u64;
                        n >= bounds.0 && n <= bounds.1
                    };
                    if let Some(all) = &enumerated {
                        let mut values: Vec<&String> = all.iter().filter(|q| fits(q)).collect();
                        // The first search is one query: the best that fits.
                        if first_search {
                            values.truncate(1);
                        }
                        if values.is_empty() {
                            continue;
                        }
                        map.remove("minLength");
                        map.remove("maxLength");
                        map.insert("enum".into(), json!(values));
                        changed = true;
                    } else if let Some(pattern) = &words {
                        map.remove("minLength");
                        map.remove("maxLength");
                        map.insert("pattern".into(), json!(pattern));
                        changed = true;
                    }
                }
            }
        }
        changed
    });
    // A tool that needs an id nobody has named yet (a trial's record before any trial id
    // was seen) cannot be called usefully: it leaves the step, unless nothing else is left.
    // So does a read, before any lookup returned, of a source the question does not name:
    // chosen from the list of every source, it is a guess.
    let narrowed = grounded.as_ref().unwrap_or(registry);
    let callable: Vec<proviso_tools::ToolSpec> = narrowed
        .iter()
        .map(|t| t.spec().clone())
        .filter(|spec| !needs_unnamed_id(spec.parameters()))
        .filter(|spec| {
            results_seen
                || !read_tools.iter().any(|r| r == spec.name())
                || names_a_choice(spec.parameters(), question)
        })
        .collect();
    if callable.is_empty() || callable.len() == narrowed.len() {
        return grounded.or(named);
    }
    Registry::new(callable).ok().or(grounded).or(named)
}

/// Whether `text` names a value of one of the required `enum` arguments in `parameters`
/// (a read whose source the question names), or there is no such argument to choose.
fn names_a_choice(parameters: &Value, text: &str) -> bool {
    let text = text.to_lowercase();
    let choices: Vec<&Vec<Value>> = required_properties(parameters)
        .filter_map(|p| p.get("enum").and_then(Value::as_array))
        .collect();
    choices.is_empty()
        || choices.iter().any(|values| {
            values
                .iter()
                .filter_map(Value::as_str)
                .any(|v| text.contains(&v.to_lowercase()))
        })
}

/// The schemas of the properties a parameters schema requires.
fn required_properties(parameters: &Value) -> impl Iterator<Item = &Value> {
    parameters
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|name| parameters.get("properties").and_then(|p| p.get(name)))
}

/// Most tools the first step offers when the question names some of them.
const MAX_FIRST_TOOLS: usize = 4;

/// Whether a tool's parameters require an argument held to a `pattern` (an id) that the
/// grounding above could not turn into named values.
fn needs_unnamed_id(parameters: &Value) -> bool {
    required_properties(parameters).any(|p| p.get("pattern").is_some() && p.get("enum").is_none())
}

/// Most citation sets one grounded answer grammar enumerates.
const MAX_CITATION_SETS: usize = 16;

/// The ordered subsets of `items` with 1 to `max` elements that begin with the first item,
/// smallest first, at most `limit`: the best line is always cited, the model chooses which
/// others to add.
fn subsets<T: Clone>(items: &[T], max: usize, limit: usize) -> Vec<Vec<T>> {
    let Some(first) = items.first() else {
        return Vec::new();
    };
    let mut out: Vec<Vec<T>> = vec![vec![first.clone()]];
    let mut layer: Vec<(Vec<T>, usize)> = vec![(vec![first.clone()], 1)];
    for _ in 1..max.min(items.len()) {
        let mut next = Vec::new();
        for (set, from) in &layer {
            for (i, item) in items.iter().enumerate().skip(*from) {
                let mut grown = set.clone();
                grown.push(item.clone());
                if out.len() >= limit {
                    return out;
                }
                out.push(grown.clone());
                next.push((grown, i + 1));
            }
        }
        layer = next;
    }
    out
}

/// `answer` with its citations held to `candidates` and its claims to what they state;
/// `None` when there is nothing to cite.
///
/// The answer is one of a few variants, one per set of candidate lines (in ranked order, up
/// to the schema's `maxItems`). In each, the citations are exactly those lines, quoted with
/// their source, version and line numbers, and written first; an amount claim can only be a
/// number those lines state, and the answer text can only be spans of those lines that
/// answer the question (see `span_pattern`). So an answer cannot cite one line and state
/// another. The caller ranks the candidates (see [`rank_citations`]). The evidence gate
/// still checks every citation and claim, and whether the answer answers the question.
#[must_use]
pub fn grounded_answer(
    answer: &Value,
    contract: &Contract,
    candidates: &[Citable],
) -> Option<Value> {
    let policy = contract.evidence_policy()?;
    if candidates.is_empty() {
        return None;
    }
    let max = {
        let mut probe = answer.clone();
        let citations = schema_at(&mut probe, &policy.citations)?;
        usize::try_from(
            citations
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(3),
        )
        .unwrap_or(3)
    };
    let variants: Vec<Value> = subsets(candidates, max, MAX_CITATION_SETS)
        .iter()
        .filter_map(|set| grounded_variant(answer, policy, set))
        .collect();
    match variants.len() {
        0 => None,
        1 => variants.into_iter().next(),
        _ => Some(json!({"anyOf": variants})),
    }
}

/// The answer schema with its citations fixed to `cited`.
fn grounded_variant(answer: &Value, policy: &EvidencePolicy, cited: &[Citable]) -> Option<Value> {
    let mut schema = answer.clone();
    let quotes: Vec<&str> = cited
        .iter()
        .filter_map(|c| c.citation.get("quote").and_then(Value::as_str))
        .collect();
    {
        let citations = schema_at(&mut schema, &policy.citations)?;
        let objects: Vec<&Value> = cited.iter().map(|c| &c.citation).collect();
        *citations = json!({"const": objects});
    }
    let mut first = vec![policy.citations.clone()];
    for claim in &policy.claims {
        match claim {
            Claim::Amount { pointer, unit } => {
                let Some(target) = schema_at(&mut schema, pointer) else {
                    continue;
                };
                let nullable = match target.get("type") {
                    Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
                    Some(t) => t == "null",
                    None => false,
                };
                let integer_only = match target.get("type") {
                    Some(Value::Array(types)) => !types.iter().any(|t| t == "number"),
                    Some(t) => t != "number",
                    None => false,
                };
                // Only numbers the lines state in the claim's unit, as the gate reads them.
                let stated: Vec<String> = quotes
                    .iter()
                    .flat_map(|q| policy.stated_numbers(q))
                    .filter(|(_, u)| u.as_deref() == Some(unit.as_str()))
                    .map(|(n, _)| n)
                    .collect();
                let mut values: Vec<Value> = Vec::new();
                for n in stated
                    .iter()
                    .filter(|n| !integer_only || !n.contains('.'))
                    .filter_map(|n| serde_json::from_str::<Value>(n).ok())
                    .filter(|v| within(target, v))
                {
                    if !values.contains(&n) {
                        values.push(n);
                    }
                }
                if nullable {
                    values.push(Value::Null);
                }
                if values.is_empty() {
                    // No stated number fits: this set of lines cannot support the answer.
                    return None;
                }
                *target = json!({"enum": values});
                first.push(pointer.clone());
            }
            Claim::Text(pointer) => {
                let Some(target) = schema_at(&mut schema, pointer) else {
                    continue;
                };
                if target.get("pattern").is_some() {
                    continue;
                }
                // As many spans as fit the declared length, at most one per cited line; a
                // span longer than the answer may be is not offered.
                let max_length = target
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .and_then(|m| usize::try_from(m).ok());
                let fitting: Vec<Citable> = cited
                    .iter()
                    .map(|c| Citable {
                        spans: c
                            .spans
                            .iter()
                            .filter(|s| max_length.is_none_or(|m| s.chars().count() + 16 <= m))
                            .cloned()
                            .collect(),
                        ..c.clone()
                    })
                    .collect();
                if fitting.iter().any(|c| c.spans.is_empty()) {
                    // A cited line with nothing that fits the answer: this set cannot be
                    // stated.
                    return None;
                }
                let longest = fitting
                    .iter()
                    .flat_map(|c| c.spans.iter().map(|s| s.chars().count() + 16))
                    .max()
                    .unwrap_or(1);
                let fit = max_length.map_or(cited.len(), |m| (m + 1) / (longest + 1));
                let refs: Vec<&Citable> = fitting.iter().collect();
                let pattern = span_pattern(&refs, fit.clamp(1, cited.len()));
                if let Some(map) = target.as_object_mut() {
                    map.remove("minLength");
                    map.remove("maxLength");
                    map.insert("pattern".into(), json!(pattern));
                }
            }
        }
    }
    // The cited lines come first, so every later field is written after the quotes.
    reorder(&mut schema, &first);
    Some(schema)
}

/// Whether `value` is within `schema`'s numeric bounds.
fn within(schema: &Value, value: &Value) -> bool {
    let Some(x) = value.as_f64() else {
        return false;
    };
    let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
    bound("minimum").is_none_or(|m| x >= m) && bound("maximum").is_none_or(|m| x <= m)
}

/// Moves the top-level properties named by `pointers` (single-segment pointers) to the
/// front of `properties`, in that order; llguidance writes properties in declared order.
fn reorder(schema: &mut Value, pointers: &[String]) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    let mut front = Map::new();
    for pointer in pointers {
        let key = pointer.trim_start_matches('/');
        if key.contains('/') {
            continue;
        }
        if let Some(v) = properties.shift_remove(key) {
            front.insert(key.to_owned(), v);
        }
    }
    let rest = std::mem::take(properties);
    front.extend(rest);
    *properties = front;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn trial_store() -> SourceStore {
        let mut store = SourceStore::new();
        for (id, text) in [
            ("NCT04123456", "NCT04123456 (VELA-2) studies psoriasis with velorabine; status: completed.\nArm A: velorabine 10 mg; status: terminated; termination reason: futility.\nArm B: velorabine 25 mg; status: completed.\nArm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes."),
            ("NCT05550001", "NCT05550001 (CALM-PREVENT) studies migraine with calpetrant.\nArm A: calpetrant 70 mg; enrolled: 212."),
            ("NCT06012345", "NCT06012345 studies migraine with lumeditan.\nArm A: lumeditan 5 mg; enrolled: 96."),
            ("NCT05234567", "NCT05234567 studies asthma with bresolide.\nArm A: bresolide 200 mcg; enrolled: 150."),
        ] {
            store
                .insert(proviso_contract::SourceDocument::new(id, "r1", true, text))
                .unwrap();
        }
        store
    }

    /// A store of one version (`v1`, in force) of each document.
    fn store_of(documents: &[(&str, &str)]) -> SourceStore {
        let mut store = SourceStore::new();
        for (id, text) in documents {
            store
                .insert(proviso_contract::SourceDocument::new(id, "v1", true, text))
                .unwrap();
        }
        store
    }

    /// Every line of `source`'s first version, as a search would return it.
    fn observed(store: &SourceStore, source: &str) -> Vec<Value> {
        let d = &store.versions(source)[0];
        d.lines()
            .iter()
            .enumerate()
            .map(|(i, text)| json!({"quote": text, "source_id": source, "version": d.version(), "line_start": i + 1, "line_end": i + 1}))
            .collect()
    }

    #[test]
    fn citations_are_ranked_by_the_question() {
        let store = trial_store();
        let candidates = observed(&store, "NCT04123456");
        let ask = |q: &str| {
            rank_citations(&candidates, &Question::new(q, &store), &store, 4)
                .iter()
                .map(|c| c.citation["line_start"].as_u64().unwrap())
                .collect::<Vec<u64>>()
        };
        assert_eq!(
            ask("Which arms of trial NCT04123456 were terminated, and why?"),
            vec![2, 4]
        );
        // A label tells arms apart: the other arms are siblings, never offered.
        assert_eq!(ask("What does Arm C of NCT04123456 receive?"), vec![4]);
        // A line that only names the subject does not answer; nor does another trial's.
        assert!(ask("How many sites does NCT04123456 have?").is_empty());
        assert!(ask("What does Arm A of NCT05550001 receive?").is_empty());
    }

    /// A line stating more of what is asked beyond the subject comes first, however often
    /// another names the subject: the lead sentence names the hall, not who does the work.
    #[test]
    fn what_is_asked_beyond_the_subject_outranks_the_subject_named_again() {
        let rules: Vec<String> = (1..=20)
            .map(|n| format!("Rule {n} applies to members."))
            .collect();
        let store = store_of(&[
            ("PR", "Press release (fictional): Zephyr Hall to close for repairs\nZephyr Hall, at 5 Zephyr Road, will close on 2 June 2025 for building repairs at Zephyr Hall.\nThe work will be done by Marlow Builders Ltd."),
            ("RULES", &rules.join("\n")),
        ]);
        let candidates = observed(&store, "PR");
        let question = Question::new(
            "Which company is doing the building work at Zephyr Hall?",
            &store,
        );
        let ranked: Vec<u64> = rank_citations(&candidates, &question, &store, 4)
            .iter()
            .map(|c| c.citation["line_start"].as_u64().unwrap())
            .collect();
        assert_eq!(ranked, vec![3], "{:?}", question.beyond());
    }

    /// "What kind of drug is florimab?": the line defining it, over the lines that name
    /// it twice with its doses.
    #[test]
    fn what_kind_a_name_is_is_answered_by_the_line_defining_it() {
        let store = store_of(&[(
            "SYN",
            "Florimab study synopsis (fictional)\nArm A: florimab 5 mg receives florimab 5 mg by infusion every 4 weeks.\nArm B: florimab 10 mg receives florimab 10 mg by infusion every 4 weeks.\nThis Phase 2 study tests florimab, an engineered monoclonal antibody, in adults with asthma.",
        )]);
        let candidates = observed(&store, "SYN");
        let question = Question::new("What kind of drug is florimab?", &store);
        let ranked: Vec<u64> = rank_citations(&candidates, &question, &store, 4)
            .iter()
            .map(|c| c.citation["line_start"].as_u64().unwrap())
            .collect();
        assert_eq!(ranked.first(), Some(&4), "{ranked:?}");
    }

    /// "Is there a sign-up fee?": the line stating a sum settles it, over one that only
    /// names the plan and what joining it allows.
    #[test]
    fn whether_there_is_a_fee_is_settled_by_a_line_stating_a_sum() {
        let store = store_of(&[(
            "TERMS",
            "Garden club terms (fictional)\nThe Greenwell Garden Plan is a yearly membership of the Greenwell club for keen growers.\nYour son or daughter may join the Greenwell Garden Plan from age 8 if you put their name down.\nA one-off joining fee of £8 is taken with the first payment.",
        )]);
        let candidates = observed(&store, "TERMS");
        let question = Question::new(
            "Is there a sign-up fee if I put my son on the Greenwell Garden Plan?",
            &store,
        );
        assert!(question.asks_existence());
        // `Plan` goes on a name, so it names the subject and is not asked beyond it.
        assert!(
            !question.beyond().iter().any(|t| t.starts_with("plan")),
            "{:?}",
            question.beyond()
        );
        let ranked: Vec<u64> = rank_citations(&candidates, &question, &store, 4)
            .iter()
            .map(|c| c.citation["line_start"].as_u64().unwrap())
            .collect();
        assert_eq!(ranked.first(), Some(&4), "{ranked:?}");
        let question = Question::new("Do members of the plan pay a fee?", &store);
        assert!(!question.asks_existence());
    }

    /// A line need not repeat the words that say what kind of thing is asked for; a line
    /// that does not answer what is asked is still refused, and says why.
    #[test]
    fn the_kind_asked_for_need_not_be_repeated() {
        let mut store = SourceStore::new();
        for (id, text) in [
            (
                "ZEP",
                "Zephyr owner's guide
The Zephyr is an electric scooter with a 250 W motor.
Charge the Zephyr for 4 hours before the first ride.",
            ),
            (
                "GYM",
                "Gym timetable
Studio B hosts spinning on Mondays.",
            ),
            (
                "POOL",
                "Pool rules
Lanes are booked by the hour.",
            ),
            (
                "CAFE",
                "Cafe menu
Soup is served from noon.",
            ),
        ] {
            store
                .insert(proviso_contract::SourceDocument::new(id, "v1", true, text))
                .unwrap();
        }
        let kind = Question::new("What kind of vehicle is the Zephyr?", &store);
        assert_eq!(
            refusal(
                &kind,
                &store,
                "ZEP",
                "The Zephyr is an electric scooter with a 250 W motor."
            ),
            None
        );
        // Of two lines that share as much, the shorter comes first.
        let candidates: Vec<Value> = [
            "The Zephyr's kit has the charger, the lock, the bell, a pump, a bag and 2 keys.",
            "The Zephyr's charger is in pocket 2 of the kit.",
        ]
        .iter()
        .enumerate()
        .map(|(i, q)| json!({"quote": q, "source_id": "KIT", "version": "v1", "line_start": i + 2, "line_end": i + 2}))
        .collect();
        store
            .insert(proviso_contract::SourceDocument::new(
                "KIT",
                "v1",
                true,
                &format!(
                    "Zephyr kit\n{}\n{}",
                    candidates[0]["quote"].as_str().unwrap(),
                    candidates[1]["quote"].as_str().unwrap()
                ),
            ))
            .unwrap();
        let charger = Question::new("Where in the Zephyr's kit is the charger?", &store);
        let ranked = rank_citations(&candidates, &charger, &store, 2);
        assert_eq!(ranked[0].citation["line_start"], 3, "{ranked:?}");
        // A line that shares the name and states an amount of another measure.
        let weight = Question::new("How heavy is the Zephyr's motor?", &store);
        let refused = refusal(
            &weight,
            &store,
            "ZEP",
            "Charge the Zephyr for 4 hours before the first ride.",
        );
        assert!(refused.is_some());
    }

    /// A measure of nearness that finds every line equally near: a scripted encoder.
    #[derive(Debug)]
    struct Near(f32);

    impl proviso_contract::Nearness for Near {
        fn nearness(&self, _text: &str, lines: &[&str]) -> Option<Vec<f32>> {
            Some(vec![self.0; lines.len()])
        }
    }

    /// A line that shares one of the two words a question needs is offered when the
    /// sources' measure finds it near the question ([`NEAR`]), and refused otherwise: it
    /// says the rest in other words. Nearness never stands in for the only shared word.
    #[test]
    fn a_line_near_the_question_shares_one_more_word() {
        let text = "Loans\nRenew online, at any branch, or on the 24-hour line 01632 960 400.";
        let line = "Renew online, at any branch, or on the 24-hour line 01632 960 400.";
        let asked = "What number do I ring to renew my books by phone?";
        let measured = |near: Option<f32>| {
            let store = store_of(&[("LOANS", text)]);
            if let Some(n) = near {
                assert!(store.measure_with(Arc::new(Near(n))));
            }
            let question = Question::new(asked, &store);
            let ranked = rank_citations(&observed(&store, "LOANS"), &question, &store, 1);
            let why = refusal(&question, &store, "LOANS", line);
            (ranked.first().map(|c| c.citation["quote"].clone()), why)
        };
        let (offered, why) = measured(None);
        assert_eq!(offered, None);
        assert!(
            why.as_deref().is_some_and(|w| w.contains("shares too few")),
            "{why:?}"
        );
        let (offered, why) = measured(Some(0.5));
        assert_eq!(offered, None);
        assert!(
            why.as_deref().is_some_and(|w| w.contains("nearness 0.50")),
            "{why:?}"
        );
        let (offered, why) = measured(Some(0.7));
        assert_eq!(offered, Some(json!(line)), "{why:?}");
        assert_eq!(why, None);
        // A line sharing none of the question's words is not offered however near.
        let store = store_of(&[("LOANS", "Loans\nCall 01632 960 400 at any hour.")]);
        assert!(store.measure_with(Arc::new(Near(0.9))));
        let question = Question::new(asked, &store);
        assert!(rank_citations(&observed(&store, "LOANS"), &question, &store, 1).is_empty());
    }

    /// A record's field is not offered when its record's other lines say it is for another
    /// member of a series the question names one of.
    #[test]
    fn a_records_field_for_another_member_is_not_offered() {
        let records = [
            "id: AR-C01; name: Vale Roofing; type: roofer",
            "id: AR-C01; name: Vale Roofing; region: Central",
            "id: AR-C01; name: Vale Roofing; address: 17 Cooper's Walk, Thornbury Vale",
            "id: AR-S01; name: Saltmere Roofing; type: roofer",
            "id: AR-S01; name: Saltmere Roofing; region: South Coast",
            "id: AR-S01; name: Saltmere Roofing; address: Unit 12, Dunes Estate, Saltmere",
            "Region: Central; Loading: +5%",
            "Region: South Coast; Loading: +14%",
            "Region: North; Loading: 0%",
        ];
        let store = records_store("repairers", &records);
        let line = |n: usize| record_citation("repairers", &records, n);
        let q = Question::new(
            "What is the roofing address in the South Coast region?",
            &store,
        );
        let ranked = rank_citations(&[line(3), line(6)], &q, &store, 2);
        assert!(
            ranked.iter().all(|c| c.citation["line_start"] != 3),
            "{ranked:?}"
        );
        assert_eq!(ranked[0].citation["line_start"], 6, "{ranked:?}");
    }

    /// A store of one records document, `source` v1, in force.
    fn records_store(source: &str, records: &[&str]) -> SourceStore {
        let mut store = SourceStore::new();
        store
            .insert(
                proviso_contract::SourceDocument::new(source, "v1", true, &records.join("\n"))
                    .records(),
            )
            .unwrap();
        store
    }

    /// The search result citing record `n` (from 1) of `records`, of `source` v1.
    fn record_citation(source: &str, records: &[&str], n: usize) -> Value {
        json!({"quote": records[n - 1], "source_id": source, "version": "v1",
            "line_start": n, "line_end": n})
    }

    /// A record's line is ranked with what its record's other lines say, and a record of
    /// another id gives way to one of the asked id.
    #[test]
    fn a_records_line_is_ranked_by_its_record_and_its_id() {
        let records = [
            "route: Bus 4; runs: Bus 4 runs from the Interchange to the hospital.",
            "route: Bus 4; first_last: The first Bus 4 leaves at 05:50.",
            "route: Bus X9; runs: Bus X9 is an express bus to the airport.",
            "route: Bus X9; first_last: The first Bus X9 leaves at 04:40.",
            "route: Night bus N1; times: Night bus N1 runs every 30 minutes on weekday mornings.",
            "route: Tram T1; times: On weekdays Tram T1 runs every 6 minutes.",
        ];
        let mut store = records_store("routes", &records);
        let line = |n: usize| record_citation("routes", &records, n);
        let first = Question::new("When does the first airport express bus leave?", &store);
        let ranked = rank_citations(&[line(2), line(4)], &first, &store, 2);
        assert_eq!(ranked[0].citation["line_start"], 4, "{ranked:?}");
        let often = Question::new(
            "How often does the T1 tram come on weekday mornings?",
            &store,
        );
        let ranked = rank_citations(&[line(5), line(6)], &often, &store, 2);
        assert_eq!(ranked[0].citation["line_start"], 6, "{ranked:?}");
        assert!(ranked.iter().all(|c| c.citation["line_start"] != 5));
        // Which of a one-version document's two lines `question` ranks first, whichever
        // order they were found in.
        let first_of = |store: &mut SourceStore, id: &str, lines: [&str; 2], question: &str| {
            store
                .insert(proviso_contract::SourceDocument::new(
                    id,
                    "v1",
                    true,
                    &lines.join("\n"),
                ))
                .unwrap();
            let question = Question::new(question, store);
            let cite = |n: usize| {
                json!({"quote": lines[n - 1], "source_id": id, "version": "v1",
                    "line_start": n, "line_end": n})
            };
            // The same line comes first whichever was found first.
            let firsts: Vec<Value> = [[cite(1), cite(2)], [cite(2), cite(1)]]
                .iter()
                .map(|c| rank_citations(c, &question, store, 2)[0].citation["line_start"].clone())
                .collect();
            assert_eq!(firsts[0], firsts[1], "{firsts:?}");
            firsts[0].clone()
        };
        // A title line that states as much of what is asked gives way to the body's.
        let notice = [
            "Notice: tram track renewal, issued on 2 March 2026.",
            "The trams stop while the track is renewed, from 11 April 2026 to 26 April 2026.",
        ];
        let first = first_of(
            &mut store,
            "notice",
            notice,
            "When is the tram track renewed?",
        );
        assert_eq!(first, 2);
        // A record's first line is no title: the trial's own status comes before an arm's.
        let registry = [
            "ZX-1: title: A Study of Orvane in Gout; status: recruiting.",
            "Arm A: orvane 5 mg; status: active; enrolled: 40.",
        ];
        let status = "What is the status of the ZX-1 trial?";
        assert_eq!(first_of(&mut store, "ZX-1", registry, status), 1);
    }

    #[test]
    fn a_plural_which_prefers_the_line_naming_more() {
        // Two lines that state as much of "closed", the shorter naming one pool, the longer
        // both: "which pools" asks for every one.
        let lines = [
            "Pool B closed in May for a leak in its filter room.",
            "Pool A closed in March for repairs to the roof and Pool B closed in May for a leak.",
        ];
        let mut store = SourceStore::new();
        store
            .insert(proviso_contract::SourceDocument::new(
                "notice",
                "v1",
                true,
                &lines.join("\n"),
            ))
            .unwrap();
        let cite = |n: usize| {
            json!({"quote": lines[n - 1], "source_id": "notice", "version": "v1",
                "line_start": n, "line_end": n})
        };
        let plural = Question::new("Which pools closed, and why?", &store);
        assert_eq!(plural.members_named(lines[1]), 2);
        for found in [[cite(1), cite(2)], [cite(2), cite(1)]] {
            let ranked = rank_citations(&found, &plural, &store, 2);
            assert_eq!(ranked[0].citation["line_start"], 2, "{ranked:?}");
        }
        // A question about one asks for no list.
        let one = Question::new("Why did Pool B close?", &store);
        assert_eq!(one.members_named(lines[1]), 0);
    }

    #[test]
    fn the_answer_is_made_of_spans_that_answer_the_question() {
        let store = trial_store();
        let question = Question::new(
            "How many participants are in the calpetrant 70 mg arm?",
            &store,
        );
        let line = json!({"quote": "Arm A: calpetrant 70 mg; enrolled: 212.", "source_id": "NCT05550001",
            "version": "r1", "line_start": 2, "line_end": 2});
        let ranked = rank_citations(&[line], &question, &store, 4);
        assert_eq!(ranked.len(), 1);
        let refs: Vec<&Citable> = ranked.iter().collect();
        let re = regex_lite(&span_pattern(&refs, 1));
        assert!(
            re("Arm A: calpetrant 70 mg; enrolled: 212."),
            "{:?}",
            ranked[0].spans
        );
        assert!(!re("Arm A: calpetrant 70 mg"));
        assert!(!re("The arm enrolled 208."));
        let superseded = Citable {
            citation: json!({"version": "v1"}),
            spans: vec!["The limit is 600 yuan.".into()],
            superseded: true,
        };
        let re = regex_lite(&span_pattern(&[&superseded], 1));
        assert!(re("v1 (superseded): The limit is 600 yuan."));
        assert!(!re("The limit is 600 yuan."));
    }

    /// A tiny matcher for the test: the pattern is compiled by the `regex` engine the
    /// contract crate already uses for evidence.
    fn regex_lite(pattern: &str) -> impl Fn(&str) -> bool {
        let re = regex::Regex::new(pattern).unwrap();
        move |s| re.is_match(s)
    }

    #[test]
    fn ids_are_held_to_the_ones_the_conversation_named() {
        let named = named_values(
            "^NCT[0-9]{8}$",
            &[
                "Which arms of NCT04123456 stopped?",
                "see NCT05550001, not NCT1",
            ],
        );
        assert_eq!(named, vec!["NCT04123456", "NCT05550001"]);
        assert!(named_values("^DOC-[A-Z0-9-]{2,30}$", &["DOC-LUM-PR-01"]) == vec!["DOC-LUM-PR-01"]);
    }

    #[test]
    fn the_first_search_is_the_question_then_its_content_words() {
        assert_eq!(
            first_queries("How many  items can I\nborrow on an adult card?"),
            vec![
                "How many items can I borrow on an adult card?".to_owned(),
                "items borrow adult card".to_owned()
            ]
        );
        assert!(first_queries("Is it?").is_empty());
    }

    #[test]
    fn queries_are_ordered_runs_of_the_question_words() {
        let words = query_words("What are the adverse events of lumeditan?");
        assert_eq!(words, vec!["adverse", "events", "lumeditan"]);
        let all = queries(&words, 8).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0], "adverse events lumeditan");
        assert!(all.contains(&"adverse lumeditan".to_owned()));
        assert!(!all.contains(&"lumeditan".to_owned()));
        assert!(!all.contains(&"lumeditan adverse".to_owned()));
    }

    #[test]
    fn search_queries_are_held_to_the_question_words() {
        let re =
            regex_lite(&words_pattern("What are the adverse events of lumeditan?", 4).unwrap());
        assert!(re("adverse events lumeditan"));
        assert!(re("lumeditan"));
        assert!(!re("lumeditan adverse events"));
        assert!(!re("adverse adverse"));
        assert!(!re("adverse events of lumeditan"));
        assert!(!re("the"));
        assert!(!re("screens_trials_list_by_id"));
        assert!(!re("lumeditan adverse events of the lumeditan"));
    }

    #[test]
    fn citation_sets_are_ordered_subsets() {
        assert_eq!(
            subsets(&[1, 2, 3], 2, 16),
            vec![vec![1], vec![1, 2], vec![1, 3]]
        );
        assert_eq!(subsets(&[1, 2, 3], 3, 16).len(), 4);
        assert_eq!(subsets(&[1, 2, 3], 3, 2).len(), 2);
    }

    /// One tool, `read`, with an optional `version` of two: six calls in all.
    fn versioned_read() -> Registry {
        Registry::new(vec![proviso_tools::ToolSpec::new(
            "read",
            "Reads.",
            proviso_contract::IntentClass::Read,
            json!({"type": "object", "properties": {"version": {"enum": ["v1", "v2"]}},
                "additionalProperties": false}),
        )])
        .unwrap()
    }

    /// A `read` with `arguments` that ran in `step` and came to `outcome`.
    fn read_ran(step: u64, arguments: Value, outcome: ToolOutcome) -> ExecutedCall {
        ExecutedCall {
            step,
            call: proviso_contract::ToolCall::new(
                Some("c".into()),
                "read".into(),
                arguments.as_object().unwrap().clone(),
                proviso_contract::IntentClass::Read,
            ),
            outcome,
            duration_ms: 0,
        }
    }

    #[test]
    fn finite_tools_are_narrowed_and_exhausted() {
        let registry = versioned_read();
        let ran = |a: Value| read_ran(1, a, ToolOutcome::Ok { result: json!({}) });
        let one = narrow(&registry, CallFormat::Hermes, &[ran(json!({}))], None, &[]);
        assert_eq!(one.excluded, vec!["read {}"]);
        assert!(one.avoid.is_empty());
        assert_eq!(
            one.registry.get("read").unwrap().spec().parameters()["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let all = narrow(
            &registry,
            CallFormat::Hermes,
            &[
                ran(json!({})),
                ran(json!({"version": "v1"})),
                ran(json!({"version": "v2"})),
            ],
            None,
            &[],
        );
        assert_eq!(all.exhausted, vec!["read"]);
        assert!(all.registry.is_empty());
    }

    /// A read naming the version in force is the read that named no version: once either
    /// ran, both leave the grammar, and a read of another source stays.
    #[test]
    fn a_read_of_the_version_in_force_named_or_not_is_one_read() {
        let store = store_of(&[("faq", "A line."), ("prices", "A line.")]);
        let registry = Registry::new(vec![proviso_tools::ToolSpec::new(
            "read",
            "Reads.",
            proviso_contract::IntentClass::Read,
            json!({"type": "object", "properties": {
                "source_id": {"enum": ["faq", "prices"]}, "version": {"enum": ["v1"]}},
                "required": ["source_id"], "additionalProperties": false}),
        )])
        .unwrap();
        let ran = [read_ran(
            1,
            json!({"source_id": "faq"}),
            ToolOutcome::Ok { result: json!({}) },
        )];
        let tools = vec!["read".to_owned()];
        let left = |n: &proviso_tools::steer::Narrowed| {
            n.registry.get("read").unwrap().spec().parameters()["anyOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v["const"].clone())
                .collect::<Vec<_>>()
        };
        let same = narrow(&registry, CallFormat::Hermes, &ran, Some(&store), &tools);
        assert_eq!(
            left(&same),
            vec![
                json!({"source_id": "prices"}),
                json!({"source_id": "prices", "version": "v1"})
            ]
        );
        // Without the store, the arguments alone tell calls apart.
        let apart = narrow(&registry, CallFormat::Hermes, &ran, None, &tools);
        assert_eq!(left(&apart).len(), 3);
    }

    /// Every line a run's reads returned is ranked, however long the documents read
    /// before: the third read of a run is where the fact often is.
    #[test]
    fn lines_of_a_later_read_are_seen_after_long_ones() {
        let long: Vec<String> = (1..=60)
            .map(|i| format!("Line {i} of the long one."))
            .collect();
        let long = long.join("\n");
        let store = store_of(&[("LONG", &long), ("SHORT", "The fact.")]);
        let long = store.versions("LONG")[0].read_result();
        let short = store.versions("SHORT")[0].read_result();
        let seen = cited_lines(&[&long, &short], &store, false);
        assert_eq!(seen.len(), 61);
        assert!(seen.iter().any(|c| c["quote"] == "The fact."));
    }

    /// A call that timed out may be written once more (in a later step); one that timed out
    /// twice, or failed otherwise, may not.
    #[test]
    fn a_call_that_timed_out_once_may_run_again() {
        let registry = versioned_read();
        let ran =
            |step: u64, outcome: ToolOutcome| read_ran(step, json!({"version": "v1"}), outcome);
        let late = || ToolOutcome::TimedOut { after_ms: 10 };
        // Written twice in its step, it ran once: it may still be tried again.
        let once = narrow(
            &registry,
            CallFormat::Hermes,
            &[ran(1, late()), ran(1, late())],
            None,
            &[],
        );
        assert!(once.excluded.is_empty(), "{:?}", once.excluded);
        let twice = narrow(
            &registry,
            CallFormat::Hermes,
            &[ran(1, late()), ran(2, late())],
            None,
            &[],
        );
        assert_eq!(twice.excluded, vec![r#"read {"version":"v1"}"#]);
        let refused = ToolOutcome::Failed {
            failure: crate::ToolFailure::new("not_found", "no"),
        };
        let failed = narrow(&registry, CallFormat::Hermes, &[ran(1, refused)], None, &[]);
        assert_eq!(failed.excluded, vec![r#"read {"version":"v1"}"#]);
        let answered = narrow(
            &registry,
            CallFormat::Hermes,
            &[
                ran(1, late()),
                ran(2, ToolOutcome::Ok { result: json!({}) }),
            ],
            None,
            &[],
        );
        assert_eq!(answered.excluded, vec![r#"read {"version":"v1"}"#]);
    }

    /// A question about an earlier version is answered from a superseded version only,
    /// and the read that brings one comes first, even when no result named it.
    #[test]
    fn a_question_about_an_earlier_version_reads_and_cites_a_superseded_one() {
        let mut store = SourceStore::new();
        for (version, in_force, text) in [
            ("v1", false, "Club fees schedule, version 1 (fictional).\nReserving a court costs £1.50 per hour."),
            ("v2", true, "Club fees schedule, version 2 (fictional).\nReserving a court costs £1.00 per hour."),
        ] {
            store
                .insert(proviso_contract::SourceDocument::new("FEES", version, in_force, text))
                .unwrap();
        }
        store
            .insert(proviso_contract::SourceDocument::new(
                "GUIDE",
                "v1",
                true,
                "Members' guide (fictional)\nReserving a court is done at the desk.",
            ))
            .unwrap();
        let line = |version: &str, n: usize| {
            let d = store
                .versions("FEES")
                .iter()
                .find(|d| d.version() == version)
                .unwrap();
            json!({"quote": d.lines()[n - 1], "source_id": "FEES", "version": version,
                "line_start": n, "line_end": n})
        };
        let earlier = Question::new(
            "What did reserving a court cost under the old fees?",
            &store,
        );
        assert!(earlier.asks_earlier_version());
        let ranked = rank_citations(&[line("v2", 2), line("v1", 2)], &earlier, &store, 4);
        let versions: Vec<&str> = ranked
            .iter()
            .map(|c| c.citation["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["v1"]);
        // Only the version in force seen: nothing answers an earlier-version question.
        assert!(rank_citations(&[line("v2", 2)], &earlier, &store, 4).is_empty());
        let now = Question::new("What does reserving a court cost?", &store);
        assert!(!rank_citations(&[line("v2", 2)], &now, &store, 4).is_empty());

        let read = proviso_tools::ToolSpec::new(
            "read_doc",
            "Reads a document.",
            proviso_contract::IntentClass::Read,
            json!({"type": "object", "properties": {
                "source_id": {"enum": ["GUIDE", "FEES"]}, "version": {"enum": ["v1", "v2"]}},
                "required": ["source_id"], "additionalProperties": false}),
        );
        let whole = Registry::new(vec![read.clone()]).unwrap();
        // The results named only GUIDE: the grounded reads hold GUIDE alone.
        let grounded = Registry::new(vec![read.with_parameters(json!({"type": "object",
            "properties": {"source_id": {"enum": ["GUIDE"]}},
            "required": ["source_id"], "additionalProperties": false}))])
        .unwrap();
        let tools = vec!["read_doc".to_owned()];
        let (_, arguments) =
            next_read(&grounded, &whole, &tools, &[], &store, |_| Some(0.0), true).unwrap();
        assert_eq!(
            Value::Object(arguments),
            json!({"source_id": "FEES", "version": "v1"})
        );
        let (_, arguments) =
            next_read(&grounded, &whole, &tools, &[], &store, |_| Some(0.0), false).unwrap();
        assert_eq!(Value::Object(arguments), json!({"source_id": "GUIDE"}));
    }

    #[test]
    fn a_read_of_the_version_in_force_is_one_read_and_reads_are_shown_by_the_question() {
        let mut store = trial_store();
        store
            .insert(proviso_contract::SourceDocument::new(
                "NCT05550001",
                "r0",
                false,
                "An earlier record.",
            ))
            .unwrap();
        let args = |v: Value| v.as_object().unwrap().clone();
        let named = read_versions(&args(json!({"id": "NCT05550001", "version": "r1"})), &store);
        let unnamed = read_versions(&args(json!({"id": "NCT05550001"})), &store);
        let earlier = read_versions(&args(json!({"id": "NCT05550001", "version": "r0"})), &store);
        assert_eq!(named, unnamed);
        assert_ne!(named, earlier);
        assert!(read_versions(&args(json!({"query": "migraine"})), &store).is_empty());

        let question = Question::new("Why was Arm C of NCT04123456 stopped?", &store);
        let lines: Vec<Value> = (1..=30)
            .map(|i| {
                let text = if i == 17 {
                    "Arm C: stopped for liver enzymes.".to_owned()
                } else {
                    format!("Line {i} says nothing here.")
                };
                json!({"line": i, "text": text})
            })
            .collect();
        let outcome = ToolOutcome::Ok {
            result: json!({"source_id": "NCT04123456", "lines": lines}),
        };
        let shown = shown_outcome(&outcome, Some(&question));
        let kept = shown["result"]["lines"].as_array().unwrap();
        assert_eq!(kept.len(), SHOWN_LINES);
        assert!(kept.iter().any(|l| l["line"] == 17), "{kept:?}");
        assert_eq!(shown["result"]["lines_not_shown"], 30 - SHOWN_LINES);
        assert_eq!(shown["status"], "ok");
        // Without a question, or with few lines, the result is shown whole.
        assert_eq!(
            shown_outcome(&outcome, None),
            serde_json::to_value(&outcome).unwrap()
        );
    }
}
