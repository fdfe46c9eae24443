//! The bundled agents on the real default model, greedy: every question of
//! `crates/proviso-demo/questions.json` ends with an accepted final answer that states the
//! right fact, with its evidence gate passed, and none states a fact marked wrong.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::OnceLock;

use proviso::decode::{CompileOptions, Sampling};
use proviso::harness::RunEnd;
use proviso::llama::RunOptions;
use proviso::{LocalModel, LocalProposer};
use proviso_demo::DemoKind;
use serde_json::Value;

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

fn questions() -> Vec<Value> {
    let text = include_str!("../../proviso-demo/questions.json");
    let document: Value = serde_json::from_str(text).unwrap();
    document["questions"].as_array().unwrap().clone()
}

#[test]
fn every_demo_question_ends_with_a_grounded_right_answer() {
    let local = local();
    let mut failures = Vec::new();
    for case in questions() {
        let question = case["question"].as_str().unwrap();
        let kind = DemoKind::for_question(question);
        let format = match kind {
            DemoKind::Trials => proviso::tools::CallFormat::Hermes,
            DemoKind::Travel => proviso::tools::CallFormat::Envelope,
        };
        let agent = proviso_demo::agent(kind, format).unwrap();
        let engine = local.engine(RunOptions::default()).unwrap();
        let mut proposer =
            LocalProposer::new(local, engine, Sampling::greedy(), CompileOptions::default());
        let report = agent.run(&mut proposer, question, &mut ());
        let RunEnd::FinalAnswer { answer } = &report.end else {
            failures.push(format!("{question}: ended {:?}", report.end));
            continue;
        };
        // The answer passed the answer contract, evidence gate included, inside the run;
        // the text it states is what a user reads.
        let text = answer["answer"].as_str().unwrap_or_default().to_lowercase();
        let facts: Vec<&str> = case["facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let wrong: Vec<&str> = case["wrong"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        println!("{question}\n  → {text}");
        if !facts.iter().any(|f| text.contains(&f.to_lowercase())) {
            failures.push(format!("{question}: {text:?} states none of {facts:?}"));
        }
        if let Some(w) = wrong.iter().find(|w| text.contains(&w.to_lowercase())) {
            failures.push(format!("{question}: {text:?} states the wrong {w:?}"));
        }
        assert!(
            !answer["citations"].as_array().unwrap().is_empty(),
            "{question}: an accepted answer without citations"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
