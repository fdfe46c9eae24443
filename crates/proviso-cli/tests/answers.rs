//! Answers that answer the question, on the real default model, greedy, one model per test
//! binary (issue 22):
//!
//! - the answer-relevance rule rejects an off-question citation (`off_question`), and a
//!   question the documents cannot answer ends in a typed abstention that says what was
//!   searched, never in an unrelated line;
//! - a question about a superseded version cites that version and the answer names it;
//! - an id argument is one a result named (an acronym resolves to its trial's id);
//! - a call written twice in one step never ends a run.

#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use proviso::contract::{Output, Question};
use proviso::harness::{Event, Observer, RunEnd, RunReport, ToolOutcome};
use proviso::tools::CallFormat;
use proviso_demo::docs::DocsBase;
use proviso_demo::DemoKind;
use serde_json::{json, Value};

mod support;

use support::proposer;

/// A small document set of another domain: a policy in two versions and a handbook.
fn docs() -> Arc<DocsBase> {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("proviso-answers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = [
            ("leave-v1.txt", "Parental leave policy.\nEffective from 2023-01-01 until 2025-06-30.\nParental leave is 12 weeks at full pay.\nRequests must be filed 30 days before the leave starts.\n"),
            ("leave-v2.txt", "Parental leave policy.\nEffective from 2025-07-01.\nParental leave is 16 weeks at full pay.\nRequests must be filed 45 days before the leave starts.\n"),
            ("handbook.md", "# Staff handbook\n\n## Hours\n\nCore hours are 10:00 to 15:00 on weekdays.\n\n## Equipment\n\n- Each employee receives one laptop, replaced every 4 years.\n- Lost badges are replaced by the front desk for a fee of 20 euros.\n"),
        ];
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"sources": [
                {"source_id": "leave-policy", "version": "v1", "file": "leave-v1.txt", "in_force": false, "until": "2025-06-30"},
                {"source_id": "leave-policy", "version": "v2", "file": "leave-v2.txt", "in_force": true, "effective": "2025-07-01"}]}"#,
        )
        .unwrap();
        dir
    });
    Arc::new(DocsBase::load(dir).unwrap())
}

/// Collects the calls of each step, to see a call written twice.
#[derive(Default)]
struct Calls(Vec<(u64, String)>);

impl Observer for Calls {
    fn event(&mut self, event: &Event<'_>) {
        if let Event::ToolResult { step, executed } = event {
            self.0.push((
                *step,
                format!(
                    "{} {}",
                    executed.call.name(),
                    Value::Object(executed.call.arguments().clone())
                ),
            ));
        }
    }
}

fn answer_text(report: &RunReport) -> String {
    match &report.end {
        RunEnd::FinalAnswer { answer } => answer["answer"].as_str().unwrap_or_default().to_owned(),
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn the_relevance_rule_rejects_an_off_question_citation_and_an_unanswerable_question_abstains() {
    let base = docs();
    let contract = base.answer_contract().unwrap();
    let question = Question::new("Who is the chief executive of the company?", base.store());
    // A true, exactly quoted line that does not answer: refused by its own code.
    let off = json!({"answer": "Core hours are 10:00 to 15:00 on weekdays.", "citations": [{
        "source_id": "handbook", "version": "v1", "line_start": 3, "line_end": 3,
        "quote": "Core hours are 10:00 to 15:00 on weekdays."}]});
    let text = off.to_string();
    assert!(contract.check(Output::Text(text.as_bytes())).accepted());
    let verdict = contract.check_answer(Output::Text(text.as_bytes()), &question);
    assert_eq!(
        verdict.code().map(|c| c.as_str()),
        Some("off_question"),
        "{verdict:?}"
    );
    // On the model: the documents do not say, so the run abstains and says what it looked up.
    let agent = proviso_demo::docs_agent(base).unwrap();
    let report = agent.run(&mut proposer(), question.text(), &mut ());
    let RunEnd::Abstained { searched, message } = &report.end else {
        panic!("expected an abstention, got {:?}", report.end);
    };
    assert!(!searched.is_empty() && message.contains("answers the question"));
}

#[test]
fn a_question_about_a_superseded_version_cites_it_and_names_it() {
    let agent = proviso_demo::docs_agent(docs()).unwrap();
    let report = agent.run(
        &mut proposer(),
        "How long was parental leave under the previous version of the leave policy?",
        &mut (),
    );
    let text = answer_text(&report);
    let RunEnd::FinalAnswer { answer } = &report.end else {
        unreachable!()
    };
    assert_eq!(answer["citations"][0]["version"], "v1", "{answer}");
    assert!(text.contains("12 weeks") && text.contains("v1"), "{text}");
    // The version in force stays the default.
    let now = agent.run(&mut proposer(), "How long is parental leave now?", &mut ());
    assert!(answer_text(&now).contains("16 weeks"), "{:?}", now.end);
}

#[test]
fn ids_are_ones_a_result_named_and_a_call_written_twice_never_ends_a_run() {
    let agent = proviso_demo::agent(DemoKind::Trials, CallFormat::Hermes).unwrap();
    let mut duplicated = 0;
    for question in [
        "What does Arm C of CALM-PREVENT receive?",
        "When did the futility termination of the velorabine 10 mg arm take effect?",
    ] {
        let mut calls = Calls::default();
        let report = agent.run(&mut proposer(), question, &mut calls);
        assert!(
            matches!(
                report.end,
                RunEnd::FinalAnswer { .. } | RunEnd::Abstained { .. }
            ),
            "{question}: {:?}",
            report.end
        );
        // Every id an executed call carries was named before: by the question or by an
        // earlier result (an acronym's trial id comes from a search hit, never invented).
        let mut named = question.to_owned();
        for e in &report.executed {
            for key in ["trial_id", "doc_id"] {
                if let Some(id) = e.call.arguments().get(key).and_then(Value::as_str) {
                    assert!(named.contains(id), "{question}: {id} was never named");
                }
            }
            if let ToolOutcome::Ok { result } = &e.outcome {
                named.push_str(&result.to_string());
            }
        }
        duplicated += calls
            .0
            .iter()
            .enumerate()
            .filter(|(i, c)| calls.0[..*i].contains(c))
            .count();
    }
    eprintln!("calls written twice in a step: {duplicated}");
}
