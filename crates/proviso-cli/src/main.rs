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
mod generate;
mod model;

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
    /// Check one model output against a contract and print one JSON verdict.
    ///
    /// Exit status: 0 when accepted, 1 when rejected, 2 for usage errors.
    Check(CheckArgs),
    /// Generate on a local model under a grammar (schema, Lark, regex or choice list).
    ///
    /// The output goes to stdout. With a schema it then passes the contract's gates and the
    /// verdict is printed on stderr as one JSON line; exit status 1 when it is rejected.
    Generate(generate::GenerateArgs),
    /// Manage the embedded default model.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Benchmarks: MaskBench, and constrained decoding against its baselines.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The contract: a JSON Schema 2020-12 document, optionally with an `x-proviso`
    /// declaration (rules, evidence, versions, tools).
    #[arg(long, value_name = "SCHEMA.json")]
    schema: PathBuf,
    /// Folder of source documents for the evidence gate, with a `manifest.json`.
    #[arg(long, value_name = "DIR")]
    sources: Option<PathBuf>,
    /// Check a contract that declares evidence without sources; the evidence gate is then
    /// reported as `skipped`, never as passed.
    #[arg(long, conflicts_with = "sources")]
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

fn main() -> ExitCode {
    let cli = Cli::parse();
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

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Model(command) => model::run(&command),
        Command::Bench(command) => bench::run(&command),
    }
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    let contract = load_contract(args)?;
    let input = read_input(args.input.as_deref())?;
    let verdict = if args.envelope {
        contract.check_envelope(&input)
    } else {
        contract.check_text(&input)
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

fn load_contract(args: &CheckArgs) -> Result<Contract> {
    let document = read_schema(&args.schema)?;
    build_contract(
        &args.schema,
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
            return Err(format!("`{file}` is outside {}", dir.display()));
        }
        std::fs::read_to_string(dir.join(relative)).map_err(|e| e.to_string())
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
