//! Where the tests find the test models and llama.cpp's recorded answers for them
//! (`tests/reference/<model>/`, written by `scripts/record-reference.sh`).

use std::path::PathBuf;

/// The test models: (file name in the model cache, directory under `tests/reference/`).
pub(crate) const SMOLLM2: (&str, &str) = ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct-q4_1");
pub(crate) const GEMMA3: (&str, &str) = ("gemma-3-270m-q4_k_m.gguf", "gemma3-270m-q4_k_m");

/// `$ENGINE_MODEL_DIR`, else `~/.cache/engine/models` (where `scripts/fetch-models.sh` puts them).
pub(crate) fn model_dir() -> PathBuf {
    match std::env::var_os("ENGINE_MODEL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/engine/models"),
    }
}

/// A test model's path; a missing model fails the test (tests never skip).
pub(crate) fn model_path(file: &str) -> String {
    let p = model_dir().join(file);
    assert!(
        p.exists(),
        "model {} is missing: run scripts/fetch-models.sh",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

pub(crate) fn reference_dir(model_ref: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference")
        .join(model_ref)
}

/// The non-empty lines of a reference file, without its first line saying who recorded it.
pub(crate) fn reference_lines(model_ref: &str, file: &str) -> Vec<String> {
    let path = reference_dir(model_ref).join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read reference {} ({e})", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("{\"recorded\":"))
        .map(str::to_owned)
        .collect()
}
