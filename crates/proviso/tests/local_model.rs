//! The real default model (SmolLM2-135M-Instruct, fetched on first use) under constraints:
//! every output must pass the schema gate, the tokenizer must match known ids, and schemas
//! the grammar cannot enforce must be refused, or served under `relax` with the gates doing
//! the rest. Greedy decoding, so every run is the same.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::OnceLock;

use proviso::decode::{
    CompileOptions, ConstraintError, ConstraintSpec, GenerateOptions, Generation, Generator,
    Message, StopReason,
};
use proviso::llama::RunOptions;
use proviso::{Contract, LocalModel};
use serde_json::{json, Value};

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

fn run_options() -> RunOptions {
    RunOptions::default().n_ctx(1024)
}

fn generate(spec: &ConstraintSpec, prompt: &str, options: &CompileOptions) -> Generation {
    let local = local();
    let compiled = local.compile(spec, options).unwrap();
    let mut generator = Generator::new(local.engine(run_options()).unwrap(), local.tokenizer());
    let prompt = local.prompt(&[Message::user(prompt)]).unwrap();
    generator
        .generate(
            &prompt,
            Some(&compiled),
            &GenerateOptions::default().max_tokens(400),
        )
        .unwrap()
}

/// Generates under `schema` and checks the output with the contract's gates.
fn assert_schema_holds(schema: Value, prompt: &str) -> Value {
    let contract = Contract::builder(schema.clone()).build().unwrap();
    let generation = generate(
        &ConstraintSpec::JsonSchema(schema),
        prompt,
        &CompileOptions::default(),
    );
    println!(
        "{prompt}\n=> {}\n{:?}",
        generation.text(),
        generation.stats.summary()
    );
    assert_eq!(generation.stop_reason, StopReason::GrammarComplete);
    let verdict = contract.check_text(generation.text().as_bytes());
    assert!(verdict.accepted(), "{}: {verdict:?}", generation.text());
    verdict.intent().unwrap().answer().unwrap().clone()
}

#[test]
fn tokenizer_matches_known_ids() {
    let tokenizer = local().tokenizer();
    // Ids read from the GGUF's tokenizer.ggml.tokens with the `gguf` Python package.
    assert_eq!(tokenizer.tokenize(b"Hello world", false), vec![19556, 905]);
    assert_eq!(tokenizer.tokenize(b"<|im_start|>", true), vec![1]);
    assert_ne!(tokenizer.tokenize(b"<|im_start|>", false), vec![1]);
    assert!(tokenizer.end_tokens().contains(&2));
    let tokens = tokenizer.tokens();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens[905].bytes, b" world");
    assert!(tokens[2].special && tokens[2].bytes == b"<|im_end|>");
}

#[test]
fn tokenizer_round_trips() {
    let tokenizer = local().tokenizer();
    let pieces = tokenizer.tokens();
    for text in [
        "{\"trial_id\": \"NCT04123456\", \"arm\": \"B\"}",
        "Ünïcödé — 750 yuan, 7.5e2; 漢字 🙂",
        "  leading and trailing  \n\t",
    ] {
        let ids = tokenizer.tokenize(text.as_bytes(), false);
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&t| pieces[t as usize].bytes.clone())
            .collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), text);
    }
}

#[test]
fn the_chat_template_comes_from_the_gguf() {
    let prompt = local().prompt(&[Message::user("Hi")]).unwrap();
    let pieces = local().tokenizer().tokens();
    let text: Vec<u8> = prompt
        .iter()
        .flat_map(|&t| pieces[t as usize].bytes.clone())
        .collect();
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("<|im_start|>system\n"), "{text}");
    assert!(
        text.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
        "{text}"
    );
}

#[test]
fn nested_objects_and_enums() {
    assert_schema_holds(
        json!({
            "type": "object",
            "properties": {
                "patient": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 24},
                        "age": {"type": "integer", "minimum": 0, "maximum": 120}
                    },
                    "required": ["name", "age"],
                    "additionalProperties": false
                },
                "arm": {"enum": ["placebo", "low_dose", "high_dose"]}
            },
            "required": ["patient", "arm"],
            "additionalProperties": false
        }),
        "Record a patient, Ann, aged 54, assigned to the high dose arm.",
    );
}

#[test]
fn arrays_with_bounds() {
    let value = assert_schema_holds(
        json!({
            "type": "object",
            "properties": {
                "colors": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 12},
                    "minItems": 2,
                    "maxItems": 3
                }
            },
            "required": ["colors"],
            "additionalProperties": false
        }),
        "List some colors of the rainbow.",
    );
    let n = value["colors"].as_array().unwrap().len();
    assert!((2..=3).contains(&n));
}

#[test]
fn any_of_and_pattern() {
    assert_schema_holds(
        json!({
            "type": "object",
            "properties": {
                "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                "dose": {"anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 1000},
                    {"type": "null"}
                ]}
            },
            "required": ["trial_id", "dose"],
            "additionalProperties": false
        }),
        "Which trial and dose? Trial NCT04123456, 50 mg.",
    );
}

#[test]
fn recursive_ref() {
    // `op` refers to itself through its arguments. The root's arguments must be operations,
    // so the output nests at least once; leaves are bounded integers, because a 135M model
    // left free will happily write a 300-digit number, and a grammar guarantees shape, not
    // termination.
    let value = assert_schema_holds(
        json!({
            "$defs": {
                "op": {
                    "type": "object",
                    "properties": {
                        "op": {"enum": ["+", "*"]},
                        "args": {
                            "type": "array",
                            "items": {"anyOf": [
                                {"type": "integer", "minimum": 0, "maximum": 99},
                                {"$ref": "#/$defs/op"}
                            ]},
                            "minItems": 2,
                            "maxItems": 2
                        }
                    },
                    "required": ["op", "args"],
                    "additionalProperties": false
                }
            },
            "type": "object",
            "properties": {
                "op": {"enum": ["+", "*"]},
                "args": {"type": "array", "items": {"$ref": "#/$defs/op"}, "minItems": 2, "maxItems": 2}
            },
            "required": ["op", "args"],
            "additionalProperties": false
        }),
        "Write (1 + 2) * (3 + 4) as an expression tree in JSON.",
    );
    assert!(
        value["args"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_object),
        "{value}"
    );
}

#[test]
fn forced_tokens_are_fed_in_batches() {
    let generation = generate(
        &ConstraintSpec::JsonSchema(json!({
            "type": "object",
            "properties": {
                "schema_version": {"const": "ka-answer-v1-long-constant-label"},
                "ok": {"type": "boolean"}
            },
            "required": ["schema_version", "ok"],
            "additionalProperties": false
        })),
        "Is the sky blue?",
        &CompileOptions::default(),
    );
    let stats = &generation.stats;
    assert!(stats.forced_tokens >= 5, "{:?}", stats.summary());
    assert!(
        stats.forward_passes < stats.generated_tokens,
        "{:?}",
        stats.summary()
    );
}

#[test]
fn regex_and_choice_constraints() {
    let generation = generate(
        &ConstraintSpec::Regex("NCT[0-9]{8}".into()),
        "Name a clinical trial id.",
        &CompileOptions::default(),
    );
    let text = generation.text();
    assert!(text.len() == 11 && text.starts_with("NCT"), "{text}");
    let generation = generate(
        &ConstraintSpec::Choice(vec!["read".into(), "compute".into(), "mutate".into()]),
        "Which class is a database write?",
        &CompileOptions::default(),
    );
    assert!(["read", "compute", "mutate"].contains(&generation.text().as_str()));
}

#[test]
fn unenforceable_keywords_are_refused_or_relaxed() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3, "uniqueItems": true}
        },
        "required": ["tags"],
        "additionalProperties": false
    });
    let spec = ConstraintSpec::JsonSchema(schema.clone());
    let err = local()
        .compile(&spec, &CompileOptions::default())
        .unwrap_err();
    assert_eq!(
        err,
        ConstraintError::Unsupported {
            keywords: vec!["uniqueItems".into()]
        }
    );
    assert!(err.to_string().contains("`uniqueItems`"));
    let relaxed = CompileOptions::default().relax(true);
    let compiled = local().compile(&spec, &relaxed).unwrap();
    assert_eq!(compiled.verified_only(), ["uniqueItems".to_owned()]);
    // Whatever the superset grammar lets through, the gates hold the full schema, with
    // bounded regenerations that show the model each rejection.
    let contract = Contract::builder(schema).build().unwrap();
    let mut generator = Generator::new(local().engine(run_options()).unwrap(), local().tokenizer());
    let mut seen = Vec::new();
    let checked = local()
        .generate_checked(
            &mut generator,
            &contract,
            &compiled,
            &[Message::user("Tag this three times with a: a, a, a.")],
            &GenerateOptions::default(),
            3,
            &mut |attempt, generation, verdict| {
                seen.push((
                    attempt,
                    generation.text(),
                    verdict.code().map_or("accepted", |c| c.as_str()).to_owned(),
                ));
            },
        )
        .unwrap();
    assert!(
        checked.attempt <= 3 && seen.len() == checked.attempt,
        "{seen:?}"
    );
    for (_, text, code) in &seen {
        // Every attempt is either accepted by the full schema or rejected for exactly the
        // keyword the grammar did not enforce.
        let verdict = contract.check_text(text.as_bytes());
        assert_eq!(verdict.code().map_or("accepted", |c| c.as_str()), code);
        assert!(
            verdict.accepted() || code == "schema_unique_items",
            "{seen:?}"
        );
    }
    if seen.len() < 3 {
        assert!(checked.verdict.accepted());
    }
}

#[test]
fn truncation_is_length_not_a_value() {
    let local = local();
    let compiled = local
        .compile(
            &ConstraintSpec::JsonSchema(json!({"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]})),
            &CompileOptions::default(),
        )
        .unwrap();
    let mut generator = Generator::new(local.engine(run_options()).unwrap(), local.tokenizer());
    let prompt = local
        .prompt(&[Message::user("Tell a long story.")])
        .unwrap();
    let generation = generator
        .generate(
            &prompt,
            Some(&compiled),
            &GenerateOptions::default().max_tokens(8),
        )
        .unwrap();
    assert_eq!(generation.stop_reason, StopReason::Length);
    assert_eq!(generation.tokens.len(), 8);
}

#[test]
fn compile_limits_stop_oversized_grammars_in_bounded_time() {
    // 3,000 required properties, each with its own pattern, against tight limits on grammar
    // size and lexer-construction work: refused quickly with a clear error, never compiled
    // slowly or half-way.
    let properties: serde_json::Map<String, Value> = (0..3000)
        .map(|i| {
            (
                format!("field_{i}"),
                json!({"type": "string", "pattern": format!("^x{i}[a-z]{{2,9}}$")}),
            )
        })
        .collect();
    let names: Vec<&String> = properties.keys().collect();
    let schema = json!({"type": "object", "properties": properties, "required": names});
    let options = CompileOptions::default()
        .max_grammar_size(20_000)
        .initial_lexer_fuel(10_000);
    let start = std::time::Instant::now();
    let err = local()
        .compile(&ConstraintSpec::JsonSchema(schema), &options)
        .unwrap_err();
    assert!(matches!(err, ConstraintError::Invalid { .. }), "{err}");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

/// Scoring a text in one pass (every position's logits kept) gives what feeding it one
/// token at a time gives: the re-ranker's likelihoods are the model's.
#[test]
fn scoring_in_one_pass_matches_token_by_token() {
    use proviso::decode::{log_probability, Engine};
    let local = local();
    let tokens = local
        .tokenizer()
        .tokenize(b"Document: DVDs are lent for 7 days.\nQuestion:", false);
    let asked = local
        .tokenizer()
        .tokenize(b" How long can I keep a DVD?", false);
    let mut batched = local.engine(run_options()).unwrap();
    batched.decode(&tokens).unwrap();
    let fast = batched.score(&asked).unwrap();
    let mut single = local.engine(run_options()).unwrap();
    single.decode(&tokens).unwrap();
    let mut slow = Vec::new();
    for &t in &asked {
        slow.push(log_probability(single.logits(), t).unwrap());
        single.decode(&[t]).unwrap();
    }
    assert_eq!(fast.len(), asked.len());
    for (a, b) in fast.iter().zip(&slow) {
        assert!((a - b).abs() < 0.05, "{fast:?} vs {slow:?}");
        assert!(*a < 0.0);
    }
    // The context holds the scored text after it, as after a decode.
    assert_eq!(batched.len(), tokens.len() + asked.len());
}
