//! The README's MCP examples are read as proviso reads them, so the documentation stays
//! true.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use proviso_contract::IntentClass;
use proviso_mcp::{McpConfig, ToolPolicy, Transport};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp")
        .join(name)
}

#[test]
fn the_examples_are_read() {
    let config = McpConfig::load(&example("servers.json")).unwrap();
    assert_eq!(config.servers.len(), 3);
    assert!(matches!(
        config.servers["fs"].transport,
        Transport::Stdio { .. }
    ));
    assert!(matches!(
        config.servers["docs"].transport,
        Transport::Http { .. }
    ));
    let policy = ToolPolicy::load(&example("editor-policy.json")).unwrap();
    assert!(policy
        .policy
        .caller()
        .permits("fs__write_file", IntentClass::Mutate));
    assert!(!policy
        .policy
        .caller()
        .permits("fs__edit_file", IntentClass::Mutate));
    assert!(!policy.tools["fs__move_file"].enabled);
    assert_eq!(policy.tools["fs__write_file"].policies.len(), 1);
}
