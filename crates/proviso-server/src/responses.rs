//! The Responses API (`POST /v1/responses`) over the same pipeline as chat completions.
//!
//! A Responses request is translated into a chat completions request ([`to_chat`]), so it
//! passes the same wire checks, the same constraint compilation, the same backend and the
//! same gates; the accepted choice is then written as a Response object ([`render`]) or as
//! the Responses stream's events ([`events`]). What cannot be honoured (built-in tools, images,
//! reasoning settings, unknown fields) is refused by name, as everywhere else.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use proviso_backend::wire::InvalidRequest;
use proviso_backend::{ChoiceResult, FinishReason};

type Result<T> = std::result::Result<T, InvalidRequest>;

/// Fields of a Responses request that carry no constraint and are accepted as they are.
const INFORMATIONAL: &[&str] = &["model", "user", "metadata", "store", "service_tier"];

/// A Responses request, read.
#[derive(Debug)]
pub(crate) struct Translated {
    /// The equivalent chat completions request (never streamed: events are written from
    /// the accepted choice).
    pub(crate) chat: Value,
    /// Whether the client asked for events.
    pub(crate) stream: bool,
    /// Whether the response is kept for a later `previous_response_id` (`store`, default
    /// true).
    pub(crate) store: bool,
    /// The stored response this request continues, shared, not copied.
    pub(crate) previous: Option<Arc<Stored>>,
    /// This request's own input items, as chat messages: what a stored response adds to
    /// the one it continues.
    pub(crate) input: Vec<Value>,
}

/// Reads a Responses request into a chat completions request. `previous` looks up the
/// conversation of a stored response.
///
/// # Errors
///
/// A field that is malformed (422) or cannot be honoured (400), named.
pub(crate) fn to_chat(
    body: &Value,
    previous: impl Fn(&str) -> Option<Arc<Stored>>,
) -> Result<Translated> {
    let Some(fields) = body.as_object() else {
        return Err(InvalidRequest::new(
            "",
            "the request body must be a JSON object",
        ));
    };
    let mut chat = Map::new();
    let mut conversation = Vec::new();
    let mut earlier: Option<Arc<Stored>> = None;
    let mut stream = false;
    let mut store = true;
    let mut instructions = None;
    let mut tools: Option<Vec<Value>> = None;
    let mut choice: Option<Value> = None;
    let mut allowed: Option<Vec<String>> = None;
    for (key, value) in fields {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "input" => conversation.extend(input(value)?),
            "instructions" => {
                instructions = Some(value.as_str().ok_or_else(|| {
                    InvalidRequest::new("instructions", "`instructions` must be a string")
                })?);
            }
            "previous_response_id" => {
                let id = value.as_str().ok_or_else(|| {
                    InvalidRequest::new(
                        "previous_response_id",
                        "`previous_response_id` must be a string",
                    )
                })?;
                let found = previous(id).ok_or_else(|| {
                    InvalidRequest::new(
                        "previous_response_id",
                        format!("no stored response `{id}` (responses are kept in memory, the most recent ones only)"),
                    )
                })?;
                earlier = Some(found);
            }
            "tools" => tools = Some(function_tools(value)?),
            "tool_choice" => {
                let (c, names) = tool_choice(value)?;
                choice = Some(c);
                allowed = names;
            }
            "text" => text_format(value, &mut chat)?,
            "max_output_tokens" => {
                chat.insert("max_tokens".into(), value.clone());
            }
            "temperature" | "top_p" | "parallel_tool_calls" | "steering" => {
                chat.insert(key.clone(), value.clone());
            }
            "stream" => {
                stream = value
                    .as_bool()
                    .ok_or_else(|| InvalidRequest::new("stream", "`stream` must be a boolean"))?;
            }
            "store" => {
                store = value
                    .as_bool()
                    .ok_or_else(|| InvalidRequest::new("store", "`store` must be a boolean"))?;
            }
            "truncation" if value == "disabled" => {}
            "include" => {
                let items = value.as_array().ok_or_else(|| {
                    InvalidRequest::new("include", "`include` must be an array of strings")
                })?;
                for (i, item) in items.iter().enumerate() {
                    match item.as_str() {
                        Some("message.output_text.logprobs") => {
                            chat.insert("logprobs".into(), json!(true));
                        }
                        Some(other) => {
                            return Err(InvalidRequest::unsupported(
                                format!("include[{i}]"),
                                format!("`{other}` cannot be included: proviso serves `message.output_text.logprobs` only"),
                            ))
                        }
                        None => {
                            return Err(InvalidRequest::new(
                                format!("include[{i}]"),
                                "`include` items must be strings",
                            ))
                        }
                    }
                }
            }
            "top_logprobs" => {
                // Asking for alternatives asks for log-probabilities, as on chat.
                chat.insert("logprobs".into(), json!(true));
                chat.insert("top_logprobs".into(), value.clone());
            }
            "reasoning"
                if value.as_object().is_some_and(Map::is_empty)
                    || value.as_array().is_some_and(Vec::is_empty) => {}
            k if INFORMATIONAL.contains(&k) => {
                if k == "model" {
                    chat.insert("model".into(), value.clone());
                }
            }
            other => {
                return Err(InvalidRequest::unsupported(
                    other,
                    format!("`{other}` is not supported on /v1/responses"),
                ))
            }
        }
    }
    // A continuation may bring no new turn (only approval answers, read before this).
    if conversation.is_empty() && earlier.is_none() {
        return Err(InvalidRequest::new("input", "`input` is required"));
    }
    if let (Some(names), Some(list)) = (&allowed, &mut tools) {
        for name in names {
            if !list.iter().any(|t| tool_name(t) == Some(name.as_str())) {
                return Err(InvalidRequest::new(
                    "tool_choice.tools",
                    format!("`{name}` is not among the request's tools"),
                ));
            }
        }
        list.retain(|t| tool_name(t).is_some_and(|n| names.iter().any(|a| a == n)));
    }
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if let Some(text) = instructions {
        messages.push(json!({"role": "system", "content": text}));
    }
    if let Some(stored) = &earlier {
        messages.extend(stored.conversation());
    }
    messages.extend(conversation.iter().cloned());
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = tools.filter(|t| !t.is_empty()) {
        chat.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = choice {
        chat.insert("tool_choice".into(), choice);
    }
    Ok(Translated {
        chat: Value::Object(chat),
        stream,
        store,
        previous: earlier,
        input: conversation,
    })
}

/// `input`: a string (one user message) or a list of items, as chat messages.
fn input(value: &Value) -> Result<Vec<Value>> {
    if let Some(text) = value.as_str() {
        return Ok(vec![json!({"role": "user", "content": text})]);
    }
    let items = value.as_array().ok_or_else(|| {
        InvalidRequest::new("input", "`input` must be a string or an array of items")
    })?;
    let mut messages: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let param = format!("input[{i}]");
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).ok_or_else(|| {
                    InvalidRequest::new(format!("{param}.role"), "a message needs a `role`")
                })?;
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(InvalidRequest::new(
                        format!("{param}.role"),
                        format!("unknown role `{role}`"),
                    ));
                }
                let content = message_text(item.get("content"), &format!("{param}.content"))?;
                messages.push(json!({"role": role, "content": content}));
            }
            "function_call" => {
                let field = |name: &str| {
                    item.get(name).and_then(Value::as_str).ok_or_else(|| {
                        InvalidRequest::new(
                            format!("{param}.{name}"),
                            format!("a function call needs `{name}` as a string"),
                        )
                    })
                };
                let call = json!({"id": short(field("call_id")?, &param, "call_id")?, "type": "function",
                    "function": {"name": short(field("name")?, &param, "name")?, "arguments": field("arguments")?}});
                push_call(&mut messages, call);
            }
            "custom_tool_call" => {
                let field = |name: &str| {
                    item.get(name).and_then(Value::as_str).ok_or_else(|| {
                        InvalidRequest::new(
                            format!("{param}.{name}"),
                            format!("a custom tool call needs `{name}` as a string"),
                        )
                    })
                };
                let call = json!({"id": short(field("call_id")?, &param, "call_id")?, "type": "custom",
                    "custom": {"name": short(field("name")?, &param, "name")?, "input": field("input")?}});
                push_call(&mut messages, call);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = item.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                    InvalidRequest::new(
                        format!("{param}.call_id"),
                        "a function call output needs `call_id`",
                    )
                })?;
                let call_id = short(call_id, &param, "call_id")?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other @ (Value::Array(_) | Value::Object(_))) => {
                        message_text(Some(other), &format!("{param}.output"))
                            .unwrap_or_else(|_| other.to_string())
                    }
                    _ => {
                        return Err(InvalidRequest::new(
                            format!("{param}.output"),
                            "a function call output needs `output`",
                        ))
                    }
                };
                messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            other => {
                return Err(InvalidRequest::unsupported(
                    format!("{param}.type"),
                    format!("input items of type `{other}` are not supported"),
                ))
            }
        }
    }
    Ok(messages)
}

/// A chat request's parameter as the Responses API names it, for error messages.
pub(crate) fn param_name(param: String) -> String {
    for (chat, responses) in [
        ("max_tokens", "max_output_tokens"),
        ("response_format", "text.format"),
    ] {
        if let Some(rest) = param.strip_prefix(chat) {
            if rest.is_empty() || rest.starts_with(['.', '[']) {
                return format!("{responses}{rest}");
            }
        }
    }
    param
}

/// Longest id or name an input item may carry: they are identifiers, and the store keeps
/// them for as long as the response.
const MAX_ID_BYTES: usize = 256;

/// An id or name, refused (422, naming the field) when longer than [`MAX_ID_BYTES`].
fn short<'a>(value: &'a str, param: &str, name: &str) -> Result<&'a str> {
    if value.len() > MAX_ID_BYTES {
        return Err(InvalidRequest::new(
            format!("{param}.{name}"),
            format!(
                "`{name}` has {} bytes; an identifier may have at most {MAX_ID_BYTES}",
                value.len()
            ),
        ));
    }
    Ok(value)
}

/// Adds a call to the conversation: calls of one turn are one assistant message with
/// several calls.
fn push_call(messages: &mut Vec<Value>, call: Value) {
    match messages.last_mut() {
        Some(last)
            if last["role"] == "assistant"
                && last["content"].is_null()
                && last["tool_calls"].is_array() =>
        {
            if let Some(calls) = last["tool_calls"].as_array_mut() {
                calls.push(call);
            }
        }
        _ => messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
    }
}

/// A message's content: a string, or text parts joined.
fn message_text(content: Option<&Value>, param: &str) -> Result<String> {
    match content {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    other => {
                        return Err(InvalidRequest::unsupported(
                            format!("{param}[{i}].type"),
                            format!(
                            "content parts of type `{}` are not supported; the model reads text",
                            other.unwrap_or("?")
                        ),
                        ))
                    }
                }
            }
            Ok(text)
        }
        _ => Err(InvalidRequest::new(
            param,
            "content must be a string or an array of text parts",
        )),
    }
}

/// A chat-form tool's name, function or custom.
fn tool_name(tool: &Value) -> Option<&str> {
    tool.pointer("/function/name")
        .or_else(|| tool.pointer("/custom/name"))
        .and_then(Value::as_str)
}

/// Function and custom tools, in the chat completions form.
fn function_tools(value: &Value) -> Result<Vec<Value>> {
    let tools = value
        .as_array()
        .ok_or_else(|| InvalidRequest::new("tools", "`tools` must be an array"))?;
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            match tool.get("type").and_then(Value::as_str) {
                Some("function") => {}
                Some("custom") => {
                    // In the chat form; the chat reader turns it into a function of `input`.
                    let mut custom = Map::new();
                    for key in ["name", "description"] {
                        if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                            custom.insert(key.into(), v.clone());
                        }
                    }
                    if let Some(format) = tool.get("format").filter(|f| !f.is_null()) {
                        let converted = match format.get("type").and_then(Value::as_str) {
                            Some("grammar") => json!({"type": "grammar", "grammar": {
                                "syntax": format.get("syntax"), "definition": format.get("definition")}}),
                            _ => format.clone(),
                        };
                        custom.insert("format".into(), converted);
                    }
                    return Ok(json!({"type": "custom", "custom": custom}));
                }
                other => {
                    return Err(InvalidRequest::unsupported(
                        format!("tools[{i}].type"),
                        format!(
                            "tools of type `{}` are not supported on /v1/responses; declare function tools",
                            other.unwrap_or("?")
                        ),
                    ))
                }
            }
            let mut function = Map::new();
            for key in ["name", "description", "parameters", "strict"] {
                if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                    function.insert(key.into(), v.clone());
                }
            }
            Ok(json!({"type": "function", "function": function}))
        })
        .collect()
}

/// `tool_choice`, in the chat completions form, with the names `allowed_tools` keeps.
fn tool_choice(value: &Value) -> Result<(Value, Option<Vec<String>>)> {
    if value.is_string() {
        return Ok((value.clone(), None));
    }
    match value.get("type").and_then(Value::as_str) {
        Some(kind @ ("function" | "custom")) => {
            let name = value.get("name").and_then(Value::as_str).ok_or_else(|| {
                InvalidRequest::new("tool_choice.name", format!("a {kind} choice needs `name`"))
            })?;
            Ok((json!({"type": kind, kind: {"name": name}}), None))
        }
        Some("allowed_tools") => {
            let mode = value.get("mode").and_then(Value::as_str).unwrap_or("auto");
            if !matches!(mode, "auto" | "required") {
                return Err(InvalidRequest::new(
                    "tool_choice.mode",
                    "`mode` is `auto` or `required`",
                ));
            }
            let names = value
                .get("tools")
                .and_then(Value::as_array)
                .map(|tools| {
                    tools
                        .iter()
                        .map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .and_then(|names| names.filter(|n| !n.is_empty()))
                .ok_or_else(|| {
                    InvalidRequest::new(
                        "tool_choice.tools",
                        "`allowed_tools` needs a non-empty list of tools with names",
                    )
                })?;
            Ok((json!(mode), Some(names)))
        }
        _ => Err(InvalidRequest::unsupported(
            "tool_choice",
            "`tool_choice` is `none`, `auto`, `required`, a function, or `allowed_tools`",
        )),
    }
}

/// `text.format`, as a chat `response_format`.
fn text_format(value: &Value, chat: &mut Map<String, Value>) -> Result<()> {
    for key in value.as_object().into_iter().flat_map(Map::keys) {
        if key != "format" {
            return Err(InvalidRequest::unsupported(
                format!("text.{key}"),
                format!("`text.{key}` is not supported"),
            ));
        }
    }
    let Some(format) = value.get("format").filter(|f| !f.is_null()) else {
        return Ok(());
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => {}
        Some("json_object") => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
        }
        Some("json_schema") => {
            let mut schema = Map::new();
            for key in ["name", "schema", "strict", "description"] {
                if let Some(v) = format.get(key).filter(|v| !v.is_null()) {
                    schema.insert(key.into(), v.clone());
                }
            }
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": schema}),
            );
        }
        _ => {
            return Err(InvalidRequest::new(
                "text.format.type",
                "`text.format.type` is `text`, `json_object` or `json_schema`",
            ))
        }
    }
    Ok(())
}

/// The output items of an accepted choice, and its status.
pub(crate) fn output(id: &str, choice: &ChoiceResult, custom_tools: &[String]) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(text) = choice
        .content
        .as_ref()
        .filter(|t| !t.is_empty() || choice.tool_calls.is_empty())
    {
        items.push(json!({"type": "message", "id": format!("msg_{id}"), "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": [],
                "logprobs": output_logprobs(choice)}]}));
    }
    for (i, call) in choice.tool_calls.iter().enumerate() {
        items.push(match proviso_backend::wire::custom_input(custom_tools, call) {
            Some(input) => {
                json!({"type": "custom_tool_call", "id": format!("ctc_{id}_{i}"), "call_id": call.id,
                "name": call.name, "input": input, "status": "completed"})
            }
            None => {
                json!({"type": "function_call", "id": format!("fc_{id}_{i}"), "call_id": call.id,
                "name": call.name, "arguments": call.arguments, "status": "completed"})
            }
        });
    }
    items
}

/// An output text's log-probabilities in the Responses form (`token`, `logprob`, `bytes`,
/// `top_logprobs`), when the request asked for them; empty otherwise.
fn output_logprobs(choice: &ChoiceResult) -> Value {
    choice.logprobs.as_deref().map_or_else(
        || json!([]),
        |tokens| Value::Array(proviso_backend::wire::token_logprobs(tokens)),
    )
}

/// The Response object of an accepted choice.
pub(crate) fn render(
    id: &str,
    created: u64,
    model: &str,
    request: &Value,
    choice: &ChoiceResult,
    custom_tools: &[String],
) -> Value {
    let (status, incomplete) = match choice.finish_reason {
        FinishReason::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        FinishReason::Repetition => ("incomplete", json!({"reason": "repetition"})),
        _ => ("completed", Value::Null),
    };
    let field = |name: &str, default: Value| request.get(name).cloned().unwrap_or(default);
    json!({
        "id": id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "model": model,
        "output": output(id, choice, custom_tools),
        "instructions": field("instructions", Value::Null),
        "tools": field("tools", json!([])),
        "tool_choice": field("tool_choice", json!("auto")),
        "parallel_tool_calls": field("parallel_tool_calls", json!(true)),
        "text": field("text", json!({"format": {"type": "text"}})),
        "previous_response_id": field("previous_response_id", Value::Null),
        "max_output_tokens": field("max_output_tokens", Value::Null),
        "temperature": field("temperature", json!(1.0)),
        "top_p": field("top_p", json!(1.0)),
        "metadata": field("metadata", json!({})),
        "store": field("store", json!(true)),
        "usage": {
            "input_tokens": choice.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": choice.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": choice.prompt_tokens + choice.completion_tokens,
        },
    })
}

/// The Responses stream of a finished response, as `(event name, data)` pairs. Events are
/// written once the output passed every gate, so a client never sees text or a call that
/// was then refused.
pub(crate) fn events(response: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    let mut push = |kind: &str, mut data: Value| {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(out.len());
        out.push((kind.to_owned(), data));
    };
    let mut pending = response.clone();
    pending["status"] = json!("in_progress");
    pending["output"] = json!([]);
    pending["usage"] = Value::Null;
    push("response.created", json!({"response": pending}));
    push("response.in_progress", json!({"response": pending}));
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (index, item) in items.iter().enumerate() {
        let item_id = item["id"].clone();
        let mut started = item.clone();
        started["status"] = json!("in_progress");
        if item["type"] == "message" {
            started["content"] = json!([]);
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": started}),
            );
            let text = item["content"][0]["text"].clone();
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            push(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": part}),
            );
            push(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": text, "logprobs": []}),
            );
            push(
                "response.output_text.done",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
            );
            push(
                "response.content_part.done",
                json!({"item_id": item_id, "output_index": index, "content_index": 0, "part": item["content"][0]}),
            );
        } else if item["type"] == "mcp_call" {
            started["arguments"] = json!("");
            started["output"] = Value::Null;
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": started}),
            );
            push(
                "response.mcp_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": item["arguments"]}),
            );
            push(
                "response.mcp_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": item["arguments"]}),
            );
            push(
                if item["status"] == "failed" {
                    "response.mcp_call.failed"
                } else {
                    "response.mcp_call.completed"
                },
                json!({"item_id": item_id, "output_index": index}),
            );
        } else if item["type"] == "mcp_list_tools" {
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": started}),
            );
            push(
                "response.mcp_list_tools.completed",
                json!({"item_id": item_id, "output_index": index}),
            );
        } else if item["type"] == "mcp_approval_request" {
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            );
        } else if item["type"] == "custom_tool_call" {
            started["input"] = json!("");
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": started}),
            );
            push(
                "response.custom_tool_call_input.delta",
                json!({"item_id": item_id, "output_index": index, "delta": item["input"]}),
            );
            push(
                "response.custom_tool_call_input.done",
                json!({"item_id": item_id, "output_index": index, "input": item["input"]}),
            );
        } else {
            started["arguments"] = json!("");
            push(
                "response.output_item.added",
                json!({"output_index": index, "item": started}),
            );
            push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": item["arguments"]}),
            );
            push(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": item["arguments"], "name": item["name"]}),
            );
        }
        push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    let end = if response["status"] == "completed" {
        "response.completed"
    } else {
        "response.incomplete"
    };
    push(end, json!({"response": response}));
    out
}

/// What a stored response adds to the conversation: this request's input and its output,
/// as chat messages.
pub(crate) fn added(mut input: Vec<Value>, choice: &ChoiceResult) -> Vec<Value> {
    if choice.tool_calls.is_empty() {
        input.push(
            json!({"role": "assistant", "content": choice.content.clone().unwrap_or_default()}),
        );
    } else {
        let calls: Vec<Value> = choice
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        input.push(json!({"role": "assistant", "content": choice.content, "tool_calls": calls}));
    }
    input
}

/// A stored response: the turns it added, and the response it continues, shared (a chain
/// of `n` responses holds each turn once, not `n` copies of the conversation).
#[derive(Debug)]
pub(crate) struct Stored {
    previous: Option<Arc<Stored>>,
    items: Vec<Value>,
    /// The bytes of the whole chain up to and including this response.
    chain_bytes: usize,
    created: Instant,
}

impl Stored {
    /// The whole conversation, oldest first.
    pub(crate) fn conversation(&self) -> Vec<Value> {
        let mut chain = vec![self];
        while let Some(previous) = chain.last().and_then(|s| s.previous.as_deref()) {
            chain.push(previous);
        }
        chain
            .iter()
            .rev()
            .flat_map(|s| s.items.iter().cloned())
            .collect()
    }

    /// The bytes of the whole conversation.
    pub(crate) fn chain_bytes(&self) -> usize {
        self.chain_bytes
    }
}

/// The bytes a list of items takes (its JSON text, which bounds its size in memory up to a
/// small factor).
pub(crate) fn bytes_of(items: &[Value]) -> usize {
    items.iter().map(|v| v.to_string().len()).sum()
}

/// How much the store keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoreLimits {
    /// Most responses.
    pub(crate) count: usize,
    /// Most bytes, counting each response's whole conversation (an upper bound on memory:
    /// chains share their earlier turns).
    pub(crate) bytes: usize,
    /// Oldest a response may be.
    pub(crate) age: Duration,
}

/// Stored responses, in memory, bounded by count, bytes and age; the oldest go first.
#[derive(Debug)]
pub(crate) struct Store {
    limits: StoreLimits,
    order: VecDeque<String>,
    responses: HashMap<String, Arc<Stored>>,
    bytes: usize,
}

impl Store {
    pub(crate) fn new(limits: StoreLimits) -> Self {
        Self {
            limits,
            order: VecDeque::new(),
            responses: HashMap::new(),
            bytes: 0,
        }
    }

    pub(crate) fn limits(&self) -> StoreLimits {
        self.limits
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Stored>> {
        self.responses
            .get(id)
            .filter(|s| s.created.elapsed() <= self.limits.age)
            .cloned()
    }

    fn evict_oldest(&mut self) {
        if let Some(oldest) = self.order.pop_front() {
            if let Some(gone) = self.responses.remove(&oldest) {
                self.bytes -= gone.chain_bytes;
            }
        }
    }

    /// Stores what a response added after `previous`; `false` when it alone is over the
    /// byte limit (nothing is stored then).
    pub(crate) fn insert(
        &mut self,
        id: String,
        previous: Option<Arc<Stored>>,
        items: Vec<Value>,
    ) -> bool {
        if self.limits.count == 0 {
            return false;
        }
        let chain_bytes = bytes_of(&items) + previous.as_ref().map_or(0, |p| p.chain_bytes);
        if chain_bytes > self.limits.bytes {
            return false;
        }
        while self
            .order
            .front()
            .and_then(|id| self.responses.get(id))
            .is_some_and(|s| s.created.elapsed() > self.limits.age)
        {
            self.evict_oldest();
        }
        while !self.order.is_empty()
            && (self.order.len() >= self.limits.count
                || self.bytes + chain_bytes > self.limits.bytes)
        {
            self.evict_oldest();
        }
        self.bytes += chain_bytes;
        self.order.push_back(id.clone());
        self.responses.insert(
            id,
            Arc::new(Stored {
                previous,
                items,
                chain_bytes,
                created: Instant::now(),
            }),
        );
        true
    }

    /// Responses held, and the bytes counted for them.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        (self.responses.len(), self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_responses_request_becomes_the_equivalent_chat_request() {
        let body = json!({
            "model": "m", "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Arms?"}]},
                {"type": "function_call", "call_id": "c1", "name": "get_arm", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "{\"arm\": \"A\"}"}
            ],
            "tools": [{"type": "function", "name": "get_arm", "parameters": {"type": "object"}, "strict": true},
                      {"type": "function", "name": "search", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_arm"}]},
            "text": {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": true}},
            "max_output_tokens": 50, "stream": true
        });
        let t = to_chat(&body, |_| None).unwrap();
        assert!(t.stream);
        assert_eq!(
            t.chat["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(
            t.chat["messages"][1],
            json!({"role": "user", "content": "Arms?"})
        );
        assert_eq!(
            t.chat["messages"][2]["tool_calls"][0]["function"]["name"],
            "get_arm"
        );
        assert_eq!(t.chat["messages"][3]["role"], "tool");
        assert_eq!(t.chat["tools"].as_array().unwrap().len(), 1);
        assert_eq!(t.chat["tool_choice"], "required");
        assert_eq!(t.chat["response_format"]["json_schema"]["name"], "a");
        assert_eq!(t.chat["max_tokens"], 50);
        assert_eq!(t.input.len(), 3);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        for (body, param) in [
            (
                json!({"input": "x", "tools": [{"type": "web_search"}]}),
                "tools[0].type",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]}),
                "input[0].content[0].type",
            ),
            (
                json!({"input": "x", "reasoning": {"effort": "high"}}),
                "reasoning",
            ),
            (
                json!({"input": "x", "previous_response_id": "resp_gone"}),
                "previous_response_id",
            ),
            (json!({"instructions": "x"}), "input"),
            (
                json!({"input": "x", "tools": [{"type": "function", "name": "f"}],
                "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": "g"}]}}),
                "tool_choice.tools",
            ),
        ] {
            let e = to_chat(&body, |_| None).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }

    fn limits(count: usize, bytes: usize) -> StoreLimits {
        StoreLimits {
            count,
            bytes,
            age: Duration::from_secs(3600),
        }
    }

    #[test]
    fn the_store_keeps_the_most_recent_conversations() {
        let mut store = Store::new(limits(2, 1 << 20));
        for id in ["a", "b", "c"] {
            store.insert(
                id.into(),
                None,
                vec![json!({"role": "user", "content": id})],
            );
        }
        assert!(store.get("a").is_none());
        assert_eq!(store.get("c").unwrap().conversation()[0]["content"], "c");
        let t = to_chat(
            &json!({"input": "next", "previous_response_id": "b"}),
            |id| store.get(id),
        )
        .unwrap();
        assert_eq!(t.chat["messages"][0]["content"], "b");
        assert_eq!(t.chat["messages"][1]["content"], "next");
    }

    #[test]
    fn a_chain_shares_its_turns_and_the_store_is_bounded_by_bytes_and_age() {
        let turn = |i: usize| vec![json!({"role": "user", "content": "x".repeat(1000 + i)})];
        let mut store = Store::new(limits(1000, 50_000));
        let mut previous = None;
        let mut stored = 0;
        for i in 0..200 {
            let id = format!("r{i}");
            if !store.insert(id.clone(), previous.clone(), turn(i)) {
                // The chain alone is over the limit: nothing more is stored.
                break;
            }
            stored += 1;
            previous = store.get(&id);
        }
        assert!((40..60).contains(&stored), "{stored}");
        let (count, bytes) = store.size();
        assert!(bytes <= 50_000, "{bytes}");
        assert!(count < stored);
        // The newest response still sees its whole conversation, oldest first, although
        // the responses it continues have left the store.
        let conversation = previous.unwrap().conversation();
        assert_eq!(conversation.len(), stored);
        assert_eq!(conversation[0]["content"].as_str().unwrap().len(), 1000);

        let mut store = Store::new(StoreLimits {
            count: 10,
            bytes: 1 << 20,
            age: Duration::ZERO,
        });
        store.insert("old".into(), None, turn(0));
        std::thread::sleep(Duration::from_millis(5));
        assert!(store.get("old").is_none());
    }
}
