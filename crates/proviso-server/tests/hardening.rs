//! The server under hostile and careless clients: stalled headers and bodies, idle keep-alive
//! connections, oversized announcements, too many connections, a shutdown while clients
//! stall, API keys, Host and Origin checks, internal errors logged with a request id, a
//! constraint that compiles too slowly, and the metrics of streams that were cut or
//! abandoned. Each test is a regression test for a defect found by attacking `proviso serve`.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use proviso_server::ServerConfig;
use serde_json::{json, Value};

mod support;

use support::{Echo, Server};

/// Everything the server logs, captured once for the whole test binary.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || Capture(writer.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buffer
    })
    .clone()
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_lines() -> Vec<Value> {
    let bytes = logs().lock().unwrap().clone();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Reads until the server closes the connection; returns what was read and when it closed.
fn read_to_close(stream: &mut TcpStream) -> (String, Instant) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), Instant::now())
}

/// Reads one HTTP response whose body has a `content-length`.
fn read_response(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the headers ended");
        out.push(buf[0]);
    }
    let head = String::from_utf8_lossy(&out).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head + &String::from_utf8_lossy(&body)
}

fn quick() -> ServerConfig {
    ServerConfig::default()
        .header_timeout(Duration::from_millis(800))
        .body_timeout(Duration::from_millis(800))
        .idle_timeout(Duration::from_millis(2_500))
}

#[test]
fn stalled_and_idle_connections_are_closed() {
    let server = Server::start(Echo::default(), quick());

    // Connects and says nothing: closed after the header timeout.
    let opened = Instant::now();
    let mut silent = connect(&server);
    let (_, closed) = read_to_close(&mut silent);
    let waited = closed - opened;
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(4),
        "{waited:?}"
    );

    // Stops halfway through its headers.
    let mut half = connect(&server);
    half.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: app")
        .unwrap();
    let started = Instant::now();
    let (_, closed) = read_to_close(&mut half);
    assert!(closed - started < Duration::from_secs(4));

    // Slowloris: a header byte every 300 ms, each before the last one times out, still has
    // to finish its headers within the header timeout counted from its first byte.
    let mut slow = connect(&server);
    let started = Instant::now();
    let mut closed_early = false;
    for byte in b"GET /health HTTP/1.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaa" {
        if slow.write_all(&[*byte]).is_err() {
            closed_early = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    assert!(
        closed_early,
        "a slowloris client kept its connection for 5 s"
    );

    // Sends 10 of 100 announced body bytes: 408, then the connection closes.
    let mut short = connect(&server);
    short
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
        .unwrap();
    let (text, _) = read_to_close(&mut short);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("body_timeout"), "{text}");

    // A Content-Length over the body limit is refused before any body byte is sent.
    let mut huge = connect(&server);
    huge.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n")
        .unwrap();
    let text = read_response(&mut huge);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("request_too_large"), "{text}");

    // Keep-alive: a second request after longer than the header timeout but within the idle
    // timeout is served on the same connection; after the idle timeout the connection closes.
    let mut keep = connect(&server);
    keep.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut keep).starts_with("HTTP/1.1 200"));
    std::thread::sleep(Duration::from_millis(1_300));
    keep.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    assert!(read_response(&mut keep).starts_with("HTTP/1.1 200"));
    let idle_from = Instant::now();
    let (_, closed) = read_to_close(&mut keep);
    let idle = closed - idle_from;
    assert!(
        idle >= Duration::from_secs(2) && idle < Duration::from_secs(6),
        "{idle:?}"
    );

    // The server still serves.
    let (status, _) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "still here"}]}),
    );
    assert_eq!(status, 200);
    server.stop();
}

#[test]
fn connections_beyond_the_cap_are_refused() {
    let config = ServerConfig::default()
        .max_connections(3)
        .header_timeout(Duration::from_secs(30));
    let server = Server::start(Echo::default(), config);
    let held: Vec<TcpStream> = (0..3).map(|_| connect(&server)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = connect(&server);
    let (text, _) = read_to_close(&mut extra);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("too_many_connections"), "{text}");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    let (status, _) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "after"}]}),
    );
    assert_eq!(status, 200);
    let metrics = ureq::get(&server.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metrics.contains("proviso_refused_connections_total 1"),
        "{metrics}"
    );
    server.stop();
}

#[test]
fn shutdown_finishes_within_its_deadline_while_clients_stall() {
    let config = ServerConfig::default()
        .header_timeout(Duration::from_secs(60))
        .body_timeout(Duration::from_secs(60))
        .idle_timeout(Duration::from_secs(60))
        .shutdown_timeout(Duration::from_secs(20));
    let mut server = Server::start(Echo::default(), config);
    let mut mid_header = connect(&server);
    mid_header
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut mid_body = connect(&server);
    mid_body
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    server.signal_stop();
    server.join();
    let took = started.elapsed();
    // Neither a half-sent header nor a half-sent body holds the shutdown: nothing has been
    // computed for them, so they close at once, not at the body timeout or the deadline.
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    drop((mid_header, mid_body));
}

#[test]
fn the_api_key_is_required_on_v1_and_metrics() {
    let config = ServerConfig::default().api_key(Some("s3cret-key".into()));
    let server = Server::start(Echo::default(), config);
    let status = |path: &str, key: Option<&str>| {
        let mut request = ureq::get(&server.url(path));
        if let Some(k) = key {
            request = request.set("Authorization", &format!("Bearer {k}"));
        }
        match request.call() {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(s, r)) => (s, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    let (code, body) = status("/v1/models", None);
    assert_eq!(code, 401);
    assert!(body.contains("invalid_api_key"), "{body}");
    assert_eq!(status("/v1/models", Some("s3cret-kez")).0, 401);
    assert_eq!(status("/v1/models", Some("s3cret")).0, 401);
    assert_eq!(status("/v1/models", Some("s3cret-key")).0, 200);
    assert_eq!(status("/metrics", None).0, 401);
    assert_eq!(status("/metrics", Some("s3cret-key")).0, 200);
    assert_eq!(status("/health", None).0, 200);
    let post = ureq::post(&server.url("/v1/chat/completions"))
        .send_json(json!({"messages": [{"role": "user", "content": "hi"}]}));
    assert!(matches!(post, Err(ureq::Error::Status(401, _))));
    let post = ureq::post(&server.url("/v1/chat/completions"))
        .set("Authorization", "Bearer s3cret-key")
        .send_json(json!({"messages": [{"role": "user", "content": "hi"}]}));
    assert_eq!(post.unwrap().status(), 200);
    server.stop();

    // With a metrics port of its own, /metrics is there (and absent from the API port).
    let config = ServerConfig::default().api_key(Some("s3cret-key".into()));
    let (server, metrics_port) = Server::start_with_metrics(Echo::default(), config, true);
    let metrics = ureq::get(&format!(
        "http://127.0.0.1:{}/metrics",
        metrics_port.unwrap()
    ))
    .call()
    .unwrap();
    assert_eq!(metrics.status(), 200);
    let on_api = ureq::get(&server.url("/metrics"))
        .set("Authorization", "Bearer s3cret-key")
        .call();
    assert!(matches!(on_api, Err(ureq::Error::Status(404, _))));
    server.stop();
}

#[test]
fn foreign_hosts_and_origins_are_refused() {
    let config = ServerConfig::default().allowed_hosts(ServerConfig::default_allowed_hosts(
        &"127.0.0.1:8080".parse().unwrap(),
    ));
    let server = Server::start(Echo::default(), config);
    let get = |host: &str, origin: Option<&str>| {
        let mut stream = connect(&server);
        let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        stream
            .write_all(
                format!(
                    "GET /v1/models HTTP/1.1\r\nHost: {host}\r\n{origin}Connection: close\r\n\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        read_to_close(&mut stream).0
    };
    assert!(get("127.0.0.1:8080", None).starts_with("HTTP/1.1 200"));
    assert!(get("localhost:8080", None).starts_with("HTTP/1.1 200"));
    assert!(get("[::1]:8080", None).starts_with("HTTP/1.1 200"));
    let rebound = get("attacker.example:8080", None);
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    assert!(rebound.contains("forbidden_host"));
    assert!(get("localhost:8080", Some("http://attacker.example")).starts_with("HTTP/1.1 403"));
    assert!(get("localhost:8080", Some("http://localhost:3000")).starts_with("HTTP/1.1 200"));
    assert!(get("localhost:8080", Some("null")).starts_with("HTTP/1.1 403"));
    server.stop();
}

#[test]
fn an_internal_error_is_logged_with_the_request_id_it_answers_with() {
    // The log capture must be installed before the server starts.
    logs();
    let server = Server::start(Echo::default(), ServerConfig::default());
    let response = ureq::post(&server.url("/v1/chat/completions"))
        .send_json(json!({"messages": [{"role": "user", "content": "panic in prepare"}]}));
    let Err(ureq::Error::Status(500, response)) = response else {
        panic!("expected a 500")
    };
    let id = response.header("x-request-id").unwrap().to_owned();
    let body: Value = response.into_json().unwrap();
    assert_eq!(body["error"]["code"], "internal_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&id), "{message}");
    assert!(
        !message.contains("a bug in the backend"),
        "internal details leaked: {message}"
    );
    // The server keeps serving.
    let (status, _) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "fine"}]}),
    );
    assert_eq!(status, 200);
    server.stop();
    let lines = log_lines();
    let cause = lines
        .iter()
        .find(|l| l["fields"]["request_id"] == id.as_str() && l["level"] == "ERROR")
        .unwrap_or_else(|| panic!("no error logged for {id}: {lines:?}"));
    assert!(cause["fields"]["cause"]
        .as_str()
        .unwrap()
        .contains("a bug in the backend"));
    let request = lines
        .iter()
        .find(|l| l["fields"]["request_id"] == id.as_str() && l["fields"]["message"] == "request")
        .unwrap();
    assert_eq!(request["fields"]["status"], 500);
    assert_eq!(request["fields"]["route"], "/v1/chat/completions");
    assert_eq!(request["fields"]["method"], "POST");
}

#[test]
fn a_constraint_slow_to_compile_is_refused_within_its_budget() {
    let config = ServerConfig::default().compile_timeout(Duration::from_millis(500));
    let server = Server::start(Echo::default(), config);
    let started = Instant::now();
    let (status, body) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "slow to compile"}]}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "compile_timeout");
    assert!(started.elapsed() < Duration::from_secs(2));
    server.stop();
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

#[test]
fn cut_and_abandoned_streams_count_what_they_generated() {
    // The log capture must be installed before the server starts.
    logs();
    let echo = Echo {
        delay: Duration::from_millis(100),
        ..Echo::default()
    };
    let config = ServerConfig::default().request_timeout(Duration::from_millis(700));
    let server = Server::start(echo.clone(), config);
    let words = "w ".repeat(40);
    // Timed out mid-stream: the stream ends with a `timeout` error event.
    let response = ureq::post(&server.url("/v1/chat/completions"))
        .send_json(json!({"messages": [{"role": "user", "content": words}], "stream": true}))
        .unwrap();
    let text = response.into_string().unwrap();
    assert!(text.contains("\"code\":\"timeout\""), "{text}");
    // Abandoned: the client reads one event and goes away.
    let mut stream = connect(&server);
    let body =
        json!({"messages": [{"role": "user", "content": words}], "stream": true}).to_string();
    stream
        .write_all(format!("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).as_bytes())
        .unwrap();
    let mut first = [0u8; 256];
    let _ = stream.read(&mut first).unwrap();
    drop(stream);
    // The server notices the client is gone at its next write, which waits for the echo
    // engine: it may still be generating for the request that timed out, and a loaded
    // machine (CI's, running the other tests) stretches that past a few seconds. The wait
    // ends as soon as both the cancellation and the request are counted.
    let deadline = Instant::now() + Duration::from_secs(30);
    let metrics = loop {
        let m = ureq::get(&server.url("/metrics"))
            .call()
            .unwrap()
            .into_string()
            .unwrap();
        if (metric(
            &m,
            "proviso_cancelled_requests_total{reason=\"client_gone\"}",
        ) >= 1.0
            && metric(&m, "proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\",outcome=\"cancelled\"}") >= 1.0)
            || Instant::now() > deadline
        {
            break m;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        metric(
            &metrics,
            "proviso_cancelled_requests_total{reason=\"timeout\"}"
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "proviso_cancelled_requests_total{reason=\"client_gone\"}"
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\",outcome=\"timeout\"}"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\",outcome=\"cancelled\"}"),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "proviso_requests_total{route=\"/v1/chat/completions\",status=\"200\",outcome=\"ok\"}"
        ),
        0.0,
        "{metrics}"
    );
    // Both streams generated words before they ended, and those tokens count.
    let completion = metric(&metrics, "proviso_tokens_total{direction=\"completion\"}");
    assert!(completion >= 4.0, "{metrics}");
    server.stop();
    let lines = log_lines();
    assert!(lines
        .iter()
        .any(|l| l["fields"]["message"] == "stream cancelled"
            && l["fields"]["reason"] == "client_gone"));
}

/// Issue 21, item 3: a compile that overruns its budget gives its slot up, and requests with
/// nothing to compile never wait behind one.
#[test]
fn an_overrunning_compile_blocks_neither_plain_nor_other_constrained_requests() {
    let config = ServerConfig::default()
        .compile_threads(1)
        .compile_timeout(Duration::from_millis(800));
    let server = Server::start(Echo::default(), config);
    let constrained = |text: &str| {
        json!({"messages": [{"role": "user", "content": text}],
            "response_format": {"type": "json_object"}})
    };
    let base = server.url("/v1/chat/completions");
    let slow = std::thread::spawn(move || {
        ureq::post(&base)
            .send_json(
                json!({"messages": [{"role": "user", "content": "slow to compile"}],
                "response_format": {"type": "json_object"}}),
            )
            .map_or_else(
                |e| match e {
                    ureq::Error::Status(code, _) => code,
                    other => panic!("{other}"),
                },
                |r| r.status(),
            )
    });
    std::thread::sleep(Duration::from_millis(200));
    // A plain request while the only compile thread is busy: answered at once.
    let started = Instant::now();
    let (status, body) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "plain"}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(slow.join().unwrap(), 400);
    // The overrunning compile is still running (3 s); a replacement thread serves the next
    // constrained request within its budget.
    let started = Instant::now();
    let (status, body) = server.post("/v1/chat/completions", &constrained("{}"));
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_millis(700));
    server.stop();
}

/// Issue 21, item 11: a streamed request that finds no memory before its first token gets
/// 503 with Retry-After, not a 200 and an error event.
#[test]
fn a_stream_without_memory_before_its_first_token_is_a_503() {
    let server = Server::start(Echo::default(), ServerConfig::default());
    let response = ureq::post(&server.url("/v1/chat/completions")).send_json(
        json!({"messages": [{"role": "user", "content": "overloaded"}], "stream": true}),
    );
    let Err(ureq::Error::Status(503, response)) = response else {
        panic!("expected a 503")
    };
    assert_eq!(response.header("Retry-After"), Some("1"));
    let body: Value = response.into_json().unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    server.stop();
}

/// Issue 21, item 10: a stream keeps the request timeout, even when its worker does not
/// notice the deadline.
#[test]
fn a_stream_ends_at_the_request_timeout() {
    let config = ServerConfig::default().request_timeout(Duration::from_millis(600));
    let server = Server::start(Echo::default(), config);
    let started = Instant::now();
    let text = ureq::post(&server.url("/v1/chat/completions"))
        .send_json(
            json!({"messages": [{"role": "user", "content": "stuck for a while"}], "stream": true}),
        )
        .unwrap()
        .into_string()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2_500),
        "the stream took {took:?}"
    );
    assert!(text.contains("\"code\":\"timeout\""), "{text}");
    server.stop();
}

/// Issue 21, item 12: a client that disconnects before its (non-streamed) response is
/// logged and counted.
#[test]
fn a_client_gone_before_its_response_is_logged_and_counted() {
    logs();
    let echo = Echo {
        delay: Duration::from_millis(200),
        ..Echo::default()
    };
    let server = Server::start(echo.clone(), ServerConfig::default());
    let mut stream = connect(&server);
    let body = json!({"messages": [{"role": "user", "content": "one two three four five six seven eight"}]}).to_string();
    stream
        .write_all(
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(stream);
    std::thread::sleep(Duration::from_millis(1_500));
    let metrics = ureq::get(&server.url("/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(
        metric(
            &metrics,
            "proviso_cancelled_requests_total{reason=\"client_gone\"}"
        ) >= 1.0,
        "{metrics}"
    );
    // The generation stopped rather than ran to its end.
    assert_eq!(echo.finished.load(std::sync::atomic::Ordering::SeqCst), 0);
    server.stop();
    let lines = log_lines();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "client disconnected before the response"),
        "{lines:?}"
    );
}

/// Issue 21, smaller item: the metrics listener checks Host as the API does.
#[test]
fn the_metrics_listener_refuses_foreign_hosts() {
    let config = ServerConfig::default().allowed_hosts(ServerConfig::default_allowed_hosts(
        &"127.0.0.1:8080".parse().unwrap(),
    ));
    let (server, metrics_port) = Server::start_with_metrics(Echo::default(), config, true);
    let port = metrics_port.unwrap();
    let get = |host: &str| {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .write_all(
                format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
        read_to_close(&mut stream).0
    };
    assert!(get("127.0.0.1").starts_with("HTTP/1.1 200"));
    assert!(get("attacker.example").starts_with("HTTP/1.1 403"));
    server.stop();
}
