//! Fault injection at the contract boundary: every row of `faults.json` is a deliberately
//! broken output, read by one test that asserts the exact gate and code (and, where the row
//! says, the location, next step and answer) it must produce. The tests below it cover
//! deliberately valid outputs and the migration. These are authored cases, not sampled model
//! outputs.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use proviso_contract::{
    Answer, AnswerStatus, Contract, Gate, GateStatus, Intent, Verdict, KA_ANSWER_V2,
};
use serde_json::{json, Value};

#[path = "common/faults.rs"]
mod faults;
use faults::{answered, case_input, contract, envelope, sources};

fn check(value: &Value) -> Verdict {
    contract().check_text(value.to_string().as_bytes())
}

fn assert_rejected(verdict: &Verdict, gate: Gate, code: &str) {
    let rejection = verdict
        .rejection()
        .unwrap_or_else(|| panic!("expected a {gate}/{code} rejection, got {verdict:?}"));
    assert_eq!(
        (rejection.gate(), rejection.code().as_str()),
        (gate, code),
        "{rejection}"
    );
}

#[test]
fn every_fault_in_the_table_is_rejected_where_it_says() {
    let cases = faults::cases();
    assert!(cases.len() >= 20, "the table lost cases");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        if let Err(why) = run_case(case) {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn run_case(case: &Value) -> Result<(), String> {
    let (bytes, is_envelope) = case_input(&case["input"]);
    let verdict = if is_envelope {
        contract().check_envelope(&bytes)
    } else {
        contract().check_text(&bytes)
    };
    let Some(rejection) = verdict.rejection() else {
        return Err(format!("accepted: {verdict:?}"));
    };
    let expect = &case["expect"];
    let mut wrong = Vec::new();
    let mut check = |what: &str, got: Value| {
        if let Some(want) = expect.get(what) {
            if *want != got {
                wrong.push(format!("{what} is {got}, not {want}"));
            }
        }
    };
    check("gate", json!(rejection.gate()));
    check("code", json!(rejection.code()));
    check("instance_path", json!(rejection.location().instance_path));
    check("schema_path", json!(rejection.location().schema_path));
    check("next_step", json!(rejection.next_step()));
    check("refusal", json!(rejection.refusal()));
    check(
        "violation_paths",
        json!(rejection
            .violations()
            .iter()
            .map(|v| v.location.instance_path.clone())
            .collect::<Vec<_>>()),
    );
    check(
        "violation_positions",
        json!(rejection
            .violations()
            .iter()
            .map(|v| [v.location.line, v.location.column])
            .collect::<Vec<_>>()),
    );
    check(
        "gates_before",
        json!(verdict.gates()[..verdict.gates().len() - 1].to_vec()),
    );
    check(
        "answer_reason",
        json!(Answer::from_rejection(rejection).reason_code()),
    );
    if let Some(codes) = expect.get("violation_codes").and_then(Value::as_array) {
        let got: Vec<&str> = rejection
            .violations()
            .iter()
            .map(|v| v.code.as_str())
            .collect();
        for code in codes {
            if !got.contains(&code.as_str().unwrap()) {
                wrong.push(format!("violations {got:?} lack {code}"));
            }
        }
    }
    if expect.get("gate").is_none() || expect.get("code").is_none() {
        wrong.push("the case names no gate or code".into());
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

#[test]
fn the_reference_answer_passes_every_gate() {
    let verdict = check(&answered());
    assert!(verdict.accepted(), "{verdict:?}");
    assert_eq!(
        verdict.gates(),
        &[
            (Gate::Transport, GateStatus::NotApplicable),
            (Gate::Parse, GateStatus::Passed),
            (Gate::Schema, GateStatus::Passed),
            (Gate::Application, GateStatus::Passed),
            (Gate::Evidence, GateStatus::Passed),
        ]
    );
    let answer = Answer::from_value(verdict.intent().unwrap().answer().unwrap()).unwrap();
    assert_eq!(answer.status(), AnswerStatus::Answered);
    assert_eq!(answer.amount_fen(), Some(75_000));
}

#[test]
fn a_valid_abstention_is_accepted() {
    let value = json!({
        "schema_version": "ka-answer-v1",
        "status": "abstained",
        "answer": null,
        "amount_yuan": null,
        "citations": [],
        "reason_code": "no_source_covers_shanghai"
    });
    let verdict = check(&value);
    assert!(verdict.accepted(), "{verdict:?}");
    assert!(matches!(verdict.intent(), Some(Intent::FinalAnswer { .. })));
    let answer = Answer::from_value(verdict.intent().unwrap().answer().unwrap()).unwrap();
    assert_eq!(answer.status(), AnswerStatus::Abstained);
}

#[test]
fn a_complete_envelope_reaches_every_gate() {
    let verdict = contract().check_envelope(&envelope(&json!(answered().to_string()), "stop"));
    assert!(verdict.accepted(), "{verdict:?}");
    assert_eq!(verdict.gates()[0], (Gate::Transport, GateStatus::Passed));
}

#[test]
fn integral_floats_are_integers_and_keep_their_value() {
    let text = answered()
        .to_string()
        .replace("\"amount_yuan\":750", "\"amount_yuan\":750.0");
    let verdict = contract().check_text(text.as_bytes());
    assert!(verdict.accepted(), "{verdict:?}");
    let answer = Answer::from_value(verdict.intent().unwrap().answer().unwrap()).unwrap();
    assert_eq!(answer.amount_fen(), Some(75_000));
}

#[test]
fn migration_to_v2_keeps_the_amount_and_never_rescales_by_guess() {
    let v1 = contract().check_text(answered().to_string().as_bytes());
    let answer = Answer::from_value(v1.intent().unwrap().answer().unwrap()).unwrap();
    let v2_value = answer.to_v2();
    assert_eq!(v2_value["amount_fen"], json!(75_000));
    let document: Value = serde_json::from_str(KA_ANSWER_V2).unwrap();
    let v2 = Contract::from_document(&document)
        .unwrap()
        .sources(sources())
        .build()
        .unwrap();
    let verdict = v2.check_text(v2_value.to_string().as_bytes());
    assert!(verdict.accepted(), "{verdict:?}");
    // A v2 output handed to the v1 contract is an unknown version there, not 75000 yuan.
    assert_rejected(
        &contract().check_text(v2_value.to_string().as_bytes()),
        Gate::Schema,
        "unknown_schema_version",
    );
}
