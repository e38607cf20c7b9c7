//! Greedy: select the first candidate with the highest logit.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::{Candidates, Sampler};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone, Default)]
pub struct Greedy {
    graph: GraphBound,
}

impl Sampler for Greedy {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"greedy", c"+greedy", c"-greedy"])
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        let data = cur.data();
        if data.is_empty() {
            // llama.cpp would report index 0 of an empty array; an invalid index must not escape.
            cur.selected = -1;
            return;
        }
        let (mut best, mut best_logit) = (0, data[0].logit);
        for (i, d) in data.iter().enumerate().skip(1) {
            if d.logit > best_logit {
                (best, best_logit) = (i, d.logit);
            }
        }
        cur.selected = best as i64;
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for Greedy {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::greedy(g, d)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    #[test]
    fn picks_the_first_maximum() {
        let mut v = from_logits(&[1.0, 5.0, 5.0, -2.0]);
        let mut c = Candidates::new(&mut v, -1, false);
        Greedy::default().apply(&mut c);
        assert_eq!(c.selected, 1);
    }

    #[test]
    fn empty_selects_nothing() {
        let mut c = Candidates::new(&mut [], 3, false);
        Greedy::default().apply(&mut c);
        assert_eq!(c.selected, -1);
    }
}
