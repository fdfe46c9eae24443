//! proviso's sampling loop.
//!
//! The loop reads the engine's logits, applies the llguidance mask, samples, and decides why
//! generation stopped. Two things keep the constraint off the critical path:
//!
//! * forced tokens (where the grammar allows exactly one continuation) are fed to the engine
//!   in one batch, not one forward pass each;
//! * the matcher consumes the sampled token and computes the next mask on a second thread
//!   while the engine runs its forward pass, so the mask is usually ready before the logits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::toktrie::SimpleVob;
use llguidance::Matcher;
use serde::Serialize;

use crate::constraint::Compiled;
use crate::engine::{Engine, EngineError, TokenId, Tokenizer};
use crate::sample::{Sampler, Sampling};
use crate::wrap::{Nesting, WrapUp};

/// Why generation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model emitted an end token (unconstrained).
    Stop,
    /// The token budget ran out; the output is incomplete.
    Length,
    /// The grammar reached a complete match (and either allowed nothing more, or the model
    /// chose to end).
    GrammarComplete,
    /// A stop sequence appeared; the output ends before it.
    StopSequence(String),
    /// The caller stopped the generation (its client went away, or a deadline passed).
    Cancelled,
    /// The output degenerated into repetition (the same run of tokens, or of tokens that
    /// differ only in their digits, over and over); the output is incomplete. Stopping here
    /// saves the rest of the token budget, which the loop would have burnt to `length`.
    Repetition,
}

impl StopReason {
    /// What the transport gate reads this stop as, typed: no string round trip between the
    /// decoder and the gate.
    #[must_use]
    pub fn finish(&self) -> proviso_core::Finish {
        match self {
            Self::Length => proviso_core::Finish::Length,
            Self::Cancelled => proviso_core::Finish::Cancelled,
            Self::Repetition => proviso_core::Finish::Repetition,
            Self::Stop | Self::GrammarComplete | Self::StopSequence(_) => {
                proviso_core::Finish::Stop
            }
        }
    }

    /// The OpenAI-style finish reason: `length` for truncation, `cancelled`, `repetition`,
    /// and `stop` otherwise.
    #[must_use]
    pub fn finish_reason(&self) -> &'static str {
        self.finish().as_str()
    }
}

/// Options for one generation.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GenerateOptions {
    /// Most tokens to generate (forced tokens count).
    pub max_tokens: usize,
    /// How to pick tokens.
    pub sampling: Sampling,
    /// Text that ends generation when it appears (not part of the output).
    pub stop: Vec<String>,
    /// Compute the next mask while the engine decodes. On by default.
    pub overlap_mask: bool,
    /// Texts the output must not contain, steered away from under a constraint: a token
    /// that would complete one (together with the tokens the grammar would then force) is
    /// masked, unless the grammar allows nothing else. The harness passes calls that
    /// already ran, so the model writes a new call or finishes instead.
    pub avoid: Vec<String>,
    /// When to stop on degenerate repetition (`None`: never).
    pub repetition: Option<RepetitionLimit>,
    /// Record each generated token's log-probability and this many most likely
    /// alternatives (`None`: record nothing). See [`TokenLogprob`].
    pub logprobs: Option<usize>,
    /// Steer a constrained output to close once it repeats or once only a reserve of the
    /// budget is left, instead of stopping it on repetition (`None`: never). Retries after a
    /// `repetition` stop turn it on ([`GenerateOptions::against_repetition`]).
    pub wrap_up: Option<WrapUp>,
}

proviso_macros::setters!(GenerateOptions {
    max_tokens: usize,
    sampling: Sampling,
    stop: Vec<String>,
    overlap_mask: bool,
    avoid: Vec<String>,
    repetition: Option<RepetitionLimit>,
    logprobs: Option<usize>,
    wrap_up: Option<WrapUp>,
});

impl GenerateOptions {
    /// These options for a retry after a constrained output was cut by the token limit: the
    /// same sampling, with the output steered to close once only its reserve of the budget
    /// is left ([`WrapUp::for_budget`]), so that the same budget does not cut it again.
    #[must_use]
    pub fn after_cut(mut self) -> Self {
        self.wrap_up = Some(WrapUp::for_budget(self.max_tokens));
        self
    }

    /// [`GenerateOptions::against_repetition`], with the retry also steered to close once it
    /// is as long as `looped`, the generation that stopped on repetition.
    #[must_use]
    pub fn after_loop(self, looped: &Generation) -> Self {
        let mut options = self.against_repetition();
        options.wrap_up = options.wrap_up.map(|w| w.after(looped.tokens.len()));
        options
    }

    /// These options for a retry after a `repetition` stop: penalties against repetition
    /// ([`Sampling::against_repetition`]), and the output steered to close if it loops again
    /// or nears the end of its budget ([`WrapUp`]), so that the retry ends complete rather
    /// than at the token limit.
    #[must_use]
    pub fn against_repetition(mut self) -> Self {
        self.sampling = self.sampling.against_repetition();
        self.wrap_up = Some(WrapUp::for_budget(self.max_tokens));
        self
    }
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            sampling: Sampling::greedy(),
            stop: Vec::new(),
            overlap_mask: true,
            avoid: Vec::new(),
            repetition: Some(RepetitionLimit::default()),
            logprobs: None,
            wrap_up: None,
        }
    }
}

/// When a run of output tokens counts as degenerate repetition.
///
/// Two shapes are caught at the end of the output: the same block of tokens repeated (a
/// key, a value, a whole call), and a block repeated with only its digits changed (`116,
/// 117, 118, …`, `"a_1": 1.2, "a_2": 1.2, …`). A legitimate short list passes; what a small
/// model writes when it loops until the token limit does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepetitionLimit {
    /// Longest repeated block looked for, in tokens.
    pub max_period: usize,
    /// Exact repeats: at least this many tokens of repetition …
    pub min_tokens: usize,
    /// … forming at least this many copies of the block.
    pub min_repeats: usize,
    /// Repeats that differ only in digits: at least this many tokens …
    pub min_tokens_digits: usize,
    /// … forming at least this many copies.
    pub min_repeats_digits: usize,
}

impl Default for RepetitionLimit {
    fn default() -> Self {
        Self {
            max_period: 64,
            min_tokens: 48,
            min_repeats: 4,
            min_tokens_digits: 96,
            min_repeats_digits: 12,
        }
    }
}

impl RepetitionLimit {
    /// Whether `tokens` ends in degenerate repetition; `digits` says which tokens are made
    /// of digits only (those compare equal to each other in the second test).
    #[must_use]
    pub fn is_degenerate(&self, tokens: &[TokenId], digits: impl Fn(TokenId) -> bool) -> bool {
        let exact = |a: TokenId, b: TokenId| a == b;
        let loose = |a: TokenId, b: TokenId| a == b || (digits(a) && digits(b));
        self.repeats(tokens, self.min_tokens, self.min_repeats, exact)
            || self.repeats(
                tokens,
                self.min_tokens_digits,
                self.min_repeats_digits,
                loose,
            )
    }

    /// Whether the output ends in a block of some period `p`, repeated to cover at least
    /// `min_tokens` and `min_repeats * p` tokens, under the equality `same`.
    fn repeats(
        &self,
        tokens: &[TokenId],
        min_tokens: usize,
        min_repeats: usize,
        same: impl Fn(TokenId, TokenId) -> bool,
    ) -> bool {
        let n = tokens.len();
        (1..=self.max_period).any(|p| {
            let need = min_tokens.max(min_repeats * p);
            if n < need {
                return false;
            }
            // The last `need` tokens equal the same tokens one period earlier.
            (n - need + p..n).all(|i| same(tokens[i], tokens[i - p]))
        })
    }
}

/// Timings and counts of one generation.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens whose computation was reused from the previous generation.
    pub cached_prompt_tokens: usize,
    /// Tokens generated, forced ones included.
    pub generated_tokens: usize,
    /// Tokens the grammar forced (fed without sampling).
    pub forced_tokens: usize,
    /// Forward passes after the prompt.
    pub forward_passes: usize,
    /// Time to compute each mask.
    #[serde(skip)]
    pub mask_times: Vec<Duration>,
    /// Mask time the sampler actually waited for, per sampled token (zero when the mask
    /// was ready before the logits).
    #[serde(skip)]
    pub exposed_mask_times: Vec<Duration>,
    /// Time of each forward pass after the prompt.
    #[serde(skip)]
    pub forward_times: Vec<Duration>,
    /// The generated token count at which the output began to be steered to close
    /// ([`GenerateOptions::wrap_up`]), if it was.
    pub wrap_up_at: Option<usize>,
    /// Prompt processing time.
    pub prefill: Duration,
    /// Total time, prompt included.
    pub total: Duration,
}

impl Stats {
    /// Mean of a list of durations, in microseconds.
    #[must_use]
    pub fn mean_us(times: &[Duration]) -> f64 {
        if times.is_empty() {
            return 0.0;
        }
        times.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e6 / times.len() as f64
    }

    /// A percentile (0-100) of a list of durations, in microseconds.
    #[must_use]
    pub fn percentile_us(times: &[Duration], p: f64) -> f64 {
        if times.is_empty() {
            return 0.0;
        }
        let mut sorted: Vec<Duration> = times.to_vec();
        sorted.sort();
        let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e6
    }

    /// The summary printed by `proviso generate --stats`.
    #[must_use]
    pub fn summary(&self) -> serde_json::Value {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let decode_time: Duration = self.forward_times.iter().sum();
        let per_token = if self.generated_tokens == 0 {
            0.0
        } else {
            self.generated_tokens as f64 / (self.total - self.prefill).as_secs_f64()
        };
        serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "forced_tokens": self.forced_tokens,
            "forward_passes": self.forward_passes,
            "wrap_up_at": self.wrap_up_at,
            "mask_mean_us": round(Self::mean_us(&self.mask_times)),
            "mask_p99_us": round(Self::percentile_us(&self.mask_times, 99.0)),
            "exposed_mask_mean_us": round(Self::mean_us(&self.exposed_mask_times)),
            "forward_mean_ms": round(Self::mean_us(&self.forward_times) / 1e3),
            "decode_ms": round(ms(decode_time)),
            "prefill_ms": round(ms(self.prefill)),
            "total_ms": round(ms(self.total)),
            "tokens_per_second": round(per_token),
        })
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The result of one generation.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Generation {
    /// The generated bytes (end tokens and stop sequences excluded).
    pub bytes: Vec<u8>,
    /// The generated tokens (end token excluded).
    pub tokens: Vec<TokenId>,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// Counts and timings.
    pub stats: Stats,
    /// One entry per generated token when [`GenerateOptions::logprobs`] asked for them.
    pub logprobs: Vec<TokenLogprob>,
}

/// A generated token's log-probability, with the most likely alternatives.
///
/// The distribution is the one the decoder chose from: the model's logits (before sampling
/// penalties and temperature) renormalised over the tokens the grammar allowed at that
/// step. A token the grammar forced therefore has log-probability 0 and is its own only
/// alternative; unconstrained text gets the model's own distribution.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TokenLogprob {
    /// The token.
    pub token: TokenId,
    /// Its log-probability.
    pub logprob: f32,
    /// The most likely allowed tokens with theirs, most likely first.
    pub top: Vec<(TokenId, f32)>,
}

/// The log-probabilities of `chosen` and of the `k` most likely tokens `allowed` admits,
/// under a softmax of `logits` restricted to them.
fn logprob(
    logits: &[f32],
    allowed: impl Fn(TokenId) -> bool,
    chosen: TokenId,
    k: usize,
) -> TokenLogprob {
    let admitted = || {
        logits.iter().enumerate().filter_map(|(i, &l)| {
            let t = TokenId::try_from(i).ok()?;
            (allowed(t) && l.is_finite()).then_some((t, l))
        })
    };
    let max = admitted().map(|(_, l)| l).fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = admitted().map(|(_, l)| (l - max).exp()).sum();
    let norm = max + sum.ln();
    let of = |t: TokenId| {
        logits
            .get(t as usize)
            .map_or(f32::NEG_INFINITY, |l| l - norm)
    };
    let mut top: Vec<(TokenId, f32)> = Vec::new();
    if k > 0 {
        let mut all: Vec<(TokenId, f32)> = admitted().collect();
        let k = k.min(all.len());
        if k > 0 {
            all.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            all.truncate(k);
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            top = all.into_iter().map(|(t, l)| (t, l - norm)).collect();
        }
    }
    TokenLogprob {
        token: chosen,
        logprob: of(chosen),
        top,
    }
}

impl Generation {
    /// The output as text (invalid UTF-8 replaced, which a JSON constraint cannot produce).
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Why generation failed (as opposed to stopping).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The prompt does not fit the context.
    #[error("the prompt has {prompt} tokens; the context holds {capacity}")]
    PromptTooLong {
        /// Prompt tokens.
        prompt: usize,
        /// Context size.
        capacity: usize,
    },
    /// The constraint failed while generating (a limit was hit, or no token is allowed).
    #[error("the constraint failed during generation: {0}")]
    Constraint(String),
}

/// What the matcher says about the next step.
enum Next {
    /// The grammar is complete and allows nothing more.
    Complete,
    /// These tokens are forced.
    Forced(Vec<TokenId>),
    /// Sample under this mask.
    Mask(SimpleVob),
}

/// Consumes `tokens` (if any) and works out the next step, timing the mask.
fn advance(
    matcher: &mut Matcher,
    tokens: &[TokenId],
    mask_times: &mut Vec<Duration>,
) -> Result<Next, GenerateError> {
    let fail = |m: &Matcher, what: &str| {
        GenerateError::Constraint(m.get_error().unwrap_or_else(|| what.to_owned()))
    };
    if !tokens.is_empty() {
        matcher
            .consume_tokens(tokens)
            .map_err(|e| GenerateError::Constraint(e.to_string()))?;
    }
    if matcher.is_stopped() {
        return Ok(Next::Complete);
    }
    let forced = matcher.compute_ff_tokens();
    if !forced.is_empty() {
        return Ok(Next::Forced(forced));
    }
    let start = Instant::now();
    let mask = matcher
        .compute_mask()
        .map_err(|_| fail(matcher, "no token is allowed"))?;
    mask_times.push(start.elapsed());
    Ok(Next::Mask(mask))
}

/// Generates with an engine and its tokenizer.
pub struct Generator<E> {
    engine: E,
    pieces: Vec<Vec<u8>>,
    /// Which tokens are made of ASCII digits only, for the repetition test.
    digits: Vec<bool>,
    ends: Vec<TokenId>,
}

/// Most candidate tokens rejected in one step for completing an avoided text; beyond it the
/// grammar's own best choice is taken and the gates judge the result.
const AVOID_TRIES: usize = 64;

impl<E> std::fmt::Debug for Generator<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("vocab", &self.pieces.len())
            .finish_non_exhaustive()
    }
}

impl<E: Engine> Generator<E> {
    /// A generator over `engine`, decoding text with `tokenizer`.
    #[must_use]
    pub fn new(engine: E, tokenizer: &Arc<dyn Tokenizer>) -> Self {
        let pieces: Vec<Vec<u8>> = tokenizer.tokens().into_iter().map(|t| t.bytes).collect();
        let digits = pieces
            .iter()
            .map(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit))
            .collect();
        Self {
            engine,
            pieces,
            digits,
            ends: tokenizer.end_tokens(),
        }
    }

    /// Samples under `mask`, passing over a token that would complete one of `avoid` (with
    /// the bytes the grammar would force after it). When every allowed token does, or after
    /// [`AVOID_TRIES`] candidates, the best allowed token is taken anyway: steering never
    /// makes a constrained generation fail.
    fn sample_avoiding(
        &self,
        sampler: &mut Sampler,
        mask: &SimpleVob,
        bytes: &[u8],
        mut matcher: Option<&mut Matcher>,
        avoid: &[String],
        closing: Option<Nesting>,
    ) -> Result<TokenId, GenerateError> {
        let logits = self.engine.logits();
        // While an output is steered to close, only the allowed tokens that leave it least
        // open are candidates (closing the most strings and brackets, else opening nothing,
        // else opening a string); the grammar's mask still decides what is allowed at all.
        let progress = |t: TokenId| {
            closing.map(|nesting| {
                nesting.openness_after(self.pieces.get(t as usize).map_or(&[][..], Vec::as_slice))
            })
        };
        let best = closing.and_then(|_| {
            (0..self.pieces.len())
                .filter_map(|i| TokenId::try_from(i).ok())
                .filter(|&t| mask.is_allowed(t) && !self.ends.contains(&t))
                .filter_map(progress)
                .min()
        });
        let preferred =
            |t: TokenId| best.is_none() || self.ends.contains(&t) || progress(t) == best;
        let mut passed_over: Vec<TokenId> = Vec::new();
        loop {
            let token = sampler.sample(logits, |t| {
                mask.is_allowed(t) && preferred(t) && !passed_over.contains(&t)
            });
            let Some(token) = token else {
                break;
            };
            if avoid.is_empty()
                || self.ends.contains(&token)
                || !self.completes_avoided(bytes, token, matcher.as_deref_mut(), avoid)?
            {
                return Ok(token);
            }
            passed_over.push(token);
            if passed_over.len() >= AVOID_TRIES {
                break;
            }
        }
        sampler
            .sample(logits, |t| mask.is_allowed(t))
            .ok_or_else(|| GenerateError::Constraint("no token is allowed".into()))
    }

    /// Whether appending `token` to `bytes` completes one of `avoid`, counting the bytes the
    /// grammar would force right after it.
    ///
    /// # Errors
    ///
    /// [`GenerateError::Constraint`] when the matcher cannot be put back after the probe: it
    /// would otherwise be one token ahead of the text.
    fn completes_avoided(
        &self,
        bytes: &[u8],
        token: TokenId,
        matcher: Option<&mut Matcher>,
        avoid: &[String],
    ) -> Result<bool, GenerateError> {
        let piece = self
            .pieces
            .get(token as usize)
            .map_or(&[][..], Vec::as_slice);
        // Only the tail an avoided text could still end in matters; the rest is not copied.
        let keep = avoid.iter().map(String::len).max().unwrap_or(0);
        let mut text = bytes[bytes.len().saturating_sub(keep)..].to_vec();
        text.extend_from_slice(piece);
        let tail_contains = |text: &[u8], added: usize, a: &[u8]| {
            let from = text.len().saturating_sub(added + a.len());
            text[from..].windows(a.len()).any(|w| w == a)
        };
        if avoid
            .iter()
            .filter(|a| !a.is_empty())
            .any(|a| tail_contains(&text, piece.len(), a.as_bytes()))
        {
            return Ok(true);
        }
        // Only when the text now ends partway into an avoided text can forced bytes complete
        // it; the matcher is asked for them and then put back as it was.
        let partway = avoid.iter().filter(|a| a.len() > 1).any(|a| {
            let a = a.as_bytes();
            (1..a.len()).any(|k| text.len() >= k && text.ends_with(&a[..k]))
        });
        let Some(matcher) = matcher.filter(|_| partway) else {
            return Ok(false);
        };
        if matcher.try_consume_tokens(&[token]).ok() != Some(1) {
            return Ok(false);
        }
        let forced = matcher.compute_ff_bytes();
        matcher.rollback(1).map_err(|e| {
            GenerateError::Constraint(format!("the grammar could not undo a probed token: {e}"))
        })?;
        if forced.is_empty() {
            return Ok(false);
        }
        let added = piece.len() + forced.len();
        text.extend_from_slice(&forced);
        Ok(avoid
            .iter()
            .filter(|a| !a.is_empty())
            .any(|a| tail_contains(&text, added, a.as_bytes())))
    }

    /// The bytes of `token` (empty for an id outside the vocabulary).
    #[must_use]
    pub fn piece(&self, token: TokenId) -> &[u8] {
        self.pieces.get(token as usize).map_or(&[], Vec::as_slice)
    }

    /// The engine.
    pub fn engine_mut(&mut self) -> &mut E {
        &mut self.engine
    }

    /// Generates a continuation of `prompt`, under `constraint` if given.
    ///
    /// # Errors
    ///
    /// [`GenerateError`] when the engine fails, the prompt does not fit, or the constraint
    /// fails mid-way (a compile limit, or a state with no allowed token).
    pub fn generate(
        &mut self,
        prompt: &[TokenId],
        constraint: Option<&Compiled>,
        options: &GenerateOptions,
    ) -> Result<Generation, GenerateError> {
        self.generate_streaming(prompt, constraint, options, &mut |_| true)
    }

    /// As [`Generator::generate`], regenerating from the same prompt while the output does
    /// not end, at most `attempts` generations in all: after a `repetition` stop with
    /// penalties against repetition and the retry steered to close
    /// ([`GenerateOptions::after_loop`]); after a constrained output cut by the token limit,
    /// steered to close within the same budget ([`GenerateOptions::after_cut`]).
    /// `on_attempt` sees each generation. The last generation is returned, whatever it
    /// ended with.
    ///
    /// # Errors
    ///
    /// As [`Generator::generate`].
    pub fn generate_retrying(
        &mut self,
        prompt: &[TokenId],
        constraint: Option<&Compiled>,
        options: &GenerateOptions,
        attempts: usize,
        on_attempt: &mut dyn FnMut(usize, &Generation),
    ) -> Result<Generation, GenerateError> {
        let mut options = options.clone();
        let mut attempt = 1;
        loop {
            let generation = self.generate(prompt, constraint, &options)?;
            on_attempt(attempt, &generation);
            if attempt >= attempts {
                return Ok(generation);
            }
            options = match generation.stop_reason {
                StopReason::Repetition => options.after_loop(&generation),
                StopReason::Length if constraint.is_some() && options.wrap_up.is_none() => {
                    options.after_cut()
                }
                _ => return Ok(generation),
            };
            attempt += 1;
        }
    }

    /// As [`Generator::generate`], handing the text to `on_text` as it is produced. Bytes
    /// that could still turn out to begin a stop sequence are held back until they cannot;
    /// the pieces concatenate to exactly the final output (a multi-byte character may be
    /// split between two pieces). When `on_text` returns `false`, generation ends with
    /// [`StopReason::Cancelled`].
    ///
    /// # Errors
    ///
    /// As [`Generator::generate`].
    pub fn generate_streaming(
        &mut self,
        prompt: &[TokenId],
        constraint: Option<&Compiled>,
        options: &GenerateOptions,
        on_text: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Generation, GenerateError> {
        // A batching engine waits for this sequence between acquire and release; every path
        // out of the generation releases it.
        self.engine.acquire()?;
        let generation = self.generate_acquired(prompt, constraint, options, on_text);
        self.engine.release();
        generation
    }

    fn generate_acquired(
        &mut self,
        prompt: &[TokenId],
        constraint: Option<&Compiled>,
        options: &GenerateOptions,
        on_text: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<Generation, GenerateError> {
        let hold_back = options
            .stop
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(1)
            .saturating_sub(1);
        let mut emitted = 0_usize;
        let start = Instant::now();
        let capacity = self.engine.capacity();
        if prompt.len() >= capacity {
            return Err(GenerateError::PromptTooLong {
                prompt: prompt.len(),
                capacity,
            });
        }
        let mut stats = Stats {
            prompt_tokens: prompt.len(),
            ..Stats::default()
        };
        let mut sampler = Sampler::new(options.sampling);
        let mut matcher = constraint.map(Compiled::matcher);
        let mut out = Generation {
            bytes: Vec::new(),
            tokens: Vec::new(),
            stop_reason: StopReason::Length,
            stats: Stats::default(),
            logprobs: Vec::new(),
        };
        // The context keeps the longest prefix this prompt shares with what it holds (an
        // agent's next step repeats the whole conversation so far); at least one token is fed
        // again, because the logits after the prompt are needed.
        let shared = self
            .engine
            .history()
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        if shared == 0 {
            self.engine.reset()?;
        } else {
            self.engine.truncate(shared)?;
        }
        if self.engine.len() != shared {
            // The engine could not keep the prefix: start over.
            self.engine.reset()?;
        }
        stats.cached_prompt_tokens = self.engine.len();
        // Prefill, overlapped with the first mask.
        let (prefill, mut next) = self.step(
            &prompt[self.engine.len()..],
            false,
            matcher.as_mut(),
            options,
            &mut stats,
        )?;
        stats.prefill = prefill;
        let budget = options.max_tokens.min(capacity - prompt.len());
        // Where the output stands in its strings and brackets, for steering it to close.
        let mut nesting = Nesting::default();
        let stop_reason = loop {
            if out.tokens.len() >= budget {
                break StopReason::Length;
            }
            let mut sampled = false;
            let chosen: Vec<TokenId> = match next {
                Some(Next::Complete) => break StopReason::GrammarComplete,
                Some(Next::Forced(forced)) => {
                    let room = budget - out.tokens.len();
                    let take = forced.len().min(room);
                    stats.forced_tokens += take;
                    forced[..take].to_vec()
                }
                Some(Next::Mask(mask)) => {
                    if let Some(wrap_up) = &options.wrap_up {
                        if stats.wrap_up_at.is_none()
                            && wrap_up.starts(out.tokens.len(), budget - out.tokens.len())
                        {
                            stats.wrap_up_at = Some(out.tokens.len());
                        }
                    }
                    let closing = stats.wrap_up_at.is_some().then_some(nesting);
                    let token = self.sample_avoiding(
                        &mut sampler,
                        &mask,
                        &out.bytes,
                        matcher.as_mut(),
                        &options.avoid,
                        closing,
                    )?;
                    if self.ends.contains(&token) {
                        break StopReason::GrammarComplete;
                    }
                    if let Some(k) = options.logprobs {
                        out.logprobs.push(logprob(
                            self.engine.logits(),
                            |t| mask.is_allowed(t),
                            token,
                            k,
                        ));
                    }
                    sampled = true;
                    vec![token]
                }
                None => {
                    let token =
                        sampler
                            .sample(self.engine.logits(), |_| true)
                            .ok_or_else(|| {
                                GenerateError::Engine(EngineError::Runtime(
                                    "the logits are empty".into(),
                                ))
                            })?;
                    if self.ends.contains(&token) {
                        break StopReason::Stop;
                    }
                    if let Some(k) = options.logprobs {
                        out.logprobs
                            .push(logprob(self.engine.logits(), |_| true, token, k));
                    }
                    sampled = true;
                    vec![token]
                }
            };
            if options.logprobs.is_some() && !sampled {
                // Forced by the grammar: certain under the constraint.
                out.logprobs
                    .extend(chosen.iter().map(|&token| TokenLogprob {
                        token,
                        logprob: 0.0,
                        top: vec![(token, 0.0)],
                    }));
            }
            for &token in &chosen {
                sampler.observe(token);
                out.tokens.push(token);
                if let Some(piece) = self.pieces.get(token as usize) {
                    out.bytes.extend_from_slice(piece);
                    nesting.feed(piece);
                }
            }
            let added: usize = chosen
                .iter()
                .filter_map(|&t| self.pieces.get(t as usize).map(Vec::len))
                .sum();
            if let Some((at, stop)) = find_stop(&out.bytes, added, &options.stop) {
                out.bytes.truncate(at);
                break StopReason::StopSequence(stop);
            }
            let safe = out.bytes.len().saturating_sub(hold_back);
            if safe > emitted {
                if !on_text(&out.bytes[emitted..safe]) {
                    emitted = safe;
                    break StopReason::Cancelled;
                }
                emitted = safe;
            }
            // Only a chosen token can start or continue a loop; forced runs are the
            // grammar's, and checking them would only cost time.
            if sampled {
                if let Some(limit) = &options.repetition {
                    if stats.wrap_up_at.is_none()
                        && limit.is_degenerate(&out.tokens, |t| {
                            self.digits.get(t as usize).copied().unwrap_or(false)
                        })
                    {
                        // A constrained output that may be steered to its end is closed
                        // from here instead of stopped: the grammar still allows only valid
                        // endings, and the budget bounds the rest.
                        if options.wrap_up.is_some() && matcher.is_some() {
                            stats.wrap_up_at = Some(out.tokens.len());
                        } else {
                            break StopReason::Repetition;
                        }
                    }
                }
            }
            if out.tokens.len() >= budget {
                break StopReason::Length;
            }
            let (elapsed, after) =
                self.step(&chosen, true, matcher.as_mut(), options, &mut stats)?;
            stats.forward_times.push(elapsed);
            stats.forward_passes += 1;
            next = after;
        };
        if out.bytes.len() > emitted && stop_reason != StopReason::Cancelled {
            on_text(&out.bytes[emitted..]);
        }
        stats.generated_tokens = out.tokens.len();
        stats.total = start.elapsed();
        out.stop_reason = stop_reason;
        out.stats = stats;
        Ok(out)
    }

    /// Feeds `tokens` to the engine and, concurrently, to the matcher; returns the forward
    /// time and the matcher's next step. The time the sampler would wait for the mask after
    /// the forward pass is recorded as exposed mask time.
    fn step(
        &mut self,
        tokens: &[TokenId],
        generated: bool,
        matcher: Option<&mut Matcher>,
        options: &GenerateOptions,
        stats: &mut Stats,
    ) -> Result<(Duration, Option<Next>), GenerateError> {
        let Some(matcher) = matcher else {
            let start = Instant::now();
            self.engine.decode(tokens)?;
            return Ok((start.elapsed(), None));
        };
        // The prompt is not part of the constrained output: the matcher sees only
        // generated tokens.
        let feed: &[TokenId] = if generated { tokens } else { &[] };
        let mut mask_times = Vec::new();
        if options.overlap_mask {
            let engine = &mut self.engine;
            let (forward, next, exposed) = std::thread::scope(|scope| {
                let worker = scope.spawn(|| advance(matcher, feed, &mut mask_times));
                let start = Instant::now();
                let forward = engine.decode(tokens);
                let elapsed = start.elapsed();
                let waited = Instant::now();
                let next = worker.join().unwrap_or_else(|_| {
                    Err(GenerateError::Engine(EngineError::Runtime(
                        "the mask thread panicked".into(),
                    )))
                });
                (forward.map(|()| elapsed), next, waited.elapsed())
            });
            let elapsed = forward?;
            let next = next?;
            if matches!(next, Next::Mask(_)) {
                stats.exposed_mask_times.push(exposed);
            }
            stats.mask_times.extend(mask_times);
            Ok((elapsed, Some(next)))
        } else {
            let start = Instant::now();
            self.engine.decode(tokens)?;
            let elapsed = start.elapsed();
            let waited = Instant::now();
            let next = advance(matcher, feed, &mut mask_times)?;
            if matches!(next, Next::Mask(_)) {
                stats.exposed_mask_times.push(waited.elapsed());
            }
            stats.mask_times.extend(mask_times);
            Ok((elapsed, Some(next)))
        }
    }
}

/// The earliest stop sequence that ends within the last `added` bytes, as (offset,
/// sequence). Earlier text was already checked.
fn find_stop(bytes: &[u8], added: usize, stops: &[String]) -> Option<(usize, String)> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let from = bytes.len().saturating_sub(added + s.len() - 1);
            bytes[from..]
                .windows(s.len())
                .position(|w| w == s.as_bytes())
                .map(|at| (from + at, s.clone()))
        })
        .min_by_key(|(at, _)| *at)
}

#[cfg(test)]
mod tests {
    use super::{find_stop, logprob, RepetitionLimit};

    #[test]
    fn logprobs_are_renormalised_over_the_allowed_tokens() {
        let logits = [1.0_f32, 3.0, 2.0, 0.5];
        let all = logprob(&logits, |_| true, 1, 2);
        let total: f32 = logits.iter().map(|l| (l - 3.0).exp()).sum();
        assert!((all.logprob - (-total.ln())).abs() < 1e-6);
        assert_eq!(all.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2]);
        // Token 1 masked out: the rest share the probability.
        let masked = logprob(&logits, |t| t != 1, 2, 5);
        let sum: f32 = masked.top.iter().map(|t| t.1.exp()).sum();
        assert!((sum - 1.0).abs() < 1e-5, "{masked:?}");
        assert_eq!(masked.top.len(), 3);
        assert_eq!(masked.top[0].0, 2);
        assert!((masked.logprob - masked.top[0].1).abs() < 1e-6);
        assert!(logprob(&logits, |t| t == 3, 3, 0).logprob.abs() < 1e-6);
    }

    #[test]
    fn repetition_is_caught_exactly_and_modulo_digits_but_short_lists_pass() {
        let limit = RepetitionLimit::default();
        let digit = |t: u32| t < 10;
        // A key repeated: a 3-token block, 16 times.
        let looped: Vec<u32> = (0..48).map(|i| 100 + i % 3).collect();
        assert!(limit.is_degenerate(&looped, digit));
        assert!(!limit.is_degenerate(&looped[..40], digit));
        // A clause of 18 tokens written four times over is a loop; written twice it may be
        // a deliberate echo.
        let clause: Vec<u32> = (0..72).map(|i| 300 + i % 18).collect();
        assert!(limit.is_degenerate(&clause, digit));
        assert!(!limit.is_degenerate(&clause[..36], digit));
        // A count `1 1 6 , 1 1 7 , …`: only the digits change.
        let counting: Vec<u32> = (0..30)
            .flat_map(|i| [1, (i / 10) % 10, i % 10, 200])
            .collect();
        assert!(limit.is_degenerate(&counting, digit));
        // A short list of numbers is legitimate.
        let short: Vec<u32> = (0..8).flat_map(|i| [i % 10, 200]).collect();
        assert!(!limit.is_degenerate(&short, digit));
        // Varied text is never degenerate.
        let varied: Vec<u32> = (0..300).map(|i| (i * 7919) % 1000 + 10).collect();
        assert!(!limit.is_degenerate(&varied, digit));
    }

    #[test]
    fn the_typed_finish_and_the_wire_string_agree() {
        use super::StopReason;
        for stop in [
            StopReason::Stop,
            StopReason::Length,
            StopReason::GrammarComplete,
            StopReason::StopSequence("END".into()),
            StopReason::Cancelled,
            StopReason::Repetition,
        ] {
            assert_eq!(
                stop.finish(),
                proviso_core::Finish::read(Some(stop.finish_reason())),
                "{stop:?}"
            );
        }
    }

    #[test]
    fn stop_sequences_are_found_across_token_boundaries() {
        let stops = vec!["END".to_owned(), "\n\n".to_owned()];
        assert_eq!(find_stop(b"abc EN", 2, &stops), None);
        assert_eq!(
            find_stop(b"abc END", 1, &stops),
            Some((4, "END".to_owned()))
        );
        assert_eq!(
            find_stop(b"a\n\nb END", 7, &stops),
            Some((1, "\n\n".to_owned()))
        );
    }
}
