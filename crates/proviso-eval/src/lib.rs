//! Evaluation runners. Each one reads a public corpus or runs a fixed workload and returns a
//! report that can be printed as JSON or Markdown; the CLI only wires arguments to them.

pub mod audit;
pub mod batch_bench;
pub mod bfcl;
pub mod decode_bench;
pub mod maskbench;
mod served;
pub mod when2call;

/// An evaluation that could not run (unreadable data, a failed generation).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);
