//! The bundled agents on the real default model, greedy: every question of
//! `crates/proviso-demo/questions.json` ends with an accepted final answer that states the
//! right fact, with its evidence gate passed, and none states a fact marked wrong.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use proviso::decode::{CompileOptions, Sampling};
use proviso::harness::RunEnd;
use proviso::llama::RunOptions;
use proviso::LocalProposer;
use proviso_demo::DemoKind;
use serde_json::Value;

mod support;

use support::local;

/// The two tests run one at a time: on two cores, a batched context beside another engine
/// is slowed many times over, and which sequences share a forward pass then depends on
/// timing, which can change a greedy pick. Each test measures its own agents, not the other's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The searches' ranker `proviso demo` uses by default: BM25 fused with the sentence
/// encoder, loaded once for the binary.
fn semantic() -> std::sync::Arc<dyn proviso_demo::index::Rerank> {
    static SEMANTIC: std::sync::OnceLock<std::sync::Arc<proviso_demo::index::Semantic>> =
        std::sync::OnceLock::new();
    SEMANTIC
        .get_or_init(|| {
            let path = proviso_model::ensure(&proviso_model::ENCODER_MODEL, &mut |_| {}).unwrap();
            std::sync::Arc::new(proviso_demo::index::Semantic::new(std::sync::Arc::new(
                proviso_embed::Encoder::from_zip(&path).unwrap(),
            )))
        })
        .clone()
}

fn questions() -> Vec<Value> {
    let text = include_str!("../../proviso-demo/questions.json");
    let document: Value = serde_json::from_str(text).unwrap();
    document["questions"].as_array().unwrap().clone()
}

/// A greedy proposer on `engine`.
fn proposer(engine: impl proviso::decode::Engine + 'static) -> LocalProposer<'static> {
    LocalProposer::new(
        local(),
        engine,
        Sampling::greedy(),
        CompileOptions::default(),
    )
}

/// Runs one question with `proposer` and says what is wrong with its end, if anything.
fn check(case: &Value, proposer: &mut LocalProposer<'static>) -> Option<String> {
    let question = case["question"].as_str().unwrap();
    let kind = DemoKind::for_question(question);
    let format = match kind {
        DemoKind::Trials => proviso::tools::CallFormat::Hermes,
        DemoKind::Travel => proviso::tools::CallFormat::Envelope,
    };
    let agent = proviso_demo::agent_with(kind, format, Some(semantic())).unwrap();
    let started = std::time::Instant::now();
    let report = agent.run(proposer, question, &mut ());
    println!("{question} ({:.1} s)", started.elapsed().as_secs_f64());
    let RunEnd::FinalAnswer { answer } = &report.end else {
        return Some(format!("{question}: ended {:?}", report.end));
    };
    // The answer passed the answer contract, evidence gate included, inside the run; the
    // text it states is what a user reads.
    let text = answer["answer"].as_str().unwrap_or_default().to_lowercase();
    let strings = |key: &str| -> Vec<String> {
        case[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_lowercase())
            .collect()
    };
    let (facts, wrong) = (strings("facts"), strings("wrong"));
    println!("{question}\n  → {text}");
    assert!(
        !answer["citations"].as_array().unwrap().is_empty(),
        "{question}: an accepted answer without citations"
    );
    if let Some(w) = wrong.iter().find(|w| text.contains(w.as_str())) {
        return Some(format!("{question}: {text:?} states the wrong {w:?}"));
    }
    if !facts.iter().any(|f| text.contains(f.as_str())) {
        return Some(format!("{question}: {text:?} states none of {facts:?}"));
    }
    None
}

#[test]
fn every_demo_question_ends_with_a_grounded_right_answer() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // One engine per agent, as an application keeps one: each agent's instructions and
    // tools open every prompt, and their computation is reused from one question to the next.
    let mut engines: std::collections::HashMap<DemoKind, LocalProposer<'static>> =
        std::collections::HashMap::new();
    let failures: Vec<String> = questions()
        .iter()
        .filter_map(|case| {
            let kind = DemoKind::for_question(case["question"].as_str().unwrap());
            let proposer = engines
                .entry(kind)
                .or_insert_with(|| proposer(local().engine(RunOptions::default()).unwrap()));
            check(case, proposer)
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Three agents at once, each on a slot of one batched context: the harness shares forward
/// passes and every agent still ends with its grounded right answer.
#[test]
fn agents_on_a_batched_context_end_with_their_grounded_answers() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let local = local();
    let batcher = local
        .model()
        .batcher(proviso::llama::BatchOptions::new(3))
        .unwrap();
    let cases: Vec<Value> = questions().into_iter().take(3).collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let engine = batcher.slot().unwrap();
                scope.spawn(move || check(case, &mut proposer(engine)))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let stats = batcher.stats();
    assert!(
        stats.tokens > stats.passes,
        "the agents did not share passes: {stats:?}"
    );
}
