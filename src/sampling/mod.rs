//! Every llama.h sampler in plain Rust, with llama.cpp's exact arithmetic: the same float/double
//! operations in the same order, the same random stream (`rng`) and the same element order after
//! sorting (`cxx_sort` reproduces libstdc++'s algorithms), so seeded results are identical.
//!
//! The C objects (`struct llama_sampler`, the vtable, the chain of C pointers) live in `ffi/sampler.rs`;
//! each built-in sampler there owns one `Box<dyn Sampler>` from here.

pub mod backend;
mod candidates;
mod cxx_sort;
mod rng;

mod adaptive_p;
mod dist;
mod dry;
mod empty;
pub mod grammar;
mod greedy;
mod infill;
mod logit_bias;
mod min_p;
mod mirostat;
mod penalties;
mod temp;
mod top_k;
mod top_n_sigma;
mod top_p;
mod typical;
mod vocab;
mod xtc;

pub use adaptive_p::AdaptiveP;
pub use candidates::{Candidates, TokenData};
pub use dist::Dist;
pub use dry::Dry;
pub use empty::Empty;
pub use grammar::GrammarSampler;
pub use greedy::Greedy;
pub use infill::Infill;
pub use logit_bias::LogitBias;
pub use min_p::MinP;
pub use mirostat::{Mirostat, MirostatV2};
pub use penalties::Penalties;
pub use temp::{Temp, TempExt};
pub use top_k::TopK;
pub use top_n_sigma::TopNSigma;
pub use top_p::TopP;
pub use typical::Typical;
pub use vocab::TokenVocab;
pub use xtc::Xtc;

use std::any::Any;
use std::ffi::CStr;

/// A token id, as llama.h's `llama_token`.
pub type Token = i32;

/// `LLAMA_DEFAULT_SEED`: asks for a random seed.
pub const DEFAULT_SEED: u32 = 0xFFFF_FFFF;

/// `LLAMA_TOKEN_NULL`.
pub const TOKEN_NULL: Token = -1;

/// One sampler of a chain. `apply` edits the candidates (and may select one); `accept` tells the sampler
/// which token was finally chosen.
pub trait Sampler: Any + Send {
    /// The name llama.cpp reports (`llama_sampler_name`).
    fn name(&self) -> &'static CStr;

    fn accept(&mut self, _token: Token) {}

    fn apply(&mut self, cur: &mut Candidates<'_>);

    /// Back to the state right after construction (a random seed is drawn again if it was random).
    fn reset(&mut self) {}

    /// A copy with the same configuration and state (what llama.cpp's clone copies).
    fn box_clone(&self) -> Box<dyn Sampler>;

    /// The seed in use, for the samplers whose seed `llama_sampler_get_seed` reports.
    fn seed(&self) -> Option<u32> {
        None
    }

    /// The sampler's ops for backend sampling, for the samplers llama.cpp runs in the graph.
    fn graph_part(&mut self) -> Option<&mut dyn backend::GraphPart> {
        None
    }
}
