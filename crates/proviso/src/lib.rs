//! proviso turns what a language model writes into a machine-checkable contract.
//!
//! The model proposes; proviso disposes. A contract is declared once; every model output is
//! run through the same gates in order (transport, parse, schema, application rules, evidence)
//! and comes back either as a typed, immutable [`Intent`] or as a [`Rejection`] that names the
//! gate that failed.
//!
//! This crate is a facade: it re-exports the focused crates so that users depend on one name.

pub use proviso_contract::*;

/// Strict JSON parsing (re-export of `proviso-json`).
pub mod json {
    pub use proviso_json::*;
}
