//! The three JSON-based formats: the proviso envelope, Hermes blocks and Llama 3 objects.

use std::sync::Arc;

use proviso_contract::{intent, Gate, Intent, IntentClass, Location, Rejection};
use proviso_json::{ParseOptions, Position};
use serde_json::{json, Map, Value};

use super::{
    json_style, start_rule, text_rule, CallGrammar, Embedder, Grammar, GrammarOptions, Proposal,
    ProposedCall,
};
use crate::registry::Registry;
use proviso_contract::Code;

const TOOL_CALL_OPEN: &str = "<tool_call>";
const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// Longest final answer an envelope grammar allows by default, in characters.
const DEFAULT_ANSWER_MAX: usize = 600;

fn string(max: usize) -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": max})
}

/// One `{key: const name, args_key: parameters}` object per admitted tool.
fn per_tool(
    registry: &Registry,
    options: &GrammarOptions,
    key: &str,
    args_key: &str,
    embedder: &mut Embedder,
) -> Vec<Value> {
    registry
        .iter()
        .filter(|t| options.choice.admits(t.spec().name()))
        .map(|t| {
            let parameters = embedder.embed(t.spec().name(), t.spec().parameters());
            json!({
                "type": "object",
                "properties": {key: {"const": t.spec().name()}, args_key: parameters},
                "required": [key, args_key],
                "additionalProperties": false,
            })
        })
        .collect()
}

pub(super) fn envelope_grammar(registry: &Registry, options: &GrammarOptions) -> CallGrammar {
    let reasoning = json!({"type": "string", "maxLength": options.max_reasoning});
    let variant = |intent: &str, extra: Vec<(&str, Value)>| {
        let mut properties = Map::new();
        properties.insert("reasoning".into(), reasoning.clone());
        properties.insert("intent".into(), json!({"const": intent}));
        let mut required = vec![json!("reasoning"), json!("intent")];
        for (name, schema) in extra {
            properties.insert(name.into(), schema);
            required.push(json!(name));
        }
        json!({"type": "object", "properties": properties, "required": required,
            "additionalProperties": false})
    };
    let mut variants = Vec::new();
    let mut embedder = Embedder::default();
    if options.choice.allows_call() {
        for call in per_tool(registry, options, "tool", "arguments", &mut embedder) {
            let tool = call["properties"]["tool"].clone();
            let arguments = call["properties"]["arguments"].clone();
            variants.push(variant(
                "tool_request",
                vec![("tool", tool), ("arguments", arguments)],
            ));
        }
        if options.max_calls > 1 {
            let items = per_tool(registry, options, "tool", "arguments", &mut embedder);
            variants.push(variant(
                "tool_request",
                vec![(
                    "calls",
                    json!({"type": "array", "minItems": 1, "maxItems": options.max_calls,
                        "items": {"anyOf": items}}),
                )],
            ));
        }
    }
    if options.choice.allows_text() {
        let answer = options.answer.as_ref().map_or_else(
            || string(DEFAULT_ANSWER_MAX),
            |schema| embedder.embed("answer", schema),
        );
        variants.push(variant("final_answer", vec![("answer", answer)]));
        if options.allow_clarification {
            variants.push(variant("clarification", vec![("question", string(300))]));
            variants.push(variant("abort", vec![("reason", string(300))]));
        }
    }
    CallGrammar {
        grammar: Grammar::JsonSchema(embedder.finish(json!({"anyOf": variants}))),
        verified_only: Vec::new(),
    }
}

fn lark_json(schema: &Value) -> String {
    let mut schema = schema.clone();
    if let Value::Object(map) = &mut schema {
        map.insert("x-guidance".into(), json_style());
    }
    format!("%json {schema}")
}

fn calls_rule(max_calls: usize, separator: &str) -> String {
    if max_calls <= 1 {
        "calls: call\n".to_owned()
    } else {
        format!("calls: call ({separator:?} call){{0,{}}}\n", max_calls - 1)
    }
}

pub(super) fn hermes_grammar(registry: &Registry, options: &GrammarOptions) -> CallGrammar {
    let mut lark = String::from(start_rule(options));
    if options.choice.allows_call() {
        lark.push_str(&calls_rule(options.max_calls, "\n"));
        let mut embedder = Embedder::default();
        let calls = per_tool(registry, options, "name", "arguments", &mut embedder);
        let schema = embedder.finish(json!({"anyOf": calls}));
        lark.push_str(&format!(
            "call: {open:?} {json} {close:?}\n",
            open = format!("{TOOL_CALL_OPEN}\n"),
            json = lark_json(&schema),
            close = format!("\n{TOOL_CALL_CLOSE}"),
        ));
    }
    if options.choice.allows_text() {
        lark.push_str(&text_rule(options, "<", Some(TOOL_CALL_OPEN)));
    }
    CallGrammar {
        grammar: Grammar::Lark(lark),
        verified_only: Vec::new(),
    }
}

pub(super) fn llama3_grammar(registry: &Registry, options: &GrammarOptions) -> CallGrammar {
    let mut embedder = Embedder::default();
    let calls = per_tool(registry, options, "name", "parameters", &mut embedder);
    let schema = embedder.finish(json!({"anyOf": calls}));
    if !options.choice.allows_text() {
        return CallGrammar {
            grammar: Grammar::JsonSchema(schema),
            verified_only: Vec::new(),
        };
    }
    let mut lark = String::from(start_rule(options));
    if options.choice.allows_call() {
        lark.push_str(&format!("calls: {}\n", lark_json(&schema)));
    }
    lark.push_str(&text_rule(options, "{", None));
    CallGrammar {
        grammar: Grammar::Lark(lark),
        verified_only: Vec::new(),
    }
}

fn strict() -> ParseOptions {
    ParseOptions::default()
}

fn shape(code: Code, message: impl Into<String>, pointer: &str) -> Rejection {
    Rejection::new(Gate::Schema, code, message, Location::instance(pointer))
}

fn text_answer(text: &str) -> Result<Proposal, Rejection> {
    let answer = text.trim();
    if answer.is_empty() {
        return Err(Rejection::new(
            Gate::Parse,
            Code::EmptyInput,
            "the output is empty",
            Location::default(),
        ));
    }
    Ok(Proposal {
        calls: Vec::new(),
        other: Some(Intent::FinalAnswer {
            answer: Arc::new(Value::String(answer.to_owned())),
            reasoning: None,
        }),
        rationale: None,
    })
}

pub(super) fn parse_envelope(text: &str, registry: &Registry) -> Result<Proposal, Rejection> {
    let value = proviso_json::parse(text.as_bytes(), &strict())
        .map_err(|e| Rejection::from_parse_error(&e))?;
    let Some(object) = value.as_object() else {
        return Err(shape(
            Code::MissingIntent,
            "the output is not an intent envelope object",
            "",
        ));
    };
    // Undeclared tools are the schema gate's to report, with the others; here every name is
    // accepted so that the envelope's structure is read first.
    let any_class = |_: &str| Some(IntentClass::Read);
    let parsed = intent::from_envelope(&value, &any_class).map_err(|v| {
        Rejection::from_violations(Gate::Schema, vec![v]).with_text_position(text.as_bytes())
    })?;
    let own: &[&str] = match parsed.kind() {
        "final_answer" => &["answer"],
        "tool_request" => &["tool", "arguments", "calls"],
        "clarification" => &["question"],
        "plan_update" => &["plan"],
        _ => &["reason"],
    };
    if let Some(extra) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "intent" | "reasoning") && !own.contains(&k.as_str()))
    {
        return Err(shape(
            Code::UnexpectedProperty,
            format!("the envelope carries `{extra}`, which no intent declares"),
            &format!("/{extra}"),
        )
        .with_text_position(text.as_bytes()));
    }
    let reasoning = object
        .get("reasoning")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match parsed {
        Intent::ToolRequest { calls, .. } => {
            let lone = object.contains_key("tool");
            let calls = calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ProposedCall {
                    name: c.name().to_owned(),
                    arguments: Value::Object(c.arguments().clone()),
                    pointer: if lone {
                        String::new()
                    } else {
                        format!("/calls/{i}")
                    },
                })
                .collect();
            let _ = registry;
            Ok(Proposal {
                calls,
                other: None,
                rationale: reasoning,
            })
        }
        other => Ok(Proposal {
            calls: Vec::new(),
            other: Some(other),
            rationale: None,
        }),
    }
}

/// Reads one `{"<name_key>": "...", "<args_key>": {...}}` call object.
fn call_object(
    value: &Value,
    name_key: &str,
    args_key: &str,
    pointer: &str,
) -> Result<ProposedCall, Rejection> {
    let Some(object) = value.as_object() else {
        return Err(shape(
            Code::MalformedCall,
            "a call must be a JSON object",
            pointer,
        ));
    };
    if let Some(extra) = object.keys().find(|k| *k != name_key && *k != args_key) {
        return Err(shape(
            Code::UnexpectedProperty,
            format!("a call carries `{extra}`; only `{name_key}` and `{args_key}` are allowed"),
            &format!("{pointer}/{extra}"),
        ));
    }
    let Some(name) = object.get(name_key).and_then(Value::as_str) else {
        return Err(shape(
            Code::MalformedCall,
            format!("a call needs a string `{name_key}`"),
            &format!("{pointer}/{name_key}"),
        ));
    };
    let Some(arguments) = object.get(args_key) else {
        return Err(shape(
            Code::MalformedCall,
            format!("a call needs `{args_key}`"),
            &format!("{pointer}/{args_key}"),
        ));
    };
    Ok(ProposedCall {
        name: name.to_owned(),
        arguments: arguments.clone(),
        pointer: pointer.to_owned(),
    })
}

fn parse_error_at(text: &str, offset: usize, code: Code, message: impl Into<String>) -> Rejection {
    Rejection::new(
        Gate::Parse,
        code,
        message,
        Location::at(Position::at(text.as_bytes(), offset)),
    )
}

fn skip_ws(text: &str, mut at: usize) -> usize {
    let bytes = text.as_bytes();
    while at < bytes.len() && bytes[at].is_ascii_whitespace() {
        at += 1;
    }
    at
}

pub(super) fn parse_hermes(text: &str) -> Result<Proposal, Rejection> {
    let Some(first) = text.find(TOOL_CALL_OPEN) else {
        if text.contains(TOOL_CALL_CLOSE) {
            let at = text.find(TOOL_CALL_CLOSE).unwrap_or(0);
            return Err(parse_error_at(
                text,
                at,
                Code::UnbalancedToolCall,
                "`</tool_call>` without an opening `<tool_call>`",
            ));
        }
        return text_answer(text);
    };
    let rationale = Some(text[..first].trim())
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let mut calls = Vec::new();
    let mut at = first;
    loop {
        // `at` is at an opening tag.
        let start = skip_ws(text, at + TOOL_CALL_OPEN.len());
        // The JSON value's extent is found by a JSON reader, so `</tool_call>` inside a string
        // is data. The slice is then parsed strictly (duplicate keys, bounds).
        let mut stream =
            serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde::de::IgnoredAny>();
        match stream.next() {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                let offset = start + offset_of(&text[start..], e.line(), e.column());
                return Err(parse_error_at(
                    text,
                    offset,
                    if e.is_eof() {
                        Code::UnexpectedEnd
                    } else {
                        Code::InvalidJson
                    },
                    format!("the call inside <tool_call> is not JSON: {e}"),
                ));
            }
            None => {
                return Err(parse_error_at(
                    text,
                    start,
                    Code::UnexpectedEnd,
                    "<tool_call> is not followed by a JSON object",
                ))
            }
        }
        let end = start + stream.byte_offset();
        let value = proviso_json::parse(&text.as_bytes()[start..end], &strict()).map_err(|e| {
            parse_error_at(
                text,
                start + e.position().offset,
                Code::from(e.kind()),
                e.message(),
            )
        })?;
        let pointer = format!("/calls/{}", calls.len());
        calls.push(call_object(&value, "name", "arguments", &pointer)?);
        let after = skip_ws(text, end);
        if !text[after..].starts_with(TOOL_CALL_CLOSE) {
            return Err(parse_error_at(
                text,
                after,
                Code::UnclosedToolCall,
                "a call must be followed by </tool_call>",
            ));
        }
        let next = skip_ws(text, after + TOOL_CALL_CLOSE.len());
        if next == text.len() {
            break;
        }
        if !text[next..].starts_with(TOOL_CALL_OPEN) {
            return Err(parse_error_at(
                text,
                next,
                Code::TrailingText,
                "only further <tool_call> blocks may follow a call",
            ));
        }
        at = next;
    }
    Ok(Proposal {
        calls,
        other: None,
        rationale,
    })
}

/// Byte offset of serde_json's 1-based line and column in `text`.
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len())
}

pub(super) fn parse_llama3(text: &str) -> Result<Proposal, Rejection> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return text_answer(text);
    }
    let value = proviso_json::parse(text.as_bytes(), &strict()).map_err(|e| {
        let r = Rejection::from_parse_error(&e);
        if matches!(e.kind(), proviso_json::ParseErrorKind::TrailingContent) {
            // A second object after the first: Llama 3 JSON calling has one call a turn.
            Rejection::new(
                Gate::Parse,
                Code::TrailingContent,
                "the llama3 format carries one call per step; text follows the call object",
                r.location().clone(),
            )
        } else {
            r
        }
    })?;
    Ok(Proposal {
        calls: vec![call_object(&value, "name", "parameters", "")?],
        other: None,
        rationale: None,
    })
}
