//! engine: a drop-in replacement for llama.cpp's C API (llama.h), written in Rust over ggml.
//!
//! Layers (docs/architecture.md): `ffi` is the C surface; below it the engine types in plain Rust.
#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` lives in two modules only: the C boundary (`ffi`) and the ggml wrappers (`ggml`).
#![deny(unsafe_code)]

pub mod error;
pub mod fallible;
pub mod log;

pub mod arch;
pub mod chat;
pub mod context;
#[allow(unsafe_code)]
pub mod ffi;
#[allow(unsafe_code)]
pub mod ggml;
pub mod gguf;
pub mod graph;
pub mod kv;
pub mod model;
pub mod recurrent;
pub mod sampling;
pub mod vocab;

#[cfg(test)]
pub(crate) mod test_data;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The two `allow(unsafe_code)` above are the only ones: no other module opts out.
    #[test]
    fn unsafe_is_allowed_only_in_ffi_and_ggml() {
        fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).expect("a source directory") {
                let path = e.expect("a directory entry").path();
                if path.is_dir() {
                    visit(&path, found);
                } else if path.extension().is_some_and(|x| x == "rs") && !path.ends_with("src/lib.rs") {
                    let src = std::fs::read_to_string(&path).expect("a source file");
                    if src.contains(concat!("allow(", "unsafe_code)")) {
                        found.push(path.display().to_string());
                    }
                }
            }
        }
        let mut found = Vec::new();
        visit(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src")),
            &mut found,
        );
        assert!(found.is_empty(), "modules that allow unsafe code: {found:?}");
    }
}
