//! The HTTP side: routes, status codes, access control, admission to a bounded queue,
//! worker threads, streaming, metrics, one log line per request, graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::stream::{self, Stream};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::backend::{
    Backend, ChoiceResult, Delta, RunError, Sink, SteeringNote, ToolCallOut, Worker,
};
use crate::conn::{ConnLimits, GuardedBody};
use crate::metrics::Metrics;
use crate::prepare::{panic_message, PrepareError, Preparer};
use crate::responses;
use crate::wire::{self, custom_input, token_logprobs, ErrorBody, InvalidRequest};

mod config;
mod mcp;
mod render;
mod sse;

pub use config::ServerConfig;
use render::{as_custom_call, chunk, event, full_response, Meta};
use sse::{sse_stream, StreamState};

enum WorkerEvent {
    /// Generation has begun (see [`Sink::started`]).
    Started,
    Delta(u32, Delta),
    Done(Result<Vec<ChoiceResult>, RunError>),
}

struct Job<J> {
    job: J,
    events: mpsc::UnboundedSender<WorkerEvent>,
    cancel: Arc<AtomicBool>,
    deadline: Instant,
    /// Tokens generated for this request so far, as the worker reports them (for the
    /// metrics and the log line of a request that ends without a result).
    generated: Arc<AtomicU64>,
}

struct Shared<B: Backend> {
    backend: Arc<B>,
    jobs: crossbeam_channel::Sender<Job<B::Job>>,
    preparer: Arc<Preparer<B>>,
    metrics: Arc<Metrics>,
    config: ServerConfig,
    /// Stored Responses conversations, for `previous_response_id`.
    responses: Arc<std::sync::Mutex<responses::Store>>,
}

impl<B: Backend> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            jobs: self.jobs.clone(),
            preparer: self.preparer.clone(),
            metrics: self.metrics.clone(),
            config: self.config.clone(),
            responses: self.responses.clone(),
        }
    }
}

struct ChannelSink<'a> {
    events: &'a mpsc::UnboundedSender<WorkerEvent>,
    cancel: &'a AtomicBool,
    deadline: Instant,
    generated: &'a AtomicU64,
    started: bool,
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

    fn generated(&mut self, tokens: u64) {
        self.generated.fetch_add(tokens, Ordering::SeqCst);
    }

    fn started(&mut self) {
        if !self.started {
            self.started = true;
            let _ = self.events.send(WorkerEvent::Started);
        }
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
        let mut worker = backend.worker().map_err(|e| e.to_string())?;
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
                    generated,
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
                        generated: &generated,
                        started: false,
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        worker.run(job, &mut sink)
                    }))
                    .unwrap_or_else(|panic| {
                        Err(RunError::Internal(format!(
                            "the worker panicked: {}",
                            panic_message(panic.as_ref())
                        )))
                    });
                    metrics.running().dec();
                    match &result {
                        Ok(choices) => {
                            for choice in choices {
                                metrics.choice(choice);
                            }
                        }
                        // What a cut, cancelled or rejected request generated was still
                        // computed: it counts.
                        Err(_) => metrics.completion_tokens(generated.load(Ordering::SeqCst)),
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
/// flight (within [`ServerConfig::shutdown_timeout`]) and returns. `/metrics` is served on
/// the same port.
///
/// # Errors
///
/// A worker that cannot be created.
pub async fn serve<B: Backend>(
    backend: B,
    config: ServerConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_metrics(backend, config, listener, None, shutdown).await
}

/// As [`serve`], with `/metrics` (and `/health`) on a listener of their own when
/// `metrics_listener` is given; the API port then has no `/metrics`.
///
/// # Errors
///
/// A worker that cannot be created.
pub async fn serve_with_metrics<B: Backend>(
    backend: B,
    config: ServerConfig,
    listener: tokio::net::TcpListener,
    metrics_listener: Option<tokio::net::TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let backend = Arc::new(backend);
    let metrics = Arc::new(Metrics::new());
    let (jobs, receiver) = crossbeam_channel::bounded(config.queue);
    let workers =
        spawn_workers(&backend, &config, &receiver, &metrics).map_err(std::io::Error::other)?;
    drop(receiver);
    let preparer = Arc::new(
        Preparer::start(backend.clone(), config.compile_threads, config.queue)
            .map_err(std::io::Error::other)?,
    );
    let limits = ConnLimits {
        header_timeout: config.header_timeout,
        idle_timeout: config.idle_timeout,
        max_connections: config.max_connections,
        shutdown_timeout: config.shutdown_timeout,
    };
    let separate_metrics = metrics_listener.is_some();
    let shared = Shared {
        backend,
        jobs,
        preparer,
        metrics: metrics.clone(),
        responses: Arc::new(std::sync::Mutex::new(responses::Store::new(
            responses::StoreLimits {
                count: config.responses_kept,
                bytes: config.responses_bytes,
                age: config.responses_age,
            },
        ))),
        config,
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let metrics_task = metrics_listener.map(|l| {
        let router = metrics_router(shared.clone());
        let counter = metrics.clone();
        tokio::spawn(crate::conn::run(
            l,
            router,
            limits,
            stopped.clone(),
            move || {
                counter.connection_refused();
            },
        ))
    });
    let app = router(shared, !separate_metrics);
    let counter = metrics.clone();
    crate::conn::run(listener, app, limits, stopped, move || {
        counter.connection_refused();
    })
    .await;
    if let Some(task) = metrics_task {
        let _ = task.await;
    }
    // Every connection is closed, so every job sender is gone: the workers drain and exit.
    tokio::task::spawn_blocking(move || workers.join())
        .await
        .map_err(std::io::Error::other)?;
    Ok(())
}

fn router<B: Backend>(shared: Shared<B>, with_metrics: bool) -> Router {
    let mut api = Router::new()
        .route("/v1/chat/completions", post(chat::<B>))
        .route("/v1/completions", post(completions::<B>))
        .route("/v1/responses", post(responses_route::<B>))
        .route("/v1/models", get(models::<B>))
        .route("/v1/models/{*model}", get(model::<B>));
    if with_metrics {
        api = api.route("/metrics", get(metrics::<B>));
    }
    let api = api.route_layer(middleware::from_fn_with_state(
        shared.clone(),
        require_key::<B>,
    ));
    api.route("/health", get(health::<B>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            guard_host::<B>,
        ))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            request_log::<B>,
        ))
        .with_state(shared)
}

fn metrics_router<B: Backend>(shared: Shared<B>) -> Router {
    Router::new()
        .route("/metrics", get(metrics::<B>))
        .route("/health", get(health::<B>))
        .fallback(not_found)
        // The metrics listener answers to the same host names as the API: a page in a
        // local browser must not read it through DNS rebinding either.
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            guard_host::<B>,
        ))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            request_log::<B>,
        ))
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

/// The request id, set by the logging layer on every request and echoed as `x-request-id`.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);

/// What a generation request reports for its log line, filled in as it runs (for a stream,
/// when it ends).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    prompt_tokens: u64,
    completion_tokens: u64,
    finish_reason: Option<String>,
    /// For a stream: how it ended (`ok`, `timeout`, `cancelled`, or an error code).
    stream_end: Option<String>,
}

type SharedOutcome = Arc<std::sync::Mutex<Outcome>>;

fn with_outcome(outcome: &SharedOutcome, f: impl FnOnce(&mut Outcome)) {
    // The outcome only feeds a log line; a poisoned lock still holds usable numbers.
    let mut guard = outcome
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut guard);
}

/// Logs one line per request when its response ends (for a stream, after its last event):
/// method, route, status, latency, tokens, finish reason, request id.
struct LogOnEnd {
    method: String,
    route: String,
    status: u16,
    started: Instant,
    id: String,
    outcome: SharedOutcome,
}

impl Drop for LogOnEnd {
    fn drop(&mut self) {
        let outcome = self
            .outcome
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tracing::info!(
            target: "proviso_server::request",
            request_id = %self.id,
            method = %self.method,
            route = %self.route,
            status = self.status,
            latency_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            prompt_tokens = outcome.prompt_tokens,
            completion_tokens = outcome.completion_tokens,
            finish_reason = outcome.finish_reason.as_deref().unwrap_or(""),
            stream_end = outcome.stream_end.as_deref().unwrap_or(""),
            "request"
        );
    }
}

/// Logs and counts a request whose client went away before its response was ready: the
/// handler's future is dropped then (and with it the request's generation), so nothing
/// else would.
struct GoneBeforeResponse {
    armed: bool,
    id: String,
    route: String,
    started: Instant,
    metrics: Arc<Metrics>,
}

impl Drop for GoneBeforeResponse {
    fn drop(&mut self) {
        if self.armed {
            self.metrics.cancelled("client_gone");
            tracing::info!(
                target: "proviso_server::request",
                request_id = %self.id,
                route = %self.route,
                latency_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "client disconnected before the response"
            );
        }
    }
}

async fn request_log<B: Backend>(
    State(s): State<Shared<B>>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let id = new_id("req");
    let method = request.method().to_string();
    let route = request.uri().path().to_owned();
    let outcome = SharedOutcome::default();
    request.extensions_mut().insert(RequestId(id.clone()));
    request.extensions_mut().insert(outcome.clone());
    let mut gone = GoneBeforeResponse {
        armed: true,
        id: id.clone(),
        route: route.clone(),
        started,
        metrics: s.metrics.clone(),
    };
    let response = next.run(request).await;
    gone.armed = false;
    let (mut parts, body) = response.into_parts();
    if let Ok(value) = HeaderValue::from_str(&id) {
        parts.headers.insert("x-request-id", value);
    }
    let log = LogOnEnd {
        method,
        route,
        status: parts.status.as_u16(),
        started,
        id,
        outcome,
    };
    Response::from_parts(parts, GuardedBody::wrap(body, log))
}

/// The host part of a `Host` header or an origin's authority (`name`, `name:port`,
/// `[v6]:port`).
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map_or(authority, |(h, p)| {
        if p.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

fn host_allowed(allowed: &[String], authority: &str) -> bool {
    let name = host_name(authority.trim());
    allowed.iter().any(|a| {
        let a = a.trim_start_matches('[').trim_end_matches(']');
        a.eq_ignore_ascii_case(name)
    })
}

async fn guard_host<B: Backend>(
    State(s): State<Shared<B>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(allowed) = &s.config.allowed_hosts {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| {
                request
                    .uri()
                    .authority()
                    .map(axum::http::uri::Authority::as_str)
            });
        let host_ok = host.is_some_and(|h| host_allowed(allowed, h));
        let origin_ok = match request.headers().get(header::ORIGIN) {
            None => true,
            Some(origin) => origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .is_some_and(|(_, authority)| host_allowed(allowed, authority)),
        };
        if !host_ok || !origin_ok {
            return error(
                StatusCode::FORBIDDEN,
                "invalid_request_error",
                Some("forbidden_host"),
                "the Host or Origin of this request is not one this server answers to (see --allowed-host)",
                None,
            );
        }
    }
    next.run(request).await
}

/// Constant-time equality of two secrets: both are hashed first, so neither the position of
/// the first difference nor the key's length shows in the timing.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let a = Sha256::digest(given);
    let b = Sha256::digest(expected);
    a.as_slice().ct_eq(b.as_slice()).into()
}

async fn require_key<B: Backend>(
    State(s): State<Shared<B>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(key) = &s.config.api_key {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            });
        let ok = given.is_some_and(|g| same_secret(g.as_bytes(), key.as_bytes()));
        if !ok {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "invalid_request_error",
                Some("invalid_api_key"),
                if given.is_some() {
                    "the API key is not valid"
                } else {
                    "an API key is required: send Authorization: Bearer <key>"
                },
                None,
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
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

/// The names the server answers to: the backend's id first, then the aliases.
fn model_names<B: Backend>(s: &Shared<B>) -> impl Iterator<Item = &str> {
    std::iter::once(s.backend.model_id()).chain(s.config.model_aliases.iter().map(String::as_str))
}

fn model_object(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 0, "owned_by": "proviso"})
}

fn model_not_found(name: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("model_not_found"),
        format!("the model `{name}` does not exist; GET /v1/models lists the served models"),
        Some("model".to_owned()),
    )
}

async fn models<B: Backend>(State(s): State<Shared<B>>) -> Response {
    let data: Vec<Value> = model_names(&s).map(model_object).collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

async fn model<B: Backend>(
    State(s): State<Shared<B>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Response {
    if model_names(&s).any(|m| m == name) {
        Json(model_object(&name)).into_response()
    } else {
        model_not_found(&name)
    }
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
    Extension(id): Extension<RequestId>,
    Extension(outcome): Extension<SharedOutcome>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let (response, streaming) = generate(&s, Kind::Chat, &id, &outcome, &headers, body).await;
    if !streaming {
        s.metrics
            .request(Kind::Chat.route(), response.status().as_u16(), None);
    }
    response
}

async fn completions<B: Backend>(
    State(s): State<Shared<B>>,
    Extension(id): Extension<RequestId>,
    Extension(outcome): Extension<SharedOutcome>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let (response, streaming) = generate(&s, Kind::Completion, &id, &outcome, &headers, body).await;
    if !streaming {
        s.metrics
            .request(Kind::Completion.route(), response.status().as_u16(), None);
    }
    response
}

/// `POST /v1/responses`: the request is read into a chat request and runs the same way; the
/// accepted choice is written as a Response object, or as the Responses stream's events.
async fn responses_route<B: Backend>(
    State(s): State<Shared<B>>,
    Extension(id): Extension<RequestId>,
    Extension(outcome): Extension<SharedOutcome>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    const ROUTE: &str = "/v1/responses";
    let started = Instant::now();
    let response = async {
        let value = read_json(&s, &headers, body).await?;
        // `mcp` tools and MCP items are read first: the body the chat reader sees has
        // function tools, calls and outputs in their place.
        let mut rewritten = value.clone();
        let uses = match (&s.config.server_tools, mcp::wanted(&value)) {
            (Some(tools), true) => mcp::prepare(&**tools, &mut rewritten, true)
                .await
                .map_err(invalid)?,
            (None, true) => {
                return Err(invalid(InvalidRequest::unsupported(
                    "tools",
                    "this server executes no tools: start it with --mcp CONFIG.json",
                )))
            }
            _ => mcp::McpUses::default(),
        };
        let translated = {
            let store = s
                .responses
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let translated =
                responses::to_chat(&rewritten, |previous| store.get(previous)).map_err(invalid)?;
            let limits = store.limits();
            let chain = translated.previous.as_ref().map_or(0, |p| p.chain_bytes())
                + responses::bytes_of(&translated.input);
            if translated.store && chain > limits.bytes {
                return Err(invalid(InvalidRequest::unsupported(
                    "previous_response_id",
                    format!(
                        "the conversation has {chain} bytes, more than the {} the response store keeps; send it with `store: false`",
                        limits.bytes
                    ),
                )));
            }
            translated
        };
        let (meta, choice, items, loop_messages) = if uses.is_empty() {
            let submitted = submit(
                &s,
                Kind::Chat,
                &id,
                translated.chat,
                started,
                responses::param_name,
            )
            .await?;
            let (meta, choices) = run_to_end(&s, submitted, &id, &outcome).await?;
            let Some(choice) = choices.into_iter().next() else {
                return Err(internal_error(&id, "no choice"));
            };
            (meta, choice, Vec::new(), Vec::new())
        } else {
            let ran = mcp::run(
                &s,
                &id,
                &outcome,
                started,
                translated.chat,
                &uses,
                responses::param_name,
            )
            .await?;
            (ran.meta, ran.choice, ran.items, ran.messages)
        };
        let choice = &choice;
        let response_id = meta.id.replacen("chatcmpl", "resp", 1);
        let mut rendered = responses::render(
            &response_id,
            meta.created,
            &meta.model,
            &value,
            choice,
            &meta.custom_tools,
        );
        if let Some(note) = &meta.steering {
            rendered["proviso"] = json!({"steering": note.detail});
        }
        if !items.is_empty() {
            let mut output = items;
            output.extend(rendered["output"].as_array().cloned().unwrap_or_default());
            rendered["output"] = Value::Array(output);
        }
        if translated.store {
            let mut input = translated.input;
            input.extend(loop_messages);
            s.responses
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    response_id,
                    translated.previous,
                    responses::added(input, choice),
                );
        }
        let mut response = if translated.stream {
            let events: Vec<Result<Event, Infallible>> = responses::events(&rendered)
                .into_iter()
                .map(|(name, data)| Ok(Event::default().event(name).data(data.to_string())))
                .collect();
            Sse::new(stream::iter(events)).into_response()
        } else {
            Json(rendered).into_response()
        };
        steering_header(&mut response, meta.steering.as_ref());
        Ok(response)
    }
    .await
    .unwrap_or_else(|response: Response| response);
    s.metrics.request(ROUTE, response.status().as_u16(), None);
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

/// A 500 whose cause is logged with the request id; the client gets the id, never the cause.
fn internal_error(id: &RequestId, cause: &str) -> Response {
    tracing::error!(request_id = %id.0, cause, "internal error");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        Some("internal_error"),
        format!("internal error (request id {})", id.0),
        None,
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

fn too_large(limit: usize) -> Response {
    let mut response = error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        Some("request_too_large"),
        format!("the request body exceeds {limit} bytes"),
        None,
    );
    // The rest of the body is never read, so the connection cannot carry another request.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Reads the body within the size limit and the body timeout. A `Content-Length` over the
/// limit is refused before anything is read.
async fn read_body(
    headers: &HeaderMap,
    body: axum::body::Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, Response> {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u128>().ok());
    if announced.is_some_and(|n| n > limit as u128) {
        return Err(too_large(limit));
    }
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => {
            let mut response = error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                Some("body_timeout"),
                format!(
                    "the request body did not arrive within {} s",
                    timeout.as_secs_f32()
                ),
                None,
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(response)
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large(limit))
        }
        Ok(Err(_)) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("unreadable_body"),
            "the request body could not be read",
            None,
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// Returns the response and whether it is a stream (whose metrics are counted when it ends).
async fn generate<B: Backend>(
    s: &Shared<B>,
    kind: Kind,
    id: &RequestId,
    outcome: &SharedOutcome,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> (Response, bool) {
    let started = Instant::now();
    let value = match read_json(s, headers, body).await {
        Ok(v) => v,
        Err(response) => return (response, false),
    };
    if kind == Kind::Chat && mcp::wanted(&value) {
        return (chat_with_tools(s, id, outcome, value, started).await, false);
    }
    let submitted = match submit(s, kind, id, value, started, |param| param).await {
        Ok(submitted) => submitted,
        Err(response) => return (response, false),
    };
    if submitted.stream {
        // The status is sent with the first event, so it waits for generation to begin: a
        // request that fails before its first token (no memory for it: 503 with
        // Retry-After) gets an error status, not a 200 and an error event.
        let mut submitted = submitted;
        let first = match next_event(&mut submitted.receiver, submitted.deadline).await {
            WorkerEvent::Done(Err(e)) => {
                let timed_out = Instant::now() >= submitted.deadline;
                drop(submitted.guard);
                s.metrics.duration(started.elapsed());
                if matches!(e, RunError::Cancelled) {
                    s.metrics
                        .cancelled(if timed_out { "timeout" } else { "client_gone" });
                }
                return (run_error(&e, timed_out, &s.metrics, id), false);
            }
            event => event,
        };
        let mut state = StreamState {
            receiver: submitted.receiver,
            _guard: submitted.guard,
            meta: submitted.meta,
            include_usage: submitted.include_usage,
            started_choices: Vec::new(),
            pending: std::collections::VecDeque::new(),
            finished: false,
            metrics: s.metrics.clone(),
            started,
            deadline: submitted.deadline,
            generated: submitted.generated,
            request_id: id.clone(),
            outcome: outcome.clone(),
            counted: false,
        };
        let note = state.meta.steering.clone();
        state.apply(first);
        let stream = sse_stream(state);
        let mut response = Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response();
        steering_header(&mut response, note.as_ref());
        return (response, true);
    }
    let response = match run_to_end(s, submitted, id, outcome).await {
        Ok((meta, choices)) => {
            let mut response = Json(full_response(&meta, &choices)).into_response();
            steering_header(&mut response, meta.steering.as_ref());
            response
        }
        Err(response) => response,
    };
    (response, false)
}

/// A chat request with `mcp` tools: the server runs their calls between generations and
/// answers with the final choice, each call listed under `proviso.mcp`.
async fn chat_with_tools<B: Backend>(
    s: &Shared<B>,
    id: &RequestId,
    outcome: &SharedOutcome,
    mut value: Value,
    started: Instant,
) -> Response {
    async {
        if value.get("stream").and_then(Value::as_bool) == Some(true) {
            return Err(invalid(InvalidRequest::unsupported(
                "stream",
                "a chat request with mcp tools is answered whole; stream it on /v1/responses",
            )));
        }
        let Some(tools) = s.config.server_tools.clone() else {
            return Err(invalid(InvalidRequest::unsupported(
                "tools",
                "this server executes no tools: start it with --mcp CONFIG.json",
            )));
        };
        let uses = mcp::prepare(&*tools, &mut value, false)
            .await
            .map_err(invalid)?;
        let ran = mcp::run(s, id, outcome, started, value, &uses, |p| p).await?;
        let mut body = full_response(&ran.meta, std::slice::from_ref(&ran.choice));
        body["proviso"] = json!({"mcp": ran.items});
        if let Some(note) = &ran.meta.steering {
            body["proviso"]["steering"] = note.detail.clone();
        }
        let mut response = Json(body).into_response();
        steering_header(&mut response, ran.meta.steering.as_ref());
        Ok(response)
    }
    .await
    .unwrap_or_else(|response: Response| response)
}

/// Reports what steering decided in the `x-proviso-steering` header.
fn steering_header(response: &mut Response, note: Option<&SteeringNote>) {
    if let Some(value) = note.and_then(|n| HeaderValue::from_str(&n.summary).ok()) {
        response.headers_mut().insert("x-proviso-steering", value);
    }
}

/// A request body read as JSON: the content type (415), the size and time limits, the
/// syntax (400).
async fn read_json<B: Backend>(
    s: &Shared<B>,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Value, Response> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            Some("unsupported_media_type"),
            "the request body must be sent as Content-Type: application/json",
            None,
        ));
    }
    let body = match read_body(headers, body, s.config.body_limit, s.config.body_timeout).await {
        Ok(b) => b,
        Err(response) => return Err(response),
    };
    serde_json::from_slice(&body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("invalid_json"),
            format!("the request body is not valid JSON: {e}"),
            None,
        )
    })
}

/// A request handed to a worker, with what its response needs.
struct Submitted {
    receiver: mpsc::UnboundedReceiver<WorkerEvent>,
    guard: CancelOnDrop,
    meta: Meta,
    stream: bool,
    include_usage: bool,
    started: Instant,
    deadline: Instant,
    generated: Arc<AtomicU64>,
}

/// Checks a request (its model, its fields, its constraint, compiled on the compile threads)
/// and queues it for a worker.
async fn submit<B: Backend>(
    s: &Shared<B>,
    kind: Kind,
    id: &RequestId,
    value: Value,
    started: Instant,
    param_name: fn(String) -> String,
) -> Result<Submitted, Response> {
    // Errors name parameters as the client's route spells them.
    let invalid = |mut e: InvalidRequest| {
        e.param = e.param.map(param_name);
        invalid(e)
    };
    // A request for a model this server does not serve is refused, unless it was started to
    // accept any name; a request that names none is served by the one model there is.
    if let Some(name) = value.get("model").and_then(Value::as_str) {
        if !s.config.any_model && !model_names(s).any(|m| m == name) {
            return Err(model_not_found(name));
        }
    }
    let request = match kind {
        Kind::Chat => wire::chat_request(&value),
        Kind::Completion => wire::completion_request(&value),
    };
    drop(value);
    let request = match request {
        Ok(r) => r,
        Err(e) => return Err(invalid(e)),
    };
    let (stream, include_usage) = (request.stream, request.include_usage);
    let custom_tools = request.custom_tools.clone();
    let custom_call = request.custom_call.clone();
    // Compiling a grammar recurses and can take a while: on the compile threads (large
    // stacks, bounded in number), never on the reactor, within the compile timeout.
    let job = match s
        .preparer
        .prepare(request, s.config.compile_timeout)
        .await
    {
        Ok(job) => job,
        Err(PrepareError::Rejected(e)) => {
            return Err(invalid(InvalidRequest {
                param: e.param,
                message: e.message,
                unsupported: e.unsupported,
            }))
        }
        Err(PrepareError::TimedOut) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("compile_timeout"),
                format!(
                    "the request's constraint did not compile within {} s; simplify the schema or grammar",
                    s.config.compile_timeout.as_secs_f32()
                ),
                None,
            ))
        }
        Err(PrepareError::Busy) => return Err(overloaded("the server is busy compiling other requests' constraints; retry shortly")),
        Err(PrepareError::Panicked(cause)) => return Err(internal_error(id, &cause)),
    };
    let steering = s.backend.steering(&job);
    if let Some(note) = &steering {
        tracing::info!(request_id = %id.0, steering = %note.summary, "steered from the conversation");
    }
    let (events, receiver) = mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let generated = Arc::new(AtomicU64::new(0));
    let deadline = started + s.config.request_timeout;
    s.metrics.queued().inc();
    if let Err(e) = s.jobs.try_send(Job {
        job,
        events,
        cancel: cancel.clone(),
        deadline,
        generated: generated.clone(),
    }) {
        s.metrics.queued().dec();
        let message = match e {
            crossbeam_channel::TrySendError::Full(_) => "the server is busy: every worker is generating and the queue is full; retry shortly",
            crossbeam_channel::TrySendError::Disconnected(_) => "the server is shutting down",
        };
        return Err(overloaded(message));
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
        custom_tools,
        custom_call,
        steering,
    };
    Ok(Submitted {
        receiver,
        guard,
        meta,
        stream,
        include_usage,
        started,
        deadline,
        generated,
    })
}

/// The worker's next event for a request, within its deadline (and a second for the worker
/// to notice it): past it, the request is cancelled; a worker gone is an internal error.
async fn next_event(
    receiver: &mut mpsc::UnboundedReceiver<WorkerEvent>,
    deadline: Instant,
) -> WorkerEvent {
    match tokio::time::timeout_at(
        tokio::time::Instant::from_std(deadline + Duration::from_secs(1)),
        receiver.recv(),
    )
    .await
    {
        Ok(Some(event)) => event,
        Ok(None) => WorkerEvent::Done(Err(RunError::Internal("the worker stopped".into()))),
        Err(_) => WorkerEvent::Done(Err(RunError::Cancelled)),
    }
}

/// Waits for a request that is not streamed to end: its choices, or the error response.
async fn run_to_end<B: Backend>(
    s: &Shared<B>,
    submitted: Submitted,
    id: &RequestId,
    outcome: &SharedOutcome,
) -> Result<(Meta, Vec<ChoiceResult>), Response> {
    let Submitted {
        mut receiver,
        guard,
        meta,
        started,
        deadline,
        generated,
        ..
    } = submitted;
    let result = loop {
        if let WorkerEvent::Done(result) = next_event(&mut receiver, deadline).await {
            break result;
        }
    };
    drop(guard);
    s.metrics.duration(started.elapsed());
    match result {
        Ok(choices) => {
            with_outcome(outcome, |o| {
                o.prompt_tokens = choices.first().map_or(0, |c| c.prompt_tokens);
                o.completion_tokens = choices.iter().map(|c| c.completion_tokens).sum();
                o.finish_reason = choices.first().map(|c| c.finish_reason.as_str().to_owned());
            });
            let choices = choices
                .into_iter()
                .map(|c| as_custom_call(&meta, c))
                .collect();
            Ok((meta, choices))
        }
        Err(e) => {
            let timed_out = Instant::now() >= deadline;
            with_outcome(outcome, |o| {
                o.completion_tokens = generated.load(Ordering::SeqCst);
            });
            if matches!(e, RunError::Cancelled) {
                s.metrics
                    .cancelled(if timed_out { "timeout" } else { "client_gone" });
                tracing::info!(request_id = %id.0, reason = if timed_out { "timeout" } else { "client_gone" }, "request cancelled");
            }
            Err(run_error(&e, timed_out, &s.metrics, id))
        }
    }
}

fn overloaded(message: &str) -> Response {
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
    response
}

fn run_error(e: &RunError, timed_out: bool, metrics: &Metrics, id: &RequestId) -> Response {
    let (status, code, message) = describe_run_error(e, timed_out, metrics, id);
    let kind = if status.is_client_error() {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let mut response = error(status, kind, Some(code), message, None);
    let retry_after = match e {
        RunError::Overloaded(_) => Some(1),
        RunError::Upstream {
            fault: crate::UpstreamFault::Unavailable,
            retry_after,
            ..
        } => Some(retry_after.unwrap_or(1)),
        _ => None,
    };
    if let Some(seconds) = retry_after {
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}

/// The status, code and client-facing message of a failed run (internal details are logged
/// with the request id, never sent), counting output rejections in the metrics.
fn describe_run_error(
    e: &RunError,
    timed_out: bool,
    metrics: &Metrics,
    id: &RequestId,
) -> (StatusCode, &'static str, String) {
    match e {
        RunError::OutputRejected { gate, .. } => {
            metrics.rejection(*gate);
            (StatusCode::BAD_GATEWAY, "output_rejected", e.to_string())
        }
        RunError::UpstreamRefused { .. } => {
            (StatusCode::BAD_REQUEST, "upstream_refused", e.to_string())
        }
        RunError::ConstraintFailed(_) => {
            (StatusCode::BAD_REQUEST, "constraint_failed", e.to_string())
        }
        RunError::Upstream { fault, message, .. } => {
            tracing::warn!(request_id = %id.0, cause = %message, "the upstream failed");
            match fault {
                crate::UpstreamFault::Unavailable => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream_unavailable",
                    "the upstream is overloaded; retry later".into(),
                ),
                crate::UpstreamFault::Timeout => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    "the upstream did not answer in time".into(),
                ),
                _ => (
                    StatusCode::BAD_GATEWAY,
                    "upstream_failed",
                    format!(
                        "the upstream did not give a usable answer (request id {})",
                        id.0
                    ),
                ),
            }
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
        RunError::Overloaded(message) => {
            tracing::warn!(request_id = %id.0, cause = %message, "no memory for the request");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "the model's memory is in use by other requests; retry later".into(),
            )
        }
        RunError::Internal(message) => {
            tracing::error!(request_id = %id.0, cause = %message, "generation failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                format!("internal error (request id {})", id.0),
            )
        }
    }
}
