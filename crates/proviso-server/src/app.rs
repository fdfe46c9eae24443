//! The HTTP side: routes, status codes, admission to a bounded queue, worker threads,
//! streaming, metrics, graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::backend::{Backend, ChoiceResult, Delta, RunError, Sink, Worker};
use crate::metrics::Metrics;
use crate::wire::{self, ErrorBody, InvalidRequest};

/// Limits and sizes.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Worker threads, each generating one request at a time.
    pub workers: usize,
    /// Requests that may wait for a worker; beyond that, 503 with `Retry-After`.
    pub queue: usize,
    /// Largest request body, in bytes (413 beyond).
    pub body_limit: usize,
    /// Longest a request may take, queueing included (504 beyond).
    pub request_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            queue: 16,
            body_limit: 2 * 1024 * 1024,
            request_timeout: Duration::from_secs(120),
        }
    }
}

enum WorkerEvent {
    Delta(u32, Delta),
    Done(Result<Vec<ChoiceResult>, RunError>),
}

struct Job<J> {
    job: J,
    events: mpsc::UnboundedSender<WorkerEvent>,
    cancel: Arc<AtomicBool>,
    deadline: Instant,
}

struct Shared<B: Backend> {
    backend: Arc<B>,
    jobs: crossbeam_channel::Sender<Job<B::Job>>,
    metrics: Arc<Metrics>,
    config: ServerConfig,
}

impl<B: Backend> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            jobs: self.jobs.clone(),
            metrics: self.metrics.clone(),
            config: self.config.clone(),
        }
    }
}

struct ChannelSink<'a> {
    events: &'a mpsc::UnboundedSender<WorkerEvent>,
    cancel: &'a AtomicBool,
    deadline: Instant,
}

impl Sink for ChannelSink<'_> {
    fn send(&mut self, choice: u32, delta: Delta) -> bool {
        if self.events.send(WorkerEvent::Delta(choice, delta)).is_err() {
            self.cancel.store(true, Ordering::SeqCst);
        }
        !self.cancelled()
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
            || self.events.is_closed()
            || Instant::now() >= self.deadline
    }
}

/// A running server's worker threads, to be joined after shutdown.
#[derive(Debug)]
pub struct Workers(Vec<std::thread::JoinHandle<()>>);

impl Workers {
    /// Waits for every worker to finish its current job and exit.
    pub fn join(self) {
        for handle in self.0 {
            // A worker that panicked has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

fn spawn_workers<B: Backend>(
    backend: &Arc<B>,
    config: &ServerConfig,
    receiver: &crossbeam_channel::Receiver<Job<B::Job>>,
    metrics: &Arc<Metrics>,
) -> Result<Workers, String> {
    let mut handles = Vec::with_capacity(config.workers);
    for i in 0..config.workers.max(1) {
        let mut worker = backend.worker()?;
        let receiver = receiver.clone();
        let metrics = metrics.clone();
        let handle = std::thread::Builder::new()
            .name(format!("proviso-worker-{i}"))
            .spawn(move || {
                while let Ok(Job {
                    job,
                    events,
                    cancel,
                    deadline,
                }) = receiver.recv()
                {
                    metrics.queued().dec();
                    if cancel.load(Ordering::SeqCst)
                        || events.is_closed()
                        || Instant::now() >= deadline
                    {
                        let _ = events.send(WorkerEvent::Done(Err(RunError::Cancelled)));
                        continue;
                    }
                    metrics.running().inc();
                    let mut sink = ChannelSink {
                        events: &events,
                        cancel: &cancel,
                        deadline,
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        worker.run(job, &mut sink)
                    }))
                    .unwrap_or_else(|_| Err(RunError::Internal("the worker panicked".into())));
                    metrics.running().dec();
                    if let Ok(choices) = &result {
                        for choice in choices {
                            metrics.choice(choice);
                        }
                    }
                    // The client may be gone; nothing to do then.
                    let _ = events.send(WorkerEvent::Done(result));
                }
            })
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        handles.push(handle);
    }
    Ok(Workers(handles))
}

/// Serves `backend` on `listener` until `shutdown` resolves, then finishes the requests in
/// flight and returns.
///
/// # Errors
///
/// An I/O error from the listener, or a worker that cannot be created.
pub async fn serve<B: Backend>(
    backend: B,
    config: ServerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let backend = Arc::new(backend);
    let metrics = Arc::new(Metrics::new());
    let (jobs, receiver) = crossbeam_channel::bounded(config.queue);
    let workers =
        spawn_workers(&backend, &config, &receiver, &metrics).map_err(std::io::Error::other)?;
    drop(receiver);
    let shared = Shared {
        backend,
        jobs,
        metrics,
        config,
    };
    let app = router(shared);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    // Every connection is closed, so every job sender is gone: the workers drain and exit.
    tokio::task::spawn_blocking(move || workers.join())
        .await
        .map_err(std::io::Error::other)?;
    Ok(())
}

fn router<B: Backend>(shared: Shared<B>) -> Router {
    let limit = shared.config.body_limit;
    Router::new()
        .route("/v1/chat/completions", post(chat::<B>))
        .route("/v1/completions", post(completions::<B>))
        .route("/v1/models", get(models::<B>))
        .route("/health", get(health::<B>))
        .route("/metrics", get(metrics::<B>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(shared)
}

fn error(
    status: StatusCode,
    kind: &'static str,
    code: Option<&str>,
    message: impl Into<String>,
    param: Option<String>,
) -> Response {
    (status, Json(ErrorBody::new(kind, code, message, param))).into_response()
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("not_found"),
        "no such route",
        None,
    )
}

async fn method_not_allowed() -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        Some("method_not_allowed"),
        "method not allowed on this route",
        None,
    )
}

async fn health<B: Backend>(State(s): State<Shared<B>>) -> Response {
    Json(
        json!({"status": "ok", "model": s.backend.model_id(), "workers": s.config.workers,
        "queued": s.metrics.queued().get(), "running": s.metrics.running().get()}),
    )
    .into_response()
}

async fn models<B: Backend>(State(s): State<Shared<B>>) -> Response {
    Json(
        json!({"object": "list", "data": [{"id": s.backend.model_id(), "object": "model",
        "created": 0, "owned_by": "proviso"}]}),
    )
    .into_response()
}

async fn metrics<B: Backend>(State(s): State<Shared<B>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
        .into_response()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Completion,
}

impl Kind {
    fn route(self) -> &'static str {
        match self {
            Self::Chat => "/v1/chat/completions",
            Self::Completion => "/v1/completions",
        }
    }
}

async fn chat<B: Backend>(
    State(s): State<Shared<B>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let response = generate(&s, Kind::Chat, &headers, body).await;
    s.metrics
        .request(Kind::Chat.route(), response.status().as_u16());
    response
}

async fn completions<B: Backend>(
    State(s): State<Shared<B>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let response = generate(&s, Kind::Completion, &headers, body).await;
    s.metrics
        .request(Kind::Completion.route(), response.status().as_u16());
    response
}

fn invalid(e: InvalidRequest) -> Response {
    let status = if e.unsupported {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let code = if e.unsupported {
        "unsupported_parameter"
    } else {
        "invalid_value"
    };
    error(
        status,
        "invalid_request_error",
        Some(code),
        e.message,
        e.param,
    )
}

/// Sets the cancel flag when dropped: a handler future dropped because the client went away
/// stops its generation.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn new_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{prefix}-{:x}{:04x}",
        nanos & 0xffff_ffff_ffff,
        NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}

fn created() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn generate<B: Backend>(
    s: &Shared<B>,
    kind: Kind,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            Some("unsupported_media_type"),
            "the request body must be sent as Content-Type: application/json",
            None,
        );
    }
    let body = match body {
        Ok(b) => b,
        Err(rejection) => {
            let too_large = rejection.status() == StatusCode::PAYLOAD_TOO_LARGE;
            return if too_large {
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    Some("request_too_large"),
                    format!("the request body exceeds {} bytes", s.config.body_limit),
                    None,
                )
            } else {
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("unreadable_body"),
                    "the request body could not be read",
                    None,
                )
            };
        }
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("invalid_json"),
                format!("the request body is not valid JSON: {e}"),
                None,
            )
        }
    };
    let request = match kind {
        Kind::Chat => wire::chat_request(&value),
        Kind::Completion => wire::completion_request(&value),
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => return invalid(e),
    };
    // Compiling a grammar can take milliseconds: off the reactor.
    let backend = s.backend.clone();
    let prepared_request = request.clone();
    let job = match tokio::task::spawn_blocking(move || backend.prepare(&prepared_request)).await {
        Ok(Ok(job)) => job,
        Ok(Err(e)) => {
            return invalid(InvalidRequest {
                param: e.param,
                message: e.message,
                unsupported: e.unsupported,
            })
        }
        Err(_) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                Some("internal_error"),
                "internal error",
                None,
            )
        }
    };
    let (events, mut receiver) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let deadline = started + s.config.request_timeout;
    s.metrics.queued().inc();
    if let Err(e) = s.jobs.try_send(Job {
        job,
        events,
        cancel: cancel.clone(),
        deadline,
    }) {
        s.metrics.queued().dec();
        let message = match e {
            crossbeam_channel::TrySendError::Full(_) => "the server is busy: every worker is generating and the queue is full; retry shortly",
            crossbeam_channel::TrySendError::Disconnected(_) => "the server is shutting down",
        };
        let mut response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            Some("overloaded"),
            message,
            None,
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    }
    let guard = CancelOnDrop(cancel);
    let meta = Meta {
        id: new_id(if kind == Kind::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        }),
        created: created(),
        model: s.backend.model_id().to_owned(),
        kind,
    };
    if request.stream {
        let metrics = s.metrics.clone();
        let stream = sse_stream(
            receiver,
            guard,
            meta,
            request.include_usage,
            metrics,
            started,
            deadline,
        );
        return Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response();
    }
    let result = loop {
        match tokio::time::timeout_at(
            tokio::time::Instant::from_std(deadline + Duration::from_secs(1)),
            receiver.recv(),
        )
        .await
        {
            Ok(Some(WorkerEvent::Delta(..))) => {}
            Ok(Some(WorkerEvent::Done(result))) => break result,
            Ok(None) => break Err(RunError::Internal("the worker stopped".into())),
            Err(_) => break Err(RunError::Cancelled),
        }
    };
    drop(guard);
    s.metrics.duration(started.elapsed());
    match result {
        Ok(choices) => Json(full_response(&meta, &choices)).into_response(),
        Err(e) => run_error(&e, Instant::now() >= deadline, &s.metrics),
    }
}

fn run_error(e: &RunError, timed_out: bool, metrics: &Metrics) -> Response {
    let (status, code, message) = describe_run_error(e, timed_out, metrics);
    error(status, "server_error", Some(code), message, None)
}

/// The status, code and client-facing message of a failed run (internal details are logged,
/// never sent), counting output rejections in the metrics.
fn describe_run_error(
    e: &RunError,
    timed_out: bool,
    metrics: &Metrics,
) -> (StatusCode, &'static str, String) {
    match e {
        RunError::OutputRejected { gate, .. } => {
            metrics.rejection(gate);
            (StatusCode::BAD_GATEWAY, "output_rejected", e.to_string())
        }
        RunError::UpstreamRefused { .. } => {
            (StatusCode::BAD_REQUEST, "upstream_refused", e.to_string())
        }
        RunError::Cancelled if timed_out => (
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took longer than the server's per-request timeout".into(),
        ),
        RunError::Cancelled => (
            StatusCode::SERVICE_UNAVAILABLE,
            "cancelled",
            "the request was cancelled".into(),
        ),
        RunError::Internal(message) => {
            tracing::error!(message, "generation failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "internal error".into(),
            )
        }
    }
}

struct Meta {
    id: String,
    created: u64,
    model: String,
    kind: Kind,
}

fn tool_calls_json(choice: &ChoiceResult) -> Value {
    Value::Array(
        choice
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect(),
    )
}

fn full_response(meta: &Meta, choices: &[ChoiceResult]) -> Value {
    let prompt: u64 = choices.first().map_or(0, |c| c.prompt_tokens);
    let completion: u64 = choices.iter().map(|c| c.completion_tokens).sum();
    match meta.kind {
        Kind::Chat => {
            let choices: Vec<Value> = choices
                .iter()
                .map(|c| {
                    let mut message = json!({"role": "assistant", "content": c.content, "refusal": null});
                    if !c.tool_calls.is_empty() {
                        message["tool_calls"] = tool_calls_json(c);
                    }
                    json!({"index": c.index, "message": message, "logprobs": null, "finish_reason": c.finish_reason.as_str()})
                })
                .collect();
            json!({"id": meta.id, "object": "chat.completion", "created": meta.created, "model": meta.model,
                "choices": choices, "usage": wire::usage(prompt, completion), "system_fingerprint": null})
        }
        Kind::Completion => {
            let choices: Vec<Value> = choices
                .iter()
                .map(|c| json!({"index": c.index, "text": c.content.clone().unwrap_or_default(), "logprobs": null, "finish_reason": c.finish_reason.as_str()}))
                .collect();
            json!({"id": meta.id, "object": "text_completion", "created": meta.created, "model": meta.model,
                "choices": choices, "usage": wire::usage(prompt, completion)})
        }
    }
}

fn chunk(meta: &Meta, choices: Value) -> Value {
    let object = match meta.kind {
        Kind::Chat => "chat.completion.chunk",
        Kind::Completion => "text_completion",
    };
    json!({"id": meta.id, "object": object, "created": meta.created, "model": meta.model, "choices": choices})
}

fn event(value: &Value) -> Result<Event, Infallible> {
    Ok(Event::default().data(value.to_string()))
}

struct StreamState {
    receiver: mpsc::UnboundedReceiver<WorkerEvent>,
    _guard: CancelOnDrop,
    meta: Meta,
    include_usage: bool,
    started_choices: Vec<u32>,
    pending: std::collections::VecDeque<Value>,
    finished: bool,
    metrics: Arc<Metrics>,
    started: Instant,
    deadline: Instant,
}

impl StreamState {
    fn delta(&mut self, index: u32, delta: Delta) {
        let first = !self.started_choices.contains(&index);
        if first {
            self.started_choices.push(index);
        }
        let choice = match (self.meta.kind, delta) {
            (Kind::Completion, Delta::Content(text)) => {
                json!({"index": index, "text": text, "logprobs": null, "finish_reason": null})
            }
            (Kind::Completion, Delta::ToolCall { .. }) => return,
            (Kind::Chat, Delta::Content(text)) => {
                let mut delta = json!({"content": text});
                if first {
                    delta["role"] = json!("assistant");
                }
                json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": null})
            }
            (
                Kind::Chat,
                Delta::ToolCall {
                    index: call_index,
                    call,
                },
            ) => {
                // The call's header first, then its arguments, as OpenAI streams them.
                let mut head = json!({"tool_calls": [{"index": call_index, "id": call.id, "type": "function",
                    "function": {"name": call.name, "arguments": ""}}]});
                if first {
                    head["role"] = json!("assistant");
                    head["content"] = Value::Null;
                }
                self.pending.push_back(chunk(&self.meta, json!([{"index": index, "delta": head, "logprobs": null, "finish_reason": null}])));
                json!({"index": index, "delta": {"tool_calls": [{"index": call_index, "function": {"arguments": call.arguments}}]},
                    "logprobs": null, "finish_reason": null})
            }
        };
        self.pending.push_back(chunk(&self.meta, json!([choice])));
    }

    fn done(&mut self, result: Result<Vec<ChoiceResult>, RunError>) {
        self.metrics.duration(self.started.elapsed());
        match result {
            Ok(choices) => {
                for c in &choices {
                    let finish = match self.meta.kind {
                        Kind::Chat => {
                            json!({"index": c.index, "delta": {}, "logprobs": null, "finish_reason": c.finish_reason.as_str()})
                        }
                        Kind::Completion => {
                            json!({"index": c.index, "text": "", "logprobs": null, "finish_reason": c.finish_reason.as_str()})
                        }
                    };
                    self.pending.push_back(chunk(&self.meta, json!([finish])));
                }
                if self.include_usage {
                    let prompt = choices.first().map_or(0, |c| c.prompt_tokens);
                    let completion = choices.iter().map(|c| c.completion_tokens).sum();
                    let mut last = chunk(&self.meta, json!([]));
                    last["usage"] = wire::usage(prompt, completion);
                    self.pending.push_back(last);
                }
            }
            Err(e) => {
                let timed_out = Instant::now() >= self.deadline;
                let (_, code, message) = describe_run_error(&e, timed_out, &self.metrics);
                self.pending.push_back(json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}}));
            }
        }
        self.finished = true;
    }
}

fn sse_stream(
    receiver: mpsc::UnboundedReceiver<WorkerEvent>,
    guard: CancelOnDrop,
    meta: Meta,
    include_usage: bool,
    metrics: Arc<Metrics>,
    started: Instant,
    deadline: Instant,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = StreamState {
        receiver,
        _guard: guard,
        meta,
        include_usage,
        started_choices: Vec::new(),
        pending: std::collections::VecDeque::new(),
        finished: false,
        metrics,
        started,
        deadline,
    };
    stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((event(&next), Some(state)));
            }
            if state.finished {
                // The OpenAI terminator; the state (and its cancel guard) ends here.
                return Some((Ok(Event::default().data("[DONE]")), None));
            }
            match state.receiver.recv().await {
                Some(WorkerEvent::Delta(index, delta)) => state.delta(index, delta),
                Some(WorkerEvent::Done(result)) => state.done(result),
                None => state.done(Err(RunError::Internal("the worker stopped".into()))),
            }
        }
    })
}
