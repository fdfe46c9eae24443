//! Snapshots of `proviso check`: the verdict JSON and the exit status for the worked example's
//! outputs. Paths are relative to the workspace root so snapshots do not depend on where the
//! repository is checked out.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const SCHEMA: &str = "crates/proviso-contract/contracts/ka-answer-v1.schema.json";

fn proviso(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    // One process at a time: the commands that run the model use every core, and two of them
    // side by side spin on each other's (this binary took 46 s in parallel, 19 s in series).
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut child = Command::new(env!("CARGO_BIN_EXE_proviso"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default()).unwrap();
    drop(pipe);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn check(extra: &[&str], file: &str) -> String {
    let mut args = vec![
        "check",
        "--schema",
        SCHEMA,
        "--sources",
        "corpora/travel-policy",
    ];
    args.extend_from_slice(extra);
    args.push(file);
    let (code, stdout, stderr) = proviso(&args, None);
    assert!(stderr.is_empty(), "{stderr}");
    // Exactly one JSON document on stdout.
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(verdict["accepted"].as_bool().unwrap(), code == 0);
    format!("exit: {code}\n{stdout}")
}

#[test]
fn answered() {
    insta::assert_snapshot!(check(&[], "examples/outputs/answered.json"));
}

#[test]
fn abstained() {
    insta::assert_snapshot!(check(&[], "examples/outputs/abstained.json"));
}

#[test]
fn false_amount() {
    insta::assert_snapshot!(check(&[], "examples/outputs/false-amount.json"));
}

#[test]
fn truncated_envelope() {
    insta::assert_snapshot!(check(
        &["--envelope"],
        "examples/outputs/truncated-envelope.json"
    ));
}

#[test]
fn refusal_envelope() {
    insta::assert_snapshot!(check(
        &["--envelope"],
        "examples/outputs/refusal-envelope.json"
    ));
}

#[test]
fn missing_brace_from_stdin() {
    let text = std::fs::read_to_string(root().join("examples/outputs/answered.json")).unwrap();
    let cut = text.trim_end().trim_end_matches('}');
    let (code, stdout, _) = proviso(
        &[
            "check",
            "--schema",
            SCHEMA,
            "--sources",
            "corpora/travel-policy",
            "--compact",
            "-",
        ],
        Some(cut.as_bytes()),
    );
    insta::assert_snapshot!(format!("exit: {code}\n{stdout}"));
}

#[test]
fn usage_errors_exit_2() {
    let (code, stdout, stderr) = proviso(&["check"], None);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("--schema"), "{stderr}");

    let (code, _, stderr) = proviso(
        &[
            "check",
            "--schema",
            SCHEMA,
            "examples/outputs/answered.json",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--sources"), "{stderr}");

    let (code, _, stderr) = proviso(&["check", "--schema", "no/such/file.json", "-"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("no/such/file.json"), "{stderr}");
}

#[test]
fn a_schema_with_an_unknown_keyword_is_refused() {
    let dir = std::env::temp_dir().join(format!("proviso-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("typo.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "additionalproperties": false}"#,
    )
    .unwrap();
    let (code, _, stderr) = proviso(
        &["check", "--schema", schema.to_str().unwrap(), "-"],
        Some(b"{}"),
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown schema keyword `additionalproperties`"),
        "{stderr}"
    );
}

/// Generation on the real default model (fetched on first use).
#[test]
fn generate_under_a_choice_list() {
    let (code, stdout, stderr) = proviso(
        &[
            "generate",
            "--choice",
            "read,compute,mutate",
            "Which class is a database write?",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        ["read", "compute", "mutate"].contains(&stdout.trim()),
        "{stdout}"
    );
}

#[test]
fn generate_refuses_an_unenforceable_keyword_by_name() {
    let dir = std::env::temp_dir().join(format!("proviso-cli-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("not.json");
    std::fs::write(&schema, r#"{"type": "string", "not": {"const": "x"}}"#).unwrap();
    let (code, stdout, stderr) = proviso(
        &[
            "generate",
            "--schema",
            schema.to_str().unwrap(),
            "Say something.",
        ],
        None,
    );
    assert_eq!(code, 2, "{stdout}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("`not`") && stderr.contains("--relax"),
        "{stderr}"
    );
}

#[test]
fn generate_checks_its_output_with_the_gates() {
    let (code, stdout, stderr) = proviso(
        &[
            "generate",
            "--schema",
            "examples/contracts/trial-agent.schema.json",
            "--stats",
            "Which arms of trial NCT04123456 were terminated?",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stats = &lines.iter().find(|l| l.get("stats").is_some()).unwrap()["stats"];
    let verdict = &lines.iter().find(|l| l.get("verdict").is_some()).unwrap()["verdict"];
    assert_eq!(verdict["accepted"], true, "{stdout}");
    assert_eq!(stats["stop_reason"], "grammar_complete");
    assert!(stats["forced_tokens"].as_u64().unwrap() > 0);
    for key in [
        "prompt_tokens",
        "generated_tokens",
        "mask_mean_us",
        "mask_p99_us",
        "forward_mean_ms",
        "total_ms",
    ] {
        assert!(stats.get(key).is_some(), "{key} missing from {stats}");
    }
}

fn check_tools(format: &str, file: &str, policy: Option<&str>) -> String {
    let mut args = vec![
        "check",
        "--tools",
        "examples/tools/trial-tools.json",
        "--format",
        format,
    ];
    if let Some(policy) = policy {
        args.extend_from_slice(&["--policy", policy]);
    }
    args.push(file);
    let (code, stdout, stderr) = proviso(&args, None);
    assert!(stderr.is_empty(), "{stderr}");
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(verdict["accepted"].as_bool().unwrap(), code == 0);
    format!("exit: {code}\n{stdout}")
}

#[test]
fn tools_hermes_call_accepted() {
    insta::assert_snapshot!(check_tools(
        "hermes",
        "examples/steps/get-arm.hermes.txt",
        None
    ));
}

#[test]
fn tools_pythonic_traversal_refused_by_policy() {
    insta::assert_snapshot!(check_tools(
        "pythonic",
        "examples/steps/traversal.pythonic.txt",
        Some("examples/tools/clerk-policy.json")
    ));
}

#[test]
fn tools_llama3_refund_over_limit() {
    insta::assert_snapshot!(check_tools(
        "llama3",
        "examples/steps/refund-over-limit.llama3.txt",
        Some("examples/tools/clerk-policy.json")
    ));
}

#[test]
fn tools_envelope_invented_tool() {
    insta::assert_snapshot!(check_tools(
        "envelope",
        "examples/steps/invented-tool.envelope.json",
        None
    ));
}

#[test]
fn tools_mutate_without_a_grant_is_refused() {
    let (code, stdout, _) = proviso(
        &[
            "check",
            "--tools",
            "examples/tools/trial-tools.json",
            "--format",
            "pythonic",
            "-",
        ],
        Some(br#"[export_report(path="vela.md", trial_id="NCT04123456")]"#),
    );
    assert_eq!(code, 1);
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(verdict["gate"], "permission");
    assert_eq!(verdict["code"], "permission_denied");
}

#[test]
fn tools_check_reads_native_tool_calls_from_an_envelope() {
    let envelope = serde_json::json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_x",
            "type": "function", "function": {"name": "get_arm",
            "arguments": "{\"trial_id\": \"NCT0412\"}"}}]}}]});
    let (code, stdout, _) = proviso(
        &[
            "check",
            "--tools",
            "examples/tools/trial-tools.json",
            "--envelope",
            "--compact",
            "-",
        ],
        Some(envelope.to_string().as_bytes()),
    );
    assert_eq!(code, 1);
    let verdict: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(verdict["gate"], "schema");
    assert_eq!(verdict["code"], "pattern_mismatch");
}

#[test]
fn check_needs_a_schema_or_tools() {
    let (code, _, stderr) = proviso(&["check", "examples/outputs/answered.json"], None);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--schema") && stderr.contains("--tools"),
        "{stderr}"
    );
}

#[test]
fn demo_prints_every_step_and_writes_a_trace() {
    let trace = std::env::temp_dir().join(format!("proviso-demo-{}.jsonl", std::process::id()));
    let (code, stdout, stderr) = proviso(
        &[
            "demo",
            "--trace",
            trace.to_str().unwrap(),
            "Which arms of trial NCT04123456 were terminated?",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    for part in [
        "question:",
        "── step 1 ──",
        "model output",
        "gates: transport pass",
        "── end ──",
        "usage:",
    ] {
        assert!(stdout.contains(part), "missing {part:?} in\n{stdout}");
    }
    let records: Vec<serde_json::Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    std::fs::remove_file(&trace).unwrap();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"run_start"));
    assert_eq!(kinds.last(), Some(&"run_end"));
    assert!(kinds.contains(&"model_output"));
    // Raw output and parsed intent are separate records.
    let raw = records
        .iter()
        .find(|r| r["record"] == "model_output")
        .unwrap();
    assert!(raw["raw"].is_string() && raw.get("verdict").is_none());
    assert!(records
        .iter()
        .any(|r| r["record"] == "intent" || r["record"] == "rejection"));
}

#[test]
fn demo_refuses_a_format_the_agent_cannot_use() {
    let (code, _, stderr) = proviso(
        &[
            "demo",
            "--agent",
            "travel",
            "--format",
            "pythonic",
            "What is the hotel limit?",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("envelope"), "{stderr}");
}

/// `proviso agent --docs DIR`: a directory of the user's own files (Markdown, plain text and
/// JSON Lines, one version superseded in a manifest) answers a question with a cited line
/// that the evidence gate checked, and `--json` prints the end as one JSON line.
#[test]
fn the_agent_answers_from_your_own_documents() {
    let dir = std::env::temp_dir().join(format!("proviso-docs-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("returns-v1.txt"),
        "Returns are accepted within 14 days of delivery. Refunds are paid to the original card.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("returns-v2.txt"),
        "Returns are accepted within 30 days of delivery. Refunds are paid to the original card within 5 working days.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("shipping.md"),
        "# Shipping\n\n- Standard shipping takes 3 to 5 working days.\n- Express shipping costs 9 euros.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("codes.jsonl"),
        "{\"code\": \"R12\", \"meaning\": \"Parcel returned to sender\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        r#"{"sources": [{"source_id": "returns", "version": "v1", "file": "returns-v1.txt", "in_force": false, "until": "2025-12-31"},
            {"source_id": "returns", "version": "v2", "file": "returns-v2.txt", "in_force": true, "effective": "2026-01-01"}]}"#,
    )
    .unwrap();
    let (code, stdout, stderr) = proviso(
        &[
            "agent",
            "--docs",
            dir.to_str().unwrap(),
            "--json",
            "Within how many days of delivery are returns accepted?",
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let end: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(end["end"], "final_answer", "{end}");
    let answer = end["answer"]["answer"].as_str().unwrap();
    assert!(answer.contains("30 days"), "{end}");
    assert!(!answer.contains("14 days"), "{end}");
    assert_eq!(
        end["answer"]["citations"][0]["source_id"], "returns",
        "{end}"
    );
    assert_eq!(end["answer"]["citations"][0]["version"], "v2", "{end}");
    // A directory without any readable document is refused, naming it.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, stderr) = proviso(
        &["agent", "--docs", empty.to_str().unwrap(), "Anything?"],
        None,
    );
    assert_ne!(code, 0);
    assert!(
        stderr.contains("holds no .txt, .md or .jsonl file"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The numbers of a summary table's `**all**` row.
fn all_row(stdout: &str) -> Vec<usize> {
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| **all** |"))
        .unwrap_or_else(|| panic!("no summary row in {stdout}"));
    row.split('|')
        .skip(2)
        .filter_map(|cell| cell.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The model-free measures of a bank, held to ratchets on the library development corpus:
/// recall@5 of a fact line, and the answer the harness itself offers (the first line it
/// ranks, as its first span). A change to retrieval or to the answer rules that loses ground
/// fails here, in seconds; the held-out corpora are measured, never ratcheted.
#[test]
fn retrieval_and_the_harness_answers_are_measured_without_generating() {
    let out = std::env::temp_dir().join(format!("proviso-harness-{}.jsonl", std::process::id()));
    let bank = [
        "eval",
        "questions",
        "--bank",
        "corpora/library/questions.json",
        "--docs",
        "corpora/library",
    ];
    let (code, stdout, stderr) = proviso(
        &[&bank[..], &["--harness", "--out", out.to_str().unwrap()]].concat(),
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    // questions, right, wrong, no fact, abstained
    let all = all_row(&stdout);
    assert_eq!(all.len(), 5, "{stdout}");
    assert_eq!(all[0], 65, "{stdout}");
    assert!(all[1] >= 56 && all[2] == 0, "{stdout}");
    // The answer rules on BM25's order alone (`--lexical`) keep their own ratchet: search by
    // meaning adds candidates they rank, and must not hide a loss of theirs.
    let (code, stdout, stderr) = proviso(&[&bank[..], &["--harness", "--lexical"]].concat(), None);
    assert_eq!(code, 0, "{stderr}");
    let lexical = all_row(&stdout);
    assert!(lexical[1] >= 56 && lexical[2] == 0, "{stdout}");
    let written = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    let rows: Vec<serde_json::Value> = written
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 65);
    // Each question that did not end right says why its fact lines were not offered.
    let explained = rows
        .iter()
        .filter(|r| r["outcome"] != "right" && r["outcome"] != "wrong")
        .flat_map(|r| r["fact_lines"].as_array().unwrap().iter())
        .any(|f| f["refused"].as_str().is_some());
    assert!(explained, "{written}");
    let (code, stdout, stderr) = proviso(&[&bank[..], &["--retrieval"]].concat(), None);
    assert_eq!(code, 0, "{stderr}");
    // answerable, recalled
    let all = all_row(&stdout);
    assert!(all[0] == 55 && all[1] >= 51, "{stdout}");
    // The model's re-ranking of BM25's best ten (`--rerank`) recalls what BM25 alone misses.
    // It scores ten lines per question with the model (about 2.5 s a question), so it runs
    // on a part of the bank: the questions BM25 alone misses, where it can gain, and every
    // fifth question, where it could lose.
    let lexical_out = out.with_extension("lexical.jsonl");
    let (code, _, stderr) = proviso(
        &[
            &bank[..],
            &[
                "--retrieval",
                "--lexical",
                "--out",
                lexical_out.to_str().unwrap(),
            ],
        ]
        .concat(),
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let missed: Vec<String> = std::fs::read_to_string(&lexical_out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["recall_at_5"] == false)
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    std::fs::remove_file(&lexical_out).unwrap();
    assert_eq!(missed.len(), 3, "{missed:?}");
    let full: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(bank[3])).unwrap()).unwrap();
    let part: Vec<&serde_json::Value> = full["questions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, q)| i % 5 == 0 || missed.iter().any(|m| q["id"] == m.as_str()))
        .map(|(_, q)| q)
        .collect();
    let part_bank = out.with_extension("part.json");
    std::fs::write(
        &part_bank,
        serde_json::json!({ "questions": part }).to_string(),
    )
    .unwrap();
    let (code, stdout, stderr) = proviso(
        &[
            "eval",
            "questions",
            "--bank",
            part_bank.to_str().unwrap(),
            "--docs",
            "corpora/library",
            "--retrieval",
            "--rerank",
        ],
        None,
    );
    std::fs::remove_file(&part_bank).unwrap();
    assert_eq!(code, 0, "{stderr}");
    // answerable, recalled: BM25 alone recalls 10 of these 13.
    let reranked = all_row(&stdout);
    assert!(reranked[0] == 13 && reranked[1] >= 11, "{stdout}");
}

/// The fourth corpus (`corpora/transit`) and its two question sets, development sets since
/// their first reads: the harness's right answers and wrong answers accepted are held to a
/// ratchet.
#[test]
fn the_transit_corpus_is_held_to_a_ratchet() {
    // The default search (BM25 fused with the sentence encoder), then BM25 alone.
    for (bank, search, questions, least_right, most_wrong) in [
        ("corpora/transit/questions.json", None, 49, 37, 1),
        (
            "corpora/transit/questions.json",
            Some("--lexical"),
            49,
            38,
            1,
        ),
        ("corpora/transit/questions-b.json", None, 37, 34, 1),
        (
            "corpora/transit/questions-b.json",
            Some("--lexical"),
            37,
            34,
            1,
        ),
    ] {
        let mut args = vec![
            "eval",
            "questions",
            "--harness",
            "--bank",
            bank,
            "--docs",
            "corpora/transit",
        ];
        args.extend(search);
        let (code, stdout, stderr) = proviso(&args, None);
        assert_eq!(code, 0, "{stderr}");
        // questions, right, wrong, no fact, abstained
        let all = all_row(&stdout);
        assert_eq!(all[0], questions, "{stdout}");
        assert!(
            all[1] >= least_right && all[2] <= most_wrong,
            "{bank}: {stdout}"
        );
    }
}

/// Corpora written with their questions by a helper that never saw the code, each a
/// development set from its first read: `corpora/parks` (session 28) and `corpora/hostel`
/// (session 29, written as people write documents: price tables, numbered sections,
/// pronouns, terse JSON Lines fields). Their harness answers are held to a ratchet, with no
/// wrong answer accepted; `corpora/software` (session 30, a product's manuals: a config
/// table, a man page, a changelog, an advisory) to at most its one (`Where is Pellmoor's
/// support team based?`, which no source answers, is answered by the advisory's `From:`
/// line, whose company name reads as a place). `corpora/council` and `corpora/vet` (session
/// 31), `corpora/storage` (held out in session 31, a development set from session 32) and
/// `corpora/handbook` (held out from session 28; read in session 32 when a change cost it
/// two answers) are held to their counts.
#[test]
fn fresh_development_corpora_are_held_to_a_ratchet() {
    // corpus, split, questions, least right, most wrong
    for (corpus, split, questions, least_right, most_wrong) in [
        ("parks", "all", 40, 32, 0),
        ("hostel", "all", 40, 31, 0),
        ("software", "all", 40, 28, 0),
        ("council", "all", 40, 23, 1),
        ("vet", "all", 40, 27, 2),
        ("storage", "all", 40, 25, 2),
        ("handbook", "all", 40, 20, 1),
        // Held out until session 33, run whole twice, a development set since.
        ("broadband", "all", 40, 27, 1),
        // Held out until session 34 (first run: 16 right, 2 wrong), a development set since.
        ("carhire", "all", 40, 22, 0),
        // Written fresh in session 35 by helpers that never read the code, each split at
        // random into dev and test (20 and 20) before any change was made for it. First
        // run, harness: leisure dev 10 right and 1 wrong, test 7 and 2; dental dev 5 and 1,
        // test 9 and 2. Only the dev halves are tuned on; the test halves are measured,
        // never tuned on, and held here so that no later change loses what they answer.
        ("leisure", "dev", 20, 18, 0),
        ("leisure", "test", 20, 9, 2),
        ("dental", "dev", 20, 8, 1),
        ("dental", "test", 20, 11, 1),
        // Written fresh in session 36 the same way and split at random (seed 36) before
        // any result was read. First run, harness: water dev 8 right and 1 wrong, test 6
        // and 3; museum dev 4 and 2, test 10 and 1.
        ("water", "dev", 20, 13, 0),
        ("water", "test", 20, 8, 2),
        ("museum", "dev", 20, 8, 1),
        ("museum", "test", 20, 12, 1),
        // Written fresh at the end of session 37 the same way and split at random (seed
        // 37) before any result was read. First run, harness: dev 9 right and 3 wrong,
        // test 9 and 2; tuned on its dev half from session 38.
        ("housing", "dev", 20, 17, 0),
        ("housing", "test", 20, 13, 0),
        // Written fresh in session 38 the same way and split at random (seeds 38 and 39)
        // before any result was read. First run, harness: ferry dev 8 right and 0 wrong,
        // test 9 and 1; college dev 10 and 2, test 8 and 2. Tuned on their dev halves.
        ("ferry", "dev", 20, 10, 0),
        ("ferry", "test", 20, 9, 1),
        ("college", "dev", 20, 12, 1),
        ("college", "test", 20, 9, 2),
        // Written fresh in session 39 the same way and split at random (seeds 40 and 41)
        // before any result was read. First run, harness: insurance dev 8 right and 3
        // wrong, test 8 and 3; waste dev 10 and 1, test 8 and 4. Tuned on their dev halves.
        ("insurance", "dev", 20, 14, 0),
        ("insurance", "test", 20, 11, 2),
        ("waste", "dev", 20, 11, 1),
        ("waste", "test", 20, 10, 2),
        // Written fresh in session 40 the same way and split at random (seeds 42 and 43)
        // before any result was read. First run, harness: nursery dev 7 right and 4
        // wrong, test 11 and 1; energy dev 9 and 2, test 10 and 2. Tuned on their dev
        // halves.
        ("nursery", "dev", 20, 11, 3),
        ("nursery", "test", 20, 14, 2),
        ("energy", "dev", 20, 15, 0),
        // Session 49: a word in common use but not everyday that no source states counts
        // against the sources; it cost this half one right answer (asked in `bail`) and
        // took four wrong answers out of the other test halves.
        ("energy", "test", 20, 9, 2),
        // Written fresh in session 41 the same way and split at random (seeds 44 and 45)
        // before any result was read. First run, harness: gpsurgery dev 13 right and 0
        // wrong, test 12 and 1; bikeshare dev 6 and 3, test 9 and 4. Tuned on their dev
        // halves.
        ("gpsurgery", "dev", 20, 16, 0),
        ("gpsurgery", "test", 20, 12, 1),
        ("bikeshare", "dev", 20, 12, 0),
        ("bikeshare", "test", 20, 10, 2),
        // Written fresh in session 42 the same way and split at random (seeds 46 and 47)
        // before any result was read. First run, harness: theatre dev 7 right and 1
        // wrong, test 8 and 4; drivingschool dev 8 and 4, test 6 and 1. Tuned on their
        // dev halves.
        ("theatre", "dev", 20, 9, 0),
        ("theatre", "test", 20, 8, 3),
        ("drivingschool", "dev", 20, 9, 3),
        ("drivingschool", "test", 20, 6, 1),
    ] {
        let bank = format!("corpora/{corpus}/questions.json");
        let docs = format!("corpora/{corpus}");
        let (code, stdout, stderr) = proviso(
            &[
                "eval",
                "questions",
                "--harness",
                "--bank",
                &bank,
                "--docs",
                &docs,
                "--split",
                split,
            ],
            None,
        );
        assert_eq!(code, 0, "{stderr}");
        // questions, right, wrong, no fact, abstained
        let all = all_row(&stdout);
        assert_eq!(all[0], questions, "{corpus} {split}: {stdout}");
        assert!(
            all[1] >= least_right && all[2] <= most_wrong,
            "{corpus} {split}: {stdout}"
        );
    }
}

/// Questions about what the sources never state (an invented name or id, an unrelated
/// attribute, another member of a series), made from the development questions
/// (`corpora/probes`): the wrong answers the harness accepts are held to a ratchet.
#[test]
fn unanswerable_probes_are_held_to_a_ratchet_of_wrong_answers() {
    for (bank, docs, questions, most_wrong) in [
        (
            "corpora/probes/library.json",
            Some("corpora/library"),
            134,
            // 13 since session 29: `Is Riverside Library open on Wednesdays?` is answered
            // by `open Tuesday to Friday …`, whose sentence goes on `and is closed on
            // Monday`, the probe's forbidden string. 15 since session 35: a word no source
            // states said around the asking part (`We're a snorkel charity. What do we pay
            // to use a meeting room?`) is the asker's own description, no longer a reason
            // to abstain, and the charity rate is answered. 11 since session 37: a word
            // rare in English that only a few lines state (`pottery` put in for `period`)
            // must be stated by the answer or its source. 9 since session 49: a word in
            // common use but not everyday (`helicopter` put in for `laser`) that no source
            // states counts against the sources, as a rare word does.
            9,
        ),
        ("corpora/probes/bank.json", None, 89, 7),
    ] {
        let mut args = vec!["eval", "questions", "--harness", "--bank", bank];
        if let Some(docs) = docs {
            args.extend(["--docs", docs]);
        }
        let (code, stdout, stderr) = proviso(&args, None);
        assert_eq!(code, 0, "{stderr}");
        // questions, right, wrong, no fact, abstained
        let all = all_row(&stdout);
        assert_eq!(all[0], questions, "{stdout}");
        assert!(all[2] <= most_wrong, "{bank}: {stdout}");
    }
}
