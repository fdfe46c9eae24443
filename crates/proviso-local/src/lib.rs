//! proviso's local runtime: the embedded default model (or any GGUF) generating in-process
//! on llama.cpp under grammars compiled from proviso's contracts.
//!
//! - [`LocalModel`] loads the model, its tokenizer and chat template once; [`judge`] runs a
//!   generation's text through a contract's gates.
//! - [`LocalProposer`] is the model as the harness's [`proviso_harness::Proposer`].
//! - [`LocalBackend`] is the model behind the OpenAI-compatible server: it is where the
//!   two-phase `tool_choice: "auto"` policy lives, and the server, the BFCL runner and the
//!   When2Call runner all send their requests through it, so the published numbers are the
//!   shipped server's.

mod local;
mod proposer;
mod serve;

pub use local::{judge, CheckedGeneration, LocalError, LocalModel};
pub use proposer::LocalProposer;
pub use serve::{LocalBackend, LocalBackendConfig, LocalJob, LocalWorker};
