use super::*;
use crate::registry::ToolSpec;
use proviso_contract::IntentClass;
use serde_json::json;

fn registry() -> Registry {
    Registry::new(vec![
        ToolSpec::new(
            "get_arm",
            "Reads one arm.",
            IntentClass::Read,
            json!({"type": "object", "properties": {
                "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                "arm_label": {"type": "string", "maxLength": 30}},
                "required": ["trial_id"], "additionalProperties": false}),
        ),
        ToolSpec::new(
            "search_trials",
            "Searches.",
            IntentClass::Read,
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 80},
                "limit": {"type": "integer", "minimum": 1, "maximum": 5}},
                "required": ["query"], "additionalProperties": false}),
        ),
    ])
    .unwrap()
}

#[test]
fn every_format_reads_back_the_same_call() {
    let registry = registry();
    let arguments =
        json!({"trial_id": "NCT04123456", "arm_label": "a, b; c) } </tool_call>\n\"q\""});
    for format in CallFormat::ALL {
        let text = crate::render::write_call(format, "get_arm", arguments.as_object().unwrap());
        let proposal = format
            .parse(&text, &registry)
            .unwrap_or_else(|e| panic!("{format}: {e}\n{text}"));
        assert_eq!(proposal.calls.len(), 1, "{format}");
        assert_eq!(proposal.calls[0].name, "get_arm");
        assert_eq!(proposal.calls[0].arguments, arguments, "{format}");
    }
}

#[test]
fn text_is_an_answer_in_native_formats() {
    let registry = registry();
    for format in [CallFormat::Hermes, CallFormat::Llama3, CallFormat::Pythonic] {
        let proposal = format.parse("Arm B completed.", &registry).unwrap();
        assert!(proposal.calls.is_empty());
        assert_eq!(
            proposal.other.unwrap().answer().unwrap(),
            "Arm B completed."
        );
    }
}

#[test]
fn hermes_structure_errors() {
    let registry = registry();
    let parse = |t: &str| CallFormat::Hermes.parse(t, &registry).unwrap_err();
    assert_eq!(
        parse("<tool_call>\n{\"name\": \"get_arm\"").code(),
        "unexpected_end"
    );
    assert_eq!(
        parse("<tool_call>\n{\"name\": \"get_arm\", \"arguments\": {}}").code(),
        "unclosed_tool_call"
    );
    assert_eq!(
        parse("<tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call> and more").code(),
        "trailing_text"
    );
    assert_eq!(
        parse("<tool_call>{\"name\": \"x\", \"name\": \"y\", \"arguments\": {}}</tool_call>")
            .code(),
        "duplicate_key"
    );
    let r = parse("<tool_call>{\"name\": \"x\", \"args\": {}}</tool_call>");
    assert_eq!(
        (r.gate(), r.code().as_str()),
        (proviso_contract::Gate::Schema, "unexpected_property")
    );
    let two = CallFormat::Hermes
        .parse("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>", &registry)
        .unwrap();
    assert_eq!(two.calls.len(), 2);
    assert_eq!(two.calls[1].pointer, "/calls/1");
}

#[test]
fn llama3_has_one_call_per_step() {
    let registry = registry();
    let r = CallFormat::Llama3
        .parse(
            "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}",
            &registry,
        )
        .unwrap_err();
    assert_eq!(r.code(), "trailing_content");
}

#[test]
fn grammars_name_only_declared_tools() {
    let registry = registry();
    let options = GrammarOptions {
        choice: ToolChoice::Required,
        max_calls: 2,
        ..GrammarOptions::default()
    };
    for format in CallFormat::ALL {
        let grammar = format.grammar(&registry, &options).unwrap();
        let text = match &grammar.grammar {
            Grammar::JsonSchema(v) => v.to_string(),
            Grammar::Lark(l) => l.clone(),
        };
        assert!(
            text.contains("get_arm") && text.contains("search_trials"),
            "{format}: {text}"
        );
        assert!(
            !text.contains("| text") && !text.contains("text:"),
            "{format}: required must not allow text: {text}"
        );
    }
    let pythonic = CallFormat::Pythonic.grammar(&registry, &options).unwrap();
    assert_eq!(
        pythonic.verified_only,
        vec!["maximum".to_owned(), "minimum".to_owned()]
    );
    let named = GrammarOptions {
        choice: ToolChoice::Named("nope".into()),
        ..GrammarOptions::default()
    };
    assert!(CallFormat::Hermes.grammar(&registry, &named).is_err());
}

#[test]
fn pythonic_refuses_what_it_cannot_write() {
    let registry = Registry::new(vec![ToolSpec::new(
        "f",
        "",
        IntentClass::Read,
        json!({"type": "object", "properties": {"x": {"not": {"type": "string"}}}}),
    )])
    .unwrap();
    let error = CallFormat::Pythonic
        .grammar(&registry, &GrammarOptions::default())
        .unwrap_err();
    assert!(error.to_string().contains("`not`"), "{error}");
}

#[test]
fn a_step_cut_inside_a_later_call_keeps_its_complete_calls() {
    let hermes_call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
    let cases: [(CallFormat, String, Option<String>); 7] = [
        (
            CallFormat::Hermes,
            format!("{hermes_call}\n<tool_call>\n{{\"name\": \"g\", \"argu"),
            Some(hermes_call.to_owned()),
        ),
        (
            CallFormat::Hermes,
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1".to_owned(),
            None,
        ),
        (
            CallFormat::Pythonic,
            "[f(x=1), g(y=\"a, b\"), h(z=\"cut".to_owned(),
            Some("[f(x=1), g(y=\"a, b\")]".to_owned()),
        ),
        (
            CallFormat::Pythonic,
            "[f(x=1), g(y=\"a, b".to_owned(),
            Some("[f(x=1)]".to_owned()),
        ),
        (CallFormat::Pythonic, "[f(x=1".to_owned(), None),
        (
            CallFormat::Llama3,
            "{\"name\": \"f\", \"parameters\": {\"x\": 1}} {\"na".to_owned(),
            None,
        ),
        (
            CallFormat::Envelope,
            "{\"reasoning\": \"\", \"intent\": {\"type\": \"tool".to_owned(),
            None,
        ),
    ];
    for (format, text, want) in cases {
        assert_eq!(format.complete_calls(&text), want, "{format:?}: {text}");
    }
}
