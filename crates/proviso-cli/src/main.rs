//! The `proviso` command. A thin shell over the library: it reads files, calls the pipeline
//! and prints what came back. Exit status: 0 accepted, 1 rejected, 2 usage or setup error.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use proviso::{Contract, SourceStore};

mod bench;
mod demo;
mod eval;
mod generate;
mod grammar;
mod model;
mod questions;
mod serve;

#[derive(Debug, Parser)]
#[command(
    name = "proviso",
    version,
    about = "The model proposes; proviso disposes.",
    long_about = "Turns what a language model writes into a machine-checkable contract: \
                  transport → parse → schema → application rules → evidence → typed intent."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check one model output against a contract (--schema) or a tool registry (--tools) and
    /// print one JSON verdict.
    ///
    /// Exit status: 0 when accepted, 1 when rejected, 2 for usage errors.
    Check(CheckArgs),
    /// Run a bundled example agent on the local model and print each step as it is disposed
    /// of: raw output, gates, intent, tool result, final answer.
    ///
    /// Exit status: 0 when the run ends in any typed way (an accepted answer, clarification or
    /// abort, an exhausted budget, too many rejected steps; the log says which); 1 when the
    /// model failed for a technical reason; 2 for setup errors.
    Demo(demo::DemoArgs),
    /// Answer a question from your own documents (a directory of .txt, .md and .jsonl files,
    /// with an optional manifest.json giving versions), with cited lines checked by the
    /// evidence gate.
    Agent(demo::AgentArgs),
    /// Serve the OpenAI chat-completions API on the local model, with grammar-enforced tool
    /// calls and structured outputs.
    Serve(serve::ServeArgs),
    /// Generate on a local model under a grammar (schema, Lark, regex or choice list).
    ///
    /// The output goes to stdout. With a schema it then passes the contract's gates and the
    /// verdict is printed on stderr as one JSON line; exit status 1 when it is rejected.
    Generate(generate::GenerateArgs),
    /// Export a contract's or a tool registry's grammar to GBNF, Lark or JSON Schema, for
    /// llama.cpp, llguidance-based servers, vLLM or OpenAI strict mode.
    Grammar(grammar::GrammarArgs),
    /// Evaluations on public suites (BFCL, When2Call) with the local model.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Run the breaker suite against any OpenAI-compatible endpoint and report parse
    /// failures, silently corrupted arguments, and calls that would have executed despite
    /// failing a gate.
    Audit(AuditArgs),
    /// Manage the embedded default model.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Benchmarks: MaskBench, and constrained decoding against its baselines.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// The endpoint's base URL (with or without `/v1`). An API key, if needed, is read from
    /// `PROVISO_AUDIT_KEY`.
    #[arg(long, value_name = "URL")]
    endpoint: String,
    /// The model to ask for (default: the endpoint's first model).
    #[arg(long)]
    model: Option<String>,
    /// Also write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Send the tools' argument policies as proviso's `x-proviso` extension (for endpoints
    /// that read it, such as `proviso serve`).
    #[arg(long)]
    send_policies: bool,
}

fn audit(args: &AuditArgs) -> Result<ExitCode> {
    let key = std::env::var("PROVISO_AUDIT_KEY").ok();
    let report = proviso_eval::audit::run(
        &args.endpoint,
        args.model.as_deref(),
        key.as_deref(),
        args.send_policies,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", report.markdown())?;
    let unsafe_calls = report.cases.iter().any(|c| c.would_execute);
    Ok(if unsafe_calls {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("against").args(["schema", "tools"]).required(true)))]
struct CheckArgs {
    /// The contract: a JSON Schema 2020-12 document, optionally with an `x-proviso`
    /// declaration (rules, evidence, versions, tools).
    #[arg(long, value_name = "SCHEMA.json")]
    schema: Option<PathBuf>,
    /// A tool registry (an OpenAI `tools` array, or a BFCL function list): the input is a
    /// proposed step, checked at the parse, schema, policy, permission and budget gates.
    #[arg(long, value_name = "TOOLS.json")]
    tools: Option<PathBuf>,
    /// With --tools: how the step is written (envelope, hermes, llama3, pythonic).
    #[arg(long, default_value = "envelope", requires = "tools")]
    format: proviso::tools::CallFormat,
    /// With --tools: the caller's role, its grants, budgets and usage so far (JSON). Without
    /// it, the caller may use read and compute tools only.
    #[arg(long, value_name = "POLICY.json", requires = "tools")]
    policy: Option<PathBuf>,
    /// Folder of source documents for the evidence gate, with a `manifest.json`.
    #[arg(long, value_name = "DIR", requires = "schema")]
    sources: Option<PathBuf>,
    /// Check a contract that declares evidence without sources; the evidence gate is then
    /// reported as `skipped`, never as passed.
    #[arg(long, conflicts_with = "sources", requires = "schema")]
    skip_evidence: bool,
    /// Read the input as a provider response envelope (an OpenAI-style chat completion or a
    /// message), judging its stop reason before its content.
    #[arg(long)]
    envelope: bool,
    /// Print the verdict on one line.
    #[arg(long)]
    compact: bool,
    /// The model output; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    input: Option<PathBuf>,
}

/// jemalloc, configured at build time (`.cargo/config.toml`) to return freed memory to the
/// system from a background thread, so a long-running server's RSS comes back to its baseline
/// after large rejected requests (glibc's per-thread arenas kept it).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server logs by default: one line per request, and the cause of every 500 with its
    // request id. Other commands print their own output and log only when asked.
    let default_filter =
        matches!(cli.command, Command::Serve(_)).then_some("warn,proviso_server=info");
    init_tracing(default_filter);
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let mut stderr = std::io::stderr().lock();
            // Nothing useful can be done if stderr itself is gone.
            let _ = writeln!(stderr, "proviso: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// With `PROVISO_LOG` set (an `EnvFilter` directive such as `info`), every span (each model
/// call and tool execution, with its OpenTelemetry GenAI attributes) is written to stderr as
/// one JSON line when it closes. `default` is the filter used when `PROVISO_LOG` is unset
/// (`None`: no logging).
fn init_tracing(default: Option<&str>) {
    let Some(filter) = std::env::var("PROVISO_LOG")
        .ok()
        .or_else(|| default.map(str::to_owned))
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second initialisation (never here) would be the only failure; ignoring it is safe.
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stderr)
        .try_init();
}

fn run(cli: Cli) -> Result<ExitCode> {
    let code = dispatch(cli);
    // The lines a run encoded are kept for the next run over the same documents.
    model::save_encodings();
    code
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Agent(args) => demo::run_docs(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Grammar(args) => grammar::run(&args),
        Command::Eval(command) => eval::run(&command),
        Command::Audit(args) => audit(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Model(command) => model::run(&command),
        Command::Bench(command) => bench::run(&command),
    }
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    let verdict = match (&args.schema, &args.tools) {
        (Some(schema), _) => {
            let contract = load_contract(schema, args)?;
            let input = read_input(args.input.as_deref())?;
            if args.envelope {
                contract.check_envelope(&input)
            } else {
                contract.check_text(&input)
            }
        }
        (None, Some(tools)) => {
            let gate = load_tool_gate(tools, args)?;
            let input = read_input(args.input.as_deref())?;
            let usage = gate.policy().usage;
            if args.envelope {
                gate.check_envelope(&input, &usage)
            } else {
                match std::str::from_utf8(&input) {
                    Ok(text) => gate.check(text, proviso::tools::Finish::Stop, &usage),
                    Err(_) => proviso::Progress::new().reject(proviso::Rejection::new(
                        proviso::Gate::Parse,
                        proviso::Code::InvalidUtf8,
                        "the input is not UTF-8",
                        proviso::Location::default(),
                    )),
                }
            }
        }
        (None, None) => bail!("pass --schema or --tools"),
    };
    let json = if args.compact {
        serde_json::to_string(&verdict)?
    } else {
        serde_json::to_string_pretty(&verdict)?
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{json}")?;
    Ok(if verdict.accepted() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn load_tool_gate(path: &Path, args: &CheckArgs) -> Result<proviso::tools::ToolGate> {
    let document = read_schema(path)?;
    let registry = proviso::tools::Registry::from_json(&document)
        .with_context(|| format!("in {}", path.display()))?;
    let policy = match &args.policy {
        None => proviso::tools::Policy::default(),
        Some(p) => proviso::tools::Policy::from_json(&read_schema(p)?)
            .with_context(|| format!("in {}", p.display()))?,
    };
    Ok(proviso::tools::ToolGate::new(
        Arc::new(registry),
        args.format,
        policy,
    ))
}

fn load_contract(schema: &Path, args: &CheckArgs) -> Result<Contract> {
    let document = read_schema(schema)?;
    build_contract(
        schema,
        &document,
        args.sources.as_deref(),
        args.skip_evidence,
    )
}

/// Reads a schema file strictly.
pub(crate) fn read_schema(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    proviso::json::parse(&text, &proviso::json::ParseOptions::default())
        .with_context(|| format!("{} is not strict JSON", path.display()))
}

/// Builds the contract declared by a schema document.
pub(crate) fn build_contract(
    path: &Path,
    document: &serde_json::Value,
    sources: Option<&Path>,
    skip_evidence: bool,
) -> Result<Contract> {
    let mut builder =
        Contract::from_document(document).with_context(|| format!("in {}", path.display()))?;
    if let Some(dir) = sources {
        builder = builder.sources(Arc::new(load_sources(dir)?));
    } else if skip_evidence {
        builder = builder.skip_evidence();
    }
    match builder.build() {
        Ok(contract) => Ok(contract),
        Err(proviso::ContractError::MissingSources) => bail!(
            "{} checks citations against sources: pass --sources DIR (or --skip-evidence)",
            path.display()
        ),
        Err(e) => Err(e).with_context(|| format!("in {}", path.display())),
    }
}

fn load_sources(dir: &Path) -> Result<SourceStore> {
    let manifest_path = dir.join("manifest.json");
    let manifest = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    SourceStore::from_manifest(&manifest, |file| {
        // Manifest entries are confined to the sources folder.
        let relative = Path::new(file);
        if relative.is_absolute()
            || relative
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("`{file}` is outside {}", dir.display()),
            ));
        }
        std::fs::read_to_string(dir.join(relative))
    })
    .with_context(|| format!("in {}", dir.display()))
}

fn read_input(path: Option<&Path>) -> Result<Vec<u8>> {
    match path {
        None => read_stdin(),
        Some(p) if p == Path::new("-") => read_stdin(),
        Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display())),
    }
}

fn read_stdin() -> Result<Vec<u8>> {
    let mut buffer = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buffer)
        .context("reading standard input")?;
    Ok(buffer)
}
