//! The model's own tokenizer, wrapped as llguidance's `TokenizerEnv`.

use std::sync::Arc;

use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};

use crate::engine::{TokenId, Tokenizer};

/// llguidance's view of a model tokenizer: the token trie (bytes of every token, control
/// tokens behind the `0xFF` marker so grammar text can never produce them) and the model's
/// real tokenize function, so forced tokens are the model's canonical tokens.
pub(crate) struct ModelTokEnv {
    trie: TokTrie,
    tokenizer: Arc<dyn Tokenizer>,
    canonical: bool,
}

impl std::fmt::Debug for ModelTokEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTokEnv")
            .field("vocab_size", &self.trie.vocab_size())
            .finish_non_exhaustive()
    }
}

impl ModelTokEnv {
    /// Builds the environment from a tokenizer.
    ///
    /// # Panics
    ///
    /// Never for a tokenizer with at least one end token; a vocabulary without one is
    /// given token 0 as its end (and cannot end a constrained generation early).
    #[must_use]
    pub(crate) fn canonical(tokenizer: Arc<dyn Tokenizer>) -> TokEnv {
        Self::build(tokenizer, true)
    }

    /// Like [`ModelTokEnv::canonical`], but declaring the tokenization non-canonical: llguidance
    /// then forces no tokens and its masks allow every tokenization of the allowed bytes.
    /// Used to walk arbitrary token sequences (benchmarks), never for generation.
    #[must_use]
    pub(crate) fn any_tokenization(tokenizer: Arc<dyn Tokenizer>) -> TokEnv {
        Self::build(tokenizer, false)
    }

    fn build(tokenizer: Arc<dyn Tokenizer>, canonical: bool) -> TokEnv {
        let tokens = tokenizer.tokens();
        let words: Vec<Vec<u8>> = tokens
            .iter()
            .map(|t| {
                if t.special {
                    let mut w = Vec::with_capacity(t.bytes.len() + 1);
                    w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                    w.extend_from_slice(&t.bytes);
                    w
                } else {
                    t.bytes.clone()
                }
            })
            .collect();
        let ends = tokenizer.end_tokens();
        let vocab_size = u32::try_from(words.len()).unwrap_or(u32::MAX);
        let mut info = TokRxInfo::new(vocab_size, ends.first().copied().unwrap_or(0));
        info.tok_bos = tokenizer.bos();
        let mut trie = TokTrie::from(&info, &words);
        if !ends.is_empty() {
            trie = trie.with_eos_tokens(&ends);
        }
        Arc::new(Self {
            trie,
            tokenizer,
            canonical,
        })
    }
}

impl TokenizerEnv for ModelTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.tokenizer.tokenize(s, false)
    }

    fn tokenize_bytes_special(&self, s: &[u8]) -> Vec<TokenId> {
        self.tokenizer.tokenize(s, true)
    }

    /// The model's own tokenizer is the canonical tokenization, so llguidance may force tokens.
    fn tokenize_is_canonical(&self) -> bool {
        self.canonical
    }
}
