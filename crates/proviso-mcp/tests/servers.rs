//! Real MCP servers from the package registries, installed into `target/` by
//! `scripts/setup --tests`: the time and git servers (PyPI), and the filesystem and everything
//! servers (npm), over stdio and streamable HTTP.

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proviso_contract::IntentClass;
use proviso_mcp::{Hub, Limits, McpConfig, ToolPolicy, Toolset};
use serde_json::{json, Map, Value};

fn target() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// An installed server's entry point; a clear failure when setup has not run.
fn installed(relative: &str) -> PathBuf {
    let path = target().join(relative);
    assert!(
        path.exists(),
        "{} is missing: run `scripts/setup --tests`",
        path.display()
    );
    path.canonicalize().unwrap_or(path)
}

fn npm_server(name: &str) -> PathBuf {
    installed(&format!(
        "mcp-npm/node_modules/@modelcontextprotocol/{name}/dist/index.js"
    ))
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

#[test]
fn the_time_server_is_called_with_schema_valid_arguments() {
    let pythonpath = installed("pymcp");
    let config = McpConfig::from_json(&json!({"mcpServers": {"time": {
        "command": "python3", "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        "env": {"PYTHONPATH": pythonpath}}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    assert!(declared.refused.is_empty(), "{:?}", declared.refused);
    let names: Vec<&str> = declared.specs.iter().map(|s| s.name()).collect();
    assert!(names.contains(&"time__get_current_time"), "{names:?}");
    // The declared schema is the server's: a call the gates accept is one it accepts.
    let registry = proviso_tools::Registry::new(declared.specs.clone()).unwrap();
    let tool = registry.get("time__get_current_time").unwrap();
    let arguments = json!({"timezone": "Europe/Paris"});
    assert!(tool.schema().is_valid(&arguments));
    assert!(!tool.schema().is_valid(&json!({"timezone": 3})));
    let result = hub
        .call("time", "get_current_time", &args(arguments))
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(result.text().contains("Europe/Paris"), "{}", result.text());
    let versions = hub.protocol_versions();
    println!("negotiated: {versions:?}");
    assert!(versions["time"].starts_with("20"), "{versions:?}");
    hub.shutdown();
}

#[test]
fn the_filesystem_server_reads_and_its_write_is_a_mutation() {
    let dir = std::env::temp_dir().join(format!("proviso-mcp-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("notes.txt"),
        "The boiler was serviced on 3 March.\n",
    )
    .unwrap();
    let config = McpConfig::from_json(&json!({"mcpServers": {"fs": {
        "command": "node", "args": [npm_server("server-filesystem"), dir]}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    let class = |name: &str| {
        declared
            .specs
            .iter()
            .find(|s| s.name() == name)
            .map(|s| s.class())
    };
    assert_eq!(class("fs__read_text_file"), Some(IntentClass::Read));
    assert_eq!(class("fs__write_file"), Some(IntentClass::Mutate));
    let path = dir.join("notes.txt");
    let result = hub
        .call(
            "fs",
            "read_text_file",
            &args(json!({"path": path.to_str().unwrap()})),
        )
        .unwrap();
    assert!(result.text().contains("serviced on 3 March"), "{result:?}");
    println!("negotiated: {:?}", hub.protocol_versions());
    hub.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_git_server_reads_a_repository_and_its_writes_are_mutations() {
    let dir = std::env::temp_dir().join(format!("proviso-mcp-git-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(dir.join("notes.txt"), "first\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.invalid",
        "commit",
        "-qm",
        "Add the boiler notes",
    ]);
    let pythonpath = installed("pymcp");
    let config = McpConfig::from_json(&json!({"mcpServers": {"git": {
        "command": "python3", "args": ["-m", "mcp_server_git", "--repository", dir],
        "env": {"PYTHONPATH": pythonpath}}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    let class = |name: &str| {
        declared
            .specs
            .iter()
            .find(|s| s.name() == name)
            .map(|s| s.class())
    };
    assert_eq!(
        class("git__git_commit"),
        Some(IntentClass::Mutate),
        "{:?}",
        declared.refused
    );
    let log = hub
        .call("git", "git_log", &args(json!({"repo_path": dir})))
        .unwrap();
    assert!(!log.is_error, "{log:?}");
    assert!(
        log.text().contains("Add the boiler notes"),
        "{}",
        log.text()
    );
    hub.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the server never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_everything_server_over_streamable_http() {
    let port = free_port();
    let server = npm_server("server-everything");
    let _child = Killed(
        Command::new("node")
            .arg(&server)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .current_dir(server.parent().unwrap_or(Path::new(".")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    let config = McpConfig::from_json(&json!({"mcpServers": {"every": {
        "url": format!("http://127.0.0.1:{port}/mcp"), "headers": {"X-Proviso-Test": "1"}}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    assert!(
        declared.specs.iter().any(|s| s.name() == "every__echo"),
        "{:?} refused {:?}",
        declared.specs.iter().map(|s| s.name()).collect::<Vec<_>>(),
        declared.refused
    );
    let result = hub
        .call("every", "echo", &args(json!({"message": "over http"})))
        .unwrap();
    assert!(result.text().contains("over http"), "{result:?}");
    println!("negotiated: {:?}", hub.protocol_versions());
    hub.shutdown();
}
