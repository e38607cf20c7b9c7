//! Dist: draw a candidate from the softmax of the logits with a seeded `std::mt19937`.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::candidates::max_logit;
use super::rng::{Mt19937, SeededRng};
use super::{Candidates, Sampler, Token};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct Dist {
    rng: SeededRng,
    /// With several outputs per sequence in the graph, the rows draw from this copy of the
    /// stream; each accepted token then commits one draw to `rng`, so rejected rows cost nothing.
    rng_side: Mt19937,
    side_drawn: usize,
    side_committed: usize,
    graph: GraphBound,
}

impl Dist {
    pub fn new(seed: u32) -> Self {
        let rng = SeededRng::new(seed);
        let mut d = Dist {
            rng_side: Mt19937::new(0),
            rng,
            side_drawn: 0,
            side_committed: 0,
            graph: GraphBound::default(),
        };
        d.restart_side();
        d
    }

    fn restart_side(&mut self) {
        self.rng_side = self.rng.generator().clone();
        self.side_drawn = 0;
        self.side_committed = 0;
    }
}

impl Sampler for Dist {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"dist", c"+dist", c"-dist"])
    }

    fn accept(&mut self, _token: Token) {
        if self.side_committed < self.side_drawn {
            self.rng.generator().uniform_f64();
            self.side_committed += 1;
        }
    }

    /// llama.cpp's single pass: unnormalised exp weights summed in double, one uniform double, the
    /// first candidate whose running sum reaches `sum * u`; the probabilities are normalised on the way.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if cur.is_empty() {
            cur.selected = -1;
            return;
        }
        cur.selected = 0;
        if cur.len() == 1 {
            // One draw per output even here, as llama.cpp keeps its stream aligned this way.
            self.rng.generator().uniform_f64();
            cur.data_mut()[0].p = 1.0;
            return;
        }
        let max_l = max_logit(cur);
        let data = cur.data_mut();
        let mut sum_cum = 0.0f64;
        for d in data.iter_mut() {
            d.p = (d.logit - max_l).exp();
            sum_cum += f64::from(d.p);
        }
        let rnd = self.rng.generator().uniform_f64();
        let sum_tgt = sum_cum * rnd;
        let mut sum_run = 0.0f64;
        let mut found = None;
        for (i, d) in data.iter_mut().enumerate() {
            if found.is_none() {
                sum_run += f64::from(d.p);
                if sum_run >= sum_tgt {
                    found = Some(i);
                }
            }
            d.p = (f64::from(d.p) / sum_cum) as f32;
        }
        // Not reached with finite weights; NaN weights end here, on the last candidate as in llama.cpp.
        let n = data.len();
        cur.selected = found.unwrap_or(n - 1) as i64;
    }

    fn reset(&mut self) {
        self.rng.reset();
        self.restart_side();
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn seed(&self) -> Option<u32> {
        Some(self.rng.current_seed())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for Dist {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn init(&mut self, n_outputs_max_per_seq: u32) -> bool {
        let g = &mut self.graph;
        g.init_as(true, n_outputs_max_per_seq);
        self.restart_side();
        true
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::dist(g, d, &mut self.graph)
    }

    fn set_input(&mut self) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::dist_set_input(
            &self.graph,
            self.rng.generator(),
            &mut self.rng_side,
            &mut self.side_drawn,
        )
    }

    fn begin(&mut self) {
        if self.graph.multi_output() {
            self.restart_side();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::rng::Mt19937;
    use super::*;

    fn draw(s: &mut Dist, logits: &[f32]) -> i64 {
        let mut v = from_logits(logits);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        c.selected
    }

    #[test]
    fn a_single_candidate_still_advances_the_stream() {
        let mut single = Dist::new(4242);
        let mut control = Dist::new(4242);
        draw(&mut single, &[0.0]);
        draw(&mut control, &[0.0, 0.0]);
        let flat = vec![0.0; 256];
        for _ in 0..4 {
            assert_eq!(draw(&mut single, &flat), draw(&mut control, &flat));
        }
    }

    #[test]
    fn probabilities_are_normalised() {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, &[0.1, 0.2, 0.3, 0.4]);
        assert!((0..4).contains(&c.selected));
    }

    #[test]
    fn draws_follow_the_uniform_stream() {
        // Weights 1 and 3: the first candidate is chosen iff u <= 1/4.
        let mut s = Dist::new(99);
        let mut shadow = Mt19937::new(99);
        for _ in 0..50 {
            let u = shadow.uniform_f64();
            let got = draw(&mut s, &[0.0, 3.0f32.ln()]);
            assert_eq!(got, if 4.0 * u <= 1.0 + 1e-12 { 0 } else { 1 }, "u={u}");
        }
    }

    #[test]
    fn reset_restarts_the_stream_and_nan_does_not_crash() {
        let mut s = Dist::new(5);
        let a = draw(&mut s, &[0.0; 100]);
        s.reset();
        assert_eq!(draw(&mut s, &[0.0; 100]), a);
        assert_eq!(draw(&mut s, &[f32::NAN; 10]), 9);
        assert_eq!(draw(&mut s, &[f32::NEG_INFINITY; 10]), 9);
        assert_eq!(s.seed(), Some(5));
    }
}
