//! Sentence embeddings on CPU: how close in meaning two short texts are, where they share
//! no word (`day pass` and `day ticket`, `dog` and `pets`).
//!
//! The encoder is all-MiniLM-L6-v2 (a six-layer BERT trained for sentence similarity, 384
//! dimensions), read from the `model.zip` its Python package ships (`config.json`,
//! `tokenizer.json`, `model.safetensors`), its layers written in `bert` on candle's tensors.
//! A text is encoded as text, mean pooled over its tokens and normalised, so the dot product
//! of two embeddings is their cosine. Embeddings are cached by text: a harness asks about the same lines again and again.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

mod bert;
use bert::{Bert, Config};

/// Most texts kept in the cache; past it the cache starts again (a server's queries would
/// otherwise grow it without end).
const MAX_CACHED: usize = 100_000;

/// The width of an embedding (all-MiniLM-L6-v2's).
const DIMENSIONS: usize = 384;

/// The entries of a file [`Encoder::save`] wrote, or `None` when it is not one whole.
fn read_store(bytes: &[u8]) -> Option<Vec<(String, Vec<f32>)>> {
    let rest = bytes.strip_prefix(STORE_MAGIC)?;
    let (width, mut rest) = rest.split_at_checked(4)?;
    if u32::from_le_bytes(width.try_into().ok()?) as usize != DIMENSIONS {
        return None;
    }
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (len, after) = rest.split_at_checked(4)?;
        let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let (text, after) = after.split_at_checked(len)?;
        let (vector, after) = after.split_at_checked(4 * DIMENSIONS)?;
        let vector = vector
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.push((String::from_utf8(text.to_vec()).ok()?, vector));
        rest = after;
    }
    Some(out)
}

/// Longest text the encoder reads, in word pieces (the model was trained on 256 at most);
/// a longer line is cut there.
const MAX_TOKENS: usize = 256;

/// Why the encoder could not be loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The model archive could not be read.
    #[error("the encoder archive {path}: {detail}")]
    Archive {
        /// The archive.
        path: String,
        /// What went wrong.
        detail: String,
    },
    /// Tokenizing failed.
    #[error("tokenizing for the encoder: {0}")]
    Tokenize(String),
    /// The model failed.
    #[error("the encoder: {0}")]
    Model(#[from] candle_core::Error),
    /// The model's configuration describes what the encoder does not run; it names the key.
    #[error("the encoder's config.json: {0}")]
    Config(String),
}

/// A sentence encoder with a cache of what it encoded.
pub struct Encoder {
    model: Bert,
    tokenizer: tokenizers::Tokenizer,
    cache: Mutex<HashMap<String, Vec<f32>>>,
    /// Whether the cache holds texts that its file ([`Encoder::save`]) does not.
    grown: std::sync::atomic::AtomicBool,
}

/// The first bytes of a file of saved embeddings ([`Encoder::save`]).
const STORE_MAGIC: &[u8; 8] = b"PVEMB01\n";

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder").finish_non_exhaustive()
    }
}

impl Encoder {
    /// Loads the encoder from the `model.zip` of all-MiniLM-L6-v2.
    ///
    /// # Errors
    ///
    /// [`EmbedError::Archive`] when a member is missing or unreadable,
    /// [`EmbedError::Config`] when its configuration is not one the encoder runs,
    /// [`EmbedError::Model`] when the weights do not fit the configuration.
    pub fn from_zip(path: &Path) -> Result<Self, EmbedError> {
        let bad = |detail: String| EmbedError::Archive {
            path: path.display().to_string(),
            detail,
        };
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
        let mut member = |name: &str| -> Result<Vec<u8>, EmbedError> {
            let mut entry = archive
                .by_name(name)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            Ok(bytes)
        };
        let config: serde_json::Value = serde_json::from_slice(&member("config.json")?)
            .map_err(|e| bad(format!("config.json: {e}")))?;
        let config = Config::from_json(&config).map_err(EmbedError::Config)?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(member("tokenizer.json")?)
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(tokenizers::PaddingParams::default()));
        let weights = member("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)?;
        let model = Bert::load(vb, &config)?;
        Ok(Self {
            model,
            tokenizer,
            cache: Mutex::new(HashMap::new()),
            grown: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Adds the embeddings saved at `path` ([`Encoder::save`]) to the cache, so that a
    /// document set's lines are encoded once, not on every run; the number read. A file
    /// that is missing, cut short or of another width reads as none: the encoder then
    /// encodes again, as it would without it.
    pub fn load(&self, path: &Path) -> usize {
        let Ok(bytes) = std::fs::read(path) else {
            return 0;
        };
        let Some(entries) = read_store(&bytes) else {
            return 0;
        };
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = entries.len().min(MAX_CACHED.saturating_sub(cache.len()));
        cache.extend(entries.into_iter().take(n));
        n
    }

    /// Writes the cache to `path` (through a file beside it, renamed into place) when it
    /// holds texts the file does not; whether it wrote.
    ///
    /// # Errors
    ///
    /// [`EmbedError::Archive`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<bool, EmbedError> {
        if !self.grown.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Ok(false);
        }
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = Vec::with_capacity(cache.len() * (4 * DIMENSIONS + 64));
        out.extend_from_slice(STORE_MAGIC);
        out.extend_from_slice(&u32::try_from(DIMENSIONS).unwrap_or(0).to_le_bytes());
        for (text, vector) in cache.iter().filter(|(_, v)| v.len() == DIMENSIONS) {
            out.extend_from_slice(&u32::try_from(text.len()).unwrap_or(0).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
            for x in vector {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        drop(cache);
        let bad = |e: std::io::Error| EmbedError::Archive {
            path: path.display().to_string(),
            detail: e.to_string(),
        };
        let partial = path.with_extension(format!("partial-{}", std::process::id()));
        std::fs::write(&partial, &out).map_err(bad)?;
        std::fs::rename(&partial, path).map_err(bad)?;
        Ok(true)
    }

    /// The embeddings of `texts` (unit length), in order.
    ///
    /// # Errors
    ///
    /// [`EmbedError`] when tokenizing or the model fails.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| !cache.contains_key(*t))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        if cache.len() + missing.len() > MAX_CACHED {
            cache.clear();
            missing = texts.to_vec();
            missing.sort_unstable();
            missing.dedup();
        }
        // Batches of similar length waste little on padding.
        missing.sort_by_key(|t| t.len());
        for batch in missing.chunks(16) {
            for (text, vector) in batch.iter().zip(self.encode(batch)?) {
                cache.insert((*text).to_owned(), vector);
            }
            self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(texts.iter().map(|t| cache[*t].clone()).collect())
    }

    /// How close in meaning `query` is to each of `lines`: their cosines, in order.
    ///
    /// # Errors
    ///
    /// See [`Encoder::embed`].
    pub fn similarities(&self, query: &str, lines: &[&str]) -> Result<Vec<f32>, EmbedError> {
        let mut texts = vec![query];
        texts.extend_from_slice(lines);
        let vectors = self.embed(&texts)?;
        // The query is always first: `texts` is never empty.
        Ok(match vectors.split_first() {
            Some((q, rest)) => rest.iter().map(|v| dot(q, v)).collect(),
            None => Vec::new(),
        })
    }

    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor, EmbedError> {
            let data: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(f(e), &Device::Cpu))
                .collect::<Result<_, _>>()?;
            Ok(Tensor::stack(&data, 0)?)
        };
        let ids = rows(&|e| e.get_ids())?;
        let types = rows(&|e| e.get_type_ids())?;
        let mask = rows(&|e| e.get_attention_mask())?;
        let hidden = self.model.forward(&ids, &types, &mask)?;
        // Mean over the text's own tokens (padding masked out), then unit length.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        let unit = mean.broadcast_div(&norm)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

/// The dot product of two vectors (their cosine, when both have unit length).
#[must_use]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
