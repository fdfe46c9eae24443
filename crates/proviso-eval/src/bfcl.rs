//! BFCL (Berkeley Function-Calling Leaderboard) on the local model, scored the way BFCL's AST
//! checker scores: function name, required parameters present, no unknown parameters, each
//! value among the acceptable answers (strings normalised as BFCL does, an integer accepted
//! for a float), parallel calls matched in any order, irrelevance passed only when no call is
//! made.
//!
//! Two modes on the same prompt: `free` prompts the model and reads its prose with a tolerant
//! parser of the kind many harnesses use (find the brackets, split on commas, strip quotes,
//! coerce numbers); `constrained` sends each case to the server's backend
//! ([`proviso::LocalBackend`]) as a client would (system text and question as messages, the
//! functions as OpenAI tools, the tool choice, greedy) and scores the calls it returns. So
//! the numbers measure the code `proviso serve` runs: its two-phase `auto`, its fan-out,
//! its gates, not a re-implementation of them. A call is *silently corrupted* when the tolerant reading parses but differs from
//! what the model wrote (the strict reading of the same text): a split string, a coerced
//! `"750"`.

use std::path::Path;
use std::time::Instant;

use proviso::contract::Role;
use proviso::decode::{Engine, GenerateOptions, Generator, Message};
use proviso::llama::{BatchOptions, RunOptions};
use proviso::server::{Backend, FinishReason, Worker};
use proviso::tools::{instructions, CallFormat, Finish, GrammarOptions, Registry, ToolChoice};
use proviso::{LocalBackend, LocalBackendConfig, LocalModel, LocalWorker};
use serde::Serialize;
use serde_json::{json, Map, Number, Value};

use crate::EvalError;

/// How the model's output is produced and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Generated under the call format's grammar, read strictly.
    Constrained,
    /// Generated freely, read by a tolerant parser.
    Free,
}

impl Mode {
    /// The mode's name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Constrained => "constrained",
            Self::Free => "free",
        }
    }
}

/// The categories in `../shared/data/bfcl`.
pub const CATEGORIES: [&str; 4] = ["simple_python", "multiple", "parallel", "irrelevance"];

/// One scored case.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Case {
    /// BFCL's id.
    pub id: String,
    /// The raw output.
    pub output: String,
    /// Calls read from it.
    pub calls: Vec<(String, Value)>,
    /// Every call read was well-formed and valid under its declared schema (for irrelevance:
    /// or no call at all).
    pub valid: bool,
    /// BFCL's AST check passed.
    pub ast: bool,
    /// A call parsed but its values differ from what the model wrote.
    pub corrupted: bool,
    /// Why the AST check failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Under `auto`, what the judgement of the first phase's call chose (`call`, `ask_for`
    /// or `answer`); absent when the first phase wrote no complete call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Generation time.
    pub ms: u64,
}

/// One category in one mode.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The category.
    pub category: String,
    /// The mode.
    pub mode: Mode,
    /// The call format.
    pub format: CallFormat,
    /// `auto` (the model may answer in text) or `required` (constrained mode must call).
    pub choice: String,
    /// Cases run.
    pub cases: usize,
    /// Cases whose calls were all structurally valid.
    pub valid: usize,
    /// Cases passing the AST check.
    pub ast: usize,
    /// Cases with a silently corrupted call.
    pub corrupted: usize,
    /// Cases skipped because their declarations could not be read (named in `skipped_ids`).
    pub skipped: usize,
    /// The skipped ids and why.
    pub skipped_ids: Vec<(String, String)>,
    /// Mean generation time per case.
    pub mean_ms: f64,
    /// Every case.
    pub results: Vec<Case>,
}

impl Report {
    fn rate(part: usize, whole: usize) -> f64 {
        if whole == 0 {
            0.0
        } else {
            (part as f64 / whole as f64 * 1000.0).round() / 10.0
        }
    }

    /// Structural validity, in percent.
    #[must_use]
    pub fn valid_rate(&self) -> f64 {
        Self::rate(self.valid, self.cases)
    }

    /// AST accuracy, in percent.
    #[must_use]
    pub fn ast_rate(&self) -> f64 {
        Self::rate(self.ast, self.cases)
    }

    /// Silent corruption, in percent of cases.
    #[must_use]
    pub fn corruption_rate(&self) -> f64 {
        Self::rate(self.corrupted, self.cases)
    }
}

fn read_jsonl(path: &Path) -> Result<Vec<Value>, EvalError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EvalError(format!("reading {}: {e}", path.display())))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| EvalError(format!("{}:{}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// Runs one category in one mode. `progress` sees (done, total).
///
/// # Errors
///
/// [`EvalError`] when the data cannot be read or generation fails.
#[allow(clippy::too_many_arguments)] // Each is a separate choice of the evaluation.
pub fn run(
    local: &LocalModel,
    data: &Path,
    category: &str,
    mode: Mode,
    format: CallFormat,
    limit: Option<usize>,
    max_tokens: usize,
    choice: ToolChoice,
    parallel: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Report, EvalError> {
    let cases = read_jsonl(&data.join(format!("BFCL_v4_{category}.json")))?;
    let answers_path = data
        .join("possible_answer")
        .join(format!("BFCL_v4_{category}.json"));
    let answers: Map<String, Value> = if category == "irrelevance" {
        Map::new()
    } else {
        read_jsonl(&answers_path)?
            .into_iter()
            .filter_map(|a| {
                Some((
                    a.get("id")?.as_str()?.to_owned(),
                    a.get("ground_truth")?.clone(),
                ))
            })
            .collect()
    };
    let cases: Vec<Value> = cases
        .into_iter()
        .take(limit.unwrap_or(usize::MAX))
        .collect();
    let run_options = RunOptions::default().n_ctx(4096);
    let mut report = Report {
        category: category.to_owned(),
        mode,
        format,
        choice: match &choice {
            ToolChoice::Required => "required".to_owned(),
            _ => "auto".to_owned(),
        },
        cases: 0,
        valid: 0,
        ast: 0,
        corrupted: 0,
        skipped: 0,
        skipped_ids: Vec::new(),
        mean_ms: 0.0,
        results: Vec::new(),
    };
    let total = cases.len();
    let backend = LocalBackend::new(
        std::sync::Arc::new(local.clone()),
        "bfcl",
        LocalBackendConfig::default()
            .call_format(format)
            .max_parallel_calls(4)
            .run(run_options)
            .batch(
                (parallel > 1)
                    .then(|| BatchOptions::new(parallel).with_slot_ctx(run_options.n_ctx)),
            ),
    );
    let context = CaseContext {
        local,
        backend: &backend,
        category,
        format,
        max_tokens,
        choice: &choice,
        answers: &answers,
    };
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(total);
    // Free mode generates on its own contexts; constrained mode through the server's
    // workers (slots of the backend's own batched context when `parallel` > 1).
    let batcher = match (mode, parallel > 1) {
        (Mode::Free, true) => Some(
            local
                .model()
                .batcher(BatchOptions::new(parallel).with_slot_ctx(run_options.n_ctx))
                .map_err(|e| EvalError(e.to_string()))?,
        ),
        _ => None,
    };
    let runner = || -> Result<Runner, EvalError> {
        Ok(match mode {
            Mode::Constrained => Runner::Server(Box::new(
                backend.worker().map_err(|e| EvalError(e.to_string()))?,
            )),
            Mode::Free => {
                let engine: Box<dyn Engine> = match &batcher {
                    Some(batcher) => Box::new(
                        batcher
                            .slot()
                            .ok_or_else(|| EvalError("no free batch slot".into()))?,
                    ),
                    None => Box::new(
                        local
                            .engine(run_options)
                            .map_err(|e| EvalError(e.to_string()))?,
                    ),
                };
                Runner::Free(Generator::new(engine, local.tokenizer()))
            }
        })
    };
    if parallel <= 1 {
        let mut runner = runner()?;
        for (done, case) in cases.iter().enumerate() {
            progress(done, total);
            outcomes.push(run_case(&context, &mut runner, case));
        }
    } else {
        // Several cases at once: each thread takes the next case; outcomes are put back in
        // the cases' order, so the report is the same.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let (sender, finished) = std::sync::mpsc::channel::<(usize, Outcome)>();
        let mut slots: Vec<Option<Outcome>> = (0..total).map(|_| None).collect();
        std::thread::scope(|scope| -> Result<(), EvalError> {
            for _ in 0..parallel.min(total.max(1)) {
                let mut runner = runner()?;
                let (sender, next, cases, context) = (sender.clone(), &next, &cases, &context);
                scope.spawn(move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    if sender
                        .send((i, run_case(context, &mut runner, case)))
                        .is_err()
                    {
                        break;
                    }
                });
            }
            drop(sender);
            for (done, (i, outcome)) in finished.iter().enumerate() {
                progress(done, total);
                slots[i] = Some(outcome);
            }
            Ok(())
        })?;
        outcomes.extend(slots.into_iter().flatten());
    }
    for outcome in outcomes {
        match outcome {
            Outcome::Nothing => {}
            Outcome::Failed(e) => return Err(e),
            Outcome::Skipped(id, why) => {
                report.skipped += 1;
                report.skipped_ids.push((id, why));
            }
            Outcome::Case(case) => {
                report.cases += 1;
                report.valid += usize::from(case.valid);
                report.ast += usize::from(case.ast);
                report.corrupted += usize::from(case.corrupted);
                report.results.push(case);
            }
        }
    }
    progress(total, total);
    report.mean_ms = if report.results.is_empty() {
        0.0
    } else {
        report.results.iter().map(|c| c.ms as f64).sum::<f64>() / report.results.len() as f64
    };
    Ok(report)
}

/// What generates a case: the model on its own context (free mode), or a worker of the
/// server's backend (constrained mode).
enum Runner {
    Free(Generator<Box<dyn Engine>>),
    Server(Box<LocalWorker>),
}

/// What one case's run gives the report.
enum Outcome {
    /// The case declares no functions.
    Nothing,
    /// Its functions or grammar could not be used: skipped, with why.
    Skipped(String, String),
    /// The model could not be prompted: the evaluation stops.
    Failed(EvalError),
    /// A judged case.
    Case(Case),
}

/// What every case of a run shares.
struct CaseContext<'a> {
    local: &'a LocalModel,
    /// The server's backend, which constrained mode generates through: the evaluation
    /// measures the code `proviso serve` runs (its two-phase `auto`, fan-out and gates).
    backend: &'a LocalBackend,
    category: &'a str,
    format: CallFormat,
    max_tokens: usize,
    choice: &'a ToolChoice,
    answers: &'a Map<String, Value>,
}

/// The system text every case is asked under (the tools' instructions follow it).
const SYSTEM: &str = "You are given a question and a set of functions. Answer by calling one or more of the functions, and reply with the calls only. If none of the functions can be used, say so in plain text.";

/// Runs and judges one case.
fn run_case(context: &CaseContext<'_>, runner: &mut Runner, case: &Value) -> Outcome {
    let CaseContext {
        local,
        format,
        max_tokens,
        choice,
        ..
    } = *context;
    let id = case
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let registry = match case.get("function").map(Registry::from_bfcl) {
        Some(Ok(r)) => r,
        Some(Err(e)) => return Outcome::Skipped(id, e.to_string()),
        None => return Outcome::Nothing,
    };
    let question: Vec<Message> = case
        .pointer("/question/0")
        .and_then(Value::as_array)
        .map(|turns| {
            turns
                .iter()
                .map(|t| {
                    Message::new(
                        t.get("role")
                            .and_then(Value::as_str)
                            .and_then(Role::from_name)
                            .unwrap_or(Role::User),
                        t.get("content").and_then(Value::as_str).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let generator = match runner {
        Runner::Server(worker) => return server_case(context, worker, id, &registry, &question),
        Runner::Free(generator) => generator,
    };
    // Free mode: the same instructions, no grammar, a tolerant reader.
    let options = GrammarOptions::default()
        .choice(choice.clone())
        .max_calls(4);
    let mut system = format!("{SYSTEM}\n\n");
    system.push_str(&instructions(&registry, format, &options));
    let mut messages = vec![Message::system(system)];
    messages.extend(question);
    let prompt = match local.prompt(&messages) {
        Ok(prompt) => prompt,
        Err(e) => return Outcome::Failed(EvalError(e.to_string())),
    };
    let started = Instant::now();
    let options = GenerateOptions::default().max_tokens(max_tokens);
    // A generation stopped on repetition is regenerated once with penalties against
    // repetition, as every caller that may regenerate does.
    let generation = match generator.generate_retrying(&prompt, None, &options, 2, &mut |_, _| {}) {
        Ok(g) => g,
        // One failed generation is one failed case, recorded with its error.
        Err(e) => return failed_case(id, format!("generation failed: {e}")),
    };
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let output = generation.text();
    let finish = generation.stop_reason.finish_reason();
    let strict = strict_calls(format, &registry, &output, finish);
    let tolerant = tolerant_calls(format, &output, &registry);
    let corrupted = match (&tolerant, &strict) {
        (Some(t), Some(s)) => !t.is_empty() && t != s,
        _ => false,
    };
    let calls = tolerant.unwrap_or_default();
    score(
        context,
        Scored {
            id,
            registry: &registry,
            output,
            calls,
            corrupted,
            cut_call: false,
            decision: None,
            ms,
        },
    )
}

/// One case generated by the server's backend, as a client would send it: the system
/// text and the question as messages, the functions as OpenAI tools, the tool choice,
/// greedy. Its answer is what the server returns (calls that passed its gates, or text).
fn server_case(
    context: &CaseContext<'_>,
    worker: &mut LocalWorker,
    id: String,
    registry: &Registry,
    question: &[Message],
) -> Outcome {
    let mut messages = vec![json!({"role": "system", "content": SYSTEM})];
    messages.extend(
        question
            .iter()
            .map(|m| json!({"role": m.role.as_str(), "content": m.content})),
    );
    let body = json!({
        "messages": messages,
        "tools": registry.to_openai(),
        "tool_choice": match context.choice {
            ToolChoice::Required => "required",
            _ => "auto",
        },
        "max_tokens": context.max_tokens,
        "temperature": 0.0,
    });
    let request = match proviso::server::wire::chat_request(&body) {
        Ok(r) => r,
        Err(e) => return Outcome::Skipped(id, e.message),
    };
    let job = match context.backend.prepare(&request) {
        Ok(job) => job,
        Err(e) => return Outcome::Skipped(id, e.message),
    };
    let started = Instant::now();
    let result = worker.run(job, &mut crate::served::Quiet);
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let choice = match result {
        Ok(mut choices) if !choices.is_empty() => choices.swap_remove(0),
        Ok(_) => return failed_case(id, "no choice".into()),
        // Every attempt refused by a gate, or a failure: the case has no call.
        Err(e) => return failed_case(id, format!("the server refused it: {e}")),
    };
    let calls: Vec<(String, Value)> = choice
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                serde_json::from_str(&c.arguments).unwrap_or(Value::Null),
            )
        })
        .collect();
    let output = if calls.is_empty() {
        choice.content.clone().unwrap_or_default()
    } else {
        calls
            .iter()
            .map(|(name, arguments)| {
                proviso::tools::write_call(
                    context.format,
                    name,
                    arguments.as_object().unwrap_or(&Map::new()),
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let call_start = match context.format {
        CallFormat::Pythonic => '[',
        CallFormat::Hermes => '<',
        CallFormat::Envelope | CallFormat::Llama3 => '{',
    };
    // Under the grammar, a call cut by the token limit is an incomplete step, never a
    // decision not to call; a cut text answer is still a text answer, as in free mode.
    let cut_call =
        choice.finish_reason == FinishReason::Length && output.trim_start().starts_with(call_start);
    let decision = Some(if calls.is_empty() { "answer" } else { "call" }.to_owned());
    score(
        context,
        Scored {
            id,
            registry,
            output,
            calls,
            corrupted: false,
            cut_call,
            decision,
            ms,
        },
    )
}

/// What a case produced, to be scored.
struct Scored<'a> {
    id: String,
    registry: &'a Registry,
    output: String,
    calls: Vec<(String, Value)>,
    corrupted: bool,
    /// A call cut by the token limit (constrained mode): scored as an incomplete step.
    cut_call: bool,
    decision: Option<String>,
    ms: u64,
}

/// Scores a case as BFCL's AST checker does.
fn score(context: &CaseContext<'_>, scored: Scored<'_>) -> Outcome {
    let Scored {
        id,
        registry,
        output,
        calls,
        corrupted,
        cut_call,
        decision,
        ms,
    } = scored;
    let valid = if calls.is_empty() {
        context.category == "irrelevance"
    } else {
        calls.iter().all(|(name, args)| {
            registry
                .get(name)
                .is_some_and(|t| t.schema().is_valid(args))
        })
    };
    let truth = context.answers.get(&id).cloned().unwrap_or(Value::Null);
    let (valid, (ast, reason)) = if cut_call {
        (false, (false, Some("cut by the token limit".to_owned())))
    } else {
        (valid, ast_check(context.category, &calls, &truth, registry))
    };
    Outcome::Case(Case {
        id,
        output,
        calls,
        valid,
        ast,
        corrupted,
        reason,
        decision,
        ms,
    })
}

/// A case whose generation failed: no calls, never valid, with why.
fn failed_case(id: String, reason: String) -> Outcome {
    Outcome::Case(Case {
        id,
        output: String::new(),
        calls: Vec::new(),
        valid: false,
        ast: false,
        corrupted: false,
        reason: Some(reason),
        decision: None,
        ms: 0,
    })
}

/// The calls the strict reader finds (`None` when the text is not a well-formed step in the
/// format, or was cut by the token limit).
fn strict_calls(
    format: CallFormat,
    registry: &Registry,
    text: &str,
    finish_reason: &str,
) -> Option<Vec<(String, Value)>> {
    if Finish::read(Some(finish_reason)) == Finish::Length {
        return None;
    }
    let proposal = format.parse(text, registry).ok()?;
    Some(
        proposal
            .calls
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect(),
    )
}

/// A tolerant reader, as many harnesses write one: it finds what looks like calls, splits
/// arguments on commas, strips quotes and coerces numbers. It never fails on prose, it only
/// finds nothing.
fn tolerant_calls(
    format: CallFormat,
    text: &str,
    registry: &Registry,
) -> Option<Vec<(String, Value)>> {
    match format {
        CallFormat::Pythonic => Some(tolerant_pythonic(text)),
        _ => {
            let start = text.find('{')?;
            let end = text.rfind('}')?;
            if end <= start {
                return Some(Vec::new());
            }
            let snippet = &text[start..=end];
            let value: Value = serde_json::from_str(snippet)
                .or_else(|_| serde_json::from_str(&snippet.replace('\'', "\"")))
                .ok()?;
            let (name_key, args_key) = match format {
                CallFormat::Envelope => ("tool", "arguments"),
                CallFormat::Llama3 => ("name", "parameters"),
                _ => ("name", "arguments"),
            };
            let name = value.get(name_key).and_then(Value::as_str)?.to_owned();
            let mut args = value
                .get(args_key)
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()));
            // The usual "helpful" coercion: numeric strings become numbers where the
            // declaration wants a number.
            if let (Some(tool), Value::Object(map)) = (registry.get(&name), &mut args) {
                for (k, v) in map.iter_mut() {
                    let wants_number = matches!(
                        tool.spec()
                            .parameters()
                            .pointer(&format!("/properties/{k}/type"))
                            .and_then(Value::as_str),
                        Some("number" | "integer")
                    );
                    if let (true, Value::String(s)) = (wants_number, &*v) {
                        if let Ok(n) = s.trim().parse::<Number>() {
                            *v = Value::Number(n);
                        }
                    }
                }
            }
            Some(vec![(name, args)])
        }
    }
}

fn tolerant_pythonic(text: &str) -> Vec<(String, Value)> {
    let body = match (text.find('['), text.rfind(']')) {
        (Some(a), Some(b)) if b > a => &text[a + 1..b],
        _ => text,
    };
    let mut calls = Vec::new();
    let mut rest = body;
    // `name(args)` with a non-greedy `)`: a `)` inside a string ends the call early.
    while let Some(open) = rest.find('(') {
        let name: String = rest[..open]
            .chars()
            .rev()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let inner = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        if name.is_empty() {
            continue;
        }
        let mut args = Map::new();
        for part in inner.split(',') {
            let Some((k, v)) = part.split_once('=') else {
                continue;
            };
            let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
            let value = if let Ok(n) = v.parse::<Number>() {
                Value::Number(n)
            } else {
                match v {
                    "True" | "true" => Value::Bool(true),
                    "False" | "false" => Value::Bool(false),
                    "None" | "null" => Value::Null,
                    s => Value::String(s.to_owned()),
                }
            };
            args.insert(k.trim().to_owned(), value);
        }
        calls.push((name, Value::Object(args)));
    }
    calls
}

/// BFCL's string normalisation: lower case, without spaces and `,./-_*^`.
fn normalize(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .map(|c| if c == '\'' { '"' } else { c })
        .collect()
}

/// Whether `got` equals the acceptable `want` (BFCL's rules: normalised strings, an integer
/// for a float, lists element by element, dicts key by key).
fn matches(got: &Value, want: &Value, float: bool) -> bool {
    match (got, want) {
        (Value::String(g), Value::String(w)) => normalize(g) == normalize(w),
        (Value::Number(g), Value::Number(w)) => {
            if !float && g.is_f64() && w.is_i64() {
                return false;
            }
            g.as_f64()
                .zip(w.as_f64())
                .is_some_and(|(a, b)| (a - b).abs() < 1e-9)
        }
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| matches(a, b, float))
        }
        (Value::Object(g), Value::Object(w)) => {
            // A dict's possible answer maps each key to a list of acceptable values.
            g.len() <= w.len()
                && g.iter().all(|(k, v)| {
                    w.get(k).is_some_and(|options| match options {
                        Value::Array(opts) => opts.iter().any(|o| matches(v, o, float)),
                        other => matches(v, other, float),
                    })
                })
        }
        (g, w) => g == w,
    }
}

/// One call against one ground-truth entry `{name: {param: [acceptable values]}}`.
fn call_matches(call: &(String, Value), truth: &Value, registry: &Registry) -> Result<(), String> {
    let Some((name, params)) = truth.as_object().and_then(|o| o.iter().next()) else {
        return Err("malformed ground truth".into());
    };
    if &call.0 != name {
        return Err(format!("called `{}`, expected `{name}`", call.0));
    }
    let args = call.1.as_object().cloned().unwrap_or_default();
    let spec = registry
        .get(name)
        .map(|t| t.spec().parameters().clone())
        .unwrap_or(Value::Null);
    let properties = spec
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = spec
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for r in &required {
        if !args.contains_key(*r) {
            return Err(format!("required parameter `{r}` missing"));
        }
    }
    let empty = Map::new();
    let params = params.as_object().unwrap_or(&empty);
    for (k, v) in &args {
        if !properties.contains_key(k) {
            return Err(format!("unknown parameter `{k}`"));
        }
        let Some(Value::Array(options)) = params.get(k) else {
            return Err(format!("parameter `{k}` is not in the ground truth"));
        };
        let float = properties
            .get(k)
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            == Some("number");
        if !options.iter().any(|o| matches(v, o, float)) {
            return Err(format!("`{k}` = {v} is not an acceptable value"));
        }
    }
    for (k, options) in params {
        let optional = options
            .as_array()
            .is_some_and(|o| o.iter().any(|x| x == &Value::String(String::new())));
        if !args.contains_key(k) && !optional {
            return Err(format!("parameter `{k}` missing"));
        }
    }
    Ok(())
}

fn ast_check(
    category: &str,
    calls: &[(String, Value)],
    truth: &Value,
    registry: &Registry,
) -> (bool, Option<String>) {
    if category == "irrelevance" {
        return if calls.is_empty() {
            (true, None)
        } else {
            (false, Some("a call was made".into()))
        };
    }
    let expected = truth.as_array().cloned().unwrap_or_default();
    if calls.len() != expected.len() {
        return (
            false,
            Some(format!(
                "{} call(s), expected {}",
                calls.len(),
                expected.len()
            )),
        );
    }
    // Any order: find a one-to-one assignment (at most a handful of calls).
    fn assign(
        calls: &[(String, Value)],
        expected: &[Value],
        used: &mut Vec<bool>,
        registry: &Registry,
        last: &mut Option<String>,
    ) -> bool {
        let Some((first, rest)) = calls.split_first() else {
            return true;
        };
        for (j, truth) in expected.iter().enumerate() {
            if used[j] {
                continue;
            }
            match call_matches(first, truth, registry) {
                Ok(()) => {
                    used[j] = true;
                    if assign(rest, expected, used, registry, last) {
                        return true;
                    }
                    used[j] = false;
                }
                Err(e) => *last = Some(e),
            }
        }
        false
    }
    let mut used = vec![false; expected.len()];
    let mut last = None;
    if assign(calls, &expected, &mut used, registry, &mut last) {
        (true, None)
    } else {
        (false, last)
    }
}

/// The Markdown table of several reports.
#[must_use]
pub fn markdown(reports: &[Report]) -> String {
    let mut out = String::from("| category | mode | format | tool choice | cases | structurally valid | AST accuracy | silent corruption | mean time |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in reports {
        let choice = if r.mode == Mode::Free {
            "(prompt)"
        } else {
            r.choice.as_str()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.0} ms |\n",
            r.category,
            r.mode.as_str(),
            r.format,
            choice,
            r.cases,
            r.valid_rate(),
            r.ast_rate(),
            r.corruption_rate(),
            r.mean_ms
        ));
    }
    out
}

/// A grouped bar chart (per category: free and constrained AST accuracy and validity).
#[must_use]
pub fn svg(reports: &[Report]) -> String {
    let categories: Vec<&str> = {
        let mut c: Vec<&str> = reports.iter().map(|r| r.category.as_str()).collect();
        c.dedup();
        c
    };
    let series: [(&str, Mode, bool, &str); 4] = [
        ("free: valid", Mode::Free, false, "#c9c9c9"),
        ("free: AST", Mode::Free, true, "#7f7f7f"),
        ("constrained: valid", Mode::Constrained, false, "#9ecae1"),
        ("constrained: AST", Mode::Constrained, true, "#3182bd"),
    ];
    let (left, top, height, group) = (50.0, 30.0, 200.0, 140.0);
    let width = left + group * categories.len().max(1) as f64 + 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"320\" font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{left}\" y=\"16\" font-size=\"13\">BFCL on the default model: structural validity and AST accuracy (%)</text>\n"
    );
    for tick in [0, 25, 50, 75, 100] {
        let y = top + height - height * f64::from(tick) / 100.0;
        out.push_str(&format!("<line x1=\"{left}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{tick}</text>\n", width - 10.0, left - 4.0, y + 4.0));
    }
    for (i, category) in categories.iter().enumerate() {
        let x0 = left + group * i as f64 + 10.0;
        for (j, (_, mode, ast, color)) in series.iter().enumerate() {
            let value = reports
                .iter()
                .find(|r| r.category == *category && r.mode == *mode)
                .map_or(0.0, |r| if *ast { r.ast_rate() } else { r.valid_rate() });
            let h = height * value / 100.0;
            let x = x0 + 28.0 * j as f64;
            out.push_str(&format!(
                "<rect x=\"{x}\" y=\"{}\" width=\"24\" height=\"{h}\" fill=\"{color}\"><title>{category} {}: {value:.1}%</title></rect><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\">{value:.0}</text>\n",
                top + height - h,
                series[j].0,
                x + 12.0,
                top + height - h - 3.0
            ));
        }
        out.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{category}</text>\n",
            x0 + 54.0,
            top + height + 16.0
        ));
    }
    for (j, (label, _, _, color)) in series.iter().enumerate() {
        let x = left + 150.0 * j as f64;
        out.push_str(&format!("<rect x=\"{x}\" y=\"280\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"289\">{label}</text>\n", x + 14.0));
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn registry() -> Registry {
        Registry::from_bfcl(&json!([{"name": "math.hypot", "parameters": {"type": "dict", "properties": {
            "x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}, "unit": {"type": "string"}},
            "required": ["x", "y"]}}]))
        .unwrap()
    }

    #[test]
    fn ast_rules() {
        let registry = registry();
        let truth =
            json!([{"math.hypot": {"x": [4], "y": [5], "z": ["", 0], "unit": ["Meters", ""]}}]);
        let ok = vec![(
            "math.hypot".to_owned(),
            json!({"x": 4, "y": 5, "unit": "meters"}),
        )];
        assert_eq!(
            ast_check("simple_python", &ok, &truth, &registry),
            (true, None)
        );
        let wrong = vec![("math.hypot".to_owned(), json!({"x": 4, "y": 6}))];
        assert!(!ast_check("simple_python", &wrong, &truth, &registry).0);
        let unknown = vec![("math.hypot".to_owned(), json!({"x": 4, "y": 5, "w": 1}))];
        assert!(ast_check("simple_python", &unknown, &truth, &registry)
            .1
            .unwrap()
            .contains("unknown"));
        let missing = vec![("math.hypot".to_owned(), json!({"x": 4}))];
        assert!(!ast_check("simple_python", &missing, &truth, &registry).0);
        assert!(ast_check("irrelevance", &[], &Value::Null, &registry).0);
        assert!(!ast_check("irrelevance", &ok, &Value::Null, &registry).0);
    }

    #[test]
    fn parallel_calls_match_in_any_order() {
        let registry = registry();
        let truth =
            json!([{"math.hypot": {"x": [1], "y": [2]}}, {"math.hypot": {"x": [3], "y": [4]}}]);
        let calls = vec![
            ("math.hypot".to_owned(), json!({"x": 3, "y": 4})),
            ("math.hypot".to_owned(), json!({"x": 1, "y": 2})),
        ];
        assert!(ast_check("parallel", &calls, &truth, &registry).0);
    }

    #[test]
    fn the_tolerant_reader_corrupts_what_the_strict_one_keeps() {
        let text = r#"[search(query="a, b", limit="7")]"#;
        let tolerant = tolerant_pythonic(text);
        assert_eq!(
            tolerant[0].1["query"], "a",
            "the naive split cuts the string"
        );
        assert_eq!(
            tolerant[0].1["limit"],
            json!(7),
            "and coerces the string to a number"
        );
        let strict = proviso::tools::format::pythonic::parse_calls(text).unwrap();
        assert_eq!(strict[0].arguments["query"], "a, b");
        assert_ne!(Value::Object(strict[0].arguments.clone()), tolerant[0].1);
    }

    #[test]
    fn int_for_float_and_normalised_strings() {
        assert!(matches(&json!(5), &json!(5.0), true));
        assert!(!matches(&json!(5.5), &json!(5), false));
        assert!(matches(
            &json!("New York, NY"),
            &json!("new york ny"),
            false
        ));
    }
}
