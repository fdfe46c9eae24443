//! `proviso serve` on the real default model, called with raw HTTP and with the official
//! `openai` Python client (installed into `target/pylib` by `scripts/setup`).

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

/// Serializes the tests that run the model. Each server runs llama.cpp with as many threads as
/// the machine has cores (see `Server::start`), and two such servers side by side spin on each
/// other's cores: on two cores a 13-second client script then takes minutes and trips its
/// timeouts.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
        // The server defaults to one thread, the safe choice on a shared machine. Here the
        // model's tests run one server at a time (`serial`) and the client waits while it
        // generates, so the server has every core: with two threads on two cores the agent
        // loops' script took 38 s instead of 51 s.
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let mut child = Command::new(env!("CARGO_BIN_EXE_proviso"))
            .args(["serve", "--port", "0"])
            .args(extra)
            .env("PROVISO_THREADS", cores.to_string())
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
        self.send("/v1/chat/completions", body, content_type)
    }

    /// A JSON request to another route.
    fn post_to(&self, route: &str, body: &str) -> (u16, Value) {
        self.send(route, body, "application/json")
    }

    fn send(&self, route: &str, body: &str, content_type: &str) -> (u16, Value) {
        match ureq::post(&format!("{}{route}", self.base))
            .set("Content-Type", content_type)
            .send_string(body)
        {
            Ok(r) => (r.status(), r.into_json().unwrap()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap()),
            Err(e) => panic!("{e}"),
        }
    }

    /// As `post`, over a raw connection that keeps reading after a failed write: a server
    /// may answer (413) and close before a large body is sent, and the answer must still be
    /// read rather than lost to the client's broken pipe.
    fn post_raw(&self, body: &str, content_type: &str) -> (u16, Value) {
        use std::io::{Read, Write};
        let address = self.base.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body.as_bytes()));
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status in {response:?}"));
        let json = response.split("\r\n\r\n").nth(1).unwrap_or_default();
        (status, serde_json::from_str(json).unwrap_or(Value::Null))
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

#[test]
fn a_full_kv_budget_is_answered_with_503_and_retry_after() {
    let _serial = serial();
    // Two slots share 500 KV cells: one prompt of about 300 tokens fits, two do not.
    let server = Server::start(&["--parallel", "2", "--ctx", "400", "--kv-budget", "500"]);
    let filler = "Lighthouses guided ships along dangerous coasts for centuries. ".repeat(30);
    let body = json!({"messages": [{"role": "user", "content": format!("{filler}Summarise.")}],
        "temperature": 0, "max_tokens": 40})
    .to_string();
    let send = || match ureq::post(&format!("{}/v1/chat/completions", server.base))
        .set("Content-Type", "application/json")
        .send_string(&body)
    {
        Ok(r) => (r.status(), None, r.into_json::<Value>().unwrap()),
        Err(ureq::Error::Status(code, r)) => (
            code,
            r.header("Retry-After").map(str::to_owned),
            r.into_json::<Value>().unwrap(),
        ),
        Err(e) => panic!("{e}"),
    };
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(send);
        let b = scope.spawn(send);
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut statuses = [a.0, b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 503], "{a:?}\n{b:?}");
    let refused = if a.0 == 503 { &a } else { &b };
    assert_eq!(refused.1.as_deref(), Some("1"), "{refused:?}");
    assert_eq!(refused.2["error"]["code"], "overloaded", "{refused:?}");
    // Nothing internal leaks, and the retry finds the idle sequence's cells evicted for it.
    assert!(!refused.2.to_string().contains("KV cells"), "{refused:?}");
    let (status, _, body) = send();
    assert_eq!(status, 200, "{body}");
    // A budget that cannot hold one request's context is refused at start.
    let refused = Command::new(env!("CARGO_BIN_EXE_proviso"))
        .args([
            "serve",
            "--port",
            "0",
            "--parallel",
            "2",
            "--ctx",
            "400",
            "--kv-budget",
            "300",
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--kv-budget"));
}

#[test]
fn custom_tools_take_input_in_their_own_format() {
    let _serial = serial();
    let server = Server::start(&["--parallel", "1"]);
    let phone = json!({"type": "custom", "custom": {"name": "dial",
        "description": "Dials a phone number.",
        "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": "[0-9]{3}-[0-9]{4}"}}}});
    let question = json!([{"role": "user", "content": "Call 555-0134 for me."}]);
    let (status, body) = server.post(
        &json!({"messages": question, "tools": [phone, tools()[0]],
        "tool_choice": {"type": "custom", "custom": {"name": "dial"}}, "temperature": 0})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["type"], "custom", "{body}");
    assert_eq!(call["custom"]["name"], "dial", "{body}");
    let input = call["custom"]["input"].as_str().unwrap();
    assert!(
        input.len() == 8
            && input.as_bytes()[3] == b'-'
            && input.replace('-', "").bytes().all(|b| b.is_ascii_digit()),
        "{body}"
    );
    // The call sent back in the custom form continues the conversation.
    let mut turns = question.as_array().unwrap().clone();
    turns.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
    turns.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "connected"}));
    let (status, body) = server.post(
        &json!({"messages": turns, "tools": [phone], "tool_choice": "none",
        "temperature": 0, "max_tokens": 20})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    // The Responses API declares custom tools flat and answers with a custom_tool_call item.
    let (status, body) = server.post_to("/v1/responses", &json!({"input": "Call 555-0134 for me.",
        "tools": [{"type": "custom", "name": "dial", "format": {"type": "grammar", "syntax": "regex", "definition": "[0-9]{3}-[0-9]{4}"}}],
        "tool_choice": {"type": "custom", "name": "dial"}, "temperature": 0}).to_string());
    assert_eq!(status, 200, "{body}");
    let item = &body["output"][0];
    assert_eq!(item["type"], "custom_tool_call", "{body}");
    assert_eq!(item["input"].as_str().unwrap().len(), 8, "{body}");
    // A Lark input grammar, when `tool_choice` names the tool, is the whole output's grammar:
    // the answer is one call whose input the grammar wrote, streamed or not.
    let lark = json!({"type": "custom", "custom": {"name": "sql", "description": "Runs a query.",
        "format": {"type": "grammar", "grammar": {"syntax": "lark",
            "definition": "start: \"SELECT \" COLUMN \" FROM trials WHERE id = \" ID\nCOLUMN: \"arm\" | \"status\"\nID: /NCT[0-9]{8}/"}}}});
    let ask = json!([{"role": "user", "content": "What is the status of trial NCT04123456?"}]);
    let request = json!({"messages": ask, "tools": [lark, tools()[0]],
        "tool_choice": {"type": "custom", "custom": {"name": "sql"}}, "temperature": 0});
    let (status, body) = server.post(&request.to_string(), "application/json");
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "custom", "{body}");
    let input = call["custom"]["input"].as_str().unwrap();
    assert!(
        input.starts_with("SELECT ") && input.contains(" FROM trials WHERE id = NCT"),
        "{body}"
    );
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let text = ureq::post(&format!("{}/v1/chat/completions", server.base))
        .set("Content-Type", "application/json")
        .send_string(&streamed.to_string())
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        text.contains("\"type\":\"custom\"") && text.contains(input),
        "{text}"
    );
    assert!(
        !text.contains("\"content\":\"SELECT"),
        "the input was streamed as text: {text}"
    );
    // The same through the Responses API, whose custom tools are declared flat.
    let flat = json!({"type": "custom", "name": "sql", "format": {"type": "grammar", "syntax": "lark",
        "definition": lark["custom"]["format"]["grammar"]["definition"]}});
    let (status, body) = server.post_to(
        "/v1/responses",
        &json!({"input": ask, "tools": [flat],
        "tool_choice": {"type": "custom", "name": "sql"}, "temperature": 0})
        .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "custom_tool_call", "{body}");
    assert_eq!(body["output"][0]["input"], input, "{body}");
    // Among other tools, without being named, a Lark custom tool is refused by name.
    let (status, body) = server.post(
        &json!({"messages": question, "tools": [lark]}).to_string(),
        "application/json",
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["param"], "tools[0].custom.format.grammar.syntax",
        "{body}"
    );
}

#[test]
fn logprobs_describe_the_returned_tokens() {
    let _serial = serial();
    let server = Server::start(&["--parallel", "1"]);
    let question = json!([{"role": "user", "content": "Name a colour."}]);
    let (status, body) = server.post(
        &json!({"messages": question, "temperature": 0, "max_tokens": 8,
        "logprobs": true, "top_logprobs": 3})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    let content = choice["logprobs"]["content"].as_array().unwrap();
    assert_eq!(
        content.len() as u64,
        body["usage"]["completion_tokens"].as_u64().unwrap(),
        "{body}"
    );
    let text: String = content
        .iter()
        .map(|t| t["token"].as_str().unwrap())
        .collect();
    assert_eq!(
        text,
        choice["message"]["content"].as_str().unwrap(),
        "{body}"
    );
    for token in content {
        let logprob = token["logprob"].as_f64().unwrap();
        assert!(logprob <= 0.0, "{token}");
        let top = token["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3, "{token}");
        let tops: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(tops.windows(2).all(|w| w[0] >= w[1]), "{token}");
        // Greedy: the chosen token is the most likely one.
        assert!((tops[0] - logprob).abs() < 1e-4, "{token}");
        assert!(token["bytes"].is_array());
    }
    // Under a grammar, a forced token is certain: a choice constraint of one option forces
    // every token.
    let (status, body) = server.post(
        &json!({"messages": question, "temperature": 0,
        "logprobs": true, "guided_choice": ["dark blue"]})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    for token in body["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap()
    {
        assert_eq!(token["logprob"].as_f64(), Some(0.0), "{body}");
    }
    // Legacy completions take a count.
    let (status, body) = server.post_to(
        "/v1/completions",
        &json!({"prompt": "One, two,",
        "max_tokens": 4, "temperature": 0, "logprobs": 2})
        .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let logprobs = &body["choices"][0]["logprobs"];
    assert_eq!(logprobs["tokens"].as_array().unwrap().len(), 4, "{body}");
    assert_eq!(
        logprobs["top_logprobs"][0].as_object().unwrap().len(),
        2,
        "{body}"
    );
    // Refused by name: streamed log-probabilities, and alternatives without `logprobs`.
    let (status, body) = server.post(
        &json!({"messages": question, "logprobs": true, "stream": true}).to_string(),
        "application/json",
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "logprobs", "{body}");
    let (status, body) = server.post(
        &json!({"messages": question, "top_logprobs": 2}).to_string(),
        "application/json",
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["param"], "top_logprobs", "{body}");
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_arm", "description": "Reads the arms of one trial.",
        "parameters": {"type": "object", "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"}},
            "required": ["trial_id"], "additionalProperties": false}}}])
}

#[test]
fn raw_http_against_the_real_model() {
    let _serial = serial();
    let server = Server::start(&["--body-limit", "65536"]);
    let question =
        json!([{"role": "user", "content": "Which arms of trial NCT04123456 were terminated?"}]);
    // Required: a call that passed the gates.
    let (status, body) = server.post(&json!({"model": "SmolLM2-135M-Instruct", "messages": question, "tools": tools(), "tool_choice": "required", "temperature": 0}).to_string(), "application/json");
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
    // `auto` decides in two phases: the call stands when the request supports it, and a text
    // answer replaces it when the tool is not about the request or its arguments were
    // invented.
    let (status, body) = server.post(
        &json!({"messages": question, "tools": tools(), "tool_choice": "auto", "temperature": 0})
            .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls", "{body}");
    for unsupported in ["Say hello.", "Which arms of the trial were terminated?"] {
        let (status, body) = server.post(&json!({"messages": [{"role": "user", "content": unsupported}], "tools": tools(), "tool_choice": "auto", "temperature": 0, "max_tokens": 60}).to_string(), "application/json");
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        assert!(
            choice["message"].get("tool_calls").is_none(),
            "{unsupported}: {body}"
        );
        assert!(
            choice["message"]["content"].is_string(),
            "{unsupported}: {body}"
        );
    }
    // Cut by max_tokens: `length`, and no tool call is claimed.
    let (_, body) = server.post(&json!({"messages": question, "tools": tools(), "tool_choice": "required", "temperature": 0, "max_tokens": 6}).to_string(), "application/json");
    assert_eq!(body["choices"][0]["finish_reason"], "length", "{body}");
    assert!(
        body["choices"][0]["message"].get("tool_calls").is_none(),
        "{body}"
    );
    // A complete call is never lost because the model went on to a second one and was cut:
    // a `length` answer holds no complete call, and a cut step keeps the calls before it.
    let mut kept = 0;
    for max_tokens in [48, 64, 96] {
        let (status, body) = server.post(&json!({"messages": question, "tools": tools(), "tool_choice": "required", "temperature": 0, "max_tokens": max_tokens}).to_string(), "application/json");
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        match choice["finish_reason"].as_str() {
            Some("tool_calls") => {
                assert!(!choice["message"]["tool_calls"]
                    .as_array()
                    .unwrap()
                    .is_empty());
                kept += usize::from(body["usage"]["completion_tokens"] == max_tokens);
            }
            Some("length") => assert!(
                !choice["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("</tool_call>"),
                "a complete call was lost to the limit: {body}"
            ),
            _ => panic!("{body}"),
        }
    }
    println!("{kept} cut steps kept their complete calls");
    // Tool-call arguments sent back that are not a JSON object: 422, naming the message.
    for arguments in ["{trial_id: 1}", "[1]"] {
        let (status, body) = server.post(&json!({"messages": [
            {"role": "user", "content": "arms?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_arm", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"}], "tools": tools()}).to_string(), "application/json");
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["param"], "messages[1].tool_calls", "{body}");
    }
    // Malformed, invalid, unsupported, wrong type, oversized.
    for (payload, content_type, status, code) in [
        ("{\"messages\": ".to_owned(), "application/json", 400, "invalid_json"),
        (json!({"messages": "hi"}).to_string(), "application/json", 422, "invalid_value"),
        (json!({"messages": question, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"not": {"type": "string"}}}}}).to_string(), "application/json", 400, "unsupported_parameter"),
        (json!({"messages": question, "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "drop_table"}}}).to_string(), "application/json", 400, "unsupported_parameter"),
        (json!({"messages": question}).to_string(), "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        (json!({"messages": [{"role": "user", "content": "x".repeat(70_000)}]}).to_string(), "application/json", 413, "request_too_large"),
    ] {
        let (got, body) = server.post_raw(&payload, content_type);
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
        metrics.contains(
            "proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\",outcome=\"ok\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "proviso_requests_total{route=\"/v1/chat/completions\",status=\"413\",outcome=\"error\"}"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("proviso_mask_seconds_count"), "{metrics}");
}

fn chain(depth: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        defs.insert(
            format!("d{i}"),
            json!({"$ref": format!("#/$defs/d{}", i + 1)}),
        );
    }
    defs.insert(format!("d{depth}"), json!({"type": "string"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

fn with_schema(schema: &Value) -> String {
    json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    .to_string()
}

/// Regression: a `$ref` chain 700 deep overflowed a Tokio worker's stack and aborted the
/// process; `{"$ref": "#"}` and a two-schema cycle answered an unlogged 500.
#[test]
fn hostile_schemas_are_refused_while_another_request_completes() {
    let _serial = serial();
    let server = Server::start(&[]);
    let base = server.base.clone();
    let ordinary = std::thread::spawn(move || {
        let body = json!({"messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 48, "temperature": 0});
        ureq::post(&format!("{base}/v1/chat/completions"))
            .send_json(body)
            .map(|r| r.status())
            .unwrap()
    });
    for depth in [1_000, 10_000] {
        let (status, body) = server.post(&with_schema(&chain(depth)), "application/json");
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("limit of 64") && message.contains("/$defs/d63/$ref"),
            "{message}"
        );
    }
    let cycles = [
        json!({"$ref": "#"}),
        json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
    ];
    for schema in &cycles {
        let (status, body) = server.post(&with_schema(schema), "application/json");
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("cycle"),
            "{body}"
        );
    }
    // Recursion through a property is a tree, not a loop: it is served.
    let tree = json!({"type": "object", "properties": {"label": {"type": "string", "maxLength": 8},
        "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#"}}}, "required": ["label", "children"], "additionalProperties": false});
    let (status, body) = server.post(&with_schema(&tree), "application/json");
    assert_eq!(status, 200, "{body}");
    assert_eq!(ordinary.join().unwrap(), 200);
    let (status, _) = server.post(
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).to_string(),
        "application/json",
    );
    assert_eq!(status, 200);
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kib / 1024.0
}

/// Regression: repeating a rejected 100,000-value `enum` request moved RSS from 244 MB to
/// 613 MB, never released.
#[test]
fn memory_returns_to_its_baseline_after_rejected_large_requests() {
    let _serial = serial();
    let server = Server::start(&[]);
    let pid = server.child.id();
    let warm =
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).to_string();
    assert_eq!(server.post(&warm, "application/json").0, 200);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let baseline = rss_mib(pid);
    let values: Vec<String> = (0..100_000).map(|i| format!("value-{i}")).collect();
    let body = with_schema(&json!({"type": "string", "enum": values}));
    for _ in 0..50 {
        let (status, answer) = server.post(&body, "application/json");
        assert_eq!(status, 400, "{answer}");
    }
    let peak = rss_mib(pid);
    // The allocator hands freed pages back from a background thread within about a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let after = loop {
        let now = rss_mib(pid);
        if now <= baseline * 1.10 || std::time::Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    println!("RSS: baseline {baseline:.1} MiB, after 50 rejected requests {peak:.1} MiB, settled {after:.1} MiB");
    assert!(
        after <= baseline * 1.10,
        "RSS {after:.1} MiB vs baseline {baseline:.1} MiB"
    );
}

/// The folder `scripts/setup` installed Python packages into (`var` overrides `default`,
/// relative to the repository), after checking that `imports` import from it.
fn python_packages(var: &str, default: &str, imports: &str, what: &str) -> PathBuf {
    let pylib = std::env::var(var).map_or_else(|_| root().join(default), PathBuf::from);
    let probe = Command::new("python3")
        .args(["-c", &format!("import {imports}")])
        .env("PYTHONPATH", &pylib)
        // Importing litellm fetches a price list from the network unless told not to.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_OFFLINE_MODE", "true")
        .status()
        .unwrap();
    assert!(
        probe.success(),
        "{what} not installed in {}: run scripts/setup --tests",
        pylib.display()
    );
    pylib
}

/// Runs a Python client script against `server` and asserts it ends with `all ok`.
fn run_client_script(script: &str, pylib: &PathBuf, server: &Server) {
    let out = Command::new("python3")
        .arg(root().join("crates/proviso-cli/tests").join(script))
        .arg(&server.base)
        .env("PYTHONPATH", pylib)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_OFFLINE_MODE", "true")
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

/// llama-cpp-python's OpenAI-compatible server on the default model, stopped when dropped.
struct LlamaCppServer {
    child: Child,
    base: String,
}

impl LlamaCppServer {
    fn start() -> Self {
        let pylib = python_packages(
            "PROVISO_LLAMACPP_PY",
            "target/llamacpp-py",
            "llama_cpp.server.app",
            "llama-cpp-python's server is",
        );
        let model = Command::new(env!("CARGO_BIN_EXE_proviso"))
            .args(["model", "fetch"])
            .output()
            .unwrap();
        assert!(model.status.success(), "{model:?}");
        let model = String::from_utf8_lossy(&model.stdout).trim().to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "llama_cpp.server",
                "--model",
                &model,
                "--host",
                "127.0.0.1",
            ])
            .args([
                "--port",
                &port.to_string(),
                "--n_ctx",
                "2048",
                "--n_threads",
                "2",
            ])
            .args(["--n_threads_batch", "2"])
            .env("PYTHONPATH", &pylib)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let started = std::time::Instant::now();
        while ureq::get(&format!("{base}/v1/models")).call().is_err() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "llama-cpp-python's server did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        Self { child, base }
    }
}

impl Drop for LlamaCppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway's llama.cpp dialect against a real llama.cpp server (llama-cpp-python's,
/// built by `scripts/setup`): GBNF grammars for tool calls, schemas and choices travel in its
/// `grammar` field, and every answer that comes back has passed proviso's gates.
#[test]
fn the_gateway_speaks_to_a_real_llama_cpp_server() {
    let _serial = serial();
    let upstream = LlamaCppServer::start();
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "llamacpp"]);
    let question =
        json!([{"role": "user", "content": "Which arms of trial NCT04123456 were terminated?"}]);
    // A required tool call: written under the exported GBNF, read as hermes, gated.
    let (status, body) = gateway.post(
        &json!({"messages": question, "tools": tools(),
        "tool_choice": "required", "temperature": 0, "max_tokens": 80})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let arguments: Value = serde_json::from_str(
        choice["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let trial = arguments["trial_id"].as_str().unwrap();
    assert!(
        trial.len() == 11
            && trial.starts_with("NCT")
            && trial[3..].bytes().all(|b| b.is_ascii_digit()),
        "{body}"
    );
    // A response schema, as a GBNF grammar: the answer passes the schema's contract.
    let schema = json!({"type": "object", "properties": {"arm": {"type": "string", "enum": ["A", "B", "C"]},
        "terminated": {"type": "boolean"}}, "required": ["arm", "terminated"], "additionalProperties": false});
    let (status, body) = gateway.post(&json!({"messages": question, "temperature": 0, "max_tokens": 60,
        "response_format": {"type": "json_schema", "json_schema": {"name": "arm", "schema": schema, "strict": true}}}).to_string(), "application/json");
    assert_eq!(status, 200, "{body}");
    let answer: Value =
        serde_json::from_str(body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert!(
        ["A", "B", "C"].contains(&answer["arm"].as_str().unwrap()),
        "{body}"
    );
    assert!(answer["terminated"].is_boolean(), "{body}");
    // A choice of strings, as a grammar of alternatives.
    let (status, body) = gateway.post(
        &json!({"messages": question, "temperature": 0,
        "guided_choice": ["terminated", "completed"]})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(["terminated", "completed"].contains(&content), "{body}");
    // What llama.cpp cannot enforce is refused by name, before anything is sent.
    let (status, body) = gateway.post(
        &json!({"messages": question, "guided_regex": "[a-z]+"}).to_string(),
        "application/json",
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "guided_regex", "{body}");
}

/// instructor, pydantic-ai (chat and Responses models), langchain-openai (structured output
/// both ways, bound tools, the Responses API) and litellm, as their documentation uses them,
/// against the real model.
#[test]
fn client_libraries() {
    let _serial = serial();
    let pylib = python_packages(
        "PROVISO_PYCLIENTS",
        "target/pyclients",
        "instructor, pydantic_ai, langchain_openai, litellm",
        "the client libraries are",
    );
    let server = Server::start(&[]);
    run_client_script("client_libraries.py", &pylib, &server);
}

/// The agent loops of pydantic-ai (ToolOutput, NativeOutput, PromptedOutput, text),
/// langgraph's create_react_agent, openai-agents (Responses and Chat Completions models)
/// and plain openai-client loops, each with one tool whose result answers the question:
/// every loop ends with an answer, the tool called, no call repeated.
#[test]
fn agent_loops() {
    let _serial = serial();
    let pylib = python_packages(
        "PROVISO_PYAGENTS",
        "target/pyagents",
        "pydantic_ai, langgraph.prebuilt, agents, langchain_openai",
        "the agent frameworks are",
    );
    let server = Server::start(&[]);
    run_client_script("agent_loops.py", &pylib, &server);
}

#[test]
fn the_openai_python_client() {
    let _serial = serial();
    let pylib = python_packages(
        "PROVISO_PYLIB",
        "target/pylib",
        "openai",
        "the openai client is",
    );
    let server = Server::start(&[]);
    run_client_script("openai_client.py", &pylib, &server);
}

/// Server-executed MCP tools (`serve --mcp`) through the openai Python client: the
/// filesystem server (npm) and the time server (PyPI), installed by `scripts/setup --tests`.
/// The Responses API's `mcp` tool with and without approval, a declined approval, the time
/// server's schema-valid call, streamed MCP events, a write refused at the permission gate
/// with the file system untouched, and the chat extension; `/metrics` counts the calls.
#[test]
fn mcp_tools_through_the_openai_client() {
    let _serial = serial();
    let pylib = python_packages(
        "PROVISO_PYAGENTS",
        "target/pyagents",
        "openai",
        "the openai client is",
    );
    let filesystem = root()
        .join("target/mcp-npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let pymcp = root().join("target/pymcp");
    assert!(
        filesystem.exists() && pymcp.exists(),
        "the MCP servers are missing: run `scripts/setup --tests`"
    );
    let dir = std::env::temp_dir().join(format!("proviso-serve-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(
        dir.join("boiler.txt"),
        "Boiler maintenance log\nThe boiler in the east wing was serviced on 3 March 2026 by Calder Heating.\nThe next service is due in September 2026.\n",
    )
    .unwrap();
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "fs": {"command": "node", "args": [filesystem, dir]},
            "time": {"command": "python3", "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "env": {"PYTHONPATH": pymcp}}}})
        .to_string(),
    )
    .unwrap();
    // The configuration sits in the served directory: it must not be read as a document.
    std::fs::rename(
        &config,
        std::env::temp_dir().join(format!("proviso-serve-mcp-{}.json", std::process::id())),
    )
    .unwrap();
    let config =
        std::env::temp_dir().join(format!("proviso-serve-mcp-{}.json", std::process::id()));
    let server = Server::start(&["--parallel", "1", "--mcp", config.to_str().unwrap()]);
    let out = Command::new("python3")
        .arg(root().join("crates/proviso-cli/tests/mcp_server.py"))
        .arg(&server.base)
        .arg(&dir)
        .env("PYTHONPATH", &pylib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("all ok"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metrics = ureq::get(&format!("{}/metrics", server.base))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for needle in [
        "proviso_mcp_calls_total{server=\"fs\",tool=\"read_text_file\",outcome=\"ok\"}",
        "outcome=\"approval_requested\"",
        "outcome=\"not_approved\"",
        "outcome=\"rejected_permission\"",
        "proviso_mcp_calls_total{server=\"time\",tool=\"get_current_time\",outcome=\"ok\"}",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from\n{metrics}");
    }
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_file(&config).ok();
}

/// A fake OpenAI-compatible upstream on axum: every generation request's body is recorded
/// and answered with what `respond` makes of it (given whether it was a chat completion).
struct FakeUpstream {
    base: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl FakeUpstream {
    /// Answers with `behave`'s text, as a complete chat or text completion.
    fn start(behave: fn(&Value) -> String) -> Self {
        Self::serving(move |body, chat| {
            let text = behave(body);
            let choice = if chat {
                json!({"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}})
            } else {
                json!({"index": 0, "finish_reason": "stop", "text": text})
            };
            json!({"id": "x", "object": "chat.completion", "model": "fake",
                "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        })
    }

    /// Answers every generation request with `reply`, whatever it is.
    fn replying(reply: Value) -> Self {
        Self::serving(move |_, _| reply.clone())
    }

    fn serving(respond: impl Fn(&Value, bool) -> Value + Send + Sync + 'static) -> Self {
        use axum::routing::{get, post};
        let respond = std::sync::Arc::new(respond);
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = requests.clone();
        let answer = move |chat: bool| {
            let seen = seen.clone();
            let respond = respond.clone();
            move |axum::Json(body): axum::Json<Value>| async move {
                let reply = respond(&body, chat);
                seen.lock().unwrap().push(body);
                axum::Json(reply)
            }
        };
        let app = axum::Router::new()
            .route(
                "/v1/models",
                get(|| async {
                    axum::Json(
                        json!({"object": "list", "data": [{"id": "fake", "object": "model"}]}),
                    )
                }),
            )
            .route("/v1/chat/completions", post(answer(true)))
            .route("/v1/completions", post(answer(false)));
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    axum::serve(listener, app).await.unwrap();
                });
        });
        Self { base, requests }
    }

    /// Generation requests received so far.
    fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

/// As current vLLM (0.12 on) behaves: `structured_outputs` is honoured, the removed
/// `guided_*` fields are ignored, and an unconstrained request gets whatever the model says.
fn current_vllm(body: &Value) -> String {
    let outputs = &body["structured_outputs"];
    if let Some(first) = outputs["choice"].get(0).and_then(Value::as_str) {
        first.to_owned()
    } else if outputs["regex"].is_string() {
        "42".to_owned()
    } else {
        "maybe".to_owned()
    }
}

/// The gateway speaks vLLM's current dialect, and an upstream that does not honour the
/// constraint (here one that ignores every field) is caught by the gates.
#[test]
fn the_gateway_speaks_current_vllm_and_catches_an_upstream_that_ignores_it() {
    let vllm = FakeUpstream::start(current_vllm);
    let gateway = Server::start(&["--upstream", &vllm.base, "--upstream-kind", "vllm"]);
    let cases = [
        (json!({"guided_choice": ["yes", "no"]}), "yes"),
        (json!({"structured_outputs": {"regex": "[0-9]+"}}), "42"),
    ];
    for (constraint, expected) in &cases {
        let mut request = json!({"prompt": "Answer:", "max_tokens": 4});
        for (k, v) in constraint.as_object().unwrap() {
            request[k] = v.clone();
        }
        let (status, body) = gateway.post_to("/v1/completions", &request.to_string());
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["text"], *expected, "{constraint}");
        let sent = vllm.requests.lock().unwrap().last().cloned().unwrap();
        assert!(sent["structured_outputs"].is_object(), "{sent}");
        assert!(
            sent.as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("guided_")),
            "{sent}"
        );
    }
    let liar = FakeUpstream::start(|_| "maybe".to_owned());
    let gateway = Server::start(&["--upstream", &liar.base, "--upstream-kind", "vllm"]);
    for ((constraint, _), code) in cases.iter().zip(["not_a_choice", "pattern_mismatch"]) {
        let mut request = json!({"prompt": "Answer:", "max_tokens": 4});
        for (k, v) in constraint.as_object().unwrap() {
            request[k] = v.clone();
        }
        let (status, body) = gateway.post_to("/v1/completions", &request.to_string());
        assert_eq!(status, 502, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(code),
            "{body}"
        );
    }
}

/// Steering from the conversation applies through the gateway too: at the round limit the
/// upstream is told to answer (`tool_choice: none`) and the response says why; after one
/// round of results a (larger) upstream may still call; a request can turn steering off.
#[test]
fn the_gateway_steers_from_the_conversation() {
    let upstream = FakeUpstream::start(|_| "It is sunny and 21 degrees.".to_owned());
    let gateway = Server::start(&[
        "--upstream",
        &upstream.base,
        "--upstream-kind",
        "openai",
        "--max-tool-rounds",
        "2",
    ]);
    let round = |id: &str, city: &str| {
        vec![
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "get_weather", "arguments": json!({"city": city}).to_string()}}]}),
            json!({"role": "tool", "tool_call_id": id, "content": "Sunny, 21 C"}),
        ]
    };
    let mut one = vec![json!({"role": "user", "content": "Weather in Paris?"})];
    one.extend(round("call_a", "Paris"));
    let (status, body) = gateway.post_to(
        "/v1/chat/completions",
        &json!({"messages": one, "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})
        .to_string(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["proviso"]["steering"]["decision"], "call", "{body}");
    let sent = upstream.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sent["tool_choice"], "auto", "{sent}");
    let mut two = one.clone();
    two.extend(round("call_b", "Lyon"));
    let mut request = json!({
        "messages": two,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    });
    let (status, body) = gateway.post_to("/v1/chat/completions", &request.to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["proviso"]["steering"]["decision"], "answer", "{body}");
    assert_eq!(body["proviso"]["steering"]["cause"], "rounds", "{body}");
    let sent = upstream.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sent["tool_choice"], "none", "{sent}");
    request["steering"] = json!(false);
    let (status, body) = gateway.post_to("/v1/chat/completions", &request.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.get("proviso").is_none(), "{body}");
    let sent = upstream.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!(sent["tool_choice"], "auto", "{sent}");
}

/// As llama.cpp's server behaves: a request constrained by a GBNF `grammar` gets an object
/// of the schema; any other request gets prose.
fn llama_cpp_like(body: &Value) -> String {
    if body["grammar"]
        .as_str()
        .is_some_and(|g| g.contains("root ::="))
    {
        r#"{"answer": "yes"}"#.to_owned()
    } else {
        "Sure! Here is the answer: yes".to_owned()
    }
}

/// The llama.cpp dialect: a response schema goes upstream as GBNF written by llama.cpp's own
/// converter (injected into the gateway), and an upstream that ignores it is caught.
#[test]
fn the_gateway_speaks_llama_cpp_and_catches_an_upstream_that_ignores_it() {
    let request = json!({"messages": [{"role": "user", "content": "Yes or no?"}], "max_tokens": 16,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"], "additionalProperties": false}}}});
    let upstream = FakeUpstream::start(llama_cpp_like);
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "llamacpp"]);
    let (status, body) = gateway.post(&request.to_string(), "application/json");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        r#"{"answer": "yes"}"#
    );
    let sent = upstream.requests.lock().unwrap().last().cloned().unwrap();
    assert!(
        sent["grammar"].as_str().unwrap().contains("root ::="),
        "{sent}"
    );
    assert!(sent.get("response_format").is_none(), "{sent}");
    let liar = FakeUpstream::start(|_| "Sure! Here is the answer: yes".to_owned());
    let gateway = Server::start(&["--upstream", &liar.base, "--upstream-kind", "llamacpp"]);
    let (status, body) = gateway.post(&request.to_string(), "application/json");
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "output_rejected", "{body}");
    // Bounded retries: two attempts, then the error.
    assert_eq!(liar.count(), 2);
}

#[test]
fn the_gateway_never_trusts_its_upstream() {
    let bad_calls = [
        // An undeclared tool.
        json!({"name": "drop_table", "arguments": "{}"}),
        // Arguments that break the schema.
        json!({"name": "get_arm", "arguments": "{\"trial_id\": \"NCT1\"}"}),
        // Arguments that are not JSON.
        json!({"name": "get_arm", "arguments": "{trial_id: NCT04123456}"}),
    ];
    for function in bad_calls {
        let reply = json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
            "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": function}]}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
        let upstream = FakeUpstream::replying(reply);
        let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "openai"]);
        let (status, body) = gateway.post(
            &json!({"messages": [{"role": "user", "content": "arms?"}], "tools": tools(), "tool_choice": "required"}).to_string(),
            "application/json",
        );
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"]["code"], "output_rejected");
        // Bounded retries: two attempts, then the error.
        assert_eq!(upstream.count(), 2);
    }
    // No default stands in for what the transport gate judges: a reply without a stop
    // reason is `missing_stop_reason`, and one without content or calls is `missing_content`.
    for (reply, code) in [
        (
            json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "Arm A."}}]}),
            "missing_stop_reason",
        ),
        (
            json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
            "finish_reason": "stop", "message": {"role": "assistant"}}]}),
            "missing_content",
        ),
        (
            json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
            "finish_reason": "cancelled", "message": {"role": "assistant", "content": "Arm"}}]}),
            // One reading of stop reasons: a cancelled generation is `cancelled` whoever
            // reports it (it used to be unknown to the envelope reader only).
            "cancelled",
        ),
    ] {
        let upstream = FakeUpstream::replying(reply);
        let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "openai"]);
        let (status, body) = gateway.post(
            &json!({"messages": [{"role": "user", "content": "arms?"}]}).to_string(),
            "application/json",
        );
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"]["code"], "output_rejected", "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(code),
            "{code}: {body}"
        );
    }
    // Tool-call arguments a client sends back that are not a JSON object get the same 422
    // from the gateway as from the local backend (`raw_http_against_the_real_model`).
    let upstream = FakeUpstream::replying(json!({}));
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "llamacpp"]);
    for arguments in ["{trial_id: 1}", "[1]"] {
        let (status, body) = gateway.post(&json!({"messages": [
            {"role": "user", "content": "arms?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_arm", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"}], "tools": tools()}).to_string(), "application/json");
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["error"]["param"], "messages[1].tool_calls", "{body}");
    }
    assert_eq!(upstream.count(), 0);
    // A valid call passes through, gated.
    let reply = json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
        "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_arm", "arguments": "{\"trial_id\": \"NCT04123456\"}"}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
    let upstream = FakeUpstream::replying(reply);
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "openai"]);
    let (status, body) = gateway.post(
        &json!({"messages": [{"role": "user", "content": "arms?"}], "tools": tools(), "tool_choice": "required"}).to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_arm"
    );
}

#[test]
fn the_openai_client_through_a_gateway_to_a_proviso_server() {
    let _serial = serial();
    let pylib = python_packages(
        "PROVISO_PYLIB",
        "target/pylib",
        "openai",
        "the openai client is",
    );
    let upstream = Server::start(&[]);
    // proviso's own server takes `structured_outputs`, as current vLLM does.
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "vllm"]);
    run_client_script("openai_client.py", &pylib, &gateway);
}

/// Issue 21, items 1, 3 and 4: every grammar path has the limits `response_format` has,
/// checked before compiling. A `%json` block holding a 20,000-link `$ref` chain overflowed the
/// compile thread's stack and aborted the process through `guided_grammar`, a chat custom
/// Lark tool and a Responses custom Lark tool; `%json {"$ref": "#"}` and 1,000 chained rules
/// answered 500 (and 20,000 chained rules overflow the stack too); 100,000 choices held both compile threads for half a minute, during which
/// plain requests got `compile_timeout` too.
#[test]
fn hostile_grammars_are_refused_on_every_path_and_never_stall_plain_requests() {
    let _serial = serial();
    let server = Server::start(&["--parallel", "1"]);
    let embedded = |schema: &Value| format!("start: %json {schema}\n");
    let chained_rules = {
        let mut lark = String::from("start: r0\n");
        for i in 0..20_000 {
            lark.push_str(&format!("r{i}: r{}\n", i + 1));
        }
        lark.push_str("r20000: \"a\"\n");
        lark
    };
    let grammars = [
        // 800 KB: refused by its size before anything reads it.
        (embedded(&chain(20_000)), "limit of"),
        (embedded(&chain(10_000)), "limit of 64"),
        (embedded(&json!({"$ref": "#"})), "cycle"),
        // 20,000 chained rules overflowed a 64 MiB compile stack.
        (chained_rules, "rules and terminals"),
    ];
    let hi = json!([{"role": "user", "content": "hi"}]);
    for (lark, expected) in &grammars {
        let custom = json!({"type": "custom", "custom": {"name": "g", "format": {"type": "grammar",
            "grammar": {"syntax": "lark", "definition": lark}}}});
        let flat = json!({"type": "custom", "name": "g", "format": {"type": "grammar",
            "syntax": "lark", "definition": lark}});
        let requests = [
            (
                "/v1/chat/completions",
                json!({"messages": hi, "max_tokens": 4, "guided_grammar": lark}),
            ),
            (
                "/v1/chat/completions",
                json!({"messages": hi, "max_tokens": 4, "tools": [custom],
                "tool_choice": {"type": "custom", "custom": {"name": "g"}}}),
            ),
            (
                "/v1/responses",
                json!({"input": "hi", "max_output_tokens": 4, "tools": [flat],
                "tool_choice": {"type": "custom", "name": "g"}}),
            ),
        ];
        for (route, request) in &requests {
            let (status, body) = server.post_to(route, &request.to_string());
            assert_eq!(status, 400, "{route}: {body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains(expected), "{route}: {message}");
        }
    }
    // A choice list past the limit is refused at once, naming the limit, and a plain
    // request meanwhile is answered.
    let many: Vec<String> = (0..100_000).map(|i| format!("option {i}")).collect();
    let started = std::time::Instant::now();
    let (status, body) = server.post(
        &json!({"messages": hi, "max_tokens": 4, "guided_choice": many}).to_string(),
        "application/json",
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the choice list has 100000"),
        "{body}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let (status, body) = server.post(
        &json!({"messages": hi, "max_tokens": 2}).to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    // The server is still alive and serving after all of it.
    assert!(server.child.id() > 0);
    let (status, _) = server.post(
        &json!({"messages": hi, "max_tokens": 2, "guided_choice": ["yes", "no"]}).to_string(),
        "application/json",
    );
    assert_eq!(status, 200);
}

/// Issue 21, item 5: control-token text in any message's content is text, on every route
/// and for every role: `<|im_start|>` written by a user, a tool result or a
/// `function_call_output` is several prompt tokens, never the one control token.
#[test]
fn control_token_text_in_content_never_becomes_a_control_token() {
    let _serial = serial();
    let server = Server::start(&["--parallel", "1"]);
    let prompt_tokens = |route: &str, request: &Value| {
        let (status, body) = server.post_to(route, &request.to_string());
        assert_eq!(status, 200, "{route}: {body}");
        let usage = &body["usage"];
        usage["prompt_tokens"]
            .as_u64()
            .or_else(|| usage["input_tokens"].as_u64())
            .unwrap()
    };
    let call = json!({"id": "call_x", "type": "function", "function": {"name": "lookup", "arguments": "{}"}});
    let conversation = |content: &str| {
        [
            json!([{"role": "system", "content": content}, {"role": "user", "content": "hi"}]),
            json!([{"role": "user", "content": content}]),
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}, {"role": "user", "content": "ok"}]),
            json!([{"role": "user", "content": "look it up"}, {"role": "assistant", "content": null, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_x", "content": content}]),
        ]
    };
    // `<|im_start|>` is one control token when parsed, and several as text: appended to a
    // message, it adds at least three prompt tokens unless it became the control token.
    let marked = "a <|im_start|>";
    for (with, without) in conversation(marked).iter().zip(conversation("a").iter()) {
        let chat =
            |messages: &Value| json!({"messages": messages, "max_tokens": 1, "temperature": 0});
        let a = prompt_tokens("/v1/chat/completions", &chat(with));
        let b = prompt_tokens("/v1/chat/completions", &chat(without));
        assert!(
            a >= b + 3,
            "a control token was parsed from content: {with}: {a} vs {b}"
        );
    }
    // The Responses API: a user message and a function_call_output.
    let items = |content: &str| {
        [
            json!([{"role": "user", "content": content}]),
            json!([{"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": content}]),
        ]
    };
    for (with, without) in items(marked).iter().zip(items("a").iter()) {
        let a = prompt_tokens(
            "/v1/responses",
            &json!({"input": with, "max_output_tokens": 1}),
        );
        let b = prompt_tokens(
            "/v1/responses",
            &json!({"input": without, "max_output_tokens": 1}),
        );
        assert!(
            a >= b + 3,
            "a control token was parsed from content: {with}: {a} vs {b}"
        );
    }
    // Legacy completions: the prompt is text, whole.
    let a = prompt_tokens(
        "/v1/completions",
        &json!({"prompt": marked, "max_tokens": 1}),
    );
    let b = prompt_tokens("/v1/completions", &json!({"prompt": "a", "max_tokens": 1}));
    assert!(
        a >= b + 3,
        "a control token was parsed from a completions prompt: {a} vs {b}"
    );
}

/// Issue 21, item 2 and the smaller items: the Responses store is bounded and shares a
/// chain's turns; identifiers are size-limited on the way in; errors name the Responses
/// parameter; a tool message must answer a call; `stream_options.include_usage` is a
/// boolean.
#[test]
fn the_responses_store_is_bounded_and_inputs_are_checked() {
    let _serial = serial();
    let server = Server::start(&["--parallel", "1", "--responses-bytes", "8000"]);
    let pid = server.child.id();
    let huge_id = "c".repeat(1_500_000);
    let (status, body) = server.post_to(
        "/v1/responses",
        &json!({"input": [{"type": "function_call", "call_id": huge_id, "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"}], "max_output_tokens": 2})
        .to_string(),
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["param"], "input[0].call_id", "{body}");
    let (status, body) = server.post_to(
        "/v1/responses",
        &json!({"input": "hi", "max_output_tokens": -1}).to_string(),
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["param"], "max_output_tokens", "{body}");
    // Chained requests with large inputs: RSS stays bounded, and once a chain alone is over
    // the byte limit it is refused by name rather than stored.
    let filler = "Lighthouses guide ships. ".repeat(40);
    let mut previous: Option<String> = None;
    let before = rss_mib(pid);
    let mut refused = false;
    for _ in 0..40 {
        let mut request = json!({"input": [{"role": "system", "content": filler}, {"role": "user", "content": "hi"}],
            "max_output_tokens": 1, "truncation": "disabled"});
        if let Some(id) = &previous {
            request["previous_response_id"] = json!(id);
        }
        let (status, body) = server.post_to("/v1/responses", &request.to_string());
        if status == 400 && body["error"]["param"] == "previous_response_id" {
            refused = true;
            break;
        }
        assert_eq!(status, 200, "{body}");
        previous = body["id"].as_str().map(str::to_owned);
    }
    let after = rss_mib(pid);
    println!("Responses store: RSS {before:.1} -> {after:.1} MiB, chain refused: {refused}");
    assert!(refused, "a chain over the store's byte limit was accepted");
    assert!(after < before + 200.0, "{before} -> {after}");
    // A tool message must answer a call made earlier.
    let (status, body) = server.post(
        &json!({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "1"}]})
            .to_string(),
        "application/json",
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["param"], "messages[1].tool_call_id", "{body}");
    let (status, body) = server.post(
        &json!({"messages": [{"role": "user", "content": "hi"}], "stream": true,
            "stream_options": {"include_usage": "x"}})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"]["param"], "stream_options.include_usage",
        "{body}"
    );
    // A malformed `pattern` is malformed data wherever the schema is: 422 in a response
    // format as in a tool's parameters.
    let bad = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}});
    let (status, body) = server.post(&with_schema(&bad), "application/json");
    assert_eq!(status, 422, "{body}");
    let (status, body) = server.post(
        &json!({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
            "function": {"name": "f", "parameters": bad}}]})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 422, "{body}");
}

/// A scripted upstream that misbehaves at the transport level, for the gateway's fault
/// mapping: each connection gets `reply` (raw bytes), then the connection is closed (or left
/// open and silent, or fed without end).
struct RawUpstream {
    base: String,
}

#[derive(Clone, Copy)]
enum Misbehave {
    Reply(&'static str),
    Close,
    Silence,
    Endless,
}

impl RawUpstream {
    fn start(how: Misbehave) -> Self {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                std::thread::spawn(move || {
                    // Read the request head (and whatever body came with it).
                    let mut buf = [0u8; 65536];
                    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(300)));
                    let _ = stream.read(&mut buf);
                    match how {
                        Misbehave::Reply(text) => {
                            let _ = stream.write_all(text.as_bytes());
                        }
                        Misbehave::Close => {}
                        Misbehave::Silence => {
                            std::thread::sleep(std::time::Duration::from_secs(30))
                        }
                        Misbehave::Endless => {
                            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"x\": \"");
                            let chunk = vec![b'a'; 1 << 20];
                            for _ in 0..2_000 {
                                if stream.write_all(&chunk).is_err() {
                                    break;
                                }
                            }
                        }
                    }
                });
            }
        });
        Self { base }
    }
}

/// Issue 21, item 8: an upstream that fails is a 502, 503 or 504, never a 500; `Retry-After`
/// is forwarded; an endless body is cut at the cap.
#[test]
fn upstream_failures_map_to_502_503_and_504() {
    let request =
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).to_string();
    let cases = [
        (Misbehave::Reply("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 15\r\n\r\n<html>hi</html>"), 502, None),
        (Misbehave::Reply("HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\noops"), 502, None),
        (Misbehave::Reply("HTTP/1.1 503 Service Unavailable\r\nretry-after: 7\r\ncontent-length: 4\r\n\r\nbusy"), 503, Some("7")),
        (Misbehave::Reply("HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 4\r\n\r\nslow"), 503, Some("3")),
        (Misbehave::Close, 502, None),
        (Misbehave::Endless, 502, None),
        (Misbehave::Silence, 504, None),
    ];
    for (how, expected, retry_after) in cases {
        let upstream = RawUpstream::start(how);
        let gateway = Server::start(&[
            "--upstream",
            &upstream.base,
            "--upstream-kind",
            "openai",
            "--upstream-model",
            "fake",
            "--timeout",
            "3",
        ]);
        let started = std::time::Instant::now();
        let response = ureq::post(&format!("{}/v1/chat/completions", gateway.base))
            .set("Content-Type", "application/json")
            .send_string(&request);
        let (status, header, body) = match response {
            Ok(r) => (r.status(), None, r.into_string().unwrap()),
            Err(ureq::Error::Status(code, r)) => (
                code,
                r.header("Retry-After").map(str::to_owned),
                r.into_string().unwrap(),
            ),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(status, expected, "{body}");
        assert_eq!(header.as_deref(), retry_after, "{body}");
        assert!(!body.contains("oops") && !body.contains("<html>"), "{body}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}

/// Issue 21, items 6 and 7: the gateway holds an upstream's output to the request's
/// `tool_choice` and `parallel_tool_calls`, and re-checks Lark-constrained output with
/// llguidance, as the local backend's grammar would have enforced it.
#[test]
fn the_gateway_enforces_tool_choice_and_lark_grammars() {
    let call = |name: &str| json!({"id": format!("call_{name}"), "type": "function", "function": {"name": name, "arguments": "{\"trial_id\": \"NCT04123456\"}"}});
    let reply = |message: Value| {
        json!({"id": "x", "object": "chat.completion", "model": "fake", "choices": [{"index": 0,
        "finish_reason": if message["tool_calls"].is_array() { "tool_calls" } else { "stop" }, "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    };
    let two_tools = json!([tools()[0], {"type": "function", "function": {"name": "get_site",
        "parameters": {"type": "object", "properties": {"trial_id": {"type": "string"}}, "required": ["trial_id"]}}}]);
    let named = |name: &str| json!({"type": "function", "function": {"name": name}});
    let cases = [
        // Another declared tool under a named choice.
        (
            reply(json!({"role": "assistant", "content": null, "tool_calls": [call("get_site")]})),
            named("get_arm"),
            true,
            "tool_choice_mismatch",
        ),
        // Text under `required`, and under a named choice.
        (
            reply(json!({"role": "assistant", "content": "Arm A."})),
            json!("required"),
            true,
            "missing_tool_call",
        ),
        (
            reply(json!({"role": "assistant", "content": "Arm A."})),
            named("get_arm"),
            true,
            "missing_tool_call",
        ),
        // Two calls under `parallel_tool_calls: false`.
        (
            reply(
                json!({"role": "assistant", "content": null, "tool_calls": [call("get_arm"), call("get_site")]}),
            ),
            json!("required"),
            false,
            "too_many_calls_in_step",
        ),
    ];
    for (answer, choice, parallel, code) in cases {
        let upstream = FakeUpstream::replying(answer);
        let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "openai"]);
        let (status, body) = gateway.post(
            &json!({"messages": [{"role": "user", "content": "arms?"}], "tools": two_tools,
                "tool_choice": choice, "parallel_tool_calls": parallel})
            .to_string(),
            "application/json",
        );
        assert_eq!(status, 502, "{code}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(code),
            "{code}: {body}"
        );
    }
    // What the choice allows passes.
    let upstream = FakeUpstream::replying(reply(
        json!({"role": "assistant", "content": null, "tool_calls": [call("get_arm")]}),
    ));
    let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "openai"]);
    let (status, body) = gateway.post(
        &json!({"messages": [{"role": "user", "content": "arms?"}], "tools": two_tools,
            "tool_choice": named("get_arm"), "parallel_tool_calls": false})
        .to_string(),
        "application/json",
    );
    assert_eq!(status, 200, "{body}");
    // A vLLM upstream that ignores a custom tool's Lark grammar is caught.
    let sql = json!({"type": "custom", "custom": {"name": "sql", "format": {"type": "grammar", "grammar": {"syntax": "lark",
        "definition": "start: \"SELECT \" COL \" FROM t\"\nCOL: /[a-z]+/"}}}});
    for (text, status_expected) in [("DROP TABLE users; --", 502), ("SELECT name FROM t", 200)] {
        let upstream = FakeUpstream::start(if text.starts_with("DROP") {
            |_: &Value| "DROP TABLE users; --".to_owned()
        } else {
            |_: &Value| "SELECT name FROM t".to_owned()
        });
        let gateway = Server::start(&["--upstream", &upstream.base, "--upstream-kind", "vllm"]);
        let (status, body) = gateway.post(
            &json!({"messages": [{"role": "user", "content": "names?"}], "tools": [sql],
                "tool_choice": {"type": "custom", "custom": {"name": "sql"}}})
            .to_string(),
            "application/json",
        );
        assert_eq!(status, status_expected, "{text}: {body}");
        if status == 502 {
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("grammar_mismatch"),
                "{body}"
            );
        } else {
            assert_eq!(
                body["choices"][0]["message"]["tool_calls"][0]["custom"]["input"], text,
                "{body}"
            );
        }
        let (status, _) = gateway.post(
            &json!({"messages": [{"role": "user", "content": "names?"}],
                "guided_grammar": "start: \"SELECT \" COL \" FROM t\"\nCOL: /[a-z]+/"})
            .to_string(),
            "application/json",
        );
        assert_eq!(status, status_expected, "{text}");
    }
}
