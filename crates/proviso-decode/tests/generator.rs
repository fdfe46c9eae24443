//! The sampling loop without a model: a scripted engine over a byte-level tokenizer
//! (`proviso_decode::testing`). Each test scripts what the "model" wants to write and checks
//! what the generator makes of it: the constraint's masks and forced tokens, the stop
//! reasons, the repetition stop and wrap-up, stop sequences, streaming, cancellation, avoided
//! texts, logprobs and prefix reuse. These run in milliseconds, before any real-model test.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proviso_decode::testing::{ByteTokenizer, ScriptedEngine};
use proviso_decode::{
    CompileOptions, Compiled, Constrainer, ConstraintSpec, GenerateError, GenerateOptions,
    Generator, StopReason, Tokenizer, WrapUp,
};
use serde_json::{json, Value};

const PROMPT: &[u8] = b"Q: write it\nA: ";

fn tokenizer() -> Arc<dyn Tokenizer> {
    ByteTokenizer::shared()
}

fn prompt() -> Vec<u32> {
    tokenizer().tokenize(PROMPT, false)
}

fn compile(spec: ConstraintSpec) -> Compiled {
    Constrainer::new(tokenizer(), &CompileOptions::default())
        .unwrap()
        .compile(&spec, &CompileOptions::default())
        .unwrap()
}

fn schema(schema: Value) -> Compiled {
    compile(ConstraintSpec::JsonSchema(schema))
}

fn generator(text: &str) -> Generator<ScriptedEngine> {
    Generator::new(ScriptedEngine::writing(text), &tokenizer())
}

#[test]
fn unconstrained_text_ends_at_the_end_token() {
    let out = generator("hello world")
        .generate(&prompt(), None, &GenerateOptions::default())
        .unwrap();
    assert_eq!(out.text(), "hello world");
    assert_eq!(out.stop_reason, StopReason::Stop);
    assert_eq!(out.stats.prompt_tokens, PROMPT.len());
    assert_eq!(out.stats.generated_tokens, 11);
}

#[test]
fn the_budget_cuts_the_output_as_length() {
    let out = generator("hello world")
        .generate(&prompt(), None, &GenerateOptions::default().max_tokens(5))
        .unwrap();
    assert_eq!(out.text(), "hello");
    assert_eq!(out.stop_reason, StopReason::Length);
    assert_eq!(StopReason::Length.finish_reason(), "length");
}

#[test]
fn a_prompt_that_fills_the_context_is_refused() {
    let mut generator = Generator::new(
        ScriptedEngine::new(8, Box::new(|_| vec![0.0; ByteTokenizer::VOCAB])),
        &tokenizer(),
    );
    let err = generator
        .generate(&prompt(), None, &GenerateOptions::default())
        .unwrap_err();
    assert!(
        matches!(err, GenerateError::PromptTooLong { capacity: 8, .. }),
        "{err:?}"
    );
}

#[test]
fn the_grammar_forces_the_punctuation_and_the_model_writes_the_values() {
    let compiled = schema(json!({
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
        "additionalProperties": false
    }));
    let out = generator(r#"{"count": 42}"#)
        .generate(&prompt(), Some(&compiled), &GenerateOptions::default())
        .unwrap();
    assert_eq!(out.text(), r#"{"count": 42}"#);
    assert_eq!(out.stop_reason, StopReason::GrammarComplete);
    // `{"count": ` and the closing brace leave the model no choice: fed, not sampled.
    assert!(out.stats.forced_tokens >= 10, "{:?}", out.stats);
    assert!(compiled.accepts(out.tokens.as_slice(), &mut |_| {}));
}

#[test]
fn what_the_grammar_forbids_is_unreachable() {
    // The model wants prose; the schema wants one of two colours. The output is a colour.
    let compiled = schema(json!({"enum": ["red", "green"]}));
    let out = generator("blue sky")
        .generate(&prompt(), Some(&compiled), &GenerateOptions::default())
        .unwrap();
    let value: Value = serde_json::from_str(&out.text()).unwrap();
    assert!(value == json!("red") || value == json!("green"), "{value}");
    assert_eq!(out.stop_reason, StopReason::GrammarComplete);

    // A model that wants to write an invalid object still writes a valid one.
    let compiled = schema(json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": false
    }));
    let out = generator(r#"{"ok": "yes"}"#)
        .generate(&prompt(), Some(&compiled), &GenerateOptions::default())
        .unwrap();
    let value: Value = serde_json::from_str(&out.text()).unwrap();
    assert!(value["ok"].is_boolean(), "{value}");
}

#[test]
fn regex_and_choice_constraints_hold_too() {
    let out = generator("call 555-0100 now")
        .generate(
            &prompt(),
            Some(&compile(ConstraintSpec::Regex(r"[0-9]{3}-[0-9]{4}".into()))),
            &GenerateOptions::default(),
        )
        .unwrap();
    assert!(out.text().len() == 8 && out.text().as_bytes()[3] == b'-');
    let out = generator("maybe")
        .generate(
            &prompt(),
            Some(&compile(ConstraintSpec::Choice(vec![
                "yes".into(),
                "no".into(),
            ]))),
            &GenerateOptions::default(),
        )
        .unwrap();
    assert!(out.text() == "yes" || out.text() == "no", "{}", out.text());
}

#[test]
fn a_loop_stops_on_repetition_long_before_the_budget() {
    let looping = "the cat sat. ".repeat(40);
    let out = generator(&looping)
        .generate(&prompt(), None, &GenerateOptions::default().max_tokens(500))
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::Repetition);
    assert!(out.tokens.len() < 300, "{}", out.tokens.len());
    // Without the limit, the same model runs to the budget.
    let out = generator(&looping)
        .generate(
            &prompt(),
            None,
            &GenerateOptions::default().max_tokens(500).repetition(None),
        )
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::Length);
}

#[test]
fn wrap_up_closes_a_looping_constrained_output_within_its_budget() {
    let compiled = schema(json!({
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        "required": ["items"]
    }));
    let looping = format!(r#"{{"items": [{}"#, r#""ab", "#.repeat(200));
    let options = GenerateOptions::default().max_tokens(120);
    // Unsteered, the loop is stopped on repetition and the output is incomplete.
    let out = generator(&looping)
        .generate(&prompt(), Some(&compiled), &options)
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::Repetition);
    assert!(serde_json::from_str::<Value>(&out.text()).is_err());
    // Steered to close, it ends complete and valid, inside the same budget.
    let out = generator(&looping)
        .generate(
            &prompt(),
            Some(&compiled),
            &options.clone().wrap_up(Some(WrapUp::for_budget(120))),
        )
        .unwrap();
    assert_eq!(
        out.stop_reason,
        StopReason::GrammarComplete,
        "{}",
        out.text()
    );
    assert!(out.stats.wrap_up_at.is_some());
    let value: Value = serde_json::from_str(&out.text()).unwrap();
    assert!(value["items"].is_array());
    // The retry policy does the same on its own: a repetition stop, then a closed retry.
    let mut attempts = Vec::new();
    let out = generator(&looping)
        .generate_retrying(&prompt(), Some(&compiled), &options, 2, &mut |i, g| {
            attempts.push((i, g.stop_reason.clone()));
        })
        .unwrap();
    assert_eq!(attempts[0], (1, StopReason::Repetition));
    assert_eq!(out.stop_reason, StopReason::GrammarComplete);
    assert!(serde_json::from_str::<Value>(&out.text()).is_ok());
}

#[test]
fn a_constrained_output_cut_by_the_budget_is_retried_to_close() {
    let compiled = schema(json!({"type": "array", "items": {"type": "integer"}}));
    // Distinct numbers: no repetition, just too long for the budget.
    let long: String = (100..200).map(|n| format!("{n}, ")).collect();
    let text = format!("[{long}");
    let options = GenerateOptions::default().max_tokens(60);
    let mut stops = Vec::new();
    let out = generator(&text)
        .generate_retrying(&prompt(), Some(&compiled), &options, 2, &mut |_, g| {
            stops.push(g.stop_reason.clone());
        })
        .unwrap();
    assert_eq!(stops, [StopReason::Length, StopReason::GrammarComplete]);
    assert!(out.tokens.len() <= 60);
    assert!(serde_json::from_str::<Value>(&out.text())
        .unwrap()
        .is_array());
}

#[test]
fn stop_sequences_end_the_text_before_them() {
    let out = generator("one two END three")
        .generate(
            &prompt(),
            None,
            &GenerateOptions::default().stop(vec!["END".into(), "\n\n".into()]),
        )
        .unwrap();
    assert_eq!(out.text(), "one two ");
    assert_eq!(out.stop_reason, StopReason::StopSequence("END".into()));
}

#[test]
fn streamed_pieces_hold_back_a_possible_stop_and_concatenate_to_the_output() {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let out = generator("an ENgine ENDS")
        .generate_streaming(
            &prompt(),
            None,
            &GenerateOptions::default().stop(vec!["END".into()]),
            &mut |piece| {
                pieces.push(piece.to_vec());
                true
            },
        )
        .unwrap();
    assert_eq!(out.text(), "an ENgine ");
    assert_eq!(pieces.concat(), b"an ENgine ");
    // Nothing of `END` was ever sent.
    assert!(pieces.iter().all(|p| !p.contains(&b'D')));
}

#[test]
fn a_caller_that_goes_away_cancels_the_generation() {
    let mut seen = 0;
    let out = generator("a long answer that nobody reads")
        .generate_streaming(&prompt(), None, &GenerateOptions::default(), &mut |piece| {
            seen += piece.len();
            seen < 5
        })
        .unwrap();
    assert_eq!(out.stop_reason, StopReason::Cancelled);
    assert!(out.tokens.len() < 10);
}

#[test]
fn an_avoided_text_is_steered_around_under_a_constraint() {
    let compiled = schema(json!({
        "type": "object",
        "properties": {"city": {"type": "string", "enum": ["Oslo", "Bergen"]}},
        "required": ["city"],
        "additionalProperties": false
    }));
    let wants = r#"{"city": "Oslo"}"#;
    let out = generator(wants)
        .generate(&prompt(), Some(&compiled), &GenerateOptions::default())
        .unwrap();
    assert_eq!(out.text(), wants);
    let out = generator(wants)
        .generate(
            &prompt(),
            Some(&compiled),
            &GenerateOptions::default().avoid(vec![wants.into()]),
        )
        .unwrap();
    // `O` is passed over: the grammar would force `slo"}` after it, completing the call.
    assert_eq!(out.text(), r#"{"city": "Bergen"}"#);
    // When every allowed continuation completes it, steering gives way to the grammar.
    let out = generator(wants)
        .generate(
            &prompt(),
            Some(&compiled),
            &GenerateOptions::default().avoid(vec![r#"{"city": "#.into()]),
        )
        .unwrap();
    assert_eq!(out.text(), wants);
}

#[test]
fn forced_tokens_are_certain_and_sampled_ones_carry_their_alternatives() {
    let compiled = schema(json!({"enum": ["yes", "no"]}));
    let out = generator(r#""no""#)
        .generate(
            &prompt(),
            Some(&compiled),
            &GenerateOptions::default().logprobs(Some(2)),
        )
        .unwrap();
    assert_eq!(out.text(), r#""no""#);
    assert_eq!(out.logprobs.len(), out.tokens.len());
    // The opening quote is forced: probability 1.
    assert_eq!(out.logprobs[0].logprob, 0.0);
    // `n` was chosen over `y`, the one alternative the grammar allowed.
    let chosen = &out.logprobs[1];
    assert_eq!(chosen.token, u32::from(b'n'));
    assert!(chosen.logprob < 0.0 && chosen.logprob > -0.01, "{chosen:?}");
    assert_eq!(chosen.top.len(), 2);
}

#[test]
fn a_prompt_that_shares_a_prefix_is_not_fed_again() {
    let mut generator = generator("ok");
    let first = generator
        .generate(&prompt(), None, &GenerateOptions::default())
        .unwrap();
    assert_eq!(first.stats.cached_prompt_tokens, 0);
    let fed = generator.engine_mut().fed();
    // The next step repeats the conversation so far and adds a turn.
    let mut longer = prompt();
    longer.extend(tokenizer().tokenize(b"ok\nQ: again\nA: ", false));
    let second = generator
        .generate(&longer, None, &GenerateOptions::default())
        .unwrap();
    assert_eq!(second.text(), "ok");
    assert!(second.stats.cached_prompt_tokens >= PROMPT.len());
    let fed_now = generator.engine_mut().fed() - fed;
    assert!(
        fed_now < longer.len(),
        "fed {fed_now} of a {}-token prompt",
        longer.len()
    );
}

#[test]
fn the_mask_overlap_does_not_change_the_output() {
    let compiled = schema(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"]
    }));
    let wants = r#"{"a": "x y", "b": 7}"#;
    let run = |overlap: bool| {
        generator(wants)
            .generate(
                &prompt(),
                Some(&compiled),
                &GenerateOptions::default().overlap_mask(overlap),
            )
            .unwrap()
    };
    let (on, off) = (run(true), run(false));
    assert_eq!(on.text(), wants);
    assert_eq!(on.tokens, off.tokens);
    assert_eq!(on.stop_reason, off.stop_reason);
}
