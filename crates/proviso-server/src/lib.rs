//! proviso's OpenAI-compatible server.
//!
//! `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `GET /health` and
//! `GET /metrics`, over any [`Backend`]. This crate knows the OpenAI wire format, HTTP status
//! codes, admission, streaming and metrics; it knows nothing of grammars or gates, which are
//! the backend's (the `proviso` crate's `LocalBackend` for the local model).
//!
//! Status codes: 400 for a body that is not JSON or asks for something proviso cannot
//! enforce (naming it), 422 for well-formed JSON that is not a valid request, 413 for a body
//! over the limit, 415 for a wrong content type, 503 with `Retry-After` when every worker is
//! busy and the queue is full, 504 past the per-request timeout, 502 when every attempt's
//! output was rejected by a gate. Error bodies are OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` and never carry internal details.

mod app;
mod conn;
mod metrics;
mod prepare;
mod responses;
mod tools;

pub use app::{serve, serve_with_metrics, ServerConfig, Workers};
pub use metrics::Metrics;
/// The seam the server serves (re-export of `proviso-backend`).
pub use proviso_backend as backend;
pub use proviso_backend::wire;
pub use proviso_backend::{
    call_id, Backend, ChoiceResult, Delta, FinishReason, GenerationRequest, OutputConstraint,
    PromptInput, RejectedRequest, Reply, RunError, SamplingParams, Sink, SteeringNote, Timings,
    TokenLogprobOut, ToolCallOut, ToolChoiceRequest, UpstreamFault, Worker, WorkerError,
};
pub use tools::{BoxFuture, ServerCall, ServerTool, ServerTools};
