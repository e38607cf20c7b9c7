//! What llama.cpp returns for a sampler whose parameters make it a no-op (top-k with k <= 0, temp 1,
//! ...): a sampler that does nothing, named "?top-k", "?temp", ...

use super::{Candidates, Sampler};
use std::ffi::CStr;

#[derive(Clone)]
pub struct Empty {
    name: &'static CStr,
}

impl Empty {
    pub fn new(name: &'static CStr) -> Self {
        Empty { name }
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
}
