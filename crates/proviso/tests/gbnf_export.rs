//! proviso's GBNF exports, loaded by llama.cpp's own grammar parser and sampler (the llama.cpp
//! linked into proviso), generating on the default model; every output is then checked with
//! proviso's gates. The same check against the llama.cpp that `llama-cpp-python` builds from
//! PyPI is `scripts/verify-gbnf` (results in BENCHMARKS.md).

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Arc, OnceLock};

use proviso::decode::{Engine, Message, TokenId};
use proviso::llama::{Model, RunOptions};
use proviso::tools::export::{export_schema, export_tools, Dialect, GbnfError};
use proviso::tools::{
    CallFormat, Finish, GrammarOptions, Policy, Registry, ToolChoice, ToolGate, Usage,
};
use proviso::{Contract, LocalModel};
use serde_json::{json, Value};

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

fn to_gbnf(schema: &Value) -> Result<String, GbnfError> {
    Model::json_schema_to_gbnf(schema).map_err(|e| GbnfError::new(e.to_string()))
}

/// Greedy generation with llama.cpp's grammar sampler on `gbnf`.
fn generate_with_llama_grammar(gbnf: &str, prompt: &str, max_tokens: usize) -> (String, bool) {
    let local = local();
    let mut sampler = local.model().gbnf_sampler(gbnf).unwrap();
    let mut engine = local.engine(RunOptions::default().n_ctx(2048)).unwrap();
    let tokens = local.prompt(&[Message::user(prompt)]).unwrap();
    engine.reset().unwrap();
    engine.decode(&tokens).unwrap();
    let ends = local.tokenizer().end_tokens();
    let pieces: Vec<Vec<u8>> = local
        .tokenizer()
        .tokens()
        .into_iter()
        .map(|t| t.bytes)
        .collect();
    let mut out: Vec<TokenId> = Vec::new();
    let mut ended = false;
    while out.len() < max_tokens {
        let token = sampler.sample(&engine).unwrap();
        if ends.contains(&token) {
            ended = true;
            break;
        }
        out.push(token);
        engine.decode(&[token]).unwrap();
    }
    let bytes: Vec<u8> = out
        .iter()
        .flat_map(|&t| pieces[t as usize].clone())
        .collect();
    (String::from_utf8_lossy(&bytes).into_owned(), ended)
}

#[test]
fn exported_schemas_hold_under_llama_cpp() {
    let schemas = [
        json!({"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]},
            "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}, "count": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["color", "hex", "count"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
            "arms": {"type": "array", "items": {"enum": ["A", "B", "C"]}, "minItems": 1, "maxItems": 3},
            "note": {"type": "string", "maxLength": 40}}, "required": ["trial_id", "arms"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"day": {"type": "string", "format": "date"}, "ok": {"type": "boolean"}},
            "required": ["day", "ok"], "additionalProperties": false}),
    ];
    for schema in schemas {
        let gbnf = export_schema(&schema, Dialect::Gbnf, false, &to_gbnf).unwrap();
        let (text, ended) = generate_with_llama_grammar(&gbnf, "Answer in JSON.", 120);
        println!("{text}");
        assert!(ended, "the grammar never let the model stop: {text}");
        let verdict = Contract::builder(schema.clone())
            .build()
            .unwrap()
            .check_text(text.as_bytes());
        assert!(
            verdict.accepted(),
            "{text}\n{}",
            serde_json::to_string(&verdict).unwrap()
        );
    }
}

#[test]
fn exported_hermes_tool_grammar_holds_under_llama_cpp() {
    let registry = Arc::new(
        Registry::from_openai(&json!([
            {"type": "function", "function": {"name": "get_arm", "description": "Reads the arms of one trial.",
                "parameters": {"type": "object", "properties": {"trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"}},
                    "required": ["trial_id"], "additionalProperties": false}, "x-proviso": {"class": "read"}}},
            {"type": "function", "function": {"name": "search_trials", "description": "Full-text search.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string", "minLength": 2, "maxLength": 30}},
                    "required": ["query"], "additionalProperties": false}, "x-proviso": {"class": "read"}}}
        ]))
        .unwrap(),
    );
    for choice in [
        ToolChoice::Required,
        ToolChoice::Named("search_trials".into()),
    ] {
        let options = GrammarOptions::default().choice(choice).max_calls(2);
        let gbnf = export_tools(
            &registry,
            CallFormat::Hermes,
            &options,
            Dialect::Gbnf,
            false,
            &to_gbnf,
        )
        .unwrap();
        let (text, ended) = generate_with_llama_grammar(
            &gbnf,
            "Which arms of trial NCT04123456 were terminated?",
            160,
        );
        println!("{text}");
        assert!(ended, "{text}");
        let verdict = ToolGate::new(registry.clone(), CallFormat::Hermes, Policy::default()).check(
            &text,
            Finish::Stop,
            &Usage::default(),
        );
        assert!(
            verdict.accepted(),
            "{text}\n{}",
            serde_json::to_string(&verdict).unwrap()
        );
        assert!(!verdict.intent().unwrap().calls().is_empty());
    }
}

/// A tool whose parameters use their own `$defs` (a Pydantic model with a nested model): the
/// GBNF that llama.cpp's converter writes from proviso's hermes grammar document must resolve
/// them, and what llama.cpp's sampler generates under it must pass proviso's gates.
#[test]
fn a_tool_with_its_own_defs_holds_under_llama_cpp() {
    let registry = Arc::new(
        Registry::from_openai(&json!([
            {"type": "function", "function": {"name": "move_patient", "description": "Moves a patient to a ward.",
                "parameters": {"$defs": {"Ward": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^W[0-9]{2}$"},
                        "floor": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["code", "floor"], "additionalProperties": false}},
                    "type": "object", "properties": {"patient_id": {"type": "string", "pattern": "^P[0-9]{4}$"}, "to": {"$ref": "#/$defs/Ward"}},
                    "required": ["patient_id", "to"], "additionalProperties": false}, "x-proviso": {"class": "read"}}}
        ]))
        .unwrap(),
    );
    let options = GrammarOptions::default().choice(ToolChoice::Required);
    let gbnf = export_tools(
        &registry,
        CallFormat::Hermes,
        &options,
        Dialect::Gbnf,
        false,
        &to_gbnf,
    )
    .unwrap();
    let (text, ended) =
        generate_with_llama_grammar(&gbnf, "Move patient P0042 to ward W12 on floor 3.", 120);
    println!("{text}");
    assert!(ended, "{text}");
    let verdict = ToolGate::new(registry, CallFormat::Hermes, Policy::default()).check(
        &text,
        Finish::Stop,
        &Usage::default(),
    );
    assert!(
        verdict.accepted(),
        "{text}\n{}",
        serde_json::to_string(&verdict).unwrap()
    );
}
