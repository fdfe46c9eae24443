//! Tools from Model Context Protocol servers, behind proviso's gates.
//!
//! A [`Hub`] connects to the servers of an `mcpServers` configuration ([`McpConfig`]) with
//! the official Rust SDK (`rmcp`), over stdio or streamable HTTP. [`Toolset::declare`]
//! turns what the servers list into [`ToolSpec`](proviso_tools::ToolSpec)s, declared once:
//! each `inputSchema` becomes the arguments schema (refused by name where it cannot be
//! enforced), each name is prefixed with its server's, and the annotations give the intent
//! class, which a [`ToolPolicy`] may override per tool. The grammar, the tool text and the
//! gates then come from the same registry as every other tool's, so a call reaches a server
//! only after the schema, policy, permission and budget gates have all passed.

mod config;
mod hub;
mod service;
mod toolset;

pub use config::{McpConfig, ServerConfig, Transport, DEFAULT_TIMEOUT};
pub use hub::{CallResult, Hub, Limits, Listing, McpTool, ServerFailure, Truncated};
pub use service::{CallOutcome, CallRecord, Catalog, Service};
pub use toolset::{qualified, Declared, Refused, ToolOverride, ToolPolicy, Toolset, SEPARATOR};

/// Why an MCP server or call failed. Each kind is a typed tool outcome for the model, never
/// a crash of proviso's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration or policy file cannot be used.
    #[error("MCP configuration: {message}")]
    Config {
        /// What is wrong, naming the server and key.
        message: String,
    },
    /// The hub's runtime failed.
    #[error("MCP runtime: {message}")]
    Runtime {
        /// Why.
        message: String,
    },
    /// No server of that name is configured.
    #[error("no MCP server `{server}` is configured")]
    UnknownServer {
        /// The name.
        server: String,
    },
    /// The server could not be started.
    #[error("MCP server `{server}` could not be started: {message}")]
    Start {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The server did not complete initialization.
    #[error("MCP server `{server}` failed to initialize: {message}")]
    Initialize {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The server did not answer in time.
    #[error("MCP server `{server}` did not answer {operation} within {after_ms} ms")]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        operation: String,
        /// The timeout.
        after_ms: u64,
    },
    /// The server closed the connection (it crashed or exited); it is started again on
    /// the next call.
    #[error("MCP server `{server}` closed the connection")]
    Closed {
        /// The server.
        server: String,
    },
    /// The server answered with a protocol error.
    #[error("MCP server `{server}`: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// The error it sent.
        message: String,
    },
}

impl McpError {
    /// A stable code for the kind, for tool outcomes, metrics and logs.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config { .. } => "mcp_config",
            Self::Runtime { .. } => "mcp_runtime",
            Self::UnknownServer { .. } => "mcp_unknown_server",
            Self::Start { .. } => "mcp_start_failed",
            Self::Initialize { .. } => "mcp_initialize_failed",
            Self::Timeout { .. } => "mcp_timeout",
            Self::Closed { .. } => "mcp_server_closed",
            Self::Protocol { .. } => "mcp_protocol_error",
        }
    }
}
