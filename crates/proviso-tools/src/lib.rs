//! Tools declared once.
//!
//! A [`ToolSpec`] names a tool, describes it for the model, types its arguments, gives its
//! intent class, argument policies and cost. From a [`Registry`] of them proviso derives three
//! things that therefore cannot drift apart:
//!
//! - the model-facing text ([`instructions`]),
//! - the grammar of a step in each [`CallFormat`] ([`CallFormat::grammar`]),
//! - the gates a proposed step passes before anything runs ([`ToolGate::check`]):
//!   transport, parse, schema, argument policy, permission and budget.
//!
//! Nothing here does I/O or runs a tool; the harness does that, and only with calls from an
//! accepted verdict.
//!
//! ```
//! use std::sync::Arc;
//! use proviso_tools::{CallFormat, Finish, Policy, Registry, ToolGate, ToolSpec, Usage};
//! use proviso_contract::{Gate, IntentClass};
//! use serde_json::json;
//!
//! let registry = Registry::new(vec![ToolSpec::new(
//!     "get_arm",
//!     "Reads one arm of a clinical trial.",
//!     IntentClass::Read,
//!     json!({"type": "object", "properties": {"trial_id": {"type": "string"}},
//!            "required": ["trial_id"], "additionalProperties": false}),
//! )])
//! .unwrap();
//! let gate = ToolGate::new(Arc::new(registry), CallFormat::Pythonic, Policy::default());
//! let ok = gate.check(r#"[get_arm(trial_id="NCT04123456")]"#, Finish::Stop, &Usage::default());
//! assert!(ok.accepted());
//! let bad = gate.check(r#"[get_arm(trial=1)]"#, Finish::Stop, &Usage::default());
//! assert_eq!(bad.gate(), Some(Gate::Schema));
//! ```

mod check;
mod error;
pub mod export;
pub mod format;
mod gated;
mod policy;
pub mod provenance;
mod registry;
mod render;
pub mod steer;

pub use check::{Finish, ToolGate};
pub use error::ToolError;
pub use format::{
    finite_arguments, CallFormat, CallGrammar, Grammar, GrammarOptions, Proposal, ProposedCall,
    ToolChoice,
};
pub use gated::GatedCall;
pub use policy::{ArgumentPolicy, Budget, Exceeded, Grants, Policy, Usage};
pub use provenance::AutoChoice;
pub use registry::{Registry, Tool, ToolSpec};
pub use render::{instructions, write_call};
