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
const FINITE_LIMIT: usize = 32;
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
}

impl Default for Steering {
    fn default() -> Self {
        Self {
            exclude_repeated_calls: true,
            finish_after_rejection: true,
            finish_on_last_step: true,
            evidence_tools: Vec::new(),
            ground_answers: true,
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
        }
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
}

impl StepPlan {
    /// Whether the step uses the agent's base grammar unchanged.
    #[must_use]
    pub fn is_base(&self) -> bool {
        self.finish.is_none()
            && self.excluded.is_empty()
            && self.exhausted.is_empty()
            && self.citable_lines.is_none()
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

/// Numbers as the evidence gate reads them, in the order the quotes state them.
fn numbers_in(quotes: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for quote in quotes {
        let mut current = String::new();
        let mut chars = quote.chars().peekable();
        while let Some(c) = chars.next() {
            let continues_number =
                c == '.' && !current.is_empty() && chars.peek().is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() || continues_number {
                current.push(c);
            } else if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    let mut seen = BTreeSet::new();
    out.retain(|n| seen.insert(n.clone()));
    out
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
    let singular = match lower.strip_suffix('s') {
        Some(rest) if rest.chars().count() >= 3 && !rest.ends_with('s') => rest,
        _ => lower.as_str(),
    };
    singular.chars().take(5).collect()
}

/// The content words of `text`, stemmed, in order.
fn content_stems(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !FUNCTION_WORDS.contains(&w.to_lowercase().as_str()))
        .map(stem)
        .collect()
}

/// Whether a question asks for a quantity, so that a line stating a number is the better
/// evidence.
fn asks_quantity(question: &str) -> bool {
    let q = question.to_lowercase();
    [
        "how many",
        "how much",
        "how long",
        "how often",
        "how old",
        "percentage",
        "limit",
        "number of",
        "amount",
        "maximum",
        "minimum",
        "longest",
        "shortest",
        "cost",
        "price",
        "dose",
        "within how",
    ]
    .iter()
    .any(|k| q.contains(k))
}

/// How well a line answers `question`: one point per content word of the question it
/// states, two per pair of consecutive content words it states in the same order (a phrase
/// such as "lodging limit" says more than its words apart), and one when the question asks
/// for a quantity and the line states a number.
fn relevance(question: &[String], quantity: bool, line: &str) -> usize {
    let stems = content_stems(line);
    let set: BTreeSet<&String> = stems.iter().collect();
    let distinct: BTreeSet<&String> = question.iter().collect();
    let mut score = distinct.iter().filter(|q| set.contains(*q)).count();
    let pairs: BTreeSet<(&String, &String)> = stems.windows(2).map(|w| (&w[0], &w[1])).collect();
    score += 2 * question
        .windows(2)
        .filter(|w| pairs.contains(&(&w[0], &w[1])))
        .count();
    if quantity && line.chars().any(|c| c.is_ascii_digit()) {
        score += 1;
    }
    score
}

/// The candidates that answer `question` best, best first (at most `keep`); every
/// candidate, in order, when none shares a word with it.
#[must_use]
pub fn rank_citations(candidates: &[Value], question: &str, keep: usize) -> Vec<Value> {
    let terms = content_stems(question);
    let quantity = asks_quantity(question);
    let mut scored: Vec<(usize, usize, &Value)> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let quote = c.get("quote").and_then(Value::as_str).unwrap_or("");
            (relevance(&terms, quantity, quote), i, c)
        })
        .collect();
    if scored.iter().all(|(s, _, _)| *s == 0) {
        return candidates.iter().take(keep).cloned().collect();
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // Lines that answer less than half as well as the best are dropped: a small model
    // otherwise copies whichever line starts like the question.
    let best = scored[0].0;
    scored
        .into_iter()
        .filter(|(s, _, _)| *s > 0 && s * 2 > best)
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
fn extractive_pattern(quotes: &[&str]) -> String {
    let mut alternatives: Vec<String> = quotes
        .iter()
        .flat_map(|q| extracts(q))
        .map(|e| regex_escape(&e))
        .collect();
    alternatives.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    alternatives.dedup();
    let extract = format!("(?:{})", alternatives.join("|"));
    format!("^{extract}(?: {extract})*$")
}

/// Most citation sets one grounded answer grammar enumerates.
const MAX_CITATION_SETS: usize = 16;

/// The ordered subsets of `items` with 1 to `max` elements, smallest first, at most `limit`.
fn subsets<T: Clone>(items: &[T], max: usize, limit: usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let mut layer: Vec<(Vec<T>, usize)> = vec![(Vec::new(), 0)];
    for _ in 0..max.min(items.len()) {
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
    let numbers = numbers_in(&quotes);
    {
        let citations = schema_at(&mut schema, &policy.citations)?;
        *citations = json!({"const": cited});
    }
    let mut first = vec![policy.citations.clone()];
    for claim in &policy.claims {
        match claim {
            Claim::Amount { pointer, .. } => {
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
                let mut values: Vec<Value> = numbers
                    .iter()
                    .filter(|n| !integer_only || !n.contains('.'))
                    .filter_map(|n| serde_json::from_str::<Value>(n).ok())
                    .filter(|v| within(target, v))
                    .collect();
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
                let pattern = extractive_pattern(&quotes);
                if let Some(map) = target.as_object_mut() {
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
            4,
        );
        let lines: Vec<u64> = ranked
            .iter()
            .map(|c| c["line_start"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, vec![2, 4]);
        // Nothing in common: every candidate stays, in order.
        assert_eq!(rank_citations(&candidates, "Hello?", 4).len(), 4);
    }

    #[test]
    fn the_answer_is_made_of_extracts_of_the_lines() {
        let pattern = extractive_pattern(&[
            "The lodging limit is 750 yuan.",
            "Arm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes.",
        ]);
        let re = regex_lite(&pattern);
        assert!(re("The lodging limit is 750 yuan."));
        assert!(re("Arm C: velorabine 50 mg; status: terminated"));
        assert!(re("Arm C: velorabine 50 mg; status: terminated; termination reason: liver enzymes. The lodging limit is 750 yuan."));
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
    fn citation_sets_are_ordered_subsets() {
        assert_eq!(
            subsets(&[1, 2, 3], 2, 16),
            vec![
                vec![1],
                vec![2],
                vec![3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(subsets(&[1, 2, 3], 3, 4).len(), 4);
    }

    #[test]
    fn numbers_are_read_as_the_gate_reads_them() {
        assert_eq!(
            numbers_in(&[
                "The lodging limit is 750 yuan.",
                "14.6% of 41 arms; 750 again."
            ]),
            vec!["750", "14.6", "41"]
        );
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
