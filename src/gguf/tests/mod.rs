//! Tests of the GGUF reader over files built in memory, plus the real models when present.

mod malformed;
mod meta_string;
mod real_models;
mod valid;
pub(crate) mod writer;

use crate::error::Error;
use crate::gguf::GgufFile;

/// Parses a file that must be rejected; returns the error's byte offset and message.
fn parse_err(bytes: &[u8]) -> (u64, String) {
    match GgufFile::parse(bytes) {
        Ok(_) => panic!("a malformed file was accepted"),
        Err(Error::Gguf { at, msg }) => (at, msg),
        Err(other) => panic!("expected a GGUF error, got: {other}"),
    }
}

/// Asserts the file is rejected with a message containing every one of `parts`; returns the offset.
fn assert_rejected(bytes: &[u8], parts: &[&str]) -> u64 {
    let (at, msg) = parse_err(bytes);
    for part in parts {
        assert!(msg.contains(part), "message {msg:?} does not contain {part:?}");
    }
    at
}

fn parse_ok(bytes: &[u8]) -> GgufFile {
    match GgufFile::parse(bytes) {
        Ok(f) => f,
        Err(e) => panic!("a valid file was rejected: {e}"),
    }
}

/// Offset of the first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> u64 {
    match hay.windows(needle.len()).position(|w| w == needle) {
        Some(p) => p as u64,
        None => panic!("{:?} not found", String::from_utf8_lossy(needle)),
    }
}
