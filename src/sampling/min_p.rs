//! Min-p: keep the candidates whose probability is at least p times the best one's.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::candidates::{cxx_max, sort_top};
use super::{Candidates, Empty, Sampler};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct MinP {
    p: f32,
    min_keep: usize,
    graph: GraphBound,
}

impl MinP {
    /// `p <= 0` is a no-op sampler ("?min-p").
    pub fn boxed(p: f32, min_keep: usize) -> Box<dyn Sampler> {
        if p <= 0.0 {
            Box::new(Empty::new(c"?min-p"))
        } else {
            Box::new(MinP {
                p,
                min_keep,
                graph: GraphBound::default(),
            })
        }
    }
}

impl Sampler for MinP {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"min-p", c"+min-p", c"-min-p"])
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.p <= 0.0 || cur.is_empty() {
            return;
        }
        // Unsorted: filter by logit in one pass, order kept, when that leaves enough candidates.
        if !cur.sorted {
            let max_logit = cur.data().iter().fold(-f32::MAX, |m, d| cxx_max(m, d.logit));
            let min_logit = max_logit + self.p.ln();
            let kept = cur.data().iter().filter(|d| d.logit >= min_logit).count();
            if kept > 0 && kept >= self.min_keep {
                let data = cur.data_mut();
                let mut w = 0;
                for r in 0..data.len() {
                    if data[r].logit >= min_logit {
                        data[w] = data[r];
                        w += 1;
                    }
                }
                cur.truncate(kept);
                return;
            }
        }
        if !cur.sorted {
            let n = cur.len();
            sort_top(cur, n);
        }
        let data = cur.data();
        let min_logit = data[0].logit + self.p.ln();
        let mut i = 1;
        while i < data.len() {
            if data[i].logit < min_logit && i >= self.min_keep {
                break;
            }
            i += 1;
        }
        cur.truncate(i);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for MinP {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::min_p(g, d, self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::Dist;
    use super::*;

    fn run(p: f32, expected: &[f32]) {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        MinP::boxed(p, 0).apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn keeps_tokens_above_p_times_the_best() {
        run(0.0, &[0.1, 0.2, 0.3, 0.4]);
        run(0.24, &[0.1, 0.2, 0.3, 0.4]);
        run(0.26, &[0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]);
        run(0.49, &[0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]);
        run(0.51, &[0.3 / 0.7, 0.4 / 0.7]);
        run(0.74, &[0.3 / 0.7, 0.4 / 0.7]);
        run(0.76, &[1.0]);
        run(1.0, &[1.0]);
        run(1.05, &[1.0]);
    }

    #[test]
    fn min_keep_forces_the_sorted_path() {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        MinP::boxed(0.9, 3).apply(&mut c);
        assert!(c.sorted);
        assert_eq!(ids(&c), vec![3, 2, 1]);
    }
}
