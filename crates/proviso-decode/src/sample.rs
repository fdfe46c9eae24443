//! Choosing the next token from logits and a mask: greedy, or seeded temperature / top-k /
//! top-p. The random source is a small, fixed algorithm (SplitMix64) so that a seed gives the
//! same output on every machine and every build.

use crate::engine::TokenId;

/// How to pick a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 means greedy.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1.0 = all).
    pub top_p: f32,
    /// Seed of the random source.
    pub seed: u64,
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
        }
    }
}

/// A seeded sampler.
#[derive(Debug, Clone)]
pub struct Sampler {
    sampling: Sampling,
    state: u64,
}

impl Sampler {
    /// A sampler with its random source seeded.
    #[must_use]
    pub fn new(sampling: Sampling) -> Self {
        Self {
            sampling,
            state: sampling.seed,
        }
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
        let candidates = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| !l.is_nan())
            .filter_map(|(i, &l)| {
                let id = TokenId::try_from(i).ok()?;
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
            top_k: 0,
            top_p: 1.0,
            seed: 7,
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
            top_p: 1.0,
            seed: 3,
        });
        assert!((0..20).all(|_| s.sample(&logits, |_| true) == Some(1)));
    }
}
