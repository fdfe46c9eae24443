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

use proviso_contract::{Claim, Contract, EvidencePolicy, SourceStore};
use proviso_tools::{finite_arguments, CallFormat, Registry, ToolChoice};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::agent::ExecutedCall;
use crate::toolbox::ToolOutcome;

/// Most argument objects a tool may admit for the harness to enumerate them in the grammar.
const FINITE_LIMIT: usize = 300;
/// Most values a grounded free-text argument is enumerated into (beyond it, a pattern).
const MAX_QUERIES: usize = 255;
/// Most observed lines offered as citations in one answer grammar.
const MAX_CANDIDATES: usize = 48;

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
    }
}

/// The registry narrowed by what already ran, with the calls the grammar could not exclude.
pub(crate) struct Narrowed {
    pub(crate) registry: Registry,
    pub(crate) avoid: Vec<String>,
    pub(crate) excluded: Vec<String>,
    pub(crate) exhausted: Vec<String>,
    pub(crate) avoided: Vec<String>,
}

fn describe(name: &str, arguments: &Map<String, Value>) -> String {
    format!("{name} {}", Value::Object(arguments.clone()))
}

/// Narrows `registry` by the calls in `executed`.
pub(crate) fn narrow(
    registry: &Registry,
    format: CallFormat,
    executed: &[ExecutedCall],
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
        let ran: Vec<&Map<String, Value>> = executed
            .iter()
            .filter(|e| e.call.name() == spec.name())
            .map(|e| e.call.arguments())
            .collect();
        if ran.is_empty() {
            specs.push(spec.clone());
            continue;
        }
        match finite_arguments(spec.parameters(), FINITE_LIMIT) {
            Some(all) => {
                let left: Vec<&Map<String, Value>> =
                    all.iter().filter(|a| !ran.contains(a)).collect();
                for a in &ran {
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
                for a in &ran {
                    out.avoid.push(format.call_text(spec.name(), a));
                    out.avoided.push(describe(spec.name(), a));
                }
                specs.push(spec.clone());
            }
        }
    }
    out.avoid.sort();
    out.avoid.dedup();
    out.avoided.sort();
    out.avoided.dedup();
    out.excluded.sort();
    out.excluded.dedup();
    // The narrowed schemas are built from the declared ones; should one fail to register,
    // the declared registry is used and the gates refuse a repeat as before.
    out.registry = Registry::new(specs).unwrap_or_else(|_| registry.clone());
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

/// Every line a tool returned in this run that `store` holds, in force, quoted exactly, as
/// a citation object (quote first, so a model choosing among them reads the text before
/// the numbers).
///
/// A tool result cites lines by carrying objects with `source_id` and `version` and either
/// `lines` (an array of `{line, text}`) or a single `line` and `text`, at any depth.
#[must_use]
pub fn observed_citations(executed: &[ExecutedCall], store: &SourceStore) -> Vec<Value> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for call in executed {
        if let ToolOutcome::Ok { result } = &call.outcome {
            collect(result, store, &mut found, &mut seen);
        }
    }
    found
}

fn collect(
    value: &Value,
    store: &SourceStore,
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
                            && d.in_force()
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
                collect(v, store, found, seen);
            }
        }
        Value::Array(items) => {
            for v in items {
                collect(v, store, found, seen);
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

fn regex_escape(text: &str) -> String {
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

/// Words that carry no content: they neither rank a line nor need to be quoted to be said.
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "because",
    "been", "before", "both", "but", "by", "did", "do", "does", "due", "each", "for", "from",
    "had", "has", "have", "how", "if", "in", "into", "is", "it", "its", "many", "may", "more",
    "most", "much", "no", "none", "not", "of", "on", "one", "only", "or", "other", "over", "per",
    "so", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "those", "to", "two", "under", "up", "was", "were", "what", "when", "where", "which", "while",
    "who", "why", "will", "with", "within", "yes",
];

/// The words of `text`, as written (letters and digits; everything else separates).
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A crude stem, so `terminated` meets `termination` and `arms` meets `arm`: lower case,
/// a plural `s` dropped, then the first five characters.
fn stem(word: &str) -> String {
    let lower = word.to_lowercase();
    // An id is a name: `NCT04123456` must not meet `NCT04890123`.
    if lower.chars().any(|c| c.is_ascii_digit()) {
        return lower;
    }
    let singular = match lower.strip_suffix('s') {
        Some(rest) if rest.chars().count() >= 3 && !rest.ends_with('s') => rest,
        _ => lower.as_str(),
    };
    singular.chars().take(5).collect()
}

/// The content words of `text`, stemmed, in order. A capital letter standing alone after
/// the first word is a label (`Arm A`), not the article `a`.
fn content_stems(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .enumerate()
        .filter(|(i, w)| {
            let label = *i > 0 && w.len() == 1 && w.chars().all(|c| c.is_ascii_uppercase());
            label || !FUNCTION_WORDS.contains(&w.to_lowercase().as_str())
        })
        .map(|(_, w)| stem(w))
        .collect()
}

/// Whether a question asks for a quantity, so that a line stating a number is the better
/// evidence.
fn asks_quantity(question: &str) -> bool {
    let q = question.to_lowercase();
    let how = [
        "how many",
        "how much",
        "how long",
        "how often",
        "how old",
        "within how",
        "percentage",
        "number of",
    ];
    // A `what is the … limit` question asks for the amount; `is … included in the limit`
    // does not.
    let what = ["what is", "what's", "what are", "which is"];
    let measure = [
        "limit", "amount", "maximum", "minimum", "longest", "shortest", "cost", "price", "dose",
    ];
    how.iter().any(|k| q.contains(k))
        || (what.iter().any(|k| q.starts_with(k)) && measure.iter().any(|k| q.contains(k)))
}

/// Whether a question asks for a time (a date, a year, a week of a schedule), so that a line
/// stating one is the better evidence.
fn asks_time(question: &str) -> bool {
    let q = question.to_lowercase();
    let first = words(&q).first().copied().unwrap_or("");
    first == "when"
        || [
            "what date",
            "which date",
            "what year",
            "which year",
            "what day",
            "which day",
            "what time",
            "since when",
            "until when",
            "by when",
            "how soon",
        ]
        .iter()
        .any(|k| q.contains(k))
}

/// Whether a line states a time: an ISO date (`2026-01-08`, `2026-01`), a year, a month's
/// name, or a numbered week, day or month (`week 24`).
fn states_time(text: &str) -> bool {
    const MONTHS: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    const UNITS: [&str; 8] = [
        "week", "weeks", "day", "days", "month", "months", "year", "years",
    ];
    let lower = text.to_lowercase();
    let tokens = words(&lower);
    let iso = text
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .any(|t| {
            let parts: Vec<&str> = t.split('-').collect();
            parts.len() >= 2
                && parts[0].len() == 4
                && parts[1..].iter().all(|p| p.len() == 2)
                && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit()))
        });
    let year = tokens.iter().any(|t| {
        t.len() == 4
            && t.chars().all(|c| c.is_ascii_digit())
            && (t.starts_with("19") || t.starts_with("20"))
    });
    let month = tokens.iter().any(|t| MONTHS.contains(t));
    let numbered = tokens.windows(2).any(|w| {
        (UNITS.contains(&w[0]) && w[1].chars().all(|c| c.is_ascii_digit()))
            || (w[0].chars().all(|c| c.is_ascii_digit()) && UNITS.contains(&w[1]))
    });
    iso || year || month || numbered
}

/// The words of every source of a store (over all its versions) and of the agent's domain
/// (its tools' names and descriptions), computed once per agent: what tells a question's
/// subject apart from the words every source or the domain itself uses.
#[derive(Debug, Clone, Default)]
pub struct SourceWords {
    sources: std::collections::BTreeMap<String, BTreeSet<String>>,
    domain: BTreeSet<String>,
}

impl SourceWords {
    /// The words of `store`'s sources and of `domain`.
    #[must_use]
    pub fn new(store: &SourceStore, domain: &str) -> Self {
        let mut sources: std::collections::BTreeMap<String, BTreeSet<String>> =
            std::collections::BTreeMap::new();
        for d in store.documents() {
            sources
                .entry(d.source_id().to_owned())
                .or_default()
                .extend(d.lines().iter().flat_map(|l| content_stems(l)));
        }
        Self {
            sources,
            domain: content_stems(domain).into_iter().collect(),
        }
    }

    /// The specific words of `question`: its ids (words with digits that a source states),
    /// and the words few sources state (at most a quarter of them) that are not words of the
    /// domain (`trial`, `arm`, `policy` name the domain, not a subject within it). Each with
    /// its weight: the rarer, the more it names the subject. Empty for a store of fewer
    /// than four sources, which has no subjects to tell apart.
    #[must_use]
    pub fn subject_terms(&self, question: &str) -> Vec<(String, f64)> {
        if self.sources.len() < 4 {
            return Vec::new();
        }
        let limit = self.sources.len() / 4;
        content_stems(question)
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|stem| {
                let n = self
                    .sources
                    .values()
                    .filter(|stems| stems.contains(&stem))
                    .count();
                // An id is specific however many sources mention it.
                let id = stem.chars().any(|c| c.is_ascii_digit());
                let specific = id || (n <= limit && !self.domain.contains(&stem));
                (n > 0 && specific).then(|| (stem, 1.0 / n as f64))
            })
            .collect()
    }

    /// The candidates whose source states the subject of the question (see
    /// [`SourceWords::subject_terms`]): every id of it, or, without one, specific words
    /// carrying at least half of their weight (a rare word may be missing; the drug's name
    /// may not). A line about another drug or another trial is dropped however well it
    /// matches the rest of the question, so a true line does not answer the wrong subject.
    #[must_use]
    pub fn on_subject(&self, candidates: &[Value], subject: &[(String, f64)]) -> Vec<Value> {
        if subject.is_empty() {
            return candidates.to_vec();
        }
        type Weighted<'a> = Vec<&'a (String, f64)>;
        let (ids, names): (Weighted<'_>, Weighted<'_>) = subject
            .iter()
            .partition(|(s, _)| s.chars().any(|c| c.is_ascii_digit()));
        let total: f64 = names.iter().map(|(_, w)| w).sum();
        candidates
            .iter()
            .filter(|c| {
                let id = c.get("source_id").and_then(Value::as_str).unwrap_or("");
                self.sources.get(id).is_some_and(|stems| {
                    if ids.is_empty() {
                        let stated: f64 = names
                            .iter()
                            .filter(|(s, _)| stems.contains(s))
                            .map(|(_, w)| w)
                            .sum();
                        stated * 2.0 >= total
                    } else {
                        ids.iter().all(|(s, _)| stems.contains(s))
                    }
                })
            })
            .cloned()
            .collect()
    }
}

/// The candidates that answer `question` best, best first (at most `keep`); none when no
/// line states enough of the question to answer it.
///
/// A line must state two of the question's words (or its only one), and one of the words
/// that not every candidate states (ids aside): a line that only names the subject that all
/// of them share (a title) says something, but not the answer. Lines are scored by the words
/// they share with the question, each weighted by how rare it is among the candidates
/// (`breakfast` tells lines apart, `limit` less), plus the pairs of consecutive words they
/// share in order (a phrase says more than its words apart). When the question asks for a
/// quantity, only lines that state a number are kept (if any does). Lines scoring less
/// than half the best
/// are dropped: a small model otherwise copies whichever line starts like the question.
#[must_use]
pub fn rank_citations(
    candidates: &[Value],
    question: &str,
    subject: &[(String, f64)],
    keep: usize,
) -> Vec<Value> {
    let terms = content_stems(question);
    let distinct: BTreeSet<&String> = terms.iter().collect();
    let quantity = asks_quantity(question);
    let time = asks_time(question);
    let lines: Vec<Vec<String>> = candidates
        .iter()
        .map(|c| content_stems(c.get("quote").and_then(Value::as_str).unwrap_or("")))
        .collect();
    // What the question asks beyond its subject. The subject is its ids, or else its
    // rarest words (within a factor of 1.5 of the rarest): `CALM-PREVENT` in "How many
    // sites does CALM-PREVENT have?", where `sites` is rare too, but less.
    let ids: BTreeSet<&String> = subject
        .iter()
        .filter(|(s, _)| s.chars().any(|c| c.is_ascii_digit()))
        .map(|(s, _)| s)
        .collect();
    let rarest = subject.iter().map(|(_, w)| *w).fold(0.0_f64, f64::max);
    let named: BTreeSet<&String> = if ids.is_empty() {
        subject
            .iter()
            .filter(|(_, w)| w * 1.5 >= rarest)
            .map(|(s, _)| s)
            .collect()
    } else {
        ids
    };
    let asked: BTreeSet<&String> = distinct
        .iter()
        .filter(|t| !named.contains(**t))
        .copied()
        .collect();
    let least = distinct.len().clamp(1, 2);
    let n = candidates.len().max(1) as f64;
    let idf = |term: &String| {
        let df = lines.iter().filter(|l| l.contains(term)).count().max(1) as f64;
        (1.0 + n / df).ln()
    };
    let mut scored: Vec<(f64, usize, &Value, bool)> = Vec::new();
    for (i, (c, stems)) in candidates.iter().zip(&lines).enumerate() {
        let set: BTreeSet<&String> = stems.iter().collect();
        let shared: Vec<&&String> = distinct.iter().filter(|t| set.contains(**t)).collect();
        if shared.len() < least || (!asked.is_empty() && !asked.iter().any(|t| set.contains(*t))) {
            continue;
        }
        let mut score: f64 = shared.iter().map(|t| idf(t)).sum();
        let pairs: BTreeSet<(&String, &String)> =
            stems.windows(2).map(|w| (&w[0], &w[1])).collect();
        for w in terms.windows(2) {
            if pairs.contains(&(&w[0], &w[1])) {
                score += (idf(&w[0]) + idf(&w[1])) / 2.0;
            }
        }
        let text = c.get("quote").and_then(Value::as_str).unwrap_or("");
        // A number, not an id that contains digits.
        let states_number = words(text)
            .iter()
            .any(|w| w.chars().all(|c| c.is_ascii_digit()));
        // The question's kind: a quantity wants a number, a time wants a date.
        let answers_kind = (!quantity || states_number) && (!time || states_time(text));
        scored.push((score, i, c, answers_kind));
    }
    // A line that answers the question's kind (a number for a quantity, a date for a time)
    // is the better evidence, when any does.
    if (quantity || time) && scored.iter().any(|s| s.3) {
        scored.retain(|s| s.3);
    }
    let mut scored: Vec<(f64, usize, &Value)> =
        scored.into_iter().map(|(s, i, c, _)| (s, i, c)).collect();
    if scored.is_empty() {
        return Vec::new();
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let best = scored[0].0;
    scored
        .into_iter()
        .filter(|(s, _, _)| s * 2.0 > best)
        .take(keep)
        .map(|(_, _, c)| c.clone())
        .collect()
}

/// The prefixes of `quote` that end at a clause boundary (before `; ` or after a full stop
/// followed by a space), and the whole quote: the extracts an answer may take from it.
fn extracts(quote: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = quote.as_bytes();
    for (i, _) in quote.match_indices("; ") {
        out.push(quote[..i].to_owned());
    }
    for (i, _) in quote.match_indices(". ") {
        if bytes.get(i + 2).is_some_and(u8::is_ascii_uppercase) {
            out.push(quote[..=i].to_owned());
        }
    }
    out.push(quote.to_owned());
    out.sort();
    out.dedup();
    out
}

/// A pattern for answer text made of extracts of the lines: each extract is a line from its
/// start up to a clause boundary (or the whole line), and extracts are joined by spaces.
/// The answer restates what the lines say with their subject, and cannot add a word, a
/// number or a combination they do not contain.
fn extractive_pattern(quotes: &[&str], max_extracts: usize) -> String {
    // One group per cited line, in citation order; the answer takes extracts from some of
    // them, in that order, each line at most once. A count bound, not a length bound: the
    // decoder's regex engine cannot always decide a long alternation under a length limit.
    let groups: Vec<String> = quotes
        .iter()
        .map(|q| {
            let mut alternatives: Vec<String> =
                extracts(q).iter().map(|e| regex_escape(e)).collect();
            alternatives.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
            format!("(?:{})", alternatives.join("|"))
        })
        .collect();
    let max = max_extracts.max(1);
    let mut starts: Vec<String> = Vec::new();
    // The answer starts with the first cited line (the best one).
    for first in 0..groups.len().min(1) {
        let rest: Vec<String> = groups[first + 1..]
            .iter()
            .take(max - 1)
            .map(|g| format!("(?: {g})?"))
            .collect();
        starts.push(format!("{}{}", groups[first], rest.join("")));
    }
    format!("^(?:{})$", starts.join("|"))
}

/// A pattern for a short free-text value (a search query) made of the words of `text` and
/// function words, at most `max_words` of them, separated by spaces: the value can only
/// The question's content words, in order, each once.
fn query_words(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    words(text)
        .into_iter()
        .filter(|w| !FUNCTION_WORDS.contains(&w.to_lowercase().as_str()))
        .filter(|w| seen.insert(w.to_lowercase()))
        .map(str::to_owned)
        .collect()
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

/// name what the conversation named.
fn words_pattern(text: &str, max_words: usize) -> Option<String> {
    // Content words only, in the question's order, each at most once: a function word is
    // never what a search needs, and a small model left free writes `the the the` or
    // `adverse adverse adverse`.
    let mut seen = BTreeSet::new();
    let content: Vec<String> = words(text)
        .into_iter()
        .filter(|w| !FUNCTION_WORDS.contains(&w.to_lowercase().as_str()))
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
    // A query is a run of these words in order, some skipped: one alternative per first
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
fn is_free_text(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("string")
        && ["enum", "const", "pattern", "format"]
            .iter()
            .all(|k| schema.get(k).is_none())
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
        Some(vec![content.join(" ")])
    } else {
        queries(&content, 8)
    };
    let mut texts: Vec<&str> = vec![question];
    for call in executed {
        if let ToolOutcome::Ok { result } = &call.outcome {
            strings(result, &mut texts);
        }
    }
    registry.narrowed(|parameters| {
        let mut changed = false;
        if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
            for property in properties.values_mut() {
                let named = match property.get("pattern").and_then(Value::as_str) {
                    Some(p) if property.get("enum").is_none() => named_values(p, &texts),
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
                        let values: Vec<&String> = all.iter().filter(|q| fits(q)).collect();
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
    })
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
/// number those lines state, and the answer text can only be extracts of those lines (see
/// `extractive_pattern`). So an answer cannot cite one line and state another. The caller
/// ranks the candidates (see [`rank_citations`]). The evidence gate still checks every
/// citation and claim.
#[must_use]
pub fn grounded_answer(answer: &Value, contract: &Contract, candidates: &[Value]) -> Option<Value> {
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
fn grounded_variant(answer: &Value, policy: &EvidencePolicy, cited: &[Value]) -> Option<Value> {
    let mut schema = answer.clone();
    let quotes: Vec<&str> = cited
        .iter()
        .filter_map(|c| c.get("quote").and_then(Value::as_str))
        .collect();
    {
        let citations = schema_at(&mut schema, &policy.citations)?;
        *citations = json!({"const": cited});
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
                // As many extracts as fit the declared length, at most one per cited line.
                let longest = quotes.iter().map(|q| q.chars().count()).max().unwrap_or(1);
                let fit = target
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .and_then(|m| usize::try_from(m).ok())
                    .map_or(quotes.len(), |m| (m + 1) / (longest + 1));
                if fit == 0 {
                    // Not even one line fits the answer: this set cannot be stated.
                    return None;
                }
                let pattern = extractive_pattern(&quotes, fit.min(quotes.len()));
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

    #[test]
    fn citations_are_ranked_by_the_question() {
        let line = |n: u64, text: &str| json!({"quote": text, "source_id": "s", "version": "v", "line_start": n, "line_end": n});
        let candidates = vec![
            line(
                1,
                "NCT04123456 (VELA-2) studies psoriasis; status: completed.",
            ),
            line(
                2,
                "Arm A: velorabine 10 mg; status: terminated; termination reason: futility.",
            ),
            line(3, "Arm B: velorabine 25 mg; status: completed."),
            line(
                4,
                "Arm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes.",
            ),
        ];
        let ranked = rank_citations(
            &candidates,
            "Which arms of trial NCT04123456 were terminated, and why?",
            &[("nct04123456".to_owned(), 1.0)],
            4,
        );
        let lines: Vec<u64> = ranked
            .iter()
            .map(|c| c["line_start"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, vec![2, 4]);
        // A label tells arms apart.
        let ranked = rank_citations(
            &candidates,
            "What does Arm C of NCT04123456 receive?",
            &[],
            4,
        );
        assert_eq!(ranked[0]["line_start"], 4);
        // A line that only names the subject does not answer.
        assert!(rank_citations(
            &candidates,
            "Who sponsors NCT04123456?",
            &[("nct04123456".to_owned(), 1.0)],
            4
        )
        .is_empty());
        assert!(rank_citations(&candidates, "Hello?", &[], 4).is_empty());
    }

    #[test]
    fn a_time_question_wants_a_line_that_states_a_time() {
        assert!(asks_time("When did the board meet?"));
        assert!(asks_time("In which year was it founded?"));
        assert!(!asks_time("How many sites are there?"));
        for line in [
            "It met on 2026-01-08.",
            "Dosing starts in March.",
            "Assessed at week 24.",
            "It ran 12 weeks.",
            "Founded in 1998.",
        ] {
            assert!(states_time(line), "{line}");
        }
        for line in [
            "It enrolled 212 participants.",
            "Arm A: 10 mg.",
            "NCT04123456 is completed.",
        ] {
            assert!(!states_time(line), "{line}");
        }
    }

    #[test]
    fn the_answer_is_made_of_extracts_of_the_lines() {
        let pattern = extractive_pattern(
            &[
                "The lodging limit is 750 yuan.",
                "Arm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes.",
            ],
            2,
        );
        let re = regex_lite(&pattern);
        assert!(re("The lodging limit is 750 yuan."));
        assert!(!re("Arm C: velorabine 50 mg; status: terminated"));
        assert!(re(
            "The lodging limit is 750 yuan. Arm C: velorabine 50 mg; status: terminated"
        ));
        assert!(!re("Arm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes. The lodging limit is 750 yuan."));
        assert!(!re("The lodging limit is 750 yuan. The lodging limit is 750 yuan. The lodging limit is 750 yuan."));
        assert!(!re("The limit is 75 yuan."));
        assert!(!re("The lodging limit is 750"));
        assert!(!re("status: terminated"));
        assert!(!re("Arm B: velorabine 50 mg; status: terminated"));
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

    #[test]
    fn finite_tools_are_narrowed_and_exhausted() {
        let registry = Registry::new(vec![proviso_tools::ToolSpec::new(
            "read",
            "Reads.",
            proviso_contract::IntentClass::Read,
            json!({"type": "object", "properties": {"version": {"enum": ["v1", "v2"]}},
                "additionalProperties": false}),
        )])
        .unwrap();
        let args = |v: Value| v.as_object().unwrap().clone();
        let ran = |a: Map<String, Value>| ExecutedCall {
            step: 1,
            call: proviso_contract::ToolCall::new(
                Some("c".into()),
                "read".into(),
                a,
                proviso_contract::IntentClass::Read,
            ),
            outcome: ToolOutcome::Ok { result: json!({}) },
            duration_ms: 0,
        };
        let one = narrow(&registry, CallFormat::Hermes, &[ran(args(json!({})))]);
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
                ran(args(json!({}))),
                ran(args(json!({"version": "v1"}))),
                ran(args(json!({"version": "v2"}))),
            ],
        );
        assert_eq!(all.exhausted, vec!["read"]);
        assert!(all.registry.is_empty());
    }
}
