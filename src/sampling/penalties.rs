//! Repetition penalties over the last n accepted tokens: repeat (divide positive / multiply negative
//! logits), frequency (per occurrence) and presence (once).

use super::backend::{GraphBound, GraphData, GraphPart, PenaltyOps};
use super::{Candidates, Empty, Sampler, Token};
use crate::ggml::Graph;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Penalties {
    /// Only the graph's ops need it (0: unknown, which keeps the sampler off the graph).
    n_vocab: usize,
    last_n: usize,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<Token>,
    count: HashMap<Token, i32>,
    graph: GraphBound,
}

/// Bits of the prefilter that spares a hash lookup for most candidates of a big vocabulary.
const FILTER_BITS: usize = 4096;

impl Penalties {
    /// A negative `last_n` counts as 0; `last_n == 0` or all penalties neutral is a no-op ("?penalties").
    pub fn boxed(n_vocab: i32, last_n: i32, repeat: f32, freq: f32, present: f32) -> Box<dyn Sampler> {
        let last_n = last_n.max(0) as usize;
        if last_n == 0 || (repeat == 1.0 && freq == 0.0 && present == 0.0) {
            return Box::new(Empty::new(c"?penalties"));
        }
        Box::new(Penalties {
            n_vocab: n_vocab.max(0) as usize,
            last_n,
            repeat,
            freq,
            present,
            prev: VecDeque::with_capacity(last_n.min(1 << 16)),
            count: HashMap::new(),
            graph: GraphBound::default(),
        })
    }
}

impl Sampler for Penalties {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"penalties", c"+penalties", c"-penalties"])
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

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl Penalties {
    fn ops(&self) -> PenaltyOps {
        PenaltyOps {
            n_vocab: self.n_vocab,
            last_n: self.last_n,
            repeat: self.repeat,
            freq: self.freq,
            present: self.present,
        }
    }
}

impl GraphPart for Penalties {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    /// One output per sequence (the history would change between two), and a known vocabulary.
    fn supports(&self, n_outputs_max_per_seq: u32) -> bool {
        n_outputs_max_per_seq <= 1 && self.n_vocab > 0
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        self.ops().build(g, d, &mut self.graph)
    }

    fn set_input(&mut self) -> std::result::Result<(), crate::ggml::GgmlError> {
        let count: Vec<(i32, i32)> = self.count.iter().map(|(&t, &c)| (t, c)).collect();
        self.ops().set_input(&self.graph, &count)
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
        let mut s = Penalties::boxed(100, last.len() as i32, repeat, freq, present);
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
        let mut s = Penalties::boxed(100, 2, 1.0, 1.0, 0.0);
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
        assert_eq!(Penalties::boxed(100, 0, 1.5, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(100, -3, 1.5, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(100, 64, 1.0, 0.0, 0.0).name(), c"?penalties");
        assert_eq!(Penalties::boxed(100, 64, 1.1, 0.0, 0.0).name(), c"penalties");
    }
}
