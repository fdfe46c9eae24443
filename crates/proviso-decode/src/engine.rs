//! The engine seam: the least a language-model runtime must offer the constrained decoder.
//!
//! The decoder owns the sampling loop; an engine only turns tokens into logits. Keeping the
//! trait this small is what lets another runtime be added without touching the constraint
//! code.

/// A token id, as llguidance and llama.cpp number them.
pub type TokenId = u32;

/// A failure of the engine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The runtime failed, or the sequence's context is full.
    #[error("engine error: {0}")]
    Runtime(String),
    /// Memory shared between sequences (a batching runtime's KV cache) has no room for this
    /// sequence now; it may have room later, so a server answers 503 rather than 500.
    #[error("the engine's memory is exhausted: {0}")]
    Exhausted(String),
}

/// One vocabulary entry, as the constraint needs to see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    /// The bytes this token stands for. For control tokens, their text (e.g. `<|im_end|>`).
    pub bytes: Vec<u8>,
    /// Whether this is a control/special token, which grammar text can never produce.
    pub special: bool,
}

/// A model's vocabulary and tokenizer.
pub trait Tokenizer: Send + Sync + std::fmt::Debug {
    /// Every token, indexed by id. Its length is the width of the logits.
    fn tokens(&self) -> Vec<TokenInfo>;
    /// Tokens that end generation (end of sequence, end of turn).
    fn end_tokens(&self) -> Vec<TokenId>;
    /// The model's own tokenization of `text`. `special` lets `<|im_start|>`-style text become
    /// its control token (for rendered chat prompts); otherwise it stays plain text.
    fn tokenize(&self, text: &[u8], special: bool) -> Vec<TokenId>;
    /// Whether a beginning-of-sequence token must be prepended to a prompt, and which.
    fn bos(&self) -> Option<TokenId>;
}

/// A language-model runtime with one sequence of context.
pub trait Engine: Send {
    /// Called before a generation uses the context. A batching runtime may evict the cache
    /// of a sequence that is not generating to make room for others; this is where the
    /// sequence learns of it (its history is then empty). The default does nothing.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the runtime has stopped.
    fn acquire(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Called when a generation ends: no decode follows soon, so a batching runtime neither
    /// waits for this sequence before its next forward pass nor keeps its cache from being
    /// evicted. The default does nothing.
    fn release(&mut self) {}
    /// Forgets every token fed so far.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the runtime fails.
    fn reset(&mut self) -> Result<(), EngineError>;
    /// Keeps the first `len` tokens of the context and forgets the rest, so that a prompt
    /// sharing a prefix with the previous one is not computed again. The default forgets
    /// everything, which is always correct.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the runtime fails.
    fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        let _ = len;
        self.reset()
    }
    /// The tokens in the context, in order (empty for an engine that does not keep them,
    /// which then never reuses a prefix).
    fn history(&self) -> &[TokenId] {
        &[]
    }
    /// Appends `tokens` to the context in one forward pass and computes the logits that
    /// follow the last of them.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the runtime fails or the context is full.
    fn decode(&mut self, tokens: &[TokenId]) -> Result<(), EngineError>;
    /// The logits after the last [`Engine::decode`], one per token id.
    fn logits(&self) -> &[f32];
    /// Appends `tokens` to the context and returns the log-probability the model gave each
    /// of them where it stood: how likely the model finds a text after the context. The
    /// context must not be empty (the first token is scored by the logits before it). The
    /// default feeds one token at a time; a runtime that computes the logits of every
    /// position in one pass overrides it.
    ///
    /// # Errors
    ///
    /// [`EngineError`] if the runtime fails, the context is full or empty.
    fn score(&mut self, tokens: &[TokenId]) -> Result<Vec<f32>, EngineError> {
        let mut scores = Vec::with_capacity(tokens.len());
        for &token in tokens {
            scores.push(log_probability(self.logits(), token)?);
            self.decode(&[token])?;
        }
        Ok(scores)
    }
    /// How many tokens the context holds.
    fn len(&self) -> usize;
    /// Whether the context holds no token.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The most tokens the context can hold.
    fn capacity(&self) -> usize;
}

/// A boxed engine is an engine, so one worker type can hold either a context of its own or
/// a slot of a batched one.
impl<E: Engine + ?Sized> Engine for Box<E> {
    fn acquire(&mut self) -> Result<(), EngineError> {
        (**self).acquire()
    }
    fn release(&mut self) {
        (**self).release();
    }
    fn reset(&mut self) -> Result<(), EngineError> {
        (**self).reset()
    }
    fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        (**self).truncate(len)
    }
    fn history(&self) -> &[TokenId] {
        (**self).history()
    }
    fn decode(&mut self, tokens: &[TokenId]) -> Result<(), EngineError> {
        (**self).decode(tokens)
    }
    fn logits(&self) -> &[f32] {
        (**self).logits()
    }
    fn score(&mut self, tokens: &[TokenId]) -> Result<Vec<f32>, EngineError> {
        (**self).score(tokens)
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn capacity(&self) -> usize {
        (**self).capacity()
    }
}

/// The log-probability of `token` under `logits` (a log-softmax at one index).
///
/// # Errors
///
/// [`EngineError::Runtime`] when there are no logits (an empty context) or the token is out
/// of the vocabulary.
pub fn log_probability(logits: &[f32], token: TokenId) -> Result<f32, EngineError> {
    let Some(&at) = logits.get(token as usize) else {
        return Err(EngineError::Runtime(format!(
            "no logit for token {token} (the context is empty or the token is unknown)"
        )));
    };
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    Ok(at - max - sum.ln())
}
