//! Top-n-sigma: mask the candidates more than n standard deviations below the best logit.

use super::candidates::cxx_max;
use super::{Candidates, Empty, Sampler};
use std::ffi::CStr;

#[derive(Clone)]
pub struct TopNSigma {
    n: f32,
}

impl TopNSigma {
    /// `n <= 0` is a no-op sampler ("?top-n-sigma").
    pub fn boxed(n: f32) -> Box<dyn Sampler> {
        if n <= 0.0 {
            Box::new(Empty::new(c"?top-n-sigma"))
        } else {
            Box::new(TopNSigma { n })
        }
    }
}

impl Sampler for TopNSigma {
    fn name(&self) -> &'static CStr {
        c"top-n-sigma"
    }

    /// Mean and deviation over the finite-or-+inf logits (-inf ones are already masked); the squares
    /// are summed as llama.cpp does it: `pow` in double, accumulated into a float.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.n <= 0.0 || cur.len() <= 1 {
            return;
        }
        let data = cur.data_mut();
        let mut max = data[0].logit;
        let mut logits_sum = 0.0f32;
        let mut valid = 0usize;
        for d in data.iter().filter(|d| d.logit != f32::NEG_INFINITY) {
            max = cxx_max(max, d.logit);
            logits_sum += d.logit;
            valid += 1;
        }
        let mean = if valid > 0 { logits_sum / valid as f32 } else { 0.0 };
        let mut acc = 0.0f32;
        for d in data.iter().filter(|d| d.logit != f32::NEG_INFINITY) {
            let diff = f64::from(d.logit - mean);
            acc = (f64::from(acc) + diff * diff) as f32;
        }
        let std = if valid > 0 { (acc / valid as f32).sqrt() } else { 0.0 };
        let cut = max - self.n * std;
        for d in data.iter_mut() {
            if d.logit < cut {
                d.logit = f32::NEG_INFINITY;
            }
        }
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::Dist;
    use super::*;

    fn run(n: f32, expected: &[f32]) {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        TopNSigma::boxed(n).apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn masks_below_n_sigma() {
        run(1.0, &[0.0, 0.0, 0.428571, 0.571429]);
        run(0.0, &[0.1, 0.2, 0.3, 0.4]);
        run(3.0, &[0.1, 0.2, 0.3, 0.4]);
    }
}
