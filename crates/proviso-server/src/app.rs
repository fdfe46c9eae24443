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

use crate::conn::{ConnLimits, GuardedBody};
use crate::metrics::Metrics;
use crate::prepare::{panic_message, PrepareError, Preparer};
use crate::responses;
use proviso_backend::wire::{self, custom_input, token_logprobs, ErrorBody, InvalidRequest};
use proviso_backend::{
    Backend, ChoiceResult, Delta, RunError, Sink, SteeringNote, ToolCallOut, Worker,
};

mod body;
mod config;
mod errors;
mod layers;
mod mcp;
mod render;
mod sse;
mod workers;

use body::read_json;
pub use config::ServerConfig;
use errors::{
    describe_run_error, error, internal_error, invalid, overloaded, run_error, too_large,
};
use layers::{guard_host, request_log, require_key, with_outcome, RequestId, SharedOutcome};
use render::{as_custom_call, chunk, event, full_response, Meta};
use sse::{sse_stream, StreamState};
pub use workers::Workers;
use workers::{spawn_workers, Job, WorkerEvent};

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
            return Err(invalid(InvalidRequest::from(e)))
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
