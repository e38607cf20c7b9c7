//! engine: a drop-in replacement for llama.cpp's C API (llama.h), written in Rust over ggml.
//!
//! Layers (docs/architecture.md): `ffi` is the C surface; below it the engine types in plain Rust.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod error;
pub mod log;

pub mod arch;
pub mod chat;
pub mod context;
pub mod ffi;
pub mod ggml;
pub mod gguf;
pub mod graph;
pub mod kv;
pub mod model;
pub mod sampling;
pub mod vocab;

#[cfg(test)]
pub(crate) mod test_data;

pub use error::{Error, Result};
