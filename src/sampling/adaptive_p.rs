//! Adaptive-p: reshape the distribution around a target probability that adapts to an exponential
//! moving average of the chosen tokens' original probabilities, then draw.

use super::candidates::softmax;
use super::rng::SeededRng;
use super::{Candidates, Sampler, Token, TOKEN_NULL};
use std::ffi::CStr;

const DISTRIBUTION_WIDTH: f32 = 0.3;
const PEAK_LOGIT_VALUE: f32 = 5.0;
const SHARPNESS: f32 = 10.0;
const INV_WIDTH: f32 = 1.0 / DISTRIBUTION_WIDTH;

pub struct AdaptiveP {
    target: f32,
    decay: f32,
    rng: SeededRng,
    weighted_sum: f32,
    total_weight: f32,
    original_probs: Vec<f32>,
    pending: Option<(Token, usize)>,
}

/// `std::clamp(v, lo, hi)`: NaN passes through.
fn cxx_clamp(v: f32, lo: f32, hi: f32) -> f32 {
    if v < lo {
        lo
    } else if hi < v {
        hi
    } else {
        v
    }
}

impl AdaptiveP {
    /// `decay` is clamped to [0, 0.99]; a negative `target` makes this a plain seeded draw.
    pub fn new(target: f32, decay: f32, seed: u32) -> Self {
        let decay = cxx_clamp(decay, 0.0, 0.99);
        AdaptiveP {
            target,
            decay,
            rng: SeededRng::new(seed),
            weighted_sum: target / (1.0 - decay),
            total_weight: 1.0 / (1.0 - decay),
            original_probs: Vec::new(),
            pending: None,
        }
    }
}

impl Sampler for AdaptiveP {
    fn name(&self) -> &'static CStr {
        c"adaptive-p"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if cur.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, false);
        if self.target < 0.0 {
            self.rng.select(cur);
            return;
        }
        self.original_probs.clear();
        self.original_probs.extend(cur.data().iter().map(|d| d.p));

        let target = cxx_clamp(self.target, 0.0, 1.0);
        let adapted = if self.total_weight == 0.0 {
            target
        } else {
            2.0 * target - self.weighted_sum / self.total_weight
        };
        let adapted = cxx_clamp(adapted, 0.0, 1.0);

        // Quadratic near the target, linear in the tails; masked (-inf) candidates stay masked.
        for d in cur.data_mut() {
            if d.logit == f32::NEG_INFINITY {
                continue;
            }
            let dist = ((d.p - adapted) * INV_WIDTH).abs();
            d.logit = PEAK_LOGIT_VALUE - SHARPNESS * dist * dist / (1.0 + dist);
        }
        softmax(cur, false);
        let idx = self.rng.select(cur);
        self.pending = Some((cur.data()[idx].id, idx));
    }

    /// The EMA moves only when the accepted token is the one this sampler drew.
    fn accept(&mut self, token: Token) {
        if let Some((id, idx)) = self.pending.take() {
            if id == token && token != TOKEN_NULL {
                if let Some(&p) = self.original_probs.get(idx) {
                    self.weighted_sum = p + self.decay * self.weighted_sum;
                    self.total_weight = 1.0 + self.decay * self.total_weight;
                }
            }
        }
    }

    fn reset(&mut self) {
        self.weighted_sum = self.target / (1.0 - self.decay);
        self.total_weight = 1.0 / (1.0 - self.decay);
        self.pending = None;
        self.rng.reset();
    }

    /// llama.cpp's clone starts a fresh random stream from the seed and copies only the averages.
    fn box_clone(&self) -> Box<dyn Sampler> {
        let mut c = AdaptiveP::new(self.target, self.decay, self.rng.seed());
        c.weighted_sum = self.weighted_sum;
        c.total_weight = self.total_weight;
        c.pending = self.pending;
        Box::new(c)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    #[test]
    fn transform_peaks_at_the_target() {
        // Target 0.3 with no history: the candidate with p = 0.3 gets the peak logit 5.
        let mut s = AdaptiveP::new(0.3, 0.0, 1);
        s.total_weight = 0.0;
        let mut v = from_probs(&[0.3, 0.7]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        assert!((c.data()[0].logit - 5.0).abs() < 1e-5);
        let d = (0.7f32 - 0.3) / 0.3;
        assert!((c.data()[1].logit - (5.0 - 10.0 * d * d / (1.0 + d))).abs() < 1e-4);
    }

    #[test]
    fn accept_updates_the_average_only_for_the_drawn_token() {
        let mut s = AdaptiveP::new(0.5, 0.5, 3);
        let (ws, tw) = (s.weighted_sum, s.total_weight);
        let mut v = from_probs(&[0.25, 0.75]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        let (id, idx) = s.pending.unwrap();
        s.accept(id + 100);
        assert_eq!((s.weighted_sum, s.total_weight), (ws, tw));
        s.pending = Some((id, idx));
        s.accept(id);
        let p = [0.25f32, 0.75][id as usize];
        assert!((s.weighted_sum - (p + 0.5 * ws)).abs() < 1e-6);
        assert_eq!(s.total_weight, 1.0 + 0.5 * tw);
    }
}
