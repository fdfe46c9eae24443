//! Continuous batching on the real default model: greedy texts are the same alone and in a
//! batch of mixed lengths whose sequences join and leave mid-batch, one cancelled sequence
//! leaves the others running, and a KV budget that cannot hold a new prompt is a typed
//! `Exhausted` error until an idle sequence's cache can be evicted.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use proviso::decode::{
    CompileOptions, Compiled, ConstraintSpec, Engine, EngineError, GenerateOptions, Generator,
    Message, StopReason, TokenId,
};
use proviso::llama::{BatchOptions, RunOptions};
use proviso::LocalModel;
use serde_json::json;

fn local() -> &'static LocalModel {
    static LOCAL: OnceLock<LocalModel> = OnceLock::new();
    LOCAL.get_or_init(|| {
        LocalModel::open(None, &mut |event| eprintln!("{event:?}")).expect("the default model")
    })
}

/// One request of the mix: a prompt, an optional constraint and a token limit.
struct Case {
    prompt: Vec<TokenId>,
    constraint: Option<Arc<Compiled>>,
    max_tokens: usize,
}

fn cases() -> Vec<Case> {
    let local = local();
    let call = ConstraintSpec::JsonSchema(json!({
        "type": "object",
        "properties": {
            "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
            "arm": {"type": "string", "enum": ["A", "B", "C"]}
        },
        "required": ["trial_id", "arm"],
        "additionalProperties": false
    }));
    let compiled = Arc::new(local.compile(&call, &CompileOptions::default()).unwrap());
    let texts: [(&str, bool, usize); 6] = [
        ("Write a short poem about the sea.", false, 90),
        ("Which arm of trial NCT04123456 was stopped?", true, 60),
        (
            "What is the capital of France? Answer in one word.",
            false,
            12,
        ),
        (
            "Summarise in two sentences why clinical trials have a control arm and why \
             randomisation matters for the comparison between the arms.",
            false,
            140,
        ),
        ("Arm B of NCT05550001, please.", true, 60),
        ("Count from one to ten in words.", false, 40),
    ];
    texts
        .iter()
        .map(|(text, constrained, max_tokens)| Case {
            prompt: local.prompt(&[Message::user(*text)]).unwrap(),
            constraint: constrained.then(|| Arc::clone(&compiled)),
            max_tokens: *max_tokens,
        })
        .collect()
}

fn options(max_tokens: usize) -> GenerateOptions {
    GenerateOptions::default().max_tokens(max_tokens)
}

/// The greedy text of `case` on `engine`.
fn text(engine: impl Engine, case: &Case) -> String {
    text_on(&mut Generator::new(engine, local().tokenizer()), case)
}

fn text_on<E: Engine>(generator: &mut Generator<E>, case: &Case) -> String {
    generator
        .generate(
            &case.prompt,
            case.constraint.as_deref(),
            &options(case.max_tokens),
        )
        .unwrap()
        .text()
}

/// The cases decoded one at a time by one context of their own.
fn alone(cases: &[&Case]) -> Vec<String> {
    let run = RunOptions::default().n_ctx(1024);
    let mut generator = Generator::new(local().engine(run).unwrap(), local().tokenizer());
    cases
        .iter()
        .map(|case| text_on(&mut generator, case))
        .collect()
}

#[test]
fn greedy_texts_are_the_same_alone_and_in_a_batch_that_sequences_join_and_leave() {
    let local = local();
    let cases = cases();
    let expected = alone(&cases.iter().collect::<Vec<_>>());
    let batcher = local
        .model()
        .batcher(BatchOptions::new(cases.len()).with_slot_ctx(1024))
        .unwrap();
    let started = Instant::now();
    let results: Vec<(String, Duration, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .enumerate()
            .map(|(i, case)| {
                let engine = batcher.slot().unwrap();
                scope.spawn(move || {
                    // Staggered starts: later requests join a batch already running, and
                    // short ones leave it before long ones end.
                    std::thread::sleep(Duration::from_millis(150 * i as u64));
                    let joined = started.elapsed();
                    (text(engine, case), joined, started.elapsed())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, ((text, joined, ended), want)) in results.iter().zip(&expected).enumerate() {
        println!("case {i}: joined {joined:?}, ended {ended:?}: {text:?}");
        assert_eq!(text, want, "case {i} differs between alone and batched");
    }
    let stats = batcher.stats();
    let generated: usize = expected.len();
    println!("{stats:?} for {generated} sequences");
    // Sequences shared passes: fewer passes than one per token of every sequence.
    let tokens_per_pass = stats.tokens as f64 / stats.passes as f64;
    assert!(
        tokens_per_pass > 1.5,
        "passes were not shared: {tokens_per_pass:.2} tokens per pass"
    );
    // The short request that joined last-but-one left before the long one that joined
    // earlier ended.
    assert!(
        results[2].2 < results[3].2,
        "a short request was held behind a long one"
    );
    assert!(
        results[5].1 < results[3].2,
        "the last request joined after the long one ended"
    );
}

#[test]
fn a_cancelled_sequence_frees_its_slot_while_the_others_continue() {
    let local = local();
    let cases = cases();
    let chosen = [&cases[0], &cases[1], &cases[3]];
    let expected = alone(&chosen[1..]);
    let batcher = local
        .model()
        .batcher(BatchOptions::new(3).with_slot_ctx(1024))
        .unwrap();
    let (cancelled, others) = std::thread::scope(|scope| {
        let engine = batcher.slot().unwrap();
        let first = scope.spawn(move || {
            let mut generator = Generator::new(engine, local.tokenizer());
            let mut pieces = 0;
            generator
                .generate_streaming(
                    &chosen[0].prompt,
                    None,
                    &options(chosen[0].max_tokens),
                    &mut |_| {
                        pieces += 1;
                        pieces < 5
                    },
                )
                .unwrap()
        });
        let others: Vec<_> = chosen[1..]
            .iter()
            .map(|case| {
                let engine = batcher.slot().unwrap();
                scope.spawn(move || text(engine, case))
            })
            .collect();
        (
            first.join().unwrap(),
            others
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>(),
        )
    });
    assert_eq!(cancelled.stop_reason, StopReason::Cancelled);
    assert!(cancelled.tokens.len() < chosen[0].max_tokens);
    assert_eq!(others, expected);
    // Every slot was freed when its engine was dropped: all three can be taken again.
    let again: Vec<_> = (0..3).map(|_| batcher.slot()).collect();
    assert!(again.iter().all(Option::is_some));
}

#[test]
fn a_full_kv_budget_is_a_typed_error_until_an_idle_cache_can_be_evicted() {
    let local = local();
    let prompt = local
        .prompt(&[Message::user(
            "Explain, in plain words and with an example, what a randomised controlled \
             trial is, how its arms are compared, and why blinding matters.",
        )])
        .unwrap();
    assert!(prompt.len() > 40, "the prompt must fill most of the budget");
    let budget = u32::try_from(prompt.len() + prompt.len() / 2).unwrap();
    let batcher = local
        .model()
        .batcher(
            BatchOptions::new(2)
                .with_slot_ctx(256)
                .with_kv_budget(budget),
        )
        .unwrap();
    let mut first = batcher.slot().unwrap();
    let mut second = batcher.slot().unwrap();
    first.acquire().unwrap();
    first.decode(&prompt).unwrap();
    assert!(!first.logits().is_empty());
    // The first sequence is generating: its cells cannot be taken.
    second.acquire().unwrap();
    let refused = second.decode(&prompt).unwrap_err();
    assert!(
        matches!(refused, EngineError::Exhausted(_)),
        "expected Exhausted, got {refused:?}"
    );
    assert!(second.is_empty(), "a refused decode leaves nothing behind");
    // Once the first sequence is idle, its cache is evicted for the second.
    first.release();
    second.decode(&prompt).unwrap();
    assert_eq!(second.len(), prompt.len());
    second.release();
    // The first sequence learns of the eviction when it next acquires.
    first.acquire().unwrap();
    assert!(first.is_empty(), "an evicted sequence starts over");
    first.release();
}
