//! `proviso serve` on the real default model, called with raw HTTP and with the official
//! `openai` Python client (installed into `target/pylib` by `scripts/setup`).

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A server process, stopped with SIGTERM (a graceful shutdown) when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_proviso"))
            .args(["serve", "--port", "0"])
            .args(extra)
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next()
                .expect("the server exited before listening")
                .unwrap();
            if let Some(rest) = line.split(" on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self { child, base }
    }

    fn post(&self, body: &str, content_type: &str) -> (u16, Value) {
        match ureq::post(&format!("{}/v1/chat/completions", self.base))
            .set("Content-Type", content_type)
            .send_string(body)
        {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap()),
            Err(e) => panic!("{e}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM: the server finishes in-flight requests and exits 0.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_arm", "description": "Reads the arms of one trial.",
        "parameters": {"type": "object", "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"}},
            "required": ["trial_id"], "additionalProperties": false}}}])
}

#[test]
fn raw_http_against_the_real_model() {
    let server = Server::start(&["--body-limit", "65536"]);
    let question =
        json!([{"role": "user", "content": "Which arms of trial NCT04123456 were terminated?"}]);
    // Required: a call that passed the gates.
    let (status, body) = server.post(&json!({"model": "any", "messages": question, "tools": tools(), "tool_choice": "required", "temperature": 0}).to_string(), "application/json");
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let arguments: Value = serde_json::from_str(
        choice["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert!(arguments["trial_id"].as_str().unwrap().starts_with("NCT"));
    // Cut by max_tokens: `length`, and no tool call is claimed.
    let (_, body) = server.post(&json!({"messages": question, "tools": tools(), "tool_choice": "required", "temperature": 0, "max_tokens": 6}).to_string(), "application/json");
    assert_eq!(body["choices"][0]["finish_reason"], "length", "{body}");
    assert!(
        body["choices"][0]["message"].get("tool_calls").is_none(),
        "{body}"
    );
    // Malformed, invalid, unsupported, wrong type, oversized.
    for (payload, content_type, status, code) in [
        ("{\"messages\": ".to_owned(), "application/json", 400, "invalid_json"),
        (json!({"messages": "hi"}).to_string(), "application/json", 422, "invalid_value"),
        (json!({"messages": question, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"not": {"type": "string"}}}}}).to_string(), "application/json", 400, "unsupported_parameter"),
        (json!({"messages": question, "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "drop_table"}}}).to_string(), "application/json", 400, "unsupported_parameter"),
        (json!({"messages": question}).to_string(), "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (json!({"messages": [{"role": "user", "content": "x".repeat(70_000)}]}).to_string(), "application/json", 413, "request_too_large"),
    ] {
        let (got, body) = server.post(&payload, content_type);
        assert_eq!(got, status, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("panicked") && !message.contains(".rs:"), "internal details leaked: {message}");
    }
    let metrics = ureq::get(&format!("{}/metrics", server.base))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metrics.contains("proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("proviso_requests_total{route=\"/v1/chat/completions\",status=\"413\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("proviso_mask_seconds_count"), "{metrics}");
}

#[test]
fn the_openai_python_client() {
    let pylib =
        std::env::var("PROVISO_PYLIB").map_or_else(|_| root().join("target/pylib"), PathBuf::from);
    let probe = Command::new("python3")
        .args(["-c", "import openai"])
        .env("PYTHONPATH", &pylib)
        .status()
        .unwrap();
    assert!(
        probe.success(),
        "the openai client is not installed in {}: run scripts/setup",
        pylib.display()
    );
    let server = Server::start(&[]);
    let out = Command::new("python3")
        .arg(root().join("crates/proviso-cli/tests/openai_client.py"))
        .arg(&server.base)
        .env("PYTHONPATH", &pylib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all ok"));
}
