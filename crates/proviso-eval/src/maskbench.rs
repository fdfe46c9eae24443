//! MaskBench (from JSONSchemaBench): for each schema, compile a constraint over the model's
//! tokenizer, walk every valid instance token by token through the matcher (it must be
//! accepted) and every invalid one until it is rejected. An invalid instance that the grammar
//! accepts must then be rejected by the gates; one accepted by both is a defect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proviso::decode::{CompileOptions, Constrainer, ConstraintError, ConstraintSpec};
use proviso::{CompiledSchema, SchemaOptions};
use serde::Serialize;
use serde_json::Value;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Stop after this many schema files (after filtering).
    pub limit: Option<usize>,
    /// Only files whose name contains this.
    pub filter: Option<String>,
    /// Serve schemas with unenforceable keywords under `relax` instead of only refusing them.
    pub relax: bool,
}

/// The outcome of a run.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Schema files read.
    pub schemas: usize,
    /// Compiled to an exact grammar.
    pub compiled: usize,
    /// Refused because the grammar cannot enforce a keyword, by keyword.
    pub refused_by_keyword: BTreeMap<String, usize>,
    /// Refused schemas (any keyword).
    pub refused: usize,
    /// Refused schemas served under `relax` (superset grammar plus the gates).
    pub served_under_relax: usize,
    /// Refused schemas that even the superset grammar cannot serve.
    pub not_served_under_relax: usize,
    /// Schemas the grammar compiler rejected for another reason, by the first words of the
    /// message.
    pub grammar_errors: BTreeMap<String, usize>,
    /// Schemas the validator cannot compile (an invalid regex, say). proviso refuses such a
    /// contract when it is built, so their instances are not walked.
    pub validator_errors: usize,
    /// Valid instances walked.
    pub valid_instances: usize,
    /// Valid instances the grammar accepted.
    pub valid_accepted: usize,
    /// Invalid instances walked.
    pub invalid_instances: usize,
    /// Invalid instances the grammar rejected.
    pub invalid_rejected_by_grammar: usize,
    /// Invalid instances the grammar accepted but the gates rejected.
    pub invalid_rejected_by_gates: usize,
    /// Invalid instances accepted by grammar and gates: defects.
    pub defects: Vec<String>,
    /// Valid instances the grammar rejected, with the file name (for inspection).
    pub valid_rejected_examples: Vec<String>,
    /// Compile time percentiles, milliseconds.
    pub compile_ms: Percentiles,
    /// Mask time percentiles, microseconds.
    pub mask_us: Percentiles,
    /// Masks computed.
    pub masks: usize,
    /// Wall time of the run, seconds.
    pub seconds: f64,
}

/// p50, p99 and max.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Percentiles {
    fn of(mut values: Vec<f64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| {
            values[((p * (values.len() - 1) as f64).round() as usize).min(values.len() - 1)]
        };
        Self {
            p50: round(at(0.5)),
            p99: round(at(0.99)),
            max: round(values[values.len() - 1]),
        }
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Why the run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaskBenchError {
    /// The folder cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Runs MaskBench on the files in `dir` with a constrainer built over a tokenizer that
/// accepts any tokenization of the allowed bytes.
///
/// # Errors
///
/// [`MaskBenchError`] if `dir` cannot be listed.
pub fn run(
    dir: &Path,
    constrainer: &Constrainer,
    options: &Options,
    progress: &mut dyn FnMut(usize, &Report),
) -> Result<Report, MaskBenchError> {
    let start = Instant::now();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| MaskBenchError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            options.filter.as_ref().is_none_or(|f| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().contains(f.as_str()))
            })
        })
        .collect();
    files.sort();
    if let Some(limit) = options.limit {
        files.truncate(limit);
    }
    let mut report = Report::default();
    let mut compile_times = Vec::new();
    let mut mask_times: Vec<f64> = Vec::new();
    // Instances are serialized compactly, whatever the spacing of the test file; the grammar
    // therefore allows free (bounded) whitespace instead of proviso's fixed separators.
    let strict = CompileOptions::default().max_json_whitespace(Some(12));
    let relaxed = strict.clone().relax(true);
    let validator_options = SchemaOptions::default()
        .allow_unknown_keywords(true)
        .detect_draft(true);
    for (i, file) in files.iter().enumerate() {
        progress(i, &report);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(document) = std::fs::read(file)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        else {
            continue;
        };
        report.schemas += 1;
        let schema = &document["schema"];
        let Ok(validator) = CompiledSchema::compile(schema, &validator_options) else {
            report.validator_errors += 1;
            continue;
        };
        let spec = ConstraintSpec::JsonSchema(schema.clone());
        let compile_start = Instant::now();
        let compiled = match constrainer.compile(&spec, &strict) {
            Ok(compiled) => {
                report.compiled += 1;
                compiled
            }
            Err(ConstraintError::Unsupported { keywords }) => {
                report.refused += 1;
                for keyword in keywords {
                    // `format:color` is grouped under `format`.
                    let keyword = keyword.split(':').next().unwrap_or_default().to_owned();
                    *report.refused_by_keyword.entry(keyword).or_default() += 1;
                }
                if !options.relax {
                    continue;
                }
                match constrainer.compile(&spec, &relaxed) {
                    Ok(compiled) => {
                        report.served_under_relax += 1;
                        compiled
                    }
                    Err(_) => {
                        report.not_served_under_relax += 1;
                        continue;
                    }
                }
            }
            Err(e) => {
                *report.grammar_errors.entry(error_class(&e)).or_default() += 1;
                continue;
            }
        };
        compile_times.push(compile_start.elapsed().as_secs_f64() * 1e3);
        let Some(tests) = document["tests"].as_array() else {
            continue;
        };
        for test in tests {
            let valid = test["valid"].as_bool().unwrap_or(false);
            let Ok(text) = serde_json::to_string(&test["data"]) else {
                continue;
            };
            let tokens = constrainer.tokenize(text.as_bytes());
            let accepted = compiled.accepts(&tokens, &mut |took| mask_times.push(elapsed_us(took)));
            if valid {
                report.valid_instances += 1;
                if accepted {
                    report.valid_accepted += 1;
                } else if report.valid_rejected_examples.len() < 20 {
                    report.valid_rejected_examples.push(name.clone());
                }
            } else {
                report.invalid_instances += 1;
                if !accepted {
                    report.invalid_rejected_by_grammar += 1;
                } else if !validator.is_valid(&test["data"]) {
                    report.invalid_rejected_by_gates += 1;
                } else {
                    report.defects.push(format!("{name}: {text}"));
                }
            }
        }
    }
    report.compile_ms = Percentiles::of(compile_times);
    report.masks = mask_times.len();
    report.mask_us = Percentiles::of(mask_times);
    report.seconds = round(start.elapsed().as_secs_f64());
    Ok(report)
}

fn elapsed_us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn error_class(e: &ConstraintError) -> String {
    let text = e.to_string();
    let text = text.trim_start_matches("cannot compile the constraint: ");
    text.split_whitespace()
        .take(5)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Report {
    /// The report as a Markdown table.
    #[must_use]
    pub fn markdown(&self) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}%", a as f64 * 100.0 / b as f64)
            }
        };
        let mut out = String::new();
        out.push_str("| measure | value |\n|---|---|\n");
        out.push_str(&format!("| schemas | {} |\n", self.schemas));
        out.push_str(&format!(
            "| compiled to an exact grammar | {} ({}) |\n",
            self.compiled,
            pct(self.compiled, self.schemas)
        ));
        out.push_str(&format!(
            "| refused, naming the keyword | {} ({}) |\n",
            self.refused,
            pct(self.refused, self.schemas)
        ));
        out.push_str(&format!(
            "| refused schemas served under `--relax` | {} (not servable: {}) |\n",
            self.served_under_relax, self.not_served_under_relax
        ));
        out.push_str(&format!(
            "| schemas the validator cannot compile (contract refused) | {} |\n",
            self.validator_errors
        ));
        let errors: usize = self.grammar_errors.values().sum();
        out.push_str(&format!("| other grammar compile errors | {errors} |\n"));
        out.push_str(&format!(
            "| valid instances accepted | {} / {} ({}) |\n",
            self.valid_accepted,
            self.valid_instances,
            pct(self.valid_accepted, self.valid_instances)
        ));
        out.push_str(&format!(
            "| invalid instances rejected by the grammar | {} / {} ({}) |\n",
            self.invalid_rejected_by_grammar,
            self.invalid_instances,
            pct(self.invalid_rejected_by_grammar, self.invalid_instances)
        ));
        out.push_str(&format!(
            "| invalid instances passed by the grammar, rejected by the gates | {} |\n",
            self.invalid_rejected_by_gates
        ));
        out.push_str(&format!(
            "| defects (invalid, accepted by grammar and gates) | {} |\n",
            self.defects.len()
        ));
        out.push_str(&format!(
            "| compile time p50 / p99 | {} ms / {} ms |\n",
            self.compile_ms.p50, self.compile_ms.p99
        ));
        out.push_str(&format!(
            "| mask time p50 / p99 / max | {} µs / {} µs / {} µs ({} masks) |\n",
            self.mask_us.p50, self.mask_us.p99, self.mask_us.max, self.masks
        ));
        out.push_str(&format!("| wall time | {} s |\n", self.seconds));
        if !self.refused_by_keyword.is_empty() {
            out.push_str("\nRefused, by keyword (a schema may name several):\n\n| keyword | schemas |\n|---|---|\n");
            for (k, n) in &self.refused_by_keyword {
                out.push_str(&format!("| `{k}` | {n} |\n"));
            }
        }
        if !self.grammar_errors.is_empty() {
            out.push_str("\nOther compile errors:\n\n| error | schemas |\n|---|---|\n");
            for (k, n) in &self.grammar_errors {
                out.push_str(&format!("| {} | {n} |\n", k.replace('|', "\\|")));
            }
        }
        out
    }
}
