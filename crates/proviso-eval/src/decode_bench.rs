//! Constrained decoding against its baselines, in one run on one GGUF, prompt and schema:
//!
//! * proviso constrained (masks overlapped with the forward pass; forced tokens batched);
//! * proviso constrained with the mask computed after each forward pass (no overlap);
//! * proviso unconstrained decoding of the *same tokens* (one forward pass per token, argmax
//!   over the full vocabulary each step), the cost of writing that object without a grammar;
//! * llama.cpp's own grammar sampler, with the GBNF that llama.cpp's `json_schema_to_grammar`
//!   derives from the same schema, greedy.
//!
//! Every mode ends with the object checked by the contract's gates; the wall time is to a
//! complete, validated object.

use std::time::{Duration, Instant};

use proviso::decode::{
    strip_extensions, CompileOptions, ConstraintSpec, Engine, GenerateOptions, Generator, Message,
    Sampler, Sampling, Stats, TokenId,
};
use proviso::llama::{Model, RunOptions};
use proviso::{Contract, LocalModel};
use serde::Serialize;
use serde_json::Value;

/// One mode's measurements (medians over the repeats).
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Row {
    /// Which mode.
    pub mode: String,
    /// Tokens generated.
    pub tokens: usize,
    /// Forward passes after the prompt.
    pub forward_passes: usize,
    /// Tokens forced by the grammar.
    pub forced_tokens: usize,
    /// Wall time from start to a complete, validated object, milliseconds.
    pub wall_ms: f64,
    /// Generated tokens per second of decoding (prefill excluded).
    pub tokens_per_second: f64,
    /// Whether the object passed the gates.
    pub valid: bool,
    /// The output.
    pub output: String,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The rows.
    pub rows: Vec<Row>,
    /// Mean mask computation time, microseconds.
    pub mask_mean_us: f64,
    /// Mean mask time the sampler waited for after the forward pass, microseconds.
    pub exposed_mask_mean_us: f64,
    /// Mean forward pass, microseconds.
    pub forward_mean_us: f64,
    /// Exposed mask time as a share of a decode step, percent.
    pub constraint_overhead_percent: f64,
    /// Same, without overlap.
    pub constraint_overhead_no_overlap_percent: f64,
    /// Forced tokens as a share of generated tokens, percent.
    pub forced_share_percent: f64,
    /// Repeats per mode.
    pub repeats: usize,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Runs every mode `repeats` times.
///
/// # Errors
///
/// [`BenchError`] if the schema cannot be compiled or the engine fails.
pub fn run(
    local: &LocalModel,
    schema: &Value,
    prompt: &str,
    max_tokens: usize,
    repeats: usize,
) -> Result<Report, BenchError> {
    let repeats = repeats.max(1);
    let contract = Contract::builder(schema.clone()).build().map_err(err)?;
    let compiled = local
        .compile(
            &ConstraintSpec::JsonSchema(schema.clone()),
            &CompileOptions::default(),
        )
        .map_err(err)?;
    let prompt_tokens = local.prompt(&[Message::user(prompt)]).map_err(err)?;
    let run_options = RunOptions::default().n_ctx(2048);
    let mut generator = Generator::new(local.engine(run_options).map_err(err)?, local.tokenizer());
    let pieces: Vec<Vec<u8>> = local
        .tokenizer()
        .tokens()
        .into_iter()
        .map(|t| t.bytes)
        .collect();
    let text_of = |tokens: &[TokenId]| {
        String::from_utf8_lossy(
            &tokens
                .iter()
                .flat_map(|&t| pieces[t as usize].clone())
                .collect::<Vec<u8>>(),
        )
        .into_owned()
    };

    let mut rows = Vec::new();
    let mut overlapped_stats: Option<Stats> = None;
    let mut serial_stats: Option<Stats> = None;
    let mut reference_tokens: Vec<TokenId> = Vec::new();
    for overlap in [true, false] {
        let mut walls = Vec::new();
        let mut rates = Vec::new();
        let mut last = None;
        for _ in 0..repeats {
            let start = Instant::now();
            let generation = generator
                .generate(
                    &prompt_tokens,
                    Some(&compiled),
                    &GenerateOptions::default()
                        .max_tokens(max_tokens)
                        .overlap_mask(overlap),
                )
                .map_err(err)?;
            let valid = contract.check_text(generation.text().as_bytes()).accepted();
            walls.push(ms(start.elapsed()));
            let decode = generation.stats.total - generation.stats.prefill;
            rates.push(generation.tokens.len() as f64 / decode.as_secs_f64());
            last = Some((generation, valid));
        }
        let Some((generation, valid)) = last else {
            continue;
        };
        rows.push(Row {
            mode: if overlap {
                "proviso constrained".into()
            } else {
                "proviso constrained, mask after forward pass".into()
            },
            tokens: generation.tokens.len(),
            forward_passes: generation.stats.forward_passes,
            forced_tokens: generation.stats.forced_tokens,
            wall_ms: median(walls),
            tokens_per_second: median(rates),
            valid,
            output: generation.text(),
        });
        if overlap {
            reference_tokens.clone_from(&generation.tokens);
            overlapped_stats = Some(generation.stats);
        } else {
            serial_stats = Some(generation.stats);
        }
    }

    // Unconstrained decoding of the same tokens: the model writes the identical object one
    // forward pass per token, with a full-vocabulary argmax each step.
    {
        let engine = generator.engine_mut();
        let mut walls = Vec::new();
        let mut rates = Vec::new();
        for _ in 0..repeats {
            let start = Instant::now();
            engine.reset().map_err(err)?;
            engine.decode(&prompt_tokens).map_err(err)?;
            let decode_start = Instant::now();
            let mut sampler = Sampler::new(Sampling::greedy());
            for &token in &reference_tokens {
                let _ = std::hint::black_box(sampler.sample(engine.logits(), |_| true));
                engine.decode(&[token]).map_err(err)?;
            }
            let valid = contract
                .check_text(text_of(&reference_tokens).as_bytes())
                .accepted();
            std::hint::black_box(valid);
            walls.push(ms(start.elapsed()));
            rates.push(reference_tokens.len() as f64 / decode_start.elapsed().as_secs_f64());
        }
        rows.push(Row {
            mode: "proviso unconstrained, same tokens".into(),
            tokens: reference_tokens.len(),
            forward_passes: reference_tokens.len(),
            forced_tokens: 0,
            wall_ms: median(walls),
            tokens_per_second: median(rates),
            valid: contract
                .check_text(text_of(&reference_tokens).as_bytes())
                .accepted(),
            output: text_of(&reference_tokens),
        });
    }

    // llama.cpp's grammar sampler on the GBNF it derives from the same schema.
    {
        let gbnf = Model::json_schema_to_gbnf(&strip_extensions(schema)).map_err(err)?;
        let ends = local.tokenizer().end_tokens();
        let mut walls = Vec::new();
        let mut rates = Vec::new();
        let mut last = (Vec::new(), false);
        for _ in 0..repeats {
            let mut sampler = local.model().gbnf_sampler(&gbnf).map_err(err)?;
            let engine = generator.engine_mut();
            let start = Instant::now();
            engine.reset().map_err(err)?;
            engine.decode(&prompt_tokens).map_err(err)?;
            let decode_start = Instant::now();
            let mut tokens = Vec::new();
            while tokens.len() < max_tokens {
                let token = sampler.sample(engine).map_err(err)?;
                if ends.contains(&token) {
                    break;
                }
                tokens.push(token);
                engine.decode(&[token]).map_err(err)?;
            }
            let valid = contract.check_text(text_of(&tokens).as_bytes()).accepted();
            walls.push(ms(start.elapsed()));
            rates.push(tokens.len() as f64 / decode_start.elapsed().as_secs_f64());
            last = (tokens, valid);
        }
        rows.push(Row {
            mode: "llama.cpp GBNF sampler (json_schema_to_grammar)".into(),
            tokens: last.0.len(),
            forward_passes: last.0.len(),
            forced_tokens: 0,
            wall_ms: median(walls),
            tokens_per_second: median(rates),
            valid: last.1,
            output: text_of(&last.0),
        });
    }

    let stats = overlapped_stats.unwrap_or_default();
    let serial = serial_stats.unwrap_or_default();
    let forward_mean_us = Stats::mean_us(&stats.forward_times);
    let share = |exposed: f64, forward: f64| {
        if forward == 0.0 {
            0.0
        } else {
            (exposed / forward * 1e4).round() / 1e2
        }
    };
    Ok(Report {
        mask_mean_us: (Stats::mean_us(&stats.mask_times) * 1e3).round() / 1e3,
        exposed_mask_mean_us: (Stats::mean_us(&stats.exposed_mask_times) * 1e3).round() / 1e3,
        forward_mean_us: forward_mean_us.round(),
        constraint_overhead_percent: share(
            Stats::mean_us(&stats.exposed_mask_times),
            forward_mean_us,
        ),
        constraint_overhead_no_overlap_percent: share(
            Stats::mean_us(&serial.exposed_mask_times),
            Stats::mean_us(&serial.forward_times),
        ),
        forced_share_percent: if stats.generated_tokens == 0 {
            0.0
        } else {
            (stats.forced_tokens as f64 / stats.generated_tokens as f64 * 1e4).round() / 1e2
        },
        rows,
        repeats,
    })
}

impl Report {
    /// The report as a Markdown table.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| mode | tokens | forward passes | forced | wall to validated object | decode tokens/s | valid |\n|---|---|---|---|---|---|---|\n",
        );
        for row in &self.rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.1} ms | {:.1} | {} |\n",
                row.mode,
                row.tokens,
                row.forward_passes,
                row.forced_tokens,
                row.wall_ms,
                row.tokens_per_second,
                if row.valid { "yes" } else { "no" }
            ));
        }
        out.push_str(&format!(
            "\nMask: mean {} µs to compute; the sampler waited {} µs on average after a {} µs forward pass, \
             a per-token constraint overhead of {}% (without overlap: {}%). Forced tokens: {}% of the output. \
             Medians of {} runs.\n",
            self.mask_mean_us,
            self.exposed_mask_mean_us,
            self.forward_mean_us,
            self.constraint_overhead_percent,
            self.constraint_overhead_no_overlap_percent,
            self.forced_share_percent,
            self.repeats
        ));
        out
    }
}
