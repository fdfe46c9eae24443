//! Evaluation runners. Each one reads a public corpus or runs a fixed workload and returns a
//! report that can be printed as JSON or Markdown; the CLI only wires arguments to them.

pub mod decode_bench;
pub mod maskbench;
