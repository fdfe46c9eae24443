//! One registry, four call formats, the real default model. Each format's grammar is
//! compiled by llguidance, the model generates under it (greedy), the format's parser reads
//! the output back, the gates accept it, and the intent survives being written in every other
//! format and read back unchanged.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Arc, OnceLock};

use proviso::decode::{CompileOptions, Sampling};
use proviso::harness::{Agent, AgentConfig, Message, ProposeRequest, Proposer, RunEnd, Toolbox};
use proviso::llama::RunOptions;
use proviso::tools::{
    instructions, write_call, CallFormat, Finish, GrammarOptions, Policy, Registry, ToolChoice,
    ToolGate, ToolSpec, Usage,
};
use proviso::{Intent, IntentClass, LocalModel, LocalProposer};
use serde_json::json;

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

fn registry() -> Registry {
    Registry::new(vec![
        ToolSpec::new(
            "search_trials",
            "Full-text search over the trial registry.",
            IntentClass::Read,
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 2, "maxLength": 40}},
                "required": ["query"], "additionalProperties": false}),
        ),
        ToolSpec::new(
            "get_arm",
            "Reads the arms of one trial.",
            IntentClass::Read,
            json!({"type": "object", "properties": {
                "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                "arm_label": {"enum": ["A", "B", "C"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 3}},
                "required": ["trial_id"], "additionalProperties": false}),
        ),
    ])
    .unwrap()
}

fn calls_of(intent: &Intent) -> Vec<(String, serde_json::Value)> {
    intent
        .calls()
        .iter()
        .map(|c| {
            (
                c.name().to_owned(),
                serde_json::Value::Object(c.arguments().clone()),
            )
        })
        .collect()
}

#[test]
fn every_format_generates_parses_and_round_trips() {
    let local = local();
    let registry = Arc::new(registry());
    for format in CallFormat::ALL {
        for choice in [ToolChoice::Required, ToolChoice::Named("get_arm".into())] {
            let options = GrammarOptions::default()
                .choice(choice.clone())
                .max_calls(2);
            let grammar = format.grammar(&registry, &options).unwrap();
            let engine = local.engine(RunOptions::default().n_ctx(2048)).unwrap();
            let mut proposer =
                LocalProposer::new(local, engine, Sampling::greedy(), CompileOptions::default());
            let messages = vec![
                Message::system(instructions(&registry, format, &options)),
                Message::user("Which arms of trial NCT04123456 were terminated?"),
            ];
            let proposed = proposer
                .propose(&ProposeRequest::new(&messages, &grammar, 120))
                .unwrap();
            println!(
                "{format} {choice:?}: {:?} ({})",
                proposed.text,
                proposed.finish.as_str()
            );
            assert_ne!(
                proposed.finish,
                Finish::Length,
                "{format}: {}",
                proposed.text
            );
            let gate = ToolGate::new(registry.clone(), format, Policy::default());
            let verdict = gate.check(&proposed.text, Finish::Stop, &Usage::default());
            let intent = verdict
                .intent()
                .unwrap_or_else(|| panic!("{format}: {}", serde_json::to_string(&verdict).unwrap()))
                .clone();
            let calls = calls_of(&intent);
            assert!(!calls.is_empty(), "{format}: a call was required");
            if let ToolChoice::Named(name) = &choice {
                assert!(calls.iter().all(|(n, _)| n == name), "{format}: {calls:?}");
            }
            // The intent written in every format reads back identically.
            for other in CallFormat::ALL {
                for (name, arguments) in &calls {
                    let text = write_call(other, name, arguments.as_object().unwrap());
                    let verdict = ToolGate::new(registry.clone(), other, Policy::default()).check(
                        &text,
                        Finish::Stop,
                        &Usage::default(),
                    );
                    let back = calls_of(verdict.intent().unwrap());
                    assert_eq!(
                        back,
                        vec![(name.clone(), arguments.clone())],
                        "{format} → {other}"
                    );
                }
            }
        }
    }
}

#[test]
fn auto_lets_the_model_answer_in_text_or_call_under_the_grammar() {
    let local = local();
    let registry = Arc::new(registry());
    for format in CallFormat::ALL {
        let options = GrammarOptions::default();
        let grammar = format.grammar(&registry, &options).unwrap();
        let engine = local.engine(RunOptions::default().n_ctx(2048)).unwrap();
        let mut proposer =
            LocalProposer::new(local, engine, Sampling::greedy(), CompileOptions::default());
        let messages = vec![
            Message::system(instructions(&registry, format, &options)),
            Message::user("Say hello."),
        ];
        let proposed = proposer
            .propose(&ProposeRequest::new(&messages, &grammar, 60))
            .unwrap();
        println!(
            "{format} auto: {:?} ({})",
            proposed.text,
            proposed.finish.as_str()
        );
        let finish = proposed.finish;
        let verdict = ToolGate::new(registry.clone(), format, Policy::default()).check(
            &proposed.text,
            finish,
            &Usage::default(),
        );
        // Whatever the model chose, the verdict is typed: an answer, a call that passed the
        // gates, or a truncation named at the transport gate. Never a parse failure.
        assert_ne!(
            verdict.gate().map(|g| g.as_str()),
            Some("parse"),
            "{format}: {}",
            serde_json::to_string(&verdict).unwrap()
        );
    }
}

#[test]
fn the_demo_agent_runs_to_a_typed_end_on_the_real_model() {
    let local = local();
    for format in [CallFormat::Envelope, CallFormat::Pythonic] {
        let agent: Agent = proviso_demo_agent(format);
        let engine = local.engine(RunOptions::default().n_ctx(4096)).unwrap();
        let mut proposer =
            LocalProposer::new(local, engine, Sampling::greedy(), CompileOptions::default());
        let report = agent.run(
            &mut proposer,
            "Which arms of trial NCT04123456 were terminated?",
            &mut (),
        );
        println!("{format}: {}", serde_json::to_string(&report).unwrap());
        // Every call that ran was a declared read tool, and the run ended in a typed way.
        for executed in &report.executed {
            assert!(["search_trials", "get_arm", "get_document"].contains(&executed.call.name()));
        }
        assert!(
            !matches!(report.end, RunEnd::ModelFailed { .. }),
            "{:?}",
            report.end
        );
        assert!(report.usage.steps <= 6);
    }
}

/// A small trial agent over a stub toolbox, so this crate's tests do not depend on the demo
/// crate.
fn proviso_demo_agent(format: CallFormat) -> Agent {
    let toolbox = Toolbox::new()
        .bind(registry().get("search_trials").unwrap().spec().clone(), |a| {
            Ok(json!({"results": [{"trial_id": "NCT04123456", "query": a["query"]}]}))
        })
        .unwrap()
        .bind(registry().get("get_arm").unwrap().spec().clone(), |_| {
            Ok(json!({"arms": [{"label": "A", "status": "terminated"}, {"label": "B", "status": "completed"}]}))
        })
        .unwrap();
    Agent::new(
        toolbox,
        AgentConfig::default()
            .format(format)
            .policy(Policy {
                budget: proviso::tools::Budget {
                    max_steps: Some(4),
                    ..Default::default()
                },
                ..Policy::default()
            })
            .max_tokens_per_step(160),
    )
    .unwrap()
}
