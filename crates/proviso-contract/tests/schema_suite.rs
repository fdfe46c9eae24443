//! The official JSON-Schema-Test-Suite (draft 2020-12, required tests) run through the schema
//! gate, against a checked-in baseline that may only improve.
//!
//! `tests/schema_suite_baseline.json` lists every case known to fail. The test fails when a
//! case outside that list fails (a regression) and when a listed case passes (the baseline
//! must be ratcheted: rerun with `PROVISO_BLESS=1` to rewrite it).
//!
//! The suite checks conformance to the specification, so it compiles schemas as the spec
//! does: `format` is an annotation and unknown keywords are allowed. Contracts default to the
//! stricter settings (see `SchemaOptions`).

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use proviso_contract::{CompiledSchema, SchemaOptions};
use serde_json::Value;

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

fn remotes(dir: &Path, base: &str, out: &mut HashMap<String, Value>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            remotes(&path, &format!("{base}{name}/"), out);
        } else if name.ends_with(".json") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(
                format!("{base}{name}"),
                serde_json::from_str(&text).unwrap(),
            );
        }
    }
}

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/schema_suite_baseline.json")
}

#[test]
fn json_schema_test_suite_draft2020_12() {
    let root = suite_root();
    let mut resources = HashMap::new();
    remotes(
        &root.join("remotes"),
        "http://localhost:1234/",
        &mut resources,
    );
    let options = SchemaOptions::default()
        .validate_formats(false)
        .allow_unknown_keywords(true)
        .resources(resources)
        .detect_draft(false);
    let mut files: Vec<_> = std::fs::read_dir(root.join("tests/draft2020-12"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let (mut passed, mut total) = (0usize, 0usize);
    let mut failures = BTreeSet::new();
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let groups: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        for group in &groups {
            let compiled = CompiledSchema::compile(&group["schema"], &options);
            for case in group["tests"].as_array().unwrap() {
                total += 1;
                let expected = case["valid"].as_bool().unwrap();
                let ok = match &compiled {
                    Ok(schema) => {
                        // Both entry points must agree with the suite.
                        let valid = schema.is_valid(&case["data"]);
                        let violations = schema.violations(&case["data"]);
                        valid == expected && violations.is_empty() == expected
                    }
                    Err(_) => false,
                };
                if ok {
                    passed += 1;
                } else {
                    failures.insert(format!(
                        "{name} :: {} :: {}",
                        group["description"].as_str().unwrap(),
                        case["description"].as_str().unwrap()
                    ));
                }
            }
        }
    }
    println!("JSON-Schema-Test-Suite draft2020-12: {passed}/{total} passed");

    if std::env::var_os("PROVISO_BLESS").is_some() {
        let baseline = serde_json::json!({
            "suite": "JSON-Schema-Test-Suite draft2020-12 (required tests)",
            "passed": passed,
            "total": total,
            "known_failures": failures,
        });
        std::fs::write(
            baseline_path(),
            serde_json::to_string_pretty(&baseline).unwrap() + "\n",
        )
        .unwrap();
        return;
    }
    let baseline: Value =
        serde_json::from_str(&std::fs::read_to_string(baseline_path()).unwrap()).unwrap();
    let known: BTreeSet<String> = baseline["known_failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let regressions: Vec<_> = failures.difference(&known).collect();
    let improvements: Vec<_> = known.difference(&failures).collect();
    assert!(
        regressions.is_empty(),
        "{} cases regressed:\n{}",
        regressions.len(),
        regressions
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        improvements.is_empty(),
        "{} baseline failures now pass; ratchet the baseline with PROVISO_BLESS=1:\n{}",
        improvements.len(),
        improvements
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        baseline["total"].as_u64(),
        Some(total as u64),
        "the suite changed size"
    );
}
