//! Choosing the next token from logits and a mask: greedy, or seeded temperature / top-k /
//! top-p. The random source is a small, fixed algorithm (SplitMix64) so that a seed gives the
//! same output on every machine and every build.
//!
//! Penalties against repetition (frequency, presence, multiplicative repetition and DRY) are
//! applied to the logits of the tokens the mask allows, before the choice: a penalty can
//! make the model pick another allowed token, never a token the grammar forbids.

use std::collections::HashMap;

use crate::engine::TokenId;

/// A DRY ("don't repeat yourself") penalty: a token that would extend a sequence already
/// seen earlier in the output, by at least `allowed_length` tokens, is penalised by
/// `multiplier * base^(length - allowed_length)`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Dry {
    /// Scale of the penalty (0 disables it).
    pub multiplier: f32,
    /// Growth per extra repeated token.
    pub base: f32,
    /// Repeated sequences up to this length are free.
    pub allowed_length: usize,
}

impl Default for Dry {
    fn default() -> Self {
        Self {
            multiplier: 0.8,
            base: 1.75,
            allowed_length: 2,
        }
    }
}

proviso_macros::setters!(Dry {
    multiplier: f32,
    base: f32,
    allowed_length: usize,
});

/// How many earlier output tokens the penalties look at.
const PENALTY_WINDOW: usize = 512;
/// The DRY exponent is capped so the penalty stays finite.
const DRY_MAX_EXPONENT: usize = 16;

/// How to pick a token: [`Sampling::greedy`], then the setters.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Sampling {
    /// 0 means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1.0 = all).
    pub top_p: f32,
    /// Seed of the random source.
    pub seed: u64,
    /// Subtracted from a token's logit once per earlier occurrence in the output (OpenAI's
    /// `frequency_penalty`; 0 disables it).
    pub frequency_penalty: f32,
    /// Subtracted from a token's logit when it occurred earlier in the output (OpenAI's
    /// `presence_penalty`; 0 disables it).
    pub presence_penalty: f32,
    /// Divides a positive logit (multiplies a negative one) of a token already in the output
    /// (llama.cpp's and vLLM's `repetition_penalty`; 1 disables it).
    pub repetition_penalty: f32,
    /// The DRY penalty, when on.
    pub dry: Option<Dry>,
}

impl Default for Sampling {
    fn default() -> Self {
        Self::greedy()
    }
}

impl Sampling {
    /// Always the most likely allowed token.
    #[must_use]
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repetition_penalty: 1.0,
            dry: None,
        }
    }

    /// Whether any penalty against repetition is on.
    #[must_use]
    pub fn penalizes(&self) -> bool {
        self.frequency_penalty != 0.0
            || self.presence_penalty != 0.0
            || (self.repetition_penalty - 1.0).abs() > f32::EPSILON
            || self.dry.is_some_and(|d| d.multiplier > 0.0)
    }

    /// The penalties proviso turns on when it retries an output that stopped on
    /// repetition: a DRY penalty and a mild repetition penalty.
    #[must_use]
    pub fn against_repetition(self) -> Self {
        Self {
            repetition_penalty: if self.repetition_penalty > 1.0 {
                self.repetition_penalty
            } else {
                1.3
            },
            dry: Some(self.dry.unwrap_or_default()),
            ..self
        }
    }
}

proviso_macros::setters!(Sampling {
    temperature: f32,
    top_k: usize,
    top_p: f32,
    seed: u64,
    frequency_penalty: f32,
    presence_penalty: f32,
    repetition_penalty: f32,
    dry: Option<Dry>,
});

/// A seeded sampler.
#[derive(Debug, Clone)]
pub struct Sampler {
    sampling: Sampling,
    state: u64,
    /// The output so far (the last `PENALTY_WINDOW` tokens), for the penalties.
    history: Vec<TokenId>,
}

impl Sampler {
    /// A sampler with its random source seeded.
    #[must_use]
    pub fn new(sampling: Sampling) -> Self {
        Self {
            sampling,
            state: sampling.seed,
            history: Vec::new(),
        }
    }

    /// Records an output token (sampled or forced), for the penalties.
    pub fn observe(&mut self, token: TokenId) {
        if !self.sampling.penalizes() {
            return;
        }
        if self.history.len() == 2 * PENALTY_WINDOW {
            self.history.drain(..PENALTY_WINDOW);
        }
        self.history.push(token);
    }

    /// What to subtract from each penalised token's logit (tokens absent are not
    /// penalised), given the logits for the multiplicative penalty.
    fn penalties(&self, logits: &[f32]) -> HashMap<TokenId, f32> {
        let mut out: HashMap<TokenId, f32> = HashMap::new();
        if !self.sampling.penalizes() {
            return out;
        }
        let start = self.history.len().saturating_sub(PENALTY_WINDOW);
        let history = &self.history[start..];
        let mut counts: HashMap<TokenId, u32> = HashMap::new();
        for &t in history {
            *counts.entry(t).or_default() += 1;
        }
        let s = &self.sampling;
        for (&token, &count) in &counts {
            let logit = logits.get(token as usize).copied().unwrap_or(0.0);
            let mut penalty = s.frequency_penalty * count as f32 + s.presence_penalty;
            if s.repetition_penalty > 0.0 && (s.repetition_penalty - 1.0).abs() > f32::EPSILON {
                // The logit after the multiplicative penalty, expressed as a subtraction.
                let scaled = if logit > 0.0 {
                    logit / s.repetition_penalty
                } else {
                    logit * s.repetition_penalty
                };
                penalty += logit - scaled;
            }
            out.insert(token, penalty);
        }
        if let Some(dry) = s.dry.filter(|d| d.multiplier > 0.0) {
            // For each earlier position, the length of the longest common suffix of the
            // output up to that position and the whole output: the token that followed
            // there would extend a repeat of that length.
            let n = history.len();
            let mut longest: HashMap<TokenId, usize> = HashMap::new();
            for j in 1..n {
                let mut k = 0;
                while k < j && history[j - 1 - k] == history[n - 1 - k] {
                    k += 1;
                }
                if k >= dry.allowed_length.max(1) {
                    let next = history[j];
                    let e = longest.entry(next).or_default();
                    *e = (*e).max(k);
                }
            }
            for (token, length) in longest {
                let exponent = (length - dry.allowed_length.max(1)).min(DRY_MAX_EXPONENT);
                let penalty = dry.multiplier * dry.base.powi(exponent as i32);
                *out.entry(token).or_default() += penalty;
            }
        }
        out
    }

    fn next_f64(&mut self) -> f64 {
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Picks a token among those `allowed` says yes to. Returns `None` when no token is
    /// allowed (or every allowed logit is not a number).
    pub fn sample(&mut self, logits: &[f32], allowed: impl Fn(TokenId) -> bool) -> Option<TokenId> {
        let penalties = self.penalties(logits);
        let candidates = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.is_nan())
            .filter_map(|(i, &l)| {
                let id = TokenId::try_from(i).ok()?;
                let l = l - penalties.get(&id).copied().unwrap_or(0.0);
                allowed(id).then_some((id, l))
            });
        if self.sampling.temperature <= 0.0 {
            // Ties go to the lowest id, for determinism.
            return candidates
                .fold(None, |best: Option<(TokenId, f32)>, (id, l)| match best {
                    Some((_, bl)) if bl >= l => best,
                    _ => Some((id, l)),
                })
                .map(|(id, _)| id);
        }
        let mut pool: Vec<(TokenId, f32)> = candidates.collect();
        if pool.is_empty() {
            return None;
        }
        pool.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if self.sampling.top_k > 0 {
            pool.truncate(self.sampling.top_k);
        }
        let max = pool[0].1;
        let temperature = self.sampling.temperature;
        let mut weights: Vec<f64> = pool
            .iter()
            .map(|(_, l)| f64::from((l - max) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        if self.sampling.top_p < 1.0 {
            let mut cumulative = 0.0;
            let mut keep = weights.len();
            for (i, w) in weights.iter().enumerate() {
                cumulative += w / total;
                if cumulative >= f64::from(self.sampling.top_p) {
                    keep = i + 1;
                    break;
                }
            }
            pool.truncate(keep);
            weights.truncate(keep);
        }
        let total: f64 = weights.iter().sum();
        let mut target = self.next_f64() * total;
        for ((id, _), w) in pool.iter().zip(&weights) {
            if target < *w {
                return Some(*id);
            }
            target -= w;
        }
        pool.last().map(|(id, _)| *id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_respects_the_mask() {
        let logits = [1.0, 5.0, 3.0];
        let mut s = Sampler::new(Sampling::greedy());
        assert_eq!(s.sample(&logits, |_| true), Some(1));
        assert_eq!(s.sample(&logits, |t| t != 1), Some(2));
        assert_eq!(s.sample(&logits, |_| false), None);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_stays_in_the_mask() {
        let logits = [1.0, 1.0, 1.0, 1.0];
        let sampling = Sampling {
            temperature: 1.0,
            seed: 7,
            ..Sampling::greedy()
        };
        let draw = |sampling| {
            let mut s = Sampler::new(sampling);
            (0..50)
                .map(|_| s.sample(&logits, |t| t % 2 == 0).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(sampling);
        assert_eq!(a, draw(sampling));
        assert!(a.iter().all(|t| t % 2 == 0));
        assert!(a.contains(&0) && a.contains(&2));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let logits = [0.0, 2.0, 1.0];
        let mut s = Sampler::new(Sampling {
            temperature: 1.0,
            top_k: 1,
            seed: 3,
            ..Sampling::greedy()
        });
        assert!((0..20).all(|_| s.sample(&logits, |_| true) == Some(1)));
    }

    #[test]
    fn penalties_move_greedy_off_a_repeated_token_but_never_outside_the_mask() {
        let logits = [0.0, 2.0, 1.9, 1.0];
        let mut plain = Sampler::new(Sampling::greedy());
        plain.observe(1);
        assert_eq!(plain.sample(&logits, |_| true), Some(1));
        let mut s = Sampler::new(Sampling {
            presence_penalty: 0.5,
            ..Sampling::greedy()
        });
        s.observe(1);
        assert_eq!(s.sample(&logits, |_| true), Some(2));
        // The penalised token is still chosen when the mask allows nothing better.
        assert_eq!(s.sample(&logits, |t| t == 1 || t == 0), Some(1));
        let mut f = Sampler::new(Sampling {
            frequency_penalty: 0.05,
            ..Sampling::greedy()
        });
        f.observe(1);
        assert_eq!(f.sample(&logits, |_| true), Some(1));
        f.observe(1);
        f.observe(1);
        assert_eq!(f.sample(&logits, |_| true), Some(2));
        let mut r = Sampler::new(Sampling {
            repetition_penalty: 1.1,
            ..Sampling::greedy()
        });
        r.observe(1);
        assert_eq!(r.sample(&logits, |_| true), Some(2));
    }

    #[test]
    fn dry_penalises_the_token_that_would_extend_a_repeat() {
        // Output so far: 1 2 3 1 2. Token 3 would repeat `1 2 3`.
        let logits = [0.0, 1.0, 1.0, 2.0, 1.5];
        let mut s = Sampler::new(Sampling {
            dry: Some(Dry::default()),
            ..Sampling::greedy()
        });
        for t in [1, 2, 3, 1, 2] {
            s.observe(t);
        }
        assert_eq!(s.sample(&logits, |_| true), Some(4));
        let mut plain = Sampler::new(Sampling::greedy());
        for t in [1, 2, 3, 1, 2] {
            plain.observe(t);
        }
        assert_eq!(plain.sample(&logits, |_| true), Some(3));
    }
}
