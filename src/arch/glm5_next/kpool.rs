//! GLM5-Next's k-pool indexer and the sparse latent attention over its picks. Each token's
//! indexer key and pool gate are cached (with a zeroed pooled-key slot) in its indexer row; the
//! pools the ubatch completes (or an edit made stale) are pooled, a softmax of gate plus a learned
//! per-member bias weighting the keys, into the slot of the pool's last member. Tokens score the
//! pools they may see (lightning-indexer style), keep the best, and attend to their cells and to
//! their own incomplete pool. Small ubatches gather the picked latents; larger ones mask all
//! cells. The pool bookkeeping is `kv::kpool`'s; every op mirrors llama.cpp's graph.

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{set_f32, set_i32, set_i64, set_mask, Builder, GraphInput, UbatchView};
use crate::kv::kpool::KpoolShape;

const F32: ggml_sys::ggml_type = ggml_sys::ggml_type_GGML_TYPE_F32;
const F16: ggml_sys::ggml_type = ggml_sys::ggml_type_GGML_TYPE_F16;
const I32: ggml_sys::ggml_type = ggml_sys::ggml_type_GGML_TYPE_I32;
const I64: ggml_sys::ggml_type = ggml_sys::ggml_type_GGML_TYPE_I64;

/// Ubatches of at most this many tokens gather the picked latents (llama.cpp's bound).
const GATHER_MAX_TOKENS: usize = 16;

/// The k-pool inputs of a ubatch's graph (values from `kv::kpool::Step::inputs`).
#[derive(Debug, Clone, Copy)]
pub struct KpoolInputs {
    /// I32 [n_pool]: the cell caching each pool's pooled key.
    pub pool_cells: TensorRef,
    /// I32 [kpool, n_pool]: each pool's member cells.
    pub pool_idxs: TensorRef,
    /// F16 [n_pool, n_tokens]: which pools each token may pick.
    pub pool_mask: TensorRef,
    /// I32 [kpool - 1, n_tokens]: each token's incomplete pool.
    pub tail_idxs: TensorRef,
    /// F32 [n_sel, 1, 1, n_tokens]: live and dead selection slots.
    pub gather_mask: TensorRef,
    /// I32 [kpool, n_new]: members of the pools pooled now.
    pub new_pool_idxs: TensorRef,
    /// I64 [n_new]: where their pooled keys go (only while pooled keys are cached).
    pub new_pool_rep: Option<TensorRef>,
    /// Whether the picked latents are gathered (else every cell is masked).
    pub gather: bool,
    /// Pools picked per token, and selection slots per token (their cells, then the tail's).
    pub n_top: usize,
    pub n_sel: usize,
}

impl GraphInput for KpoolInputs {
    /// The values of the ubatch's k-pool step (none in a training pass, which plans no step).
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let Some(step) = ub.memory.kpool else {
            return Ok(());
        };
        let d = step.inputs(
            ub.places,
            ub.shape.n_kv,
            ub.kv.stream_size(),
            ub.kv.n_stream(),
            self.gather,
            self.n_sel,
        );
        set_i32(self.pool_cells, &d.pool_cells)?;
        set_i32(self.pool_idxs, &d.pool_idxs)?;
        set_mask(self.pool_mask, &d.pool_mask)?;
        set_i32(self.tail_idxs, &d.tail_idxs)?;
        set_f32(self.gather_mask, &d.gather_mask)?;
        set_i32(self.new_pool_idxs, &d.new_pool_idxs)?;
        if let Some(rep) = self.new_pool_rep {
            set_i64(rep, d.new_pool_rep.iter().copied())?;
        }
        Ok(())
    }
}

/// What the indexer picked for each token.
#[derive(Clone, Copy)]
pub enum Picks {
    /// The picked cells' rows, I32 [n_sel, n_tokens] (gathered; dead slots masked apart).
    Cells(TensorRef),
    /// The attention mask with everything unpicked at -inf, [n_kv, n_tokens].
    Mask(TensorRef),
}

fn kpool_shape(bd: &Builder) -> Result<KpoolShape> {
    bd.shape
        .memory
        .kpool
        .ok_or_else(|| Error::Internal("a k-pool graph without its pool shape".into()))
}

/// The k-pool inputs (made on first use).
fn kpool_inputs(bd: &mut Builder) -> Result<KpoolInputs> {
    if let Some(&k) = bd.inputs.of::<KpoolInputs>().next() {
        return Ok(k);
    }
    let ks = kpool_shape(bd)?;
    let ix = &bd.hp.indexer;
    let kpool = ix.kpool as usize;
    let nt = bd.shape.n_tokens;
    let n_top = ks.n_pool.min((ix.top_k / ix.kpool) as usize);
    let n_sel = kpool * n_top + if ix.kpool_tail { kpool - 1 } else { 0 };
    let gather = nt <= GATHER_MAX_TOKENS && bd.shape.n_kv > n_sel;
    let (kp, np, ntk, ns) = (kpool as i64, ks.n_pool as i64, nt as i64, n_sel as i64);
    let mut input = |t, ne: &[i64], name: &str| bd.g.input(t, ne, name).map_err(Error::from);
    let k = KpoolInputs {
        pool_cells: input(I32, &[np], "kpool_cells")?,
        pool_idxs: input(I32, &[kp, np], "kpool_idxs")?,
        pool_mask: input(F16, &[np, ntk], "kpool_mask")?,
        tail_idxs: input(I32, &[kp - 1, ntk], "kpool_tail_idxs")?,
        gather_mask: input(F32, &[ns, 1, 1, ntk], "kpool_gather_mask")?,
        new_pool_idxs: input(I32, &[kp, ks.n_new as i64], "kpool_new_idxs")?,
        new_pool_rep: match ks.cache_safe {
            true => Some(input(I64, &[ks.n_new as i64], "kpool_new_rep")?),
            false => None,
        },
        gather,
        n_top,
        n_sel,
    };
    // Allocated even where no op reads them: every ubatch sets them.
    for t in [k.pool_cells, k.pool_idxs, k.pool_mask, k.tail_idxs, k.gather_mask] {
        bd.g.expand(t);
    }
    bd.inputs.add(k);
    Ok(k)
}

/// Layer `il`'s picks from the normed layer input `cur` ([n_embd, n_tokens]) and the queries'
/// normed latent `qr`; stores the tokens' indexer rows and the pools' pooled keys.
pub(super) fn kpool_picks(bd: &mut Builder, il: usize, cur: TensorRef, qr: TensorRef) -> Result<Picks> {
    let inp = kpool_inputs(bd)?;
    let ks = kpool_shape(bd)?;
    let ix = &bd.hp.indexer;
    let (head, n_head, kpool) = (i64::from(ix.head_size), i64::from(ix.n_head), i64::from(ix.kpool));
    let (nt, n_pool, n_new) = (bd.shape.n_tokens as i64, ks.n_pool as i64, ks.n_new as i64);
    let l = Some(il);
    let cache = bd
        .kv
        .indexer_k(il)
        .filter(|_| ix.keeps(il))
        .ok_or_else(|| Error::Internal(format!("layer {il} has no indexer cache")))?;
    let iq = bd.layer_matmul(il, "indexer.attn_q_b.weight", qr)?;
    let iq = bd.g.reshape(iq, &[head, n_head, nt])?;
    let iq = bd.name(iq, "indexer_q", l);
    let ik = bd.layer_matmul(il, "indexer.attn_k.weight", cur)?;
    let (w, b) = (
        bd.layer_weight(il, "indexer.k_norm.weight")?,
        bd.layer_weight(il, "indexer.k_norm.bias")?,
    );
    let ik = bd.layer_norm(ik, w, b)?;
    let ik = bd.name(ik, "indexer_k", l);
    let ig = bd.layer_matmul(il, "indexer_compressor_gate.weight", cur)?;
    let ig = bd.name(ig, "indexer_gate", l);

    // Each row: key | gate | pooled (zero until its pool is pooled).
    let zero = bd.g.filled(F32, &[head, nt], 0.0)?;
    let packed = bd.g.concat(ik, ig, 0)?;
    let packed = bd.g.concat(packed, zero, 0)?;
    let rows = bd.kv_rows()?;
    let stored = bd.g.set_rows(cache, packed, rows)?;
    bd.g.expand(stored);

    let cnb = cache.nb();
    let n_cells = cache.ne()[1];
    let row = |n: i64| crate::ggml::row_size(cache.ggml_type(), n);
    let key_gate = bd.g.view(cache, &[2 * head, n_cells], &[cnb[1]], 0)?;
    let pooled_slots = bd.g.view(cache, &[head, n_cells], &[cnb[1]], row(2 * head))?;

    // Pool the pools due now: softmax over each pool's members of gate plus position bias.
    let members = bd.g.reshape(inp.new_pool_idxs, &[kpool * n_new])?;
    let kg = bd.g.get_rows(key_gate, members)?;
    let kg = bd.g.reshape(kg, &[2 * head, kpool, n_new])?;
    let knb = kg.nb();
    let pk = bd.g.view(kg, &[head, kpool, n_new], &[knb[1], knb[2]], 0)?;
    let pg = bd.g.view(kg, &[head, kpool, n_new], &[knb[1], knb[2]], row_f32(head))?;
    let ape = bd.layer_weight(il, "indexer_compressor_ape.weight")?;
    let logits = bd.g.add(pg, ape)?;
    let logits = bd.g.permute(logits, [1, 0, 2, 3])?;
    let logits = bd.g.cont(logits)?;
    let logits = bd.g.reshape(logits, &[kpool, head * n_new])?;
    let probs = bd.g.soft_max_rows(logits)?;
    let probs = bd.g.reshape(probs, &[kpool, head, n_new])?;
    let pk = bd.g.permute(pk, [1, 0, 2, 3])?;
    let pk = bd.g.cont(pk)?;
    let weighted = bd.g.mul(probs, pk)?;
    let pooled_new = bd.g.sum_rows(weighted)?;
    let pooled_new = bd.g.reshape(pooled_new, &[head, n_new])?;
    let pooled_new = bd.name(pooled_new, "indexer_pool_k_new", l);

    let pooled = match inp.new_pool_rep {
        Some(rep) => {
            // Written before the pools are read back.
            let written = bd.g.set_rows(pooled_slots, pooled_new, rep)?;
            bd.g.expand(written);
            bd.g.get_rows(pooled_slots, inp.pool_cells)?
        }
        None => {
            if n_new > n_pool {
                return Err(Error::Internal(format!("{n_new} pools pooled of {n_pool}")));
            }
            let pad = bd.g.filled(F32, &[head, n_pool - n_new], 0.0)?;
            bd.g.concat(pooled_new, pad, 1)?
        }
    };
    let pooled = bd.g.reshape(pooled, &[head, 1, n_pool])?;
    let pooled = bd.name(pooled, "indexer_pool_k", l);

    let weights = bd.layer_matmul(il, "indexer.proj.weight", cur)?;
    let weights = bd.g.scale(weights, 1.0 / ((head * n_head) as f32).sqrt())?;
    let weights = bd.name(weights, "indexer_weights", l);
    let score = bd.g.lightning_indexer(iq, pooled, weights, inp.pool_mask)?;
    let score = bd.name(score, "indexer_score", l);

    // The best pools, ordered by falling score: the gather mask marks the first visible ones.
    let n_top = inp.n_top as i64;
    let top = bd.g.top_k(score, n_top)?;
    let score3 = bd.g.reshape(score, &[1, n_pool, nt])?;
    let top_score = bd.g.get_rows(score3, top)?;
    let top_score = bd.g.reshape(top_score, &[n_top, nt])?;
    let order = bd.g.argsort_desc(top_score)?;
    let top = bd.g.cast(top, F32)?;
    let top = bd.g.reshape(top, &[1, n_top, nt])?;
    let top = bd.g.get_rows(top, order)?;
    let top = bd.g.reshape(top, &[n_top, nt])?;
    let top = bd.g.cont(top)?;
    let top = bd.g.cast(top, I32)?;
    let top = bd.name(top, "indexer_top_k", l);

    let top = bd.g.reshape(top, &[n_top * nt])?;
    let sel = bd.g.get_rows(inp.pool_idxs, top)?;
    let mut sel = bd.g.reshape(sel, &[kpool * n_top, nt])?;
    if ix.kpool_tail {
        sel = bd.g.concat(sel, inp.tail_idxs, 0)?;
    }
    if inp.gather {
        return Ok(Picks::Cells(bd.name(sel, "indexer_sel_idx", l)));
    }
    picks_mask(bd, il, sel, inp).map(Picks::Mask)
}

/// The attention mask with only the cells of `sel` (I32 [n_sel, n_tokens]) left open; each
/// dead slot opens a dump row of its own past n_kv, so a token's rows are distinct.
fn picks_mask(bd: &mut Builder, il: usize, sel: TensorRef, inp: KpoolInputs) -> Result<TensorRef> {
    let (n_kv, nt, n_sel) = (bd.shape.n_kv as i64, bd.shape.n_tokens as i64, inp.n_sel as i64);
    let kq_mask = bd.mask(false)?;
    let g = &mut bd.g;
    let seed = g.view(sel, &[1], &[], 0)?;
    let seed = g.cast(seed, F32)?;
    let mask_seed = match kq_mask.ggml_type() {
        F32 => seed,
        t => g.cast(seed, t)?,
    };
    let mask_seed = g.fill(mask_seed, f32::NEG_INFINITY)?;
    let closed = g.repeat(mask_seed, [1, n_kv + n_sel, nt, 1])?;
    let closed = g.reshape(closed, &[1, n_kv + n_sel, nt])?;
    let zero_seed = g.fill(seed, 0.0)?;
    let zeros = g.repeat(zero_seed, [1, n_sel, nt, 1])?;
    let zeros = g.reshape(zeros, &[1, n_sel, nt])?;

    // idx = dump + live * (idx - dump), live = exp(slot mask).
    let live = g.reshape(inp.gather_mask, &[n_sel, nt])?;
    let live = g.exp(live)?;
    let dump = g.arange(n_kv, n_sel)?;
    let idx = g.cast(sel, F32)?;
    let idx = g.sub(idx, dump)?;
    let idx = g.mul(idx, live)?;
    let idx = g.add(idx, dump)?;
    let idx = g.cast(idx, I32)?;
    let idx = g.reshape(idx, &[n_sel, nt, 1])?;

    let opened = g.set_rows(closed, zeros, idx)?;
    let onb = opened.nb();
    let opened = g.view(opened, &[n_kv, nt], &[onb[2]], 0)?;
    let kq = g.reshape(kq_mask, &[n_kv, nt])?;
    let sel = g.add(opened, kq)?;
    Ok(bd.name(sel, "indexer_sel", Some(il)))
}

/// Absorbed latent attention of layer `il` over gathered cells: stores the ubatch's latent
/// `k` ([width, 1, n_tokens]), then each token's queries `q` ([width, n_head, n_tokens])
/// attend to the `n_sel` latents of `cells` (I32 [n_sel, n_tokens]), dead slots masked by the
/// gather mask, the output widened per head by `v_mla`. Returns [head_v * n_head, n_tokens].
pub(super) fn attention_gathered(
    bd: &mut Builder,
    il: usize,
    q: TensorRef,
    k: TensorRef,
    cells: TensorRef,
    v_mla: TensorRef,
    kq_scale: f32,
) -> Result<TensorRef> {
    let inp = kpool_inputs(bd)?;
    let kq_mask = bd.mask(false)?;
    bd.g.expand(kq_mask);
    let kc = bd.kv.k(il);
    let rows = bd.kv_rows()?;
    let k2 = bd.merge_heads(k)?;
    let stored = bd.g.set_rows(kc, k2, rows)?;
    bd.g.expand(stored);

    let [width, n_head, nt, _] = q.ne();
    let n_sel = cells.ne()[0];
    let g = &mut bd.g;
    let flat = g.reshape(cells, &[n_sel * nt])?;
    let kg = g.get_rows(kc, flat)?;
    let kg = g.reshape(kg, &[width, n_sel, 1, nt])?;
    let kg = bd.name(kg, "kv_gathered", Some(il));
    let g = &mut bd.g;
    let qg = g.permute(q, [0, 2, 3, 1])?;
    let kq = g.mul_mat(kg, qg)?;
    let kq = g.soft_max(kq, inp.gather_mask, kq_scale, 0.0, None)?;
    let vt = g.transpose(kg)?;
    let vt = g.cont(vt)?;
    let kqv = g.mul_mat(vt, kq)?;
    let kqv = g.mul_mat(v_mla, kqv)?;
    let out = g.permute(kqv, [0, 2, 1, 3])?;
    let out = g.cont(out)?;
    let hv = kqv.ne()[0];
    g.reshape(out, &[hv * n_head, nt]).map_err(Error::from)
}

/// Bytes of `n` F32 values (the gathered key|gate rows are F32 whatever the cache's type).
fn row_f32(n: i64) -> usize {
    crate::ggml::row_size(F32, n)
}
