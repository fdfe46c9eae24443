//! MCP tools offered by a server to its clients: listed on first use, declared once, and
//! every call passed through the gates (schema, argument policy, permission, budget) before
//! it is sent to its server.

use std::sync::Arc;
use std::time::Instant;

use proviso_contract::{Intent, ProposedCall, Rejection};
use proviso_tools::{CallFormat, GatedCall, Proposal, ToolGate, ToolSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::hub::{CallResult, Hub, Limits, Listing, McpTool};
use crate::toolset::{Refused, ToolPolicy, Toolset};
use crate::{McpConfig, McpError};

/// The configured servers and the policy their calls pass.
#[derive(Debug)]
pub struct Service {
    hub: Hub,
    policy: ToolPolicy,
    catalog: OnceCell<Arc<Catalog>>,
}

/// What the servers listed, declared.
#[derive(Debug)]
pub struct Catalog {
    toolset: Toolset,
    listing: Listing,
    specs: Vec<ToolSpec>,
    refused: Vec<Refused>,
    gate: ToolGate,
}

/// One call's record, for the response and the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CallRecord {
    /// The server.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// What came of it.
    pub outcome: CallOutcome,
    /// How long the server took, in milliseconds (0 when nothing was sent).
    pub duration_ms: u64,
}

/// What came of one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallOutcome {
    /// A gate refused it: nothing was sent.
    Rejected {
        /// The gate.
        gate: String,
        /// Its code.
        code: String,
        /// Why.
        message: String,
    },
    /// The server answered.
    Returned {
        /// The result, bounded.
        result: CallResult,
    },
    /// The server failed (a timeout, a crash, a protocol error).
    Failed {
        /// The error's kind ([`McpError::kind`]).
        kind: String,
        /// Why.
        message: String,
    },
}

impl CallOutcome {
    /// A stable name for metrics and logs: `ok`, `tool_error`, `rejected_<gate>` or the
    /// failure's kind.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Rejected { gate, .. } => format!("rejected_{gate}"),
            Self::Returned { result } if result.is_error => "tool_error".into(),
            Self::Returned { .. } => "ok".into(),
            Self::Failed { kind, .. } => kind.clone(),
        }
    }

    /// The text the model reads: the result's text, or what went wrong.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Returned { result } => {
                let mut text = result.text();
                if text.is_empty() {
                    if let Some(structured) = &result.structured {
                        text = structured.to_string();
                    }
                }
                if result.is_error {
                    format!("Error: {text}")
                } else {
                    text
                }
            }
            Self::Rejected {
                gate,
                code,
                message,
            } => format!("Error: refused at the {gate} gate ({code}): {message}"),
            Self::Failed { kind, message } => format!("Error: {kind}: {message}"),
        }
    }
}

impl Service {
    /// A service over `config` under `policy`; no server is started until a request uses it.
    ///
    /// # Errors
    ///
    /// [`McpError::Runtime`] when the hub cannot be made.
    pub fn new(config: McpConfig, policy: ToolPolicy, limits: Limits) -> Result<Self, McpError> {
        Ok(Self {
            hub: Hub::new(config, limits)?,
            policy,
            catalog: OnceCell::new(),
        })
    }

    /// The configured server names (the labels a request may use).
    #[must_use]
    pub fn labels(&self) -> Vec<&str> {
        self.hub.servers()
    }

    /// The hub.
    #[must_use]
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The declared tools, listing every server on first use.
    pub async fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .get_or_init(|| async {
                let listing = self.hub.list_async().await;
                for failure in &listing.failures {
                    tracing::warn!(server = %failure.server, error = %failure.error, "MCP server left out");
                }
                let declared = Toolset::declare(&self.hub, &listing, &self.policy);
                for refused in &declared.refused {
                    tracing::warn!(tool = %refused.tool, reason = %refused.reason, "MCP tool refused");
                }
                let gate = ToolGate::new(
                    Arc::new(declared.registry),
                    CallFormat::Envelope,
                    self.policy.policy.clone(),
                );
                Arc::new(Catalog {
                    toolset: declared.toolset,
                    listing,
                    specs: declared.specs,
                    refused: declared.refused,
                    gate,
                })
            })
            .await
            .clone()
    }

    /// Gates one call and, when every gate passes, sends it to its server.
    pub async fn call(&self, name: &str, arguments: &Value, usage: &Usage) -> CallRecord {
        let catalog = self.catalog().await;
        let (server, tool) = catalog.toolset.route(name).map_or_else(
            || (String::new(), name.to_owned()),
            |(s, t)| (s.to_owned(), t.to_owned()),
        );
        let gated = match catalog.admit(name, arguments, usage) {
            Ok(gated) => gated,
            Err(rejection) => {
                return CallRecord {
                    server,
                    tool,
                    outcome: CallOutcome::Rejected {
                        gate: rejection.gate().as_str().to_owned(),
                        code: rejection.code().as_str().to_owned(),
                        message: rejection.message().to_owned(),
                    },
                    duration_ms: 0,
                }
            }
        };
        let started = Instant::now();
        let result = self.hub.call_async(&server, &tool, gated.arguments()).await;
        let outcome = match result {
            Ok(result) => CallOutcome::Returned { result },
            Err(error) => CallOutcome::Failed {
                kind: error.kind().to_owned(),
                message: error.to_string(),
            },
        };
        CallRecord {
            server,
            tool,
            outcome,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl Catalog {
    /// The declared tools of `server`, in listing order.
    #[must_use]
    pub fn specs_of(&self, server: &str) -> Vec<&ToolSpec> {
        self.specs
            .iter()
            .filter(|s| {
                self.toolset
                    .route(s.name())
                    .is_some_and(|(srv, _)| srv == server)
            })
            .collect()
    }

    /// Every declared tool.
    #[must_use]
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The server and server-side name behind a declared (qualified) name.
    #[must_use]
    pub fn route(&self, qualified: &str) -> Option<(&str, &str)> {
        self.toolset.route(qualified)
    }

    /// The tool as its server listed it.
    #[must_use]
    pub fn listed(&self, server: &str, tool: &str) -> Option<&McpTool> {
        self.listing
            .tools
            .iter()
            .find(|t| t.server == server && t.name == tool)
    }

    /// Tools left out, with why.
    #[must_use]
    pub fn refused(&self) -> &[Refused] {
        &self.refused
    }

    /// Servers that could not be listed, with why.
    #[must_use]
    pub fn failures(&self) -> &[crate::ServerFailure] {
        &self.listing.failures
    }

    /// Runs every gate on one call: the schema, the argument policies, the permission and
    /// the budget (with `usage` as the run's so far). Only a call that passes becomes a
    /// [`GatedCall`].
    ///
    /// # Errors
    ///
    /// The first gate the call fails.
    pub fn admit(
        &self,
        name: &str,
        arguments: &Value,
        usage: &Usage,
    ) -> Result<GatedCall, Rejection> {
        let proposal = Proposal {
            calls: vec![ProposedCall {
                name: name.to_owned(),
                arguments: arguments.clone(),
                pointer: String::new(),
            }],
            other: None,
            rationale: None,
        };
        let verdict = self
            .gate
            .check_proposal(proposal, usage, proviso_contract::Progress::new());
        match verdict.into_result()? {
            Intent::ToolRequest { calls, .. } => match calls.first() {
                Some(call) => self.gate.admit(call),
                None => Err(Rejection::new(
                    proviso_contract::Gate::Schema,
                    proviso_contract::Code::UnknownTool,
                    format!("`{name}` is not a declared tool"),
                    proviso_contract::Location::default(),
                )),
            },
            other => Err(Rejection::new(
                proviso_contract::Gate::Schema,
                proviso_contract::Code::UnsupportedIntent,
                format!("a call was expected, not `{}`", other.kind()),
                proviso_contract::Location::default(),
            )),
        }
    }
}

/// The server executes MCP tools through the service: listings become the tools a request's
/// `mcp` tool may name, and each call passes the gates before it is sent.
impl proviso_server::ServerTools for Service {
    fn labels(&self) -> Vec<String> {
        self.labels().into_iter().map(str::to_owned).collect()
    }

    fn tools(&self) -> proviso_server::BoxFuture<'_, Vec<proviso_server::ServerTool>> {
        Box::pin(async move {
            let catalog = self.catalog().await;
            catalog
                .specs()
                .iter()
                .filter_map(|spec| {
                    let (server, tool) = catalog.route(spec.name())?;
                    let annotations = catalog
                        .listed(server, tool)
                        .map_or(Value::Null, |t| t.annotations.clone());
                    Some(
                        proviso_server::ServerTool::new(
                            spec.name(),
                            server,
                            tool,
                            spec.description(),
                            spec.parameters().clone(),
                        )
                        .annotations(annotations)
                        .read_only(spec.class() == proviso_contract::IntentClass::Read),
                    )
                })
                .collect()
        })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a Value,
        calls: u64,
    ) -> proviso_server::BoxFuture<'a, proviso_server::ServerCall> {
        Box::pin(async move {
            // The budget gate judges this call as the conversation's `calls`-th.
            let usage = Usage {
                tool_calls: calls.saturating_sub(1),
                ..Usage::default()
            };
            let record = self.call(name, arguments, &usage).await;
            let text = record.outcome.text();
            let call = proviso_server::ServerCall::new(record.outcome.label(), text.clone())
                .duration_ms(record.duration_ms);
            match &record.outcome {
                CallOutcome::Returned { result } if !result.is_error => call.output(text),
                CallOutcome::Returned { result } => call.error(serde_json::json!({
                    "type": "mcp_tool_execution_error",
                    "content": result.content})),
                // The Responses API's protocol error, naming the gate: the call was never
                // sent.
                CallOutcome::Rejected { gate, code, message } => call.error(serde_json::json!({
                    "type": "mcp_protocol_error", "code": -32003,
                    "message": format!("refused at the {gate} gate ({code}): {message}"),
                    "gate": gate, "rejection": code})),
                CallOutcome::Failed { kind, message } => call.error(serde_json::json!({
                    "type": "mcp_protocol_error", "code": -32000, "kind": kind, "message": message})),
            }
        })
    }
}
