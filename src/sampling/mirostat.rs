//! Mirostat 1.0 and 2.0: adaptive truncation that steers the observed surprise towards tau, then a
//! seeded draw (`std::discrete_distribution`).

use super::candidates::{apply_top_k, cvtt_i32, softmax};
use super::rng::SeededRng;
use super::{Candidates, Sampler};
use std::cmp::Ordering;
use std::ffi::CStr;
use std::hint::black_box;

/// What both versions steer with: the target surprise tau, the learning rate eta, the running maximum
/// surprise mu (2·tau at the start) and the random stream.
#[derive(Clone)]
struct Steering {
    tau: f32,
    eta: f32,
    mu: f32,
    rng: SeededRng,
}

impl Steering {
    fn new(seed: u32, tau: f32, eta: f32) -> Self {
        Steering {
            tau,
            eta,
            mu: 2.0 * tau,
            rng: SeededRng::new(seed),
        }
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.rng.reset();
    }

    /// One step of either version: sorted probabilities, `truncate` (given mu) keeps what the version
    /// allows, then renormalise, draw and move mu against the error of the drawn candidate's surprise
    /// (-log2 of its probability).
    fn apply(&mut self, cur: &mut Candidates<'_>, truncate: impl FnOnce(&mut Candidates<'_>, f32)) {
        if cur.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, true);
        truncate(cur, self.mu);
        softmax(cur, true);
        let idx = self.rng.select(cur);
        let observed_surprise = -cur.data()[idx].p.log2();
        self.mu -= self.eta * (observed_surprise - self.tau);
    }
}

#[derive(Clone)]
pub struct Mirostat {
    n_vocab: i32,
    m: i32,
    steering: Steering,
}

impl Mirostat {
    pub fn new(n_vocab: i32, seed: u32, tau: f32, eta: f32, m: i32) -> Self {
        Mirostat {
            n_vocab,
            m,
            steering: Steering::new(seed, tau, eta),
        }
    }
}

impl Sampler for Mirostat {
    fn name(&self) -> &'static CStr {
        c"mirostat"
    }

    /// Estimate the Zipf exponent s_hat from the top m probabilities, derive k from it and mu, keep the
    /// top k and draw.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        let (n_vocab, m) = (self.n_vocab, self.m);
        self.steering.apply(cur, |cur, mu| {
            let data = cur.data();
            let n_terms = (m as usize).wrapping_sub(1).min(data.len() - 1);
            let mut sum_ti_bi = 0.0f32;
            let mut sum_ti_sq = 0.0f32;
            for i in 0..n_terms {
                let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
                let b_i = (data[i].p / data[i + 1].p).ln();
                sum_ti_bi += t_i * b_i;
                sum_ti_sq += t_i * t_i;
            }
            let s_hat = sum_ti_bi / sum_ti_sq;
            let epsilon_hat = s_hat - 1.0;
            // black_box keeps LLVM from turning powf(2, x) into exp2f(x), whose rounding may differ.
            let k = ((epsilon_hat * black_box(2.0f32).powf(mu)) / (1.0 - (n_vocab as f32).powf(-epsilon_hat)))
                .powf(1.0 / s_hat);
            apply_top_k(cur, cvtt_i32(k).max(1));
        });
    }

    fn reset(&mut self) {
        self.steering.reset();
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> Option<u32> {
        Some(self.steering.rng.current_seed())
    }
}

#[derive(Clone)]
pub struct MirostatV2 {
    steering: Steering,
}

impl MirostatV2 {
    pub fn new(seed: u32, tau: f32, eta: f32) -> Self {
        MirostatV2 {
            steering: Steering::new(seed, tau, eta),
        }
    }
}

impl Sampler for MirostatV2 {
    fn name(&self) -> &'static CStr {
        c"mirostat-v2"
    }

    /// Keep the sorted prefix whose surprise stays within mu (at least one), renormalise and draw.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        self.steering.apply(cur, |cur, mu| {
            // Stops at the first surprise above mu; NaN does not stop it (llama.cpp's find_if of `> mu`).
            let keep = cur
                .data()
                .iter()
                .take_while(|d| (-d.p.log2()).partial_cmp(&mu) != Some(Ordering::Greater))
                .count();
            cur.truncate(keep.max(1));
        });
    }

    fn reset(&mut self) {
        self.steering.reset();
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> Option<u32> {
        Some(self.steering.rng.current_seed())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    #[test]
    fn mirostat_v2_truncates_by_surprise() {
        // mu = 2 * tau = 2 bits: only candidates with p >= 1/4 survive, here 0.4 and 0.3.
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        let mut s = MirostatV2::new(7, 1.0, 0.1);
        s.apply(&mut c);
        assert_probs(&c, &[0.4 / 0.7, 0.3 / 0.7]);
        let chosen = c.selected_data().unwrap().p;
        assert!((s.steering.mu - (2.0 - 0.1 * (-chosen.log2() - 1.0))).abs() < 1e-6);
    }

    #[test]
    fn mirostat_estimates_k_from_the_zipf_slope() {
        // p = .5 .25 .125 .125, m = 3: s_hat = (ln2·ln2 + ln1.5·ln2) / (ln2² + ln1.5²) = 1.1809, and with
        // tau = 1 (mu = 2) and n_vocab = 4: k = (0.1809·2² / (1 − 4^−0.1809))^(1/1.1809) = 2.72 → top 2.
        let mut s = Mirostat::new(4, 11, 1.0, 0.1, 3);
        let mut v = from_probs(&[0.125, 0.5, 0.125, 0.25]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        assert_eq!(ids(&c), vec![1, 3]);
        assert_probs(&c, &[2.0 / 3.0, 1.0 / 3.0]);
        let p = c.selected_data().unwrap().p;
        assert!((s.steering.mu - (2.0 - 0.1 * (-p.log2() - 1.0))).abs() < 1e-6);
    }

    #[test]
    fn mirostat_draws_and_adapts() {
        // A vocabulary's worth of candidates; fewer under Miri, which is slow, past the 100 sampled.
        let n = if cfg!(miri) { 200 } else { 1000 };
        let logits: Vec<f32> = (0..n).map(|i| -(i as f32) * 0.01).collect();
        let mut s = Mirostat::new(n, 3, 5.0, 0.1, 100);
        for _ in 0..20 {
            let mut v = from_logits(&logits);
            let mut c = Candidates::new(&mut v, -1, false);
            s.apply(&mut c);
            assert!(c.selected_data().is_some());
        }
        let mu = s.steering.mu;
        s.reset();
        assert_eq!(s.steering.mu, 10.0);
        assert_ne!(mu, 10.0);
    }

    #[test]
    fn empty_and_single_candidates() {
        let mut s = MirostatV2::new(1, 3.0, 0.1);
        let mut c = Candidates::new(&mut [], 0, false);
        s.apply(&mut c);
        assert_eq!(c.selected, -1);
        let mut v = from_logits(&[f32::NEG_INFINITY]);
        let mut c = Candidates::new(&mut v, -1, false);
        Mirostat::new(1, 1, 3.0, 0.1, 100).apply(&mut c);
        assert_eq!(c.selected, 0);
    }
}
