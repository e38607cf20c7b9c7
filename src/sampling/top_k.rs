//! Top-k: keep the k highest logits, sorted.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::candidates::apply_top_k;
use super::{Candidates, Empty, Sampler};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct TopK {
    k: i32,
    graph: GraphBound,
}

impl TopK {
    /// `k <= 0` is a no-op sampler ("?top-k").
    pub fn boxed(k: i32) -> Box<dyn Sampler> {
        if k <= 0 {
            Box::new(Empty::new(c"?top-k"))
        } else {
            Box::new(TopK {
                k,
                graph: GraphBound::default(),
            })
        }
    }
}

impl Sampler for TopK {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"top-k", c"+top-k", c"-top-k"])
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        apply_top_k(cur, self.k);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for TopK {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::top_k(g, d, self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::Dist;
    use super::*;

    fn run(k: i32, expected: &[f32]) {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        TopK::boxed(k).apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn keeps_the_k_best_sorted() {
        run(1, &[1.0]);
        run(3, &[0.44444, 0.33333, 0.22222]);
        run(4, &[0.4, 0.3, 0.2, 0.1]);
        run(0, &[0.1, 0.2, 0.3, 0.4]);
        run(1000, &[0.4, 0.3, 0.2, 0.1]);
    }

    #[test]
    fn noop_is_named_like_llama_cpp() {
        assert_eq!(TopK::boxed(0).name(), c"?top-k");
        assert_eq!(TopK::boxed(-5).name(), c"?top-k");
        assert_eq!(TopK::boxed(5).name(), c"top-k");
    }

    #[test]
    fn large_vocab_keeps_the_top() {
        // A real vocabulary's size; a smaller one under Miri, which is slow, on the same path.
        let n = if cfg!(miri) { 1000 } else { 10000 };
        let logits: Vec<f32> = (0..n).map(|i| (i as f32).ln()).collect();
        let mut v = from_logits(&logits);
        let mut c = Candidates::new(&mut v, -1, false);
        TopK::boxed(100).apply(&mut c);
        assert_eq!(c.len(), 100);
        assert_eq!(c.data()[0].id, n - 1);
        assert_eq!(c.data()[99].id, n - 100);
    }
}
