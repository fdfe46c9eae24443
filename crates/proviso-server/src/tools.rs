//! Tools the server executes itself (an MCP server's, through `proviso serve --mcp`): what
//! the server needs of them, so that the protocol (the Responses API's `mcp` tool, the chat
//! extension, approvals, the bounded loop) stays here and the execution (connections,
//! gates) stays with whoever implements [`ServerTools`].

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// A future the server awaits.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One tool a server label offers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerTool {
    /// The name the model calls it by (unique across labels, e.g. `fs__read_file`).
    pub name: String,
    /// The label (server) it belongs to.
    pub label: String,
    /// Its name on that server.
    pub tool: String,
    /// Its description.
    pub description: String,
    /// Its arguments schema.
    pub parameters: Value,
    /// The annotations its server sent (hints).
    pub annotations: Value,
    /// Whether it is declared a read (it changes nothing).
    pub read_only: bool,
}

impl ServerTool {
    /// A tool of `label`.
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        label: impl Into<String>,
        tool: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Self {
            name: name.into(),
            label: label.into(),
            tool: tool.into(),
            description: description.into(),
            parameters,
            annotations: Value::Null,
            read_only: false,
        }
    }
}

proviso_macros::setters!(ServerTool {
    annotations: Value,
    read_only: bool,
});

/// What one executed (or refused) call came to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerCall {
    /// A stable outcome for metrics: `ok`, `tool_error`, `rejected_<gate>`, or a failure's
    /// kind.
    pub outcome: String,
    /// The text the model reads next (the result, or what went wrong).
    pub text: String,
    /// The output, when the tool returned one.
    pub output: Option<String>,
    /// The error, in the Responses API's form (`{"type": "mcp_tool_execution_error", …}`
    /// or `mcp_protocol_error`, which also reports a call a gate refused), when there is
    /// one.
    pub error: Option<Value>,
    /// How long the tool took, in milliseconds.
    pub duration_ms: u64,
}

impl ServerCall {
    /// A call's record.
    #[must_use]
    pub fn new(outcome: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            outcome: outcome.into(),
            text: text.into(),
            output: None,
            error: None,
            duration_ms: 0,
        }
    }

    /// Sets [`ServerCall::output`].
    #[must_use]
    pub fn output(mut self, output: String) -> Self {
        self.output = Some(output);
        self
    }

    /// Sets [`ServerCall::error`].
    #[must_use]
    pub fn error(mut self, error: Value) -> Self {
        self.error = Some(error);
        self
    }
}

proviso_macros::setters!(ServerCall { duration_ms: u64 });

/// Tools the server executes for its clients.
pub trait ServerTools: Send + Sync + 'static {
    /// The labels a request may name (`server_label`).
    fn labels(&self) -> Vec<String>;

    /// Every tool of every label (listing the servers on first use).
    fn tools(&self) -> BoxFuture<'_, Vec<ServerTool>>;

    /// Gates `name` with `arguments` (as the `calls`-th tool call of its conversation, for
    /// the budget) and, when every gate passes, executes it.
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a Value,
        calls: u64,
    ) -> BoxFuture<'a, ServerCall>;
}
