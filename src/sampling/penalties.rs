//! Repetition penalties over the last n accepted tokens: repeat (divide positive / multiply negative
//! logits), frequency (per occurrence) and presence (once).

use super::{Candidates, Empty, Sampler, Token};
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Penalties {
    last_n: usize,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<Token>,
    count: HashMap<Token, i32>,
}

/// Bits of the prefilter that spares a hash lookup for most candidates of a big vocabulary.
const FILTER_BITS: usize = 4096;

impl Penalties {
    /// A negative `last_n` counts as 0; `last_n == 0` or all penalties neutral is a no-op ("?penalties").
    pub fn boxed(last_n: i32, repeat: f32, freq: f32, present: f32) -> Box<dyn Sampler> {
        let last_n = last_n.max(0) as usize;
        if last_n == 0 || (repeat == 1.0 && freq == 0.0 && present == 0.0) {
            return Box::new(Empty::new(c"?penalties"));
        }
        Box::new(Penalties {
            last_n,
            repeat,
            freq,
            present,
            prev: VecDeque::with_capacity(last_n.min(1 << 16)),
            count: HashMap::new(),
        })
    }
}

impl Sampler for Penalties {
    fn name(&self) -> &'static CStr {
        c"penalties"
    }

    fn accept(&mut self, token: Token) {
        *self.count.entry(token).or_insert(0) += 1;
        if self.prev.len() >= self.last_n {
            if let Some(old) = self.prev.pop_front() {
                if let Some(c) = self.count.get_mut(&old) {
                    *c -= 1;
                    if *c == 0 {
                        self.count.remove(&old);
                    }
                }
            }
        }
        self.prev.push_back(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        let mut filter = [0u64; FILTER_BITS / 64];
        for &t in self.count.keys() {
            let b = t as usize % FILTER_BITS;
            filter[b / 64] |= 1 << (b % 64);
        }
        for d in cur.data_mut() {
            let b = d.id as usize % FILTER_BITS;
            if filter[b / 64] & (1 << (b % 64)) == 0 {
                continue;
            }
            let Some(&count) = self.count.get(&d.id) else {
                continue;
            };
            // Multiplying negative logits keeps the penalty a penalty (dividing would raise them).
            if d.logit <= 0.0 {
                d.logit *= self.repeat;
            } else {
                d.logit /= self.repeat;
            }
            let present = if count > 0 { 1.0 } else { 0.0 };
            d.logit -= count as f32 * self.freq + present * self.present;
        }
        cur.sorted = false;
    }

    fn reset(&mut self) {
        self.prev.clear();
        self.count.clear();
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

    fn run(last: &[Token], expected: &[f32], repeat: f32, freq: f32, present: f32) {
        let mut v = from_probs(&[0.2; 5]);
        let mut c = Candidates::new(&mut v, -1, false);
        let mut s = Penalties::boxed(last.len() as i32, repeat, freq, present);
        for &t in last {
            s.accept(t);
        }
        s.apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn repeat_penalty() {
        run(&[0], &[0.0, 0.25, 0.25, 0.25, 0.25], 50.0, 0.0, 0.0);
        run(&[0, 1, 2], &[0.0, 0.0, 0.0, 0.5, 0.5], 50.0, 0.0, 0.0);
        run(&[0, 1, 2, 0, 0], &[0.0, 0.0, 0.0, 0.5, 0.5], 50.0, 0.0, 0.0);
    }

    #[test]
    fn frequency_and_presence_penalties() {
        run(&[0], &[0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1.0, 5.0, 5.0);
        run(
            &[0, 1, 2],
            &[0.000023, 0.000023, 0.000023, 0.499966, 0.499966],
            1.0,
            5.0,
            5.0,
        );
        run(
            &[0, 1, 2, 0, 0],
            &[0.000000, 0.000023, 0.000023, 0.499977, 0.499977],
            1.0,
            5.0,
            5.0,
        );
    }

    #[test]
    fn only_the_last_n_count() {
        let mut s = Penalties::boxed(2, 1.0, 1.0, 0.0);
        for t in [4, 1, 2] {
            s.accept(t);
        }
        let mut v = from_logits(&[0.0; 5]);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        let l: Vec<f32> = c.data().iter().map(|d| d.logit).collect();
        assert_eq!(l, vec![0.0, -1.0, -1.0, 0.0, 0.0]);
    }

    #[test]
    fn disabled_forms() {
        assert_eq!(Penalties::boxed(0, 1.5, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(-3, 1.5, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(64, 1.0, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(64, 1.1, 0.0, 0.0).name(), c"penalties");
    }
}
