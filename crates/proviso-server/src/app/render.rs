//! Choices rendered as OpenAI objects: chat completions, completions, tool calls (custom
//! tools in their own form) and log-probabilities.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) struct Meta {
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    pub(super) kind: Kind,
    /// Tools the request declared as custom: their calls are answered in the custom form.
    pub(super) custom_tools: Vec<String>,
    /// A custom tool named by `tool_choice` whose Lark grammar was the whole output.
    pub(super) custom_call: Option<String>,
    /// What steering decided for the request.
    pub(super) steering: Option<SteeringNote>,
}

/// A choice generated under a named custom tool's own grammar, as the call to that tool it
/// is: its whole text is the input. A fragment (cut or looping) stays text.
pub(super) fn as_custom_call(meta: &Meta, mut choice: ChoiceResult) -> ChoiceResult {
    let Some(name) = &meta.custom_call else {
        return choice;
    };
    if choice.finish_reason != crate::FinishReason::Stop {
        return choice;
    }
    let input = choice.content.take().unwrap_or_default();
    choice.tool_calls = vec![crate::ToolCallOut {
        id: format!("call_{}_{}", meta.id, choice.index),
        name: name.clone(),
        arguments: json!({"input": input}).to_string(),
    }];
    choice.finish_reason = crate::FinishReason::ToolCalls;
    choice.logprobs = None;
    choice
}

pub(super) fn tool_call_json(meta: &Meta, c: &crate::ToolCallOut) -> Value {
    match custom_input(&meta.custom_tools, c) {
        Some(input) => {
            json!({"id": c.id, "type": "custom", "custom": {"name": c.name, "input": input}})
        }
        None => {
            json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
        }
    }
}

pub(super) fn tool_calls_json(meta: &Meta, choice: &ChoiceResult) -> Value {
    Value::Array(
        choice
            .tool_calls
            .iter()
            .map(|c| tool_call_json(meta, c))
            .collect(),
    )
}

/// A text choice's log-probabilities in the chat form (`{"content": [...]}`); `null` for
/// tool calls and when none were asked for.
pub(super) fn chat_logprobs(choice: &ChoiceResult) -> Value {
    let Some(tokens) = choice
        .logprobs
        .as_ref()
        .filter(|_| choice.tool_calls.is_empty())
    else {
        return Value::Null;
    };
    json!({"content": token_logprobs(tokens), "refusal": null})
}

/// A choice's log-probabilities in the legacy completions form.
pub(super) fn completion_logprobs(choice: &ChoiceResult) -> Value {
    let Some(tokens) = &choice.logprobs else {
        return Value::Null;
    };
    let mut offset = 0;
    let mut offsets = Vec::new();
    for t in tokens {
        offsets.push(offset);
        offset += t.token.chars().count();
    }
    json!({
        "tokens": tokens.iter().map(|t| t.token.clone()).collect::<Vec<_>>(),
        "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
        "top_logprobs": tokens.iter().map(|t| {
            t.top.iter().map(|(token, _, lp)| (token.clone(), json!(lp))).collect::<serde_json::Map<_, _>>()
        }).collect::<Vec<_>>(),
        "text_offset": offsets,
    })
}

pub(super) fn full_response(meta: &Meta, choices: &[ChoiceResult]) -> Value {
    let prompt: u64 = choices.first().map_or(0, |c| c.prompt_tokens);
    let completion: u64 = choices.iter().map(|c| c.completion_tokens).sum();
    match meta.kind {
        Kind::Chat => {
            let choices: Vec<Value> = choices
                .iter()
                .map(|c| {
                    let mut message = json!({"role": "assistant", "content": c.content, "refusal": null});
                    if !c.tool_calls.is_empty() {
                        message["tool_calls"] = tool_calls_json(meta, c);
                    }
                    let mut choice = json!({"index": c.index, "message": message, "logprobs": chat_logprobs(c), "finish_reason": c.finish_reason.as_str()});
                    if c.reply != proviso_backend::Reply::Answer {
                        choice["proviso"] = json!({"reply": c.reply.as_str()});
                    }
                    choice
                })
                .collect();
            let mut response = json!({"id": meta.id, "object": "chat.completion", "created": meta.created, "model": meta.model,
                "choices": choices, "usage": wire::usage(prompt, completion), "system_fingerprint": null});
            if let Some(note) = &meta.steering {
                response["proviso"] = json!({"steering": note.detail});
            }
            response
        }
        Kind::Completion => {
            let choices: Vec<Value> = choices
                .iter()
                .map(|c| json!({"index": c.index, "text": c.content.clone().unwrap_or_default(), "logprobs": completion_logprobs(c), "finish_reason": c.finish_reason.as_str()}))
                .collect();
            json!({"id": meta.id, "object": "text_completion", "created": meta.created, "model": meta.model,
                "choices": choices, "usage": wire::usage(prompt, completion)})
        }
    }
}

pub(super) fn chunk(meta: &Meta, choices: Value) -> Value {
    let object = match meta.kind {
        Kind::Chat => "chat.completion.chunk",
        Kind::Completion => "text_completion",
    };
    json!({"id": meta.id, "object": object, "created": meta.created, "model": meta.model, "choices": choices})
}

pub(super) fn event(value: &Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(value.to_string()))
}
