//! `proviso demo`: a bundled agent answers a question on the local model, and every step is
//! printed as it is disposed of: the raw output, each gate's verdict, the parsed intent, the
//! tool result, and how the run ended.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use proviso::decode::{CompileOptions, Sampling};
use proviso::harness::{Event, JsonlTrace, Observer, RunEnd, ToolOutcome};
use proviso::llama::RunOptions;
use proviso::tools::CallFormat;
use proviso::{GateStatus, Intent, LocalModel, LocalProposer, Verdict};
use proviso_demo::index::{QueryLikelihood, Rerank, Semantic};
use proviso_demo::DemoKind;
use proviso_mcp::{Hub, Limits, McpConfig, ToolPolicy, Toolset};
use serde_json::Value;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum AgentChoice {
    /// Pick from the question's words.
    Auto,
    /// The clinical-trial agent.
    Trials,
    /// The travel-policy agent (cited answers; envelope format only).
    Travel,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// The question; each agent has an example question when none is given.
    question: Option<String>,
    /// Which bundled agent answers.
    #[arg(long, value_enum, default_value_t = AgentChoice::Auto)]
    agent: AgentChoice,
    /// How the model writes tool calls: envelope, hermes, llama3 or pythonic. By default the
    /// trial agent uses hermes (the small default model writes it best) and the travel agent
    /// the envelope (its cited answers need it).
    #[arg(long)]
    format: Option<CallFormat>,
    #[command(flatten)]
    run: RunFlags,
}

pub(crate) fn run(args: &DemoArgs) -> Result<ExitCode> {
    let kind = match args.agent {
        AgentChoice::Trials => DemoKind::Trials,
        AgentChoice::Travel => DemoKind::Travel,
        AgentChoice::Auto => args
            .question
            .as_deref()
            .map_or(DemoKind::Trials, DemoKind::for_question),
    };
    let question = args
        .question
        .clone()
        .unwrap_or_else(|| kind.example().to_owned());
    let format = args.format.unwrap_or(match kind {
        DemoKind::Trials => CallFormat::Hermes,
        DemoKind::Travel => CallFormat::Envelope,
    });
    execute(
        |rerank| Ok(proviso_demo::agent_with(kind, format, rerank)?),
        &question,
        kind.name(),
        format,
        &args.run,
    )
}

/// `proviso agent [--docs DIR] [--mcp CONFIG.json] [--policy P.json] QUESTION`: an agent over
/// your own documents, your own MCP servers' tools, or both.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// The question.
    question: String,
    /// A directory of .txt, .md and .jsonl files (with an optional manifest.json giving
    /// versions) to answer from.
    #[arg(long, value_name = "DIR", required_unless_present = "mcp")]
    docs: Option<PathBuf>,
    /// An `mcpServers` configuration (the JSON that Claude Desktop, Cursor and llama.cpp
    /// read): every tool its servers list is declared, gated and callable.
    #[arg(long, value_name = "CONFIG.json")]
    mcp: Option<PathBuf>,
    /// A policy file: roles, grants and budget, and per-tool overrides under `tools`
    /// (`class`, argument `policies`, `enabled`, `description`). Without one, read tools
    /// are allowed and every other tool is refused at the permission gate.
    #[arg(long, value_name = "P.json")]
    policy: Option<PathBuf>,
    /// The most text of one MCP result kept, in bytes; the rest is cut with a note.
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024)]
    max_result_bytes: usize,
    #[command(flatten)]
    run: RunFlags,
}

pub(crate) fn run_docs(args: &AgentArgs) -> Result<ExitCode> {
    let base = match &args.docs {
        Some(dir) => Some(std::sync::Arc::new(
            proviso_demo::docs::DocsBase::load(dir)
                .with_context(|| format!("reading the documents in {}", dir.display()))?,
        )),
        None => None,
    };
    if let (Some(base), None, None) = (&base, &args.mcp, &args.policy) {
        return execute(
            |rerank| {
                if let Some(rerank) = rerank {
                    base.rerank_with(rerank);
                }
                Ok(proviso_demo::docs_agent(base.clone())?)
            },
            &args.question,
            "docs",
            CallFormat::Envelope,
            &args.run,
        );
    }
    let policy = match &args.policy {
        Some(path) => ToolPolicy::load(path)?,
        None => ToolPolicy::default(),
    };
    let mut toolbox = match &base {
        Some(base) => proviso_demo::docs::toolbox(base.clone())?,
        None => proviso::harness::Toolbox::new(),
    };
    let mut hub = None;
    if let Some(path) = &args.mcp {
        let config = McpConfig::load(path)?;
        let limits = Limits::default().max_result_bytes(args.max_result_bytes);
        let connected = Hub::new(config, limits)?;
        let listing = connected.list();
        let declared = Toolset::declare(&connected, &listing, &policy);
        let mut stderr = std::io::stderr().lock();
        for failure in &listing.failures {
            writeln!(
                stderr,
                "proviso agent: MCP server `{}` left out: {}",
                failure.server, failure.error
            )?;
        }
        for refused in &declared.refused {
            writeln!(
                stderr,
                "proviso agent: MCP tool `{}` refused: {}",
                refused.tool, refused.reason
            )?;
        }
        if declared.specs.is_empty() && base.is_none() {
            connected.shutdown();
            anyhow::bail!("no MCP tool could be declared from {}", path.display());
        }
        toolbox = declared.toolset.bind(toolbox, &declared.specs)?;
        hub = Some(connected);
    }
    let name = match (&args.docs, &args.mcp) {
        (Some(_), Some(_)) => "docs+mcp",
        (None, Some(_)) => "mcp",
        _ => "docs",
    };
    let result = execute(
        |rerank| {
            if let (Some(base), Some(rerank)) = (&base, rerank) {
                base.rerank_with(rerank);
            }
            Ok(proviso_demo::own_agent(base, toolbox, policy.policy)?)
        },
        &args.question,
        name,
        CallFormat::Envelope,
        &args.run,
    );
    if let Some(hub) = hub {
        hub.shutdown();
    }
    result
}

/// How a run is made and shown, shared by `demo` and `agent`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunFlags {
    /// Write the run as JSON Lines (raw outputs and parsed intents as separate records).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// A GGUF model; the default model is fetched on first use.
    #[arg(long, value_name = "M.gguf")]
    model: Option<PathBuf>,
    /// Sampling temperature; 0 (the default) is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Seed for sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print the run's end as one JSON object instead of the readable log.
    #[arg(long)]
    json: bool,
    /// Re-rank each search's ten best lines (BM25) by the model's query likelihood instead
    /// of the sentence encoder: it recalls more of the lines that state the fact, at about
    /// 1.5 s a search, but does not give more right answers (BENCHMARKS.md, session 22).
    #[arg(long, conflicts_with = "lexical")]
    rerank: bool,
    /// Search with BM25 alone: no sentence encoder (which searches find lines with, by
    /// meaning, by default).
    #[arg(long)]
    lexical: bool,
}

/// How searches rank lines: BM25 fused with the sentence encoder over every line (the
/// default), with the model's query likelihood over BM25's best ten (`rerank`), or BM25
/// alone (`lexical`).
pub(crate) fn search_ranker(
    local: Option<&LocalModel>,
    rerank: bool,
    lexical: bool,
) -> Result<Option<Arc<dyn Rerank>>> {
    Ok(match (rerank, lexical, local) {
        (true, _, Some(local)) => Some(reranker(local)?),
        (true, _, None) => anyhow::bail!("--rerank needs the local model"),
        (false, true, _) => None,
        (false, false, _) => Some(Arc::new(Semantic::new(crate::model::encoder().context(
            "loading the sentence encoder searches rank lines with (--lexical searches with BM25 alone)",
        )?))),
    })
}

/// A re-ranker of search results over `local` ([`QueryLikelihood`]), in a context of its
/// own: a search scores at most [`proviso_demo::index::RERANK_POOL`] short lines.
pub(crate) fn reranker(local: &LocalModel) -> Result<Arc<dyn Rerank>> {
    let engine = local.engine(RunOptions::default().n_ctx(512))?;
    Ok(Arc::new(QueryLikelihood::new(
        Box::new(engine),
        local.tokenizer().clone(),
    )))
}

/// Builds the agent with `build` (given the local model's re-ranker, with `--rerank`) and
/// runs it on the
/// local model, printing each step (or, with `json`, the end as one JSON line) and writing
/// the trace when asked.
fn execute(
    build: impl FnOnce(Option<Arc<dyn Rerank>>) -> Result<proviso::harness::Agent>,
    question: &str,
    name: &str,
    format: CallFormat,
    args: &RunFlags,
) -> Result<ExitCode> {
    let local = LocalModel::open(args.model.as_deref(), &mut crate::model::report_progress)?;
    let rerank = search_ranker(Some(&local), args.rerank, args.lexical)?;
    let agent = &build(rerank)?;
    let engine = local.engine(RunOptions::default())?;
    let sampling = if args.temperature > 0.0 {
        Sampling::greedy()
            .temperature(args.temperature)
            .seed(args.seed)
    } else {
        Sampling::greedy()
    };
    let mut proposer = LocalProposer::new(&local, engine, sampling, CompileOptions::default());
    // A grammar the decoder cannot enforce is refused before the run, never downgraded.
    proposer
        .prepare(agent.grammar())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let model = local
        .path()
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut printer = Printer {
        quiet: args.json,
        header: format!(
            "proviso demo · agent: {} · format: {} · model: {model} (in-process, {})",
            name,
            format,
            if args.temperature > 0.0 {
                "sampled"
            } else {
                "greedy"
            }
        ),
    };
    let report = match &args.trace {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut trace =
                JsonlTrace::new(BufWriter::new(file), format!("demo-{}", std::process::id()));
            let report = agent.run(&mut proposer, question, &mut (&mut printer, &mut trace));
            trace
                .finish()
                .with_context(|| format!("writing {}", path.display()))?;
            report
        }
        None => agent.run(&mut proposer, question, &mut printer),
    };
    if args.json {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{}", serde_json::to_string(&report)?)?;
    }
    // The demo's job is to show every step disposed of: any typed end (an answer, an
    // exhausted budget, too many rejected steps) is a completed demonstration. Only a model
    // that failed for a technical reason is an error.
    Ok(if matches!(report.end, RunEnd::ModelFailed { .. }) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints each event as it happens.
struct Printer {
    quiet: bool,
    header: String,
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}… ({} more characters)", text.chars().count() - max)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn gates_line(verdict: &Verdict) -> String {
    let mut line = String::new();
    for (gate, status) in verdict.gates() {
        let mark = match status {
            GateStatus::Passed => "pass",
            GateStatus::Failed => "FAIL",
            GateStatus::NotApplicable => "n/a",
            GateStatus::Skipped => "skipped",
        };
        let _ = write!(line, "{gate} {mark} · ");
    }
    line.trim_end_matches(" · ").to_owned()
}

fn intent_line(intent: &Intent) -> String {
    match intent {
        Intent::ToolRequest { calls, .. } => calls
            .iter()
            .map(|c| {
                format!(
                    "call {}({})",
                    c.name(),
                    Value::Object(c.arguments().clone())
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        Intent::FinalAnswer { answer, .. } => format!("final answer {answer}"),
        Intent::Clarification { question, .. } => format!("clarification: {question}"),
        Intent::Abort { reason, .. } => format!("abort: {reason}"),
        Intent::PlanUpdate { plan, .. } => format!("plan update: {}", plan.join("; ")),
        other => other.kind().to_owned(),
    }
}

impl Observer for Printer {
    fn event(&mut self, event: &Event<'_>) {
        if self.quiet {
            return;
        }
        let mut out = String::new();
        match event {
            Event::Started {
                question, tools, ..
            } => {
                let _ = writeln!(out, "{}", self.header);
                let _ = writeln!(out, "question: {question}");
                let _ = writeln!(out, "tools: {}", tools.join(", "));
            }
            Event::StepPlanned { step, plan } => {
                let _ = writeln!(out, "\n── step {step} ──");
                // What the harness narrowed this step's grammar to, when it did.
                let mut parts = Vec::new();
                if let Some(finish) = plan.finish {
                    parts.push(format!("must finish ({})", finish.as_str()));
                } else if plan.choice != "auto" {
                    parts.push(format!("tool choice {}", plan.choice));
                }
                if !plan.excluded.is_empty() || !plan.exhausted.is_empty() {
                    parts.push(format!(
                        "calls that ran are out of the grammar: {}",
                        plan.excluded
                            .iter()
                            .chain(plan.exhausted.iter())
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if !plan.avoided.is_empty() {
                    parts.push(format!(
                        "avoided by the decoder: {}",
                        plan.avoided.join(", ")
                    ));
                }
                if plan.grounded_arguments {
                    parts.push("arguments from the question and the results".into());
                }
                if let Some(n) = plan.citable_lines {
                    parts.push(format!("the answer can cite {n} observed line(s)"));
                }
                if !parts.is_empty() {
                    let _ = writeln!(out, "steered: {}", parts.join("; "));
                }
            }
            Event::ModelOutput {
                step: _,
                proposed,
                duration,
            } => {
                let _ = writeln!(
                    out,
                    "model output ({} tokens in {:.2} s, finish: {}):",
                    proposed.output_tokens,
                    duration.as_secs_f64(),
                    proposed.finish.as_str()
                );
                out.push_str(&indent(&shorten(&proposed.text, 600)));
            }
            Event::Verdict { verdict, .. } => {
                let _ = writeln!(out, "gates: {}", gates_line(verdict));
                match (verdict.intent(), verdict.rejection()) {
                    (Some(intent), _) => {
                        let _ = writeln!(out, "intent: {}", shorten(&intent_line(intent), 400));
                    }
                    (None, Some(r)) => {
                        let _ = writeln!(
                            out,
                            "rejected at the {} gate: {} — {}",
                            r.gate(),
                            r.code(),
                            r.message()
                        );
                        let _ = writeln!(out, "(nothing ran; the rejection is shown to the model)");
                    }
                    (None, None) => {}
                }
            }
            Event::AnswerVerdict { verdict, .. } => {
                let _ = writeln!(out, "answer contract: {}", gates_line(verdict));
                if let Some(r) = verdict.rejection() {
                    let _ = writeln!(
                        out,
                        "answer rejected at the {} gate: {} — {}",
                        r.gate(),
                        r.code(),
                        r.message()
                    );
                }
            }
            Event::ToolResult { executed, .. } => {
                let status = match &executed.outcome {
                    ToolOutcome::Ok { result } => {
                        format!("ok\n{}", indent(&shorten(&result.to_string(), 500)))
                    }
                    ToolOutcome::Failed { failure } => {
                        format!("failed: {} — {}\n", failure.code, failure.message)
                    }
                    ToolOutcome::TimedOut { after_ms } => {
                        format!("timed out after {after_ms} ms\n")
                    }
                };
                let _ = write!(
                    out,
                    "tool {} [{}] ran in {} ms: {status}",
                    executed.call.name(),
                    executed.call.id().unwrap_or_default(),
                    executed.duration_ms
                );
            }
            Event::Finished { report } => {
                let _ = writeln!(out, "\n── end ──");
                match &report.end {
                    RunEnd::FinalAnswer { answer } => {
                        // A cited answer is shown as its text and where each quote is from;
                        // any other answer as it is.
                        match (
                            answer.get("answer").and_then(Value::as_str),
                            answer.get("citations").and_then(Value::as_array),
                        ) {
                            (Some(text), Some(citations)) => {
                                let _ = writeln!(out, "final answer: {text}");
                                for c in citations {
                                    let _ = writeln!(
                                        out,
                                        "  cites {} {} line {}: {}",
                                        c["source_id"].as_str().unwrap_or_default(),
                                        c["version"].as_str().unwrap_or_default(),
                                        c["line_start"],
                                        shorten(c["quote"].as_str().unwrap_or_default(), 160)
                                    );
                                }
                            }
                            _ => {
                                let shown = answer
                                    .as_str()
                                    .map_or_else(|| answer.to_string(), str::to_owned);
                                let _ = writeln!(out, "final answer: {shown}");
                            }
                        }
                    }
                    RunEnd::Clarification { question } => {
                        let _ = writeln!(out, "the agent asks: {question}");
                    }
                    RunEnd::Abort { reason } => {
                        let _ = writeln!(out, "the agent stopped: {reason}");
                    }
                    RunEnd::Abstained { searched, message } => {
                        let _ = writeln!(out, "no answer: {message}");
                        for s in searched {
                            let _ = writeln!(out, "  searched: {s}");
                        }
                    }
                    RunEnd::BudgetExhausted { code, message } => {
                        let _ = writeln!(out, "budget exhausted ({code}): {message}");
                    }
                    RunEnd::Rejected {
                        rejection,
                        attempts,
                    } => {
                        let _ = writeln!(
                            out,
                            "ended after {attempts} rejected steps in a row; last: {} gate, {} — {}",
                            rejection.gate(),
                            rejection.code(),
                            rejection.message()
                        );
                    }
                    RunEnd::Refused { rejection } => {
                        let _ = writeln!(out, "refused: {}", rejection.message());
                    }
                    RunEnd::ModelFailed { code, message } => {
                        let _ = writeln!(out, "model failed ({code}): {message}");
                    }
                    other => {
                        let _ = writeln!(out, "{other:?}");
                    }
                }
                let u = &report.usage;
                let rejections = if report.rejections.is_empty() {
                    "none".to_owned()
                } else {
                    report
                        .rejections
                        .iter()
                        .map(|(g, n)| format!("{g} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(
                    out,
                    "usage: {} steps, {} tool calls, {} tokens, {:.1} s; rejected steps: {rejections}",
                    u.steps,
                    u.tool_calls,
                    u.tokens,
                    u.wall_ms as f64 / 1000.0
                );
            }
            _ => {}
        }
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (a pager quit early) must not stop the run.
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
}
