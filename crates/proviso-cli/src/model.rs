//! `proviso model fetch | path | verify`.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use clap::Subcommand;
use proviso::model::{FetchEvent, ModelSpec, DEFAULT_MODEL, ENCODER_MODEL};

#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// Fetch the default model (SmolLM2-135M-Instruct, Q4_1) and the sentence encoder
    /// (all-MiniLM-L6-v2) into the cache, if missing.
    Fetch,
    /// Print where the default model is (or will be) cached.
    Path,
    /// Hash the cached default model and sentence encoder in full and check them.
    Verify,
}

/// What proviso fetches: the default model, and the sentence encoder searches use.
const MODELS: [&ModelSpec; 2] = [&DEFAULT_MODEL, &ENCODER_MODEL];

pub(crate) fn run(command: &ModelCommand) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    for spec in MODELS {
        match command {
            // `fetch` and `path` print one line, the GGUF's path, which scripts and tests
            // hand to other runtimes (llama.cpp's server); the encoder is fetched quietly.
            ModelCommand::Fetch => {
                let path = proviso::model::ensure(spec, &mut report_progress)?;
                if spec == &DEFAULT_MODEL {
                    writeln!(stdout, "{}", path.display())?;
                }
            }
            ModelCommand::Path => {
                if spec == &DEFAULT_MODEL {
                    writeln!(stdout, "{}", proviso::model::cached_path(spec)?.display())?;
                }
            }
            ModelCommand::Verify => {
                let path = proviso::model::cached_path(spec)?;
                proviso::model::verify(spec, &path)?;
                writeln!(
                    stdout,
                    "{}: {} bytes, sha256 {} (ok)",
                    path.display(),
                    spec.size,
                    spec.sha256
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The last tenth of an extraction reported (each is reported once per fetch).
static LAST_TENTH: AtomicU64 = AtomicU64::new(0);

/// Shows fetch progress on stderr: pip's own download bar, then extraction in tenths.
pub(crate) fn report_progress(event: FetchEvent) {
    let mut stderr = std::io::stderr().lock();
    // Progress is best effort: a closed stderr must not stop the fetch.
    let _ = match event {
        FetchEvent::Downloading { requirement } => {
            LAST_TENTH.store(0, Ordering::Relaxed);
            writeln!(stderr, "proviso: fetching {requirement} with pip")
        }
        FetchEvent::Extracting { done, total } => {
            let tenth = done * 10 / total.max(1);
            if tenth > LAST_TENTH.swap(tenth, Ordering::Relaxed) {
                writeln!(stderr, "proviso: extracting and verifying {}%", tenth * 10)
            } else {
                Ok(())
            }
        }
        FetchEvent::Ready { path } => {
            writeln!(stderr, "proviso: model ready at {}", path.display())
        }
        _ => Ok(()),
    };
}

/// The sentence encoder (all-MiniLM-L6-v2), fetched into the cache when missing and loaded
/// once per process: searches rank lines by meaning with it.
pub(crate) fn encoder() -> Result<std::sync::Arc<proviso_embed::Encoder>> {
    if let Some(encoder) = ENCODER.get() {
        return Ok(encoder.clone());
    }
    let path = proviso::model::ensure(&ENCODER_MODEL, &mut report_progress)?;
    let loaded = std::sync::Arc::new(proviso_embed::Encoder::from_zip(&path)?);
    // The lines encoded on earlier runs, so that a document set is encoded once.
    loaded.load(&store_path(&path));
    let encoder = ENCODER.get_or_init(|| loaded).clone();
    let _ = ENCODER_PATH.set(path);
    Ok(encoder)
}

static ENCODER: std::sync::OnceLock<std::sync::Arc<proviso_embed::Encoder>> =
    std::sync::OnceLock::new();
static ENCODER_PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Where the encoder's embeddings are kept between runs: beside its archive, so that
/// another encoder never reads them.
fn store_path(archive: &std::path::Path) -> std::path::PathBuf {
    archive.with_extension("embeddings")
}

/// Saves what the sentence encoder encoded in this run, if it was loaded and encoded
/// anything new. A failure to save costs the next run time, not this run's answer: it is
/// logged, not raised.
pub(crate) fn save_encodings() {
    if let (Some(encoder), Some(path)) = (ENCODER.get(), ENCODER_PATH.get()) {
        if let Err(e) = encoder.save(&store_path(path)) {
            tracing::warn!(error = %e, "the sentence encoder's embeddings were not saved");
        }
    }
}
