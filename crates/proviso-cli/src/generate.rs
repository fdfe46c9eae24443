//! `proviso generate`: constrained generation on a local model, then the gates.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use proviso::decode::{
    CompileOptions, ConstraintSpec, Dry, GenerateOptions, Generation, Generator, Message,
    RepetitionLimit, Sampling, StopReason,
};
use proviso::llama::RunOptions;
use proviso::LocalModel;
use serde_json::json;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("constraint").args(["schema", "grammar", "regex", "choice"])))]
pub(crate) struct GenerateArgs {
    /// Constrain the output to this JSON Schema (the contract's gates then check it).
    #[arg(long, value_name = "S.json")]
    schema: Option<PathBuf>,
    /// Constrain the output to this Lark grammar.
    #[arg(long, value_name = "G.lark")]
    grammar: Option<PathBuf>,
    /// Constrain the output to match this regular expression.
    #[arg(long, value_name = "R")]
    regex: Option<String>,
    /// Constrain the output to one of these comma-separated strings.
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    choice: Option<Vec<String>>,
    /// A GGUF model; the default model is fetched on first use.
    #[arg(long, value_name = "M.gguf")]
    model: Option<PathBuf>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Seed for sampling (used with --temperature).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep only the k most likely tokens (0 = all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Nucleus sampling threshold.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Subtracted from a token's logit per earlier occurrence in the output.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    frequency_penalty: f32,
    /// Subtracted from a token's logit when it occurred earlier in the output.
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    presence_penalty: f32,
    /// Divides the positive logit of a token already in the output (1 is off).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    /// Multiplier of a DRY penalty on tokens that would extend an earlier sequence (0 is
    /// off; base 1.75, allowed length 2).
    #[arg(long, default_value_t = 0.0)]
    dry_multiplier: f32,
    /// Never stop on degenerate repetition: generate to the token limit (for measurement).
    #[arg(long)]
    no_repetition_stop: bool,
    /// A system message.
    #[arg(long)]
    system: Option<String>,
    /// End generation when this text appears (repeatable; not part of the output).
    #[arg(long = "stop", value_name = "TEXT")]
    stops: Vec<String>,
    /// Compile unenforceable schema keywords to a superset grammar and enforce them with
    /// the gates afterwards, regenerating up to --attempts times.
    #[arg(long)]
    relax: bool,
    /// Most generations under a schema: a rejected output is retried (showing the model the
    /// rejection), and an output stopped on repetition is regenerated with penalties
    /// against repetition.
    #[arg(long, default_value_t = 3)]
    attempts: usize,
    /// Sources for a contract that checks evidence.
    #[arg(long, value_name = "DIR")]
    sources: Option<PathBuf>,
    /// Print a JSON line of statistics on stderr.
    #[arg(long)]
    stats: bool,
    /// Compute masks after each forward pass instead of during it (for measurement).
    #[arg(long, hide = true)]
    no_overlap: bool,
    /// The prompt (the user message).
    prompt: String,
}

pub(crate) fn run(args: &GenerateArgs) -> Result<ExitCode> {
    // The contract comes first: a schema proviso cannot enforce is refused before the model
    // is even loaded.
    let contract = match &args.schema {
        Some(path) => {
            let document = crate::read_schema(path)?;
            let contract = crate::build_contract(
                path,
                &document,
                args.sources.as_deref(),
                args.sources.is_none(),
            )?;
            Some((document, contract))
        }
        None => None,
    };
    let spec = if let Some((document, _)) = &contract {
        Some(ConstraintSpec::JsonSchema(document.clone()))
    } else if let Some(path) = &args.grammar {
        Some(ConstraintSpec::Lark(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ))
    } else if let Some(regex) = &args.regex {
        Some(ConstraintSpec::Regex(regex.clone()))
    } else {
        args.choice.clone().map(ConstraintSpec::Choice)
    };

    let local = LocalModel::open(args.model.as_deref(), &mut crate::model::report_progress)?;
    let options = CompileOptions::default().relax(args.relax);
    let compiled = spec
        .as_ref()
        .map(|spec| local.compile(spec, &options))
        .transpose()?;
    let mut generator = Generator::new(local.engine(RunOptions::default())?, local.tokenizer());
    let generate_options = GenerateOptions::default()
        .max_tokens(args.max_tokens)
        .sampling(
            Sampling::greedy()
                .temperature(args.temperature)
                .top_k(args.top_k)
                .top_p(args.top_p)
                .seed(args.seed)
                .frequency_penalty(args.frequency_penalty)
                .presence_penalty(args.presence_penalty)
                .repetition_penalty(args.repetition_penalty)
                .dry(
                    (args.dry_multiplier > 0.0)
                        .then(|| Dry::default().multiplier(args.dry_multiplier)),
                ),
        )
        .stop(args.stops.clone())
        .overlap_mask(!args.no_overlap)
        .repetition(if args.no_repetition_stop {
            None
        } else {
            Some(RepetitionLimit::default())
        });

    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::system(system.clone()));
    }
    messages.push(Message::user(args.prompt.clone()));

    let attempts = args.attempts.max(1);
    let mut stderr = std::io::stderr().lock();
    let mut report =
        |attempt: usize, generation: &Generation, verdict: Option<&proviso::Verdict>| {
            // Diagnostics are best effort: a closed stderr must not fail the generation.
            if args.stats {
                let mut stats = generation.stats.summary();
                stats["stop_reason"] = json!(generation.stop_reason);
                stats["attempt"] = json!(attempt);
                if let Some(compiled) = &compiled {
                    stats["compile_ms"] = json!(compiled.compile_time().as_secs_f64() * 1e3);
                    if let Some((document, _)) = &contract {
                        let verified_only = compiled.verified_only();
                        let enforced: Vec<String> = proviso::contract::assertion_keywords(document)
                            .into_iter()
                            .filter(|k| !verified_only.contains(k))
                            .collect();
                        stats["enforced_during_decoding"] = json!(enforced);
                        stats["verified_after_decoding"] = json!(verified_only);
                    }
                }
                let _ = writeln!(stderr, "{}", json!({"stats": stats}));
            }
            if let Some(verdict) = verdict {
                let _ = writeln!(stderr, "{}", json!({"verdict": verdict}));
            }
        };
    let (generation, accepted) = match (&contract, &compiled) {
        (Some((_, contract)), Some(compiled)) => {
            let checked = local.generate_checked(
                &mut generator,
                contract,
                compiled,
                &messages,
                &generate_options,
                attempts,
                &mut |attempt, generation, verdict| report(attempt, generation, Some(verdict)),
            )?;
            let accepted = checked.verdict.accepted();
            (checked.generation, accepted)
        }
        _ => {
            let prompt = local.prompt(&messages)?;
            // A loop is regenerated with penalties against repetition, within --attempts.
            let generation = generator.generate_retrying(
                &prompt,
                compiled.as_ref(),
                &generate_options,
                attempts,
                &mut |attempt, generation| report(attempt, generation, None),
            )?;
            // A constrained output cut before the grammar completed is not a result.
            let complete = compiled.is_none()
                || !matches!(
                    generation.stop_reason,
                    StopReason::Length | StopReason::Repetition
                );
            (generation, complete)
        }
    };
    if !accepted && contract.is_some() {
        // Nothing that failed the contract goes to stdout, where a script would take it for
        // a result; the raw output is kept on stderr for inspection.
        let mut stderr = std::io::stderr().lock();
        writeln!(stderr, "{}", json!({"rejected_output": generation.text()}))?;
        return Ok(ExitCode::from(1));
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", generation.text())?;
    stdout.flush()?;
    if !accepted {
        let mut stderr = std::io::stderr().lock();
        if generation.stop_reason == StopReason::Repetition {
            writeln!(
                stderr,
                "proviso: the output was stopped on repetition before the grammar completed"
            )?;
        } else {
            writeln!(
                stderr,
                "proviso: the output was cut at --max-tokens {} before the grammar completed",
                args.max_tokens
            )?;
        }
    }
    Ok(if accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
