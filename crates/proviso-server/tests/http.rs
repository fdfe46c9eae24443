//! The HTTP layer over a scripted backend: status codes and error bodies, the wire format of
//! responses and streams, admission and overflow, cancellation when a client disconnects,
//! concurrent requests with their own state, and graceful shutdown. No model is loaded; the
//! local model is exercised end to end by the CLI's server tests.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proviso_server::ServerConfig;
use serde_json::{json, Value};

mod support;

use support::{Echo, Server};

fn chat(content: &str) -> Value {
    json!({"model": "echo", "messages": [{"role": "user", "content": content}]})
}

fn sse_events(server: &Server, body: &Value) -> Vec<String> {
    let response = ureq::post(&server.url("/v1/chat/completions"))
        .send_json(body.clone())
        .unwrap();
    assert_eq!(response.content_type(), "text/event-stream");
    let reader = BufReader::new(response.into_reader());
    reader
        .lines()
        .map(Result::unwrap)
        .filter_map(|l| l.strip_prefix("data: ").map(str::to_owned))
        .collect()
}

#[test]
fn routes_and_wire_format() {
    let server = Server::start(Echo::default(), ServerConfig::default());
    let health: Value = ureq::get(&server.url("/health"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(health["status"], "ok");
    let models: Value = ureq::get(&server.url("/v1/models"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(models["data"][0]["id"], "echo");
    let one: Value = ureq::get(&server.url("/v1/models/echo"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(
        one,
        json!({"id": "echo", "object": "model", "created": 0, "owned_by": "proviso"})
    );
    let (status, body) = server.post("/v1/chat/completions", &chat("hello there"));
    assert_eq!(status, 200);
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "hello there");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"]["total_tokens"],
        body["usage"]["prompt_tokens"].as_u64().unwrap()
            + body["usage"]["completion_tokens"].as_u64().unwrap()
    );
    let (_, body) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "a b c d"}], "max_tokens": 2}),
    );
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    let (_, body) = server.post("/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "call it"}],
        "tools": [{"type": "function", "function": {"name": "get_arm", "parameters": {"type": "object"}}}]}));
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["choices"][0]["message"]["content"], Value::Null);
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_arm"
    );
    // A clarification is text to a client that reads `content`, and says what it is on the
    // choice; an answer carries no such field.
    let (_, body) = server.post("/v1/chat/completions", &chat("ask me"));
    assert_eq!(body["choices"][0]["message"]["content"], "Which trial?");
    assert_eq!(body["choices"][0]["proviso"]["reply"], "clarification");
    let (_, body) = server.post("/v1/chat/completions", &chat("hello there"));
    assert!(body["choices"][0].get("proviso").is_none());
    let (_, body) = server.post(
        "/v1/completions",
        &json!({"model": "echo", "prompt": "one two", "n": 2}),
    );
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["choices"].as_array().unwrap().len(), 2);
    assert_eq!(body["choices"][1]["text"], "one two");
    let metrics = ureq::get(&server.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    for name in [
        "proviso_requests_total",
        "proviso_tokens_total",
        "proviso_time_to_first_token_seconds",
        "proviso_token_latency_seconds",
        "proviso_mask_seconds",
        "proviso_gate_rejections_total",
        "proviso_parse_failures_total",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    assert!(
        metrics.contains("route=\"/v1/chat/completions\""),
        "{metrics}"
    );
    server.stop();
}

#[test]
fn status_codes_and_error_bodies() {
    let server = Server::start(Echo::default(), ServerConfig::default().body_limit(4096));
    let cases: Vec<(&str, &str, String, u16, &str)> = vec![
        ("/v1/chat/completions", "application/json", "{\"messages\": [".into(), 400, "invalid_json"),
        ("/v1/chat/completions", "text/plain", chat("x").to_string(), 415, "unsupported_media_type"),
        ("/v1/chat/completions", "application/json", json!({"messages": []}).to_string(), 422, "invalid_value"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "temperature": 7}).to_string(), 422, "invalid_value"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "bogus": 1}).to_string(), 422, "invalid_value"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "stream": true}).to_string(), 400, "unsupported_parameter"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}).to_string(), 422, "invalid_value"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}).to_string(), 422, "invalid_value"),
        // A tool call sent back without `arguments` is not taken as `{}`.
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "1"}]}).to_string(), 422, "invalid_value"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"not": {}}}}}).to_string(), 400, "unsupported_parameter"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}).to_string(), 400, "unsupported_parameter"),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x".repeat(5000)}]}).to_string(), 413, "request_too_large"),
        ("/v1/nothing", "application/json", "{}".into(), 404, "not_found"),
    ];
    for (path, content_type, body, status, code) in cases {
        let (got, error) = server.post_raw(path, content_type, &body);
        assert_eq!(got, status, "{body:.80}: {error}");
        assert_eq!(error["error"]["code"], code, "{error}");
        assert!(error["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        assert!(error["error"].get("type").is_some() && error["error"].get("param").is_some());
    }
    let (_, error) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "x"}], "temperature": 7}),
    );
    assert_eq!(error["error"]["param"], "temperature");
    server.stop();
}

/// The body with what changes from run to run (ids, creation times) replaced by
/// placeholders, so that a snapshot holds the wire format and nothing else.
fn stable(mut body: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match key.as_str() {
                        "id" if v.as_str().is_some_and(|s| s != "echo") => *v = json!("[id]"),
                        "created" | "created_at" => *v = json!("[time]"),
                        _ => walk(v),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut body);
    body
}

/// The HTTP responses users and client libraries read, snapshotted whole: successes of each
/// route, and one error body per status code. A change to any field shows in review.
#[test]
fn response_bodies_match_their_snapshots() {
    let server = Server::start(Echo::default(), ServerConfig::default().body_limit(4096));
    let mut bodies = Vec::new();
    let requests = [
        ("/v1/chat/completions", "application/json", chat("hello there").to_string()),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "a b c d"}], "max_tokens": 2}).to_string()),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "call it"}],
            "tools": [{"type": "function", "function": {"name": "get_arm", "parameters": {"type": "object"}}}]}).to_string()),
        ("/v1/completions", "application/json", json!({"model": "echo", "prompt": "one two", "n": 2}).to_string()),
        ("/v1/chat/completions", "application/json", "{\"messages\": [".to_owned()),
        ("/v1/chat/completions", "text/plain", chat("x").to_string()),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "temperature": 7}).to_string()),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "stream": true}).to_string()),
        ("/v1/chat/completions", "application/json", json!({"messages": [{"role": "user", "content": "x".repeat(5000)}]}).to_string()),
        ("/v1/nothing", "application/json", "{}".to_owned()),
    ];
    for (path, content_type, body) in requests {
        let (status, response) = server.post_raw(path, content_type, &body);
        bodies.push(json!({"request": format!("POST {path} ({content_type}) {body:.60}"), "status": status, "body": stable(response)}));
    }
    for path in ["/v1/models", "/v1/models/echo", "/v1/models/other"] {
        let (status, response) = match ureq::get(&server.url(path)).call() {
            Ok(r) => (r.status(), r.into_json::<Value>().unwrap()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_json::<Value>().unwrap()),
            Err(e) => panic!("{e}"),
        };
        bodies.push(
            json!({"request": format!("GET {path}"), "status": status, "body": stable(response)}),
        );
    }
    // A string snapshot: serde_json's exact numbers (`arbitrary_precision`) do not pass
    // through insta's own serializer.
    insta::assert_snapshot!(
        "response_bodies",
        serde_json::to_string_pretty(&bodies).unwrap()
    );
    server.stop();
}

#[test]
fn streams_content_and_tool_call_deltas_then_done() {
    let server = Server::start(Echo::default(), ServerConfig::default());
    let events = sse_events(
        &server,
        &json!({"messages": [{"role": "user", "content": "a b c"}], "stream": true, "stream_options": {"include_usage": true}}),
    );
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "a b c");
    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, vec![&json!("stop")]);
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 3);
    let events = sse_events(
        &server,
        &json!({"messages": [{"role": "user", "content": "call"}], "stream": true,
        "tools": [{"type": "function", "function": {"name": "get_arm", "parameters": {"type": "object"}}}]}),
    );
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(
        chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "get_arm"
    );
    assert_eq!(
        chunks[0]["choices"][0]["delta"]["tool_calls"][0]["id"],
        "call_0"
    );
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap()["trial_id"],
        "NCT04123456"
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    server.stop();
}

#[test]
fn overflow_gets_503_with_retry_after_and_concurrent_requests_keep_their_state() {
    let backend = Echo {
        delay: Duration::from_millis(400),
        ..Echo::default()
    };
    let server = Server::start(backend.clone(), ServerConfig::default().workers(1).queue(1));
    let url = server.url("/v1/chat/completions");
    // All six fire at once: one runs, one waits, the rest must be turned away.
    let barrier = Arc::new(std::sync::Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let url = url.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let body = chat(&format!("request {i} alpha beta"));
                match ureq::post(&url).send_json(body) {
                    Ok(r) => (200, r.into_json::<Value>().unwrap(), None),
                    Err(ureq::Error::Status(code, r)) => {
                        let retry = r.header("Retry-After").map(str::to_owned);
                        (code, r.into_json::<Value>().unwrap(), retry)
                    }
                    Err(e) => panic!("{e}"),
                }
            })
        })
        .collect();
    let results: Vec<(u16, Value, Option<String>)> =
        handles.into_iter().map(|h| h.join().unwrap()).collect();
    let ok: Vec<_> = results.iter().filter(|r| r.0 == 200).collect();
    let busy: Vec<_> = results.iter().filter(|r| r.0 == 503).collect();
    assert_eq!(ok.len() + busy.len(), 6, "{results:?}");
    assert!(
        !busy.is_empty(),
        "six requests on one worker and a queue of one must overflow"
    );
    // One runs; whether the queued one got its slot before the worker took the first job
    // depends on timing, so at least one is served.
    assert!(!ok.is_empty());
    for (_, body, retry) in &busy {
        assert_eq!(retry.as_deref(), Some("1"));
        assert_eq!(body["error"]["code"], "overloaded");
    }
    // Each answer is its own request's text, whatever the interleaving.
    for (_, body, _) in &ok {
        let text = body["choices"][0]["message"]["content"].as_str().unwrap();
        assert!(
            text.starts_with("request ") && text.ends_with(" alpha beta"),
            "{text}"
        );
    }
    server.stop();
}

#[test]
fn a_client_that_disconnects_cancels_its_generation() {
    let backend = Echo {
        delay: Duration::from_millis(100),
        ..Echo::default()
    };
    let server = Server::start(backend.clone(), ServerConfig::default());
    let words = "w ".repeat(100);
    let body =
        json!({"messages": [{"role": "user", "content": words}], "stream": true}).to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(stream, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut buffer = [0_u8; 2048];
    let read = stream.read(&mut buffer).unwrap();
    assert!(String::from_utf8_lossy(&buffer[..read]).contains("200 OK"));
    // Disconnect once the generation is under way (a job cancelled while still queued never
    // reaches the backend at all).
    let waiting = Instant::now();
    while backend.seen.lock().unwrap().is_empty() {
        assert!(
            waiting.elapsed() < Duration::from_secs(5),
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(stream);
    let started = Instant::now();
    while backend.cancelled.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the generation was not cancelled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        backend.finished.load(Ordering::SeqCst),
        0,
        "100 words at 100 ms would take 10 s"
    );
    server.stop();
}

#[test]
fn the_per_request_timeout_answers_504() {
    let backend = Echo {
        delay: Duration::from_millis(200),
        ..Echo::default()
    };
    let server = Server::start(
        backend,
        ServerConfig::default().request_timeout(Duration::from_millis(500)),
    );
    let (status, body) = server.post("/v1/chat/completions", &chat(&"w ".repeat(50)));
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "timeout");
    server.stop();
}

#[test]
fn graceful_shutdown_finishes_requests_in_flight() {
    let backend = Echo {
        delay: Duration::from_millis(100),
        ..Echo::default()
    };
    let server = Server::start(backend.clone(), ServerConfig::default());
    let url = server.url("/v1/chat/completions");
    let request = std::thread::spawn(move || {
        ureq::post(&url)
            .send_json(chat("one two three four five"))
            .unwrap()
            .into_json::<Value>()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(150));
    let stopped = Instant::now();
    server.stop();
    let body = request.join().unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "one two three four five"
    );
    assert!(
        stopped.elapsed() >= Duration::from_millis(200),
        "shutdown did not wait for the request"
    );
    assert_eq!(backend.finished.load(Ordering::SeqCst), 1);
}

/// A model name the server does not serve is a 404 `model_not_found`, on `/v1/models/{id}`
/// and as a request's `model`; aliases are listed and served; a server started to accept any
/// name does so.
#[test]
fn model_names_are_checked_and_aliases_served() {
    let server = Server::start(
        Echo::default(),
        ServerConfig::default().model_aliases(vec!["echo-latest".into(), "org/echo".into()]),
    );
    let models: Value = ureq::get(&server.url("/v1/models"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["echo", "echo-latest", "org/echo"]);
    for name in ["echo-latest", "org/echo"] {
        let status = ureq::get(&server.url(&format!("/v1/models/{name}")))
            .call()
            .unwrap()
            .status();
        assert_eq!(status, 200, "{name}");
        let mut body = chat("hi");
        body["model"] = json!(name);
        assert_eq!(server.post("/v1/chat/completions", &body).0, 200, "{name}");
    }
    let missing = ureq::get(&server.url("/v1/models/gpt-4o")).call();
    let Err(ureq::Error::Status(404, response)) = missing else {
        panic!("an unknown model is a 404: {missing:?}");
    };
    let body: Value = response.into_json().unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    for route in ["/v1/chat/completions", "/v1/completions"] {
        let (status, body) = server.post(
            route,
            &json!({"model": "gpt-4o", "prompt": "x", "messages": [{"role": "user", "content": "x"}]}),
        );
        assert_eq!(status, 404, "{route}");
        assert_eq!(body["error"]["code"], "model_not_found");
        assert_eq!(body["error"]["param"], "model");
    }
    drop(server);
    let any = Server::start(Echo::default(), ServerConfig::default().any_model(true));
    let mut body = chat("hi");
    body["model"] = json!("gpt-4o");
    assert_eq!(any.post("/v1/chat/completions", &body).0, 200);
}

/// The Responses API over the same pipeline: a text answer and a function call as output
/// items, `previous_response_id` continuing a stored conversation, the stream's events in
/// order, and what cannot be honoured refused by name.
#[test]
fn the_responses_api_runs_over_the_same_pipeline() {
    let server = Server::start(Echo::default(), ServerConfig::default());
    let (status, body) = server.post(
        "/v1/responses",
        &json!({"model": "echo", "instructions": "Be brief.", "input": "hello there"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["type"], "message");
    assert_eq!(body["output"][0]["content"][0]["text"], "hello there");
    assert!(body["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let first = body["id"].as_str().unwrap().to_owned();
    assert!(first.starts_with("resp"), "{first}");
    let (status, body) = server.post(
        "/v1/responses",
        &json!({"input": "call it", "previous_response_id": first,
            "tools": [{"type": "function", "name": "get_arm", "parameters": {"type": "object"}}],
            "tool_choice": "required"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "function_call");
    assert_eq!(body["output"][0]["name"], "get_arm");
    assert!(body["output"][0]["call_id"].is_string());
    let response = ureq::post(&server.url("/v1/responses"))
        .send_json(json!({"input": "one two", "stream": true}))
        .unwrap();
    assert_eq!(response.content_type(), "text/event-stream");
    let events: Vec<String> = BufReader::new(response.into_reader())
        .lines()
        .map(Result::unwrap)
        .filter_map(|l| l.strip_prefix("event: ").map(str::to_owned))
        .collect();
    assert_eq!(
        events,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (body, param) in [
        (
            json!({"input": "x", "tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
        (
            json!({"input": "x", "previous_response_id": "resp_none"}),
            "previous_response_id",
        ),
        (json!({"input": "x", "model": "gpt-4o"}), "model"),
    ] {
        let (status, error) = server.post("/v1/responses", &body);
        assert!(status >= 400, "{body}");
        assert_eq!(error["error"]["param"], param, "{error}");
    }
}
