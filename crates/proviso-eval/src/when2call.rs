//! When2Call: does the model call a tool, ask for missing information, or say it cannot
//! help, when it should? Each case has candidate tools and one correct behaviour:
//! `tool_call`, `request_for_info` or `cannot_answer`.
//!
//! The model answers in proviso's intent envelope under its grammar, so its choice is an
//! explicit, typed intent rather than a guess from prose: `tool_request` is a tool call,
//! `clarification` a request for information, `abort` a statement that it cannot answer, and
//! `final_answer` a direct answer (never correct here).
//!
//! Each case is sent to the server's backend ([`proviso::LocalBackend`], in the envelope
//! call format) as a client would send it: the question as a message, the candidate tools
//! as OpenAI tools, `tool_choice: auto`, greedy. Its answer is the server's: calls that
//! passed the gates are `tool_call`; a `clarification` reply (the server's `auto` asks for
//! required arguments the request does not give, or the model asks) is
//! `request_for_info`; an `abort` reply is `cannot_answer`; any other text is `direct`.
//! The numbers are therefore those of the `auto` policy users run, not of a copy.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use proviso::llama::RunOptions;
use proviso::server::{Backend, Reply, RunError, Worker};
use proviso::tools::{CallFormat, Policy, Registry};
use proviso::{LocalBackend, LocalBackendConfig, LocalModel};
use serde::Serialize;
use serde_json::{json, Value};

use crate::EvalError;

/// What a client of When2Call's kind tells the model: the behaviours it chooses among.
const SYSTEM: &str = "Call a tool only when the request gives every required argument. Ask a clarification question when an argument is missing. Abort when no tool can do what is asked.";

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
    let backend = LocalBackend::new(
        std::sync::Arc::new(local.clone()),
        "when2call",
        LocalBackendConfig::default()
            .call_format(CallFormat::Envelope)
            .policy(permissive())
            .run(RunOptions::default().n_ctx(4096)),
    );
    let mut worker = backend.worker().map_err(|e| EvalError(e.to_string()))?;
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
        let question = case
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let body = json!({
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": question},
            ],
            "tools": registry.to_openai(),
            "tool_choice": "auto",
            "max_tokens": max_tokens,
            "temperature": 0.0,
        });
        let prepared = proviso::server::wire::chat_request(&body)
            .map_err(|e| e.message)
            .and_then(|request| backend.prepare(&request).map_err(|e| e.message));
        let job = match prepared {
            Ok(job) => job,
            Err(message) => {
                report.skipped.push((id, message));
                continue;
            }
        };
        let started = Instant::now();
        let outcome = match worker.run(job, &mut crate::served::Quiet) {
            Ok(mut choices) if !choices.is_empty() => {
                let choice = choices.swap_remove(0);
                let chosen = if !choice.tool_calls.is_empty() {
                    "tool_call"
                } else {
                    match choice.reply {
                        Reply::Clarification => "request_for_info",
                        Reply::Abort => "cannot_answer",
                        _ => "direct",
                    }
                };
                let output = if choice.tool_calls.is_empty() {
                    choice.content.unwrap_or_default()
                } else {
                    choice
                        .tool_calls
                        .iter()
                        .map(|c| format!("{}({})", c.name, c.arguments))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                Ok((chosen.to_owned(), output))
            }
            Ok(_) => Err("no choice".to_owned()),
            // Every attempt refused by a gate: the output was not accepted as anything.
            Err(e @ RunError::OutputRejected { .. }) => Ok(("rejected".to_owned(), e.to_string())),
            Err(e) => Err(e.to_string()),
        };
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (chosen, output) = match outcome {
            Ok(o) => o,
            // One failed generation is one failed case, recorded with its error.
            Err(e) => ("error".to_owned(), e),
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
