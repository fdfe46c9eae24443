//! The layers every request passes: one log line per request (with its id), the `Host` and
//! `Origin` check, and the API key.

use super::*;

/// The request id, set by the logging layer on every request and echoed as `x-request-id`.
#[derive(Debug, Clone)]
pub(crate) struct RequestId(pub(crate) String);

/// What a generation request reports for its log line, filled in as it runs (for a stream,
/// when it ends).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) finish_reason: Option<String>,
    /// For a stream: how it ended (`ok`, `timeout`, `cancelled`, or an error code).
    pub(crate) stream_end: Option<String>,
}

pub(super) type SharedOutcome = Arc<std::sync::Mutex<Outcome>>;

pub(super) fn with_outcome(outcome: &SharedOutcome, f: impl FnOnce(&mut Outcome)) {
    // The outcome only feeds a log line; a poisoned lock still holds usable numbers.
    let mut guard = outcome
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut guard);
}

/// Logs one line per request when its response ends (for a stream, after its last event):
/// method, route, status, latency, tokens, finish reason, request id.
pub(super) struct LogOnEnd {
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
pub(super) struct GoneBeforeResponse {
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

pub(super) async fn request_log<B: Backend>(
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
pub(super) fn host_name(authority: &str) -> &str {
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

pub(super) fn host_allowed(allowed: &[String], authority: &str) -> bool {
    let name = host_name(authority.trim());
    allowed.iter().any(|a| {
        let a = a.trim_start_matches('[').trim_end_matches(']');
        a.eq_ignore_ascii_case(name)
    })
}

pub(super) async fn guard_host<B: Backend>(
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
pub(super) fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let a = Sha256::digest(given);
    let b = Sha256::digest(expected);
    a.as_slice().ct_eq(b.as_slice()).into()
}

pub(super) async fn require_key<B: Backend>(
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
