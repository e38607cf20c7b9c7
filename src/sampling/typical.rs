//! Locally typical sampling: keep the candidates whose surprise is closest to the entropy, up to p.

use super::candidates::softmax;
use super::cxx_sort;
use super::{Candidates, Empty, Sampler};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Typical {
    p: f32,
    min_keep: usize,
}

impl Typical {
    /// `p >= 1` is a no-op sampler ("?typical").
    pub fn boxed(p: f32, min_keep: usize) -> Box<dyn Sampler> {
        if p >= 1.0 {
            Box::new(Empty::new(c"?typical"))
        } else {
            Box::new(Typical { p, min_keep })
        }
    }
}

impl Sampler for Typical {
    fn name(&self) -> &'static CStr {
        c"typical"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.p >= 1.0 || cur.is_empty() {
            return;
        }
        softmax(cur, true);
        let data = cur.data();
        let entropy = data.iter().fold(0.0f32, |e, d| e + -d.p * d.p.ln());
        let shifted: Vec<f32> = data.iter().map(|d| (-d.p.ln() - entropy).abs()).collect();
        let mut indices: Vec<usize> = (0..data.len()).collect();
        cxx_sort::sort(&mut indices, &mut |&a, &b| shifted[a] < shifted[b]);

        let mut cum_sum = 0.0f32;
        let mut last_idx = indices.len();
        for (i, &idx) in indices.iter().enumerate() {
            cum_sum += data[idx].p;
            if cum_sum > self.p && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last_idx = i + 1;
                break;
            }
        }
        let kept: Vec<_> = indices[..last_idx].iter().map(|&i| data[i]).collect();
        cur.data_mut()[..last_idx].copy_from_slice(&kept);
        cur.truncate(last_idx);
        cur.sorted = false;
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    fn run(probs: &[f32], p: f32, expected: &[f32]) {
        let mut v = from_probs(probs);
        let mut c = Candidates::new(&mut v, -1, false);
        Typical::boxed(p, 0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn keeps_the_typical_set() {
        run(&[0.97, 0.01, 0.01, 0.01], 0.5, &[0.97]);
        run(&[0.4, 0.2, 0.2, 0.2], 0.5, &[0.2, 0.2, 0.2]);
    }
}
