//! Each steering rule on the real default model, greedy, one model per test binary:
//!
//! - a call that already ran is unreachable (finite tools) or avoided (open ones);
//! - the step after evidence, after a rejection, or on the last step must finish;
//! - a grounded answer quotes only lines that tools returned in the run;
//! - a degenerate loop stops early with `repetition`, and a retry with penalties follows;
//! - a retry after a loop or a cut is steered to close, and ends valid within its budget.
//!
//! The named tool choice (one call unless parallel calls are explicit) is tested at the
//! wire in `proviso-server` and end to end by the Python client in `serve.rs`.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Arc, Mutex};

use proviso::decode::{
    CompileOptions, ConstraintSpec, GenerateOptions, Generator, Message, RepetitionLimit, Sampling,
    StopReason,
};
use proviso::harness::{
    Agent, AgentConfig, Event, FinishCause, Observer, RunEnd, Steering, StepPlan, ToolOutcome,
    Toolbox,
};
use proviso::llama::RunOptions;
use proviso::tools::{CallFormat, GrammarOptions, Policy, ToolSpec};
use proviso::{CompiledSchema, IntentClass, SchemaOptions};
use proviso_demo::DemoKind;
use serde_json::{json, Value};

mod support;

use support::{local, proposer};

/// Collects each step's plan and raw output.
#[derive(Default)]
struct Plans(Vec<(u64, StepPlan)>, Vec<(u64, String)>);

impl Observer for Plans {
    fn event(&mut self, event: &Event<'_>) {
        match event {
            Event::StepPlanned { step, plan } => self.0.push((*step, (*plan).clone())),
            Event::ModelOutput { step, proposed, .. } => {
                self.1.push((*step, proposed.text.clone()));
            }
            _ => {}
        }
    }
}

#[test]
fn a_call_that_ran_is_not_written_again() {
    // A tool with few possible calls: once one ran, the grammar holds the others only; once
    // all ran, the tool leaves the choice. The model is asked to keep reading.
    let reads = Arc::new(Mutex::new(Vec::new()));
    let log = reads.clone();
    let toolbox = Toolbox::new()
        .bind(
            ToolSpec::new(
                "read_page",
                "Reads one page of the manual.",
                IntentClass::Read,
                json!({"type": "object", "properties": {"page": {"enum": [1, 2]}},
                    "required": ["page"], "additionalProperties": false}),
            ),
            move |a| {
                log.lock().unwrap().push(a["page"].clone());
                Ok(json!({"text": "Nothing about that here."}))
            },
        )
        .unwrap();
    let agent = Agent::new(
        toolbox,
        AgentConfig::default()
            .format(CallFormat::Hermes)
            .system("Read every page of the manual before you answer.".into())
            .call_before_answer(true)
            .max_tokens_per_step(80)
            .policy(Policy {
                budget: proviso::tools::Budget {
                    max_steps: Some(4),
                    ..Default::default()
                },
                ..Policy::default()
            }),
    )
    .unwrap();
    let mut plans = Plans::default();
    let report = agent.run(
        &mut proposer(),
        "What does the manual say about fuses?",
        &mut plans,
    );
    println!("{}", serde_json::to_string(&report).unwrap());
    let pages = reads.lock().unwrap().clone();
    let mut unique = pages.clone();
    unique.dedup();
    assert_eq!(pages, unique, "a page was read twice: {pages:?}");
    assert!(
        !report.rejections.contains_key("application"),
        "{:?}",
        report.rejections
    );
    // The step after the first read excluded that call from the grammar.
    let second = plans
        .0
        .iter()
        .find(|(s, _)| *s == 2)
        .map(|(_, p)| p)
        .unwrap();
    assert_eq!(second.excluded.len(), 1, "{second:?}");
}

#[test]
fn an_open_call_that_ran_is_avoided_by_the_decoder() {
    // The greedy continuation of this prompt is a known call; told to avoid exactly that
    // text, the decoder writes a different, still valid, call.
    let local = local();
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string", "minLength": 2, "maxLength": 20}},
        "required": ["city"], "additionalProperties": false});
    let compiled = local
        .compile(
            &ConstraintSpec::JsonSchema(schema),
            &CompileOptions::default(),
        )
        .unwrap();
    let mut generator = Generator::new(
        local.engine(RunOptions::default()).unwrap(),
        local.tokenizer(),
    );
    let prompt = local
        .prompt(&[Message::user(
            "Give the weather lookup arguments for Paris as JSON.",
        )])
        .unwrap();
    let options = GenerateOptions::default().max_tokens(40);
    let first = generator
        .generate(&prompt, Some(&compiled), &options)
        .unwrap();
    let first_text = first.text();
    let avoided = options.avoid(vec![first_text.clone()]);
    let second = generator
        .generate(&prompt, Some(&compiled), &avoided)
        .unwrap();
    println!("{first_text} → {}", second.text());
    assert_ne!(second.text(), first_text);
    let value: Value = serde_json::from_str(&second.text()).unwrap();
    assert!(value["city"].is_string());
}

#[test]
fn evidence_steers_the_next_step_to_a_grounded_answer() {
    let agent = proviso_demo::agent(DemoKind::Trials, CallFormat::Hermes).unwrap();
    let mut plans = Plans::default();
    let question = "Which arms of trial NCT04123456 were terminated, and why?";
    let report = agent.run(&mut proposer(), question, &mut plans);
    let RunEnd::FinalAnswer { answer } = &report.end else {
        panic!("{:?}", report.end);
    };
    // The step after the lookup was narrowed to finishing, with lines to cite.
    let (_, plan) = plans.0.iter().find(|(s, _)| *s == 2).unwrap();
    assert_eq!(plan.finish, Some(FinishCause::Evidence), "{plan:?}");
    assert_eq!(plan.choice, "none");
    assert!(plan.citable_lines.unwrap() >= 1);
    // Every quote is exactly a line a tool returned in this run.
    let returned: Vec<String> = report
        .executed
        .iter()
        .filter_map(|e| match &e.outcome {
            ToolOutcome::Ok { result } => Some(result.to_string()),
            _ => None,
        })
        .collect();
    for citation in answer["citations"].as_array().unwrap() {
        let quote = serde_json::to_string(&citation["quote"]).unwrap();
        assert!(
            returned.iter().any(|r| r.contains(&quote)),
            "{quote} was not returned by a tool"
        );
    }
    let text = answer["answer"].as_str().unwrap();
    assert!(
        text.contains("Futility") || text.contains("liver enzymes"),
        "{text}"
    );
}

#[test]
fn the_last_step_and_the_step_after_a_rejection_must_finish() {
    // A tool whose results never count as evidence, and a budget of two steps: the second
    // step is the last, so it is steered to finish.
    let toolbox = Toolbox::new()
        .bind(
            ToolSpec::new(
                "lookup",
                "Looks a word up.",
                IntentClass::Read,
                json!({"type": "object", "properties": {"word": {"type": "string", "minLength": 1, "maxLength": 12}},
                    "required": ["word"], "additionalProperties": false}),
            ),
            |_| Ok(json!({"definition": "unknown"})),
        )
        .unwrap();
    let agent = Agent::new(
        toolbox,
        AgentConfig::default()
            .format(CallFormat::Envelope)
            .call_before_answer(true)
            .max_tokens_per_step(120)
            .grammar(GrammarOptions::default().max_reasoning(40))
            .policy(Policy {
                budget: proviso::tools::Budget {
                    max_steps: Some(2),
                    ..Default::default()
                },
                ..Policy::default()
            })
            .steering(Steering::default()),
    )
    .unwrap();
    let mut plans = Plans::default();
    let report = agent.run(&mut proposer(), "What does 'ossify' mean?", &mut plans);
    println!("{}", serde_json::to_string(&report).unwrap());
    let (_, last) = plans.0.iter().find(|(s, _)| *s == 2).unwrap();
    assert_eq!(last.finish, Some(FinishCause::LastStep), "{last:?}");
    assert!(
        matches!(
            report.end,
            RunEnd::FinalAnswer { .. } | RunEnd::Clarification { .. } | RunEnd::Abort { .. }
        ),
        "{:?}",
        report.end
    );
    assert_eq!(report.executed.len(), 1);
}

#[test]
fn a_loop_stops_early_with_repetition_and_a_retry_with_penalties_follows() {
    let local = local();
    // An unbounded array of integers: greedy decoding counts until the token limit.
    let schema = json!({"type": "object", "properties": {"numbers": {"type": "array", "items": {"type": "integer"}}},
        "required": ["numbers"], "additionalProperties": false});
    let compiled = local
        .compile(
            &ConstraintSpec::JsonSchema(schema),
            &CompileOptions::default(),
        )
        .unwrap();
    let mut generator = Generator::new(
        local.engine(RunOptions::default()).unwrap(),
        local.tokenizer(),
    );
    let prompt = local
        .prompt(&[Message::user("Count from 1 upwards as a JSON list.")])
        .unwrap();
    let unbounded = GenerateOptions::default().max_tokens(400).repetition(None);
    let burnt = generator
        .generate(&prompt, Some(&compiled), &unbounded)
        .unwrap();
    assert_eq!(burnt.stop_reason, StopReason::Length, "{}", burnt.text());
    let guarded = GenerateOptions::default()
        .max_tokens(400)
        .repetition(Some(RepetitionLimit::default()));
    let stopped = generator
        .generate(&prompt, Some(&compiled), &guarded)
        .unwrap();
    println!("{} tokens: {}", stopped.tokens.len(), stopped.text());
    assert_eq!(stopped.stop_reason, StopReason::Repetition);
    assert!(stopped.tokens.len() < 200, "{}", stopped.tokens.len());
    assert_eq!(StopReason::Repetition.finish_reason(), "repetition");
    // The retry the callers make: the same prompt with penalties against repetition. It
    // must not loop the same way; whatever it ends with, it ends early or completes.
    let retry = guarded.sampling(Sampling::greedy().against_repetition());
    let again = generator
        .generate(&prompt, Some(&compiled), &retry)
        .unwrap();
    println!("retry: {:?} {}", again.stop_reason, again.text());
    assert_ne!(again.text(), stopped.text());
    assert!(again.tokens.len() < 400 || again.stop_reason != StopReason::Length);
}

/// Generates under `schema` with the retries every caller that may regenerate makes, and
/// returns each attempt's stop reason and where it began to be steered to close, with the
/// last generation's text.
fn retried(
    schema: &Value,
    request: &str,
    max_tokens: usize,
) -> (Vec<(StopReason, Option<usize>, usize)>, String) {
    let local = local();
    let compiled = local
        .compile(
            &ConstraintSpec::JsonSchema(schema.clone()),
            &CompileOptions::default(),
        )
        .unwrap();
    let mut generator = Generator::new(
        local.engine(RunOptions::default()).unwrap(),
        local.tokenizer(),
    );
    let prompt = local.prompt(&[Message::user(request)]).unwrap();
    let options = GenerateOptions::default().max_tokens(max_tokens);
    let mut attempts = Vec::new();
    let last = generator
        .generate_retrying(&prompt, Some(&compiled), &options, 3, &mut |_, g| {
            attempts.push((g.stop_reason.clone(), g.stats.wrap_up_at, g.tokens.len()));
        })
        .unwrap();
    println!("{attempts:?} {}", last.text());
    (attempts, last.text())
}

fn assert_valid(schema: &Value, text: &str) {
    let instance: Value = serde_json::from_str(text).expect("a complete JSON text");
    let validator = CompiledSchema::compile(schema, &SchemaOptions::default()).unwrap();
    assert!(validator.is_valid(&instance), "{text}");
}

#[test]
fn a_retry_after_a_loop_is_steered_to_close_and_ends_valid() {
    // An object with open additional properties: greedy decoding invents keys until it loops.
    let schema = json!({"type": "object", "properties": {
        "apiGroup": {"type": ["string", "null"]}, "kind": {"type": ["string", "null"]},
        "name": {"type": ["string", "null"]}}, "required": ["apiGroup", "kind", "name"]});
    let (attempts, text) = retried(
        &schema,
        "Write one JSON object for: RoleRef contains information that points to the role being used",
        600,
    );
    assert_eq!(attempts[0].0, StopReason::Repetition);
    let (stop, wrap_up_at, tokens) = attempts.last().unwrap().clone();
    assert_eq!(stop, StopReason::GrammarComplete);
    // The retry is given no more room than the attempt that looped, and closes from there.
    let looped = attempts[0].2;
    assert!(wrap_up_at.is_some_and(|at| at <= looped), "{attempts:?}");
    assert!(tokens < 600, "{attempts:?}");
    assert_valid(&schema, &text);
}

#[test]
fn an_output_cut_by_the_limit_is_regenerated_to_close_within_the_same_budget() {
    let schema = json!({"type": "object", "properties": {"essay": {"type": "string"}},
        "required": ["essay"], "additionalProperties": false});
    let (attempts, text) = retried(
        &schema,
        "Write a long essay on the history of Rome, as a JSON object.",
        40,
    );
    assert_eq!(attempts[0].0, StopReason::Length, "{attempts:?}");
    assert_eq!(attempts[0].1, None);
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let (stop, wrap_up_at, tokens) = attempts[1].clone();
    assert_eq!(stop, StopReason::GrammarComplete, "{attempts:?}");
    // The reserve of a 40-token budget is 10 tokens.
    assert_eq!(wrap_up_at, Some(30));
    assert!(tokens <= 40);
    assert_valid(&schema, &text);
}
