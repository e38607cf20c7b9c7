//! The `extern "C"` surface of llama.h, one file per area. Every exported function's body is one
//! [`entry::entry!`]: no panic unwinds into C, every failure is logged with its reason, remembered
//! for `llama_engine_last_error()`, and turned into the failure value llama.h documents.

#![allow(clippy::missing_safety_doc)] // each exported function's contract is its llama.h documentation

pub mod types;

mod entry;

mod adapter;
mod batch;
mod chat;
mod context;
/// cbindgen:ignore
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
mod handle;
mod log;
mod memory;
/// cbindgen:ignore
mod memory_object;
mod misc;
mod model;
mod opt;
mod params;
mod perf;
mod registry;
mod sampler;
mod sampler_backend;
mod state;
mod strings;
mod vocab;
// Last, so the extensions close the generated header.
mod engine_ext;
/// cbindgen:ignore
mod llama_ext;

#[cfg(test)]
mod tests {
    #[test]
    fn committed_header_equals_generated() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/llama.h"));
        let committed =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/llama.h")).expect("include/llama.h");
        assert!(
            generated == committed,
            "include/llama.h differs from what cbindgen generates: build without CI set to regenerate it, then commit it"
        );
    }
}
