//! The runners on small slices of their workloads, with the real default model's tokenizer.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::sync::OnceLock;

use proviso::decode::{CompileOptions, Constrainer};
use proviso::LocalModel;
use proviso_eval::{decode_bench, maskbench};
use serde_json::json;

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| LocalModel::open(None, &mut |_| {}).unwrap())
}

fn maskbench_dir() -> PathBuf {
    let shared = std::env::var_os("PROVISO_SHARED").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        PathBuf::from,
    );
    shared.join("data/maskbench")
}

#[test]
fn maskbench_slice_has_no_defects() {
    let constrainer =
        Constrainer::any_tokenization(local().tokenizer().clone(), &CompileOptions::default())
            .unwrap();
    let options = maskbench::Options {
        limit: Some(40),
        filter: Some("Github_easy".into()),
        relax: true,
    };
    let report = maskbench::run(&maskbench_dir(), &constrainer, &options, &mut |_, _| {}).unwrap();
    println!("{}", report.markdown());
    assert_eq!(report.schemas, 40);
    assert!(report.defects.is_empty(), "{:?}", report.defects);
    assert!(report.valid_instances > 0 && report.invalid_instances > 0);
    // Every schema the grammar serves must accept (nearly) all of its valid instances.
    assert!(
        report.valid_accepted * 10 >= report.valid_instances * 9,
        "{} of {}",
        report.valid_accepted,
        report.valid_instances
    );
    assert!(report.mask_us.p50 > 0.0);
}

#[test]
fn decode_bench_modes_all_produce_valid_objects() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tool": {"enum": ["search_trials", "get_arm", "get_document"]},
            "arguments": {
                "type": "object",
                "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"}},
                "required": ["trial_id"],
                "additionalProperties": false
            }
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false
    });
    let report = decode_bench::run(
        local(),
        &schema,
        "Get the arms of trial NCT04123456.",
        120,
        1,
    )
    .unwrap();
    println!("{}", report.markdown());
    assert_eq!(report.rows.len(), 4);
    let constrained = &report.rows[0];
    assert!(constrained.valid, "{constrained:?}");
    assert!(constrained.forced_tokens > 0);
    assert!(constrained.forward_passes < constrained.tokens);
    // The unconstrained replay writes the very same object.
    assert_eq!(report.rows[2].output, constrained.output);
}

#[test]
fn when2call_runs_through_the_servers_auto_which_asks_for_what_is_missing() {
    // One tool that needs a city: asked without one, the server's `auto` asks for it (a
    // `clarification` reply, worded from the declaration); asked with one, it calls.
    let tool = json!({
        "name": "get_weather",
        "description": "Get tomorrow's weather forecast for a city.",
        "parameters": {
            "type": "dict",
            "required": ["city"],
            "properties": {"city": {"type": "string", "description": "The city to look up"}}
        }
    })
    .to_string();
    let cases = [
        (
            "ask",
            "What will the weather be like tomorrow?",
            "request_for_info",
        ),
        (
            "call",
            "What will the weather be like in Lisbon tomorrow?",
            "tool_call",
        ),
    ];
    let lines: Vec<String> = cases
        .iter()
        .map(|(id, question, expected)| {
            json!({"uuid": id, "question": question, "correct_answer": expected, "tools": [tool]})
                .to_string()
        })
        .collect();
    let path = std::env::temp_dir().join(format!("proviso-w2c-{}.jsonl", std::process::id()));
    std::fs::write(&path, lines.join("\n")).unwrap();
    let report = proviso_eval::when2call::run(local(), &path, None, 120, &mut |_, _| {}).unwrap();
    std::fs::remove_file(&path).ok();
    println!("{}", report.markdown());
    let chosen: Vec<(&str, &str)> = report
        .results
        .iter()
        .map(|c| (c.id.as_str(), c.chosen.as_str()))
        .collect();
    assert_eq!(chosen, [("ask", "request_for_info"), ("call", "tool_call")]);
    assert!(
        report.results[0].output.contains("city"),
        "{:?}",
        report.results[0]
    );
}
