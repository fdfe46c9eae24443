//! Where a call's arguments come from, and what `auto` does with a call.
//!
//! A small model asked to choose freely between calling a tool and answering in text answers
//! in text almost every time, and asked to call always calls, relevant or not. Under
//! [`ToolChoice::Auto`](crate::ToolChoice::Auto) proviso therefore decides in two phases:
//! the model first writes the best call it can under the `required` grammar (which it does
//! well), and then [`choose`] judges that call against the conversation:
//!
//! - a call that is not about the conversation makes the model answer in text
//!   ([`AutoChoice::Answer`]). A call is about the conversation when its tool's name and
//!   description share two content words with it, or its name shares one (an abbreviation
//!   such as `prob` for `probability` counts), or they share one and a required string
//!   argument carries the conversation's own words (`Buddhism`, `Lebron James`). One shared
//!   word and numbers alone are not enough: any number fits any numeric parameter, so a
//!   body-mass-index tool called with a triangle's base and height is not about triangles;
//! - a call about the conversation whose required arguments cannot be traced to it (the model
//!   invented a value no one gave) asks for them instead ([`AutoChoice::AskFor`]);
//! - otherwise the call stands ([`AutoChoice::Call`]).
//!
//! A value is *traceable* when the conversation states it (a number written in it, a string
//! whose words all occur in it, a date whose year, month and day occur in it) or when the
//! declaration supplies it (a boolean, a value of an `enum` or `const`, the parameter's
//! `default`). A number stated once supports one argument: two required arguments given the
//! same number the conversation states once (`number=30, skip=30`) leave the second
//! untraceable. The judgement is lexical and deliberately conservative: it never turns a text
//! answer into a call, it only withholds calls the conversation does not support.

use std::collections::BTreeSet;

use proviso_contract::lexicon;
use serde_json::Value;

use crate::format::CallFormat;
use crate::registry::{required_names, Registry, ToolSpec};

/// What `auto` does with the best call the model could write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoChoice {
    /// Every call is about the conversation and every required argument is traceable to it.
    Call,
    /// The tool is about the conversation, but these required arguments (`tool.argument`)
    /// are not in it: ask for them.
    AskFor {
        /// The untraceable arguments, as `tool.argument`.
        missing: Vec<String>,
    },
    /// No call is about the conversation: answer in text.
    Answer,
}

impl AutoChoice {
    /// The choice's stable name, as traces and reports print it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Call => "call",
            Self::AskFor { .. } => "ask_for",
            Self::Answer => "answer",
        }
    }
}

/// Judges the calls the model wrote under `required` against the conversation's text (the
/// user's turns and the tools' results; not the system prompt, which quotes every tool).
///
/// Calls naming a tool the registry does not hold are left to the gates, which reject them.
#[must_use]
pub fn choose(registry: &Registry, calls: &[(String, Value)], conversation: &str) -> AutoChoice {
    if calls.is_empty() {
        return AutoChoice::Answer;
    }
    let text = Conversation::new(conversation);
    let mut missing = Vec::new();
    for (name, arguments) in calls {
        let Some(tool) = registry.get(name) else {
            continue;
        };
        if !text.is_about(tool.spec(), arguments) {
            return AutoChoice::Answer;
        }
        missing.extend(
            text.untraceable(tool.spec(), arguments)
                .into_iter()
                .map(|argument| format!("{name}.{argument}")),
        );
    }
    if missing.is_empty() {
        AutoChoice::Call
    } else {
        AutoChoice::AskFor { missing }
    }
}

/// The registry with each required numeric parameter (and array of numbers) limited, in the
/// grammar, to the numbers the conversation states (written as digits or as number words,
/// negative and percentage forms included) and the parameter's declared `default`; `None`
/// when no parameter changes. A parameter that already has an `enum` or a `const`, or whose
/// bounds no stated number meets, is left as declared.
///
/// This is the steering half of [`choose`]: a number the conversation does not state makes
/// a call untraceable, so under `auto` the first phase may as well write only numbers that
/// can be traced. A small model then copies `c = -4` instead of writing `4`, and a call it
/// would have written with an invented number is written with a stated one (and still
/// judged: a number stated for another purpose may be the wrong one). Only the grammar is
/// narrowed; the gates check the declared schemas.
#[must_use]
pub fn ground_numbers(registry: &Registry, conversation: &str) -> Option<Registry> {
    let stated = Conversation::new(conversation).numbers;
    if stated.is_empty() {
        return None;
    }
    registry.narrowed(|parameters| {
        let required: Vec<String> = required_names(parameters.get("required"))
            .map(str::to_owned)
            .collect();
        let mut changed = false;
        if let Some(Value::Object(properties)) = parameters.get_mut("properties") {
            // Only required arguments must be traceable; an optional one the model gives
            // (`gravity=9.81`) is the declaration's business.
            for (_, property) in properties
                .iter_mut()
                .filter(|(name, _)| required.contains(name))
            {
                changed |= ground_number(property, &stated);
                if property.get("type").and_then(Value::as_str) == Some("array") {
                    if let Some(items) = property.get_mut("items") {
                        changed |= ground_number(items, &stated);
                    }
                }
            }
        }
        changed
    })
}

/// Limits one numeric schema to the stated numbers that fit it (see [`ground_numbers`]);
/// whether it changed.
fn ground_number(schema: &mut Value, stated: &[f64]) -> bool {
    let Some(map) = schema.as_object_mut() else {
        return false;
    };
    let integer = match map.get("type").and_then(Value::as_str) {
        Some("integer") => true,
        Some("number") => false,
        _ => return false,
    };
    if map.contains_key("enum") || map.contains_key("const") {
        return false;
    }
    let bound = |key: &str| map.get(key).and_then(Value::as_f64);
    let (minimum, maximum) = (bound("minimum"), bound("maximum"));
    let (above, below) = (bound("exclusiveMinimum"), bound("exclusiveMaximum"));
    let fits = |n: f64| {
        (!integer || n.fract() == 0.0)
            && minimum.is_none_or(|m| n >= m)
            && maximum.is_none_or(|m| n <= m)
            && above.is_none_or(|m| n > m)
            && below.is_none_or(|m| n < m)
    };
    let mut numbers: Vec<f64> = stated.iter().copied().filter(|&n| fits(n)).collect();
    if numbers.is_empty() {
        return false;
    }
    numbers.extend(
        map.get("default")
            .and_then(Value::as_f64)
            .filter(|&n| fits(n)),
    );
    let mut values: Vec<Value> = Vec::new();
    for n in numbers {
        let value = if n.fract() == 0.0 && n.abs() < 9.0e15 {
            #[allow(clippy::cast_possible_truncation)] // Integral and within i64 range.
            Value::from(n as i64)
        } else {
            Value::from(n)
        };
        if !values.contains(&value) {
            values.push(value);
        }
    }
    map.insert("enum".into(), Value::Array(values));
    true
}

/// A clarification question asking for `missing` arguments (as [`AutoChoice::AskFor`] names
/// them, `tool.argument`), worded from their declarations.
#[must_use]
pub fn clarification(registry: &Registry, missing: &[String]) -> String {
    let asks: Vec<String> = missing
        .iter()
        .map(|path| {
            let (tool, argument) = path.split_once('.').unwrap_or(("", path));
            let description = registry
                .get(tool)
                .and_then(|t| {
                    t.spec()
                        .parameters()
                        .pointer(&format!("/properties/{}/description", escape(argument)))
                })
                .and_then(Value::as_str)
                .map(|d| format!(" ({})", d.trim().trim_end_matches('.')))
                .unwrap_or_default();
            format!("{}{description}", argument.replace('_', " "))
        })
        .collect();
    format!("Could you tell me the {}?", asks.join(" and the "))
}

/// Values the conversation states that no call uses: numbers as written (`5,10 and 15` is
/// three numbers, `$50,000` one), identifiers (words with letters and digits, lower-cased)
/// and quoted strings. A step that leaves some unused may be
/// one call where the request asks for several ([`fans_out`]).
#[must_use]
pub fn unused_values(calls: &[(String, Value)], conversation: &str) -> Vec<String> {
    let mut used_numbers = Vec::new();
    let mut used_words = BTreeSet::new();
    for (_, arguments) in calls {
        collect_used(arguments, &mut used_numbers, &mut used_words);
    }
    let mut out = Vec::new();
    for (literal, n) in stated_numbers(conversation) {
        let used = used_numbers
            .iter()
            .any(|&m: &f64| (m - n).abs() <= 1e-9 * m.abs().max(1.0))
            || used_words.contains(&literal);
        if !used && !out.contains(&literal) {
            out.push(literal);
        }
    }
    // Identifiers (`NCT04123456`, `A12`) are values too.
    for word in words(conversation) {
        let identifier = word.len() >= 3
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(char::is_alphabetic);
        if identifier && !used_words.contains(&word) && !out.contains(&word) {
            out.push(word);
        }
    }
    for quoted in quoted_strings(conversation) {
        let parts: Vec<String> = words(&quoted).collect();
        if !parts.is_empty()
            && !parts.iter().all(|p| used_words.contains(p))
            && !out.contains(&quoted)
        {
            out.push(quoted);
        }
    }
    out
}

/// Whether `extended`, the `first` calls followed by more, fans them out over what the
/// conversation states: it begins with `first`, and every further call is new, has its
/// required arguments traceable, and repeats a call of `first` with an argument it gave
/// changed to a value `first` left unused (adding an argument `first` left out does not
/// count: that is the same call written twice, not a second one).
#[must_use]
pub fn fans_out(
    registry: &Registry,
    first: &[(String, Value)],
    extended: &[(String, Value)],
    conversation: &str,
) -> bool {
    if extended.len() <= first.len() || extended[..first.len()] != *first {
        return false;
    }
    let unused = unused_values(first, conversation);
    let text = Conversation::new(conversation);
    let uses_unused = |name: &str, key: &str, value: &Value| {
        let call = (name.to_owned(), serde_json::json!({ key: value }));
        let left = unused_values(std::slice::from_ref(&call), conversation);
        unused.iter().any(|v| !left.contains(v))
    };
    extended[first.len()..].iter().enumerate().all(|(i, call)| {
        let (name, arguments) = call;
        let Some(tool) = registry.get(name) else {
            return false;
        };
        let varies = first
            .iter()
            .filter(|(f, _)| f == name)
            .filter_map(|(_, given)| given.as_object().zip(arguments.as_object()))
            .any(|(given, new)| {
                new.iter().any(|(key, value)| {
                    given.get(key).is_some_and(|old| old != value) && uses_unused(name, key, value)
                })
            });
        varies
            && !extended[..first.len() + i].contains(call)
            && text.untraceable(tool.spec(), arguments).is_empty()
    })
}

/// What to avoid when regenerating a step to fan it out, or `None` when the step should not
/// be fanned out (its format writes one call per step, it holds no call, or its calls use
/// every value the conversation states): the step exactly as written (so it cannot end the
/// same way again) and each of its calls written twice in a row in `format`.
#[must_use]
pub fn fan_out_avoid(
    format: CallFormat,
    step: &str,
    calls: &[(String, Value)],
    conversation: &str,
) -> Option<Vec<String>> {
    let separator = format.call_separator()?;
    if calls.is_empty() || unused_values(calls, conversation).is_empty() {
        return None;
    }
    let mut avoid = vec![step.trim().to_owned()];
    for (name, arguments) in calls {
        let call = format.call_text(name, arguments.as_object()?);
        avoid.push(format!("{call}{separator}{call}"));
    }
    Some(avoid)
}

/// Numbers a conversation states, read strictly (a comma is a thousands separator only
/// before exactly three digits), with their literal text.
fn stated_numbers(text: &str) -> Vec<(String, f64)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.');
        if !bytes[i].is_ascii_digit() || !boundary {
            i += 1;
            continue;
        }
        let start = i;
        loop {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let group = i + 4 <= bytes.len()
                && bytes[i] == b','
                && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
                && bytes.get(i + 4).is_none_or(|b| !b.is_ascii_digit());
            if !group {
                break;
            }
            i += 1;
        }
        if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
        let literal = &text[start..i];
        if let Ok(n) = literal.replace(',', "").parse::<f64>() {
            out.push((literal.to_owned(), n));
        }
    }
    out
}

/// Strings a conversation quotes with `'…'` or `"…"` (an apostrophe inside a word does not
/// open a quote).
fn quoted_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let opens = (c == '"' || c == '\'') && (i == 0 || !chars[i - 1].is_alphanumeric());
        if opens {
            if let Some(len) = chars[i + 1..].iter().position(|&d| d == c) {
                let inner: String = chars[i + 1..i + 1 + len].iter().collect();
                if !inner.trim().is_empty() && len <= 80 {
                    out.push(inner.trim().to_owned());
                }
                i += len + 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Numbers and words a call's arguments use.
fn collect_used(value: &Value, numbers: &mut Vec<f64>, used: &mut BTreeSet<String>) {
    match value {
        Value::Number(n) => numbers.extend(n.as_f64()),
        Value::String(s) => {
            for word in words(s) {
                if let Ok(n) = word.parse::<f64>() {
                    numbers.push(n);
                }
                used.insert(word);
            }
            used.insert(s.clone());
        }
        Value::Array(items) => items.iter().for_each(|v| collect_used(v, numbers, used)),
        Value::Object(fields) => fields.values().for_each(|v| collect_used(v, numbers, used)),
        Value::Null | Value::Bool(_) => {}
    }
}

/// The content words a tool's name and description share with the conversation. Words
/// meet when the lexicon gives them one stem ([`lexicon::stem`]): `discovered` meets
/// `discoverer`, `triangles` meets `triangle`.
#[must_use]
pub fn shared_words(spec: &ToolSpec, conversation: &str) -> Vec<String> {
    shared(spec, &content_words(conversation).collect())
}

/// The content words of a tool's name and description among `said`.
fn shared(spec: &ToolSpec, said: &BTreeSet<String>) -> Vec<String> {
    let declared: BTreeSet<String> = content_words(&format!(
        "{} {}",
        spec.name().replace(['_', '.', '-'], " "),
        spec.description()
    ))
    .collect();
    declared
        .into_iter()
        .filter(|d| said.iter().any(|s| same_stem(d, s)))
        .collect()
}

/// Whether a tool's name (split at `_`, `.`, `-` and case changes) shares a content word
/// with the conversation, a name word of four letters or more also meeting the words it
/// abbreviates (`prob` meets `probability`, `calc` meets `calculator`).
fn name_shared(spec: &ToolSpec, said: &BTreeSet<String>) -> bool {
    content_words(&spec.name().replace(['_', '.', '-'], " ")).any(|n| {
        said.iter()
            .any(|s| same_stem(&n, s) || (n.chars().count() >= 4 && s.starts_with(&n)))
    })
}

/// Whether two content words have the same stem: the lexicon's ([`lexicon::stem`]).
fn same_stem(a: &str, b: &str) -> bool {
    a == b || lexicon::stem(a) == lexicon::stem(b)
}

/// The required arguments of a call that the conversation does not state and the
/// declaration does not supply.
#[must_use]
pub fn untraceable_arguments(
    spec: &ToolSpec,
    arguments: &Value,
    conversation: &str,
) -> Vec<String> {
    Conversation::new(conversation).untraceable(spec, arguments)
}

/// Words too common in tool declarations and requests to say what either is about, beyond
/// the lexicon's function words.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "from",
    "that",
    "this",
    "these",
    "those",
    "its",
    "are",
    "was",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "can",
    "could",
    "would",
    "should",
    "will",
    "shall",
    "may",
    "might",
    "must",
    "into",
    "onto",
    "about",
    "than",
    "then",
    "there",
    "their",
    "them",
    "they",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "any",
    "all",
    "each",
    "some",
    "such",
    "not",
    "but",
    "also",
    "only",
    "other",
    "over",
    "under",
    "out",
    "get",
    "gets",
    "find",
    "finds",
    "calculate",
    "calculates",
    "compute",
    "computes",
    "return",
    "returns",
    "retrieve",
    "retrieves",
    "fetch",
    "fetches",
    "given",
    "give",
    "based",
    "using",
    "use",
    "uses",
    "used",
    "provide",
    "provides",
    "provided",
    "specific",
    "specified",
    "function",
    "tool",
    "value",
    "values",
    "please",
    "want",
    "need",
    "like",
    "you",
    "your",
    "our",
    "me",
    "my",
    "let",
    "know",
    "tell",
    "show",
    "make",
    "made",
    "does",
    "did",
    "done",
    "doing",
];

/// Lower-case content words of a text: alphanumeric runs split at case changes, three or
/// more characters, not stopwords, with plural and verb endings trimmed.
fn content_words(text: &str) -> impl Iterator<Item = String> + '_ {
    words(text)
        .filter(|w| w.len() >= 3 && !w.chars().all(|c| c.is_ascii_digit()))
        .filter(|w| !lexicon::is_function_word(w) && !STOPWORDS.contains(&w.as_str()))
        .map(|w| lexicon::stem(&w))
}

/// The words of names and text alike, lower-cased and split at case changes: the lexicon's
/// one reading ([`lexicon::name_words`]).
fn words(text: &str) -> impl Iterator<Item = String> {
    lexicon::name_words(text).into_iter()
}

/// Number words a request may spell out.
const NUMBER_WORDS: &[(&str, f64)] = &[
    ("zero", 0.0),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("fifty", 50.0),
    ("hundred", 100.0),
    ("thousand", 1000.0),
    ("million", 1_000_000.0),
    ("dozen", 12.0),
    ("half", 0.5),
    ("twice", 2.0),
    ("double", 2.0),
    ("once", 1.0),
    ("single", 1.0),
    ("pair", 2.0),
];

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// The conversation's text, read once: its words, its numbers, and its letters and digits
/// run together (so `NewYork` is found in `New York`).
struct Conversation {
    words: BTreeSet<String>,
    /// Its content words, as [`shared_words`] compares them.
    said: BTreeSet<String>,
    joined: String,
    numbers: Vec<f64>,
    /// Each number the conversation states, once per mention, with its readings.
    mentions: Vec<Vec<f64>>,
}

impl Conversation {
    fn new(text: &str) -> Self {
        let all: Vec<String> = words(text).collect();
        let mut numbers = numbers_in(text);
        let mut mentions: Vec<Vec<f64>> = stated_numbers(text)
            .into_iter()
            .map(|(_, n)| vec![n, -n, n / 100.0])
            .collect();
        for word in &all {
            if let Some((_, n)) = NUMBER_WORDS.iter().find(|(w, _)| w == word) {
                numbers.push(*n);
                mentions.push(vec![*n]);
            }
        }
        Self {
            mentions,
            said: content_words(text).collect(),
            joined: all.concat(),
            words: all.into_iter().collect(),
            numbers,
        }
    }

    /// Whether a call is about the conversation (see the module's documentation).
    fn is_about(&self, spec: &ToolSpec, arguments: &Value) -> bool {
        match shared(spec, &self.said).len() {
            0 => name_shared(spec, &self.said),
            1 => name_shared(spec, &self.said) || self.carries_words(spec, arguments),
            _ => true,
        }
    }

    /// Whether a required string argument, not supplied by the declaration, is made of the
    /// conversation's words.
    fn carries_words(&self, spec: &ToolSpec, arguments: &Value) -> bool {
        let parameters = spec.parameters();
        required_names(parameters.get("required")).any(|name| {
            let schema = parameters
                .pointer(&format!("/properties/{}", escape(name)))
                .unwrap_or(&Value::Null);
            match arguments.get(name) {
                Some(value @ Value::String(s)) => !declared(value, schema) && self.states_text(s),
                _ => false,
            }
        })
    }

    fn untraceable(&self, spec: &ToolSpec, arguments: &Value) -> Vec<String> {
        let parameters = spec.parameters();
        let required: Vec<&str> = required_names(parameters.get("required")).collect();
        let Some(arguments) = arguments.as_object() else {
            return Vec::new();
        };
        // A number stated once supports one argument: the second argument given the same
        // stated number (`number=30, skip=30` for "the closest integer to 30") was not
        // given it by the conversation.
        let mut used: Vec<f64> = Vec::new();
        required
            .into_iter()
            .filter(|name| {
                let schema = parameters
                    .pointer(&format!("/properties/{}", escape(name)))
                    .unwrap_or(&Value::Null);
                let Some(value) = arguments.get(*name) else {
                    return false;
                };
                if !self.traceable(value, schema) {
                    return true;
                }
                match value.as_f64() {
                    Some(n) if !declared(value, schema) => {
                        let before = used.iter().filter(|&&u| u == n).count();
                        used.push(n);
                        before >= self.mentions(n).max(1)
                    }
                    _ => false,
                }
            })
            .map(str::to_owned)
            .collect()
    }

    /// How many times the conversation states `n`: each number written in it (read also
    /// with its sign and as a percentage) and each number word counts once.
    fn mentions(&self, n: f64) -> usize {
        self.mentions
            .iter()
            .filter(|readings| readings.contains(&n))
            .count()
    }

    fn traceable(&self, value: &Value, schema: &Value) -> bool {
        if declared(value, schema) {
            return true;
        }
        match value {
            Value::Null | Value::Bool(_) => true,
            Value::Number(n) => n.as_f64().is_some_and(|n| self.states_number(n)),
            Value::String(s) => self.states_text(s),
            Value::Array(items) => {
                let schema = schema.get("items").unwrap_or(&Value::Null);
                items.iter().all(|item| self.traceable(item, schema))
            }
            Value::Object(fields) => fields.iter().all(|(name, field)| {
                let schema = schema
                    .pointer(&format!("/properties/{}", escape(name)))
                    .unwrap_or(&Value::Null);
                self.traceable(field, schema)
            }),
        }
    }

    fn states_number(&self, n: f64) -> bool {
        self.numbers
            .iter()
            .any(|&m| (m - n).abs() <= 1e-9 * m.abs().max(1.0))
    }

    fn states_text(&self, text: &str) -> bool {
        if let Some(known) = self.states_date(text) {
            return known;
        }
        let parts: Vec<String> = words(text).collect();
        if parts.is_empty() {
            return false;
        }
        parts.iter().all(|p| self.words.contains(p)) || self.joined.contains(&parts.concat())
    }

    /// An ISO date (`2022-03-11`) is stated when its year, day and month (as a number or a
    /// month name) all occur; `None` when the text is not such a date.
    fn states_date(&self, text: &str) -> Option<bool> {
        let text = text.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let mut parts = text.get(..10)?.split('-');
        let (year, month, day) = (parts.next()?, parts.next()?, parts.next()?);
        if year.len() != 4 || month.len() != 2 || day.len() != 2 {
            return None;
        }
        let month: usize = month.parse().ok()?;
        let day: u32 = day.parse().ok()?;
        if !(1..=12).contains(&month) {
            return None;
        }
        let day_said = self.numbers.iter().any(|&n| n == f64::from(day))
            || self
                .words
                .iter()
                .any(|w| w.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == day.to_string());
        let month_said = self.numbers.contains(&(month as f64))
            || self.words.iter().any(|w| w.starts_with(MONTHS[month - 1]));
        Some(self.words.contains(year) && day_said && month_said)
    }
}

/// Whether the declaration itself supplies the value: an `enum` or `const` member, the
/// parameter's `default`, or a string its description offers in quotes (`Can be 'summary'
/// or 'detailed'` declares two options in prose, as an `enum` would).
fn declared(value: &Value, schema: &Value) -> bool {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|members| members.contains(value))
        || schema.get("const") == Some(value)
        || schema.get("default") == Some(value)
        || value.as_str().is_some_and(|v| {
            schema
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| quoted_strings(d).iter().any(|q| q == v))
        })
}

/// Escapes a property name for a JSON pointer.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Every number written in a text: signed, decimal, with an exponent, with thousands
/// separators read both as separators and as list commas, and a percentage also as a
/// fraction.
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for source in [text.to_owned(), text.replace(',', "")] {
        let bytes = source.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !bytes[i].is_ascii_digit() {
                i += 1;
                continue;
            }
            let negative =
                i > 0 && bytes[i - 1] == b'-' && (i < 2 || !bytes[i - 2].is_ascii_alphanumeric());
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
                i += 1;
            }
            if i + 1 < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
                let mut j = i + 1;
                if j < bytes.len() && (bytes[j] == b'-' || bytes[j] == b'+') {
                    j += 1;
                }
                if j < bytes.len() && bytes[j].is_ascii_digit() {
                    while j < bytes.len() && bytes[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let literal = source[start..i].trim_end_matches('.');
            if let Ok(n) = literal.parse::<f64>() {
                out.push(n);
                if negative {
                    out.push(-n);
                }
                if source[i..].trim_start().starts_with('%')
                    || source[i..].trim_start().starts_with("percent")
                {
                    out.push(n / 100.0);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proviso_contract::IntentClass;
    use serde_json::json;

    use super::*;

    fn registry() -> Registry {
        Registry::new(vec![
            ToolSpec::new(
                "calculate_triangle_area",
                "Calculate the area of a triangle given its base and height.",
                IntentClass::Compute,
                json!({"type": "object", "properties": {
                    "base": {"type": "number"}, "height": {"type": "number"},
                    "unit": {"type": "string", "enum": ["cm", "m"]}},
                    "required": ["base", "height", "unit"]}),
            ),
            ToolSpec::new(
                "get_weather",
                "Current weather of a city on a date.",
                IntentClass::Read,
                json!({"type": "object", "properties": {
                    "city": {"type": "string"}, "date": {"type": "string"}},
                    "required": ["city", "date"]}),
            ),
        ])
        .unwrap()
    }

    #[test]
    fn required_numbers_are_grounded_in_what_the_conversation_states() {
        let registry = Registry::new(vec![ToolSpec::new(
            "roots",
            "Roots of a quadratic.",
            IntentClass::Compute,
            json!({"type": "object", "properties": {
                "a": {"type": "integer"}, "c": {"type": "number"},
                "steps": {"type": "integer", "minimum": 10},
                "rate": {"type": "number", "default": 0.5},
                "kind": {"type": "integer", "enum": [1, 2]},
                "samples": {"type": "array", "items": {"type": "number"}},
                "gravity": {"type": "number"}},
                "required": ["a", "c", "steps", "rate", "kind", "samples"]}),
        )])
        .unwrap();
        let grounded = ground_numbers(&registry, "Roots with a = 3 and c = -4.5, at 5%, twice.")
            .expect("numbers are stated");
        let parameters = grounded.get("roots").unwrap().spec().parameters().clone();
        let p = |name: &str| parameters["properties"][name].clone();
        // Integers take the integral stated numbers (`twice` is 2); numbers take all, a
        // signed one read with and without its sign and a percentage also as a fraction,
        // as the traceability test reads them, with the declared default.
        assert_eq!(p("a")["enum"], json!([3, 5, 2]));
        assert_eq!(p("c")["enum"], json!([3, 4.5, -4.5, 5, 0.05, 2]));
        assert_eq!(p("rate")["enum"], json!([3, 4.5, -4.5, 5, 0.05, 2, 0.5]));
        assert_eq!(
            p("samples")["items"]["enum"],
            json!([3, 4.5, -4.5, 5, 0.05, 2])
        );
        // No stated number meets the bound, an enum is already declared, or the argument is
        // optional: left as declared.
        assert!(p("steps").get("enum").is_none());
        assert_eq!(p("kind")["enum"], json!([1, 2]));
        assert!(p("gravity").get("enum").is_none());
        assert!(ground_numbers(&registry, "Roots, please.").is_none());
    }

    fn call(name: &str, arguments: Value) -> Vec<(String, Value)> {
        vec![(name.to_owned(), arguments)]
    }

    #[test]
    fn a_call_whose_arguments_the_request_states_stands() {
        let r = registry();
        let q = "What is the area of a triangle with base 10.5 and height -3, in m?";
        assert_eq!(
            choose(
                &r,
                &call(
                    "calculate_triangle_area",
                    json!({"base": 10.5, "height": -3, "unit": "m"})
                ),
                q
            ),
            AutoChoice::Call
        );
        let q = "Weather in New York on March 11, 2022?";
        assert_eq!(
            choose(
                &r,
                &call(
                    "get_weather",
                    json!({"city": "NewYork", "date": "2022-03-11"})
                ),
                q
            ),
            AutoChoice::Call
        );
    }

    #[test]
    fn an_invented_required_argument_is_asked_for() {
        let r = registry();
        let q = "What is the weather in Paris?";
        assert_eq!(
            choose(
                &r,
                &call(
                    "get_weather",
                    json!({"city": "Paris", "date": "2024-01-01"})
                ),
                q
            ),
            AutoChoice::AskFor {
                missing: vec!["get_weather.date".into()]
            }
        );
        // A number the request does not state is invented too.
        let q = "Area of a triangle of base 4?";
        assert_eq!(
            choose(
                &r,
                &call(
                    "calculate_triangle_area",
                    json!({"base": 4, "height": 7, "unit": "cm"})
                ),
                q
            ),
            AutoChoice::AskFor {
                missing: vec!["calculate_triangle_area.height".into()]
            }
        );
        // A number stated once supports one argument; stated twice, two.
        let twice = |q: &str| {
            choose(
                &r,
                &call(
                    "calculate_triangle_area",
                    json!({"base": 4, "height": 4, "unit": "cm"}),
                ),
                q,
            )
        };
        assert_eq!(
            twice("Area of a triangle of base 4?"),
            AutoChoice::AskFor {
                missing: vec!["calculate_triangle_area.height".into()]
            }
        );
        assert_eq!(
            twice("Area of a triangle of base 4 and height 4?"),
            AutoChoice::Call
        );
        assert_eq!(
            twice("Area of a triangle of base four and height 4?"),
            AutoChoice::Call
        );
    }

    #[test]
    fn a_clarification_names_what_is_missing_from_the_declaration() {
        let r = Registry::new(vec![ToolSpec::new(
            "get_weather",
            "Current weather of a city.",
            IntentClass::Read,
            json!({"type": "object", "properties": {
                "city": {"type": "string", "description": "The city's name."},
                "day_offset": {"type": "integer"}}, "required": ["city", "day_offset"]}),
        )])
        .unwrap();
        assert_eq!(
            clarification(
                &r,
                &["get_weather.city".into(), "get_weather.day_offset".into()]
            ),
            "Could you tell me the city (The city's name) and the day offset?"
        );
    }

    #[test]
    fn a_tool_that_shares_no_word_with_the_request_is_not_called() {
        let r = registry();
        let q = "Solve 3x + 4 = 10 for x.";
        assert_eq!(
            choose(
                &r,
                &call("get_weather", json!({"city": "x", "date": "2024-01-01"})),
                q
            ),
            AutoChoice::Answer
        );
        assert_eq!(choose(&r, &[], q), AutoChoice::Answer);
    }

    /// One shared word and numbers alone do not make a call relevant; a shared name word
    /// (also as an abbreviation), two shared words, or one shared word with a string argument
    /// made of the request's words do.
    #[test]
    fn a_call_is_about_the_request_by_its_name_its_words_or_its_strings() {
        let tool = |name: &str, description: &str, properties: Value, required: Value| {
            Registry::new(vec![ToolSpec::new(
                name,
                description,
                IntentClass::Compute,
                json!({"type": "object", "properties": properties, "required": required}),
            )])
            .unwrap()
        };
        let bmi = tool(
            "determine_body_mass_index",
            "Determine the body mass index given a weight and a height.",
            json!({"weight": {"type": "number"}, "height": {"type": "number"}}),
            json!(["weight", "height"]),
        );
        let binomial = tool(
            "prob_dist.binomial",
            "Compute the chance of a success outcome.",
            json!({"trials": {"type": "integer"}, "successes": {"type": "integer"}}),
            json!(["trials", "successes"]),
        );
        let religion = tool(
            "retrieve_religion_info",
            "Retrieve the history and beliefs of a religion.",
            json!({"religion_name": {"type": "string"}}),
            json!(["religion_name"]),
        );
        let stock = tool(
            "get_stock_info",
            "Information about a stock.",
            json!({"company": {"type": "string"}, "detail_level": {"type": "string",
                "description": "Level of detail. Can be 'summary' or 'detailed'."}}),
            json!(["company", "detail_level"]),
        );
        let cases: &[(&Registry, &str, Value, &str, &str)] = &[
            (
                &bmi,
                "determine_body_mass_index",
                json!({"weight": 10, "height": 5}),
                "Calculate the area of a triangle whose base is 10 and height is 5.",
                "answer",
            ),
            (
                &bmi,
                "determine_body_mass_index",
                json!({"weight": 70, "height": 1.8}),
                "What is my body mass index at 70 kg and 1.8 m?",
                "call",
            ),
            (
                &binomial,
                "prob_dist.binomial",
                json!({"trials": 10, "successes": 5}),
                "Find the probability of 5 heads in 10 tosses.",
                "call",
            ),
            (
                &religion,
                "retrieve_religion_info",
                json!({"religion_name": "Buddhism"}),
                "Retrieve the full history of Buddhism.",
                "call",
            ),
            (
                &stock,
                "get_stock_info",
                json!({"company": "Apple", "detail_level": "detailed"}),
                "Give me detail information about the stock of Apple.",
                "call",
            ),
            (
                &stock,
                "get_stock_info",
                json!({"company": "Apple", "detail_level": "full"}),
                "Give me detail information about the stock of Apple.",
                "ask_for",
            ),
        ];
        for (registry, name, arguments, request, expected) in cases {
            assert_eq!(
                choose(registry, &call(name, arguments.clone()), request).as_str(),
                *expected,
                "{name} {arguments} for {request:?}"
            );
        }
    }

    #[test]
    fn a_step_fans_out_over_stated_values_it_left_unused() {
        let r = Registry::new(vec![ToolSpec::new(
            "math.factorial",
            "Factorial of a number.",
            IntentClass::Compute,
            json!({"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}),
        )])
        .unwrap();
        let q = "Find the factorial of 5,10 and 15.";
        let f = |n: i64| ("math.factorial".to_owned(), json!({"number": n}));
        assert_eq!(unused_values(&[f(5)], q), ["10", "15"]);
        assert!(unused_values(&[f(5), f(10), f(15)], q).is_empty());
        assert!(fans_out(&r, &[f(5)], &[f(5), f(10), f(15)], q));
        // A repeated call, an unstated value, or a changed first call is not a fan-out.
        assert!(!fans_out(&r, &[f(5)], &[f(5), f(5)], q));
        assert!(!fans_out(&r, &[f(5)], &[f(5), f(7)], q));
        assert!(!fans_out(&r, &[f(5)], &[f(10), f(15)], q));
        // Adding an argument the first call left out is the same call written twice.
        let with = |n: i64, alpha: f64| {
            (
                "math.factorial".to_owned(),
                json!({"number": n, "alpha": alpha}),
            )
        };
        assert!(!fans_out(&r, &[f(5)], &[f(5), with(5, 10.0)], q));
        assert!(fans_out(&r, &[f(5)], &[f(5), with(10, 15.0)], q));
        assert_eq!(
            unused_values(
                &[],
                "Shows 'Friends' and \"The Office\" cost $50,000; it's 2.5"
            ),
            ["50,000", "2.5", "Friends", "The Office"]
        );
    }

    #[test]
    fn numbers_are_read_as_written() {
        let n = numbers_in("scores [22,33,42], $50,000 at 5% and 1e-9 C, x=-3.5");
        for expected in [22.0, 33.0, 42.0, 50_000.0, 0.05, 1e-9, -3.5] {
            assert!(
                n.iter().any(|&m| (m - expected).abs() < 1e-12),
                "{expected} in {n:?}"
            );
        }
        assert!(same_stem("triangles", "triangle") && same_stem("classes", "class"));
        assert!(same_stem("discovered", "discoverer") && same_stem("histor", "history"));
        assert!(!same_stem("form", "format") && !same_stem("weather", "whether"));
        assert_eq!(
            words("getWeatherNow x_y").collect::<Vec<_>>(),
            ["get", "weather", "now", "x", "y"]
        );
    }
}
