//! A byte-level tokenizer and a scripted engine, so that the sampling loop, its constraint,
//! stops, wrap-up and forced tokens can be tested in milliseconds and without a model.
//!
//! The [`ByteTokenizer`] has one token per byte (token `b` is the byte `b`) and one end
//! token, [`ByteTokenizer::END`]; every text has exactly one tokenization, so it is
//! canonical and llguidance may force tokens with it, as with a real model. A
//! [`ScriptedEngine`] computes its logits from the context with a function the test gives;
//! [`ScriptedEngine::writing`] is a model that wants to write one text.

use std::sync::Arc;

use crate::engine::{Engine, EngineError, TokenId, TokenInfo, Tokenizer};

/// One token per byte, and an end token (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteTokenizer;

impl ByteTokenizer {
    /// The end token: the one token that is not a byte.
    pub const END: TokenId = 256;
    /// How many tokens the vocabulary has.
    pub const VOCAB: usize = 257;

    /// The tokenizer, shared as the generator and the constrainer take it.
    #[must_use]
    pub fn shared() -> Arc<dyn Tokenizer> {
        Arc::new(Self)
    }
}

impl Tokenizer for ByteTokenizer {
    fn tokens(&self) -> Vec<TokenInfo> {
        (0..=255u8)
            .map(|b| TokenInfo {
                bytes: vec![b],
                special: false,
            })
            .chain(std::iter::once(TokenInfo {
                bytes: b"<|end|>".to_vec(),
                special: true,
            }))
            .collect()
    }

    fn end_tokens(&self) -> Vec<TokenId> {
        vec![Self::END]
    }

    fn tokenize(&self, text: &[u8], _special: bool) -> Vec<TokenId> {
        text.iter().map(|&b| TokenId::from(b)).collect()
    }

    fn bos(&self) -> Option<TokenId> {
        None
    }
}

/// A function from the context (every token fed so far) to the logits that follow it.
pub type Script = Box<dyn Fn(&[TokenId]) -> Vec<f32> + Send>;

/// An engine whose logits a test scripts (see the module documentation). It keeps its
/// history, so prefix reuse works as with a real runtime, and counts what it was fed.
pub struct ScriptedEngine {
    script: Script,
    history: Vec<TokenId>,
    logits: Vec<f32>,
    capacity: usize,
    fed: usize,
    decodes: usize,
}

impl std::fmt::Debug for ScriptedEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedEngine")
            .field("len", &self.history.len())
            .field("fed", &self.fed)
            .finish_non_exhaustive()
    }
}

/// The logit of the token a script prefers; every other token gets less (see
/// [`ScriptedEngine::writing`]).
const PREFERRED: f32 = 10.0;

impl ScriptedEngine {
    /// An engine over `script`, with room for `capacity` tokens.
    #[must_use]
    pub fn new(capacity: usize, script: Script) -> Self {
        Self {
            script,
            history: Vec::new(),
            logits: Vec::new(),
            capacity,
            fed: 0,
            decodes: 0,
        }
    }

    /// A model of the [`ByteTokenizer`] that wants to write `text` and then end: after a
    /// context that ends with the first `k` bytes of `text` (the longest such `k`), it
    /// prefers byte `k`, or the end token once the whole text is written. Where a grammar
    /// forbids what it prefers, the next best are the end token, then bytes in increasing
    /// order, so a test can tell what a constrained output falls back to.
    #[must_use]
    pub fn writing(text: impl Into<Vec<u8>>) -> Self {
        let text: Vec<u8> = text.into();
        Self::new(
            4096,
            Box::new(move |context| {
                let written = (0..=text.len().min(context.len()))
                    .rev()
                    .find(|&k| {
                        context[context.len() - k..]
                            .iter()
                            .zip(&text[..k])
                            .all(|(&t, &b)| t == TokenId::from(b))
                    })
                    .unwrap_or(0);
                let preferred = text
                    .get(written)
                    .map_or(ByteTokenizer::END, |&b| TokenId::from(b));
                (0..ByteTokenizer::VOCAB)
                    .map(|i| {
                        let id = TokenId::try_from(i).unwrap_or(TokenId::MAX);
                        if id == preferred {
                            PREFERRED
                        } else if id == ByteTokenizer::END {
                            1.0
                        } else {
                            // Lower bytes first, all well below the preferred one.
                            -(i as f32) / 1000.0
                        }
                    })
                    .collect()
            }),
        )
    }

    /// How many tokens were fed in all (a reused prefix is not fed again).
    #[must_use]
    pub fn fed(&self) -> usize {
        self.fed
    }

    /// How many forward passes ran.
    #[must_use]
    pub fn decodes(&self) -> usize {
        self.decodes
    }
}

impl Engine for ScriptedEngine {
    fn reset(&mut self) -> Result<(), EngineError> {
        self.history.clear();
        self.logits.clear();
        Ok(())
    }

    fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        self.history.truncate(len);
        Ok(())
    }

    fn history(&self) -> &[TokenId] {
        &self.history
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<(), EngineError> {
        if self.history.len() + tokens.len() > self.capacity {
            return Err(EngineError::Runtime("the context is full".into()));
        }
        self.history.extend_from_slice(tokens);
        self.fed += tokens.len();
        self.decodes += 1;
        self.logits = (self.script)(&self.history);
        Ok(())
    }

    fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn len(&self) -> usize {
        self.history.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
