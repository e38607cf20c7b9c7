//! Opaque C handles and the engine objects behind them. Model, vocab, context and memory handles
//! are keys of the books in `registry` (each the address of a small allocation of its own), so a
//! handle is checked by lookup before anything is read, and a freed or foreign one is refused with
//! a message. Objects are shared (`Arc`) between their handle and what uses them: a context holds
//! its model, a call holds the context it works on, so nothing is dropped under a running call.

use super::registry::Handles;
use super::types::{llama_adapter_lora, llama_batch_ext, llama_context, llama_memory_t, llama_model, llama_vocab};
use crate::context::{BatchExt, Context, Params, Resolved};
use crate::error::{Error, Result};
use crate::model::lora::LoraAdapter;
use crate::model::quantize::TypeSelection;
use crate::model::Model;
use crate::vocab::Vocab;
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};
use std::ffi::c_void;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Weak};

/// What the book knows of a model handle. The handle's own share goes at `llama_model_free`; the
/// entry stays (answering lookups, refusing a second free) while contexts still use the model.
struct ModelEntry {
    share: Option<Arc<Model>>,
    model: Weak<Model>,
    vocab: usize,
}

struct CtxEntry {
    cell: Arc<CtxCell>,
    /// The key of the context's memory handle (0 for a context without memory).
    memory: usize,
}

static MODELS: Mutex<Handles<ModelEntry>> = Mutex::new(Handles::new("model"));
static VOCABS: Mutex<Handles<Weak<Model>>> = Mutex::new(Handles::new("vocab"));
static CONTEXTS: Mutex<Handles<CtxEntry>> = Mutex::new(Handles::new("ctx"));
/// Memory handles, mapped to the key of their context.
static MEMORIES: Mutex<Handles<usize>> = Mutex::new(Handles::new("mem"));
/// llama-ext.h's quantization states (`quantize_state_impl *`).
static TYPE_SELECTIONS: Mutex<Handles<TypeSelection>> = Mutex::new(Handles::new("quantize_state_impl"));

pub(crate) fn type_selection_into_raw(t: TypeSelection) -> *mut c_void {
    TYPE_SELECTIONS.lock().insert(t) as *mut c_void
}

/// `f` on the quantization state behind `p` (the book stays locked meanwhile: the calls are short
/// and call nothing back).
pub(crate) fn with_type_selection<R>(p: *const c_void, f: impl FnOnce(&mut TypeSelection) -> R) -> Result<R> {
    Ok(f(TYPE_SELECTIONS.lock().get_mut(key(p))?))
}

pub(crate) fn type_selection_free(p: *mut c_void) -> Result<()> {
    TYPE_SELECTIONS.lock().remove(key(p)).map(drop)
}

fn key<T>(p: *const T) -> usize {
    p as usize
}

/// The model behind a model handle (alive while the handle or a context of it is).
pub(crate) fn model(p: *const llama_model) -> Result<Arc<Model>> {
    let book = MODELS.lock();
    let e = book.get(key(p))?;
    e.model
        .upgrade()
        .ok_or_else(|| Error::Internal("a model handle outlived its model".into()))
}

pub(crate) fn model_into_raw(m: Model) -> *mut llama_model {
    let share = Arc::new(m);
    let vocab = VOCABS.lock().insert(Arc::downgrade(&share));
    let entry = ModelEntry {
        model: Arc::downgrade(&share),
        share: Some(share),
        vocab,
    };
    MODELS.lock().insert(entry) as *mut llama_model
}

/// Release the handle's share of the model; refused for a handle that is not live.
pub(crate) fn model_free(p: *mut llama_model) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    let share = MODELS.lock().get_mut(key(p))?.share.take();
    let share = share
        .ok_or_else(|| Error::invalid("the model was freed already (its contexts still hold it): nothing freed"))?;
    drop(share);
    // A model's adapters go with it, as in llama.cpp (contexts applying one keep it until then).
    let adapters = ADAPTERS.lock().remove_if(|e| e.model == key(p));
    drop(adapters);
    forget_dead_models();
    return_freed_memory();
    Ok(())
}

/// Hands the memory a freed context or model leaves back to the system. glibc's allocator keeps
/// freed chunks in its heap, and the buffers of contexts made and freed in turn fragment it until
/// the process holds hundreds of megabytes it does not use (c-tests/test_churn.c).
fn return_freed_memory() {
    // SAFETY: malloc_trim takes no pointer and only releases memory that is free.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the book knows of a LoRA adapter handle: the adapter and its model's handle.
struct AdapterEntry {
    adapter: Arc<LoraAdapter>,
    model: usize,
}

static ADAPTERS: Mutex<Handles<AdapterEntry>> = Mutex::new(Handles::new("adapter"));

pub(crate) fn adapter_into_raw(a: LoraAdapter, model: *const llama_model) -> *mut llama_adapter_lora {
    let entry = AdapterEntry {
        adapter: Arc::new(a),
        model: key(model),
    };
    ADAPTERS.lock().insert(entry) as *mut llama_adapter_lora
}

/// The adapter behind a live adapter handle, and the handle of the model it was loaded for.
pub(crate) fn adapter(p: *const llama_adapter_lora) -> Result<(Arc<LoraAdapter>, *const llama_model)> {
    let book = ADAPTERS.lock();
    let e = book.get(key(p))?;
    Ok((e.adapter.clone(), e.model as *const llama_model))
}

/// Free an adapter handle (NULL: nothing); contexts applying the adapter keep it until they stop.
pub(crate) fn adapter_free(p: *mut llama_adapter_lora) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    let e = ADAPTERS.lock().remove(key(p))?;
    drop(e);
    Ok(())
}

/// Retire the handles of models that are gone (freed by their handle, and no context left).
fn forget_dead_models() {
    let gone = MODELS
        .lock()
        .remove_if(|e| e.share.is_none() && e.model.strong_count() == 0);
    for e in gone {
        // The vocab handle dies with its model; a miss only means it was retired already.
        let _ = VOCABS.lock().remove(e.vocab);
    }
}

/// The vocab handle of a model handle.
pub(crate) fn vocab_handle(p: *const llama_model) -> Result<*const llama_vocab> {
    Ok(MODELS.lock().get(key(p))?.vocab as *const llama_vocab)
}

/// The model whose vocabulary a vocab handle is.
pub(crate) fn vocab(p: *const llama_vocab) -> Result<VocabRef> {
    let book = VOCABS.lock();
    let model = book.get(key(p))?.upgrade();
    model
        .map(VocabRef)
        .ok_or_else(|| Error::invalid("the vocab's model was freed"))
}

/// A vocabulary, kept alive (with its model) for as long as this is held.
pub(crate) struct VocabRef(Arc<Model>);

impl Deref for VocabRef {
    type Target = Vocab;
    fn deref(&self) -> &Vocab {
        &self.0.vocab
    }
}

/// A context borrows its model for its whole life; the cell holding the context also holds a
/// share of the model, dropped after the context, which is what the `'static` here stands for.
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
    /// The handle `llama_get_model` gives back (an address, never read through).
    pub model_handle: usize,
    inner: Arc<Mutex<Ctx>>,
    /// The context's share of its model, only held: dropped after the context (fields drop in
    /// order).
    _model: Arc<Model>,
}

/// The cell of a live context handle.
pub(crate) fn ctx(p: *const llama_context) -> Result<Arc<CtxCell>> {
    Ok(CONTEXTS.lock().get(key(p))?.cell.clone())
}

/// The context itself, for the length of one call. It keeps the cell (and so the model) alive even
/// if the handle is freed meanwhile from another thread.
pub(crate) struct CtxGuard {
    guard: ArcMutexGuard<RawMutex, Ctx>,
    _cell: Arc<CtxCell>,
}

impl Deref for CtxGuard {
    type Target = Ctx;
    fn deref(&self) -> &Ctx {
        &self.guard
    }
}

impl DerefMut for CtxGuard {
    fn deref_mut(&mut self) -> &mut Ctx {
        &mut self.guard
    }
}

fn lock(cell: Arc<CtxCell>) -> Result<CtxGuard> {
    let guard = cell.inner.try_lock_arc().ok_or_else(|| {
        Error::invalid(
            "the context is busy: called back from one of its own callbacks (abort, eval, sampler, log) \
             or from a second thread at the same time",
        )
    })?;
    Ok(CtxGuard { guard, _cell: cell })
}

pub(crate) fn ctx_mut(p: *const llama_context) -> Result<CtxGuard> {
    lock(ctx(p)?)
}

/// A new context on the model behind `model_handle`, and its handle.
pub(crate) fn ctx_new(model_handle: *const llama_model, p: Params) -> Result<*mut llama_context> {
    let share = model(model_handle)?;
    // SAFETY: the cell made below holds `share` and drops it after the context, and every call
    // holding the context holds the cell: the model outlives every use of this borrow.
    let m: &'static Model = unsafe { &*Arc::as_ptr(&share) };
    let c: Ctx = Context::new(m, p)?;
    let has_memory = c.has_memory();
    let cell = Arc::new(CtxCell {
        params: c.params,
        model_handle: key(model_handle),
        inner: Arc::new(Mutex::new(c)),
        _model: share,
    });
    let k = CONTEXTS.lock().insert(CtxEntry { cell, memory: 0 });
    if has_memory {
        // A memory handle answers llama.cpp's C++ memory interface too (`memory_object`).
        let memory = MEMORIES.lock().insert_tagged(k, super::memory_object::vtable());
        CONTEXTS.lock().get_mut(k)?.memory = memory;
    }
    Ok(k as *mut llama_context)
}

/// Free a context handle (and its memory handle); refused while a call is using the context.
pub(crate) fn ctx_free(p: *mut llama_context) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    let busy = ctx_mut(p)?;
    let entry = CONTEXTS.lock().remove(key(p))?;
    if entry.memory != 0 {
        MEMORIES.lock().remove(entry.memory)?;
    }
    drop(busy);
    drop(entry);
    forget_dead_models();
    return_freed_memory();
    Ok(())
}

/// The memory handle of a context: NULL for a context on a vocab-only model, as in llama.cpp.
pub(crate) fn memory_handle(p: *const llama_context) -> Result<llama_memory_t> {
    Ok(CONTEXTS.lock().get(key(p))?.memory as llama_memory_t)
}

/// The context whose memory a memory handle is, for the length of one call.
pub(crate) fn memory(p: llama_memory_t) -> Result<CtxGuard> {
    let ctx_key = *MEMORIES.lock().get(key(p))?;
    ctx_mut(ctx_key as *const llama_context)
}

/// Extended batches: each is used by one call at a time.
static BATCHES: Mutex<Handles<Arc<Mutex<BatchExt>>>> = Mutex::new(Handles::new("batch"));

/// The batch behind a live batch handle, for the length of one call.
pub(crate) fn batch_ext(p: *mut llama_batch_ext) -> Result<ArcMutexGuard<RawMutex, BatchExt>> {
    let b = BATCHES.lock().get(key(p))?.clone();
    b.try_lock_arc()
        .ok_or_else(|| Error::invalid("the batch is in use by another call"))
}

pub(crate) fn batch_ext_into_raw(b: BatchExt) -> *mut llama_batch_ext {
    BATCHES.lock().insert(Arc::new(Mutex::new(b))) as *mut llama_batch_ext
}

pub(crate) fn batch_ext_free(p: *mut llama_batch_ext) -> Result<()> {
    if p.is_null() {
        return Ok(());
    }
    let b = BATCHES.lock().remove(key(p))?;
    drop(b);
    Ok(())
}
