//! The two test models parse, with the facts llama.cpp reports for them.

use std::path::PathBuf;
use std::time::Instant;

use crate::gguf::{type_traits, Array, GgufFile, Value};

fn model_bytes(file: &str) -> Vec<u8> {
    let dir = match std::env::var_os("ENGINE_MODEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/engine/models"),
    };
    let path = dir.join(file);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read test model {} ({e}); run scripts/fetch-models.sh",
            path.display()
        )
    })
}

/// Parses the model, checks what holds for any well-formed model, and returns it.
fn parse_model(file: &str) -> GgufFile {
    let bytes = model_bytes(file);
    let start = Instant::now();
    let parsed = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
    let took = start.elapsed();
    // Release parses in ~10 ms; the bound is loose so that only accidental quadratic work trips it.
    let limit_ms = if cfg!(debug_assertions) { 5000 } else { 500 };
    assert!(took.as_millis() < limit_ms, "{file}: parsing took {took:?}");

    assert_eq!(parsed.version(), 3);
    assert_eq!(parsed.alignment(), 32);
    assert_eq!(parsed.data_offset() % 32, 0);
    assert!(parsed.data_offset() + parsed.data_size() <= bytes.len() as u64);
    for t in parsed.tensors() {
        assert_eq!(t.offset % 32, 0);
        assert!(type_traits(t.ggml_type).is_some());
        assert_eq!(parsed.tensor(&t.name), Some(t));
    }
    parsed
}

fn arch(f: &GgufFile) -> Option<&[u8]> {
    f.get("general.architecture").and_then(Value::as_str)
}

fn token_count(f: &GgufFile) -> Option<usize> {
    match f.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
        Some(Array::Str(tokens)) => Some(tokens.len()),
        _ => None,
    }
}

#[test]
fn smollm2_parses() {
    let f = parse_model("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(arch(&f), Some(&b"llama"[..]));
    assert_eq!(f.tensors().len(), 272);
    assert_eq!(f.metadata().len(), 33);
    assert_eq!(token_count(&f), Some(49152));
    assert_eq!(f.get("llama.block_count").and_then(Value::as_u32), Some(30));
    assert_eq!(f.get("llama.embedding_length").and_then(Value::as_u32), Some(576));
    let embd = f.tensor("token_embd.weight").map(|t| (t.ggml_type, t.n_dims, t.ne));
    assert_eq!(embd, Some((8, 2, [576, 49152, 1, 1])));
}

#[test]
fn gemma3_parses() {
    let f = parse_model("gemma-3-270m-q4_k_m.gguf");
    assert_eq!(arch(&f), Some(&b"gemma3"[..]));
    assert_eq!(f.tensors().len(), 236);
    assert_eq!(token_count(&f), Some(262144));
    assert_eq!(f.get("gemma3.block_count").and_then(Value::as_u32), Some(18));
    assert_eq!(f.get("gemma3.embedding_length").and_then(Value::as_u32), Some(640));
}
