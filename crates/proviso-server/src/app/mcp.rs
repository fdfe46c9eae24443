//! Server-executed tools (MCP) in a request: the Responses API's `mcp` tool, the same
//! tool in a chat request (proviso's extension), approvals, and the bounded loop that runs
//! calls between generations.
//!
//! A request names a configured server by `server_label`. Its tools become function tools
//! for the model; a call the model writes to one of them is gated (schema, argument
//! policy, permission, budget, by [`ServerTools::call`]) and executed here, its result is
//! added to the conversation, and the model is asked again, at most
//! [`ServerConfig::max_tool_rounds`] times. A call that needs approval ends the response
//! with an `mcp_approval_request`; the next request's `mcp_approval_response` resumes it.

#[allow(clippy::wildcard_imports)]
use super::*;

use crate::tools::{ServerTool, ServerTools};

/// Which tools of a label a request allows, or which need approval.
#[derive(Debug, Clone, Default)]
struct Filter {
    names: Option<Vec<String>>,
    read_only: Option<bool>,
}

impl Filter {
    fn read(value: &Value, param: &str) -> Result<Self, InvalidRequest> {
        if let Some(items) = value.as_array() {
            return Ok(Self {
                names: Some(strings(items, param)?),
                read_only: None,
            });
        }
        let Some(map) = value.as_object() else {
            return Err(InvalidRequest::new(
                param,
                "must be a list of tool names or {\"tool_names\": […], \"read_only\": bool}",
            ));
        };
        let mut filter = Self::default();
        for (key, v) in map {
            match key.as_str() {
                "tool_names" => {
                    let items = v.as_array().ok_or_else(|| {
                        InvalidRequest::new(
                            format!("{param}.tool_names"),
                            "must be a list of names",
                        )
                    })?;
                    filter.names = Some(strings(items, &format!("{param}.tool_names"))?);
                }
                "read_only" => {
                    filter.read_only = Some(v.as_bool().ok_or_else(|| {
                        InvalidRequest::new(format!("{param}.read_only"), "must be a boolean")
                    })?);
                }
                other => {
                    return Err(InvalidRequest::unsupported(
                        format!("{param}.{other}"),
                        format!("`{other}` is not a filter proviso knows (tool_names, read_only)"),
                    ))
                }
            }
        }
        Ok(filter)
    }

    /// Whether `tool` matches: every condition given holds (an empty filter matches all).
    fn matches(&self, tool: &ServerTool) -> bool {
        self.names
            .as_ref()
            .is_none_or(|names| names.contains(&tool.tool))
            && self.read_only.is_none_or(|r| r == tool.read_only)
    }
}

fn strings(items: &[Value], param: &str) -> Result<Vec<String>, InvalidRequest> {
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| InvalidRequest::new(param, "tool names must be strings"))
        })
        .collect()
}

/// When a call needs the client's approval.
#[derive(Debug, Clone)]
enum Approval {
    Always,
    Never,
    Rules {
        always: Option<Filter>,
        never: Option<Filter>,
    },
}

impl Approval {
    fn needed(&self, tool: &ServerTool) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            // A tool the `never` filter names runs without approval, unless `always` names
            // it too; any other tool needs approval (the API's default).
            Self::Rules { always, never } => {
                always.as_ref().is_some_and(|f| f.matches(tool))
                    || !never.as_ref().is_some_and(|f| f.matches(tool))
            }
        }
    }
}

/// One `mcp` tool of a request.
#[derive(Debug, Clone)]
struct Use {
    label: String,
    allowed: Option<Filter>,
    approval: Approval,
}

/// The server-executed tools a request uses.
#[derive(Default)]
pub(super) struct McpUses {
    uses: Vec<Use>,
    /// Every tool the request may call, by the name the model calls it.
    tools: Vec<(ServerTool, Approval)>,
    /// Approval answers found in the input, by request id.
    answers: Vec<(String, bool, Option<String>)>,
    /// Labels whose tools are listed in this response (first use in the conversation).
    list_labels: Vec<String>,
}

impl McpUses {
    fn tool(&self, name: &str) -> Option<&(ServerTool, Approval)> {
        self.tools.iter().find(|(t, _)| t.name == name)
    }

    /// Whether the request uses any server-executed tool.
    pub(super) fn is_empty(&self) -> bool {
        self.uses.is_empty()
    }
}

/// Whether a request body names an `mcp` tool or carries an MCP item: only then does the
/// loop run.
pub(super) fn wanted(body: &Value) -> bool {
    let tool = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.get("type").and_then(Value::as_str) == Some("mcp"))
        });
    let item = body
        .get("input")
        .and_then(Value::as_array)
        .is_some_and(|items| {
            items.iter().any(|i| {
                i.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with("mcp_"))
            })
        });
    tool || item
}

/// Reads a request's `mcp` tools and MCP input items, and rewrites the body for the model:
/// each `mcp` tool becomes the function tools of its label that it allows, MCP items of
/// the input become function calls and their outputs, and approval answers are kept aside.
/// `responses` says which API the body is in (the chat form has no approvals).
pub(super) async fn prepare(
    tools: &dyn ServerTools,
    body: &mut Value,
    responses: bool,
) -> Result<McpUses, InvalidRequest> {
    let mut uses = McpUses::default();
    let labels = tools.labels();
    let declared = body
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut kept = Vec::new();
    for (i, tool) in declared.into_iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("mcp") {
            kept.push(tool);
            continue;
        }
        let param = format!("tools[{i}]");
        let mut label = None;
        let mut allowed = None;
        let mut approval = if responses {
            Approval::Always
        } else {
            Approval::Never
        };
        let Some(map) = tool.as_object() else {
            return Err(InvalidRequest::new(
                param,
                "an `mcp` tool must be an object",
            ));
        };
        for (key, value) in map {
            if value.is_null() {
                continue;
            }
            let field = format!("{param}.{key}");
            match key.as_str() {
                "type" | "server_description" => {}
                "server_label" => {
                    let name = value
                        .as_str()
                        .ok_or_else(|| InvalidRequest::new(&field, "must be a string"))?;
                    if !labels.iter().any(|l| l == name) {
                        return Err(InvalidRequest::new(
                            field,
                            format!(
                                "no MCP server `{name}` is configured on this server (configured: {})",
                                if labels.is_empty() { "none; start it with --mcp".to_owned() } else { labels.join(", ") }
                            ),
                        ));
                    }
                    label = Some(name.to_owned());
                }
                "allowed_tools" => allowed = Some(Filter::read(value, &field)?),
                "require_approval" => {
                    approval = match value {
                        Value::String(s) if s == "always" => Approval::Always,
                        Value::String(s) if s == "never" => Approval::Never,
                        Value::Object(rules) => {
                            let mut always = None;
                            let mut never = None;
                            for (k, v) in rules {
                                match k.as_str() {
                                    "always" => always = Some(Filter::read(v, &format!("{field}.always"))?),
                                    "never" => never = Some(Filter::read(v, &format!("{field}.never"))?),
                                    other => return Err(InvalidRequest::new(
                                        format!("{field}.{other}"),
                                        "require_approval rules are `always` and `never`",
                                    )),
                                }
                            }
                            Approval::Rules { always, never }
                        }
                        _ => {
                            return Err(InvalidRequest::new(
                                field,
                                "must be \"always\", \"never\" or {\"always\": …, \"never\": …}",
                            ))
                        }
                    };
                    if !responses && !matches!(approval, Approval::Never) {
                        return Err(InvalidRequest::unsupported(
                            field,
                            "chat completions have no approval items: use \"never\" here, or /v1/responses for approvals",
                        ));
                    }
                }
                "server_url" | "connector_id" | "headers" | "authorization" | "tunnel_id" => {
                    return Err(InvalidRequest::unsupported(
                        field,
                        "proviso connects only to the MCP servers of its --mcp configuration; name one by `server_label`",
                    ))
                }
                "defer_loading" | "allowed_callers" => {
                    return Err(InvalidRequest::unsupported(
                        field,
                        format!("`{key}` is not supported on proviso's mcp tool"),
                    ))
                }
                other => {
                    return Err(InvalidRequest::unsupported(
                        field,
                        format!("`{other}` is not a field of the mcp tool"),
                    ))
                }
            }
        }
        let Some(label) = label else {
            return Err(InvalidRequest::new(
                format!("{param}.server_label"),
                "an `mcp` tool needs `server_label`",
            ));
        };
        uses.uses.push(Use {
            label,
            allowed,
            approval,
        });
    }
    let items = body
        .get("input")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has_mcp_items = items.iter().any(|i| {
        i.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("mcp_"))
    });
    if uses.uses.is_empty() && !has_mcp_items {
        return Ok(uses);
    }
    let all = tools.tools().await;
    for u in &uses.uses {
        for tool in all.iter().filter(|t| t.label == u.label) {
            if u.allowed.as_ref().is_none_or(|f| f.matches(tool)) {
                uses.tools.push((tool.clone(), u.approval.clone()));
            }
        }
    }
    choose_server_tool(body, &uses, responses)?;
    // The tools as function tools, in the body's own form.
    for (tool, _) in &uses.tools {
        kept.push(if responses {
            json!({"type": "function", "name": tool.name, "description": tool.description,
                "parameters": tool.parameters})
        } else {
            json!({"type": "function", "function": {"name": tool.name,
                "description": tool.description, "parameters": tool.parameters}})
        });
    }
    if let Some(map) = body.as_object_mut() {
        if kept.is_empty() {
            map.remove("tools");
        } else {
            map.insert("tools".into(), Value::Array(kept));
        }
    }
    // A label's tools are listed once per conversation: in the response that first uses it.
    let listed: Vec<&str> = items
        .iter()
        .filter(|i| i.get("type").and_then(Value::as_str) == Some("mcp_list_tools"))
        .filter_map(|i| i.get("server_label").and_then(Value::as_str))
        .collect();
    let continues = body
        .get("previous_response_id")
        .is_some_and(|v| !v.is_null());
    uses.list_labels = uses
        .uses
        .iter()
        .map(|u| u.label.clone())
        .filter(|l| !continues && !listed.contains(&l.as_str()))
        .collect();
    if !has_mcp_items {
        return Ok(uses);
    }
    let name_of = |label: &str, tool: &str| {
        all.iter()
            .find(|t| t.label == label && t.tool == tool)
            .map(|t| t.name.clone())
    };
    let mut rewritten = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let param = format!("input[{i}]");
        let text = |key: &str| -> Result<String, InvalidRequest> {
            item.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    InvalidRequest::new(
                        format!("{param}.{key}"),
                        format!("`{key}` must be a string"),
                    )
                })
        };
        match item.get("type").and_then(Value::as_str) {
            Some("mcp_list_tools") => {}
            Some(kind @ ("mcp_call" | "mcp_approval_request")) => {
                let (label, tool) = (text("server_label")?, text("name")?);
                let name = name_of(&label, &tool).ok_or_else(|| {
                    InvalidRequest::new(
                        format!("{param}.name"),
                        format!("MCP server `{label}` has no tool `{tool}`"),
                    )
                })?;
                let id = text("id")?;
                // An executed call's id is `mcp_<call id>`; a pending one's is the call id.
                let call_id = id.strip_prefix("mcp_").unwrap_or(&id).to_owned();
                rewritten.push(
                    json!({"type": "function_call", "call_id": call_id, "name": name,
                    "arguments": text("arguments")?}),
                );
                if kind == "mcp_call" {
                    let output = item
                        .get("output")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .or_else(|| {
                            item.get("error")
                                .filter(|e| !e.is_null())
                                .map(|e| format!("Error: {e}"))
                        })
                        .unwrap_or_default();
                    rewritten.push(json!({"type": "function_call_output", "call_id": call_id, "output": output}));
                }
            }
            Some("mcp_approval_response") => {
                let approve = item
                    .get("approve")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| {
                        InvalidRequest::new(
                            format!("{param}.approve"),
                            "`approve` must be a boolean",
                        )
                    })?;
                let reason = item
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                uses.answers
                    .push((text("approval_request_id")?, approve, reason));
            }
            _ => rewritten.push(item),
        }
    }
    if let Some(map) = body.as_object_mut() {
        map.insert("input".into(), Value::Array(rewritten));
    }
    Ok(uses)
}

/// What the loop came to.
pub(super) struct Ran {
    pub(super) meta: Meta,
    pub(super) choice: ChoiceResult,
    /// The MCP output items, in order (listings, calls, approval requests).
    pub(super) items: Vec<Value>,
    /// The chat messages the loop added before the final choice (calls and their results),
    /// for the stored conversation.
    pub(super) messages: Vec<Value>,
}

/// Runs `chat` (a chat completions request) with the server-executed tools of `uses`:
/// approvals answered in the input first, then at most `max_tool_rounds` rounds of
/// generation and gated calls, then the response.
#[allow(clippy::too_many_lines)]
pub(super) async fn run<B: Backend>(
    s: &Shared<B>,
    id: &RequestId,
    outcome: &SharedOutcome,
    started: Instant,
    mut chat: Value,
    uses: &McpUses,
    param_name: fn(String) -> String,
) -> Result<Ran, Response> {
    let Some(tools) = s.config.server_tools.clone() else {
        return Err(invalid(InvalidRequest::unsupported(
            "tools",
            "this server executes no tools: start it with --mcp CONFIG.json",
        )));
    };
    let mut items = Vec::new();
    for label in &uses.list_labels {
        let listed: Vec<Value> = uses
            .tools
            .iter()
            .filter(|(t, _)| &t.label == label)
            .map(|(t, _)| {
                json!({"name": t.tool, "description": t.description,
                "input_schema": t.parameters, "annotations": t.annotations})
            })
            .collect();
        items.push(
            json!({"type": "mcp_list_tools", "id": format!("mcpl_{}", new_id("l")),
            "server_label": label, "tools": listed, "error": null}),
        );
    }
    let mut added: Vec<Value> = Vec::new();
    let mut calls_made = calls_in(&chat);
    let mut approved_outputs: Vec<String> = Vec::new();
    let mut approved_ok = !uses.answers.is_empty();
    // Approvals answered in this request: the pending call runs (or is declined) first.
    for (request_id, approve, reason) in &uses.answers {
        let pending = pending_call(&chat, request_id).ok_or_else(|| {
            invalid(InvalidRequest::new(
                "input.approval_request_id",
                format!("no pending MCP approval request `{request_id}` in this conversation"),
            ))
        })?;
        let (name, arguments) = pending;
        let Some((tool, _)) = uses.tool(&name) else {
            return Err(invalid(InvalidRequest::new(
                "input.approval_request_id",
                format!("`{name}` is not among the request's mcp tools"),
            )));
        };
        let content = if *approve {
            let parsed: Value = serde_json::from_str(&arguments).unwrap_or(Value::Null);
            calls_made += 1;
            let call = tools.call(&name, &parsed, calls_made).await;
            s.metrics.mcp_call(&tool.label, &tool.tool, &call.outcome);
            tracing::info!(request_id = %id.0, server = %tool.label, tool = %tool.tool, outcome = %call.outcome, duration_ms = call.duration_ms, "mcp call (approved)");
            items.push(call_item(
                tool,
                request_id,
                &arguments,
                &call,
                Some(request_id),
            ));
            match &call.output {
                Some(output) if call.error.is_none() => approved_outputs.push(output.clone()),
                _ => approved_ok = false,
            }
            call.text
        } else {
            approved_ok = false;
            s.metrics.mcp_call(&tool.label, &tool.tool, "not_approved");
            format!(
                "Error: the user did not approve this call{}",
                reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            )
        };
        let message = json!({"role": "tool", "tool_call_id": request_id, "content": content});
        push_message(&mut chat, message.clone());
        added.push(message);
    }
    // Each generation of the loop is bounded, so that rounds of calls fit the request's
    // time: a small model's text can run on for thousands of tokens. A request's own
    // `max_tokens` (`max_output_tokens`) applies instead when it gives one.
    if let Some(map) = chat.as_object_mut() {
        if !map.contains_key("max_tokens") && !map.contains_key("max_completion_tokens") {
            map.insert("max_tokens".into(), json!(LOOP_MAX_TOKENS));
        }
    }
    let rounds = s.config.max_tool_rounds;
    // Under `auto`, before any call of this turn, the first response must call one of the
    // server's tools: a request that attaches them asks for a lookup, and a small model
    // left to choose answers from nothing (steering, off with `"steering": false`).
    let choice_given = chat.get("tool_choice").cloned();
    let steering = chat.get("steering") != Some(&Value::Bool(false))
        && chat.get("steering").and_then(Value::as_str) != Some("off");
    let look_first = steering
        && uses.answers.is_empty()
        && choice_given.as_ref().is_none_or(|c| c == "auto")
        && !called_this_turn(&chat);
    if steering && approved_ok {
        ground_answer(&mut chat, &approved_outputs);
    }
    let mut round = 0;
    loop {
        let turn_called = round > 0 || called_this_turn(&chat);
        // An answer grounded in the results has no tools left to choose.
        if let Some(map) = chat.as_object_mut().filter(|m| m.contains_key("tools")) {
            if round == 0 && look_first {
                map.insert("tool_choice".into(), json!("required"));
            } else {
                match &choice_given {
                    // A forced choice (`required`, or one named tool) asks for a call, and
                    // the turn has had its call once a result is in: forcing it again
                    // would make every round call until the rounds run out, and the answer
                    // the caller wants never comes. The rounds after it are `auto`.
                    Some(choice)
                        if turn_called
                            && wire::read_tool_choice(choice).is_ok_and(|c| c.forces_call()) =>
                    {
                        map.remove("tool_choice")
                    }
                    Some(choice) => map.insert("tool_choice".into(), choice.clone()),
                    None => map.remove("tool_choice"),
                };
            }
        }
        if round >= rounds {
            // The rounds are spent: the model answers with what the calls returned.
            if let Some(map) = chat.as_object_mut().filter(|m| m.contains_key("tools")) {
                map.insert("tool_choice".into(), json!("none"));
            }
        }
        let submitted = submit(s, Kind::Chat, id, chat.clone(), started, param_name).await?;
        let (meta, choices) = run_to_end(s, submitted, id, outcome).await?;
        let Some(mut choice) = choices.into_iter().next() else {
            return Err(internal_error(id, "no choice"));
        };
        let (ours, theirs): (Vec<ToolCallOut>, Vec<ToolCallOut>) =
            std::mem::take(&mut choice.tool_calls)
                .into_iter()
                .partition(|c| uses.tool(&c.name).is_some());
        choice.tool_calls = theirs;
        if ours.is_empty() {
            return Ok(Ran {
                meta,
                choice,
                items,
                messages: added,
            });
        }
        round += 1;
        let calls: Vec<Value> = ours
            .iter()
            .chain(choice.tool_calls.iter())
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        let message = json!({"role": "assistant", "content": choice.content, "tool_calls": calls});
        push_message(&mut chat, message.clone());
        added.push(message);
        let mut waiting = false;
        let mut round_ok = true;
        let mut outputs: Vec<String> = Vec::new();
        for call in &ours {
            let Some((tool, approval)) = uses.tool(&call.name) else {
                continue;
            };
            if approval.needed(tool) {
                waiting = true;
                s.metrics
                    .mcp_call(&tool.label, &tool.tool, "approval_requested");
                items.push(json!({"type": "mcp_approval_request", "id": call.id,
                    "server_label": tool.label, "name": tool.tool, "arguments": call.arguments}));
                continue;
            }
            let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
            calls_made += 1;
            let done = tools.call(&call.name, &arguments, calls_made).await;
            s.metrics.mcp_call(&tool.label, &tool.tool, &done.outcome);
            tracing::info!(request_id = %id.0, server = %tool.label, tool = %tool.tool, outcome = %done.outcome, duration_ms = done.duration_ms, "mcp call");
            items.push(call_item(tool, &call.id, &call.arguments, &done, None));
            match &done.output {
                Some(output) if done.error.is_none() => outputs.push(output.clone()),
                _ => round_ok = false,
            }
            let result = json!({"role": "tool", "tool_call_id": call.id, "content": done.text});
            push_message(&mut chat, result.clone());
            added.push(result);
        }
        // Calls for the client, or approvals to wait for: the response ends here.
        if waiting || !choice.tool_calls.is_empty() {
            if choice.tool_calls.is_empty() {
                choice.content = None;
            }
            return Ok(Ran {
                meta,
                choice,
                items,
                messages: added,
            });
        }
        if steering && round_ok {
            ground_answer(&mut chat, &outputs);
        }
    }
}

/// Most tokens one generation of the loop may write when the request sets no limit.
const LOOP_MAX_TOKENS: u64 = 512;

/// Most result lines a grounded answer chooses among: a small model chooses better among
/// a few.
const ANSWER_LINES: usize = 3;

/// After a round whose calls all returned, the next response answers with a line of what
/// they returned: the lines that share the most content words with the request are the
/// only texts the answer may be (the model chooses among them). A request that constrains
/// its answer itself keeps its constraint, and nothing is narrowed when no line shares a
/// word with the request.
fn ground_answer(chat: &mut Value, outputs: &[String]) {
    const CONSTRAINTS: &[&str] = &[
        "response_format",
        "guided_choice",
        "guided_regex",
        "guided_grammar",
        "guided_json",
        "structured_outputs",
    ];
    let Some(map) = chat.as_object_mut() else {
        return;
    };
    if CONSTRAINTS.iter().any(|c| map.contains_key(*c)) {
        return;
    }
    let asked = map
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    let lines = answer_lines(&asked, outputs, ANSWER_LINES);
    if lines.is_empty() {
        return;
    }
    map.remove("tools");
    map.remove("tool_choice");
    map.remove("parallel_tool_calls");
    map.insert("guided_choice".into(), json!(lines));
}

/// The lines of `outputs` that share the most content stems with `asked`, in order (at most
/// `keep`; none when no line shares one).
fn answer_lines(asked: &str, outputs: &[String], keep: usize) -> Vec<String> {
    use proviso_contract::lexicon::content_stems;
    let question: std::collections::BTreeSet<String> = content_stems(asked).into_iter().collect();
    let mut scored: Vec<(usize, usize, &str)> = Vec::new();
    for (order, line) in outputs.iter().flat_map(|o| o.lines()).enumerate() {
        let line = line.trim();
        if line.is_empty() || line.len() > 400 || scored.iter().any(|(_, _, l)| *l == line) {
            continue;
        }
        let stems: std::collections::BTreeSet<String> = content_stems(line).into_iter().collect();
        let shared = stems.intersection(&question).count();
        if shared > 0 {
            scored.push((shared, order, line));
        }
    }
    // Only the lines that share the most: a line sharing fewer words (a title naming the
    // subject) is not offered beside the one that states what was asked.
    let top = scored.iter().map(|s| s.0).max().unwrap_or(0);
    scored.retain(|s| s.0 == top);
    scored.sort_by_key(|s| s.1);
    scored
        .into_iter()
        .take(keep)
        .map(|(_, _, l)| l.to_owned())
        .collect()
}

/// The `mcp_call` output item of one call.
fn call_item(
    tool: &ServerTool,
    call_id: &str,
    arguments: &str,
    call: &crate::ServerCall,
    approval: Option<&str>,
) -> Value {
    json!({"type": "mcp_call", "id": format!("mcp_{call_id}"), "server_label": tool.label,
        "name": tool.tool, "arguments": arguments, "output": call.output,
        "error": call.error, "status": if call.error.is_some() { "failed" } else { "completed" },
        "approval_request_id": approval})
}

fn push_message(chat: &mut Value, message: Value) {
    if let Some(messages) = chat.get_mut("messages").and_then(Value::as_array_mut) {
        messages.push(message);
    }
}

/// Rewrites a `tool_choice` of type `mcp` (the Responses API's form: `server_label`, and
/// optionally `name`) into the function form the model's tools take: one tool by name, or
/// any tool of the label (`allowed_tools`, `required`). A label or a name the request does
/// not offer is refused, naming the field.
fn choose_server_tool(
    body: &mut Value,
    uses: &McpUses,
    responses: bool,
) -> Result<(), InvalidRequest> {
    let Some(choice) = body
        .get("tool_choice")
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("mcp"))
        .cloned()
    else {
        return Ok(());
    };
    let label = choice
        .get("server_label")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            InvalidRequest::new(
                "tool_choice.server_label",
                "an `mcp` tool choice needs `server_label`",
            )
        })?;
    let offered: Vec<&ServerTool> = uses
        .tools
        .iter()
        .map(|(t, _)| t)
        .filter(|t| t.label == label)
        .collect();
    if offered.is_empty() {
        return Err(InvalidRequest::new(
            "tool_choice.server_label",
            format!("the request offers no tool of MCP server `{label}`: add an `mcp` tool with that `server_label`"),
        ));
    }
    let function = |name: &str| {
        if responses {
            json!({"type": "function", "name": name})
        } else {
            json!({"type": "function", "function": {"name": name}})
        }
    };
    let rewritten = match choice.get("name").filter(|n| !n.is_null()) {
        Some(name) => {
            let name = name.as_str().ok_or_else(|| {
                InvalidRequest::new("tool_choice.name", "`name` must be a string")
            })?;
            let tool = offered.iter().find(|t| t.tool == name).ok_or_else(|| {
                InvalidRequest::new(
                    "tool_choice.name",
                    format!("MCP server `{label}` offers this request no tool `{name}`"),
                )
            })?;
            function(&tool.name)
        }
        None => {
            let tools: Vec<Value> = offered.iter().map(|t| function(&t.name)).collect();
            if responses {
                json!({"type": "allowed_tools", "mode": "required", "tools": tools})
            } else {
                json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": tools}})
            }
        }
    };
    if let Some(map) = body.as_object_mut() {
        map.insert("tool_choice".into(), rewritten);
    }
    Ok(())
}

/// Whether a tool result follows the last user turn.
fn called_this_turn(chat: &Value) -> bool {
    let Some(messages) = chat.get("messages").and_then(Value::as_array) else {
        return false;
    };
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[start..].iter().any(|m| m["role"] == "tool")
}

/// Tool results already in the conversation: the calls its budget has counted.
fn calls_in(chat: &Value) -> u64 {
    chat.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |m| {
            m.iter().filter(|m| m["role"] == "tool").count() as u64
        })
}

/// The call `id` of the conversation that has no result yet: its name and arguments.
fn pending_call(chat: &Value, id: &str) -> Option<(String, String)> {
    let messages = chat.get("messages")?.as_array()?;
    let answered = messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == id);
    if answered {
        return None;
    }
    messages.iter().rev().find_map(|m| {
        m.get("tool_calls")?.as_array()?.iter().find_map(|c| {
            if c["id"] != id {
                return None;
            }
            Some((
                c.pointer("/function/name")?.as_str()?.to_owned(),
                c.pointer("/function/arguments")?.as_str()?.to_owned(),
            ))
        })
    })
}
