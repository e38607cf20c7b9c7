//! Mirostat 1.0 and 2.0: adaptive truncation that steers the observed surprise towards tau, then a
//! seeded draw (`std::discrete_distribution`).

use super::candidates::{apply_top_k, cvtt_i32, softmax};
use super::rng::{discrete, resolve_seed, Mt19937};
use super::{Candidates, Sampler};
use std::cmp::Ordering;
use std::ffi::CStr;
use std::hint::black_box;

/// Draw from the current probabilities, select the draw and return -log2 of its probability.
fn draw_and_surprise(cur: &mut Candidates<'_>, rng: &mut Mt19937) -> f32 {
    let idx = discrete(cur.data().iter().map(|d| d.p), rng);
    cur.selected = idx as i64;
    -cur.data()[idx].p.log2()
}

#[derive(Clone)]
pub struct Mirostat {
    n_vocab: i32,
    seed: u32,
    seed_cur: u32,
    tau: f32,
    eta: f32,
    m: i32,
    mu: f32,
    rng: Mt19937,
}

impl Mirostat {
    pub fn new(n_vocab: i32, seed: u32, tau: f32, eta: f32, m: i32) -> Self {
        let seed_cur = resolve_seed(seed);
        Mirostat {
            n_vocab,
            seed,
            seed_cur,
            tau,
            eta,
            m,
            mu: 2.0 * tau,
            rng: Mt19937::new(seed_cur),
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
        if cur.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, true);
        let data = cur.data();
        let n_terms = (self.m as usize).wrapping_sub(1).min(data.len() - 1);
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
        let k = ((epsilon_hat * black_box(2.0f32).powf(self.mu)) / (1.0 - (self.n_vocab as f32).powf(-epsilon_hat)))
            .powf(1.0 / s_hat);

        apply_top_k(cur, cvtt_i32(k).max(1));
        softmax(cur, true);
        let observed_surprise = draw_and_surprise(cur, &mut self.rng);
        self.mu -= self.eta * (observed_surprise - self.tau);
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.seed_cur = resolve_seed(self.seed);
        self.rng = Mt19937::new(self.seed_cur);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> Option<u32> {
        Some(self.seed_cur)
    }
}

#[derive(Clone)]
pub struct MirostatV2 {
    seed: u32,
    seed_cur: u32,
    tau: f32,
    eta: f32,
    mu: f32,
    rng: Mt19937,
}

impl MirostatV2 {
    pub fn new(seed: u32, tau: f32, eta: f32) -> Self {
        let seed_cur = resolve_seed(seed);
        MirostatV2 {
            seed,
            seed_cur,
            tau,
            eta,
            mu: 2.0 * tau,
            rng: Mt19937::new(seed_cur),
        }
    }
}

impl Sampler for MirostatV2 {
    fn name(&self) -> &'static CStr {
        c"mirostat-v2"
    }

    /// Keep the sorted prefix whose surprise stays within mu (at least one), renormalise and draw.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if cur.is_empty() {
            cur.selected = -1;
            return;
        }
        softmax(cur, true);
        // Stops at the first surprise above mu; NaN does not stop it (llama.cpp's find_if of `> mu`).
        let keep = cur
            .data()
            .iter()
            .take_while(|d| (-d.p.log2()).partial_cmp(&self.mu) != Some(Ordering::Greater))
            .count();
        cur.truncate(keep.max(1));
        softmax(cur, true);
        let observed_surprise = draw_and_surprise(cur, &mut self.rng);
        self.mu -= self.eta * (observed_surprise - self.tau);
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.seed_cur = resolve_seed(self.seed);
        self.rng = Mt19937::new(self.seed_cur);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> Option<u32> {
        Some(self.seed_cur)
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
        assert!((s.mu - (2.0 - 0.1 * (-chosen.log2() - 1.0))).abs() < 1e-6);
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
        assert!((s.mu - (2.0 - 0.1 * (-p.log2() - 1.0))).abs() < 1e-6);
    }

    #[test]
    fn mirostat_draws_and_adapts() {
        let logits: Vec<f32> = (0..1000).map(|i| -(i as f32) * 0.01).collect();
        let mut s = Mirostat::new(1000, 3, 5.0, 0.1, 100);
        for _ in 0..20 {
            let mut v = from_logits(&logits);
            let mut c = Candidates::new(&mut v, -1, false);
            s.apply(&mut c);
            assert!(c.selected_data().is_some());
        }
        let mu = s.mu;
        s.reset();
        assert_eq!(s.mu, 10.0);
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
