//! The agent over a real MCP server (the filesystem server from npm, installed by
//! `scripts/setup --tests`) on the real default model, greedy: a question about a file the
//! server serves ends with a cited answer whose evidence gate checked the quote against
//! what the tool returned, and a question the file cannot answer ends in an abstention (a
//! tool's error line, whose path repeats the question's, answers nothing).

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;

use proviso::harness::{RunEnd, Toolbox};
use proviso_mcp::{Hub, Limits, McpConfig, ToolPolicy, Toolset};
use serde_json::json;

mod support;

const LOG: &str = "Boiler maintenance log\n\
The boiler in the east wing was serviced on 3 March 2026 by Calder Heating.\n\
The next service is due in September 2026.\n\
The pressure relief valve was replaced during the March service.\n";

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

#[test]
fn the_agent_answers_from_a_file_the_filesystem_server_serves() {
    let dir = std::env::temp_dir().join(format!("proviso-mcp-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let file = dir.join("boiler.txt");
    std::fs::write(&file, LOG).unwrap();
    let config = McpConfig::from_json(&json!({"mcpServers": {"fs": {
        "command": "node", "args": [filesystem_server(), dir]}}}))
    .unwrap();
    let hub = Hub::new(config, Limits::default()).unwrap();
    let listing = hub.list();
    let declared = Toolset::declare(&hub, &listing, &ToolPolicy::default());
    assert!(declared.specs.len() >= 10, "{:?}", declared.refused);
    let toolbox = declared
        .toolset
        .bind(Toolbox::new(), &declared.specs)
        .unwrap();
    let agent = proviso_demo::own_agent(None, toolbox, ToolPolicy::default().policy).unwrap();
    let path = file.display();
    let cases = [
        (
            format!("Read {path}: when was the boiler serviced?"),
            Some("3 March 2026"),
        ),
        (
            format!("What was replaced during the March service, according to {path}?"),
            Some("pressure relief valve"),
        ),
        (format!("Read {path}: who painted the boiler room?"), None),
        // What follows the question says where to look: it asks nothing, and its capital
        // is no name the file must state.
        (
            format!("When is the next service due? See {path}"),
            Some("September 2026"),
        ),
    ];
    let mut failures = Vec::new();
    // One engine for every question, as an application keeps one: the tools' declarations
    // open every prompt, and their computation is reused from one run to the next.
    let mut proposer = support::proposer();
    for (question, fact) in &cases {
        let started = std::time::Instant::now();
        let report = agent.run(&mut proposer, question, &mut ());
        println!(
            "{question} ({:.1} s, {:?})\n  → {:?}",
            started.elapsed().as_secs_f64(),
            report.usage,
            report.end
        );
        match (&report.end, fact) {
            (RunEnd::FinalAnswer { answer }, Some(fact)) => {
                let text = answer["answer"].as_str().unwrap_or_default();
                let cited = answer["citations"].as_array().unwrap();
                if !text.contains(fact) {
                    failures.push(format!("{question}: {text:?} does not state {fact:?}"));
                }
                if !cited
                    .iter()
                    .all(|c| c["source_id"].as_str().unwrap().starts_with("fs__"))
                {
                    failures.push(format!("{question}: cites {cited:?}"));
                }
            }
            (RunEnd::Abstained { .. }, None) => {}
            (end, _) => failures.push(format!("{question}: ended {end:?}")),
        }
    }
    hub.shutdown();
    std::fs::remove_dir_all(&dir).ok();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
