//! The harness: where proposals are disposed of.
//!
//! The model proposes a step; the [`Agent`] runs it through the gates of
//! [`proviso_tools::ToolGate`] (transport, parse, schema, argument policy, permission,
//! budget) and only then dispatches its calls to the [`Toolbox`], each on its own thread
//! with a timeout. A rejected step becomes an observation for the model and is retried a
//! bounded number of times. Every model call and tool execution is a `tracing` span with the
//! OpenTelemetry GenAI attribute names, and [`JsonlTrace`] writes raw output and parsed
//! intents as separate JSON Lines records.
//!
//! The model is anything that implements [`Proposer`]; the `proviso` crate provides one for
//! the local llama.cpp model, and tests use scripted ones.

mod agent;
pub mod steer;
mod toolbox;
mod trace;

pub use agent::{
    Agent, AgentConfig, CounterSnapshot, Counters, Event, Message, Observer, ProposeRequest,
    Proposed, Proposer, ProposerError, RunEnd, RunReport,
};
pub use steer::{FinishCause, Steering, StepPlan};
pub use toolbox::{ExecutedCall, ToolFailure, ToolOutcome, Toolbox};
pub use trace::JsonlTrace;
