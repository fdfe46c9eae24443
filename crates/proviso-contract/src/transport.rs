//! The transport gate: a provider's response envelope is judged before any of its text is
//! parsed.
//!
//! A response cut by a token limit, a refusal, a content filter and a provider error are each
//! their own outcome. None of them yields text for the later gates: a truncated prefix that
//! happens to parse is still truncated, and partial text is never stitched into anything.
//!
//! Two envelope shapes are understood: OpenAI-style chat completions (and legacy text
//! completions), and Anthropic-style messages.

use serde_json::Value;

use crate::code::Code;
use crate::rejection::{Gate, Location, NextStep, Rejection};
pub use proviso_core::Finish;

/// A tool call as the provider transported it, before any parsing of its arguments.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TransportedCall {
    /// The provider's call id, if any.
    pub id: Option<String>,
    /// The tool name as written.
    pub name: String,
    /// The arguments as transported.
    pub arguments: TransportedArguments,
    /// JSON pointer of the call in the envelope, for error locations.
    pub pointer: String,
}

/// Tool-call arguments as the provider transported them.
#[derive(Debug, Clone, PartialEq)]
pub enum TransportedArguments {
    /// A JSON text still to be parsed strictly (OpenAI's `function.arguments`).
    Text(String),
    /// An already structured value (Anthropic's `input`).
    Value(Value),
}

/// What a complete, unrefused response carries on to the parse gate.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Payload {
    /// The message text, if any.
    pub text: Option<String>,
    /// Tool calls, in the order the provider listed them.
    pub tool_calls: Vec<TransportedCall>,
    /// The stop reason as the provider spelled it.
    pub stop_reason: String,
}

/// Judges a provider response envelope (already parsed as JSON).
///
/// # Errors
///
/// Returns a transport-gate [`Rejection`]: `incomplete_response`, `refused`,
/// `content_filtered`, `provider_error`, `missing_stop_reason`, `unknown_stop_reason`,
/// `multiple_choices` or `malformed_envelope`.
pub fn open_envelope(envelope: &Value) -> Result<Payload, Rejection> {
    if let Some(error) = envelope.get("error").filter(|e| !e.is_null()) {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the provider reported an error");
        return Err(reject(
            Code::ProviderError,
            format!("provider error: {message}"),
            "/error",
        ));
    }
    if envelope.get("choices").is_some() {
        return open_openai(envelope);
    }
    if envelope.get("stop_reason").is_some() || envelope.get("type") == Some(&"message".into()) {
        return open_anthropic(envelope);
    }
    Err(reject(
        Code::MalformedEnvelope,
        "not a chat completion or message envelope: neither `choices` nor `stop_reason` is present",
        "",
    ))
}

fn reject(code: Code, message: impl Into<String>, pointer: &str) -> Rejection {
    Rejection::new(Gate::Transport, code, message, Location::instance(pointer))
}

fn open_openai(envelope: &Value) -> Result<Payload, Rejection> {
    let Some(choices) = envelope["choices"].as_array() else {
        return Err(reject(
            Code::MalformedEnvelope,
            "`choices` is not an array",
            "/choices",
        ));
    };
    let choice = match choices.as_slice() {
        [] => {
            return Err(reject(
                Code::MalformedEnvelope,
                "`choices` is empty",
                "/choices",
            ))
        }
        [one] => one,
        _ => {
            return Err(reject(
                Code::MultipleChoices,
                format!(
                    "the envelope holds {} choices; proviso judges one output at a time and will not pick one",
                    choices.len()
                ),
                "/choices",
            ))
        }
    };
    let message = choice.get("message");
    let refusal = message
        .and_then(|m| m.get("refusal"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    let stop_reason = choice.get("finish_reason").and_then(Value::as_str);
    // A refusal outranks every stop reason: a refused response is never an answer.
    if let Some(refusal) = refusal {
        return Err(refused(refusal, "/choices/0/message/refusal"));
    }
    let stop_reason = judge_stop_reason(stop_reason, "/choices/0/finish_reason")?;
    let mut payload = Payload {
        stop_reason: stop_reason.to_owned(),
        ..Payload::default()
    };
    match message {
        Some(message) => {
            payload.text = match message.get("content") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Array(parts)) => Some(text_parts(parts, "/choices/0/message/content")?),
                Some(_) => {
                    return Err(reject(
                        Code::MalformedEnvelope,
                        "`message.content` is neither text, parts nor null",
                        "/choices/0/message/content",
                    ))
                }
            };
            if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
                payload.tool_calls = openai_calls(calls)?;
            }
        }
        // Legacy text completions carry `text` on the choice.
        None => match choice.get("text").and_then(Value::as_str) {
            Some(text) => payload.text = Some(text.to_owned()),
            None => {
                return Err(reject(
                    Code::MalformedEnvelope,
                    "the choice has neither `message` nor `text`",
                    "/choices/0",
                ))
            }
        },
    }
    Ok(payload)
}

fn text_parts(parts: &[Value], pointer: &str) -> Result<String, Rejection> {
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        match part.get("type").and_then(Value::as_str) {
            Some("text") | Some("output_text") => match part.get("text").and_then(Value::as_str) {
                Some(t) => text.push_str(t),
                None => {
                    return Err(reject(
                        Code::MalformedEnvelope,
                        "a text part has no `text`",
                        &format!("{pointer}/{i}"),
                    ))
                }
            },
            Some("refusal") => {
                let refusal = part.get("refusal").and_then(Value::as_str).unwrap_or("");
                return Err(refused(refusal, &format!("{pointer}/{i}")));
            }
            _ => {
                return Err(reject(
                    Code::MalformedEnvelope,
                    "a content part is not text",
                    &format!("{pointer}/{i}"),
                ))
            }
        }
    }
    Ok(text)
}

fn openai_calls(calls: &Value) -> Result<Vec<TransportedCall>, Rejection> {
    let Some(calls) = calls.as_array() else {
        return Err(reject(
            Code::MalformedEnvelope,
            "`tool_calls` is not an array",
            "/choices/0/message/tool_calls",
        ));
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let pointer = format!("/choices/0/message/tool_calls/{i}");
            let function = call.get("function");
            let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
            let arguments = function.and_then(|f| f.get("arguments"));
            match (name, arguments) {
                (Some(name), Some(Value::String(arguments))) => Ok(TransportedCall {
                    id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: name.to_owned(),
                    arguments: TransportedArguments::Text(arguments.clone()),
                    pointer,
                }),
                _ => Err(reject(
                    Code::MalformedEnvelope,
                    "a tool call lacks `function.name` or a string `function.arguments`",
                    &pointer,
                )),
            }
        })
        .collect()
}

fn open_anthropic(envelope: &Value) -> Result<Payload, Rejection> {
    let stop_reason = envelope.get("stop_reason").and_then(Value::as_str);
    if stop_reason == Some("refusal") {
        let text = envelope
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<String>();
        return Err(refused(&text, "/stop_reason"));
    }
    let stop_reason = judge_stop_reason(stop_reason, "/stop_reason")?;
    let Some(content) = envelope.get("content").and_then(Value::as_array) else {
        return Err(reject(
            Code::MalformedEnvelope,
            "`content` is not an array",
            "/content",
        ));
    };
    let mut payload = Payload {
        stop_reason: stop_reason.to_owned(),
        ..Payload::default()
    };
    let mut text: Option<String> = None;
    for (i, block) in content.iter().enumerate() {
        let pointer = format!("/content/{i}");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = block.get("text").and_then(Value::as_str).unwrap_or("");
                text.get_or_insert_with(String::new).push_str(t);
            }
            Some("tool_use") => {
                let name = block.get("name").and_then(Value::as_str);
                let input = block.get("input");
                let (Some(name), Some(input)) = (name, input) else {
                    return Err(reject(
                        Code::MalformedEnvelope,
                        "a tool_use block lacks `name` or `input`",
                        &pointer,
                    ));
                };
                payload.tool_calls.push(TransportedCall {
                    id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: name.to_owned(),
                    arguments: TransportedArguments::Value(input.clone()),
                    pointer,
                });
            }
            // Reasoning blocks are not output.
            Some("thinking") | Some("redacted_thinking") => {}
            _ => {
                return Err(reject(
                    Code::MalformedEnvelope,
                    "a content block is neither text, tool_use nor thinking",
                    &pointer,
                ))
            }
        }
    }
    payload.text = text;
    Ok(payload)
}

fn refused(text: &str, pointer: &str) -> Rejection {
    reject(
        Code::Refused,
        if text.is_empty() {
            "the provider refused to answer".to_owned()
        } else {
            format!("the provider refused: {text}")
        },
        pointer,
    )
    .with_next_step(NextStep::Stop)
    .with_refusal(text.to_owned())
}

/// The transport gate: what a [`Finish`] means. `None` for a natural end, the rejection
/// otherwise (at `pointer` in the envelope; `reason` is the stop reason as written, for the
/// message). This is the one table from an end to a code; every entry point reads it.
#[must_use]
pub fn transport_gate(finish: Finish, reason: Option<&str>, pointer: &str) -> Option<Rejection> {
    let written = reason.unwrap_or("");
    let (code, message, next) = match finish {
        Finish::Stop => return None,
        Finish::Length => (
            Code::IncompleteResponse,
            format!("the output was cut short (stop reason `{written}`); a truncated prefix is never accepted"),
            NextStep::RetryWithLargerBudget,
        ),
        Finish::Repetition => (
            Code::Repetition,
            "the output degenerated into repetition and was stopped; a fragment is never accepted".to_owned(),
            NextStep::Retry,
        ),
        Finish::ContentFilter => (
            Code::ContentFiltered,
            "the provider's content filter stopped the output".to_owned(),
            NextStep::Stop,
        ),
        Finish::Cancelled => (
            Code::Cancelled,
            "the generation was cancelled; a fragment is never accepted".to_owned(),
            NextStep::Stop,
        ),
        Finish::Missing => (
            Code::MissingStopReason,
            "the envelope has no stop reason, so the output may be unfinished".to_owned(),
            NextStep::Stop,
        ),
        Finish::Unknown => (
            Code::UnknownStopReason,
            format!("unknown stop reason `{written}`, so the output may be unfinished"),
            NextStep::Stop,
        ),
    };
    Some(reject(code, message, pointer).with_next_step(next))
}

fn judge_stop_reason<'a>(reason: Option<&'a str>, pointer: &str) -> Result<&'a str, Rejection> {
    match transport_gate(Finish::read(reason), reason, pointer) {
        None => Ok(reason.unwrap_or("stop")),
        Some(rejection) => Err(rejection),
    }
}
