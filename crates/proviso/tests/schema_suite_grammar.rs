//! The official JSON-Schema-Test-Suite (draft 2020-12, required tests) run through the
//! grammar: each schema is compiled by the `Constrainer` over the default model's tokenizer,
//! with the options proviso ships (anything it cannot enforce is refused), and every instance
//! is walked token by token through the grammar.
//!
//! Two questions, each against the checked-in baseline
//! `tests/schema_suite_grammar_baseline.json`, which may only improve:
//! - **soundness**: does the grammar of a schema it compiled reject every invalid instance?
//!   An invalid instance the grammar admits is a grammar that claims to enforce what it does
//!   not (the gates still reject it, but the decoder could write it);
//! - **completeness**: does it accept every valid instance? A valid instance it rejects is
//!   output the model can never write (for example keys in another order than the schema's).
//!
//! Schemas the constrainer refuses are counted, not failures: refusing is the contract. The
//! test fails on a failure outside the baseline (a regression) and on a baseline failure that
//! now passes (rerun with `PROVISO_BLESS=1` to ratchet).

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use proviso::decode::{CompileOptions, ConstraintError, ConstraintSpec};
use proviso::LocalModel;
use serde_json::{json, Value};

fn suite_root() -> PathBuf {
    let shared = std::env::var_os("PROVISO_SHARED").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"),
        PathBuf::from,
    );
    let dir = shared.join("data/json-schema-test-suite");
    assert!(
        dir.is_dir(),
        "JSON-Schema-Test-Suite not found at {}; set PROVISO_SHARED to the shared/ folder",
        dir.display()
    );
    dir
}

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schema_suite_grammar_baseline.json")
}

#[test]
fn json_schema_test_suite_through_the_grammar() {
    let local = LocalModel::open(None, &mut |event| eprintln!("{event:?}")).unwrap();
    let constrainer = local.constrainer();
    // Instances are serialized compactly; the grammar allows bounded free whitespace instead
    // of proviso's fixed separators, as the MaskBench runner does.
    let options = CompileOptions::default().max_json_whitespace(Some(12));
    let mut files: Vec<_> = std::fs::read_dir(suite_root().join("tests/draft2020-12"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let (mut groups_total, mut compiled_groups, mut refused, mut errors) = (0, 0, 0, 0);
    let (mut valid_total, mut invalid_total) = (0usize, 0usize);
    let mut valid_rejected = BTreeSet::new();
    let mut invalid_accepted = BTreeSet::new();
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let groups: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for group in &groups {
            groups_total += 1;
            let spec = ConstraintSpec::JsonSchema(group["schema"].clone());
            let compiled = match constrainer.compile(&spec, &options) {
                Ok(compiled) => compiled,
                Err(ConstraintError::Unsupported { .. }) => {
                    refused += 1;
                    continue;
                }
                Err(_) => {
                    // Remote references, schemas llguidance cannot build, an empty
                    // language: not served either.
                    errors += 1;
                    continue;
                }
            };
            compiled_groups += 1;
            for case in group["tests"].as_array().unwrap() {
                let id = format!(
                    "{name} :: {} :: {}",
                    group["description"].as_str().unwrap(),
                    case["description"].as_str().unwrap()
                );
                let text = serde_json::to_string(&case["data"]).unwrap();
                let accepted =
                    compiled.accepts(&constrainer.tokenize(text.as_bytes()), &mut |_| {});
                if case["valid"].as_bool().unwrap() {
                    valid_total += 1;
                    if !accepted {
                        valid_rejected.insert(id);
                    }
                } else {
                    invalid_total += 1;
                    if accepted {
                        invalid_accepted.insert(id);
                    }
                }
            }
        }
    }
    println!(
        "schemas: {groups_total} ({compiled_groups} compiled, {refused} refused by keyword, \
         {errors} not compiled); valid instances accepted: {}/{valid_total}; invalid \
         instances rejected by the grammar: {}/{invalid_total}",
        valid_total - valid_rejected.len(),
        invalid_total - invalid_accepted.len()
    );
    let current = json!({
        "suite": "JSON-Schema-Test-Suite draft2020-12 (required tests), through the grammar",
        "schemas": groups_total,
        "compiled": compiled_groups,
        "refused": refused,
        "not_compiled": errors,
        "valid_instances": valid_total,
        "invalid_instances": invalid_total,
        "valid_rejected": valid_rejected,
        "invalid_accepted": invalid_accepted,
    });
    if std::env::var_os("PROVISO_BLESS").is_some() {
        std::fs::write(
            baseline_path(),
            serde_json::to_string_pretty(&current).unwrap() + "\n",
        )
        .unwrap();
        return;
    }
    let baseline: Value =
        serde_json::from_str(&std::fs::read_to_string(baseline_path()).unwrap()).unwrap();
    let listed = |key: &str| -> BTreeSet<String> {
        baseline[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let mut problems = Vec::new();
    for (key, now) in [
        ("valid_rejected", &valid_rejected),
        ("invalid_accepted", &invalid_accepted),
    ] {
        let known = listed(key);
        for regression in now.difference(&known) {
            problems.push(format!("new {key}: {regression}"));
        }
        for fixed in known.difference(now) {
            problems.push(format!(
                "{key} now passes (ratchet with PROVISO_BLESS=1): {fixed}"
            ));
        }
    }
    // Fewer compiled schemas would hide failures behind refusals: the count may only grow.
    if current["compiled"].as_u64() < baseline["compiled"].as_u64() {
        problems.push(format!(
            "fewer schemas compile: {} (baseline {})",
            current["compiled"], baseline["compiled"]
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
