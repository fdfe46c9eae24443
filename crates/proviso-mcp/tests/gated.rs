//! Calls to a real MCP server (the filesystem server from npm) pass every gate before they
//! are sent: a scripted proposer writes the calls, the agent's gates and the policy decide,
//! and the file system shows what ran.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use proviso_contract::Gate;
use proviso_harness::{
    Agent, AgentConfig, Observer, ProposeRequest, Proposed, Proposer, ProposerError, RunEnd,
    ToolOutcome, Toolbox,
};
use proviso_mcp::{Hub, Limits, McpConfig, ToolPolicy, Toolset};
use serde_json::{json, Value};

struct Scripted(Vec<String>);

impl Proposer for Scripted {
    fn propose(&mut self, _: &ProposeRequest<'_>) -> Result<Proposed, ProposerError> {
        if self.0.is_empty() {
            return Err(ProposerError {
                code: "script_exhausted".into(),
                message: "no more outputs".into(),
            });
        }
        Ok(Proposed {
            text: self.0.remove(0),
            finish: proviso_tools::Finish::read(Some("stop")),
            input_tokens: 10,
            output_tokens: 5,
        })
    }

    fn model_name(&self) -> &str {
        "scripted"
    }
}

struct Quiet;

impl Observer for Quiet {
    fn event(&mut self, _: &proviso_harness::Event<'_>) {}
}

fn filesystem_server() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../../target/mcp-npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        path.exists(),
        "{} is missing: run `scripts/setup --tests`",
        path.display()
    );
    path
}

fn call(tool: &str, arguments: Value) -> String {
    json!({"reasoning": "", "intent": "tool_request", "tool": tool, "arguments": arguments})
        .to_string()
}

fn answer() -> String {
    json!({"reasoning": "", "intent": "final_answer", "answer": "done"}).to_string()
}

/// Runs `script` on an agent over the filesystem server confined to `dir`, under `policy`.
fn run(dir: &Path, policy: &Value, script: Vec<String>) -> proviso_harness::RunReport {
    let config = McpConfig::from_json(&json!({"mcpServers": {"fs": {
        "command": "node", "args": [filesystem_server(), dir]}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let policy = ToolPolicy::from_json(policy).unwrap();
    let listing = hub.list();
    assert!(listing.failures.is_empty(), "{:?}", listing.failures);
    let declared = Toolset::declare(&hub, &listing, &policy);
    assert!(declared.refused.is_empty(), "{:?}", declared.refused);
    let toolbox = declared
        .toolset
        .bind(Toolbox::new(), &declared.specs)
        .unwrap();
    let agent = Agent::new(
        toolbox,
        AgentConfig::default()
            .policy(policy.policy)
            .max_consecutive_rejections(2),
    )
    .unwrap();
    let report = agent.run(&mut Scripted(script), "Write the note.", &mut Quiet);
    hub.shutdown();
    report
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("proviso-mcp-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

fn rejected_at(report: &proviso_harness::RunReport) -> Vec<String> {
    report.rejections.keys().cloned().collect()
}

#[test]
fn the_default_policy_refuses_write_file_at_the_permission_gate() {
    let dir = scratch("default");
    let target = dir.join("out.txt");
    let report = run(
        &dir,
        &json!({}),
        vec![
            call("fs__write_file", json!({"path": target, "content": "hi"})),
            call("fs__write_file", json!({"path": target, "content": "hi"})),
            call("fs__write_file", json!({"path": target, "content": "hi"})),
        ],
    );
    assert!(
        matches!(&report.end, RunEnd::Rejected { rejection, .. } if rejection.gate() == Gate::Permission),
        "{:?}",
        report.end
    );
    assert_eq!(rejected_at(&report), [Gate::Permission.as_str()]);
    assert!(report.executed.is_empty());
    assert!(!target.exists(), "the file system must be left untouched");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_grant_inside_one_directory_allows_exactly_that() {
    let dir = scratch("granted");
    let inside = dir.join("out");
    std::fs::create_dir_all(&inside).unwrap();
    let policy = json!({
        "role": "editor",
        "roles": {"editor": {"classes": ["read"], "tools": ["fs__write_file"]}},
        "tools": {"fs__write_file": {"policies": [
            {"kind": "path_within", "argument": "path", "root": inside}]}}
    });
    let allowed = inside.join("note.txt");
    let outside = dir.join("escape.txt");
    let sneaky = format!("{}/../sneaky.txt", inside.display());
    let report = run(
        &dir,
        &policy,
        vec![
            call(
                "fs__write_file",
                json!({"path": allowed, "content": "kept"}),
            ),
            call("fs__write_file", json!({"path": outside, "content": "no"})),
            call("fs__write_file", json!({"path": sneaky, "content": "no"})),
            answer(),
        ],
    );
    assert_eq!(report.executed.len(), 1, "{:?}", report.executed);
    assert!(matches!(report.executed[0].outcome, ToolOutcome::Ok { .. }));
    assert_eq!(std::fs::read_to_string(&allowed).unwrap(), "kept");
    assert!(!outside.exists());
    assert!(!dir.join("sneaky.txt").exists());
    assert_eq!(report.rejections.get(Gate::Policy.as_str()), Some(&2));
    assert!(
        matches!(report.end, RunEnd::FinalAnswer { .. }),
        "{:?}",
        report.end
    );
    std::fs::remove_dir_all(&dir).ok();
}
