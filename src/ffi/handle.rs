//! Opaque C handles and the engine objects behind them. A handle is the address of a Rust object:
//! `Box::into_raw` for things C owns and frees (model, context), or the address of a field inside
//! one of them (vocab inside model). Every function checks for NULL before use.

use super::types::{llama_batch_ext, llama_context, llama_memory_t, llama_model, llama_vocab};
use crate::context::{BatchExt, Context};
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

/// A context borrows its model for its whole life; llama.h makes the caller keep the model alive
/// until the context is freed, which is what the `'static` here stands for.
pub(crate) type Ctx = Context<'static>;

/// # Safety
/// `p` must be NULL or a live context handle, used by one thread at a time (llama.h's rule).
pub(crate) unsafe fn ctx<'a>(p: *const llama_context) -> Result<&'a Ctx> {
    // SAFETY: non-NULL context handles are `Box<Ctx>` pointers that the caller keeps alive.
    unsafe { p.cast::<Ctx>().as_ref() }.ok_or_else(|| Error::invalid("ctx is NULL"))
}

/// # Safety
/// As [`ctx`], and no other reference to the context may be in use.
pub(crate) unsafe fn ctx_mut<'a>(p: *mut llama_context) -> Result<&'a mut Ctx> {
    // SAFETY: as above; one thread at a time means no aliasing borrow exists during the call.
    unsafe { p.cast::<Ctx>().as_mut() }.ok_or_else(|| Error::invalid("ctx is NULL"))
}

pub(crate) fn ctx_into_raw(c: Ctx) -> *mut llama_context {
    Box::into_raw(Box::new(c)).cast()
}

/// # Safety
/// `p` must be NULL or a handle from `ctx_into_raw`, freed once.
pub(crate) unsafe fn ctx_free(p: *mut llama_context) {
    if !p.is_null() {
        // SAFETY: the handle came from `Box::into_raw` in `ctx_into_raw`.
        drop(unsafe { Box::from_raw(p.cast::<Ctx>()) });
    }
}

/// The memory handle of a context is the context itself (its KV cache lives inside). A context on
/// a vocab-only model has no memory: NULL, as in llama.cpp.
pub(crate) fn memory_handle(c: &Ctx) -> llama_memory_t {
    if c.can_decode() {
        (c as *const Ctx).cast_mut().cast()
    } else {
        std::ptr::null_mut()
    }
}

/// # Safety
/// `p` must be NULL or a memory handle from `llama_get_memory` of a live context, used by the
/// thread that uses the context.
pub(crate) unsafe fn memory<'a>(p: llama_memory_t) -> Result<&'a mut Ctx> {
    // SAFETY: memory handles are context pointers (see `memory_handle`).
    unsafe { p.cast::<Ctx>().as_mut() }.ok_or_else(|| Error::invalid("mem is NULL"))
}

/// # Safety
/// `p` must be NULL or a live handle from `llama_batch_ext_init`.
pub(crate) unsafe fn batch_ext<'a>(p: *mut llama_batch_ext) -> Result<&'a mut BatchExt> {
    // SAFETY: batch handles are `Box<BatchExt>` pointers.
    unsafe { p.cast::<BatchExt>().as_mut() }.ok_or_else(|| Error::invalid("batch is NULL"))
}

pub(crate) fn batch_ext_into_raw(b: BatchExt) -> *mut llama_batch_ext {
    Box::into_raw(Box::new(b)).cast()
}

/// # Safety
/// `p` must be NULL or a handle from `batch_ext_into_raw`, freed once.
pub(crate) unsafe fn batch_ext_free(p: *mut llama_batch_ext) {
    if !p.is_null() {
        // SAFETY: the handle came from `Box::into_raw`.
        drop(unsafe { Box::from_raw(p.cast::<BatchExt>()) });
    }
}
