//! What llama.cpp returns for a sampler whose parameters make it a no-op (top-k with k <= 0, temp 1,
//! ...): a sampler that does nothing, named "?top-k", "?temp", ...

use super::backend::{GraphBound, GraphData, GraphPart};
use super::{Candidates, Sampler};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct Empty {
    name: &'static CStr,
    graph: GraphBound,
}

impl Empty {
    pub fn new(name: &'static CStr) -> Self {
        Empty {
            name,
            graph: GraphBound::default(),
        }
    }
}

impl Sampler for Empty {
    fn name(&self) -> &'static CStr {
        self.name
    }

    fn apply(&mut self, _cur: &mut Candidates<'_>) {}

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    /// A no-op in the graph too, so it does not end a chain's graph part.
    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for Empty {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, _g: &mut Graph, _d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        Ok(())
    }
}
