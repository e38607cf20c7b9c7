//! DeepSeek-V4's attention over its compressed caches (`kv::compressed`), node for node as
//! llama.cpp 0.3.36 builds it: every layer attends to its sliding window of raw keys (one per
//! token, the values read from them); a compressing layer also folds its tokens into its rings
//! of compressor states and, at each block's end, a softmax-weighted compression of the block's
//! (with overlap: and the previous block's) rows into one key, normed and rotated, which tokens
//! past the block attend to beside the window — all of them (HCA, ratio 128), or those a
//! lightning indexer over the compressed indexer keys picks (CSA, ratio 4).

use crate::error::{Error, Result};
use crate::ggml::{row_size, Scores, TensorRef};
use crate::graph::Rotated;
use crate::graph::{mask_type, set_i32, set_i64, set_mask, Builder, GraphInput, UbatchView};
use crate::kv::compressed::{Kind, Parts, PlanShape};

/// One compressed cache's inputs (llama.cpp's `comp_input`), made by the first layer that
/// compresses into it.
#[derive(Debug, Clone, Copy)]
pub struct CompInputs {
    /// The cache they are of.
    pub kind: Kind,
    pub state_pos: TensorRef,
    pub persist_src: TensorRef,
    pub persist_dst: TensorRef,
    pub restore: Option<(TensorRef, TensorRef)>,
    pub snapshot: Option<(TensorRef, TensorRef)>,
    pub read: TensorRef,
    pub write: TensorRef,
    pub write_pos: TensorRef,
    /// [n_kv, n_tokens / n_stream, 1, n_stream]: 0 where a token sees a compressed row.
    pub mask: TensorRef,
}

impl GraphInput for CompInputs {
    /// The values of the ubatch's plan for the cache (none in a training pass, which plans none).
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let Some(plans) = ub.memory.comp else {
            return Ok(());
        };
        let plan = plans[self.kind.index()];
        set_i32(self.state_pos, &plan.state_pos)?;
        set_i32(self.persist_src, &plan.persist_src)?;
        set_i32(self.persist_dst, &plan.persist_dst)?;
        if let Some((src, dst)) = self.restore {
            set_i32(src, &plan.restore_src)?;
            set_i32(dst, &plan.restore_dst)?;
        }
        if let Some((src, dst)) = self.snapshot {
            set_i32(src, &plan.snapshot_src)?;
            set_i32(dst, &plan.snapshot_dst)?;
        }
        set_i32(self.read, &plan.read)?;
        set_i64(self.write, plan.write.iter().copied())?;
        set_i32(self.write_pos, &plan.write_pos)?;
        set_mask(self.mask, &plan.mask())
    }
}

/// How a layer rotates: its base, scale and YaRN settings.
#[derive(Clone, Copy)]
struct Rope {
    base: f32,
    scale: f32,
    ext: f32,
    attn: f32,
    beta_fast: f32,
    beta_slow: f32,
    n_ctx_orig: i32,
}

/// The rope of compressed rows and of compressing layers: the file's compress base with the
/// context's scaling (YaRN's magnitude correction as DeepSeek-V4 computes it).
fn compress_rope(b: &Builder) -> Rope {
    let p = b.params.rope;
    let attn = if p.ext_factor == 0.0 {
        1.0
    } else {
        1.0 / (1.0 + 0.1 * (1.0 / p.freq_scale).ln())
    };
    Rope {
        base: b.hp.compress_rope_base,
        scale: p.freq_scale,
        ext: p.ext_factor,
        attn,
        beta_fast: p.beta_fast,
        beta_slow: p.beta_slow,
        n_ctx_orig: p.n_ctx_orig as i32,
    }
}

/// Layer `il`'s rope: the compress rope where it compresses, else the context's base unscaled.
fn layer_rope(b: &Builder, il: usize) -> Rope {
    if b.hp.compress_ratios.get(il).copied().unwrap_or(0) != 0 {
        return compress_rope(b);
    }
    Rope {
        base: b.params.rope.freq_base,
        scale: 1.0,
        ext: 0.0,
        attn: 1.0,
        beta_fast: 0.0,
        beta_slow: 0.0,
        n_ctx_orig: 0,
    }
}

fn comp_shape(bd: &Builder, kind: Kind) -> Result<PlanShape> {
    bd.shape
        .memory
        .comp
        .map(|c| c[kind.index()])
        .ok_or_else(|| Error::Internal("a compressing layer in a graph without compressed caches".into()))
}

fn comp_parts(bd: &Builder, kind: Kind, il: usize) -> Result<Parts> {
    bd.kv
        .compressed()
        .and_then(|s| s.parts(kind, il))
        .ok_or_else(|| Error::Internal(format!("layer {il} has no {} cache", kind.name())))
}

fn comp_inputs(bd: &mut Builder, kind: Kind) -> Result<CompInputs> {
    if let Some(&c) = bd.inputs.of::<CompInputs>().find(|c| c.kind == kind) {
        return Ok(c);
    }
    let s = comp_shape(bd, kind)?;
    let name = kind.name();
    let (i32t, i64t) = (ggml_sys::ggml_type_GGML_TYPE_I32, ggml_sys::ggml_type_GGML_TYPE_I64);
    let mut input = |t, n: usize, what: &str| {
        bd.g.input(t, &[n as i64], &format!("dsv4_{name}_{what}"))
            .map_err(Error::from)
    };
    let state_pos = input(i32t, s.n_state_pos, "state_pos")?;
    let persist_src = input(i32t, s.n_persist, "state_persist_src_idxs")?;
    let persist_dst = input(i32t, s.n_persist, "state_persist_dst_idxs")?;
    let restore = match s.n_restore {
        0 => None,
        n => Some((
            input(i32t, n, "state_restore_src_idxs")?,
            input(i32t, n, "state_restore_dst_idxs")?,
        )),
    };
    let snapshot = match s.n_snapshot {
        0 => None,
        n => Some((
            input(i32t, n, "state_snapshot_src_idxs")?,
            input(i32t, n, "state_snapshot_dst_idxs")?,
        )),
    };
    let read = input(i32t, s.n_read, "state_read_idxs")?;
    let write = input(i64t, s.n_write, "state_write_idxs")?;
    let write_pos = input(i32t, s.n_write, "state_write_pos")?;
    // The indexer takes its mask in F16; attention as its kernel does.
    let mask_t = match kind {
        Kind::Lid => ggml_sys::ggml_type_GGML_TYPE_F16,
        _ => mask_type(bd.params.flash_attn),
    };
    let ns = s.n_stream.max(1);
    let ne = [s.n_kv as i64, (s.n_tokens / ns) as i64, 1, ns as i64];
    let mask = bd.g.input(mask_t, &ne, &format!("dsv4_{name}_kq_mask"))?;
    let c = CompInputs {
        kind,
        state_pos,
        persist_src,
        persist_dst,
        restore,
        snapshot,
        read,
        write,
        write_pos,
        mask,
    };
    bd.inputs.add(c);
    Ok(c)
}

/// Rotate `x` ([head, n, n_tokens]) over its last `n_rot` dimensions as `r` says (or with
/// `back`, rotate it back).
fn dsv4_rope(bd: &mut Builder, x: TensorRef, pos: TensorRef, r: Rope, back: bool) -> Result<TensorRef> {
    let n_rot = bd.hp.n_rot as i32;
    let mode = bd.hp.rope_type;
    let y = bd.g.rope(
        x,
        pos,
        None,
        n_rot,
        mode,
        None,
        r.n_ctx_orig,
        r.base,
        r.scale,
        r.ext,
        r.attn,
        r.beta_fast,
        r.beta_slow,
    )?;
    let y = match back {
        true => bd.g.rope_inverse(y),
        false => Ok(y),
    }?;
    let offset = x.ne()[0] as i32 - n_rot;
    bd.g.rope_offset(y, offset, n_rot).map_err(Error::from)
}

/// The ring tensor `t` ([width, state_size, planes]) as rows [width, state_size * planes].
fn ring_rows(bd: &mut Builder, t: TensorRef) -> Result<TensorRef> {
    let [w, ss, planes, _] = t.ne();
    bd.g.view(t, &[w, ss * planes], &[t.nb()[1]], 0).map_err(Error::from)
}

/// Layer `il`'s compression into `kind`'s cache of the ubatch's tokens (`cur`, the normed
/// layer input): their compressor keys and scores, the ring restored from a pending
/// rollback, every completed block compressed and stored, the ring's snapshots taken and
/// the ring updated.
pub(super) fn dsv4_compress(bd: &mut Builder, il: usize, kind: Kind, cur: TensorRef) -> Result<()> {
    let l = Some(il);
    let inp = comp_inputs(bd, kind)?;
    let parts = comp_parts(bd, kind, il)?;
    let prefix = if kind == Kind::Lid {
        "indexer_compressor"
    } else {
        "attn_compressor"
    };
    let state_kv = bd.layer_matmul(il, &format!("{prefix}_kv.weight"), cur)?;
    let state_score = bd.layer_matmul(il, &format!("{prefix}_gate.weight"), cur)?;
    let ape = bd.layer_weight(il, &format!("{prefix}_ape.weight"))?;
    let ape = bd.g.get_rows(ape, inp.state_pos)?;
    let state_score = bd.g.add(state_score, ape)?;

    let (kv_all, score_all) = (ring_rows(bd, parts.kv)?, ring_rows(bd, parts.score)?);
    let (restored_kv, restored_score) = match inp.restore {
        Some((src, dst)) => {
            let kv = bd.g.get_rows(kv_all, src)?;
            let kv = bd.g.set_rows(kv_all, kv, dst)?;
            let score = bd.g.get_rows(score_all, src)?;
            let score = bd.g.set_rows(score_all, score, dst)?;
            (kv, score)
        }
        None => (kv_all, score_all),
    };
    // The live plane, then the ubatch's rows: what the plans' row ids index.
    let n_stream = bd.kv.compressed().map_or(1, |s| s.geometry(kind).n_stream);
    let live_rows = (kind.state_size() * n_stream) as i64;
    let live = |b: &mut Builder, t: TensorRef| -> Result<TensorRef> {
        b.g.view(t, &[t.ne()[0], live_rows], &[t.nb()[1]], 0)
            .map_err(Error::from)
    };
    let base_kv = live(bd, restored_kv)?;
    let base_score = live(bd, restored_score)?;
    let source_kv = bd.g.concat(base_kv, state_kv, 1)?;
    let source_score = bd.g.concat(base_score, state_score, 1)?;
    let head = parts.cache.ne()[0];
    let norm = bd.layer_weight(il, &format!("{prefix}_norm.weight"))?;
    let comp = compress_blocks(bd, kind, source_kv, source_score, inp, head, norm)?;
    let comp = bd.name(comp, &format!("{}_state_compress", kind.name()), l);
    // Rotated as the cache's keys are: the indexer's always, the others around a quantized
    // cache.
    let rot = match kind {
        Kind::Lid => bd.rotation(Rotated::IndexerKeys)?,
        _ => bd.rotation(Rotated::Keys)?,
    };
    let comp = match rot {
        Some(rot) => bd.g.hadamard(rot, comp)?,
        None => comp,
    };
    let comp = bd.g.reshape(comp, &[head, comp.ne()[2]])?;
    let stored = bd.g.set_rows(parts.cache, comp, inp.write)?;
    bd.g.expand(stored);

    if let Some((src, dst)) = inp.snapshot {
        for (restored, state, all) in [
            (restored_kv, state_kv, kv_all),
            (restored_score, state_score, score_all),
        ] {
            let from = bd.g.concat(restored, state, 1)?;
            let rows = bd.g.get_rows(from, src)?;
            let snap = bd.g.set_rows(all, rows, dst)?;
            bd.g.expand(snap);
        }
    }
    for (state, all) in [(state_kv, kv_all), (state_score, score_all)] {
        let rows = bd.g.get_rows(state, inp.persist_src)?;
        let kept = bd.g.set_rows(all, rows, inp.persist_dst)?;
        bd.g.expand(kept);
    }
    Ok(())
}

/// The completed blocks' compressed rows, [head, 1, n_blocks]: per block its rows (with
/// overlap, the first half of the previous window's and the second of its own) weighted by
/// the softmax of their scores and summed, RMS-normed by `norm`, rotated at the block's start.
fn compress_blocks(
    bd: &mut Builder,
    kind: Kind,
    source_kv: TensorRef,
    source_score: TensorRef,
    inp: CompInputs,
    head: i64,
    norm: TensorRef,
) -> Result<TensorRef> {
    let ratio = kind.ratio() as i64;
    let n_blocks = inp.write_pos.ne()[0];
    let (values, scores) = if kind.overlap() {
        // A zero key and a -inf score after the rows, for the first block's previous half.
        let zero_row = |b: &mut Builder, t: TensorRef, ninf: bool| -> Result<TensorRef> {
            let row = b.g.view(t, &[t.ne()[0]], &[], 0)?;
            let row = match ninf {
                true => b.g.scale_bias(row, 0.0, f32::NEG_INFINITY),
                false => b.g.scale(row, 0.0),
            }?;
            let row = b.g.reshape(row, &[t.ne()[0], 1])?;
            b.g.concat(t, row, 1).map_err(Error::from)
        };
        let kv = zero_row(bd, source_kv, false)?;
        let score = zero_row(bd, source_score, true)?;
        let n_read = ratio * n_blocks;
        let halves = |b: &mut Builder, t: TensorRef| -> Result<TensorRef> {
            let rows = b.g.get_rows(t, inp.read)?;
            let nb1 = rows.nb()[1];
            let prev = b.g.view(rows, &[head, n_read], &[nb1], 0)?;
            let prev = b.g.cont(prev)?;
            let prev = b.g.reshape(prev, &[head, ratio, n_blocks])?;
            let off = n_read as usize * nb1 + row_size(rows.ggml_type(), head);
            let cur = b.g.view(rows, &[head, n_read], &[nb1], off)?;
            let cur = b.g.cont(cur)?;
            let cur = b.g.reshape(cur, &[head, ratio, n_blocks])?;
            b.g.concat(prev, cur, 1).map_err(Error::from)
        };
        (halves(bd, kv)?, halves(bd, score)?)
    } else {
        let blocks = |b: &mut Builder, t: TensorRef| -> Result<TensorRef> {
            let rows = b.g.get_rows(t, inp.read)?;
            b.g.reshape(rows, &[head, ratio, n_blocks]).map_err(Error::from)
        };
        (blocks(bd, source_kv)?, blocks(bd, source_score)?)
    };
    let across = |b: &mut Builder, t: TensorRef| -> Result<TensorRef> {
        let t = b.g.permute(t, [1, 0, 2, 3])?;
        b.g.cont(t).map_err(Error::from)
    };
    let values = across(bd, values)?;
    let scores = across(bd, scores)?;
    let weights = bd.g.soft_max_rows(scores)?;
    let comp = bd.g.mul(values, weights)?;
    let comp = bd.g.sum_rows(comp)?;
    let comp = across(bd, comp)?;
    let comp = bd.rms_norm(comp, norm)?;
    let r = compress_rope(bd);
    dsv4_rope(bd, comp, inp.write_pos, r, false)
}

/// Layer `il`'s lightning indexer picks among the compressed rows, I32 [top_k, n_tokens /
/// n_stream, 1, n_stream], from the normed layer input `cur` and the queries' latent `qr`.
fn dsv4_indexer_top_k(bd: &mut Builder, il: usize, cur: TensorRef, qr: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let ix = &bd.hp.indexer;
    let (head, n_head, top_k) = (i64::from(ix.head_size), i64::from(ix.n_head), i64::from(ix.top_k));
    let nt = bd.shape.n_tokens as i64;
    let inp = comp_inputs(bd, Kind::Lid)?;
    let parts = comp_parts(bd, Kind::Lid, il)?;
    let q = bd.layer_matmul(il, "indexer.attn_q_b.weight", qr)?;
    let q = bd.g.reshape(q, &[head, n_head, nt])?;
    let pos = bd.positions()?;
    let q = dsv4_rope(bd, q, pos, compress_rope(bd), false)?;
    let q = match bd.rotation(Rotated::IndexerKeys)? {
        Some(rot) => bd.g.hadamard(rot, q)?,
        None => q,
    };
    let q = bd.name(q, "lid_q_rot", l);
    let w = bd.layer_matmul(il, "indexer.proj.weight", cur)?;
    let w = bd.g.scale(w, 1.0 / ((head * n_head) as f32).sqrt())?;
    let keys = comp_view(bd, Kind::Lid, parts.cache, inp.mask.ne()[0])?;
    let ns = keys.ne()[3];
    let tps = nt / ns;
    let qnb = q.nb();
    let q =
        bd.g.view(q, &[head, n_head, tps, ns], &[qnb[1], qnb[2], qnb[3] / ns as usize], 0)?;
    let wnb = w.nb();
    let w = bd.g.view(
        w,
        &[n_head, tps, 1, ns],
        &[wnb[1], wnb[2] / ns as usize, wnb[3] / ns as usize],
        0,
    )?;
    let scores = bd.g.lightning_indexer(q, keys, w, inp.mask)?;
    let scores = bd.name(scores, "lid_score_masked", l);
    let picks = bd.g.top_k(scores, top_k.min(scores.ne()[0]))?;
    let picks = bd.g.cont(picks)?;
    Ok(bd.name(picks, "lid_top_k", l))
}

/// The first `n` compressed rows of cache `t` ([head, size * n_stream]) in the ubatch's
/// streams, [head, 1, n, n_stream].
fn comp_view(bd: &mut Builder, kind: Kind, t: TensorRef, n: i64) -> Result<TensorRef> {
    let store = bd
        .kv
        .compressed()
        .ok_or_else(|| Error::Internal("no compressed caches".into()))?;
    let size = store.geometry(kind).kv_size;
    let head = t.ne()[0];
    let ns = comp_shape(bd, kind)?.n_stream.max(1) as i64;
    let row = row_size(t.ggml_type(), head);
    let stream = row * size;
    let first = comp_shape(bd, kind)?.first_stream;
    bd.g.view(t, &[head, 1, n, ns], &[row, row, stream], stream * first)
        .map_err(Error::from)
}

/// The compressed-attention mask of a CSA layer: the indexer's `picks` opened in the
/// compressed rows' mask, every other row closed.
fn picked_mask(bd: &mut Builder, mask: TensorRef, picks: TensorRef) -> Result<TensorRef> {
    let [n, tps, _, ns] = mask.ne();
    let k = picks.ne()[0];
    let closed = bd.g.fill(mask, f32::NEG_INFINITY)?;
    let mnb = closed.nb();
    let closed = bd.g.view(closed, &[1, n, tps, ns], &[mnb[0], mnb[1], mnb[3]], 0)?;
    let pnb = picks.nb();
    let picks =
        bd.g.view(picks, &[k, tps, ns, 1], &[pnb[1], pnb[3], pnb[3] * ns as usize], 0)?;
    let zeros = bd.g.filled(mask.ggml_type(), &[1, k, tps, ns], 0.0)?;
    let opened = bd.g.set_rows(closed, zeros, picks)?;
    let onb = opened.nb();
    let opened = bd.g.view(opened, &[n, tps, 1, ns], &[onb[2], onb[3], onb[3]], 0)?;
    bd.g.add(opened, mask).map_err(Error::from)
}

/// Layer `il`'s attention: queries `q` ([head, n_head, n_tokens]) over its window of raw
/// keys, the ubatch's `kv` ([head, 1, n_tokens]) stored among them first, and where it
/// compresses over the compressed rows it may see (the indexer's picks of them with CSA).
/// Returns [head * n_head, n_tokens].
pub(super) fn dsv4_attention(
    bd: &mut Builder,
    il: usize,
    (q, kv): (TensorRef, TensorRef),
    (cur, qr): (TensorRef, TensorRef),
    kq_scale: f32,
) -> Result<TensorRef> {
    let l = Some(il);
    let ratio = bd.hp.compress_ratios.get(il).copied().unwrap_or(0);
    let picks = match ratio {
        4 => Some(dsv4_indexer_top_k(bd, il, cur, qr)?),
        _ => None,
    };
    let rot = bd.rotation(Rotated::Keys)?;
    let (q, kv) = match rot {
        Some(rot) => (bd.g.hadamard(rot, q)?, bd.g.hadamard(rot, kv)?),
        None => (q, kv),
    };
    bd.g.expand(q);
    bd.g.expand(kv);
    let head = kv.ne()[0];
    let nt = bd.shape.n_tokens as i64;
    let kc = bd.kv.k(il);
    let rows = bd.rows_input(false, true)?;
    let k2 = bd.g.reshape(kv, &[head, nt])?;
    // Once per stream the tokens are written to (the rows are stream after stream).
    for copy in 0..bd.shape.kv_copies.max(1) {
        let r = bd.g.view(rows, &[nt], &[], copy * nt as usize * rows.nb()[0])?;
        let stored = bd.g.set_rows(kc, k2, r)?;
        bd.g.expand(stored);
    }
    let ns = bd.shape.n_streams.max(1) as i64;
    let tps = nt / ns;
    let n_kv = bd.shape.n_kv_swa as i64;
    let row = row_size(kc.ggml_type(), head);
    let stream = row * bd.kv.layer_stream_size(il);
    let mut k = bd.g.view(
        kc,
        &[head, 1, n_kv, ns],
        &[row, row, stream],
        stream * bd.shape.first_stream,
    )?;
    let mask = bd.mask(true)?;
    let mut mask = bd.g.reshape(mask, &[n_kv, tps, 1, ns])?;
    let kind = match ratio {
        4 => Some(Kind::Csa),
        128 => Some(Kind::Hca),
        _ => None,
    };
    if let Some(kind) = kind {
        let inp = comp_inputs(bd, kind)?;
        let parts = comp_parts(bd, kind, il)?;
        let comp = comp_view(bd, kind, parts.cache, inp.mask.ne()[0])?;
        k = bd.g.concat(k, comp, 2)?;
        let comp_mask = match picks {
            Some(p) => picked_mask(bd, inp.mask, p)?,
            None => inp.mask,
        };
        mask = bd.g.concat(mask, comp_mask, 0)?;
    }
    let out = dsv4_mha(bd, il, q, k, mask, kq_scale)?;
    // The values were the rotated keys: their output is rotated back.
    let out = match rot {
        Some(rot) => bd.g.hadamard(rot, out)?,
        None => out,
    };
    Ok(bd.name(out, "attn_out_heads", l))
}

/// Multi-head attention of `q` over keys `k` that are also the values
/// ([head, 1, n_kv, n_stream]), with the layer's sinks.
fn dsv4_mha(
    bd: &mut Builder,
    il: usize,
    q: TensorRef,
    k: TensorRef,
    mask: TensorRef,
    kq_scale: f32,
) -> Result<TensorRef> {
    let [head, n_head, nt, _] = q.ne();
    let ns = k.ne()[3];
    let tps = nt / ns;
    let qnb = q.nb();
    let q =
        bd.g.view(q, &[head, n_head, tps, ns], &[qnb[1], qnb[2], qnb[2] * tps as usize], 0)?;
    let q = bd.g.permute(q, [0, 2, 1, 3])?;
    let k = bd.g.permute(k, [0, 2, 1, 3])?;
    let sinks = bd.layer_weight_opt(il, "attn_sinks.weight");
    let scores = Scores {
        scale: kq_scale,
        max_bias: 0.0,
        softcap: 0.0,
    };
    if bd.params.flash_attn {
        let k = match k.ggml_type() {
            ggml_sys::ggml_type_GGML_TYPE_F32 => bd.g.cast(k, ggml_sys::ggml_type_GGML_TYPE_F16)?,
            _ => k,
        };
        let o = bd.g.flash_attn(q, k, k, mask, scores, sinks)?;
        let [a, b, c, d] = o.ne();
        return bd.g.reshape(o, &[a * b, c * d]).map_err(Error::from);
    }
    let kq = bd.g.mul_mat(k, q)?;
    let kq = bd.g.soft_max(kq, mask, kq_scale, 0.0, sinks)?;
    let vt = bd.g.permute(k, [1, 0, 2, 3])?;
    let vt = bd.g.cont(vt)?;
    let kqv = bd.g.mul_mat(vt, kq)?;
    let o = bd.g.permute(kqv, [0, 2, 1, 3])?;
    let o = bd.g.cont(o)?;
    bd.g.reshape(o, &[head * n_head, nt]).map_err(Error::from)
}

/// DeepSeek-V4's query and key rotation of layer `il` (the last `n_rot` dimensions of each
/// head), or with `back` its inverse.
pub(super) fn dsv4_layer_rope(bd: &mut Builder, il: usize, x: TensorRef, back: bool) -> Result<TensorRef> {
    let pos = bd.positions()?;
    let r = layer_rope(bd, il);
    dsv4_rope(bd, x, pos, r, back)
}
