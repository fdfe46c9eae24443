//! Tools bound to the functions that execute them.
//!
//! A [`Toolbox`] pairs each [`ToolSpec`] with its function, so the declaration the model
//! reads, the schema the gates check and the arguments the function receives are one thing.
//! The toolbox only ever runs a [`GatedCall`], which only the tool gate constructs
//! ([`ToolGate::admit`](proviso_tools::ToolGate::admit)), each call on its own thread with a
//! timeout.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use proviso_contract::{IntentClass, ToolCall};
use proviso_tools::{GatedCall, Registry, ToolError, ToolSpec};
use serde::Serialize;
use serde_json::{Map, Value};

/// A tool function's own failure (bad input it could not serve, a missing record, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{message}")]
#[non_exhaustive]
pub struct ToolFailure {
    /// A stable code, e.g. `not_found`.
    pub code: String,
    /// What went wrong, shown to the model.
    pub message: String,
}

impl ToolFailure {
    /// A failure with `code` and `message`.
    #[must_use]
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// What running one call came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool returned a result.
    Ok {
        /// The result.
        result: Value,
    },
    /// The tool reported a failure.
    Failed {
        /// The failure.
        #[serde(flatten)]
        failure: ToolFailure,
    },
    /// The tool did not finish in time; its result, if any, is discarded.
    TimedOut {
        /// The timeout.
        after_ms: u64,
    },
}

impl ToolOutcome {
    /// The `error.type` of a failed outcome.
    #[must_use]
    pub fn error_type(&self) -> Option<&str> {
        match self {
            Self::Ok { .. } => None,
            Self::Failed { failure } => Some(&failure.code),
            Self::TimedOut { .. } => Some("timeout"),
        }
    }
}

type ToolFn = Arc<dyn Fn(&Map<String, Value>) -> Result<Value, ToolFailure> + Send + Sync>;

/// Declared tools and their functions.
#[derive(Clone)]
pub struct Toolbox {
    registry: Arc<Registry>,
    functions: BTreeMap<String, ToolFn>,
    timeout: Duration,
    executions: Arc<AtomicU64>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.registry.names())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for Toolbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Toolbox {
    /// An empty toolbox with a 10-second timeout per call.
    #[must_use]
    pub fn new() -> Self {
        Self {
            registry: Arc::new(Registry::default()),
            functions: BTreeMap::new(),
            timeout: Duration::from_secs(10),
            executions: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sets the per-call timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Binds `spec` to `function`, which receives the validated arguments object.
    ///
    /// # Errors
    ///
    /// [`ToolError`] when the declaration is invalid or the name is taken.
    pub fn bind(
        mut self,
        spec: ToolSpec,
        function: impl Fn(&Map<String, Value>) -> Result<Value, ToolFailure> + Send + Sync + 'static,
    ) -> Result<Self, ToolError> {
        let name = spec.name().to_owned();
        Arc::make_mut(&mut self.registry).add(spec)?;
        self.functions.insert(name, Arc::new(function));
        Ok(self)
    }

    /// Binds a function of a typed argument struct: the schema is derived from `A`, and the
    /// function receives `A` deserialized from the validated arguments. Declaring the struct
    /// is declaring the tool.
    ///
    /// # Errors
    ///
    /// [`ToolError`] when the derived declaration is invalid or the name is taken.
    pub fn bind_typed<A, F>(
        self,
        name: &str,
        description: &str,
        class: IntentClass,
        configure: impl FnOnce(ToolSpec) -> ToolSpec,
        function: F,
    ) -> Result<Self, ToolError>
    where
        A: schemars::JsonSchema + serde::de::DeserializeOwned,
        F: Fn(A) -> Result<Value, ToolFailure> + Send + Sync + 'static,
    {
        let spec = configure(ToolSpec::typed::<A>(name, description, class));
        self.bind(spec, move |arguments| {
            let typed: A =
                serde_json::from_value(Value::Object(arguments.clone())).map_err(|e| {
                    ToolFailure::new(
                        "invalid_arguments",
                        format!("arguments do not fit the tool's type: {e}"),
                    )
                })?;
            function(typed)
        })
    }

    /// The registry of bound tools.
    #[must_use]
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// How many calls have been executed (started) so far, over every clone of this toolbox.
    /// Tests use it to prove that a rejected step ran nothing.
    #[must_use]
    pub fn executions(&self) -> u64 {
        self.executions.load(Ordering::SeqCst)
    }

    /// Runs one accepted call on its own thread, waiting at most the timeout. A tool that
    /// does not return in time is reported as timed out and its thread is left to finish on
    /// its own; its result is discarded.
    #[must_use]
    pub fn execute(&self, call: &GatedCall) -> (ToolOutcome, Duration) {
        let started = Instant::now();
        let Some(function) = self.functions.get(call.name()).cloned() else {
            // Only calls to declared tools pass the gates, and every declared tool is bound.
            return (
                ToolOutcome::Failed {
                    failure: ToolFailure::new(
                        "unbound_tool",
                        format!("`{}` has no function", call.name()),
                    ),
                },
                started.elapsed(),
            );
        };
        self.executions.fetch_add(1, Ordering::SeqCst);
        let arguments = call.arguments().clone();
        let (send, receive) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name(format!("tool-{}", call.name()))
            .spawn(move || {
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| function(&arguments)));
                // The receiver may have given up; a late result is dropped.
                let _ = send.send(result);
            });
        if let Err(e) = spawned {
            return (
                ToolOutcome::Failed {
                    failure: ToolFailure::new(
                        "spawn_failed",
                        format!("cannot start the tool: {e}"),
                    ),
                },
                started.elapsed(),
            );
        }
        let outcome = match receive.recv_timeout(self.timeout) {
            Ok(Ok(Ok(result))) => ToolOutcome::Ok { result },
            Ok(Ok(Err(failure))) => ToolOutcome::Failed { failure },
            Ok(Err(_)) => ToolOutcome::Failed {
                failure: ToolFailure::new("tool_panicked", "the tool failed unexpectedly"),
            },
            Err(_) => ToolOutcome::TimedOut {
                after_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            },
        };
        (outcome, started.elapsed())
    }
}

/// One executed call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ExecutedCall {
    /// The step it was proposed in.
    pub step: u64,
    /// The accepted call.
    pub call: ToolCall,
    /// What running it came to.
    pub outcome: ToolOutcome,
    /// How long it ran.
    pub duration_ms: u64,
}
