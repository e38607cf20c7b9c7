//! The sampler API: `struct llama_sampler` objects around the Rust samplers of `crate::sampling`, the
//! chain (which holds C sampler pointers, ours or the caller's), and calls through any sampler's vtable.
//!
//! A built-in sampler is a `llama_sampler` whose `iface` is `RUST_IFACE` and whose `ctx` owns a
//! `Box<dyn Sampler>`; a chain's `iface` is `CHAIN_IFACE` and its `ctx` owns a `Chain`. Samplers made
//! with `llama_sampler_init` carry the caller's vtable and context. Every `llama_sampler` is a
//! `Box<llama_sampler>` allocated here, so `llama_sampler_free` can release any of them.
//!
//! The vtable functions run on the caller's thread, inside whatever llama_sampler_* call reached them.

use super::entry::entry;
use super::handle::ctx_mut;
use super::registry::Book;
use super::sampler_backend::{
    chain_backend_accept, chain_backend_apply, chain_backend_init, chain_backend_reset, chain_backend_set_input,
    rs_backend_apply, rs_backend_init, rs_backend_reset, rs_backend_set_input, ChainGraph,
};
use super::strings::c_str;
use super::types::*;
use crate::error::{Error, Result};
use crate::sampling::{self, Candidates, Sampler, TokenData, TokenVocab};
use crate::vocab::Vocab;
use parking_lot::Mutex;
use std::ffi::{c_char, CStr};
use std::mem::{align_of, offset_of, size_of};
use std::ptr;
use std::time::Instant;

// `llama_token_data` arrays are handed to the samplers as `TokenData` slices.
const _: () = {
    assert!(size_of::<TokenData>() == size_of::<llama_token_data>());
    assert!(align_of::<TokenData>() == align_of::<llama_token_data>());
    assert!(offset_of!(TokenData, id) == offset_of!(llama_token_data, id));
    assert!(offset_of!(TokenData, logit) == offset_of!(llama_token_data, logit));
    assert!(offset_of!(TokenData, p) == offset_of!(llama_token_data, p));
};

type BoxedSampler = Box<dyn Sampler>;

static RUST_IFACE: llama_sampler_i = llama_sampler_i {
    name: Some(rs_name),
    accept: Some(rs_accept),
    apply: Some(rs_apply),
    reset: Some(rs_reset),
    clone: Some(rs_clone),
    free: Some(rs_free),
    backend_init: None,
    backend_accept: None,
    backend_apply: None,
    backend_set_input: None,
    backend_reset: None,
    copy_state: Some(rs_copy_state),
};

/// The vtable of the built-in samplers llama.cpp can run in the graph.
static RUST_GRAPH_IFACE: llama_sampler_i = llama_sampler_i {
    backend_init: Some(rs_backend_init),
    backend_accept: None,
    backend_apply: Some(rs_backend_apply),
    backend_set_input: Some(rs_backend_set_input),
    backend_reset: Some(rs_backend_reset),
    ..RUST_IFACE
};

static CHAIN_IFACE: llama_sampler_i = llama_sampler_i {
    name: Some(chain_name),
    accept: Some(chain_accept),
    apply: Some(chain_apply),
    reset: Some(chain_reset),
    clone: Some(chain_clone),
    free: Some(chain_free),
    backend_init: Some(chain_backend_init),
    backend_accept: Some(chain_backend_accept),
    backend_apply: Some(chain_backend_apply),
    backend_set_input: Some(chain_backend_set_input),
    backend_reset: Some(chain_backend_reset),
    copy_state: Some(chain_copy_state),
};

/// C only reads through `iface`; the vtables are immutable statics.
fn iface_ptr(i: &'static llama_sampler_i) -> *mut llama_sampler_i {
    ptr::from_ref(i).cast_mut()
}

pub(super) struct Chain {
    no_perf: bool,
    pub(super) samplers: Vec<*mut llama_sampler>,
    /// Set once the chain is attached to a context (backend_init): its graph part.
    pub(super) graph: Option<ChainGraph>,
    /// Reused by `llama_sampler_sample` for the candidate array.
    cur: Vec<TokenData>,
    t_sample_us: i64,
    n_sample: i32,
}

/// What the book knows of a sampler made here: the chain that owns it, if any.
struct SamplerRec {
    owner: Option<usize>,
}

/// The struct of a freed sampler, kept (zeroed, never read) while its address is in quarantine.
struct Retired {
    _sampler: Box<llama_sampler>,
}

// SAFETY: a retired struct's pointers are NULL and nothing reads it; it is only deallocated.
unsafe impl Send for Retired {}

/// The samplers made here (by a constructor, `llama_sampler_init`, a clone). A pointer the book
/// does not know is a `struct llama_sampler` the client built, used through its vtable as
/// llama.cpp does; a recently freed one is refused.
static SAMPLERS: Mutex<Book<SamplerRec, Retired>> = Mutex::new(Book::new("sampler"));

fn new_sampler(iface: *mut llama_sampler_i, ctx: llama_sampler_context_t) -> *mut llama_sampler {
    let p = Box::into_raw(Box::new(llama_sampler { iface, ctx }));
    SAMPLERS.lock().insert(p as usize, SamplerRec { owner: None });
    p
}

/// Refuse a freed sampler (NULL and client-built ones pass, for the caller to handle).
pub(super) fn not_freed(smpl: *const llama_sampler) -> Result<()> {
    let book = SAMPLERS.lock();
    match book.get(smpl as usize) {
        Err(e) if book.is_freed(smpl as usize) => Err(e),
        _ => Ok(()),
    }
}

/// Free `smpl`: through its vtable, then (for a sampler made here) its struct, whose address goes
/// into quarantine. A sampler a chain owns is freed only by that chain (`by_chain`).
///
/// # Safety
/// `smpl` must be NULL, a sampler made here, or a live client-built sampler.
unsafe fn release(smpl: *mut llama_sampler, by_chain: bool) -> Result<()> {
    if smpl.is_null() {
        return Ok(());
    }
    let k = smpl as usize;
    let ours = {
        let mut book = SAMPLERS.lock();
        match book.get(k) {
            Ok(SamplerRec { owner: Some(chain) }) if !by_chain => {
                return Err(Error::invalid(format!(
                    "sampler {k:#x} belongs to chain {chain:#x}, which frees it: nothing freed"
                )));
            }
            Ok(_) => {
                book.remove(k)?;
                true
            }
            Err(e) if book.is_freed(k) => return Err(e),
            Err(_) => false,
        }
    };
    // SAFETY: a live sampler (contract); its vtable's free releases `ctx`.
    if let Some(f) = unsafe { (*smpl).iface.as_ref() }.and_then(|i| i.free) {
        // SAFETY: the sampler's own function on the sampler.
        unsafe { f(smpl) };
    }
    if !ours {
        crate::log_warn!("llama_sampler_free: {k:#x} was not made by this library: its struct is left to its owner");
        return Ok(());
    }
    // SAFETY: made here by `new_sampler`'s Box and taken out of the book just now: released once.
    let mut b = unsafe { Box::from_raw(smpl) };
    b.iface = ptr::null_mut();
    b.ctx = ptr::null_mut();
    let evicted = SAMPLERS.lock().retire(k, Retired { _sampler: b });
    drop(evicted);
    Ok(())
}

/// Record that `chain` owns `smpl`; refused when another chain owns it already or when `smpl`
/// contains `chain` (a chain inside itself would recurse forever).
fn adopt(chain: *const llama_sampler, smpl: *const llama_sampler) -> Result<()> {
    let (c, s) = (chain as usize, smpl as usize);
    let mut book = SAMPLERS.lock();
    if let Ok(SamplerRec { owner: Some(o) }) = book.get(s) {
        return Err(Error::invalid(format!(
            "sampler {s:#x} is in chain {o:#x} already: not added"
        )));
    }
    let mut up = Some(c);
    while let Some(k) = up {
        if k == s {
            return Err(Error::invalid(
                "a chain cannot be added to itself or to a chain inside it",
            ));
        }
        up = book.get(k).ok().and_then(|r| r.owner);
    }
    if let Ok(rec) = book.get_mut(s) {
        rec.owner = Some(c);
    }
    Ok(())
}

/// `smpl` left its chain.
fn orphan(smpl: *const llama_sampler) {
    if let Ok(rec) = SAMPLERS.lock().get_mut(smpl as usize) {
        rec.owner = None;
    }
}

fn wrap(mut s: BoxedSampler) -> *mut llama_sampler {
    let iface = if s.graph_part().is_some() {
        &RUST_GRAPH_IFACE
    } else {
        &RUST_IFACE
    };
    new_sampler(iface_ptr(iface), Box::into_raw(Box::new(s)).cast())
}

fn new_chain(no_perf: bool) -> *mut llama_sampler {
    let chain = Chain {
        no_perf,
        samplers: Vec::new(),
        graph: None,
        cur: Vec::new(),
        t_sample_us: 0,
        n_sample: 0,
    };
    new_sampler(iface_ptr(&CHAIN_IFACE), Box::into_raw(Box::new(chain)).cast())
}

/// # Safety
/// `smpl` must be NULL or a live sampler.
unsafe fn is(smpl: *const llama_sampler, iface: &'static llama_sampler_i) -> bool {
    // SAFETY: non-NULL samplers are live by the caller's contract.
    !smpl.is_null() && ptr::eq(unsafe { (*smpl).iface }, iface)
}

/// The Rust sampler behind a built-in `llama_sampler`, or None for other samplers.
///
/// # Safety
/// `smpl` must be NULL or a live sampler, not otherwise borrowed while the result is used.
pub(super) unsafe fn rust_sampler<'a>(smpl: *const llama_sampler) -> Option<&'a mut BoxedSampler> {
    // SAFETY: forwarded contract; a built-in sampler's ctx is the `Box<BoxedSampler>` from `wrap`.
    unsafe {
        (is(smpl, &RUST_IFACE) || is(smpl, &RUST_GRAPH_IFACE))
            .then(|| (*smpl).ctx.cast::<BoxedSampler>().as_mut())
            .flatten()
    }
}

/// Whether `smpl` is a chain made by `llama_sampler_chain_init`.
///
/// # Safety
/// `smpl` must be NULL or a live sampler.
pub(super) unsafe fn is_our_chain(smpl: *const llama_sampler) -> bool {
    // SAFETY: forwarded contract.
    unsafe { is(smpl, &CHAIN_IFACE) }
}

/// The chain behind a chain `llama_sampler`, or an error naming `what` for other samplers.
///
/// # Safety
/// `smpl` must be NULL or a live sampler, not otherwise borrowed while the result is used.
pub(super) unsafe fn as_chain<'a>(smpl: *const llama_sampler) -> Result<&'a mut Chain> {
    // SAFETY: forwarded contract; a CHAIN_IFACE sampler's ctx is the `Box<Chain>` from `new_chain`.
    unsafe {
        is(smpl, &CHAIN_IFACE)
            .then(|| (*smpl).ctx.cast::<Chain>().as_mut())
            .flatten()
    }
    .ok_or_else(|| Error::invalid("the sampler is not a chain (made by llama_sampler_chain_init)"))
}

/// Run `f` on the candidates of a C array and write back what it changed (size, data start,
/// selection, sorted flag).
///
/// # Safety
/// `cur_p` must be NULL or point to an array whose `data` holds `size` elements.
unsafe fn with_candidates<R>(cur_p: *mut llama_token_data_array, f: impl FnOnce(&mut Candidates) -> R) -> Result<R> {
    // SAFETY: non-NULL by the check, valid by the caller's contract.
    let arr = unsafe { cur_p.as_mut() }.ok_or_else(|| Error::invalid("cur_p is NULL"))?;
    if arr.size > isize::MAX as usize / size_of::<TokenData>() {
        return Err(Error::invalid(format!("cur_p->size {} is impossible", arr.size)));
    }
    let data: &mut [TokenData] = if arr.size == 0 {
        &mut []
    } else if arr.data.is_null() {
        return Err(Error::invalid("cur_p->data is NULL"));
    } else {
        // SAFETY: `data` holds `size` elements (contract), and TokenData has llama_token_data's layout.
        unsafe { std::slice::from_raw_parts_mut(arr.data.cast::<TokenData>(), arr.size) }
    };
    // Read as a byte: a C bool other than 0/1 must not become an invalid Rust bool.
    // SAFETY: `sorted` is a one-byte field of the live struct.
    let sorted = unsafe { ptr::addr_of!(arr.sorted).cast::<u8>().read() } != 0;
    let mut cur = Candidates::new(data, arr.selected, sorted);
    let r = f(&mut cur);
    let (offset, len, selected, sorted) = (cur.offset(), cur.len(), cur.selected, cur.sorted);
    if offset > 0 {
        // SAFETY: `offset <= size`, so the result stays within (or one past) the caller's array.
        arr.data = unsafe { arr.data.add(offset) };
    }
    arr.size = len;
    arr.selected = selected;
    arr.sorted = sorted;
    Ok(r)
}

// Calls through any sampler's vtable, with the NULL checks llama.cpp's wrappers make.

/// # Safety
/// `smpl` must be NULL or a live sampler whose vtable functions honour their contracts.
unsafe fn call_accept(smpl: *mut llama_sampler, token: llama_token) {
    // SAFETY: forwarded contract.
    if let Some(f) = unsafe { smpl.as_ref().and_then(|s| s.iface.as_ref()).and_then(|i| i.accept) } {
        // SAFETY: the sampler's own function on the sampler.
        unsafe { f(smpl, token) };
    }
}

/// # Safety
/// As `call_accept`; `cur_p` valid for the sampler's apply.
unsafe fn call_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) -> Result<()> {
    // SAFETY: forwarded contract.
    let f = unsafe { smpl.as_ref().and_then(|s| s.iface.as_ref()).and_then(|i| i.apply) };
    let f = f.ok_or_else(|| Error::invalid("the sampler has no apply function"))?;
    // SAFETY: the sampler's own function on the sampler.
    unsafe { f(smpl, cur_p) };
    Ok(())
}

/// # Safety
/// As `call_accept`.
unsafe fn call_reset(smpl: *mut llama_sampler) {
    // SAFETY: forwarded contract.
    if let Some(f) = unsafe { smpl.as_ref().and_then(|s| s.iface.as_ref()).and_then(|i| i.reset) } {
        // SAFETY: the sampler's own function on the sampler.
        unsafe { f(smpl) };
    }
}

/// A new sampler with `smpl`'s configuration and state.
///
/// # Safety
/// As `call_accept`.
unsafe fn call_clone(smpl: *const llama_sampler) -> Result<*mut llama_sampler> {
    // SAFETY: forwarded contract.
    let s = unsafe { smpl.as_ref() }.ok_or_else(|| Error::invalid("smpl is NULL"))?;
    // SAFETY: forwarded contract.
    match unsafe { s.iface.as_ref() }.and_then(|i| i.clone) {
        // SAFETY: the sampler's own function on the sampler.
        Some(f) => Ok(unsafe { f(smpl) }),
        // A sampler without state is cloned by sharing its vtable.
        None if s.ctx.is_null() => Ok(new_sampler(s.iface, ptr::null_mut())),
        None => Err(Error::invalid("the sampler does not support cloning")),
    }
}

// The vtable of the built-in samplers.

unsafe extern "C" fn rs_name(smpl: *const llama_sampler) -> *const c_char {
    entry!(as "llama_sampler_name", ptr::null(), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        Ok(s.name().as_ptr())
    })
}

unsafe extern "C" fn rs_accept(smpl: *mut llama_sampler, token: llama_token) {
    entry!(as "llama_sampler_accept", (), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        s.accept(token);
        Ok(())
    })
}

unsafe extern "C" fn rs_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) {
    entry!(as "llama_sampler_apply", (), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        // SAFETY: the caller's array, per llama_sampler_apply's contract.
        unsafe { with_candidates(cur_p, |c| s.apply(c)) }
    })
}

unsafe extern "C" fn rs_reset(smpl: *mut llama_sampler) {
    entry!(as "llama_sampler_reset", (), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        s.reset();
        Ok(())
    })
}

unsafe extern "C" fn rs_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    entry!(as "llama_sampler_clone", ptr::null_mut(), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        Ok(wrap(s.box_clone()))
    })
}

unsafe extern "C" fn rs_free(smpl: *mut llama_sampler) {
    entry!(as "llama_sampler_free", (), {
        if !smpl.is_null() {
            // SAFETY: called through our vtable: ctx is `wrap`'s box, released once here.
            let ctx = unsafe { std::mem::replace(&mut (*smpl).ctx, ptr::null_mut()) };
            if !ctx.is_null() {
                // SAFETY: as above.
                drop(unsafe { Box::from_raw(ctx.cast::<BoxedSampler>()) });
            }
        }
        Ok(())
    })
}

/// Same-type built-in samplers: `dst` takes a copy of `src`'s configuration and state.
unsafe extern "C" fn rs_copy_state(src: *const llama_sampler, dst: *mut llama_sampler) {
    entry!(as "llama_sampler_copy", (), {
        // SAFETY: called through our vtable on live samplers.
        let s = unsafe { rust_sampler(src) }.ok_or_else(|| Error::invalid("src is not a built-in sampler"))?;
        let mut copy = s.box_clone();
        // SAFETY: as above; `src != dst` (llama_sampler_copy checks), so the borrows are distinct.
        let d = unsafe { rust_sampler(dst) }.ok_or_else(|| Error::invalid("dst is not a built-in sampler"))?;
        if (**d).type_id() != (*copy).type_id() {
            return Err(Error::invalid(format!(
                "cannot copy a '{}' sampler into a '{}' one",
                copy.name().to_string_lossy(),
                d.name().to_string_lossy()
            )));
        }
        // The state moves; what belongs to the graph `dst` is part of stays with it.
        if let (Some(new), Some(old)) = (copy.graph_part(), d.graph_part()) {
            std::mem::swap(new.bound(), old.bound());
        }
        *d = copy;
        Ok(())
    })
}

// The chain's vtable. A child may be the caller's sampler calling back into this API, so the chain
// is borrowed only briefly, never across a call into a child.

/// # Safety
/// `smpl` must be a live chain.
pub(super) unsafe fn chain_child(smpl: *const llama_sampler, i: usize) -> Option<*mut llama_sampler> {
    // SAFETY: forwarded contract; the borrow ends here.
    unsafe { as_chain(smpl) }.ok().and_then(|c| c.samplers.get(i).copied())
}

/// Add the time since `t0` to the chain's sampling time (None: the chain does not measure).
///
/// # Safety
/// `smpl` must be a live chain, not otherwise borrowed.
unsafe fn add_time(smpl: *mut llama_sampler, t0: Option<Instant>) {
    if let Some(t0) = t0 {
        // SAFETY: forwarded contract.
        if let Ok(c) = unsafe { as_chain(smpl) } {
            c.t_sample_us += i64::try_from(t0.elapsed().as_micros()).unwrap_or(i64::MAX);
        }
    }
}

/// # Safety
/// `smpl` must be a live chain.
unsafe fn perf_start(smpl: *const llama_sampler) -> Option<Instant> {
    // SAFETY: forwarded contract.
    unsafe { as_chain(smpl) }
        .ok()
        .filter(|c| !c.no_perf)
        .map(|_| Instant::now())
}

unsafe extern "C" fn chain_name(_smpl: *const llama_sampler) -> *const c_char {
    c"chain".as_ptr()
}

unsafe extern "C" fn chain_accept(smpl: *mut llama_sampler, token: llama_token) {
    entry!(as "llama_sampler_accept", (), {
        // SAFETY: called through our vtable on a live chain.
        let t0 = unsafe { perf_start(smpl) };
        for i in 0.. {
            // SAFETY: as above; each child is live while the chain owns it.
            let Some(child) = (unsafe { chain_child(smpl, i) }) else {
                break;
            };
            // SAFETY: as above.
            unsafe { call_accept(child, token) };
        }
        // SAFETY: as above.
        unsafe { add_time(smpl, t0) };
        // SAFETY: as above.
        let c = unsafe { as_chain(smpl) }?;
        c.n_sample = c.n_sample.saturating_add(1);
        Ok(())
    })
}

unsafe extern "C" fn chain_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) {
    entry!(as "llama_sampler_apply", (), {
        // SAFETY: called through our vtable on a live chain.
        let t0 = unsafe { perf_start(smpl) };
        // What runs in the graph of an attached chain ran there already.
        // SAFETY: as above.
        let first = unsafe { as_chain(smpl) }?.graph.map_or(0, |g| g.prefix);
        for i in first.. {
            // SAFETY: as above; each child is live while the chain owns it.
            let Some(child) = (unsafe { chain_child(smpl, i) }) else {
                break;
            };
            // SAFETY: as above. A child without apply is skipped silently, as llama.cpp does.
            let _skipped = unsafe { call_apply(child, cur_p) };
        }
        // SAFETY: as above.
        unsafe { add_time(smpl, t0) };
        Ok(())
    })
}

unsafe extern "C" fn chain_reset(smpl: *mut llama_sampler) {
    entry!(as "llama_sampler_reset", (), {
        for i in 0.. {
            // SAFETY: called through our vtable on a live chain; children live while owned.
            let Some(child) = (unsafe { chain_child(smpl, i) }) else {
                break;
            };
            // SAFETY: as above.
            unsafe { call_reset(child) };
        }
        Ok(())
    })
}

unsafe extern "C" fn chain_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    entry!(as "llama_sampler_clone", ptr::null_mut(), {
        // SAFETY: called through our vtable on a live chain.
        let no_perf = unsafe { as_chain(smpl) }?.no_perf;
        let result = new_chain(no_perf);
        for i in 0.. {
            // SAFETY: as above; children live while owned.
            let Some(child) = (unsafe { chain_child(smpl, i) }) else {
                break;
            };
            // SAFETY: as above.
            match unsafe { call_clone(child) } {
                Ok(c) if !c.is_null() => {
                    adopt(result, c)?;
                    // SAFETY: `result` is the chain just made, not borrowed elsewhere.
                    unsafe { as_chain(result) }?.samplers.push(c);
                }
                failed => {
                    // SAFETY: `result` and the clones it holds are ours to free.
                    unsafe { release(result, false) }?;
                    return Err(failed
                        .err()
                        .unwrap_or_else(|| Error::invalid("a sampler of the chain failed to clone")));
                }
            }
        }
        Ok(result)
    })
}

unsafe extern "C" fn chain_free(smpl: *mut llama_sampler) {
    entry!(as "llama_sampler_free", (), {
        // SAFETY: called through our vtable on a live chain: ctx is `new_chain`'s box, released once here.
        let ctx = unsafe { std::mem::replace(&mut (*smpl).ctx, ptr::null_mut()) };
        if !ctx.is_null() {
            // SAFETY: as above.
            let c = unsafe { Box::from_raw(ctx.cast::<Chain>()) };
            for child in c.samplers {
                // SAFETY: the chain owns its children.
                unsafe { release(child, true) }?;
            }
        }
        Ok(())
    })
}

/// Chains of the same shape: each child copies its counterpart, and the perf counters follow.
unsafe extern "C" fn chain_copy_state(src: *const llama_sampler, dst: *mut llama_sampler) {
    entry!(as "llama_sampler_copy", (), {
        // SAFETY: called through our vtable on live chains (distinct, checked by llama_sampler_copy).
        let (s, d) = unsafe { (as_chain(src)?, as_chain(dst)?) };
        if s.samplers.len() != d.samplers.len() {
            return Err(Error::invalid("cannot copy between chains of different lengths"));
        }
        let pairs: Vec<_> = s.samplers.iter().copied().zip(d.samplers.iter().copied()).collect();
        (d.no_perf, d.t_sample_us, d.n_sample) = (s.no_perf, s.t_sample_us, s.n_sample);
        for (a, b) in pairs {
            // SAFETY: children of live chains.
            unsafe { copy(a, b) }?;
        }
        Ok(())
    })
}

/// `llama_sampler_copy`'s logic: the same vtable is required; `copy_state` if the sampler has one,
/// else `dst` takes the state of a clone of `src`.
///
/// # Safety
/// `src` and `dst` must be NULL or live samplers.
unsafe fn copy(src: *const llama_sampler, dst: *mut llama_sampler) -> Result<()> {
    if src.is_null() || dst.is_null() || ptr::eq(src, dst) {
        return Ok(());
    }
    // SAFETY: live samplers by contract.
    let (si, di) = unsafe { ((*src).iface, (*dst).iface) };
    if si != di {
        return Err(Error::invalid("cannot copy between different sampler types"));
    }
    // SAFETY: as above.
    if let Some(f) = unsafe { di.as_ref() }.and_then(|i| i.copy_state) {
        // SAFETY: the sampler's own function on two samplers of its type.
        unsafe { f(src, dst) };
        return Ok(());
    }
    // SAFETY: as above.
    let tmp = unsafe { call_clone(src) }?;
    if tmp.is_null() {
        return Err(Error::invalid("the sampler failed to clone"));
    }
    // SAFETY: `dst` is live; its old state goes, the clone's moves in, the clone's shell is dropped.
    unsafe {
        if let Some(f) = di.as_ref().and_then(|i| i.free) {
            f(dst);
        }
        (*dst).ctx = std::mem::replace(&mut (*tmp).ctx, ptr::null_mut());
        drop(Box::from_raw(tmp));
    }
    Ok(())
}

/// The steps of `llama_sampler_sample` once the logits row is known: candidates for every token,
/// apply, read the selection, accept it. A selection that is missing, or that every sampler masked
/// away (logit -inf, e.g. a grammar allowing nothing), is an error rather than a token.
///
/// # Safety
/// `smpl` must be a live sampler.
#[cfg(test)]
unsafe fn sample_logits(smpl: *mut llama_sampler, logits: &[f32]) -> Result<llama_token> {
    // SAFETY: forwarded contract.
    unsafe { sample_candidates(smpl, candidates(smpl, logits, &[], &[])?) }
}

/// The candidates `llama_sampler_sample` starts from, in the buffer the chain keeps between calls
/// (taken out of it, so no borrow of the chain is kept): one per logit, with the ids in `ids`
/// (empty: the logit's index) and the probabilities in `probs` (empty: none yet), as a backend
/// sampler may have left them.
///
/// # Safety
/// As [`sample_logits`].
unsafe fn candidates(smpl: *mut llama_sampler, logits: &[f32], ids: &[i32], probs: &[f32]) -> Result<Vec<TokenData>> {
    let n = if probs.is_empty() { logits.len() } else { probs.len() };
    if logits.len() < n || (!ids.is_empty() && ids.len() < n) {
        return Err(Error::invalid(format!(
            "the backend sampler left {} logits and {} candidates for {n} rows",
            logits.len(),
            ids.len()
        )));
    }
    // SAFETY: forwarded contract.
    let mut cur = unsafe { as_chain(smpl) }
        .map(|c| std::mem::take(&mut c.cur))
        .unwrap_or_default();
    cur.clear();
    let logits = &logits[..n];
    if ids.is_empty() && probs.is_empty() {
        // The common case (every token's logit), as one loop the compiler can vectorise.
        cur.extend(logits.iter().enumerate().map(|(i, &logit)| TokenData {
            id: i as llama_token,
            logit,
            p: 0.0,
        }));
        return Ok(cur);
    }
    cur.extend((0..n).map(|i| TokenData {
        id: ids.get(i).copied().unwrap_or(i as llama_token),
        logit: logits[i],
        p: probs.get(i).copied().unwrap_or(0.0),
    }));
    Ok(cur)
}

/// Apply `smpl` to the candidates, accept and return the selected token.
///
/// # Safety
/// As [`sample_logits`].
unsafe fn sample_candidates(smpl: *mut llama_sampler, mut cur: Vec<TokenData>) -> Result<llama_token> {
    let mut arr = llama_token_data_array {
        data: cur.as_mut_ptr().cast(),
        size: cur.len(),
        selected: -1,
        sorted: false,
    };
    // SAFETY: `arr` describes `cur`, alive for the call.
    let applied = unsafe { call_apply(smpl, &mut arr) };
    let chosen = applied.and_then(|()| {
        let i = usize::try_from(arr.selected)
            .ok()
            .filter(|&i| i < arr.size)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the samplers selected no candidate (selected = {})",
                    arr.selected
                ))
            })?;
        // SAFETY: a sampler may move `data` (within `cur`, or to memory of its own), but `data`
        // holds `size` elements by the array's contract, and `i < size`.
        Ok(unsafe { *arr.data.add(i).cast::<TokenData>() })
    });
    // SAFETY: as above.
    if let Ok(c) = unsafe { as_chain(smpl) } {
        c.cur = cur;
    }
    let chosen = chosen?;
    if chosen.logit == f32::NEG_INFINITY {
        return Err(Error::invalid(
            "every candidate was masked (logit -inf), e.g. by a grammar that allows nothing here",
        ));
    }
    // SAFETY: forwarded contract.
    unsafe { call_accept(smpl, chosen.id) };
    Ok(chosen.id)
}

/// A vocabulary handle for the samplers that keep one (grammar, infill).
///
/// # Safety
/// `vocab` must be NULL or a live vocabulary; llama.h requires the model to outlive the sampler,
/// which is what the `'static` stands for.
unsafe fn sampler_vocab(vocab: *const llama_vocab) -> Result<&'static Vocab> {
    let v = super::handle::vocab(vocab)?;
    // SAFETY: llama.h has the model (which owns the vocabulary) outlive the sampler (contract).
    Ok(unsafe { &*std::ptr::from_ref::<Vocab>(&*v) })
}

/// A list of C strings (NULL entries become None).
///
/// # Safety
/// `list` must be NULL (with `n == 0`) or hold `n` pointers, each NULL or a NUL-terminated string.
unsafe fn c_str_list<'a>(list: *const *const c_char, n: usize, what: &str) -> Result<Vec<Option<&'a [u8]>>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(Error::invalid(format!("{what} is NULL but its count is {n}")));
    }
    // SAFETY: `list` holds `n` pointers (contract).
    let ptrs = unsafe { std::slice::from_raw_parts(list, n) };
    // SAFETY: each non-NULL entry is a NUL-terminated string (contract).
    Ok(ptrs
        .iter()
        .map(|&p| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes()))
        .collect())
}

/// # Safety
/// `p` must be NULL (with `n == 0`) or hold `n` elements.
pub(crate) unsafe fn c_slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL but its count is {n}")));
    }
    // SAFETY: `p` holds `n` elements (contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The (time in ms, runs) of a chain, for llama_perf_sampler.
///
/// # Safety
/// `smpl` must be NULL or a live sampler.
pub(super) unsafe fn chain_perf(smpl: *const llama_sampler) -> Result<llama_perf_sampler_data> {
    not_freed(smpl)?;
    // SAFETY: forwarded contract.
    let c = unsafe { as_chain(smpl) }?;
    Ok(llama_perf_sampler_data {
        t_sample_ms: 1e-3 * c.t_sample_us as f64,
        n_sample: c.n_sample.max(0),
    })
}

/// # Safety
/// `smpl` must be NULL or a live sampler.
pub(super) unsafe fn chain_perf_reset(smpl: *mut llama_sampler) -> Result<()> {
    not_freed(smpl)?;
    // SAFETY: forwarded contract.
    let c = unsafe { as_chain(smpl) }?;
    c.t_sample_us = 0;
    c.n_sample = 0;
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init(
    iface: *mut llama_sampler_i,
    ctx: llama_sampler_context_t,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { Ok(new_sampler(iface, ctx)) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_name(smpl: *const llama_sampler) -> *const c_char {
    entry!(c"(null)".as_ptr(), {
        not_freed(smpl)?;
        // SAFETY: NULL or live by contract.
        let s = unsafe { smpl.as_ref() }.ok_or_else(|| Error::invalid("smpl is NULL"))?;
        // SAFETY: as above.
        let name = match unsafe { s.iface.as_ref() }.and_then(|i| i.name) {
            // SAFETY: the sampler's own function on the sampler.
            Some(f) => unsafe { f(smpl) },
            None => ptr::null(),
        };
        // A client sampler may name itself NULL; llama.cpp prints "(null)" for it.
        Ok(if name.is_null() { c"(null)".as_ptr() } else { name })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_accept(smpl: *mut llama_sampler, token: llama_token) {
    entry!((), {
        not_freed(smpl)?;
        // SAFETY: NULL or live by contract.
        unsafe { call_accept(smpl, token) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) {
    entry!((), {
        not_freed(smpl)?;
        if smpl.is_null() {
            return Ok(());
        }
        // SAFETY: live sampler and array by contract.
        unsafe { call_apply(smpl, cur_p) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_reset(smpl: *mut llama_sampler) {
    entry!((), {
        not_freed(smpl)?;
        // SAFETY: NULL or live by contract.
        unsafe { call_reset(smpl) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        not_freed(smpl)?;
        if smpl.is_null() {
            return Ok(ptr::null_mut());
        }
        // SAFETY: live sampler by contract.
        unsafe { call_clone(smpl) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_copy(src: *const llama_sampler, dst: *mut llama_sampler) {
    entry!((), {
        not_freed(src)?;
        not_freed(dst)?;
        // SAFETY: NULL or live by contract.
        unsafe { copy(src, dst) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_free(smpl: *mut llama_sampler) {
    entry!((), {
        // SAFETY: NULL, a sampler made here (checked against the book), or a client-built one.
        unsafe { release(smpl, false) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_init(params: llama_sampler_chain_params) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { Ok(new_chain(params.no_perf)) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_add(chain: *mut llama_sampler, smpl: *mut llama_sampler) {
    entry!((), {
        if smpl.is_null() {
            return Err(Error::invalid("smpl is NULL"));
        }
        not_freed(chain)?;
        not_freed(smpl)?;
        // SAFETY: NULL or live by contract (and not freed: checked).
        let c = unsafe { as_chain(chain) }?;
        adopt(chain, smpl)?;
        c.samplers.push(smpl);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_get(chain: *mut llama_sampler, i: i32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        not_freed(chain)?;
        // SAFETY: NULL or live by contract.
        if !unsafe { is(chain, &CHAIN_IFACE) } {
            return Ok(ptr::null_mut());
        }
        if i == -1 {
            return Ok(chain);
        }
        // SAFETY: a live chain (checked).
        let c = unsafe { as_chain(chain) }?;
        Ok(usize::try_from(i)
            .ok()
            .and_then(|i| c.samplers.get(i).copied())
            .unwrap_or(ptr::null_mut()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_n(chain: *const llama_sampler) -> i32 {
    entry!(-1, {
        not_freed(chain)?;
        // SAFETY: NULL or live by contract.
        Ok(i32::try_from(unsafe { as_chain(chain) }?.samplers.len()).unwrap_or(i32::MAX))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_remove(chain: *mut llama_sampler, i: i32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        not_freed(chain)?;
        // SAFETY: NULL or live by contract.
        let c = unsafe { as_chain(chain) }?;
        match usize::try_from(i).ok().filter(|&i| i < c.samplers.len()) {
            Some(i) => {
                let s = c.samplers.remove(i);
                orphan(s);
                Ok(s)
            }
            None => Ok(ptr::null_mut()),
        }
    })
}

/// The body of a constructor: the sampler, or NULL with the reason logged.
pub(crate) fn make(f: impl FnOnce() -> Result<BoxedSampler>) -> Result<*mut llama_sampler> {
    f().map(wrap)
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_greedy() -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(Box::<sampling::Greedy>::default())) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_dist(seed: u32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(Box::new(sampling::Dist::new(seed)))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_k(k: i32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::TopK::boxed(k))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::TopP::boxed(p, min_keep))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_min_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::MinP::boxed(p, min_keep))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_typical(p: f32, min_keep: usize) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::Typical::boxed(p, min_keep))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_temp(t: f32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::Temp::boxed(t))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_temp_ext(t: f32, delta: f32, exponent: f32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| Ok(sampling::TempExt::boxed(t, delta, exponent)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_xtc(p: f32, t: f32, min_keep: usize, seed: u32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| Ok(sampling::Xtc::boxed(p, t, min_keep, seed)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_n_sigma(n: f32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), { make(|| Ok(sampling::TopNSigma::boxed(n))) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_mirostat(
    n_vocab: i32,
    seed: u32,
    tau: f32,
    eta: f32,
    m: i32,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| Ok(Box::new(sampling::Mirostat::new(n_vocab, seed, tau, eta, m))))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_mirostat_v2(seed: u32, tau: f32, eta: f32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| Ok(Box::new(sampling::MirostatV2::new(seed, tau, eta))))
    })
}

/// The grammar constructors' shared body. An empty (or NULL) grammar string gives a sampler that does
/// nothing, as in llama.cpp; a non-empty one needs the vocabulary and a root rule name.
///
/// # Safety
/// Pointers as the three public constructors document them.
unsafe fn init_grammar(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
    lazy: bool,
    trigger_patterns: Vec<Vec<u8>>,
    trigger_tokens: (*const llama_token, usize),
) -> Result<*mut llama_sampler> {
    make(|| {
        // SAFETY: NULL or NUL-terminated (contract).
        let source = if grammar_str.is_null() {
            &[][..]
        } else {
            unsafe { c_str(grammar_str, "grammar_str") }?
        };
        if source.is_empty() {
            return Ok(Box::new(sampling::GrammarSampler::empty()));
        }
        // SAFETY: as above.
        let root = unsafe { c_str(grammar_root, "grammar_root") }?;
        // SAFETY: NULL or live, kept alive by the caller as long as the sampler (contract).
        let vocab: &'static dyn TokenVocab = unsafe { sampler_vocab(vocab) }?;
        // SAFETY: `trigger_tokens` holds its count of tokens (contract).
        let tokens = unsafe { c_slice(trigger_tokens.0, trigger_tokens.1, "trigger_tokens") }?;
        let patterns: Vec<&[u8]> = trigger_patterns.iter().map(Vec::as_slice).collect();
        Ok(Box::new(sampling::GrammarSampler::new(
            vocab, source, root, lazy, &patterns, tokens,
        )?))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        // SAFETY: forwarded contract.
        unsafe { init_grammar(vocab, grammar_str, grammar_root, false, Vec::new(), (ptr::null(), 0)) }
    })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar_lazy(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
    trigger_words: *mut *const c_char,
    num_trigger_words: usize,
    trigger_tokens: *const llama_token,
    num_trigger_tokens: usize,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        // SAFETY: `trigger_words` holds its count of strings (contract).
        let words = unsafe { c_str_list(trigger_words, num_trigger_words, "trigger_words") }?;
        let words: Vec<&[u8]> = words.into_iter().map(Option::unwrap_or_default).collect();
        // The words become one pattern, as llama.cpp builds it.
        let patterns = if words.is_empty() {
            Vec::new()
        } else {
            vec![sampling::grammar::trigger_words_pattern(&words)]
        };
        let triggers = (trigger_tokens, num_trigger_tokens);
        // SAFETY: forwarded contract.
        unsafe { init_grammar(vocab, grammar_str, grammar_root, true, patterns, triggers) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar_lazy_patterns(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
    trigger_patterns: *mut *const c_char,
    num_trigger_patterns: usize,
    trigger_tokens: *const llama_token,
    num_trigger_tokens: usize,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        // SAFETY: `trigger_patterns` holds its count of strings (contract).
        let list = unsafe { c_str_list(trigger_patterns, num_trigger_patterns, "trigger_patterns") }?;
        let patterns: Option<Vec<Vec<u8>>> = list.into_iter().map(|p| p.map(<[u8]>::to_vec)).collect();
        let patterns = patterns.ok_or_else(|| Error::invalid("a trigger pattern is NULL"))?;
        let triggers = (trigger_tokens, num_trigger_tokens);
        // SAFETY: forwarded contract.
        unsafe { init_grammar(vocab, grammar_str, grammar_root, true, patterns, triggers) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_penalties(
    n_vocab: i32,
    penalty_last_n: i32,
    penalty_repeat: f32,
    penalty_freq: f32,
    penalty_present: f32,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| {
            Ok(sampling::Penalties::boxed(
                n_vocab,
                penalty_last_n,
                penalty_repeat,
                penalty_freq,
                penalty_present,
            ))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_dry(
    vocab: *const llama_vocab,
    dry_multiplier: f32,
    dry_base: f32,
    dry_allowed_length: i32,
    dry_penalty_last_n: i32,
    seq_breakers: *mut *const c_char,
    num_breakers: usize,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| {
            // SAFETY: `seq_breakers` holds its count of strings (contract).
            let breakers = unsafe { c_str_list(seq_breakers, num_breakers, "seq_breakers") }?;
            let breakers: Vec<&[u8]> = breakers.into_iter().map(Option::unwrap_or_default).collect();
            let vocab: Option<&dyn TokenVocab> = if vocab.is_null() {
                None
            } else {
                // SAFETY: a live vocabulary (contract), only used during this call.
                Some(unsafe { sampler_vocab(vocab) }?)
            };
            sampling::Dry::boxed(
                vocab,
                dry_multiplier,
                dry_base,
                dry_allowed_length,
                dry_penalty_last_n,
                &breakers,
            )
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_adaptive_p(target: f32, decay: f32, seed: u32) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| Ok(Box::new(sampling::AdaptiveP::new(target, decay, seed))))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_logit_bias(
    n_vocab: i32,
    n_logit_bias: i32,
    logit_bias: *const llama_logit_bias,
) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| {
            let n = usize::try_from(n_logit_bias).unwrap_or(0);
            // SAFETY: `logit_bias` holds `n_logit_bias` entries (contract).
            let biases = unsafe { c_slice(logit_bias, n, "logit_bias") }?;
            Ok(sampling::LogitBias::boxed(
                n_vocab,
                biases.iter().map(|b| (b.token, b.bias)).collect(),
            ))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_infill(vocab: *const llama_vocab) -> *mut llama_sampler {
    entry!(ptr::null_mut(), {
        make(|| {
            // SAFETY: NULL or live, kept alive by the caller as long as the sampler (contract).
            let vocab = unsafe { sampler_vocab(vocab) }?;
            Ok(Box::new(sampling::Infill::new(vocab)))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_get_seed(smpl: *const llama_sampler) -> u32 {
    entry!(LLAMA_DEFAULT_SEED, {
        not_freed(smpl)?;
        if smpl.is_null() {
            return Err(Error::invalid("smpl is NULL"));
        }
        // SAFETY: live sampler by contract.
        unsafe { Ok(seed_of(smpl)) }
    })
}

/// The seed of a seeded sampler, or of a chain's last seeded sampler; `LLAMA_DEFAULT_SEED` otherwise.
///
/// # Safety
/// `smpl` must be a live sampler.
unsafe fn seed_of(smpl: *const llama_sampler) -> u32 {
    // SAFETY: forwarded contract.
    if let Some(s) = unsafe { rust_sampler(smpl) } {
        return s.seed().unwrap_or(LLAMA_DEFAULT_SEED);
    }
    // SAFETY: as above; the children are copied out before recursing.
    let children = unsafe { as_chain(smpl) }
        .map(|c| c.samplers.clone())
        .unwrap_or_default();
    children
        .iter()
        .rev()
        // SAFETY: children of a live chain.
        .map(|&c| unsafe { seed_of(c) })
        .find(|&s| s != LLAMA_DEFAULT_SEED)
        .unwrap_or(LLAMA_DEFAULT_SEED)
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_sample(
    smpl: *mut llama_sampler,
    ctx: *mut llama_context,
    idx: i32,
) -> llama_token {
    entry!(LLAMA_TOKEN_NULL, {
        not_freed(smpl)?;
        if smpl.is_null() {
            return Err(Error::invalid("smpl is NULL"));
        }
        // The candidates are made while the context is locked; the samplers then run without the
        // lock, so a client sampler may read the context (llama_get_logits_ith), as in llama.cpp.
        // A token a backend sampler chose is taken as it is; what a backend sampler left
        // (probabilities, filtered logits) is what the CPU samplers continue from.
        let cur = {
            let mut c = ctx_mut(ctx)?;
            match c.sampled_row(idx)? {
                Some(r) if r.token != LLAMA_TOKEN_NULL => Err(r.token),
                // SAFETY: live sampler by contract.
                Some(r) if !r.logits.is_empty() => Ok(unsafe { candidates(smpl, &r.logits, &r.candidates, &r.probs) }?),
                // SAFETY: as above.
                _ => Ok(unsafe { candidates(smpl, c.logits_ith(idx)?, &[], &[]) }?),
            }
        };
        match cur {
            // SAFETY: live sampler by contract.
            Ok(cur) => unsafe { sample_candidates(smpl, cur) },
            Err(token) => {
                // SAFETY: as above.
                unsafe { call_accept(smpl, token) };
                Ok(token)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain_of(samplers: Vec<*mut llama_sampler>) -> *mut llama_sampler {
        let c = new_chain(false);
        for s in samplers {
            // SAFETY: a fresh chain and fresh samplers.
            unsafe { llama_sampler_chain_add(c, s) };
        }
        c
    }

    #[test]
    fn sample_applies_selects_and_accepts() {
        // SAFETY: constructors of this module.
        let c = chain_of(unsafe { vec![llama_sampler_init_top_k(2), llama_sampler_init_greedy()] });
        let logits = [0.5f32, 3.0, -1.0, 2.0];
        // SAFETY: a live chain.
        assert_eq!(unsafe { sample_logits(c, &logits) }.unwrap(), 1);
        // SAFETY: as above.
        let perf = unsafe { chain_perf(c) }.unwrap();
        assert_eq!(perf.n_sample, 1);
        // SAFETY: as above; freed once.
        unsafe { llama_sampler_free(c) };
    }

    #[test]
    fn sample_follows_a_moved_data_pointer() {
        // XTC drops the head of the array: the selection indexes the moved array.
        // SAFETY: constructors of this module.
        let c = chain_of(unsafe { vec![llama_sampler_init_xtc(1.0, 0.1, 1, 5), llama_sampler_init_greedy()] });
        let logits = [0.0f32, 5.0, 4.9, -9.0];
        // Both 5.0 and 4.9 are above 10%: the top one goes, greedy takes the next.
        // SAFETY: a live chain.
        assert_eq!(unsafe { sample_logits(c, &logits) }.unwrap(), 2);
        // SAFETY: freed once.
        unsafe { llama_sampler_free(c) };
    }

    #[test]
    fn sample_refuses_a_fully_masked_row_and_an_empty_selection() {
        // SAFETY: constructors of this module.
        let c = chain_of(unsafe { vec![llama_sampler_init_dist(1)] });
        let masked = [f32::NEG_INFINITY; 4];
        // SAFETY: a live chain.
        let err = unsafe { sample_logits(c, &masked) }.unwrap_err();
        assert!(err.to_string().contains("every candidate was masked"), "{err}");
        // SAFETY: as above.
        assert_eq!(unsafe { chain_perf(c) }.unwrap().n_sample, 0, "nothing accepted");
        // SAFETY: as above; an empty row selects nothing.
        assert!(unsafe { sample_logits(c, &[]) }.is_err());
        // SAFETY: freed once.
        unsafe { llama_sampler_free(c) };
    }

    #[test]
    fn a_lone_sampler_samples_without_a_chain() {
        // SAFETY: constructor of this module.
        let g = unsafe { llama_sampler_init_greedy() };
        // SAFETY: a live sampler.
        assert_eq!(unsafe { sample_logits(g, &[1.0, 0.0, 7.0]) }.unwrap(), 2);
        // SAFETY: freed once.
        unsafe { llama_sampler_free(g) };
    }
}
