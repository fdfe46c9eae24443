//! The OpenAI wire format: request bodies read into typed [`GenerationRequest`]s, and the
//! response, chunk and error bodies written back.
//!
//! Reading is two-step, so that the status code says what was wrong: a body that is not JSON
//! is a syntax error (400); JSON that does not make a valid request is a data error (422),
//! naming the parameter. Parameters whose meaning proviso cannot honour (`logprobs`,
//! `logit_bias`, image content, ...) are refused by name rather than
//! silently ignored; purely informational ones (`user`, `metadata`, `store`, ...) are
//! accepted.

use serde::Serialize;
use serde_json::{json, Map, Value};

use proviso_contract::{Message, MessageToolCall, Role};

use crate::{GenerationRequest, OutputConstraint, PromptInput, SamplingParams, ToolChoiceRequest};

/// A request that cannot be served, with the parameter at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct InvalidRequest {
    /// The parameter, as a dotted path (`messages[2].content`).
    pub param: Option<String>,
    /// What is wrong.
    pub message: String,
    /// Whether the request asks for something proviso cannot enforce (400), rather than
    /// being malformed (422).
    pub unsupported: bool,
}

impl InvalidRequest {
    /// A malformed value of `param` (422).
    #[must_use]
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.into()),
            message: message.into(),
            unsupported: false,
        }
    }

    /// A value of `param` that proviso cannot enforce (400).
    #[must_use]
    pub fn unsupported(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            param: Some(param.into()),
            message: message.into(),
            unsupported: true,
        }
    }
}

/// A request a backend refused before generation is the same client error as one the wire
/// reader refused.
impl From<crate::RejectedRequest> for InvalidRequest {
    fn from(e: crate::RejectedRequest) -> Self {
        Self {
            param: e.param,
            message: e.message,
            unsupported: e.unsupported,
        }
    }
}

type Result<T> = std::result::Result<T, InvalidRequest>;

/// Parameters accepted and ignored because they change nothing about the output.
const INFORMATIONAL: &[&str] = &["model", "user", "metadata", "store", "service_tier"];

fn take<'a>(body: &'a Map<String, Value>, key: &str, seen: &mut Vec<String>) -> Option<&'a Value> {
    seen.push(key.to_owned());
    body.get(key).filter(|v| !v.is_null())
}

fn as_u32(value: &Value, param: &str, min: u32, max: u32) -> Result<u32> {
    value
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| {
            InvalidRequest::new(
                param,
                format!("`{param}` must be an integer from {min} to {max}"),
            )
        })
}

fn as_f32(value: &Value, param: &str, min: f64, max: f64) -> Result<f32> {
    #[allow(clippy::cast_possible_truncation)] // Bounded to small ranges just below.
    value
        .as_f64()
        .filter(|v| (min..=max).contains(v))
        .map(|v| v as f32)
        .ok_or_else(|| {
            InvalidRequest::new(
                param,
                format!("`{param}` must be a number from {min} to {max}"),
            )
        })
}

fn as_bool(value: &Value, param: &str) -> Result<bool> {
    value
        .as_bool()
        .ok_or_else(|| InvalidRequest::new(param, format!("`{param}` must be a boolean")))
}

/// Parameters that must be absent or neutral, because honouring them is not implemented.
fn refuse_unhonoured(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<()> {
    if let Some(v) = take(body, "logit_bias", seen) {
        if v.as_object().is_none_or(|m| !m.is_empty()) {
            return Err(InvalidRequest::unsupported(
                "logit_bias",
                "`logit_bias` is not supported",
            ));
        }
    }
    // `logprobs` and `top_logprobs` are read by each route (log-probabilities are served).
    if let Some(v) = take(body, "echo", seen) {
        if v != &Value::Bool(false) {
            return Err(InvalidRequest::unsupported(
                "echo",
                "`echo` is not supported",
            ));
        }
    }
    for key in [
        "audio",
        "modalities",
        "prediction",
        "suffix",
        "best_of",
        "functions",
        "function_call",
        "web_search_options",
        "reasoning_effort",
    ] {
        if take(body, key, seen).is_some() {
            return Err(InvalidRequest::unsupported(
                key,
                format!("`{key}` is not supported"),
            ));
        }
    }
    Ok(())
}

fn refuse_unknown(body: &Map<String, Value>, seen: &[String]) -> Result<()> {
    match body
        .keys()
        .find(|k| !seen.iter().any(|s| s == *k) && !INFORMATIONAL.contains(&k.as_str()))
    {
        Some(key) => Err(InvalidRequest::new(
            key.clone(),
            format!("unrecognized request parameter `{key}`"),
        )),
        None => Ok(()),
    }
}

fn sampling(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<SamplingParams> {
    let temperature = match take(body, "temperature", seen) {
        Some(v) => as_f32(v, "temperature", 0.0, 2.0)?,
        None => 1.0,
    };
    let top_p = match take(body, "top_p", seen) {
        Some(v) => as_f32(v, "top_p", 0.0, 1.0)?,
        None => 1.0,
    };
    let seed = match take(body, "seed", seen) {
        Some(v) => Some(
            v.as_i64()
                .map(i64::cast_unsigned)
                .or_else(|| v.as_u64())
                .ok_or_else(|| InvalidRequest::new("seed", "`seed` must be an integer"))?,
        ),
        None => None,
    };
    let mut penalty = |key: &str, min: f64, max: f64, default: f32| match take(body, key, seen) {
        Some(v) => as_f32(v, key, min, max),
        None => Ok(default),
    };
    let frequency_penalty = penalty("frequency_penalty", -2.0, 2.0, 0.0)?;
    let presence_penalty = penalty("presence_penalty", -2.0, 2.0, 0.0)?;
    let repetition_penalty = penalty("repetition_penalty", 0.01, 10.0, 1.0)?;
    let dry_multiplier = penalty("dry_multiplier", 0.0, 10.0, 0.0)?;
    let dry_base = penalty("dry_base", 1.0, 10.0, 1.75)?;
    let dry_allowed_length = match take(body, "dry_allowed_length", seen) {
        Some(v) => as_u32(v, "dry_allowed_length", 1, 100)?,
        None => 2,
    };
    Ok(SamplingParams {
        temperature,
        top_p,
        seed,
        frequency_penalty,
        presence_penalty,
        repetition_penalty,
        dry: (dry_multiplier > 0.0).then_some((dry_multiplier, dry_base, dry_allowed_length)),
    })
}

fn stops(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<Vec<String>> {
    let stop = match take(body, "stop", seen) {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                InvalidRequest::new("stop", "`stop` must be a string or an array of strings")
            })?,
        Some(_) => {
            return Err(InvalidRequest::new(
                "stop",
                "`stop` must be a string or an array of strings",
            ))
        }
    };
    if stop.len() > 4 || stop.iter().any(String::is_empty) {
        return Err(InvalidRequest::new(
            "stop",
            "`stop` takes at most 4 non-empty sequences",
        ));
    }
    Ok(stop)
}

/// proviso's constraint extensions, under vLLM's names so vLLM clients work unchanged: the
/// legacy `guided_regex`, `guided_choice`, `guided_grammar`, `guided_json`, and the current
/// `structured_outputs` (0.12 on) with the same four constraints.
fn guided(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<Option<OutputConstraint>> {
    let mut found = Vec::new();
    for kind in ["regex", "choice", "grammar", "json"] {
        let param = format!("guided_{kind}");
        if let Some(v) = take(body, &param, seen) {
            found.push((param.clone(), constraint(kind, v, &param)?));
        }
    }
    if let Some(v) = take(body, "structured_outputs", seen) {
        found.extend(structured_outputs(v)?);
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|(_, c)| c)),
        _ => Err(InvalidRequest::new(
            found[1].0.clone(),
            "give one constraint: one of guided_regex, guided_choice, guided_grammar, guided_json, or one field of structured_outputs",
        )),
    }
}

/// One constraint of `kind` (`regex`, `choice`, `grammar` in Lark, `json`), given as
/// `param`.
fn constraint(kind: &str, value: &Value, param: &str) -> Result<OutputConstraint> {
    let text = |what: &str| {
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| InvalidRequest::new(param, format!("`{param}` must be {what}")))
    };
    Ok(match kind {
        "regex" => OutputConstraint::Regex(text("a string")?),
        "grammar" => OutputConstraint::Lark(text("a Lark grammar string")?),
        "choice" => OutputConstraint::Choice(
            value
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|c| c.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    InvalidRequest::new(
                        param,
                        format!("`{param}` must be a non-empty array of strings"),
                    )
                })?,
        ),
        _ => OutputConstraint::JsonSchema {
            // The field's own name: `guided_json`, or `structured_outputs`.
            name: param.split('.').next().unwrap_or(param).to_owned(),
            schema: match value {
                Value::String(s) => serde_json::from_str(s).map_err(|e| {
                    InvalidRequest::new(param, format!("`{param}` is not JSON: {e}"))
                })?,
                other => other.clone(),
            },
            strict: true,
        },
    })
}

/// vLLM's `structured_outputs`: one of `json`, `regex`, `choice`, `grammar` (Lark here).
/// Fields that only tune vLLM's backend are accepted and have no effect; `structural_tag`
/// and unknown fields are refused by name.
fn structured_outputs(value: &Value) -> Result<Vec<(String, OutputConstraint)>> {
    let Some(fields) = value.as_object() else {
        return Err(InvalidRequest::new(
            "structured_outputs",
            "`structured_outputs` must be an object",
        ));
    };
    let mut found = Vec::new();
    for (key, v) in fields {
        match key.as_str() {
            _ if v.is_null() => {}
            "json" | "regex" | "choice" | "grammar" => found.push((
                "structured_outputs".to_owned(),
                constraint(key, v, &format!("structured_outputs.{key}"))?,
            )),
            // Tuning of vLLM's own decoding backends: nothing to enforce.
            "disable_fallback" | "disable_any_whitespace" | "disable_additional_properties"
            | "whitespace_pattern" => {}
            other => {
                return Err(InvalidRequest::unsupported(
                    format!("structured_outputs.{other}"),
                    format!("`structured_outputs.{other}` is not supported; give one of json, regex, choice, grammar"),
                ))
            }
        }
    }
    Ok(found)
}

fn response_format(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<OutputConstraint> {
    let Some(format) = take(body, "response_format", seen) else {
        return Ok(OutputConstraint::None);
    };
    let kind = format
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "text" => Ok(OutputConstraint::None),
        "json_object" => Ok(OutputConstraint::JsonObject),
        "json_schema" => {
            let spec = format
                .get("json_schema")
                .and_then(Value::as_object)
                .ok_or_else(|| {
                    InvalidRequest::new(
                        "response_format.json_schema",
                        "`json_schema` must be an object with `name` and `schema`",
                    )
                })?;
            let name = spec
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("response")
                .to_owned();
            let schema = spec.get("schema").cloned().ok_or_else(|| {
                InvalidRequest::new("response_format.json_schema.schema", "`schema` is required")
            })?;
            let strict = spec.get("strict").and_then(Value::as_bool).unwrap_or(false);
            Ok(OutputConstraint::JsonSchema {
                name,
                schema,
                strict,
            })
        }
        other => Err(InvalidRequest::new(
            "response_format.type",
            format!("`{other}` is not one of text, json_object, json_schema"),
        )),
    }
}

fn content_text(content: &Value, param: &str) -> Result<String> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => text.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                    Some(other) => {
                        return Err(InvalidRequest::unsupported(format!("{param}[{i}].type"), format!("content parts of type `{other}` are not supported; the model reads text")))
                    }
                    None => return Err(InvalidRequest::new(format!("{param}[{i}]"), "a content part needs a `type`")),
                }
            }
            Ok(text)
        }
        _ => Err(InvalidRequest::new(
            param,
            "`content` must be a string or an array of text parts",
        )),
    }
}

fn messages(body: &Map<String, Value>, seen: &mut Vec<String>) -> Result<Vec<Message>> {
    let Some(Value::Array(items)) = take(body, "messages", seen) else {
        return Err(InvalidRequest::new(
            "messages",
            "`messages` must be a non-empty array",
        ));
    };
    if items.is_empty() {
        return Err(InvalidRequest::new(
            "messages",
            "`messages` must be a non-empty array",
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = match item.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => Role::System,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            Some(other) => {
                return Err(InvalidRequest::new(
                    format!("{at}.role"),
                    format!("`{other}` is not one of system, developer, user, assistant, tool"),
                ))
            }
            None => {
                return Err(InvalidRequest::new(
                    format!("{at}.role"),
                    "a message needs a `role`",
                ))
            }
        };
        let content = match item.get("content").filter(|c| !c.is_null()) {
            Some(c) => content_text(c, &format!("{at}.content"))?,
            None if role == Role::Assistant => String::new(),
            None => {
                return Err(InvalidRequest::new(
                    format!("{at}.content"),
                    "a message needs `content`",
                ))
            }
        };
        let mut tool_calls = Vec::new();
        if let Some(calls) = item.get("tool_calls").filter(|c| !c.is_null()) {
            if role != Role::Assistant {
                return Err(InvalidRequest::new(
                    format!("{at}.tool_calls"),
                    "only assistant messages carry `tool_calls`",
                ));
            }
            let calls = calls.as_array().ok_or_else(|| {
                InvalidRequest::new(format!("{at}.tool_calls"), "`tool_calls` must be an array")
            })?;
            for (j, call) in calls.iter().enumerate() {
                let param = format!("{at}.tool_calls[{j}]");
                if let Some(custom) = call.get("custom") {
                    // A custom call sent back is the function call it was generated as.
                    let field = |name: &str| {
                        custom.get(name).and_then(Value::as_str).ok_or_else(|| {
                            InvalidRequest::new(
                                format!("{param}.custom.{name}"),
                                format!("a custom tool call needs `{name}`"),
                            )
                        })
                    };
                    tool_calls.push(MessageToolCall {
                        id: call
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        name: field("name")?.to_owned(),
                        arguments: json!({"input": field("input")?}).to_string(),
                    });
                    continue;
                }
                let function = call.get("function").ok_or_else(|| {
                    InvalidRequest::new(format!("{param}.function"), "a tool call needs `function`")
                })?;
                tool_calls.push(MessageToolCall {
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    name: function
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            InvalidRequest::new(
                                format!("{param}.function.name"),
                                "a tool call needs a `name`",
                            )
                        })?
                        .to_owned(),
                    // Missing arguments are not `{}`: the client must say what the call was.
                    arguments: function
                        .get("arguments")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            InvalidRequest::new(
                                format!("{param}.function.arguments"),
                                "a tool call needs `arguments`, a JSON text",
                            )
                        })?
                        .to_owned(),
                });
            }
        }
        let tool_call_id = item
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if role == Role::Tool {
            let Some(id) = &tool_call_id else {
                return Err(InvalidRequest::new(
                    format!("{at}.tool_call_id"),
                    "a tool message needs `tool_call_id`",
                ));
            };
            // A result answers a call the conversation made: one that answers none would be
            // text the model reads as a tool's word without any call behind it.
            let answered = out
                .iter()
                .any(|m: &Message| m.tool_calls.iter().any(|c| &c.id == id));
            if !answered {
                return Err(InvalidRequest::new(
                    format!("{at}.tool_call_id"),
                    format!("`{id}` is not the id of a tool call made earlier in `messages`"),
                ));
            }
        }
        let mut message = Message::new(role, content).with_tool_calls(tool_calls);
        message.tool_call_id = tool_call_id;
        out.push(message);
    }
    Ok(out)
}

/// `tool_choice`, and the names an `allowed_tools` choice keeps callable.
fn tool_choice(
    body: &Map<String, Value>,
    seen: &mut Vec<String>,
) -> Result<(ToolChoiceRequest, Option<Vec<String>>)> {
    match take(body, "tool_choice", seen) {
        Some(Value::Object(o))
            if o.get("type").and_then(Value::as_str) == Some("allowed_tools") =>
        {
            let allowed = o.get("allowed_tools").ok_or_else(|| {
                InvalidRequest::new(
                    "tool_choice.allowed_tools",
                    "an `allowed_tools` choice needs `allowed_tools: {mode, tools}`",
                )
            })?;
            let choice = match allowed
                .get("mode")
                .and_then(Value::as_str)
                .unwrap_or("auto")
            {
                "auto" => ToolChoiceRequest::Auto,
                "required" => ToolChoiceRequest::Required,
                other => {
                    return Err(InvalidRequest::new(
                        "tool_choice.allowed_tools.mode",
                        format!("`{other}` is not one of auto, required"),
                    ))
                }
            };
            let names = allowed
                .get("tools")
                .and_then(Value::as_array)
                .map(|tools| {
                    tools
                        .iter()
                        .map(|t| {
                            t.pointer("/function/name")
                                .or_else(|| t.pointer("/custom/name"))
                                .or_else(|| t.get("name"))
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .and_then(|names| names.filter(|n| !n.is_empty()))
                .ok_or_else(|| {
                    InvalidRequest::new(
                        "tool_choice.allowed_tools.tools",
                        "`allowed_tools.tools` needs a non-empty list of functions with names",
                    )
                })?;
            Ok((choice, Some(names)))
        }
        other => plain_tool_choice(other).map(|choice| (choice, None)),
    }
}

/// Reads a chat request's `tool_choice` value on its own, as [`chat_request`] reads it in a
/// request (`allowed_tools` in `required` mode is [`ToolChoiceRequest::Required`]).
///
/// # Errors
///
/// [`InvalidRequest`] naming the field at fault.
pub fn read_tool_choice(value: &Value) -> Result<ToolChoiceRequest> {
    let mut body = Map::new();
    body.insert("tool_choice".into(), value.clone());
    tool_choice(&body, &mut Vec::new()).map(|(choice, _)| choice)
}

fn plain_tool_choice(value: Option<&Value>) -> Result<ToolChoiceRequest> {
    match value {
        None => Ok(ToolChoiceRequest::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(ToolChoiceRequest::Auto),
            "none" => Ok(ToolChoiceRequest::None),
            "required" => Ok(ToolChoiceRequest::Required),
            other => Err(InvalidRequest::new(
                "tool_choice",
                format!("`{other}` is not one of auto, none, required"),
            )),
        },
        Some(Value::Object(o)) => o
            .get("function")
            .or_else(|| o.get("custom"))
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(|n| ToolChoiceRequest::Named(n.to_owned()))
            .ok_or_else(|| {
                InvalidRequest::new(
                    "tool_choice.function.name",
                    "a named tool choice needs `function.name`",
                )
            }),
        Some(_) => Err(InvalidRequest::new(
            "tool_choice",
            "`tool_choice` must be a string or an object",
        )),
    }
}

/// The parameters chat and legacy completions share.
struct Common {
    sampling: SamplingParams,
    stop: Vec<String>,
    stream: bool,
    include_usage: bool,
    n: u32,
}

/// Reads the shared parameters, then refuses what cannot be honoured and anything unknown
/// (so it must come after every endpoint-specific parameter has been taken).
fn common(body: &Map<String, Value>, mut seen: Vec<String>) -> Result<Common> {
    let sampling = sampling(body, &mut seen)?;
    let stop = stops(body, &mut seen)?;
    let stream = match take(body, "stream", &mut seen) {
        Some(v) => as_bool(v, "stream")?,
        None => false,
    };
    let include_usage = match take(body, "stream_options", &mut seen) {
        None => false,
        Some(Value::Object(options)) => {
            if let Some(key) = options
                .keys()
                .find(|k| !matches!(k.as_str(), "include_usage" | "include_obfuscation"))
            {
                return Err(InvalidRequest::unsupported(
                    format!("stream_options.{key}"),
                    format!("`stream_options.{key}` is not supported"),
                ));
            }
            match options.get("include_usage").filter(|v| !v.is_null()) {
                Some(v) => as_bool(v, "stream_options.include_usage")?,
                None => false,
            }
        }
        Some(_) => {
            return Err(InvalidRequest::new(
                "stream_options",
                "`stream_options` must be an object",
            ))
        }
    };
    let n = match take(body, "n", &mut seen) {
        Some(v) => as_u32(v, "n", 1, 8)?,
        None => 1,
    };
    refuse_unhonoured(body, &mut seen)?;
    refuse_unknown(body, &seen)?;
    Ok(Common {
        sampling,
        stop,
        stream,
        include_usage,
        n,
    })
}

/// Reads a chat-completions body.
///
/// # Errors
///
/// [`InvalidRequest`] naming the parameter.
pub fn chat_request(body: &Value) -> Result<GenerationRequest> {
    let Some(body) = body.as_object() else {
        return Err(InvalidRequest {
            param: None,
            message: "the request body must be a JSON object".into(),
            unsupported: false,
        });
    };
    let mut seen = Vec::new();
    let messages = messages(body, &mut seen)?;
    let mut custom_tools = Vec::new();
    let mut lark_tools = Vec::new();
    let tools = match take(body, "tools", &mut seen) {
        None => None,
        Some(Value::Array(t)) if t.is_empty() => None,
        Some(Value::Array(t)) => {
            let mut tools = t.clone();
            let found = custom_as_functions(&mut tools)?;
            custom_tools = found.names;
            lark_tools = found.lark;
            (!tools.is_empty()).then_some(Value::Array(tools))
        }
        Some(_) => return Err(InvalidRequest::new("tools", "`tools` must be an array")),
    };
    let (mut tool_choice, allowed) = tool_choice(body, &mut seen)?;
    // A custom tool with a Lark input grammar is served when `tool_choice` names it: the
    // whole output is its input, generated under its grammar.
    let named = match &tool_choice {
        ToolChoiceRequest::Named(n) => lark_tools.iter().find(|(l, _, _)| l == n),
        _ => None,
    };
    let custom_call = match (named, lark_tools.first()) {
        (Some((name, grammar, _)), _) => {
            custom_tools.push(name.clone());
            tool_choice = ToolChoiceRequest::None;
            Some((name.clone(), grammar.clone()))
        }
        (None, Some((name, _, at))) => {
            return Err(InvalidRequest::unsupported(
                at.as_str(),
                format!(
                    "the custom tool `{name}` takes a Lark grammar, which is served when \
                     `tool_choice` names it (its input is then the whole output); among \
                     other tools, give it a regular expression (`syntax: regex`)"
                ),
            ))
        }
        (None, None) => None,
    };
    // `allowed_tools` restricts the calls the model may write to the named tools; the others
    // are left out of the request (and so of the prompt and the grammar).
    let tools = match (tools, allowed) {
        (tools, None) => tools,
        (None, Some(_)) => {
            return Err(InvalidRequest::new(
                "tool_choice",
                "an `allowed_tools` choice needs `tools`",
            ))
        }
        (Some(Value::Array(tools)), Some(names)) => {
            let declared = |t: &Value| {
                t.pointer("/function/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            };
            if let Some(unknown) = names.iter().find(|n| {
                !tools
                    .iter()
                    .any(|t| declared(t).as_deref() == Some(n.as_str()))
            }) {
                return Err(InvalidRequest::new(
                    "tool_choice.allowed_tools.tools",
                    format!("`{unknown}` is not among the declared tools"),
                ));
            }
            Some(Value::Array(
                tools
                    .into_iter()
                    .filter(|t| declared(t).is_some_and(|n| names.contains(&n)))
                    .collect(),
            ))
        }
        (Some(other), Some(_)) => Some(other),
    };
    if tools.is_none()
        && matches!(
            tool_choice,
            ToolChoiceRequest::Required | ToolChoiceRequest::Named(_)
        )
    {
        return Err(InvalidRequest::new(
            "tool_choice",
            "a tool choice that requires a call needs `tools`",
        ));
    }
    let parallel_tool_calls = match take(body, "parallel_tool_calls", &mut seen) {
        Some(v) => as_bool(v, "parallel_tool_calls")?,
        // A named tool choice asks for that one call: a second call is allowed only when the
        // request says so, since a small model otherwise writes another call after the one
        // asked for (often one that never ends, losing the first to the token limit).
        None => !matches!(tool_choice, ToolChoiceRequest::Named(_)),
    };
    let format = response_format(body, &mut seen)?;
    let extension = guided(body, &mut seen)?;
    let constraint = match (format, extension) {
        (c, None) => c,
        (OutputConstraint::None, Some(c)) => c,
        (_, Some(_)) => {
            return Err(InvalidRequest::new(
                "response_format",
                "give either `response_format` or a guided_* constraint, not both",
            ))
        }
    };
    let (constraint, custom_call) = match (custom_call, constraint) {
        (None, c) => (c, None),
        (Some((name, grammar)), OutputConstraint::None) => {
            (OutputConstraint::Lark(grammar), Some(name))
        }
        (Some(_), _) => {
            return Err(InvalidRequest::new(
                "tool_choice",
                "a custom tool named by `tool_choice` is its own output format; give no \
                 `response_format` or guided_* constraint with it",
            ))
        }
    };
    let max_tokens = match (
        take(body, "max_completion_tokens", &mut seen),
        take(body, "max_tokens", &mut seen),
    ) {
        (Some(v), _) => Some(as_u32(v, "max_completion_tokens", 1, 1_000_000)?),
        (None, Some(v)) => Some(as_u32(v, "max_tokens", 1, 1_000_000)?),
        (None, None) => None,
    };
    let logprobs = match (
        take(body, "logprobs", &mut seen),
        take(body, "top_logprobs", &mut seen),
    ) {
        (Some(v), top) if as_bool(v, "logprobs")? => Some(match top {
            Some(t) => u8::try_from(as_u32(t, "top_logprobs", 0, 20)?).unwrap_or(20),
            None => 0,
        }),
        (_, Some(_)) => {
            return Err(InvalidRequest::new(
                "top_logprobs",
                "`top_logprobs` needs `logprobs: true`",
            ))
        }
        _ => None,
    };
    let steering = match take(body, "steering", &mut seen) {
        None => true,
        Some(Value::Bool(on)) => *on,
        Some(Value::String(s)) if s == "on" || s == "off" => s == "on",
        Some(_) => {
            return Err(InvalidRequest::new(
                "steering",
                "`steering` must be true, false, \"on\" or \"off\"",
            ))
        }
    };
    let common = common(body, seen)?;
    no_streamed_logprobs(logprobs, &common)?;
    Ok(GenerationRequest {
        prompt: PromptInput::Chat(messages),
        steering,
        tools,
        tool_choice,
        parallel_tool_calls,
        constraint,
        sampling: common.sampling,
        max_tokens,
        stop: common.stop,
        n: common.n,
        stream: common.stream,
        include_usage: common.include_usage,
        logprobs,
        custom_tools,
        custom_call,
    })
}

/// Custom tools (`{"type": "custom", "custom": {name, description, format}}`) become function
/// tools with one string argument, `input`, so that every call format, grammar, gate and
/// export handles them as it handles functions; their calls are written back in the custom
/// form. The input's format is free text or a regular expression (`format: {"type":
/// "grammar", "grammar": {"syntax": "regex", "definition"}}`), enforced by the argument's
/// `pattern`. Returns the custom tools' names.
///
/// # Errors
///
/// [`InvalidRequest`] naming the field: a Lark grammar (an input grammar that is not regular
/// cannot be embedded in a call's JSON string), an unknown format, a regular expression that
/// does not compile.
pub(crate) fn custom_as_functions(tools: &mut Vec<Value>) -> Result<CustomTools> {
    let mut names = Vec::new();
    let mut lark = Vec::new();
    let mut lark_at = Vec::new();
    for (i, tool) in tools.iter_mut().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("custom") {
            continue;
        }
        let at = format!("tools[{i}].custom");
        let custom = tool
            .get("custom")
            .ok_or_else(|| InvalidRequest::new(at.as_str(), "a custom tool needs `custom`"))?;
        let name = custom
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| InvalidRequest::new(format!("{at}.name"), "a custom tool needs `name`"))?
            .to_owned();
        let input = match custom.get("format").filter(|f| !f.is_null()) {
            None => json!({"type": "string"}),
            Some(format) => match format.get("type").and_then(Value::as_str) {
                Some("text") => json!({"type": "string"}),
                Some("grammar") => {
                    let grammar = format.get("grammar").unwrap_or(&Value::Null);
                    let definition = grammar
                        .get("definition")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            InvalidRequest::new(
                                format!("{at}.format.grammar.definition"),
                                "a grammar format needs `definition`",
                            )
                        })?;
                    match grammar.get("syntax").and_then(Value::as_str) {
                        Some("regex") => {
                            let anchored = format!("^(?:{definition})$");
                            regex::Regex::new(&anchored).map_err(|e| {
                                InvalidRequest::new(
                                    format!("{at}.format.grammar.definition"),
                                    format!("not a regular expression: {e}"),
                                )
                            })?;
                            json!({"type": "string", "pattern": anchored})
                        }
                        Some("lark") => {
                            // Served only as the whole output, when `tool_choice` names it.
                            lark.push((
                                name.clone(),
                                definition.to_owned(),
                                format!("{at}.format.grammar.syntax"),
                            ));
                            lark_at.push(i);
                            continue;
                        }
                        _ => {
                            return Err(InvalidRequest::new(
                                format!("{at}.format.grammar.syntax"),
                                "`syntax` is `regex` or `lark`",
                            ))
                        }
                    }
                }
                _ => {
                    return Err(InvalidRequest::new(
                        format!("{at}.format.type"),
                        "a custom tool's format is `text` or `grammar`",
                    ))
                }
            },
        };
        let mut function = serde_json::Map::new();
        function.insert("name".into(), json!(name));
        if let Some(d) = custom.get("description").filter(|d| !d.is_null()) {
            function.insert("description".into(), d.clone());
        }
        function.insert(
            "parameters".into(),
            json!({"type": "object", "properties": {"input": input}, "required": ["input"],
                "additionalProperties": false}),
        );
        *tool = json!({"type": "function", "function": function});
        names.push(name);
    }
    for i in lark_at.into_iter().rev() {
        tools.remove(i);
    }
    Ok(CustomTools { names, lark })
}

/// What [`custom_as_functions`] found.
pub(crate) struct CustomTools {
    /// Custom tools turned into functions of `input`.
    names: Vec<String>,
    /// Custom tools whose input is a Lark grammar: (name, grammar, the field that said so).
    lark: Vec<(String, String, String)>,
}

/// Log-probabilities are returned with the whole response: a streamed request asking for
/// them is refused rather than answered without them.
fn no_streamed_logprobs(logprobs: Option<u8>, common: &Common) -> Result<()> {
    if logprobs.is_some() && common.stream {
        return Err(InvalidRequest::unsupported(
            "logprobs",
            "log-probabilities are not streamed; ask for them without `stream`",
        ));
    }
    Ok(())
}

/// Reads a (legacy) completions body. `max_tokens` defaults to 16, as OpenAI's does.
///
/// # Errors
///
/// [`InvalidRequest`] naming the parameter.
pub fn completion_request(body: &Value) -> Result<GenerationRequest> {
    let Some(body) = body.as_object() else {
        return Err(InvalidRequest {
            param: None,
            message: "the request body must be a JSON object".into(),
            unsupported: false,
        });
    };
    let mut seen = Vec::new();
    let prompt = match take(body, "prompt", &mut seen) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items[0].as_str().unwrap_or_default().to_owned()
        }
        Some(Value::Array(_)) => {
            return Err(InvalidRequest::unsupported(
                "prompt",
                "one prompt per request; batch prompts are not supported",
            ))
        }
        _ => return Err(InvalidRequest::new("prompt", "`prompt` must be a string")),
    };
    let constraint = guided(body, &mut seen)?.unwrap_or(OutputConstraint::None);
    let max_tokens = match take(body, "max_tokens", &mut seen) {
        Some(v) => as_u32(v, "max_tokens", 1, 1_000_000)?,
        None => 16,
    };
    let logprobs = match take(body, "logprobs", &mut seen) {
        None | Some(Value::Null) => None,
        Some(v) => Some(u8::try_from(as_u32(v, "logprobs", 0, 5)?).unwrap_or(5)),
    };
    let common = common(body, seen)?;
    no_streamed_logprobs(logprobs, &common)?;
    Ok(GenerationRequest {
        prompt: PromptInput::Text(prompt),
        tools: None,
        tool_choice: ToolChoiceRequest::None,
        parallel_tool_calls: false,
        constraint,
        sampling: common.sampling,
        max_tokens: Some(max_tokens),
        stop: common.stop,
        n: common.n,
        stream: common.stream,
        include_usage: common.include_usage,
        logprobs,
        custom_tools: Vec::new(),
        custom_call: None,
        steering: true,
    })
}

/// An OpenAI-style error body: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize)]
struct ErrorDetail {
    message: String,
    #[serde(rename = "type")]
    kind: &'static str,
    param: Option<String>,
    code: Option<String>,
}

impl ErrorBody {
    /// An error of `kind` (`invalid_request_error`, `server_error`, ...).
    #[must_use]
    pub fn new(
        kind: &'static str,
        code: Option<&str>,
        message: impl Into<String>,
        param: Option<String>,
    ) -> Self {
        Self {
            error: ErrorDetail {
                message: message.into(),
                kind,
                param,
                code: code.map(str::to_owned),
            },
        }
    }
}

/// The `usage` object.
#[must_use]
pub fn usage(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// A call's `input` when `call` is to a custom tool (declared as a function of one string
/// argument, `input`, which the gates have checked).
pub fn custom_input(custom_tools: &[String], call: &crate::ToolCallOut) -> Option<String> {
    if !custom_tools.contains(&call.name) {
        return None;
    }
    serde_json::from_str::<Value>(&call.arguments)
        .ok()?
        .get("input")?
        .as_str()
        .map(str::to_owned)
}

/// Token log-probabilities as OpenAI writes them on chat and in Responses output text:
/// `token`, `logprob`, `bytes` and the `top_logprobs` alternatives.
pub fn token_logprobs(tokens: &[crate::TokenLogprobOut]) -> Vec<Value> {
    tokens
        .iter()
        .map(|t| {
            let top: Vec<Value> = t
                .top
                .iter()
                .map(|(token, bytes, logprob)| json!({"token": token, "logprob": logprob, "bytes": bytes}))
                .collect();
            json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": top})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Value {
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    }

    #[test]
    fn steering_is_on_unless_the_request_turns_it_off() {
        let with = |extra: Value| {
            let mut body = json!({"messages": [{"role": "user", "content": "x"}]});
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            chat_request(&body)
        };
        assert!(with(json!({})).unwrap().steering);
        assert!(with(json!({"steering": "on"})).unwrap().steering);
        for off in [json!(false), json!("off")] {
            assert!(!with(json!({ "steering": off })).unwrap().steering);
        }
        let refused = with(json!({"steering": 1})).unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("steering"));
    }

    #[test]
    fn a_named_tool_choice_asks_for_one_call_unless_parallel_calls_are_explicit() {
        let body = |extra: Value| {
            let mut b = json!({"messages": [{"role": "user", "content": "x"}], "tools": tools()});
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            chat_request(&b).unwrap()
        };
        let named = json!({"type": "function", "function": {"name": "f"}});
        assert!(!body(json!({"tool_choice": named})).parallel_tool_calls);
        assert!(
            body(json!({"tool_choice": named, "parallel_tool_calls": true})).parallel_tool_calls
        );
        assert!(body(json!({"tool_choice": "required"})).parallel_tool_calls);
        assert!(
            !body(json!({"tool_choice": "required", "parallel_tool_calls": false}))
                .parallel_tool_calls
        );
    }

    #[test]
    fn allowed_tools_keeps_the_named_tools_callable_and_refuses_unknown_names() {
        let two = json!([
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}
        ]);
        let request = |choice: Value| {
            chat_request(&json!({"messages": [{"role": "user", "content": "x"}],
                "tools": two, "tool_choice": choice}))
        };
        let kept = request(
            json!({"type": "allowed_tools", "allowed_tools": {"mode": "required",
            "tools": [{"type": "function", "function": {"name": "g"}}]}}),
        )
        .unwrap();
        assert_eq!(kept.tool_choice, ToolChoiceRequest::Required);
        let names: Vec<&str> = kept
            .tools
            .as_ref()
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .collect();
        assert_eq!(names, ["g"]);
        let auto = request(json!({"type": "allowed_tools", "allowed_tools": {
            "tools": [{"type": "function", "function": {"name": "f"}}]}}))
        .unwrap();
        assert_eq!(auto.tool_choice, ToolChoiceRequest::Auto);
        for (bad, param) in [
            (
                json!({"type": "allowed_tools", "allowed_tools": {"tools": [{"type": "function", "function": {"name": "h"}}]}}),
                "tool_choice.allowed_tools.tools",
            ),
            (
                json!({"type": "allowed_tools", "allowed_tools": {"tools": []}}),
                "tool_choice.allowed_tools.tools",
            ),
            (
                json!({"type": "allowed_tools", "allowed_tools": {"mode": "none", "tools": [{"type": "function", "function": {"name": "f"}}]}}),
                "tool_choice.allowed_tools.mode",
            ),
            (
                json!({"type": "allowed_tools"}),
                "tool_choice.allowed_tools",
            ),
        ] {
            let error = request(bad).unwrap_err();
            assert_eq!(error.param.as_deref(), Some(param), "{error:?}");
        }
    }

    #[test]
    fn penalties_are_accepted_within_their_ranges_and_refused_outside() {
        let request = chat_request(&json!({"messages": [{"role": "user", "content": "x"}],
            "frequency_penalty": 0.5, "presence_penalty": -0.5, "repetition_penalty": 1.2,
            "dry_multiplier": 0.8}))
        .unwrap();
        assert!((request.sampling.frequency_penalty - 0.5).abs() < 1e-6);
        assert!((request.sampling.presence_penalty + 0.5).abs() < 1e-6);
        assert!((request.sampling.repetition_penalty - 1.2).abs() < 1e-6);
        assert_eq!(request.sampling.dry.map(|d| d.2), Some(2));
        for bad in [
            json!({"frequency_penalty": 3}),
            json!({"presence_penalty": "x"}),
            json!({"repetition_penalty": 0}),
            json!({"dry_allowed_length": 0}),
        ] {
            let mut body = json!({"messages": [{"role": "user", "content": "x"}]});
            let (k, v) = bad.as_object().unwrap().iter().next().unwrap();
            body[k] = v.clone();
            let error = chat_request(&body).unwrap_err();
            assert_eq!(error.param.as_deref(), Some(k.as_str()), "{bad}");
        }
    }

    /// vLLM's current `structured_outputs` carries the same constraints as the legacy
    /// `guided_*` fields; two constraints at once, `structural_tag` and unknown fields are
    /// refused by name.
    #[test]
    fn structured_outputs_is_read_as_the_guided_fields_are() {
        let with = |extra: Value| {
            let mut b = json!({"messages": [{"role": "user", "content": "x"}]});
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            chat_request(&b)
        };
        let cases = [
            (
                json!({"structured_outputs": {"regex": "[0-9]+"}}),
                OutputConstraint::Regex("[0-9]+".into()),
            ),
            (
                json!({"structured_outputs": {"choice": ["yes", "no"], "disable_fallback": true}}),
                OutputConstraint::Choice(vec!["yes".into(), "no".into()]),
            ),
            (
                json!({"structured_outputs": {"grammar": "start: \"a\""}}),
                OutputConstraint::Lark("start: \"a\"".into()),
            ),
            (
                json!({"guided_choice": ["a"]}),
                OutputConstraint::Choice(vec!["a".into()]),
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(with(body.clone()).unwrap().constraint, expected, "{body}");
        }
        let json_schema =
            with(json!({"structured_outputs": {"json": "{\"type\": \"object\"}"}})).unwrap();
        assert!(
            matches!(json_schema.constraint, OutputConstraint::JsonSchema { ref schema, .. } if schema == &json!({"type": "object"}))
        );
        for (body, param) in [
            (
                json!({"structured_outputs": {"structural_tag": {}}}),
                "structured_outputs.structural_tag",
            ),
            (
                json!({"structured_outputs": {"regex": 3}}),
                "structured_outputs.regex",
            ),
            (
                json!({"structured_outputs": {"regex": "a", "choice": ["a"]}}),
                "structured_outputs",
            ),
            (
                json!({"structured_outputs": {"regex": "a"}, "guided_regex": "b"}),
                "structured_outputs",
            ),
            (json!({"structured_outputs": "json"}), "structured_outputs"),
        ] {
            let error = with(body.clone()).unwrap_err();
            assert_eq!(error.param.as_deref(), Some(param), "{body}");
        }
    }
}
