//! Opaque C handles and the engine objects behind them. A handle is the address of a Rust object:
//! `Box::into_raw` for things C owns and frees (model, context), or the address of a field inside
//! one of them (vocab inside model). Every function checks for NULL before use.

use super::types::{llama_batch_ext, llama_context, llama_memory_t, llama_model, llama_vocab};
use crate::context::{BatchExt, Context, Resolved};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::vocab::Vocab;
use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The model handles C holds and has not freed. A model is shared (`Arc`) by its handle and its
/// contexts, so `llama_model_free` before `llama_free` leaves the model to its last context; the
/// record makes a second `llama_model_free` of a handle (or of anything that never was one) a
/// refusal instead of a second release.
static LIVE_MODELS: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// # Safety
/// `p` must be NULL or a model handle whose model is alive (its handle not freed, or a context of
/// it alive).
pub(crate) unsafe fn model<'a>(p: *const llama_model) -> Result<&'a Model> {
    // SAFETY: non-NULL model handles are `Arc<Model>` pointers kept alive by the handle or a context.
    unsafe { p.cast::<Model>().as_ref() }.ok_or_else(|| Error::invalid("model is NULL"))
}

pub(crate) fn model_into_raw(m: Model) -> *mut llama_model {
    let p = Arc::into_raw(Arc::new(m));
    LIVE_MODELS.lock().insert(p as usize);
    p.cast_mut().cast()
}

/// Release the handle's share of the model; refused for a handle that is not live.
///
/// # Safety
/// `p` must be NULL or a pointer C got from a model loader.
pub(crate) unsafe fn model_free(p: *mut llama_model) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    if !LIVE_MODELS.lock().remove(&(p as usize)) {
        return Err(Error::invalid(
            "not a live model handle (freed already, or never a model): nothing freed",
        ));
    }
    // SAFETY: the handle came from `Arc::into_raw` in `model_into_raw` and was live: its share is
    // released once (the record no longer holds it).
    drop(unsafe { Arc::from_raw(p.cast_const().cast::<Model>()) });
    Ok(())
}

/// A share of the model behind a live handle, for a context to keep it alive.
///
/// # Safety
/// `p` must be NULL or a model handle whose model is alive.
pub(crate) unsafe fn model_share(p: *const llama_model) -> Result<Arc<Model>> {
    if p.is_null() {
        return Err(Error::invalid("model is NULL"));
    }
    let p = p.cast::<Model>();
    // SAFETY: model handles are `Arc::into_raw` pointers whose model is alive (contract): one more
    // share is taken and handed over.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
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

/// What a context handle points at. The context itself is behind a lock that each call takes for
/// its duration, so a callback the context is running (abort, eval, a sampler's functions, the log)
/// that calls back into it cannot make a second `&mut` to it: such a call, or one from a second
/// thread at the same time, gets its failure value and a log line. What never changes after
/// creation sits beside the lock, so the getters llama.cpp's callbacks use (`llama_n_ctx`,
/// `llama_get_model`, ...) answer at any time.
pub(crate) struct CtxCell {
    /// The resolved parameters at creation, for the getters of values that never change.
    pub params: Resolved,
    memory: bool,
    inner: Mutex<Ctx>,
    /// The context's share of its model: dropped after the context (fields drop in order).
    model: Arc<Model>,
}

impl CtxCell {
    /// The model the context computes with (the same `llama_get_model` hands out).
    pub fn model(&self) -> &Model {
        &self.model
    }
}

/// # Safety
/// `p` must be NULL or a live context handle.
pub(crate) unsafe fn ctx<'a>(p: *const llama_context) -> Result<&'a CtxCell> {
    // SAFETY: non-NULL context handles are `Box<CtxCell>` pointers that the caller keeps alive; the
    // cell is only ever shared (its mutable part is behind the lock).
    unsafe { p.cast::<CtxCell>().as_ref() }.ok_or_else(|| Error::invalid("ctx is NULL"))
}

/// The context itself, for the length of one call.
///
/// # Safety
/// As [`ctx`].
pub(crate) unsafe fn ctx_mut<'a>(p: *const llama_context) -> Result<MutexGuard<'a, Ctx>> {
    // SAFETY: forwarded contract.
    let cell = unsafe { ctx(p) }?;
    cell.inner.try_lock().ok_or_else(|| {
        Error::invalid(
            "the context is busy: called back from one of its own callbacks (abort, eval, sampler, log) \
             or from a second thread at the same time",
        )
    })
}

/// The handle of context `c`, which keeps `model` (the model `c` borrows) alive.
pub(crate) fn ctx_into_raw(c: Ctx, model: Arc<Model>) -> *mut llama_context {
    let cell = CtxCell {
        params: c.params,
        memory: c.can_decode(),
        inner: Mutex::new(c),
        model,
    };
    Box::into_raw(Box::new(cell)).cast()
}

/// # Safety
/// `p` must be NULL or a handle from `ctx_into_raw`, freed once, not in use by a call.
pub(crate) unsafe fn ctx_free(p: *mut llama_context) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    // SAFETY: forwarded contract.
    drop(unsafe { ctx_mut(p) }?);
    // SAFETY: the handle came from `Box::into_raw` in `ctx_into_raw`, and no call holds it.
    drop(unsafe { Box::from_raw(p.cast::<CtxCell>()) });
    Ok(())
}

/// The memory handle of a context is the context itself (its KV cache lives inside). A context on
/// a vocab-only model has no memory: NULL, as in llama.cpp.
pub(crate) fn memory_handle(c: &CtxCell) -> llama_memory_t {
    if c.memory {
        (c as *const CtxCell).cast_mut().cast()
    } else {
        std::ptr::null_mut()
    }
}

/// # Safety
/// `p` must be NULL or a memory handle from `llama_get_memory` of a live context.
pub(crate) unsafe fn memory<'a>(p: llama_memory_t) -> Result<MutexGuard<'a, Ctx>> {
    if p.is_null() {
        return Err(Error::invalid("mem is NULL"));
    }
    // SAFETY: memory handles are context handles (see `memory_handle`).
    unsafe { ctx_mut(p.cast_const().cast()) }
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
