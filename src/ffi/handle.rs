//! Opaque C handles and the engine objects behind them. A handle is the address of a Rust object:
//! `Box::into_raw` for things C owns and frees (model, context), or the address of a field inside
//! one of them (vocab inside model). Every function checks for NULL before use.

use super::types::{llama_model, llama_vocab};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::vocab::Vocab;

/// # Safety
/// `p` must be NULL or a handle returned by a model loader and not yet freed.
pub(crate) unsafe fn model<'a>(p: *const llama_model) -> Result<&'a Model> {
    // SAFETY: non-NULL model handles are `Box<Model>` pointers that the caller keeps alive.
    unsafe { p.cast::<Model>().as_ref() }.ok_or_else(|| Error::invalid("model is NULL"))
}

pub(crate) fn model_into_raw(m: Model) -> *mut llama_model {
    Box::into_raw(Box::new(m)).cast()
}

/// # Safety
/// `p` must be NULL or a handle from `model_into_raw` that is freed only once.
pub(crate) unsafe fn model_free(p: *mut llama_model) {
    if !p.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `model_into_raw`.
        drop(unsafe { Box::from_raw(p.cast::<Model>()) });
    }
}

/// # Safety
/// `p` must be NULL or a vocab handle from `llama_model_get_vocab` whose model is alive.
pub(crate) unsafe fn vocab<'a>(p: *const llama_vocab) -> Result<&'a Vocab> {
    // SAFETY: non-NULL vocab handles point at the `Vocab` inside a live `Model`.
    unsafe { p.cast::<Vocab>().as_ref() }.ok_or_else(|| Error::invalid("vocab is NULL"))
}

pub(crate) fn vocab_handle(v: &Vocab) -> *const llama_vocab {
    (v as *const Vocab).cast()
}
