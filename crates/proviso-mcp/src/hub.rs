//! The connections to every configured server.
//!
//! A [`Hub`] owns a small runtime of its own, so that the synchronous agent and the async
//! server use it alike. Each server is started when it is first needed, initialized once,
//! and shut down when the hub is ([`Hub::shutdown`], or on drop). Every request is bounded
//! by the server's timeout, and every result by [`Limits`]: a server that crashes, hangs or
//! floods is an [`McpError`] or a truncated [`CallResult`], never a hang of proviso's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams,
};
use rmcp::service::RunningService;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::Mutex;

use crate::config::{McpConfig, ServerConfig, Transport};
use crate::McpError;

/// Bounds on what a server may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The most text of one call's result kept for the model; the rest is cut with a note.
    pub max_result_bytes: usize,
    /// The largest single message read from a server; a longer one is dropped by the
    /// transport (and the request it answered then times out).
    pub max_message_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_result_bytes: 32 * 1024,
            max_message_bytes: 64 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// Sets [`Limits::max_result_bytes`].
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }
}

/// A tool as one server lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpTool {
    /// The server's name in the configuration.
    pub server: String,
    /// The tool's name on that server.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its `inputSchema`.
    pub input_schema: Value,
    /// Its `annotations`, as sent (hints only: a server may lie).
    pub annotations: Value,
}

/// What listing every server came to.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Listing {
    /// Every tool of every server that answered.
    pub tools: Vec<McpTool>,
    /// Servers that could not be started or listed, with why.
    pub failures: Vec<ServerFailure>,
    /// Tools that appeared or vanished since the previous listing of their server.
    pub changes: Vec<String>,
}

/// A server that did not list its tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServerFailure {
    /// The server.
    pub server: String,
    /// Why, as a typed error's text.
    pub error: String,
}

/// One call's result, bounded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CallResult {
    /// The content blocks: text kept (cut to the limit), resources with their text, and
    /// binary blocks (images, audio) replaced by their type and size.
    pub content: Vec<Value>,
    /// The structured result, when the server sent one within the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Whether the server flagged the result as a tool error (`isError`).
    pub is_error: bool,
    /// Set when the result was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
}

/// A note that a result was cut to the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Truncated {
    /// The result's text as the server sent it, in bytes.
    pub original_bytes: usize,
    /// What was kept.
    pub kept_bytes: usize,
}

impl CallResult {
    /// The result's text: every text block and every resource's text, in order.
    #[must_use]
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        for block in &self.content {
            if let Some(text) = block.get("text").and_then(Value::as_str) {
                parts.push(text.to_owned());
            } else if let Some(text) = block.pointer("/resource/text").and_then(Value::as_str) {
                parts.push(text.to_owned());
            }
        }
        parts.join("\n")
    }
}

struct Connection {
    service: RunningService<RoleClient, InitializeRequestParams>,
    /// The child process of a stdio server; killed when dropped.
    child: Option<tokio::process::Child>,
}

struct Server {
    name: String,
    config: ServerConfig,
    connection: Mutex<Option<Connection>>,
    /// The names of the previous listing, to report renamed tools.
    listed: Mutex<Option<BTreeSet<String>>>,
}

struct Inner {
    runtime: Option<tokio::runtime::Runtime>,
    servers: BTreeMap<String, Arc<Server>>,
    limits: Limits,
}

/// The configured servers, started lazily.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("servers", &self.inner.servers.keys().collect::<Vec<_>>())
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub over `config`; no server is started yet.
    ///
    /// # Errors
    ///
    /// [`McpError::Runtime`] when the runtime cannot be made.
    pub fn new(config: McpConfig, limits: Limits) -> Result<Self, McpError> {
        // reqwest's rustls needs a process-wide crypto provider; installing it twice is
        // harmless (the second attempt reports the first).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("proviso-mcp")
            .enable_all()
            .build()
            .map_err(|e| McpError::Runtime {
                message: e.to_string(),
            })?;
        let servers = config
            .servers
            .into_iter()
            .map(|(name, config)| {
                let server = Server {
                    name: name.clone(),
                    config,
                    connection: Mutex::new(None),
                    listed: Mutex::new(None),
                };
                (name, Arc::new(server))
            })
            .collect();
        Ok(Self {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                servers,
                limits,
            }),
        })
    }

    /// The configured server names.
    #[must_use]
    pub fn servers(&self) -> Vec<&str> {
        self.inner.servers.keys().map(String::as_str).collect()
    }

    /// The longest timeout of any configured server.
    #[must_use]
    pub fn slowest(&self) -> Duration {
        self.inner
            .servers
            .values()
            .map(|s| s.config.timeout)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// The limits results are held to.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        // Present until the last clone is dropped.
        self.inner
            .runtime
            .as_ref()
            .unwrap_or_else(|| unreachable!())
    }

    /// Lists every server's tools, starting the servers that are not running. A server
    /// that fails is reported in [`Listing::failures`]; the others are listed.
    ///
    /// Blocks; from async code use [`Hub::list_async`].
    #[must_use]
    pub fn list(&self) -> Listing {
        let hub = self.clone();
        self.runtime()
            .block_on(async move { hub.list_inner().await })
    }

    /// [`Hub::list`], awaited on the hub's own runtime from any other.
    pub async fn list_async(&self) -> Listing {
        let hub = self.clone();
        self.runtime()
            .spawn(async move { hub.list_inner().await })
            .await
            .unwrap_or_default()
    }

    async fn list_inner(&self) -> Listing {
        let mut listing = Listing::default();
        for server in self.inner.servers.values() {
            match self.list_server(server).await {
                Ok(tools) => {
                    let names: BTreeSet<String> = tools.iter().map(|t| t.name.clone()).collect();
                    let mut previous = server.listed.lock().await;
                    if let Some(before) = previous.as_ref() {
                        for gone in before.difference(&names) {
                            listing.changes.push(format!(
                                "`{}`: tool `{gone}` is no longer listed",
                                server.name
                            ));
                        }
                        for new in names.difference(before) {
                            listing
                                .changes
                                .push(format!("`{}`: tool `{new}` is newly listed", server.name));
                        }
                    }
                    *previous = Some(names);
                    listing.tools.extend(tools);
                }
                Err(error) => listing.failures.push(ServerFailure {
                    server: server.name.clone(),
                    error: error.to_string(),
                }),
            }
        }
        listing
    }

    async fn list_server(&self, server: &Server) -> Result<Vec<McpTool>, McpError> {
        let mut guard = self.connected(server).await?;
        let Some(connection) = guard.as_mut() else {
            return Err(McpError::Closed {
                server: server.name.clone(),
            });
        };
        let peer = connection.service.peer().clone();
        let listed = tokio::time::timeout(server.config.timeout, peer.list_all_tools()).await;
        let tools = match listed {
            Err(_) => {
                *guard = None;
                return Err(McpError::Timeout {
                    server: server.name.clone(),
                    operation: "tools/list".into(),
                    after_ms: millis(server.config.timeout),
                });
            }
            Ok(Err(error)) => {
                let error = service_error(&server.name, "tools/list", error);
                if matches!(error, McpError::Closed { .. }) {
                    *guard = None;
                }
                return Err(error);
            }
            Ok(Ok(tools)) => tools,
        };
        Ok(tools
            .into_iter()
            .map(|tool| McpTool {
                server: server.name.clone(),
                name: tool.name.to_string(),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*tool.input_schema).clone()),
                annotations: tool
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok())
                    .unwrap_or(Value::Null),
            })
            .collect())
    }

    /// Calls `tool` on `server` with `arguments`, starting the server if needed.
    ///
    /// Blocks; from async code use [`Hub::call_async`].
    ///
    /// # Errors
    ///
    /// [`McpError`]: an unknown server, a start or protocol failure, a timeout, or a
    /// server that closed its connection (it is started again on the next call).
    pub fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<CallResult, McpError> {
        let hub = self.clone();
        let (server, tool, arguments) = (server.to_owned(), tool.to_owned(), arguments.clone());
        self.runtime()
            .block_on(async move { hub.call_inner(&server, &tool, arguments).await })
    }

    /// [`Hub::call`], awaited on the hub's own runtime from any other.
    ///
    /// # Errors
    ///
    /// As [`Hub::call`].
    pub async fn call_async(
        &self,
        server: &str,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<CallResult, McpError> {
        let hub = self.clone();
        let (server_name, tool, arguments) =
            (server.to_owned(), tool.to_owned(), arguments.clone());
        self.runtime()
            .spawn(async move { hub.call_inner(&server_name, &tool, arguments).await })
            .await
            .map_err(|e| McpError::Runtime {
                message: e.to_string(),
            })?
    }

    async fn call_inner(
        &self,
        server_name: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallResult, McpError> {
        let Some(server) = self.inner.servers.get(server_name) else {
            return Err(McpError::UnknownServer {
                server: server_name.to_owned(),
            });
        };
        let started = Instant::now();
        let peer = {
            let mut guard = self.connected(server).await?;
            match guard.as_mut() {
                Some(connection) => connection.service.peer().clone(),
                None => {
                    return Err(McpError::Closed {
                        server: server.name.clone(),
                    })
                }
            }
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let answer = tokio::time::timeout(server.config.timeout, peer.call_tool(params)).await;
        let outcome = match answer {
            Err(_) => Err(McpError::Timeout {
                server: server.name.clone(),
                operation: format!("tools/call `{tool}`"),
                after_ms: millis(server.config.timeout),
            }),
            Ok(Err(error)) => Err(service_error(
                &server.name,
                &format!("tools/call `{tool}`"),
                error,
            )),
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                Ok(bound(&value, self.inner.limits.max_result_bytes))
            }
        };
        if let Err(McpError::Closed { .. } | McpError::Timeout { .. }) = &outcome {
            // A crashed server is started again on the next call; one that hung is
            // restarted too, so that a late answer cannot be taken for the next call's.
            *server.connection.lock().await = None;
        }
        tracing::info!(
            server = %server.name,
            tool,
            duration_ms = millis(started.elapsed()),
            outcome = match &outcome {
                Ok(r) if r.is_error => "tool_error",
                Ok(_) => "ok",
                Err(e) => e.kind(),
            },
            "mcp call"
        );
        outcome
    }

    /// The server's connection, started and initialized if it is not running.
    async fn connected<'a>(
        &self,
        server: &'a Server,
    ) -> Result<tokio::sync::MutexGuard<'a, Option<Connection>>, McpError> {
        let mut guard = server.connection.lock().await;
        if guard
            .as_ref()
            .is_some_and(|c| c.service.is_transport_closed() || c.service.is_closed())
        {
            *guard = None;
        }
        if guard.is_none() {
            let started =
                tokio::time::timeout(server.config.timeout, start(server, self.inner.limits)).await;
            match started {
                Err(_) => {
                    return Err(McpError::Timeout {
                        server: server.name.clone(),
                        operation: "initialize".into(),
                        after_ms: millis(server.config.timeout),
                    })
                }
                Ok(Err(error)) => return Err(error),
                Ok(Ok(connection)) => *guard = Some(connection),
            }
        }
        Ok(guard)
    }

    /// The protocol version each running server agreed on.
    #[must_use]
    pub fn protocol_versions(&self) -> BTreeMap<String, String> {
        let hub = self.clone();
        self.runtime().block_on(async move {
            let mut versions = BTreeMap::new();
            for server in hub.inner.servers.values() {
                if let Some(connection) = server.connection.lock().await.as_ref() {
                    if let Some(info) = connection.service.peer_info() {
                        versions.insert(server.name.clone(), info.protocol_version.to_string());
                    }
                }
            }
            versions
        })
    }

    /// Closes every connection: a stdio server's input is closed, and the process is
    /// killed if it has not exited within two seconds.
    pub fn shutdown(&self) {
        let hub = self.clone();
        self.runtime().block_on(async move {
            for server in hub.inner.servers.values() {
                let taken = server.connection.lock().await.take();
                if let Some(Connection { service, child }) = taken {
                    let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
                    if let Some(mut child) = child {
                        if tokio::time::timeout(Duration::from_secs(2), child.wait())
                            .await
                            .is_err()
                        {
                            let _ = child.kill().await;
                        }
                    }
                }
            }
        });
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Children are killed as their handles drop (`kill_on_drop`); the runtime's tasks
        // are abandoned rather than waited for, so dropping a hub never blocks.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn start(server: &Server, limits: Limits) -> Result<Connection, McpError> {
    let info = InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("proviso", env!("CARGO_PKG_VERSION")),
    );
    let failed = |message: String| McpError::Start {
        server: server.name.clone(),
        message,
    };
    let (service, child) = match &server.config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut process = tokio::process::Command::new(command);
            process
                .args(args)
                .envs(env)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            if let Some(cwd) = cwd {
                process.current_dir(cwd);
            }
            let mut child = process
                .spawn()
                .map_err(|e| failed(format!("cannot run `{command}`: {e}")))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(failed(
                    "the child's standard streams are not available".into(),
                ));
            };
            if let Some(stderr) = child.stderr.take() {
                tokio::spawn(log_stderr(server.name.clone(), stderr));
            }
            let transport = AsyncRwTransport::new_client(stdout, stdin)
                .with_max_line_length(limits.max_message_bytes);
            (info.serve(transport).await, Some(child))
        }
        Transport::Http { url, headers } => {
            let mut custom = HashMap::new();
            for (key, value) in headers {
                // Validated when the configuration was read.
                if let (Ok(k), Ok(v)) = (
                    http::HeaderName::from_bytes(key.as_bytes()),
                    http::HeaderValue::from_str(value),
                ) {
                    custom.insert(k, v);
                }
            }
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(custom)
                .max_json_response_size(limits.max_message_bytes)
                .max_sse_event_size(limits.max_message_bytes);
            let transport = StreamableHttpClientTransport::from_config(config);
            (info.serve(transport).await, None)
        }
    };
    let service = service.map_err(|e| McpError::Initialize {
        server: server.name.clone(),
        message: e.to_string(),
    })?;
    Ok(Connection { service, child })
}

/// A stdio server's standard error, logged at debug level in bounded pieces (a server
/// that floods it neither fills memory nor blocks on a full pipe).
async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut buffer = vec![0_u8; 4096];
    loop {
        match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buffer[..n]);
                tracing::debug!(server = %server, stderr = %text.trim_end(), "mcp server stderr");
            }
        }
    }
}

fn service_error(server: &str, operation: &str, error: ServiceError) -> McpError {
    match error {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::Closed {
            server: server.to_owned(),
        },
        ServiceError::Timeout { timeout } => McpError::Timeout {
            server: server.to_owned(),
            operation: operation.to_owned(),
            after_ms: millis(timeout),
        },
        ServiceError::McpError(data) => McpError::Protocol {
            server: server.to_owned(),
            message: format!("{operation}: {}", data.message),
        },
        other => McpError::Protocol {
            server: server.to_owned(),
            message: format!("{operation}: {other}"),
        },
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A `CallToolResult` (as JSON) held to `limit` bytes of text: text blocks and resource
/// text are kept in order until the limit and the rest is cut at a character boundary;
/// binary data is never passed on.
fn bound(result: &Value, limit: usize) -> CallResult {
    let mut budget = limit;
    let mut original = 0_usize;
    let mut content = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for block in blocks {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        match kind {
            "text" => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                original += text.len();
                let kept = cut(text, budget);
                budget -= kept.len();
                content.push(json!({"type": "text", "text": kept}));
            }
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = resource.get("uri").cloned().unwrap_or(Value::Null);
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => {
                        original += text.len();
                        let kept = cut(text, budget);
                        budget -= kept.len();
                        content.push(
                            json!({"type": "resource", "resource": {"uri": uri, "text": kept}}),
                        );
                    }
                    None => content.push(json!({"type": "resource", "resource": {"uri": uri,
                        "omitted": "binary resource content is not passed on"}})),
                }
            }
            "resource_link" => content.push(json!({"type": "resource_link",
                "uri": block.get("uri"), "name": block.get("name")})),
            other => {
                let bytes = block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
                content.push(json!({"type": other, "mimeType": block.get("mimeType"),
                    "omitted_bytes": bytes}));
            }
        }
    }
    let mut structured = result.get("structuredContent").cloned();
    if let Some(value) = &structured {
        let size = value.to_string().len();
        original += size;
        if size > budget {
            structured = None;
        }
    }
    let kept = limit - budget + structured.as_ref().map_or(0, |v| v.to_string().len());
    CallResult {
        content,
        structured,
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        truncated: (kept < original).then_some(Truncated {
            original_bytes: original,
            kept_bytes: kept,
        }),
    }
}

/// The longest prefix of `text` of at most `limit` bytes, at a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_bounded_with_a_note() {
        let big = "é".repeat(1000);
        let result = bound(
            &json!({"content": [{"type": "text", "text": big}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                "isError": false}),
            101,
        );
        assert_eq!(result.content[0]["text"].as_str().unwrap().len(), 100);
        assert_eq!(result.content[1]["omitted_bytes"], 4);
        assert_eq!(
            result.truncated,
            Some(Truncated {
                original_bytes: 2000,
                kept_bytes: 100
            })
        );
        let small = bound(
            &json!({"content": [{"type": "text", "text": "ok"}], "structuredContent": {"a": 1}}),
            100,
        );
        assert_eq!(small.truncated, None);
        assert_eq!(small.structured, Some(json!({"a": 1})));
        assert_eq!(small.text(), "ok");
    }
}
