//! Logit bias: add a fixed bias to given tokens' logits.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::{Candidates, Empty, Sampler, Token};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct LogitBias {
    /// Only the graph's ops need it (0: unknown, which keeps the sampler off the graph).
    n_vocab: usize,
    biases: Vec<(Token, f32)>,
    to_search: Vec<(Token, f32)>,
    graph: GraphBound,
}

impl LogitBias {
    /// No biases is a no-op sampler ("?logit-bias").
    pub fn boxed(n_vocab: i32, biases: Vec<(Token, f32)>) -> Box<dyn Sampler> {
        if biases.is_empty() {
            Box::new(Empty::new(c"?logit-bias"))
        } else {
            Box::new(LogitBias {
                n_vocab: n_vocab.max(0) as usize,
                biases,
                to_search: Vec::new(),
                graph: GraphBound::default(),
            })
        }
    }
}

impl Sampler for LogitBias {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"logit-bias", c"+logit-bias", c"-logit-bias"])
    }

    /// A token still at its own index (the array as built from the logits) is biased directly; the
    /// others are searched for, each candidate taking the first bias listed for its id.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        self.to_search.clear();
        let data = cur.data_mut();
        for &(token, bias) in &self.biases {
            match usize::try_from(token).ok().and_then(|i| data.get_mut(i)) {
                Some(d) if d.id == token => d.logit += bias,
                _ => self.to_search.push((token, bias)),
            }
        }
        if self.to_search.is_empty() {
            return;
        }
        for d in data {
            if let Some(&(_, bias)) = self.to_search.iter().find(|(t, _)| *t == d.id) {
                d.logit += bias;
            }
        }
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for LogitBias {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    /// Every biased token must be in the vocabulary (ggml would write outside the row).
    fn supports(&self, _n_outputs_max_per_seq: u32) -> bool {
        self.biases
            .iter()
            .all(|&(t, _)| usize::try_from(t).is_ok_and(|t| t < self.n_vocab))
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::logit_bias(g, d, &mut self.graph, self.n_vocab, self.biases.len())
    }

    fn set_input(&mut self) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::logit_bias_set_input(&self.graph, &self.biases)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::*;

    #[test]
    fn biases_in_place_and_shuffled() {
        let mut s = LogitBias::boxed(100, vec![(1, 2.0), (3, -1.0), (9, 5.0)]);
        let mut v = from_logits(&[0.0; 4]);
        v.swap(0, 3); // ids 3,1,2,0: token 3 is no longer at index 3
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        let got: Vec<(Token, f32)> = c.data().iter().map(|d| (d.id, d.logit)).collect();
        assert_eq!(got, vec![(3, -1.0), (1, 2.0), (2, 0.0), (0, 0.0)]);
    }
}
