//! When2Call: does the model call a tool, ask for missing information, or say it cannot
//! help, when it should? Each case has candidate tools and one correct behaviour:
//! `tool_call`, `request_for_info` or `cannot_answer`.
//!
//! The model answers in proviso's intent envelope under its grammar, so its choice is an
//! explicit, typed intent rather than a guess from prose: `tool_request` is a tool call,
//! `clarification` a request for information, `abort` a statement that it cannot answer, and
//! `final_answer` a direct answer (never correct here).
//!
//! The choice is made in two phases, as the server's `tool_choice: auto`: the model first
//! writes its best call, which [`provenance::choose`] judges against the request (a call it
//! supports is a tool call; a relevant tool with invented required arguments is a request
//! for them, worded from the declaration); when the call is set aside, the model chooses
//! among answering, asking and aborting.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use proviso::decode::{CompileOptions, ConstraintSpec, GenerateOptions, Generator, Message};
use proviso::llama::RunOptions;
use proviso::tools::{
    instructions, provenance, AutoChoice, CallFormat, Finish, Grammar, GrammarOptions, Policy,
    Registry, ToolChoice, ToolGate, Usage,
};
use proviso::{Intent, LocalModel};
use serde::Serialize;
use serde_json::Value;

use crate::EvalError;

/// One scored case.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Case {
    /// The case's id.
    pub id: String,
    /// The correct behaviour.
    pub expected: String,
    /// The behaviour chosen (`tool_call`, `request_for_info`, `cannot_answer`, `direct`, or
    /// `rejected` when the gates refused the output).
    pub chosen: String,
    /// The raw output.
    pub output: String,
    /// Generation time.
    pub ms: u64,
}

/// The evaluation's result.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Cases run.
    pub cases: usize,
    /// Cases where the chosen behaviour was the correct one.
    pub correct: usize,
    /// Cases skipped (declarations that cannot be read), with why.
    pub skipped: Vec<(String, String)>,
    /// Counts of (expected, chosen).
    pub confusion: BTreeMap<String, BTreeMap<String, usize>>,
    /// Every case.
    pub results: Vec<Case>,
}

impl Report {
    /// Accuracy in percent.
    #[must_use]
    pub fn accuracy(&self) -> f64 {
        if self.cases == 0 {
            0.0
        } else {
            (self.correct as f64 / self.cases as f64 * 1000.0).round() / 10.0
        }
    }

    /// The Markdown report: accuracy and the confusion matrix.
    #[must_use]
    pub fn markdown(&self) -> String {
        let chosen = [
            "tool_call",
            "request_for_info",
            "cannot_answer",
            "direct",
            "rejected",
            "error",
        ];
        let mut out = format!("When2Call, constrained (envelope intents): {} of {} correct ({:.1}%).\n\n| expected \\ chosen |", self.correct, self.cases, self.accuracy());
        for c in chosen {
            out.push_str(&format!(" {c} |"));
        }
        out.push_str("\n|---|---|---|---|---|---|---|\n");
        for (expected, row) in &self.confusion {
            out.push_str(&format!("| {expected} |"));
            for c in chosen {
                out.push_str(&format!(" {} |", row.get(c).copied().unwrap_or(0)));
            }
            out.push('\n');
        }
        out
    }

    /// A bar chart of the chosen behaviours per expected behaviour.
    #[must_use]
    pub fn svg(&self) -> String {
        let colors = [
            ("tool_call", "#3182bd"),
            ("request_for_info", "#31a354"),
            ("cannot_answer", "#e6550d"),
            ("direct", "#969696"),
            ("rejected", "#000000"),
            ("error", "#e7298a"),
        ];
        let mut out = String::from("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" height=\"260\" font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"10\" y=\"16\" font-size=\"13\">When2Call: behaviour chosen, per correct behaviour</text>\n");
        for (i, (expected, row)) in self.confusion.iter().enumerate() {
            let total: usize = row.values().sum();
            let y = 40.0 + 50.0 * i as f64;
            out.push_str(&format!(
                "<text x=\"10\" y=\"{}\">{expected}</text>\n",
                y + 14.0
            ));
            let mut x = 130.0;
            for (name, color) in colors {
                let n = row.get(name).copied().unwrap_or(0);
                if n == 0 || total == 0 {
                    continue;
                }
                let w = 360.0 * n as f64 / total as f64;
                out.push_str(&format!("<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"20\" fill=\"{color}\"><title>{name}: {n}</title></rect>\n"));
                x += w;
            }
        }
        for (j, (name, color)) in colors.iter().enumerate() {
            let x = 10.0 + 100.0 * j as f64;
            out.push_str(&format!("<rect x=\"{x}\" y=\"225\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"234\">{name}</text>\n", x + 14.0));
        }
        out.push_str("</svg>\n");
        out
    }
}

/// Runs the set at `path` (When2Call's `when2call_test.jsonl`).
///
/// # Errors
///
/// [`EvalError`] when the data cannot be read or generation fails.
pub fn run(
    local: &LocalModel,
    path: &Path,
    limit: Option<usize>,
    max_tokens: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Report, EvalError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EvalError(format!("reading {}: {e}", path.display())))?;
    let cases: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| EvalError(format!("{}: {e}", path.display())))?;
    let cases: Vec<Value> = cases
        .into_iter()
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let mut generator = Generator::new(
        local
            .engine(RunOptions::default().n_ctx(4096))
            .map_err(|e| EvalError(e.to_string()))?,
        local.tokenizer(),
    );
    let mut report = Report {
        cases: 0,
        correct: 0,
        skipped: Vec::new(),
        confusion: BTreeMap::new(),
        results: Vec::new(),
    };
    let total = cases.len();
    for (done, case) in cases.iter().enumerate() {
        progress(done, total);
        let id = case
            .get("uuid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let expected = case
            .get("correct_answer")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let functions: Result<Vec<Value>, _> = case
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .map(|s| serde_json::from_str::<Value>(s.as_str().unwrap_or("null")))
                    .collect()
            })
            .unwrap_or(Ok(Vec::new()));
        let registry = match functions
            .map_err(|e| e.to_string())
            .and_then(|f| Registry::from_bfcl(&Value::Array(f)).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => {
                report.skipped.push((id, e));
                continue;
            }
        };
        let format = CallFormat::Envelope;
        let options = GrammarOptions::default().max_reasoning(120);
        // Two phases, as the server's `auto`: the best call first (when there are tools),
        // judged against the request; then, when it is set aside, the model's own choice
        // among answering, asking and aborting.
        let question = case
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The call is written with numbers the request states only, as the server's first
        // phase does (see `provenance::ground_numbers`).
        let grounded = provenance::ground_numbers(&registry, question);
        let compile = |choice: ToolChoice| -> Result<_, String> {
            let registry = match (&grounded, &choice) {
                (Some(grounded), ToolChoice::Required) => grounded,
                _ => &registry,
            };
            let grammar = format
                .grammar(registry, &options.clone().choice(choice))
                .map_err(|e| e.to_string())?;
            let Grammar::JsonSchema(schema) = &grammar.grammar else {
                return Err("the envelope grammar is a JSON Schema".to_owned());
            };
            local
                .compile(
                    &ConstraintSpec::JsonSchema(schema.clone()),
                    &CompileOptions::default(),
                )
                .map_err(|e| e.to_string())
        };
        let phases = if registry.is_empty() {
            compile(ToolChoice::None).map(|text| (None, text))
        } else {
            compile(ToolChoice::Required)
                .and_then(|call| Ok((Some(call), compile(ToolChoice::None)?)))
        };
        let (call_grammar, text_grammar) = match phases {
            Ok(p) => p,
            Err(e) => {
                report.skipped.push((id, e));
                continue;
            }
        };
        let mut system = instructions(&registry, format, &options);
        system.push_str("Call a tool only when the request gives every required argument. Ask a clarification question when an argument is missing. Abort when no tool can do what is asked.\n");
        let prompt = local
            .prompt(&[Message::system(system), Message::user(question)])
            .map_err(|e| EvalError(e.to_string()))?;
        let started = Instant::now();
        let generate_options = GenerateOptions::default().max_tokens(max_tokens);
        let registry = std::sync::Arc::new(registry);
        let gate = ToolGate::new(std::sync::Arc::clone(&registry), format, permissive());
        // A generation stopped on repetition is regenerated once with penalties against
        // repetition, as every caller that may regenerate does.
        let mut generate = |compiled| {
            generator
                .generate_retrying(
                    &prompt,
                    Some(compiled),
                    &generate_options,
                    2,
                    &mut |_, _| {},
                )
                .map(|g| {
                    let finish = Finish::read(Some(g.stop_reason.finish_reason()));
                    (g.text(), finish)
                })
        };
        let mut outcome = Ok(None);
        if let Some(call_grammar) = &call_grammar {
            outcome = generate(call_grammar).map(|(text, finish)| {
                let verdict = gate.check(&text, finish, &Usage::default());
                let Some(Intent::ToolRequest { calls, .. }) = verdict.intent() else {
                    return None;
                };
                let calls: Vec<(String, Value)> = calls
                    .iter()
                    .map(|c| (c.name().to_owned(), Value::Object(c.arguments().clone())))
                    .collect();
                match provenance::choose(&registry, &calls, question) {
                    AutoChoice::Call => Some(("tool_call".to_owned(), text)),
                    AutoChoice::AskFor { missing } => Some((
                        "request_for_info".to_owned(),
                        provenance::clarification(&registry, &missing),
                    )),
                    _ => None,
                }
            });
        }
        let outcome = outcome.and_then(|decided| match decided {
            Some(decided) => Ok(decided),
            None => generate(&text_grammar).map(|(text, finish)| {
                // A missing or unknown stop reason is rejected by the transport gate, never
                // read as a normal stop.
                let chosen = match gate.check(&text, finish, &Usage::default()).intent() {
                    Some(Intent::ToolRequest { .. }) => "tool_call",
                    Some(Intent::Clarification { .. }) => "request_for_info",
                    Some(Intent::Abort { .. }) => "cannot_answer",
                    Some(_) => "direct",
                    None => "rejected",
                };
                (chosen.to_owned(), text)
            }),
        });
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (chosen, output) = match outcome {
            Ok(o) => o,
            // One failed generation is one failed case, recorded with its error.
            Err(e) => ("error".to_owned(), e.to_string()),
        };
        report.cases += 1;
        report.correct += usize::from(chosen == expected);
        *report
            .confusion
            .entry(expected.clone())
            .or_default()
            .entry(chosen.clone())
            .or_default() += 1;
        report.results.push(Case {
            id,
            expected,
            chosen,
            output,
            ms,
        });
    }
    progress(total, total);
    Ok(report)
}

/// Every class permitted: When2Call scores the choice, not the caller's rights.
fn permissive() -> Policy {
    let mut policy = Policy::default();
    if let Some(role) = policy.roles.get_mut("default") {
        role.classes = vec![
            proviso::IntentClass::Read,
            proviso::IntentClass::Compute,
            proviso::IntentClass::Mutate,
            proviso::IntentClass::Submit,
        ];
    }
    policy
}
