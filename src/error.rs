//! The crate's one error type. `ffi/` turns it into llama.h return values and log lines.

use std::io;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call on a file failed.
    #[error("{what} '{path}': {source}")]
    Io {
        what: &'static str,
        path: String,
        source: io::Error,
    },

    /// The GGUF file is malformed; `at` is the byte offset where the problem was found.
    #[error("malformed GGUF file at byte {at}: {msg}")]
    Gguf { at: u64, msg: String },

    /// The GGUF file is well formed but does not describe a model we can load.
    #[error("invalid model: {0}")]
    Model(String),

    /// A LoRA adapter that does not fit the model (or is not one).
    #[error("invalid adapter: {0}")]
    Adapter(String),

    /// The caller passed something the API does not accept (NULL pointer, out-of-range value, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The caller asked us to stop (progress callback returned false).
    #[error("cancelled: {0}")]
    Cancelled(String),

    /// A ggml call failed (allocation, backend initialisation, ...).
    #[error("ggml: {0}")]
    Ggml(String),

    /// A buffer sized by the call does not fit in memory.
    #[error("out of memory: {0}")]
    OutOfMemory(String),

    /// A tokenizer or vocabulary problem.
    #[error("vocab: {0}")]
    Vocab(String),

    /// The feature exists in llama.h but not in this engine yet.
    #[error("not implemented yet: {0}")]
    NotImplemented(&'static str),

    /// A panic inside the engine, caught at the C boundary.
    #[error("internal error: {0}")]
    Internal(String),
}

/// A failed ggml call is an `Error::Ggml`; a caller that knows more adds its context first.
impl From<crate::ggml::GgmlError> for Error {
    fn from(e: crate::ggml::GgmlError) -> Self {
        Error::Ggml(e.to_string())
    }
}

impl Error {
    pub fn gguf(at: u64, msg: impl Into<String>) -> Self {
        Error::Gguf { at, msg: msg.into() }
    }

    pub fn model(msg: impl Into<String>) -> Self {
        Error::Model(msg.into())
    }

    pub fn adapter(msg: impl Into<String>) -> Self {
        Error::Adapter(msg.into())
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    pub fn io(what: &'static str, path: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
