//! `proviso bench maskbench | decode`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use proviso::decode::{CompileOptions, Constrainer};
use proviso::LocalModel;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Walk MaskBench's valid and invalid instances through constraints compiled over the
    /// model's tokenizer.
    Maskbench {
        /// The MaskBench folder (one JSON file per schema).
        dir: PathBuf,
        /// Only the first N schema files (after --filter).
        #[arg(long)]
        limit: Option<usize>,
        /// Only files whose name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Also serve refused schemas under --relax (superset grammar plus gates).
        #[arg(long)]
        relax: bool,
        /// Write the full report as JSON here.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// A GGUF whose tokenizer to use; the default model otherwise.
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// Constrained decoding vs unconstrained decoding of the same tokens vs llama.cpp's GBNF
    /// sampler, on one GGUF, prompt and schema.
    Decode {
        /// The schema; a small tool-call schema by default.
        #[arg(long, value_name = "S.json")]
        schema: Option<PathBuf>,
        /// The prompt.
        #[arg(
            long,
            default_value = "Which arms of trial NCT04123456 were terminated? Call the get_arm tool."
        )]
        prompt: String,
        /// Runs per mode (the median is reported).
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Most tokens per run.
        #[arg(long, default_value_t = 200)]
        max_tokens: usize,
        /// A GGUF; the default model otherwise.
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// Aggregate decode throughput of N sequences batched in one context, as a ratio to one
    /// sequence in the same run.
    Batch {
        /// Sequences per level, comma-separated; the first level is the baseline.
        #[arg(long, default_value = "1,2,4,8,16", value_delimiter = ',')]
        sequences: Vec<usize>,
        /// Tokens each sequence generates.
        #[arg(long, default_value_t = 128)]
        max_tokens: usize,
        /// A GGUF; the default model otherwise.
        #[arg(long)]
        model: Option<PathBuf>,
    },
}

/// The tool-call schema of the decoding benchmark.
fn default_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "tool": {"enum": ["search_trials", "get_arm", "get_document"]},
            "arguments": {
                "type": "object",
                "properties": {
                    "trial_id": {"type": "string", "pattern": "^NCT[0-9]{8}$"},
                    "arm_label": {"type": "string", "maxLength": 40}
                },
                "required": ["trial_id", "arm_label"],
                "additionalProperties": false
            }
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false
    })
}

pub(crate) fn run(command: &BenchCommand) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match command {
        BenchCommand::Maskbench {
            dir,
            limit,
            filter,
            relax,
            json,
            model,
        } => {
            let local = LocalModel::open(model.as_deref(), &mut crate::model::report_progress)?;
            // Instances are walked with the model's tokenization of their compact JSON, which
            // need not be the tokenization forced tokens would give; so the walk uses masks
            // that allow every tokenization.
            let constrainer = Constrainer::any_tokenization(
                local.tokenizer().clone(),
                &CompileOptions::default(),
            )?;
            let options = proviso_eval::maskbench::Options {
                limit: *limit,
                filter: filter.clone(),
                relax: *relax,
            };
            let mut stderr = std::io::stderr().lock();
            let report = proviso_eval::maskbench::run(dir, &constrainer, &options, &mut |i, r| {
                if i > 0 && i % 500 == 0 {
                    let _ = writeln!(
                        stderr,
                        "proviso: {i} schemas, {} compiled, {} refused",
                        r.compiled, r.refused
                    );
                }
            })?;
            if let Some(path) = json {
                std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            write!(stdout, "{}", report.markdown())?;
            Ok(if report.defects.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        BenchCommand::Decode {
            schema,
            prompt,
            repeats,
            max_tokens,
            model,
        } => {
            let schema = match schema {
                Some(path) => crate::read_schema(path)?,
                None => default_schema(),
            };
            let local = LocalModel::open(model.as_deref(), &mut crate::model::report_progress)?;
            let report =
                proviso_eval::decode_bench::run(&local, &schema, prompt, *max_tokens, *repeats)?;
            print_report(&mut stdout, &report.markdown(), &report)
        }
        BenchCommand::Batch {
            sequences,
            max_tokens,
            model,
        } => {
            if sequences.is_empty() || sequences.contains(&0) {
                anyhow::bail!("--sequences needs one or more counts of at least 1");
            }
            let local = LocalModel::open(model.as_deref(), &mut crate::model::report_progress)?;
            let report = proviso_eval::batch_bench::run(&local, sequences, (*max_tokens).max(1))?;
            print_report(&mut stdout, &report.markdown(), &report)
        }
    }
}

/// Prints a benchmark's table, then its full report as a JSON block.
fn print_report(
    out: &mut impl Write,
    markdown: &str,
    report: &impl serde::Serialize,
) -> Result<ExitCode> {
    write!(out, "{markdown}")?;
    writeln!(
        out,
        "\n```json\n{}\n```",
        serde_json::to_string_pretty(report)?
    )?;
    Ok(ExitCode::SUCCESS)
}
