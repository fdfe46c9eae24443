//! proviso turns what a language model writes into a machine-checkable contract.
//!
//! The model proposes; proviso disposes. A contract is declared once; every model output is
//! run through the same gates in order (transport, parse, schema, application rules, evidence)
//! and comes back either as a typed, immutable [`Intent`] or as a [`Rejection`] that names the
//! gate that failed. With the `local` feature (on by default) proviso also generates on a
//! local GGUF model under a grammar compiled from the same contract.
//!
//! This crate is a facade: it re-exports the focused crates so that users depend on one name.
//! The root holds what a user of contracts reaches for first: declaring a [`Contract`],
//! checking an output into a [`Verdict`], and reading its [`Intent`] or [`Rejection`]. Each
//! focused crate is also reachable whole, under its own module ([`contract`], [`json`],
//! [`tools`], [`harness`], and with the `local` feature `decode`, `llama` and `model`).

pub use proviso_contract::{
    Answer, AnswerStatus, Citation, Claim, Code, CompiledSchema, Contract, ContractBuilder,
    ContractError, DeclaredTool, EvidencePolicy, FnRule, Gate, GateStatus, Intent, IntentClass,
    Location, Message, MessageToolCall, NextStep, Ordered, Output, OutputKind, Progress, Rejection,
    Role, Rule, SchemaOptions, SourceDocument, SourceStore, ToolCall, Verdict, VersionCheck,
    Violation,
};

/// Contracts, gates, verdicts and intents (re-export of `proviso-contract`).
pub mod contract {
    pub use proviso_contract::*;
}

/// Strict JSON parsing (re-export of `proviso-json`).
pub mod json {
    pub use proviso_json::*;
}

/// Tools declared once: registry, call formats, tool gates (re-export of `proviso-tools`).
pub mod tools {
    pub use proviso_tools::*;
}

/// The agent step loop (re-export of `proviso-harness`).
pub mod harness {
    pub use proviso_harness::*;
}

/// Grammar-constrained decoding (re-export of `proviso-decode`).
#[cfg(feature = "local")]
pub mod decode {
    pub use proviso_decode::*;
}

/// The llama.cpp engine (re-export of `proviso-llama`).
#[cfg(feature = "local")]
pub mod llama {
    pub use proviso_llama::*;
}

/// The embedded default model (re-export of `proviso-model`).
#[cfg(feature = "local")]
pub mod model {
    pub use proviso_model::*;
}

/// Gateway mode: proviso's server in front of an OpenAI-compatible upstream (re-export of
/// `proviso-gateway`, which builds without llama.cpp).
#[cfg(feature = "gateway")]
pub use proviso_gateway::{
    GatewayBackend, GatewayConfig, GatewayError, GatewayJob, GatewayWorker, GbnfConverter,
    GbnfError, UpstreamKind,
};
#[cfg(feature = "local")]
pub use proviso_local::{
    judge, CheckedGeneration, LocalBackend, LocalBackendConfig, LocalError, LocalJob, LocalModel,
    LocalProposer, LocalWorker,
};

/// llama.cpp's own JSON Schema to GBNF converter (`json_schema_to_grammar`), for a gateway
/// in front of a llama.cpp upstream: the upstream then reads the grammar its own server
/// would have written for the same schema.
#[cfg(feature = "local")]
#[must_use]
pub fn llama_gbnf() -> GbnfConverter {
    GbnfConverter::new(|schema| {
        proviso_llama::Model::json_schema_to_gbnf(schema).map_err(|e| GbnfError::new(e.to_string()))
    })
}

/// The OpenAI-compatible server (re-export of `proviso-server`).
#[cfg(feature = "gateway")]
pub mod server {
    pub use proviso_server::*;
}
