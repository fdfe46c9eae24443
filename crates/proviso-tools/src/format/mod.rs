//! Call formats: how a model writes a tool call, the grammar that holds it to that, and the
//! parser that reads it back.
//!
//! | format | a call looks like | parallel calls | other intents |
//! |---|---|---|---|
//! | `envelope` | `{"reasoning": "...", "intent": "tool_request", "tool": "get_arm", "arguments": {...}}` | `"calls": [...]` | all five |
//! | `hermes` | `<tool_call>\n{"name": "get_arm", "arguments": {...}}\n</tool_call>` | several blocks | text is the answer |
//! | `llama3` | `{"name": "get_arm", "parameters": {...}}` | no | text is the answer |
//! | `pythonic` | `[get_arm(trial_id="NCT04123456")]` | `[f(...), g(...)]` | text is the answer |
//!
//! Each format's grammar is compiled from the registry: the tool name is one of the declared
//! names and each tool's arguments follow that tool's own schema. Each format's parser reads
//! what the grammar allows back into the same typed proposal, and is strict: it never repairs,
//! and a delimiter inside a string value is data, not structure.

mod json_formats;
pub mod pythonic;

use std::fmt;
use std::str::FromStr;

use proviso_contract::{Intent, Rejection};
use serde_json::Value;

use crate::error::ToolError;
use crate::registry::Registry;

/// How the model writes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallFormat {
    /// proviso's intent envelope: JSON, a free `reasoning` string first, then the intent.
    Envelope,
    /// Hermes-style `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks.
    Hermes,
    /// Llama 3.1 JSON tool calling: one `{"name": ..., "parameters": ...}` object.
    Llama3,
    /// Pythonic calls: `[get_arm(trial_id="NCT04123456")]`.
    Pythonic,
}

impl CallFormat {
    /// Every format.
    pub const ALL: [Self; 4] = [Self::Envelope, Self::Hermes, Self::Llama3, Self::Pythonic];

    /// The format's name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Envelope => "envelope",
            Self::Hermes => "hermes",
            Self::Llama3 => "llama3",
            Self::Pythonic => "pythonic",
        }
    }

    /// Whether one step may carry several calls.
    #[must_use]
    pub fn allows_parallel(self) -> bool {
        !matches!(self, Self::Llama3)
    }

    /// The grammar for a step in this format.
    ///
    /// # Errors
    ///
    /// [`ToolError::FormatUnsupported`] naming a schema construct the format's grammar cannot
    /// express, or [`ToolError::Declaration`] for a named tool choice that is not declared.
    pub fn grammar(
        self,
        registry: &Registry,
        options: &GrammarOptions,
    ) -> Result<CallGrammar, ToolError> {
        if let ToolChoice::Named(name) = &options.choice {
            if registry.get(name).is_none() {
                return Err(ToolError::Declaration {
                    tool: name.clone(),
                    pointer: String::new(),
                    message: "the tool choice names a tool that is not declared".into(),
                });
            }
        }
        if registry.is_empty() && options.choice.forces_call() {
            return Err(ToolError::Declaration {
                tool: String::new(),
                pointer: String::new(),
                message: "a call is required but no tool is declared".into(),
            });
        }
        match self {
            Self::Envelope => Ok(json_formats::envelope_grammar(registry, options)),
            Self::Hermes => Ok(json_formats::hermes_grammar(registry, options)),
            Self::Llama3 => Ok(json_formats::llama3_grammar(registry, options)),
            Self::Pythonic => pythonic::grammar(registry, options),
        }
    }

    /// Reads a step written in this format. Structure problems are rejections at the parse
    /// gate (or at the schema gate for a well-formed object of the wrong shape); nothing is
    /// checked against the tools' schemas yet.
    ///
    /// # Errors
    ///
    /// A [`Rejection`] naming the gate, a stable code and the position.
    pub fn parse(self, text: &str, registry: &Registry) -> Result<Proposal, Rejection> {
        match self {
            Self::Envelope => json_formats::parse_envelope(text, registry),
            Self::Hermes => json_formats::parse_hermes(text),
            Self::Llama3 => json_formats::parse_llama3(text),
            Self::Pythonic => pythonic::parse_step(text),
        }
    }
}

impl CallFormat {
    /// What the grammar writes between two calls of one step, between their
    /// [`call_text`](Self::call_text)s; `None` for formats whose step holds one call or whose
    /// calls are not written one after another.
    #[must_use]
    pub fn call_separator(self) -> Option<&'static str> {
        match self {
            Self::Pythonic => Some(", "),
            Self::Hermes => Some("\n</tool_call>\n<tool_call>\n"),
            Self::Envelope | Self::Llama3 => None,
        }
    }

    /// A step cut (by the token limit or a loop) inside a later call, closed after its last
    /// complete call: the Hermes blocks up to the last `</tool_call>`, or the pythonic list
    /// up to the last call that parses, with its `]`. `None` when no call is complete, or
    /// for formats whose step holds one call. The gates judge the result like any step; a
    /// cut call is never completed, only dropped.
    #[must_use]
    pub fn complete_calls(self, text: &str) -> Option<String> {
        const END: &str = "</tool_call>";
        match self {
            Self::Hermes => {
                let end = text.rfind(END)? + END.len();
                Some(text[..end].to_owned())
            }
            Self::Pythonic => {
                let trimmed = text.trim_start();
                if !trimmed.starts_with('[') {
                    return None;
                }
                // Each ", " is a possible end of a call; the last one after which the list
                // parses wins (a string argument may contain ", " too, which then fails to
                // parse and is passed over).
                let cuts: Vec<usize> = text.match_indices(", ").map(|(at, _)| at).collect();
                cuts.into_iter().rev().take(64).find_map(|at| {
                    let closed = format!("{}]", &text[..at]);
                    pythonic::parse_calls(closed.trim())
                        .ok()
                        .filter(|calls| !calls.is_empty())
                        .map(|_| closed)
                })
            }
            Self::Envelope | Self::Llama3 => None,
        }
    }
}

/// Every argument object a tool's schema admits, when there are few: each property is an
/// `enum`, a `const` or a boolean, optional properties may be absent, and nothing else may
/// appear (`additionalProperties: false`). `None` when the set is open or larger than
/// `limit`. A harness uses it to take a call that already ran out of the grammar itself,
/// and a tool whose every call ran out of the choice.
#[must_use]
pub fn finite_arguments(
    schema: &Value,
    limit: usize,
) -> Option<Vec<serde_json::Map<String, Value>>> {
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return None;
    }
    let allowed = [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "description",
        "title",
    ];
    if schema
        .as_object()?
        .keys()
        .any(|k| !allowed.contains(&k.as_str()))
    {
        return None;
    }
    let required: Vec<&str> = crate::registry::required_names(schema.get("required")).collect();
    let empty = serde_json::Map::new();
    let properties = match schema.get("properties") {
        Some(Value::Object(p)) => p,
        None => &empty,
        Some(_) => return None,
    };
    let mut out = vec![serde_json::Map::new()];
    for (name, property) in properties {
        let values: Vec<Value> = if let Some(Value::Array(e)) = property.get("enum") {
            e.clone()
        } else if let Some(c) = property.get("const") {
            vec![c.clone()]
        } else if property.get("type").and_then(Value::as_str) == Some("boolean") {
            vec![Value::Bool(false), Value::Bool(true)]
        } else {
            return None;
        };
        // A value its other keywords might refuse is left to the gates: only plain
        // enumerations are taken as exact.
        if property.as_object().is_some_and(|p| {
            p.keys()
                .any(|k| !["enum", "const", "type", "description", "title"].contains(&k.as_str()))
        }) {
            return None;
        }
        let optional = !required.contains(&name.as_str());
        let mut next = Vec::new();
        for partial in &out {
            if optional {
                next.push(partial.clone());
            }
            for v in &values {
                let mut m = partial.clone();
                m.insert(name.clone(), v.clone());
                next.push(m);
            }
            if next.len() > limit {
                return None;
            }
        }
        out = next;
    }
    (out.len() <= limit).then_some(out)
}

impl fmt::Display for CallFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CallFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                format!("unknown call format `{s}` (envelope, hermes, llama3, pythonic)")
            })
    }
}

/// Whether, and which, tool the model must call, as in OpenAI's `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// The model may answer or call a tool.
    #[default]
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call a tool.
    None,
    /// The model must call this tool.
    Named(String),
}

impl ToolChoice {
    fn forces_call(&self) -> bool {
        matches!(self, Self::Required | Self::Named(_))
    }

    fn allows_call(&self) -> bool {
        !matches!(self, Self::None)
    }

    fn allows_text(&self) -> bool {
        matches!(self, Self::Auto | Self::None)
    }

    /// Whether `tool` may be called under this choice.
    fn admits(&self, tool: &str) -> bool {
        match self {
            Self::Named(name) => name == tool,
            Self::None => false,
            Self::Auto | Self::Required => true,
        }
    }
}

/// What a step's grammar allows.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GrammarOptions {
    /// Whether the model must or must not call a tool.
    pub choice: ToolChoice,
    /// Calls allowed in one step (1 forbids parallel calls; ignored by `llama3`).
    pub max_calls: usize,
    /// Longest `reasoning` string of an envelope, in characters.
    pub max_reasoning: usize,
    /// Schema of the final answer: an envelope's `answer` field (a non-empty string of at
    /// most 600 characters when `None`), or the whole text answer of a native format (free
    /// text when `None`).
    pub answer: Option<Value>,
    /// Whether an envelope may carry `clarification` and `abort` intents.
    pub allow_clarification: bool,
}

proviso_macros::setters!(GrammarOptions {
    choice: ToolChoice,
    max_calls: usize,
    max_reasoning: usize,
    answer: Option<Value>,
    allow_clarification: bool,
});

impl Default for GrammarOptions {
    fn default() -> Self {
        Self {
            choice: ToolChoice::Auto,
            max_calls: 1,
            max_reasoning: 240,
            answer: None,
            allow_clarification: true,
        }
    }
}

/// A grammar in the dialect of proviso's decoder (llguidance).
#[derive(Debug, Clone, PartialEq)]
pub enum Grammar {
    /// A JSON Schema.
    JsonSchema(Value),
    /// A Lark grammar (with inline `%json` schemas).
    Lark(String),
}

/// A step's grammar, with what it leaves to the gates.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CallGrammar {
    /// The grammar.
    pub grammar: Grammar,
    /// Schema keywords the grammar only approximates (a superset); the schema gate enforces
    /// them after decoding. Empty for the JSON formats, whose schemas llguidance enforces.
    pub verified_only: Vec<String>,
}

/// JSON style inside `%json` blocks: the same fixed separators as plain schema constraints,
/// so punctuation is forced and the model cannot loop on whitespace.
/// Schemas embedded inside a larger grammar document (a tool's parameters inside a call
/// wrapper, an answer schema inside an envelope) with their own local `$ref`s kept working.
///
/// A `$ref` such as `#/$defs/id` resolves from the root of the document it is in; once a
/// tool's schema is nested inside the wrapper, that root is the wrapper's. A schema with local
/// references is therefore moved under the wrapper's `$defs` (its references rebased to that
/// place, so `#` and `#/$defs/...` keep naming the same subschemas) and referenced from where
/// it was embedded. Schemas without references are embedded as they are, so every grammar
/// without `$ref`s is unchanged.
#[derive(Debug, Default)]
pub(crate) struct Embedder {
    defs: serde_json::Map<String, Value>,
    /// The `$defs` name given to each embedded key, so a tool embedded twice (the envelope's
    /// single call and its `calls` list) is moved once.
    names: std::collections::HashMap<String, String>,
}

impl Embedder {
    pub(crate) fn embed(&mut self, key: &str, schema: &Value) -> Value {
        if !proviso_json::refs::has_local_refs(schema) {
            return schema.clone();
        }
        let name = match self.names.get(key) {
            Some(name) => name.clone(),
            None => {
                // Names are reduced to pointer- and URI-safe characters; the index keeps them
                // distinct.
                let safe: String = key
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                let name = format!("proviso_{}_{safe}", self.defs.len());
                let rebased = proviso_json::refs::rebase_refs(schema, &format!("/$defs/{name}"));
                self.defs.insert(name.clone(), rebased);
                self.names.insert(key.to_owned(), name.clone());
                name
            }
        };
        serde_json::json!({"$ref": format!("#/$defs/{name}")})
    }

    /// `root` with the moved schemas added under its `$defs`.
    pub(crate) fn finish(self, mut root: Value) -> Value {
        if self.defs.is_empty() {
            return root;
        }
        if let Value::Object(map) = &mut root {
            let defs = map
                .entry("$defs")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Value::Object(defs) = defs {
                defs.extend(self.defs);
            }
        }
        root
    }
}

pub(crate) fn json_style() -> Value {
    serde_json::json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "})
}

/// The start rule of a Lark call grammar under `options.choice`.
pub(crate) fn start_rule(options: &GrammarOptions) -> &'static str {
    match (options.choice.allows_call(), options.choice.allows_text()) {
        (true, true) => "start: calls | text\n",
        (true, false) => "start: calls\n",
        _ => "start: text\n",
    }
}

/// The answer alternative of a native format's grammar: free text that cannot begin like a
/// call (so a started call is always held to the call grammar), or, when an answer schema is
/// given, a JSON value of that schema. `never`, when given, is a call's opening tag, which
/// the format's reader finds anywhere in a text (Hermes' `<tool_call>`): the text never
/// contains it, so a text answer cannot carry a call the grammar did not check.
pub(crate) fn text_rule(
    options: &GrammarOptions,
    first_excluded: &str,
    never: Option<&str>,
) -> String {
    match &options.answer {
        Some(schema) => {
            let mut schema = schema.clone();
            if let Value::Object(map) = &mut schema {
                map.insert("x-guidance".into(), json_style());
            }
            format!("text: %json {schema}\n")
        }
        None => {
            let free = format!("/[^{first_excluded}\\s][\\s\\S]*/");
            match never {
                // An llguidance lexeme: the free text, and not any text holding the tag.
                Some(tag) => format!(
                    "text: FREE_TEXT\nFREE_TEXT: {free} & ~/[\\s\\S]*{}[\\s\\S]*/\n",
                    regex::escape(tag)
                ),
                None => format!("text: {free}\n"),
            }
        }
    }
}

pub use proviso_contract::ProposedCall;

/// A parsed step: calls, or another intent.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The calls, in written order.
    pub calls: Vec<ProposedCall>,
    /// The intent when the step makes no call (a final answer, clarification, plan update or
    /// abort).
    pub other: Option<Intent>,
    /// Text or reasoning written before the calls, kept for audit only.
    pub rationale: Option<String>,
}

#[cfg(test)]
mod tests;
