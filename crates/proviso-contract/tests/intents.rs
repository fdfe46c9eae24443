//! The intent envelope and the priority rules for ambiguous output.

// Tests and benches fail loudly on purpose.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use proviso_contract::{Contract, Gate, Intent, IntentClass};
use serde_json::{json, Value};

/// An envelope contract with two declared tools.
fn contract() -> Contract {
    Contract::from_document(&json!({
        "type": "object",
        "required": ["intent"],
        "x-proviso": {
            "output": "envelope",
            "tools": {
                "get_arm": {"class": "read", "parameters": {
                    "type": "object",
                    "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"}},
                    "required": ["trial_id"],
                    "additionalProperties": false
                }},
                "file_report": {"class": "submit"}
            }
        }
    }))
    .unwrap()
    .build()
    .unwrap()
}

fn check(value: &Value) -> proviso_contract::Verdict {
    contract().check_text(value.to_string().as_bytes())
}

#[test]
fn each_of_the_five_intents_is_read() {
    let cases = [
        (
            json!({"reasoning": "done", "intent": "final_answer", "answer": "42"}),
            "final_answer",
        ),
        (
            json!({"intent": "tool_request", "tool": "get_arm", "arguments": {"trial_id": "NCT04123456"}}),
            "tool_request",
        ),
        (
            json!({"intent": "clarification", "question": "Which trial?"}),
            "clarification",
        ),
        (
            json!({"intent": "plan_update", "plan": ["search", "read arm"]}),
            "plan_update",
        ),
        (
            json!({"intent": "abort", "reason": "out of scope"}),
            "abort",
        ),
    ];
    for (value, kind) in cases {
        let verdict = check(&value);
        assert_eq!(
            verdict.intent().map(Intent::kind),
            Some(kind),
            "{verdict:?}"
        );
    }
}

#[test]
fn tool_calls_carry_their_declared_class() {
    let verdict = check(&json!({"intent": "tool_request", "calls": [
        {"tool": "get_arm", "arguments": {"trial_id": "NCT04123456"}},
        {"tool": "file_report", "arguments": {}}
    ]}));
    let calls = verdict.intent().unwrap().calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].intent_class(), IntentClass::Read);
    assert_eq!(calls[1].intent_class(), IntentClass::Submit);
}

#[test]
fn an_invented_tool_and_bad_arguments_fail_the_schema_gate() {
    let verdict =
        check(&json!({"intent": "tool_request", "tool": "delete_trial", "arguments": {}}));
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Schema), Some("unknown_tool"))
    );
    let verdict = check(
        &json!({"intent": "tool_request", "tool": "get_arm", "arguments": {"trial_id": "NCT1"}}),
    );
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Schema), Some("pattern_mismatch"))
    );
    assert_eq!(
        verdict
            .rejection()
            .unwrap()
            .location()
            .instance_path
            .as_deref(),
        Some("/arguments/trial_id")
    );
}

#[test]
fn an_answer_and_a_tool_request_in_one_envelope_are_ambiguous() {
    let verdict = check(&json!({"intent": "final_answer", "answer": "42", "tool": "get_arm"}));
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Application), Some("ambiguous_intent"))
    );
}

#[test]
fn a_bare_object_without_intent_is_not_an_answer() {
    let verdict = check(&json!({"answer": "42"}));
    assert_eq!(verdict.gate(), Some(Gate::Schema));
    let lenient = Contract::from_document(&json!({"x-proviso": {"output": "envelope"}}))
        .unwrap()
        .build()
        .unwrap();
    let verdict = lenient.check_text(br#"{"answer": "42"}"#);
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Application), Some("missing_intent"))
    );
}

fn envelope(content: Option<&str>, calls: &[(&str, &str)]) -> Vec<u8> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": content, "tool_calls": tool_calls}}]})
    .to_string()
    .into_bytes()
}

#[test]
fn text_beside_a_tool_call_is_never_taken_as_the_answer() {
    let bytes = envelope(
        Some("The answer is 42."),
        &[("get_arm", r#"{"trial_id": "NCT04123456"}"#)],
    );
    let verdict = contract().check_envelope(&bytes);
    let Some(Intent::ToolRequest { calls, rationale }) = verdict.intent() else {
        panic!("{verdict:?}")
    };
    assert_eq!(calls[0].id(), Some("call_0"));
    assert_eq!(rationale.as_deref(), Some("The answer is 42."));
}

#[test]
fn an_abort_beside_a_tool_call_wins_so_nothing_runs() {
    let bytes = envelope(
        Some(r#"{"intent": "abort", "reason": "the user asked me to stop"}"#),
        &[("file_report", "{}")],
    );
    let verdict = contract().check_envelope(&bytes);
    assert_eq!(verdict.intent().map(Intent::kind), Some("abort"));
}

#[test]
fn native_tool_call_arguments_are_parsed_strictly() {
    let bytes = envelope(
        None,
        &[(
            "get_arm",
            r#"{"trial_id": "NCT04123456", "trial_id": "NCT00000000"}"#,
        )],
    );
    let verdict = contract().check_envelope(&bytes);
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Parse), Some("duplicate_key"))
    );
    assert_eq!(
        verdict
            .rejection()
            .unwrap()
            .location()
            .instance_path
            .as_deref(),
        Some("/choices/0/message/tool_calls/0/function/arguments")
    );
    let bytes = envelope(None, &[("get_arm", r#"{"trial_id": 4123456}"#)]);
    let verdict = contract().check_envelope(&bytes);
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Schema), Some("type_mismatch"))
    );
}

#[test]
fn several_choices_are_not_picked_from() {
    let bytes = json!({"choices": [
        {"index": 0, "finish_reason": "stop", "message": {"content": "{}"}},
        {"index": 1, "finish_reason": "stop", "message": {"content": "{}"}}
    ]})
    .to_string();
    let verdict = contract().check_envelope(bytes.as_bytes());
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Transport), Some("multiple_choices"))
    );
}

#[test]
fn anthropic_style_messages_are_understood() {
    let bytes = json!({"type": "message", "stop_reason": "max_tokens",
        "content": [{"type": "text", "text": "{\"intent\": \"abort\", \"reason\": \"x\"}"}]})
    .to_string();
    let verdict = contract().check_envelope(bytes.as_bytes());
    assert_eq!(
        (verdict.gate(), verdict.code().map(|c| c.as_str())),
        (Some(Gate::Transport), Some("incomplete_response"))
    );
    let bytes = json!({"type": "message", "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "t1", "name": "get_arm", "input": {"trial_id": "NCT04123456"}}]})
    .to_string();
    let verdict = contract().check_envelope(bytes.as_bytes());
    assert_eq!(verdict.intent().unwrap().calls()[0].name(), "get_arm");
}

#[test]
fn declaration_mistakes_are_refused_not_ignored() {
    for document in [
        json!({"x-proviso": {"outptu": "answer"}}),
        json!({"x-proviso": {"rules": [{"rule": "sorted"}]}}),
        json!({"x-proviso": {"rules": [{"rule": "ordered", "lower": "/a", "uper": "/b"}]}}),
        json!({"x-proviso": {"tools": {"t": {"class": "delete"}}}}),
    ] {
        assert!(Contract::from_document(&document).is_err(), "{document}");
    }
    let err = Contract::builder(json!({"properties": {"a": {"minimum": 1, "maxium": 3}}}))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`maxium`"), "{err}");
    assert!(err.to_string().contains("/properties/a/maxium"), "{err}");
}
