//! A text answer cannot carry a call the grammar did not check. Hermes' reader finds a
//! `<tool_call>` tag anywhere in a text, so the text alternative of its grammar (under `auto`
//! and under `none`) never contains one: a model that starts writing a call in the middle of
//! an answer is steered away by the mask, instead of producing an output every gate
//! attempt refuses. Checked over a byte-level tokenizer, without the model.

#![allow(clippy::unwrap_used)]

use proviso_contract::IntentClass;
use proviso_decode::{CompileOptions, ConstraintSpec, TextChecker};
use proviso_tools::{CallFormat, Grammar, GrammarOptions, Registry, ToolChoice, ToolSpec};
use serde_json::json;

fn checker(format: CallFormat, choice: ToolChoice) -> TextChecker {
    let registry = Registry::new(vec![ToolSpec::new(
        "write_file",
        "Writes a file.",
        IntentClass::Mutate,
        json!({"type": "object", "properties": {"path": {"type": "string"},
               "content": {"type": "string"}},
               "required": ["path", "content"], "additionalProperties": false}),
    )])
    .unwrap();
    let grammar = format
        .grammar(&registry, &GrammarOptions::default().choice(choice))
        .unwrap();
    let Grammar::Lark(lark) = grammar.grammar else {
        panic!("a text alternative is a Lark grammar");
    };
    TextChecker::new(&ConstraintSpec::Lark(lark), &CompileOptions::default()).unwrap()
}

#[test]
fn a_hermes_text_answer_never_contains_a_call_tag() {
    let call = "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hello\"}}\n</tool_call>";
    for choice in [ToolChoice::Auto, ToolChoice::None] {
        let check = checker(CallFormat::Hermes, choice.clone());
        assert!(check.check("I will write it now.").is_ok(), "{choice:?}");
        assert!(
            check.check("Done: the file holds <b>hello</b>.").is_ok(),
            "{choice:?}: another tag is text"
        );
        let smuggled = format!("Sure. {call}");
        assert!(check.check(&smuggled).is_err(), "{choice:?}: {smuggled}");
        assert!(
            check.check("Sure. <tool_call>{\"name\": \"write").is_err(),
            "{choice:?}"
        );
    }
    // Under `auto` the call itself, whole, is still in the language.
    assert!(checker(CallFormat::Hermes, ToolChoice::Auto)
        .check(call)
        .is_ok());
}
