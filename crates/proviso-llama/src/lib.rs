//! llama.cpp, through `llama-cpp-2`, as a proviso [`Engine`].
//!
//! proviso owns the sampling loop: this crate only loads a GGUF, exposes its vocabulary and
//! tokenizer, renders its chat template, and runs forward passes. llama.cpp's own grammar
//! sampler is exposed only for the comparison benchmark.
//!
//! A loaded model lives for the rest of the process (it is leaked on purpose): contexts
//! borrow it, and a process loads its model once.

mod batch;

pub use batch::{BatchOptions, BatchStats, Batcher, SlotEngine};

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use proviso_decode::{
    ChatTemplate, Engine, EngineError, TemplateError, TokenId, TokenInfo, Tokenizer,
};

/// Why a model could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlamaError {
    /// llama.cpp could not be initialised.
    #[error("cannot initialise llama.cpp: {0}")]
    Backend(String),
    /// The file is not a GGUF llama.cpp can load.
    #[error("cannot load {path}: {message}")]
    Load {
        /// The file.
        path: String,
        /// llama.cpp's reason.
        message: String,
    },
    /// A context could not be created.
    #[error("cannot create a context: {0}")]
    Context(String),
    /// The model has no usable chat template.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// llama.cpp's grammar tools failed.
    #[error("llama.cpp grammar: {0}")]
    Grammar(String),
}

fn backend() -> Result<&'static LlamaBackend, LlamaError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            // llama.cpp logs every tensor it loads; proviso reports what matters itself.
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| LlamaError::Backend(e.clone()))
}

/// Creating contexts from one model in parallel is unsound in llama.cpp; serialise it.
static CONTEXT_CREATION: Mutex<()> = Mutex::new(());

/// The cores this process's forward passes may use at once.
///
/// llama.cpp's threads spin while they wait for each other, so two contexts that each run
/// as many threads as there are cores do not share the machine: they slow each other down
/// several times over (on two cores, a 13-second client session took minutes). Each forward
/// pass therefore leases as many cores as it runs threads, and waits while they are in use.
/// Engines whose threads fit the machine together (the server's workers split the cores
/// between them) never wait.
struct Cores {
    free: Mutex<usize>,
    freed: Condvar,
    total: usize,
}

/// Cores held by one forward pass; they return to the pool when it is dropped.
struct CoreLease {
    cores: &'static Cores,
    held: usize,
}

impl Cores {
    fn get() -> &'static Self {
        static CORES: OnceLock<Cores> = OnceLock::new();
        CORES.get_or_init(|| {
            let total = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
            Self {
                free: Mutex::new(total),
                freed: Condvar::new(),
                total,
            }
        })
    }

    fn lease(&'static self, threads: usize) -> CoreLease {
        let held = threads.clamp(1, self.total);
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *free < held {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *free -= held;
        CoreLease { cores: self, held }
    }
}

impl Drop for CoreLease {
    fn drop(&mut self) {
        let mut free = self
            .cores
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *free += self.held;
        self.cores.freed.notify_all();
    }
}

/// How to run a model.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RunOptions {
    /// Context size in tokens.
    pub n_ctx: u32,
    /// Threads for generation and prompt processing.
    pub n_threads: i32,
    /// Largest batch fed to one forward pass.
    pub n_batch: u32,
}

proviso_macros::setters!(RunOptions {
    n_ctx: u32,
    n_threads: i32,
    n_batch: u32,
});

impl Default for RunOptions {
    /// Threads: `$PROVISO_THREADS`, else one per available core.
    fn default() -> Self {
        let threads = std::env::var("PROVISO_THREADS")
            .ok()
            .and_then(|t| t.parse::<usize>().ok())
            .filter(|&t| t > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        Self {
            n_ctx: 4096,
            n_threads: i32::try_from(threads).unwrap_or(2),
            n_batch: 512,
        }
    }
}

/// A loaded GGUF model.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    model: &'static LlamaModel,
}

impl Model {
    /// Loads a GGUF on the CPU.
    ///
    /// # Errors
    ///
    /// [`LlamaError::Load`] when llama.cpp cannot load the file.
    pub fn load(path: &Path) -> Result<Self, LlamaError> {
        let backend = backend()?;
        let params = LlamaModelParams::default().with_n_gpu_layers(0);
        let model =
            LlamaModel::load_from_file(backend, path, &params).map_err(|e| LlamaError::Load {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(Self {
            model: Box::leak(Box::new(model)),
        })
    }

    /// The model's tokenizer.
    #[must_use]
    pub fn tokenizer(&self) -> Arc<dyn Tokenizer> {
        Arc::new(LlamaTokenizer { model: self.model })
    }

    /// A fresh engine (one context, one sequence).
    ///
    /// # Errors
    ///
    /// [`LlamaError::Context`] when llama.cpp cannot allocate the context.
    pub fn engine(&self, options: RunOptions) -> Result<LlamaEngine, LlamaError> {
        let backend = backend()?;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.n_ctx))
            .with_n_batch(options.n_batch)
            .with_n_threads(options.n_threads)
            .with_n_threads_batch(options.n_threads);
        let context = {
            let _guard = CONTEXT_CREATION
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.model
                .new_context(backend, params)
                .map_err(|e| LlamaError::Context(e.to_string()))?
        };
        Ok(LlamaEngine {
            context,
            batch: LlamaBatch::new(options.n_batch as usize, 1),
            n_batch: options.n_batch as usize,
            n_past: 0,
            n_ctx: options.n_ctx as usize,
            last_index: 0,
            history: Vec::new(),
            threads: usize::try_from(options.n_threads).unwrap_or(1),
        })
    }

    /// The chat template stored in the GGUF, compiled with minijinja.
    ///
    /// # Errors
    ///
    /// [`LlamaError::Template`] if the GGUF has none or it does not compile.
    pub fn chat_template(&self) -> Result<ChatTemplate, LlamaError> {
        let source = self
            .model
            .meta_val_str("tokenizer.chat_template")
            .map_err(|_| TemplateError("the GGUF has no tokenizer.chat_template".into()))?;
        let vocab = self.model.vocab();
        let text = |t: LlamaToken| {
            if t.0 < 0 {
                String::new()
            } else {
                String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned()
            }
        };
        Ok(ChatTemplate::new(
            &source,
            &text(vocab.bos()),
            &text(vocab.eos()),
        )?)
    }

    /// A GGUF metadata value, as llama.cpp formats it.
    #[must_use]
    pub fn metadata(&self, key: &str) -> Option<String> {
        self.model.meta_val_str(key).ok()
    }

    /// The GBNF that llama.cpp's own `json_schema_to_grammar` derives from `schema`.
    ///
    /// # Errors
    ///
    /// [`LlamaError::Grammar`] if llama.cpp cannot convert the schema.
    pub fn json_schema_to_gbnf(schema: &serde_json::Value) -> Result<String, LlamaError> {
        llama_cpp_2::json_schema_to_grammar(&schema.to_string())
            .map_err(|e| LlamaError::Grammar(e.to_string()))
    }

    /// llama.cpp's own grammar sampler with greedy selection, for comparison benchmarks.
    ///
    /// # Errors
    ///
    /// [`LlamaError::Grammar`] if llama.cpp rejects the grammar.
    pub fn gbnf_sampler(&self, gbnf: &str) -> Result<GbnfSampler, LlamaError> {
        let grammar = LlamaSampler::grammar(self.model, gbnf, "root")
            .map_err(|e| LlamaError::Grammar(e.to_string()))?;
        Ok(GbnfSampler {
            sampler: LlamaSampler::chain_simple([grammar, LlamaSampler::greedy()]),
        })
    }
}

/// llama.cpp's GBNF sampler chain (grammar, then greedy).
#[derive(Debug)]
pub struct GbnfSampler {
    sampler: LlamaSampler,
}

impl GbnfSampler {
    /// Samples the next token from `engine`'s current logits under the grammar, and advances
    /// the grammar with it.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the grammar rejects the selected token.
    pub fn sample(&mut self, engine: &LlamaEngine) -> Result<TokenId, EngineError> {
        let mut candidates = engine.context.token_data_array_ith(engine.last_index);
        candidates.apply_sampler(&mut self.sampler);
        let token = candidates
            .selected_token()
            .ok_or_else(|| EngineError::Runtime("the grammar allows no token".into()))?;
        self.sampler
            .try_accept(token)
            .map_err(|e| EngineError::Runtime(e.to_string()))?;
        Ok(token_id(token))
    }
}

fn token_id(token: LlamaToken) -> TokenId {
    TokenId::try_from(token.0).unwrap_or(0)
}

fn llama_token(id: TokenId) -> LlamaToken {
    LlamaToken(i32::try_from(id).unwrap_or(i32::MAX))
}

/// llama.cpp's vocabulary and tokenizer.
#[derive(Debug)]
struct LlamaTokenizer {
    model: &'static LlamaModel,
}

impl Tokenizer for LlamaTokenizer {
    fn tokens(&self) -> Vec<TokenInfo> {
        let vocab = self.model.vocab();
        (0..self.model.n_vocab())
            .map(|i| {
                let token = LlamaToken(i);
                let special = vocab.is_control(token);
                TokenInfo {
                    bytes: vocab.token_to_piece(token, special, None),
                    special,
                }
            })
            .collect()
    }

    fn end_tokens(&self) -> Vec<TokenId> {
        let vocab = self.model.vocab();
        (0..self.model.n_vocab())
            .map(LlamaToken)
            .filter(|&t| vocab.is_eog(t))
            .map(token_id)
            .collect()
    }

    fn tokenize(&self, text: &[u8], special: bool) -> Vec<TokenId> {
        self.model
            .vocab()
            .tokenize(text, false, special)
            .into_iter()
            .map(token_id)
            .collect()
    }

    fn bos(&self) -> Option<TokenId> {
        let vocab = self.model.vocab();
        (vocab.should_add_bos() && vocab.bos().0 >= 0).then(|| token_id(vocab.bos()))
    }
}

/// The error of a decode that would overflow a sequence's context.
fn context_full(len: usize, capacity: usize) -> EngineError {
    EngineError::Runtime(format!("the context is full ({len} of {capacity} tokens)"))
}

/// One llama.cpp context running one sequence.
pub struct LlamaEngine {
    context: LlamaContext<'static>,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    n_past: usize,
    n_ctx: usize,
    last_index: i32,
    history: Vec<TokenId>,
    threads: usize,
}

impl std::fmt::Debug for LlamaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaEngine")
            .field("n_past", &self.n_past)
            .field("n_ctx", &self.n_ctx)
            .finish_non_exhaustive()
    }
}

impl LlamaEngine {
    /// Feeds one batch (at most `n_batch` tokens) in one forward pass, keeping the logits of
    /// its last position, or of every position when `every` is set.
    fn feed(&mut self, chunk: &[TokenId], every: bool) -> Result<(), EngineError> {
        self.batch.clear();
        for (j, &token) in chunk.iter().enumerate() {
            let position = i32::try_from(self.n_past + j)
                .map_err(|_| EngineError::Runtime("position overflow".into()))?;
            self.batch
                .add(
                    llama_token(token),
                    position,
                    &[0],
                    every || j + 1 == chunk.len(),
                )
                .map_err(|e| EngineError::Runtime(e.to_string()))?;
        }
        let lease = Cores::get().lease(self.threads);
        self.context
            .decode(&mut self.batch)
            .map_err(|e| EngineError::Runtime(e.to_string()))?;
        drop(lease);
        self.n_past += chunk.len();
        self.history.extend_from_slice(chunk);
        self.last_index = self.batch.n_tokens() - 1;
        Ok(())
    }
}

impl Engine for LlamaEngine {
    fn reset(&mut self) -> Result<(), EngineError> {
        self.context.clear_kv_cache();
        self.n_past = 0;
        self.history.clear();
        Ok(())
    }

    fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        if len >= self.n_past {
            return Ok(());
        }
        if len == 0 {
            return self.reset();
        }
        let from =
            u32::try_from(len).map_err(|_| EngineError::Runtime("position overflow".into()))?;
        let removed = self
            .context
            .clear_kv_cache_seq(Some(0), Some(from), None)
            .map_err(|e| EngineError::Runtime(e.to_string()))?;
        if !removed {
            // Some memory types cannot drop a suffix; starting over is always correct.
            return self.reset();
        }
        self.n_past = len;
        self.history.truncate(len);
        Ok(())
    }

    fn history(&self) -> &[TokenId] {
        &self.history
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Ok(());
        }
        if self.n_past + tokens.len() > self.n_ctx {
            return Err(context_full(self.n_past, self.n_ctx));
        }
        for chunk in tokens.chunks(self.n_batch) {
            self.feed(chunk, false)?;
        }
        Ok(())
    }

    fn logits(&self) -> &[f32] {
        if self.n_past == 0 {
            return &[];
        }
        self.context.get_logits_ith(self.last_index)
    }

    /// One forward pass per batch, with the logits of every position kept: scoring a text
    /// costs what feeding it does, not a pass per token.
    fn score(&mut self, tokens: &[TokenId]) -> Result<Vec<f32>, EngineError> {
        if self.n_past + tokens.len() > self.n_ctx {
            return Err(context_full(self.n_past, self.n_ctx));
        }
        let mut scores = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(self.n_batch) {
            scores.push(proviso_decode::log_probability(self.logits(), chunk[0])?);
            self.feed(chunk, true)?;
            for (j, &next) in chunk.iter().enumerate().skip(1) {
                let index = i32::try_from(j - 1)
                    .map_err(|_| EngineError::Runtime("position overflow".into()))?;
                scores.push(proviso_decode::log_probability(
                    self.context.get_logits_ith(index),
                    next,
                )?);
            }
        }
        Ok(scores)
    }

    fn len(&self) -> usize {
        self.n_past
    }

    fn capacity(&self) -> usize {
        self.n_ctx
    }
}
