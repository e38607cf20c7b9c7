//! The K-shift graph: re-rotate every layer's cached keys (and a lightning indexer's keys) by each
//! cell's position change, after `llama_memory_seq_add/div` moved positions.

use super::rope::rope_freqs;
use super::{in_graph, is_sliding, max_nodes, rope_factors, GraphParams};
use crate::error::{Error, Result};
use crate::ggml::{is_quantized, row_size, Graph, TensorRef, ROPE_NEOX};
use crate::kv::KvCache;
use crate::model::Model;

/// The graph and its inputs: the per-cell deltas, I32 [size], and the Hadamard matrices of
/// rotated caches.
pub struct ShiftGraph {
    pub graph: Graph,
    pub deltas: TensorRef,
    /// The keys' Hadamard matrix (`GraphParams::k_rot`), when the cache is rotated.
    pub k_rot: Option<TensorRef>,
    /// The indexer keys' (`GraphParams::idx_rot`), when they are quantized.
    pub idx_rot: Option<TensorRef>,
}

/// One cache tensor's keys as the shift sees them.
struct Keys {
    k: TensorRef,
    head: i64,
    n_head: i64,
    mode: i32,
    /// Rotated by Hadamard before the cache stored them.
    rot: Option<TensorRef>,
}

/// The K-shift of the full layers' cells, or with `sliding` of the sliding-window layers' (each
/// shifted by a graph of its own, as llama.cpp shifts each of its caches).
pub fn build_shift(model: &Model, kv: &KvCache, params: GraphParams, sliding: bool) -> Result<ShiftGraph> {
    shift_graph(model, kv, params, sliding).map_err(in_graph)
}

/// `build_shift`, its ggml errors not yet marked as the graph's.
fn shift_graph(model: &Model, kv: &KvCache, params: GraphParams, sliding: bool) -> Result<ShiftGraph> {
    let hp = model
        .hparams
        .as_ref()
        .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
    let mut g = Graph::new(max_nodes(model))?;
    let size = kv.size(sliding) as i64;
    let deltas = g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[size], "inp_k_shift")?;
    let rotation = |g: &mut Graph, n: u32, name: &str| match i64::from(n) {
        0 => Ok(None),
        n => g
            .input(ggml_sys::ggml_type_GGML_TYPE_F32, &[n, n], name)
            .map(Some)
            .map_err(Error::from),
    };
    let keys_rot = if sliding { params.k_rot_swa } else { params.k_rot };
    let k_rot = rotation(&mut g, keys_rot, "attn_inp_k_rot")?;
    // Indexer keys are rotated whatever their type, but only a quantized cache turns them back
    // around the shift (llama.cpp's `build_rope_shift`).
    let idx_quantized = (0..hp.n_layer as usize)
        .filter(|_| !sliding)
        .filter_map(|il| kv.indexer_k(il))
        .any(|k| is_quantized(k.ggml_type()));
    let idx_rot = match idx_quantized {
        true => rotation(&mut g, params.idx_rot, "attn_inp_k_rot_lid")?,
        false => None,
    };
    // Layers that never rotate keep their keys as they are (llama.cpp's `has_rope`).
    let layers = (0..hp.n_layer as usize).filter(|&il| kv.sliding_layer(il) == sliding);
    for il in layers.filter(|&il| hp.has_kv(il) && hp.has_rope(il)) {
        let model_keys = Keys {
            k: kv.k(il),
            head: i64::from(hp.head_k(il)),
            n_head: i64::from(hp.n_head_kv[il]),
            mode: hp.rope_type,
            rot: k_rot,
        };
        // The indexer's keys rotate as NeoX does, whatever the model's rotation.
        let indexer_keys = kv.indexer_k(il).filter(|_| hp.indexer.keeps(il)).map(|k| Keys {
            k,
            head: i64::from(hp.indexer.head_size),
            n_head: 1,
            mode: ROPE_NEOX,
            rot: idx_rot,
        });
        for keys in std::iter::once(model_keys).chain(indexer_keys) {
            shift_keys(&mut g, model, &params, il, &keys, deltas)?;
        }
    }
    Ok(ShiftGraph {
        graph: g,
        deltas,
        k_rot,
        idx_rot,
    })
}

/// Re-rotate one layer's cached `keys` by `deltas`.
fn shift_keys(
    g: &mut Graph,
    model: &Model,
    params: &GraphParams,
    il: usize,
    keys: &Keys,
    deltas: TensorRef,
) -> Result<()> {
    let Some(hp) = model.hparams.as_ref() else {
        return Ok(());
    };
    let Keys {
        k,
        head,
        n_head,
        mode,
        rot,
    } = *keys;
    let size = k.ne()[1];
    let n_rot = i64::from(hp.rot(il));
    // Latent attention's keys (and, as llama.cpp takes them, its indexer's) rotate their last
    // dimensions: only those are taken. A quantized cache is shifted over whole heads, rotated
    // past an offset: ggml can only quantize into whole rows (llama.cpp aborts there).
    let latent = hp.n_lora_kv > 0;
    let trailing = latent && !is_quantized(k.ggml_type());
    let (width, offset) = if trailing { (n_rot, head - n_rot) } else { (head, 0) };
    let row = |n: i64| row_size(k.ggml_type(), n);
    let heads = g.view(k, &[width, n_head, size], &[row(head), row(head * n_head)], row(offset))?;
    let (base, mut scale) = rope_freqs(hp, params, il);
    if let Some(s) = hp.shift_freq_scale_swa.filter(|_| is_sliding(hp, il)) {
        scale = s;
    }
    // Rotation needs float input; quantized caches go through f32 and back (rotated by
    // Hadamard, turned back and forth around it, as llama.cpp does).
    let mut src = match k.ggml_type() {
        ggml_sys::ggml_type_GGML_TYPE_F32 | ggml_sys::ggml_type_GGML_TYPE_F16 => heads,
        _ => g.cast(heads, ggml_sys::ggml_type_GGML_TYPE_F32)?,
    };
    if let Some(rot) = rot {
        src = g.hadamard(rot, src)?;
    }
    // llama.cpp's layers without factors of their own rotate without them.
    let factors = rope_factors(model, params).filter(|_| hp.rope_factors_swa || !hp.is_swa(il));
    let mut rotated = g.rope(
        src,
        deltas,
        factors,
        n_rot as i32,
        mode,
        None,
        params.rope.n_ctx_orig as i32,
        base,
        scale,
        params.rope.ext_factor,
        params.rope.attn_factor,
        params.rope.beta_fast,
        params.rope.beta_slow,
    )?;
    if latent && !trailing {
        rotated = g.rope_offset(rotated, (head - n_rot) as i32, n_rot as i32)?;
    }
    if let Some(rot) = rot {
        rotated = g.hadamard(rot, rotated)?;
    }
    let stored = g.copy_into(rotated, heads)?;
    g.expand(stored);
    Ok(())
}
