//! XTC ("exclude top choices"): with probability p, drop every candidate above the threshold except
//! the least likely of them.

use super::candidates::softmax;
use super::rng::SeededRng;
use super::{Candidates, Empty, Sampler};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Xtc {
    probability: f32,
    threshold: f32,
    min_keep: usize,
    rng: SeededRng,
}

impl Xtc {
    /// `p <= 0` or `t > 0.5` is a no-op sampler ("?xtc").
    pub fn boxed(p: f32, t: f32, min_keep: usize, seed: u32) -> Box<dyn Sampler> {
        if p <= 0.0 || t > 0.5 {
            return Box::new(Empty::new(c"?xtc"));
        }
        Box::new(Xtc {
            probability: p,
            threshold: t,
            min_keep,
            rng: SeededRng::new(seed),
        })
    }
}

impl Sampler for Xtc {
    fn name(&self) -> &'static CStr {
        c"xtc"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.probability <= 0.0 || self.threshold > 0.5 || cur.len() < 2 {
            return;
        }
        if self.rng.generator().uniform_f32() > self.probability {
            return;
        }
        softmax(cur, true);
        let pos_last = cur
            .data()
            .iter()
            .take_while(|d| d.p >= self.threshold)
            .count()
            .saturating_sub(1);
        if cur.len() - pos_last >= self.min_keep && pos_last > 0 {
            cur.drop_front(pos_last);
        }
    }

    fn reset(&mut self) {
        self.rng.reset();
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    fn run(p: f32, t: f32, expected: &[f32]) {
        let mut v = from_probs(&[0.4, 0.3, 0.2, 0.1]);
        let mut c = Candidates::new(&mut v, -1, false);
        Xtc::boxed(p, t, 0, 0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn removes_the_top_choices() {
        run(0.99, 0.09, &[0.1]);
        run(0.99, 0.19, &[0.2, 0.1]);
        run(0.99, 0.29, &[0.3, 0.2, 0.1]);
    }

    #[test]
    fn keeps_everything_when_only_one_is_above() {
        run(0.99, 0.39, &[0.4, 0.3, 0.2, 0.1]);
    }
}
