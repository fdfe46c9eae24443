//! Contracts for model output.
//!
//! A [`Contract`] is declared once: a JSON Schema 2020-12, plus what a schema cannot say
//! (application rules, evidence, version labels, declared tools). [`Contract::check`] runs a
//! model output through the gates, in order,
//!
//! ```text
//! transport/stop reason → strict JSON parse → JSON Schema 2020-12 → application rules → evidence
//! ```
//!
//! and returns a [`Verdict`]: a typed, immutable [`Intent`], or a [`Rejection`] naming the
//! first gate that failed, a stable code, a message and where. Nothing in this crate does I/O
//! or has a side effect.
//!
//! ```
//! use proviso_contract::{Code, Contract, Gate};
//! use serde_json::json;
//!
//! let contract = Contract::builder(json!({
//!     "type": "object",
//!     "properties": {"amount_yuan": {"type": "integer"}},
//!     "required": ["amount_yuan"],
//!     "additionalProperties": false
//! }))
//! .build()
//! .unwrap();
//!
//! assert!(contract.check_text(br#"{"amount_yuan": 750}"#).accepted());
//! let verdict = contract.check_text(br#"{"amount_yuan": "750"}"#);
//! assert_eq!(verdict.gate(), Some(Gate::Schema));
//! assert_eq!(verdict.code(), Some(&Code::TypeMismatch));
//! ```

mod answer;
mod calls;
mod code;
mod contract;
mod error;
mod evidence;
pub mod intent;
pub mod lexicon;
mod question;
mod rejection;
mod rules;
mod schema;
mod transport;
mod verdict;

pub use answer::{Answer, AnswerStatus, Citation, KA_ANSWER_V1, KA_ANSWER_V2};
pub use calls::{judge_calls, CallKeys, ProposedCall, ToolCatalog};
pub use code::Code;
pub use contract::{Contract, ContractBuilder, DeclaredTool, Output, OutputKind, VersionCheck};
pub use error::ContractError;
pub use evidence::{Claim, EvidencePolicy, Nearness, SourceDocument, SourceStore};
pub use intent::{Intent, IntentClass, ToolCall};
pub use proviso_core::{Message, MessageToolCall, Role};
pub use question::{abbreviations_of, unabbreviate, AnswerKind, Qualifier, Question};
pub use rejection::{Gate, Location, NextStep, Rejection, Violation};
pub use rules::{FnRule, Ordered, Rule};
pub use schema::{assertion_keywords, keywords_used, CompiledSchema, SchemaOptions};
pub use transport::{
    open_envelope, transport_gate, Finish, Payload, TransportedArguments, TransportedCall,
};
pub use verdict::{GateStatus, Progress, Verdict};
