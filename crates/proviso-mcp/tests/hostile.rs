//! A scripted hostile server: every misbehaviour is a typed outcome, none hangs or crashes
//! proviso.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use proviso_mcp::{Hub, Limits, McpConfig, McpError, ToolPolicy, Toolset};
use serde_json::{json, Map, Value};

fn hub(timeout_ms: u64) -> Hub {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile_server.py");
    let config = McpConfig::from_json(&json!({"mcpServers": {"hostile": {
        "command": "python3", "args": [script], "timeout": timeout_ms}}}))
    .unwrap();
    Hub::new(config, Limits::default().max_result_bytes(4096)).unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

#[test]
fn every_misbehaviour_is_a_typed_outcome() {
    let hub = hub(2000);
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    assert_eq!(listing.tools.len(), 6);

    // A schema keyword the grammar cannot enforce: that tool is refused by name, the
    // others are declared.
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    assert_eq!(declared.specs.len(), 5);
    assert_eq!(declared.refused.len(), 1);
    assert_eq!(declared.refused[0].tool, "hostile__weird");
    assert!(
        declared.refused[0].reason.contains("dependentSchemas"),
        "{}",
        declared.refused[0].reason
    );

    let ok = hub
        .call("hostile", "echo", &args(json!({"text": "hello"})))
        .unwrap();
    assert_eq!(ok.text(), "hello");
    assert!(!ok.is_error);

    // 50 MB: read, bounded, and cut with a typed note.
    let flood = hub.call("hostile", "flood", &Map::new()).unwrap();
    let note = flood.truncated.expect("a truncation note");
    assert_eq!(note.original_bytes, 50 * 1024 * 1024);
    assert_eq!(note.kept_bytes, 4096);
    assert_eq!(flood.text().len(), 4096);

    let failed = hub.call("hostile", "fail", &Map::new()).unwrap();
    assert!(failed.is_error);

    // Renamed between two listings: the change is reported, and the old name is a typed
    // protocol error, not a crash.
    let second = hub.list();
    assert!(
        second
            .changes
            .iter()
            .any(|c| c.contains("`echo` is no longer listed")),
        "{:?}",
        second.changes
    );
    assert!(second
        .changes
        .iter()
        .any(|c| c.contains("`echo_v2` is newly listed")));
    let gone = hub
        .call("hostile", "echo", &args(json!({"text": "x"})))
        .unwrap_err();
    assert!(matches!(gone, McpError::Protocol { .. }), "{gone:?}");
    // No answer: the timeout, then the server is started afresh for the next call.
    let started = Instant::now();
    let hung = hub.call("hostile", "hang", &Map::new()).unwrap_err();
    assert!(matches!(hung, McpError::Timeout { .. }), "{hung:?}");
    assert_eq!(hung.kind(), "mcp_timeout");
    assert!(started.elapsed() < Duration::from_secs(10));

    // A crash mid-call: the connection closed, a typed outcome.
    let crashed = hub.call("hostile", "crash", &Map::new()).unwrap_err();
    assert!(
        matches!(crashed, McpError::Closed { .. } | McpError::Protocol { .. }),
        "{crashed:?}"
    );
    // And the server comes back for the next call (a fresh process, which lists `echo`).
    let again = hub
        .call("hostile", "echo", &args(json!({"text": "back"})))
        .unwrap();
    assert_eq!(again.text(), "back");

    hub.shutdown();
}

#[test]
fn a_server_that_cannot_start_is_a_listing_failure() {
    let config = McpConfig::from_json(&json!({"mcpServers": {
        "ghost": {"command": "/nonexistent/proviso-mcp-server"},
        "mute": {"command": "sleep", "args": ["30"], "timeout": 500}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let started = Instant::now();
    let listing = hub.list();
    assert!(listing.tools.is_empty());
    let errors: Vec<&str> = listing.failures.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("could not be started"), "{errors:?}");
    assert!(errors[1].contains("within 500 ms"), "{errors:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let unknown = hub.call("nobody", "x", &Map::new()).unwrap_err();
    assert_eq!(unknown.kind(), "mcp_unknown_server");
}
