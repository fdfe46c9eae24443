//! The loop that runs server-executed (MCP) tools between generations, on the scripted
//! backend: what a forced `tool_choice` means once the turn's call has returned.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proviso_server::{BoxFuture, ServerCall, ServerConfig, ServerTool, ServerTools};
use serde_json::{json, Value};

mod support;

use support::{Echo, Server};

/// One label, `fs`, with one tool that the permission gate always refuses; counts calls.
#[derive(Default)]
struct Refusing {
    calls: AtomicUsize,
}

impl ServerTools for Refusing {
    fn labels(&self) -> Vec<String> {
        vec!["fs".into()]
    }

    fn tools(&self) -> BoxFuture<'_, Vec<ServerTool>> {
        Box::pin(async {
            vec![ServerTool::new(
                "fs__write_file",
                "fs",
                "write_file",
                "Writes a file.",
                json!({"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}),
            )]
        })
    }

    fn call<'a>(
        &'a self,
        _name: &'a str,
        _arguments: &'a Value,
        _calls: u64,
    ) -> BoxFuture<'a, ServerCall> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            ServerCall::new(
                "rejected_permission",
                "Error: the permission gate refused this call",
            )
            .error(json!({"type": "mcp_protocol_error", "code": -32600,
                "message": "refused by the permission gate"}))
        })
    }
}

fn mcp_calls(body: &Value) -> usize {
    body["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "mcp_call")
        .count()
}

/// `tool_choice: required` (or one tool by name) asks for a call: the first round of the
/// turn calls, and the rounds after its result are `auto`, so that the response ends with an
/// answer instead of a call in every round until the rounds run out. Regression: a model
/// told `required` in every round wrote the refused call again and again until a round's
/// call was cut by the token limit, and the response failed with 502.
#[test]
fn a_forced_tool_choice_forces_the_first_call_of_the_turn_only() {
    let mcp = json!([{"type": "mcp", "server_label": "fs", "require_approval": "never"}]);
    for (route, body) in [
        ("/v1/responses", json!({"tool_choice": "required"})),
        (
            "/v1/responses",
            json!({"tool_choice": {"type": "mcp", "server_label": "fs", "name": "write_file"}}),
        ),
        (
            "/v1/responses",
            json!({"tool_choice": {"type": "mcp", "server_label": "fs"}}),
        ),
        (
            "/v1/responses",
            json!({"tool_choice": {"type": "function", "name": "fs__write_file"}}),
        ),
        ("/v1/chat/completions", json!({"tool_choice": "required"})),
        (
            "/v1/chat/completions",
            json!({"tool_choice": {"type": "mcp", "server_label": "fs", "name": "write_file"}}),
        ),
    ] {
        let tools = Arc::new(Refusing::default());
        let server = Server::start(
            Echo::default(),
            ServerConfig::default()
                .server_tools(tools.clone())
                .max_tool_rounds(4),
        );
        let mut request = body.clone();
        let map = request.as_object_mut().unwrap();
        map.insert("tools".into(), mcp.clone());
        if route == "/v1/responses" {
            map.insert("input".into(), json!("forced: write hello to /tmp/x"));
        } else {
            map.insert(
                "messages".into(),
                json!([{"role": "user", "content": "forced: write hello to /tmp/x"}]),
            );
        }
        let (status, answer) = server.post(route, &request);
        assert_eq!(status, 200, "{route} {body}: {answer}");
        assert_eq!(
            tools.calls.load(Ordering::SeqCst),
            1,
            "{route} {body}: {answer}"
        );
        if route == "/v1/responses" {
            assert_eq!(mcp_calls(&answer), 1, "{body}: {answer}");
            let last = answer["output"].as_array().unwrap().last().unwrap().clone();
            assert_eq!(last["type"], "message", "{body}: {answer}");
            assert_eq!(answer["status"], "completed", "{body}: {answer}");
        } else {
            assert_eq!(
                answer["choices"][0]["finish_reason"], "stop",
                "{body}: {answer}"
            );
        }
    }
}

/// An `mcp` tool choice names a server and a tool the request offers, or it is refused with
/// the field at fault (422), before anything runs.
#[test]
fn an_mcp_tool_choice_names_what_the_request_offers() {
    let tools = Arc::new(Refusing::default());
    let server = Server::start(
        Echo::default(),
        ServerConfig::default().server_tools(tools.clone()),
    );
    for (choice, param) in [
        (
            json!({"type": "mcp", "server_label": "web"}),
            "tool_choice.server_label",
        ),
        (
            json!({"type": "mcp", "server_label": "fs", "name": "delete_file"}),
            "tool_choice.name",
        ),
        (json!({"type": "mcp"}), "tool_choice.server_label"),
    ] {
        let (status, answer) = server.post(
            "/v1/responses",
            &json!({"input": "forced: write", "tool_choice": choice,
                "tools": [{"type": "mcp", "server_label": "fs", "require_approval": "never"}]}),
        );
        // Well-formed, but naming what is not there: a data error.
        assert_eq!(status, 422, "{choice}: {answer}");
        assert_eq!(answer["error"]["param"], param, "{choice}: {answer}");
    }
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
}

/// `none` is unchanged: no call runs.
#[test]
fn a_none_choice_runs_no_call() {
    let tools = Arc::new(Refusing::default());
    let server = Server::start(
        Echo::default(),
        ServerConfig::default().server_tools(tools.clone()),
    );
    let (status, body) = server.post(
        "/v1/responses",
        &json!({"input": "forced: write hello", "tool_choice": "none",
            "tools": [{"type": "mcp", "server_label": "fs", "require_approval": "never"}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(mcp_calls(&body), 0, "{body}");
    assert_eq!(tools.calls.load(Ordering::SeqCst), 0);
}
