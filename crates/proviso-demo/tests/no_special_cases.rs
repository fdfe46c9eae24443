//! No special cases: the code that steers, ranks and judges must work for documents it has
//! never seen, so no source file of the library crates, outside the demo's own agents, names
//! a bundled corpus's trial ids, acronyms or drug names. Comments and test modules may (they
//! describe and exercise the code with the bundled examples), and so may the evaluation
//! runners' and the CLI benchmark's inputs (the breaker suite's attack prompts, a default
//! benchmark question); code that decides may not.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

/// The bundled trials' ids, acronyms and the drugs their arms give.
fn corpus_terms() -> Vec<String> {
    let text = include_str!("../../../corpora/trials/trials.json");
    let document: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut terms = Vec::new();
    for trial in document["trials"].as_array().unwrap() {
        terms.push(trial["trial_id"].as_str().unwrap().to_lowercase());
        let title = trial["title"].as_str().unwrap();
        if let Some((acronym, _)) = title.split_once(':') {
            terms.push(acronym.to_lowercase());
        }
        for arm in trial["arms"].as_array().unwrap() {
            let label = arm["label"].as_str().unwrap();
            if let Some(drug) = label
                .split_once(':')
                .and_then(|(_, rest)| rest.split_whitespace().next())
            {
                let drug = drug.to_lowercase();
                if drug.len() > 5 && drug != "placebo" {
                    terms.push(drug);
                }
            }
        }
    }
    terms.extend(record_names());
    terms.sort();
    terms.dedup();
    terms
}

/// The rare words that name the records of every document set under `corpora/` (the
/// `name` and `town` fields of their JSON Lines files: `Wetherstow`, `Kettleby`): the
/// places, practices and sites of the fresh corpora, which no code that decides may name
/// either. Words of common English (`Museum`, `Bridge`) are left out.
fn record_names() -> Vec<String> {
    let common: std::collections::HashSet<&str> =
        include_str!("../../proviso-contract/data/common-words.txt")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect();
    let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpora");
    let mut out = Vec::new();
    for set in std::fs::read_dir(&corpora).unwrap() {
        let set = set.unwrap().path();
        if !set.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&set).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            for line in std::fs::read_to_string(&file).unwrap().lines() {
                let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                for key in ["name", "town"] {
                    let value = record[key].as_str().unwrap_or_default();
                    for word in value.split(|c: char| !c.is_alphabetic()) {
                        let lower = word.to_lowercase();
                        if word.chars().count() >= 6
                            && word.starts_with(char::is_uppercase)
                            && !common.contains(lower.as_str())
                        {
                            out.push(lower);
                        }
                    }
                }
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_code_outside_the_demo_agents_names_a_bundled_trial_or_drug() {
    let terms = corpus_terms();
    assert!(terms.len() >= 40, "{terms:?}");
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The demo's agents load and describe their own corpora; that is their job.
    let allowed = [
        "proviso-demo/src/trials.rs",
        "proviso-demo/src/travel.rs",
        "proviso-demo/src/lib.rs",
    ];
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let path = entry.unwrap().path();
        // Inputs of evaluations and benchmarks, not code that decides.
        if path.ends_with("proviso-eval") || path.ends_with("proviso-cli") {
            continue;
        }
        let src = path.join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 40, "{}", files.len());
    let mut found = Vec::new();
    for file in &files {
        let shown = file.to_string_lossy().replace('\\', "/");
        // A `tests.rs` is a test module of its own.
        if allowed.iter().any(|a| shown.ends_with(a)) || shown.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Test modules come last in a file, by this project's convention.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            let lower = line.to_lowercase();
            for term in &terms {
                if lower.contains(term.as_str()) {
                    found.push(format!("{shown}:{}: `{term}` in {line:?}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "corpus-specific code:\n{}",
        found.join("\n")
    );
}
