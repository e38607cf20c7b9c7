//! The vocabulary and tokenizers (placeholder until the vocab work lands; see the vocab helper's brief).

use crate::error::Result;
use crate::gguf::GgufFile;

pub struct Vocab {
    n_tokens: usize,
}

impl Vocab {
    pub fn from_gguf(g: &GgufFile) -> Result<Vocab> {
        let n_tokens = match g.get("tokenizer.ggml.tokens") {
            Some(crate::gguf::Value::Array(a)) => a.len(),
            _ => 0,
        };
        Ok(Vocab { n_tokens })
    }

    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }
}
