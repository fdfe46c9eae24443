//! Fault injection: each row of the contract-boundary table is a deliberately broken (or
//! deliberately valid) output, and each asserts the exact gate and code it must produce.
//! These are authored cases, not sampled model outputs.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::sync::Arc;

use proviso_contract::{
    Answer, AnswerStatus, Contract, Gate, GateStatus, Intent, NextStep, SourceStore, Verdict,
    KA_ANSWER_V1, KA_ANSWER_V2,
};
use serde_json::{json, Value};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources() -> Arc<SourceStore> {
    let dir = root().join("corpora/travel-policy");
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    Arc::new(
        SourceStore::from_manifest(&manifest, |file| {
            std::fs::read_to_string(dir.join(file)).map_err(|e| e.to_string())
        })
        .unwrap(),
    )
}

fn contract() -> Contract {
    let document: Value = serde_json::from_str(KA_ANSWER_V1).unwrap();
    Contract::from_document(&document)
        .unwrap()
        .sources(sources())
        .build()
        .unwrap()
}

fn answered() -> Value {
    let text = std::fs::read_to_string(root().join("examples/outputs/answered.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

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

fn envelope(content: &Value, finish_reason: &str) -> Vec<u8> {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason
        }]
    })
    .to_string()
    .into_bytes()
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
fn missing_closing_brace_fails_parse() {
    let text = answered().to_string();
    let verdict = contract().check_text(&text.as_bytes()[..text.len() - 1]);
    assert_rejected(&verdict, Gate::Parse, "unexpected_end");
}

#[test]
fn number_given_as_string_fails_schema() {
    let mut value = answered();
    value["amount_yuan"] = json!("750");
    let verdict = check(&value);
    assert_rejected(&verdict, Gate::Schema, "type_mismatch");
    let location = verdict.rejection().unwrap().location();
    assert_eq!(location.instance_path.as_deref(), Some("/amount_yuan"));
    assert_eq!(
        location.schema_path.as_deref(),
        Some("/properties/amount_yuan/type")
    );
}

#[test]
fn boolean_is_not_an_integer() {
    let mut value = answered();
    value["amount_yuan"] = json!(true);
    assert_rejected(&check(&value), Gate::Schema, "type_mismatch");
}

#[test]
fn required_field_removed_fails_schema() {
    let mut value = answered();
    value.as_object_mut().unwrap().shift_remove("amount_yuan");
    assert_rejected(&check(&value), Gate::Schema, "missing_required");
}

#[test]
fn unexpected_extra_property_fails_schema() {
    let mut value = answered();
    value["approved"] = json!(true);
    assert_rejected(&check(&value), Gate::Schema, "unexpected_property");
}

#[test]
fn reversed_line_range_fails_application() {
    let mut value = answered();
    value["citations"][0]["line_start"] = json!(3);
    value["citations"][0]["line_end"] = json!(1);
    let verdict = check(&value);
    assert_rejected(&verdict, Gate::Application, "reversed_line_range");
    assert_eq!(
        verdict
            .rejection()
            .unwrap()
            .location()
            .instance_path
            .as_deref(),
        Some("/citations/0/line_end")
    );
}

#[test]
fn valid_but_false_amount_fails_evidence() {
    let mut value = answered();
    value["answer"] = json!("600 yuan per room per night.");
    value["amount_yuan"] = json!(600);
    let verdict = check(&value);
    assert_rejected(&verdict, Gate::Evidence, "unsupported_claim");
    // Both the text and the amount field are named.
    let paths: Vec<_> = verdict
        .rejection()
        .unwrap()
        .violations()
        .iter()
        .map(|v| v.location.instance_path.clone().unwrap())
        .collect();
    assert_eq!(paths, vec!["/answer", "/amount_yuan"]);
    // Every structural gate passed before evidence failed.
    assert_eq!(
        verdict.gates()[2..4],
        [
            (Gate::Schema, GateStatus::Passed),
            (Gate::Application, GateStatus::Passed)
        ]
    );
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
fn abstention_with_an_amount_breaks_the_if_then_else_rule() {
    let value = json!({
        "schema_version": "ka-answer-v1",
        "status": "abstained",
        "answer": null,
        "amount_yuan": 750,
        "citations": [],
        "reason_code": "unsure"
    });
    let verdict = check(&value);
    assert_rejected(&verdict, Gate::Schema, "type_mismatch");
    assert_eq!(
        verdict
            .rejection()
            .unwrap()
            .location()
            .schema_path
            .as_deref(),
        Some("/else/properties/amount_yuan/type")
    );
}

#[test]
fn a_truncated_envelope_is_incomplete_even_if_its_prefix_parses() {
    let abstention = json!({
        "schema_version": "ka-answer-v1", "status": "abstained", "answer": null,
        "amount_yuan": null, "citations": [], "reason_code": "x"
    });
    let verdict = contract().check_envelope(&envelope(&json!(abstention.to_string()), "length"));
    assert_rejected(&verdict, Gate::Transport, "incomplete_response");
    assert_eq!(
        verdict.rejection().unwrap().next_step(),
        NextStep::RetryWithLargerBudget
    );
    let answer = Answer::from_rejection(verdict.rejection().unwrap());
    assert_eq!(answer.status(), AnswerStatus::Error);
    assert_eq!(answer.reason_code(), Some("incomplete_response"));
}

#[test]
fn a_refusal_envelope_is_refused_with_its_text() {
    let bytes = json!({
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."},
            "finish_reason": "stop"
        }]
    })
    .to_string();
    let verdict = contract().check_envelope(bytes.as_bytes());
    assert_rejected(&verdict, Gate::Transport, "refused");
    let rejection = verdict.rejection().unwrap();
    assert_eq!(rejection.refusal(), Some("I can't help with that."));
    assert_eq!(rejection.next_step(), NextStep::Stop);
    let answer = Answer::from_rejection(rejection);
    assert_eq!(
        (answer.status(), answer.reason_code()),
        (AnswerStatus::Refused, Some("provider_refusal"))
    );
}

#[test]
fn duplicate_key_fails_parse_with_both_positions() {
    let text = "{\"schema_version\": \"ka-answer-v1\",\n \"schema_version\": \"ka-answer-v2\"}";
    let verdict = contract().check_text(text.as_bytes());
    assert_rejected(&verdict, Gate::Parse, "duplicate_key");
    let lines: Vec<_> = verdict
        .rejection()
        .unwrap()
        .violations()
        .iter()
        .map(|v| (v.location.line.unwrap(), v.location.column.unwrap()))
        .collect();
    assert_eq!(lines, vec![(1, 2), (2, 2)]);
}

#[test]
fn nan_fails_parse() {
    let text = answered()
        .to_string()
        .replace("\"amount_yuan\":750", "\"amount_yuan\":NaN");
    assert!(text.contains("NaN"));
    assert_rejected(
        &contract().check_text(text.as_bytes()),
        Gate::Parse,
        "invalid_number",
    );
}

#[test]
fn content_filter_is_its_own_outcome() {
    let verdict = contract().check_envelope(&envelope(&json!("{}"), "content_filter"));
    assert_rejected(&verdict, Gate::Transport, "content_filtered");
    assert_eq!(verdict.rejection().unwrap().next_step(), NextStep::Stop);
}

#[test]
fn a_complete_envelope_reaches_every_gate() {
    let verdict = contract().check_envelope(&envelope(&json!(answered().to_string()), "stop"));
    assert!(verdict.accepted(), "{verdict:?}");
    assert_eq!(verdict.gates()[0], (Gate::Transport, GateStatus::Passed));
}

#[test]
fn an_unknown_schema_version_is_rejected_not_guessed() {
    let mut value = answered();
    value["schema_version"] = json!("ka-answer-v3");
    assert_rejected(&check(&value), Gate::Schema, "unknown_schema_version");
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
fn a_superseded_version_is_not_evidence() {
    let mut value = answered();
    value["citations"][0]["version"] = json!("v1");
    value["citations"][0]["quote"] = json!("Fictional Beijing lodging policy; amounts are per room per night.\nEffective from 2024-01-01 until 2025-12-31.\nThe lodging limit is 600 yuan.");
    assert_rejected(&check(&value), Gate::Evidence, "version_not_in_force");
}

#[test]
fn quotes_and_ranges_must_match_the_document_exactly() {
    let mut value = answered();
    value["citations"][0]["quote"] = json!("The lodging limit is 750 yuan.");
    assert_rejected(&check(&value), Gate::Evidence, "quote_mismatch");
    let mut value = answered();
    value["citations"][0]["line_end"] = json!(99);
    assert_rejected(
        &check(&value),
        Gate::Evidence,
        "line_range_outside_document",
    );
    let mut value = answered();
    value["citations"][0]["source_id"] = json!("hotel-guide");
    assert_rejected(&check(&value), Gate::Evidence, "unknown_source");
}

#[test]
fn free_text_is_never_an_answer() {
    let verdict = contract().check_text(b"The limit is 750 yuan per night.");
    assert_rejected(&verdict, Gate::Parse, "syntax_error");
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

#[test]
fn all_schema_violations_are_reported() {
    let mut value = answered();
    value["amount_yuan"] = json!("750");
    value["approved"] = json!(true);
    value.as_object_mut().unwrap().shift_remove("reason_code");
    let verdict = check(&value);
    let codes: Vec<_> = verdict
        .rejection()
        .unwrap()
        .violations()
        .iter()
        .map(|v| v.code.as_str())
        .collect();
    for expected in ["type_mismatch", "unexpected_property", "missing_required"] {
        assert!(codes.contains(&expected), "{codes:?} lacks {expected}");
    }
}
