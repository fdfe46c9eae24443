//! The server's configuration: limits, sizes, timeouts and access control.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Limits, sizes and access control.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Worker threads, each generating one request at a time.
    pub workers: usize,
    /// Requests that may wait for a worker; beyond that, 503 with `Retry-After`.
    pub queue: usize,
    /// Largest request body, in bytes (413 beyond; a larger `Content-Length` is refused
    /// before any of the body is read).
    pub body_limit: usize,
    /// Longest a request may take, queueing included (504 beyond).
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's headers, from its first byte (or from
    /// connecting, for a first request); the connection is closed beyond.
    pub header_timeout: Duration,
    /// Longest a client may take to send a request's body once its headers are in (408
    /// beyond).
    pub body_timeout: Duration,
    /// Longest a keep-alive connection may stay idle between requests.
    pub idle_timeout: Duration,
    /// Most open connections; beyond, a new connection gets a 503 and is closed.
    pub max_connections: usize,
    /// On shutdown, how long connections with a request in flight may take to finish before
    /// they are dropped. Idle and stalled connections are closed at once.
    pub shutdown_timeout: Duration,
    /// Threads that compile requests' constraints (each with a large stack of its own).
    pub compile_threads: usize,
    /// Longest a request's constraint may take to compile (400 beyond).
    pub compile_timeout: Duration,
    /// When set, every `/v1` route (and `/metrics` when it shares the port) needs
    /// `Authorization: Bearer <key>`, compared in constant time.
    pub api_key: Option<String>,
    /// When set, requests whose `Host` (or `Origin`, when present) names another host are
    /// refused with 403, so that a web page cannot reach the API through DNS rebinding.
    /// Entries are host names or addresses without a port; `None` accepts any host.
    pub allowed_hosts: Option<Vec<String>>,
    /// Further names the model answers to, besides the backend's id (listed by
    /// `/v1/models`, accepted as a request's `model`).
    pub model_aliases: Vec<String>,
    /// Accept any `model` name; otherwise a request naming a model the server does not
    /// serve gets 404 `model_not_found`.
    pub any_model: bool,
    /// Responses kept in memory for `previous_response_id` (the most recent ones; 0 keeps
    /// none).
    pub responses_kept: usize,
    /// Most bytes the kept responses take, each counted with its whole conversation; the
    /// oldest go first, and a conversation larger than this alone is refused with
    /// `store: true`.
    pub responses_bytes: usize,
    /// How long a response is kept.
    pub responses_age: Duration,
    /// Tools the server executes itself (`proviso serve --mcp`), offered to requests that
    /// name their label in an `mcp` tool.
    pub server_tools: Option<Arc<dyn crate::ServerTools>>,
    /// Most rounds of server-executed calls one request may run before its next response
    /// must answer.
    pub max_tool_rounds: usize,
}

impl ServerConfig {
    /// Sets [`ServerConfig::server_tools`].
    #[must_use]
    pub fn server_tools(mut self, tools: Arc<dyn crate::ServerTools>) -> Self {
        self.server_tools = Some(tools);
        self
    }

    /// Sets [`ServerConfig::max_tool_rounds`].
    #[must_use]
    pub fn max_tool_rounds(mut self, rounds: usize) -> Self {
        self.max_tool_rounds = rounds;
        self
    }
}

proviso_macros::setters!(ServerConfig {
    workers: usize,
    queue: usize,
    body_limit: usize,
    request_timeout: Duration,
    header_timeout: Duration,
    body_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
    shutdown_timeout: Duration,
    compile_threads: usize,
    compile_timeout: Duration,
    api_key: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    model_aliases: Vec<String>,
    any_model: bool,
    responses_kept: usize,
    responses_bytes: usize,
    responses_age: Duration,
});

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is a secret: never in a log line.
        f.debug_struct("ServerConfig")
            .field("workers", &self.workers)
            .field("queue", &self.queue)
            .field("body_limit", &self.body_limit)
            .field("request_timeout", &self.request_timeout)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("compile_threads", &self.compile_threads)
            .field("compile_timeout", &self.compile_timeout)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("model_aliases", &self.model_aliases)
            .field("any_model", &self.any_model)
            .field("responses_kept", &self.responses_kept)
            .field("responses_bytes", &self.responses_bytes)
            .field("responses_age", &self.responses_age)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            queue: 16,
            body_limit: 2 * 1024 * 1024,
            request_timeout: Duration::from_secs(120),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 256,
            shutdown_timeout: Duration::from_secs(30),
            compile_threads: 2,
            compile_timeout: Duration::from_secs(10),
            api_key: None,
            allowed_hosts: None,
            model_aliases: Vec::new(),
            any_model: false,
            responses_kept: 256,
            responses_bytes: 64 * 1024 * 1024,
            responses_age: Duration::from_secs(3600),
            server_tools: None,
            max_tool_rounds: 4,
        }
    }
}

impl ServerConfig {
    /// The host names a server bound to `address` accepts by default: the loopback names when
    /// it is a loopback address (a page in a local browser must not reach it under another
    /// name), any host otherwise.
    #[must_use]
    pub fn default_allowed_hosts(address: &std::net::SocketAddr) -> Option<Vec<String>> {
        address.ip().is_loopback().then(|| {
            ["localhost", "127.0.0.1", "::1", "[::1]"]
                .iter()
                .map(|h| (*h).to_owned())
                .collect()
        })
    }
}
