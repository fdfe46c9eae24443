//! `proviso eval bfcl | when2call`: public suites on the local model.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use proviso::tools::CallFormat;
use proviso::LocalModel;
use proviso_eval::bfcl::{self, Mode, CATEGORIES};
use proviso_eval::when2call;

#[derive(Debug, Subcommand)]
pub(crate) enum EvalCommand {
    /// A question bank (`corpora/bank.json`, or your own with `--docs`) through the agents
    /// users run, greedy, scored right, wrong, no fact or abstained, with retrieval
    /// recall@5; per question kind.
    Questions {
        /// The bank: `{"questions": [{"question", "facts", "forbidden", "answerable",
        /// "kind", "split", "corpus"?}]}`.
        #[arg(long, default_value = "corpora/bank.json")]
        bank: PathBuf,
        /// Answer from this document directory with the documents agent (otherwise each
        /// question's `corpus` picks a bundled agent).
        #[arg(long, value_name = "DIR")]
        docs: Option<PathBuf>,
        /// dev, test or all.
        #[arg(long, default_value = "all")]
        split: String,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Write one JSON line per question here.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Measure retrieval only, without the model: recall@5 of a line stating an
        /// expected fact, per kind (a whole bank in seconds).
        #[arg(long)]
        retrieval: bool,
        /// Measure the harness only, without the model: the first line and span the agent
        /// would offer after searching the question's own words (and reading the source it
        /// reads next when they answer nothing), scored like an accepted answer.
        #[arg(long, conflicts_with = "retrieval")]
        harness: bool,
        /// Re-rank each search's ten best lines by the model's query likelihood, as
        /// `demo --rerank` and `agent --rerank` do (--retrieval and --harness then load the
        /// model).
        #[arg(long, conflicts_with = "lexical")]
        rerank: bool,
        /// Search with BM25 alone, as `demo --lexical` and `agent --lexical` do.
        #[arg(long)]
        lexical: bool,
    },
    /// BFCL function calling, scored like BFCL's AST checker, free prose vs constrained.
    Bfcl {
        /// simple_python, multiple, parallel, irrelevance, or all.
        #[arg(long, default_value = "all")]
        category: String,
        /// The BFCL folder.
        #[arg(long, default_value = "../shared/data/bfcl")]
        data: PathBuf,
        /// The call format.
        #[arg(long, default_value = "pythonic")]
        format: CallFormat,
        /// constrained, free, or both.
        #[arg(long, default_value = "both")]
        mode: String,
        /// In constrained mode: `auto` lets the model answer in text (so irrelevance can
        /// pass); `required` makes it call a function.
        #[arg(long, default_value = "auto")]
        choice: String,
        /// Only the first N cases of each category.
        #[arg(long)]
        limit: Option<usize>,
        /// Most tokens per answer.
        #[arg(long, default_value_t = 160)]
        max_tokens: usize,
        /// Cases generated at once, as slots of one batched context (greedy outputs are
        /// the same as one at a time).
        #[arg(long, default_value_t = 1)]
        parallel: usize,
        /// Where to write report.md, chart.svg and results.json.
        #[arg(long, default_value = "target/eval/bfcl")]
        out: PathBuf,
        /// A GGUF; the default model otherwise.
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// When2Call: tool call, clarification or refusal, chosen as a typed intent.
    When2call {
        /// When2Call's test file.
        #[arg(long, default_value = "../shared/data/when2call/when2call_test.jsonl")]
        data: PathBuf,
        /// Only the first N cases.
        #[arg(long)]
        limit: Option<usize>,
        /// Most tokens per answer.
        #[arg(long, default_value_t = 200)]
        max_tokens: usize,
        /// Where to write report.md, chart.svg and results.json.
        #[arg(long, default_value = "target/eval/when2call")]
        out: PathBuf,
        /// A GGUF; the default model otherwise.
        #[arg(long)]
        model: Option<PathBuf>,
    },
}

fn write_outputs(out: &Path, markdown: &str, svg: &str, json: &serde_json::Value) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("report.md"), markdown)?;
    std::fs::write(out.join("chart.svg"), svg)?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(json)?,
    )?;
    Ok(())
}

fn progress(label: String) -> impl FnMut(usize, usize) {
    move |done, total| {
        if done % 10 == 0 || done == total {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{label}: {done}/{total}");
        }
    }
}

pub(crate) fn run(command: &EvalCommand) -> Result<ExitCode> {
    match command {
        EvalCommand::Questions {
            bank,
            docs,
            split,
            limit,
            out,
            retrieval,
            harness,
            rerank,
            lexical,
        } => {
            let run = crate::questions::Run {
                bank,
                docs: docs.as_deref(),
                split,
                limit: *limit,
                out: out.as_deref(),
                rerank: *rerank,
                lexical: *lexical,
            };
            if *retrieval {
                crate::questions::retrieval(&run)?;
            } else if *harness {
                crate::questions::harness(&run)?;
            } else {
                crate::questions::run(&run)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Bfcl {
            category,
            data,
            format,
            mode,
            choice,
            limit,
            max_tokens,
            parallel,
            out,
            model,
        } => {
            let choice = match choice.as_str() {
                "auto" => proviso::tools::ToolChoice::Auto,
                "required" => proviso::tools::ToolChoice::Required,
                other => bail!("unknown tool choice `{other}` (auto, required)"),
            };
            let categories: Vec<&str> = if category == "all" {
                CATEGORIES.to_vec()
            } else if CATEGORIES.contains(&category.as_str()) {
                vec![category.as_str()]
            } else {
                bail!("unknown category `{category}` (simple_python, multiple, parallel, irrelevance, all)");
            };
            let modes = match mode.as_str() {
                "both" => vec![Mode::Free, Mode::Constrained],
                "free" => vec![Mode::Free],
                "constrained" => vec![Mode::Constrained],
                other => bail!("unknown mode `{other}` (constrained, free, both)"),
            };
            let local = LocalModel::open(model.as_deref(), &mut crate::model::report_progress)?;
            let mut reports = Vec::new();
            for c in &categories {
                for m in &modes {
                    let report = bfcl::run(
                        &local,
                        data,
                        c,
                        *m,
                        *format,
                        *limit,
                        *max_tokens,
                        choice.clone(),
                        (*parallel).max(1),
                        &mut progress(format!("bfcl {c} {}", m.as_str())),
                    )
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                    reports.push(report);
                }
            }
            let markdown = bfcl::markdown(&reports);
            write_outputs(
                out,
                &format!("# BFCL on the local model\n\n{markdown}"),
                &bfcl::svg(&reports),
                &serde_json::to_value(&reports)?,
            )?;
            let mut stdout = std::io::stdout().lock();
            write!(stdout, "{markdown}")?;
            writeln!(stdout, "\nwritten to {}", out.display())?;
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::When2call {
            data,
            limit,
            max_tokens,
            out,
            model,
        } => {
            let local = LocalModel::open(model.as_deref(), &mut crate::model::report_progress)?;
            let report = when2call::run(
                &local,
                data,
                *limit,
                *max_tokens,
                &mut progress("when2call".into()),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let markdown = report.markdown();
            write_outputs(
                out,
                &format!("# When2Call on the local model\n\n{markdown}"),
                &report.svg(),
                &serde_json::to_value(&report)?,
            )?;
            let mut stdout = std::io::stdout().lock();
            write!(stdout, "{markdown}")?;
            writeln!(stdout, "\nwritten to {}", out.display())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
