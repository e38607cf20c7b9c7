//! Backend sampling at the C boundary: the `backend_*` entries of the built-in samplers' and the
//! chain's vtables, a chain attached to a context (`llama_set_sampler`, `context_params.samplers`)
//! as the context drives it, and the graph data converted between llama.h's raw tensors and the
//! engine's.
//!
//! A chain runs in the graph the longest prefix of its samplers that can (each says so in its
//! `backend_init`); the rest run on the CPU in `llama_sampler_sample` over what the prefix left.
//! The vtable entries run on the thread that decodes (or, for `backend_init`, that attaches).

use super::entry::entry;
use super::sampler::{as_chain, chain_child, is_our_chain, llama_sampler_name, not_freed, rust_sampler};
use super::types::*;
use crate::error::{Error, Result};
use crate::ggml::{GgmlError, Graph, TensorRef};
use crate::sampling::backend::{GraphData, SeqSampler};
use std::ffi::CStr;
use std::ptr::{self, NonNull};

/// What a chain attached to a context knows of its graph part.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChainGraph {
    /// Its first `prefix` samplers run in the graph.
    pub prefix: usize,
}

fn tensor(p: *mut ggml_tensor) -> Option<TensorRef> {
    NonNull::new(p).map(TensorRef)
}

/// llama.h's `llama_sampler_data` as the engine's.
///
/// # Safety
/// `data` must be NULL or point to a live struct whose tensors belong to the graph being built.
unsafe fn from_c(data: *const llama_sampler_data) -> Result<GraphData> {
    // SAFETY: NULL or live (contract).
    let d = unsafe { data.as_ref() }.ok_or_else(|| Error::invalid("sampler data is NULL"))?;
    Ok(GraphData {
        logits: tensor(d.logits).ok_or_else(|| Error::invalid("a backend sampler left no logits"))?,
        probs: tensor(d.probs),
        sampled: tensor(d.sampled),
        candidates: tensor(d.candidates),
    })
}

fn to_c(d: &GraphData) -> llama_sampler_data {
    let raw = |t: Option<TensorRef>| t.map_or(ptr::null_mut(), TensorRef::as_ptr);
    llama_sampler_data {
        logits: d.logits.as_ptr(),
        probs: raw(d.probs),
        sampled: raw(d.sampled),
        candidates: raw(d.candidates),
    }
}

/// The graph a vtable entry was handed.
///
/// # Safety
/// `ctx` and `gf` must be NULL or a live no_alloc context and a graph in it.
unsafe fn lent_graph(ctx: *mut ggml_context, gf: *mut ggml_cgraph) -> Result<Graph> {
    match (NonNull::new(ctx), NonNull::new(gf)) {
        // SAFETY: live (contract); the caller keeps them for the call.
        (Some(c), Some(g)) => Ok(unsafe { Graph::borrowed(c, g) }),
        _ => Err(Error::invalid("a NULL ggml context or graph")),
    }
}

// The built-in samplers' backend entries.

pub(super) unsafe extern "C" fn rs_backend_init(
    smpl: *mut llama_sampler,
    _buft: ggml_backend_buffer_type_t,
    n_outputs_max_per_seq: u32,
) -> bool {
    entry!(as "backend_init", false, {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        Ok(s.graph_part().is_some_and(|p| p.init(n_outputs_max_per_seq)))
    })
}

pub(super) unsafe extern "C" fn rs_backend_apply(
    smpl: *mut llama_sampler,
    ctx: *mut ggml_context,
    gf: *mut ggml_cgraph,
    data: *mut llama_sampler_data,
) {
    entry!(as "backend_apply", (), {
        // SAFETY: the graph and data handed to this entry (llama.h's contract).
        let (mut g, mut d) = unsafe { (lent_graph(ctx, gf)?, from_c(data)?) };
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        if let Some(p) = s.graph_part() {
            p.build(&mut g, &mut d)?;
        }
        // SAFETY: checked non-NULL by `from_c`; the caller's struct.
        unsafe { *data = to_c(&d) };
        Ok(())
    })
}

pub(super) unsafe extern "C" fn rs_backend_set_input(smpl: *mut llama_sampler) {
    entry!(as "backend_set_input", (), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        match s.graph_part() {
            Some(p) => p.set_input().map_err(Error::from),
            None => Ok(()),
        }
    })
}

pub(super) unsafe extern "C" fn rs_backend_reset(smpl: *mut llama_sampler) {
    entry!(as "backend_reset", (), {
        // SAFETY: called through our vtable on a live sampler.
        let s = unsafe { rust_sampler(smpl) }.ok_or_else(|| Error::invalid("not a built-in sampler"))?;
        if let Some(p) = s.graph_part() {
            p.forget_graph();
        }
        Ok(())
    })
}

// Walking a chain's graph part; built-in children are driven directly (their errors reach the
// context), the caller's through their vtables.

/// The vtable of `smpl`.
///
/// # Safety
/// `smpl` must be a live sampler.
unsafe fn iface<'a>(smpl: *mut llama_sampler) -> Option<&'a llama_sampler_i> {
    // SAFETY: live sampler (contract); its vtable outlives it.
    unsafe { smpl.as_ref().and_then(|s| s.iface.as_ref()) }
}

/// The children of `chain` that run in the graph.
///
/// # Safety
/// `chain` must be a live chain.
unsafe fn graph_children(chain: *mut llama_sampler) -> Result<Vec<*mut llama_sampler>> {
    // SAFETY: live chain (contract), borrowed briefly.
    let prefix = unsafe { as_chain(chain) }?.graph.map_or(0, |g| g.prefix);
    // SAFETY: as above.
    Ok((0..prefix).filter_map(|i| unsafe { chain_child(chain, i) }).collect())
}

/// Add the graph part of `chain` for one row.
///
/// # Safety
/// `chain` must be a live chain attached with `attach`; `g` the graph being built.
unsafe fn chain_build(chain: *mut llama_sampler, g: &mut Graph, d: &mut GraphData) -> Result<()> {
    // SAFETY: forwarded contract.
    for child in unsafe { graph_children(chain) }? {
        // SAFETY: a child of a live chain.
        if let Some(s) = unsafe { rust_sampler(child) } {
            if let Some(p) = s.graph_part() {
                p.build(g, d)?;
            }
            continue;
        }
        // SAFETY: as above.
        if let Some(f) = unsafe { iface(child) }.and_then(|i| i.backend_apply) {
            let mut data = to_c(d);
            // SAFETY: the child's own entry, with the graph under construction and its row.
            unsafe { f(child, g.raw_ctx(), g.raw(), &mut data) };
            // SAFETY: the struct just filled by the child.
            *d = unsafe { from_c(&data) }?;
        }
    }
    Ok(())
}

/// Call `each` on the built-in children of the graph part and `foreign` on the others.
///
/// # Safety
/// `chain` must be a live chain.
unsafe fn for_graph_children(
    chain: *mut llama_sampler,
    mut each: impl FnMut(&mut dyn crate::sampling::backend::GraphPart) -> Result<()>,
    foreign: impl Fn(&llama_sampler_i) -> Option<unsafe extern "C" fn(*mut llama_sampler)>,
) -> Result<()> {
    // SAFETY: forwarded contract.
    for child in unsafe { graph_children(chain) }? {
        // SAFETY: a child of a live chain.
        if let Some(s) = unsafe { rust_sampler(child) } {
            if let Some(p) = s.graph_part() {
                each(p)?;
            }
        // SAFETY: as above.
        } else if let Some(f) = unsafe { iface(child) }.and_then(&foreign) {
            // SAFETY: the child's own entry on itself.
            unsafe { f(child) };
        }
    }
    Ok(())
}

/// Set up `chain` for the graph with up to `n_outputs_max_per_seq` outputs per sequence: each
/// sampler from the first is asked in turn until one cannot; true when all can.
///
/// # Safety
/// `chain` must be a live chain.
unsafe fn chain_init(
    chain: *mut llama_sampler,
    buft: ggml_backend_buffer_type_t,
    n_outputs_max_per_seq: u32,
) -> Result<bool> {
    // SAFETY: live chain (contract).
    if unsafe { as_chain(chain) }?.graph.is_some() {
        return Err(Error::invalid(
            "the sampler chain is attached to a context already (a chain serves one sequence of one context)",
        ));
    }
    let mut prefix = 0;
    let mut all = true;
    for i in 0.. {
        // SAFETY: as above.
        let Some(child) = (unsafe { chain_child(chain, i) }) else {
            break;
        };
        let ok = prefix == i
            // SAFETY: a child of a live chain, through its own entry.
            && unsafe { iface(child) }
                .and_then(|f| f.backend_init)
                .is_some_and(|f| unsafe { f(child, buft, n_outputs_max_per_seq) });
        if ok {
            prefix += 1;
        }
        all &= ok;
    }
    // SAFETY: as above.
    unsafe { as_chain(chain) }?.graph = Some(ChainGraph { prefix });
    Ok(all)
}

pub(super) unsafe extern "C" fn chain_backend_init(
    smpl: *mut llama_sampler,
    buft: ggml_backend_buffer_type_t,
    n_outputs_max_per_seq: u32,
) -> bool {
    // SAFETY: called through our vtable on a live chain.
    entry!(as "backend_init", false, { unsafe { chain_init(smpl, buft, n_outputs_max_per_seq) } })
}

pub(super) unsafe extern "C" fn chain_backend_accept(
    smpl: *mut llama_sampler,
    ctx: *mut ggml_context,
    gf: *mut ggml_cgraph,
    selected: *mut ggml_tensor,
) {
    entry!(as "backend_accept", (), {
        // SAFETY: called through our vtable on a live chain.
        for child in unsafe { graph_children(smpl) }? {
            // SAFETY: a child of a live chain, through its own entry, with what we were handed.
            if let Some(f) = unsafe { iface(child) }.and_then(|i| i.backend_accept) {
                // SAFETY: as above.
                unsafe { f(child, ctx, gf, selected) };
            }
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn chain_backend_apply(
    smpl: *mut llama_sampler,
    ctx: *mut ggml_context,
    gf: *mut ggml_cgraph,
    data: *mut llama_sampler_data,
) {
    entry!(as "backend_apply", (), {
        // SAFETY: the graph and data handed to this entry (llama.h's contract).
        let (mut g, mut d) = unsafe { (lent_graph(ctx, gf)?, from_c(data)?) };
        // SAFETY: called through our vtable on a live chain.
        unsafe { chain_build(smpl, &mut g, &mut d) }?;
        // SAFETY: checked non-NULL by `from_c`; the caller's struct.
        unsafe { *data = to_c(&d) };
        Ok(())
    })
}

pub(super) unsafe extern "C" fn chain_backend_set_input(smpl: *mut llama_sampler) {
    entry!(as "backend_set_input", (), {
        // SAFETY: called through our vtable on a live chain.
        unsafe { for_graph_children(smpl, |p| p.set_input().map_err(Error::from), |i| i.backend_set_input) }
    })
}

pub(super) unsafe extern "C" fn chain_backend_reset(smpl: *mut llama_sampler) {
    entry!(as "backend_reset", (), {
        // SAFETY: called through our vtable on a live chain.
        unsafe {
            for_graph_children(
                smpl,
                |p| {
                    p.forget_graph();
                    Ok(())
                },
                |i| i.backend_reset,
            )
        }
    })
}

/// A chain attached to one sequence of a context.
struct Attached {
    chain: *mut llama_sampler,
}

// SAFETY: the chain is driven only by the context it is attached to, which one thread uses at a
// time (llama.h's rule); llama.h leaves keeping it alive to the client, and a freed one is noticed.
unsafe impl Send for Attached {}

impl SeqSampler for Attached {
    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        // SAFETY: an attached chain, alive (checked before each batch).
        unsafe { chain_build(self.chain, g, d) }.map_err(|e| GgmlError::new(e.to_string()))
    }

    fn set_input(&mut self) -> std::result::Result<(), crate::ggml::GgmlError> {
        // SAFETY: as above.
        unsafe {
            for_graph_children(
                self.chain,
                |p| p.set_input().map_err(Error::from),
                |i| i.backend_set_input,
            )
        }
        .map_err(|e| GgmlError::new(e.to_string()))
    }

    fn reset(&mut self) {
        // SAFETY: as above.
        let r = unsafe {
            for_graph_children(
                self.chain,
                |p| {
                    p.forget_graph();
                    Ok(())
                },
                |i| i.backend_reset,
            )
        };
        if let Err(e) = r {
            crate::log_error!("backend sampler reset: {e}");
        }
    }

    /// llama.cpp begins a transaction for its own dist samplers only.
    fn begin(&mut self) {
        // SAFETY: as above.
        let r = unsafe {
            for_graph_children(
                self.chain,
                |p| {
                    p.begin();
                    Ok(())
                },
                |_| None,
            )
        };
        if let Err(e) = r {
            crate::log_error!("backend sampler: {e}");
        }
    }

    fn is_live(&self) -> bool {
        not_freed(self.chain).is_ok()
    }
}

/// Attach `smpl` to sequence `seq_id` of the context behind `ctx` (NULL detaches), as
/// llama.cpp's `set_sampler`: only a non-empty chain made by `llama_sampler_chain_init` can be
/// attached; its graph part is set up for the context's per-sequence output limit. Returns
/// whether the sampler is attached (or, for NULL, whether nothing is).
///
/// # Safety
/// `smpl` must be NULL or a live sampler.
pub(super) unsafe fn attach(ctx: *mut llama_context, seq_id: llama_seq_id, smpl: *mut llama_sampler) -> Result<bool> {
    if smpl.is_null() {
        super::handle::ctx_mut(ctx)?.detach_sampler(seq_id)?;
        return Ok(true);
    }
    not_freed(smpl)?;
    let per_seq = {
        let c = super::handle::ctx_mut(ctx)?;
        c.sampler_seq(seq_id)?;
        c.params.n_outputs_max_per_seq
    };
    // SAFETY: live sampler (contract).
    let chain_len = unsafe { is_our_chain(smpl) }.then(|| unsafe { as_chain(smpl) }.map(|c| c.samplers.len()));
    if !matches!(chain_len, Some(Ok(n)) if n > 0) {
        // SAFETY: live sampler (contract).
        let name = unsafe { CStr::from_ptr(llama_sampler_name(smpl)) };
        crate::log_warn!(
            "llama_set_sampler: sampler '{}' for seq_id = {seq_id}, cannot be offloaded to the backend (only a \
             non-empty chain can)",
            name.to_string_lossy()
        );
        super::handle::ctx_mut(ctx)?.detach_sampler(seq_id)?;
        return Ok(false);
    }
    // Set up before the context is locked: a client sampler's backend_init may call into llama.h.
    // SAFETY: a live chain; the CPU's buffer type is a static object.
    unsafe { chain_init(smpl, ggml_sys::ggml_backend_cpu_buffer_type(), per_seq) }?;
    let attached =
        super::handle::ctx_mut(ctx).and_then(|mut c| c.attach_sampler(seq_id, Box::new(Attached { chain: smpl })));
    if attached.is_err() {
        // Not attached after all: the chain may be attached elsewhere.
        // SAFETY: a live chain.
        unsafe { as_chain(smpl) }?.graph = None;
    }
    attached.map(|()| true)
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_sampler(
    ctx: *mut llama_context,
    seq_id: llama_seq_id,
    smpl: *mut llama_sampler,
) -> bool {
    // SAFETY: forwarded contract.
    entry!(false, { unsafe { attach(ctx, seq_id, smpl) } })
}
