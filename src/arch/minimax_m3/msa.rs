//! MiniMax-M3's block-sparse attention (MSA). A small indexer (one head per KV head group) scores
//! positions, not cells: each cached indexer key is gathered to its position, each query head's
//! scores are maxed over blocks of `block` positions, and the best `top_k` blocks (the `local`
//! ones ending at the token's own always among them) are what that KV head's queries attend to.
//! A ubatch of one token per stream gathers those blocks' keys and values and attends to them
//! alone; a longer one keeps every cell and masks the others out, per KV head. Both follow
//! llama.cpp's op order, so that results stay bit-identical; the position maps are inputs set
//! from the cache's cells (`pos_mask`, `pos_slots`, `cell_blocks`, `local_bias`).

use crate::error::{Error, Result};
use crate::ggml::{row_size, Graph, Scores, TensorRef};
use crate::graph::Rotated;
use crate::graph::{set_f32, set_i32, Builder, GraphInput, UbatchView};
use crate::kv::{KvCache, TokenPlace};

/// The position maps of a ubatch's graph (made by the first sparse layer).
#[derive(Debug, Clone, Copy)]
pub struct MsaInputs {
    /// F32 [n_blocks, n_tokens]: 1e30 on the blocks each token always attends to.
    pub bias: TensorRef,
    /// F32 [n_pos, n_tokens]: 0 on the positions each token sees, -inf elsewhere.
    pub pos_mask: TensorRef,
    /// I32 [n_pos, n_streams]: the cell holding each position of the stream's sequence.
    pub pos_slot: TensorRef,
    /// The same as F32 (one token per stream), to gather from.
    pub pos_slot_f: Option<TensorRef>,
    /// I32 [n_kv, n_streams]: each cell's position block (longer ubatches).
    pub cell_blk: Option<TensorRef>,
}

impl GraphInput for MsaInputs {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let (kv, places) = (ub.kv, ub.places);
        let (n_pos, n_streams) = (ub.shape.n_pos, ub.shape.n_streams.max(1));
        let block = ub.hp.indexer.block.max(1) as i32;
        let n_blocks = n_pos / block as usize;
        set_f32(self.bias, &local_bias(places, n_blocks, block, ub.hp.indexer.local))?;
        set_f32(self.pos_mask, &pos_mask(kv, places, n_pos))?;
        let slots = pos_slots(kv, places, n_streams, n_pos);
        set_i32(self.pos_slot, &slots)?;
        if let Some(t) = self.pos_slot_f {
            set_f32(t, &slots.iter().map(|&s| s as f32).collect::<Vec<f32>>())?;
        }
        if let Some(t) = self.cell_blk {
            set_i32(t, &cell_blocks(kv, places, n_streams, ub.shape.n_kv, block))?;
        }
        Ok(())
    }
}

/// Per token ([n_tokens][n_pos]), 0 at the positions of the cells its sequence holds at or
/// before its own, -inf elsewhere.
fn pos_mask(kv: &KvCache, places: &[TokenPlace], n_pos: usize) -> Vec<f32> {
    let mut out = vec![f32::NEG_INFINITY; places.len() * n_pos];
    for (t, row) in places.iter().zip(out.chunks_exact_mut(n_pos.max(1))) {
        let cells = kv.stream(kv.stream_of(t.primary_seq));
        for j in 0..cells.size() {
            let Some(p) = cells.pos(j) else { continue };
            if cells.seqs(j).contains(t.primary_seq) && p <= t.pos && (p as usize) < n_pos {
                row[p as usize] = 0.0;
            }
        }
    }
    out
}

/// Per stream group of the ubatch ([n_streams][n_pos]), the cell within the stream holding each
/// position of the group's sequence (the last such cell; 0 where none does).
fn pos_slots(kv: &KvCache, places: &[TokenPlace], n_streams: usize, n_pos: usize) -> Vec<i32> {
    let tps = places.len() / n_streams.max(1);
    let mut out = vec![0i32; n_streams * n_pos];
    for (s, row) in out.chunks_exact_mut(n_pos.max(1)).enumerate() {
        let seq = places[s * tps].primary_seq;
        let cells = kv.stream(kv.stream_of(seq));
        for j in 0..cells.size() {
            match cells.pos(j) {
                Some(p) if cells.seqs(j).contains(seq) && (p as usize) < n_pos => row[p as usize] = j as i32,
                _ => {}
            }
        }
    }
    out
}

/// Per stream group ([n_streams][n_kv]), the position block of each of the first `n_kv` cells
/// holding the group's sequence (0 for the others).
fn cell_blocks(kv: &KvCache, places: &[TokenPlace], n_streams: usize, n_kv: usize, block: i32) -> Vec<i32> {
    let tps = places.len() / n_streams.max(1);
    let mut out = vec![0i32; n_streams * n_kv];
    for (s, row) in out.chunks_exact_mut(n_kv.max(1)).enumerate() {
        let seq = places[s * tps].primary_seq;
        let cells = kv.stream(kv.stream_of(seq));
        for (j, b) in row.iter_mut().enumerate() {
            if let Some(p) = cells.pos(j).filter(|_| cells.seqs(j).contains(seq)) {
                *b = p / block;
            }
        }
    }
    out
}

/// Per token ([n_tokens][n_blocks]), 1e30 on the `local` blocks ending at its own position's.
fn local_bias(places: &[TokenPlace], n_blocks: usize, block: i32, local: u32) -> Vec<f32> {
    let mut out = vec![0f32; places.len() * n_blocks];
    for (t, row) in places.iter().zip(out.chunks_exact_mut(n_blocks.max(1))) {
        let own = i64::from(t.pos / block);
        for l in 0..i64::from(local) {
            let b = own - l;
            if b < 0 {
                break;
            }
            if (b as usize) < n_blocks {
                row[b as usize] = 1e30;
            }
        }
    }
    out
}

const F32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
const F16: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F16;
const I32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_I32;

/// Layer `il`'s block-sparse attention from its normed input `cur` and its rotated queries,
/// keys and values ([head, n_head(_kv), n_tokens]): stores the keys, values and indexer keys,
/// returns the heads' output before the output projection, [head * n_head, n_tokens].
pub(super) fn msa_attention(
    bd: &mut Builder,
    il: usize,
    cur: TensorRef,
    (q, k, v): (TensorRef, TensorRef, TensorRef),
    kq_scale: f32,
) -> Result<TensorRef> {
    let hp = bd.hp;
    let ix = &hp.indexer;
    let (d_idx, hd) = (i64::from(ix.head_size), i64::from(ix.n_head));
    let nt = bd.shape.n_tokens as i64;
    let ns = bd.shape.n_streams.max(1) as i64;
    let tps = nt / ns;
    let (n_kv, n_pos, blk) = (bd.shape.n_kv as i64, bd.shape.n_pos as i64, i64::from(ix.block));
    let n_blocks = n_pos / blk;
    let l = Some(il);

    let iq = bd.layer_matmul(il, "indexer.q_proj.weight", cur)?;
    let iq = bd.g.reshape(iq, &[d_idx, hd, nt])?;
    let ik = bd.layer_matmul(il, "indexer.k_proj.weight", cur)?;
    let ik = bd.g.reshape(ik, &[d_idx, 1, nt])?;
    let iq = bd.layer_rms_norm(il, iq, "indexer.q_norm.weight", "iq")?;
    let ik = bd.layer_rms_norm(il, ik, "indexer.k_norm.weight", "ik")?;
    let iq = bd.rope(iq, il, None)?;
    let ik = bd.rope(ik, il, None)?;
    let idx_cache = bd
        .kv
        .indexer_k(il)
        .filter(|_| ix.keeps(il))
        .ok_or_else(|| Error::Internal(format!("layer {il} has no indexer cache")))?;
    let rows = bd.kv_rows()?;
    let ik2 = bd.g.reshape(ik, &[d_idx, nt])?;
    let stored = bd.g.set_rows(idx_cache, ik2, rows)?;
    bd.g.expand(stored);

    // Rotated around a quantized cache, as attention elsewhere.
    let (q, k) = match bd.rotation(Rotated::Keys)? {
        Some(rot) => (bd.g.hadamard(rot, q)?, bd.g.hadamard(rot, k)?),
        None => (q, k),
    };
    let v_rot = bd.rotation(Rotated::Values)?;
    let v = match v_rot {
        Some(rot) => bd.g.hadamard(rot, v)?,
        None => v,
    };
    let (kc, vc) = (
        bd.kv.k(il),
        bd.kv
            .v(il)
            .ok_or_else(|| Error::Internal(format!("layer {il} has no V cache")))?,
    );
    for (cache, x) in [(kc, k), (vc, v)] {
        let x2 = bd.merge_heads(x)?;
        let stored = bd.g.set_rows(cache, x2, rows)?;
        bd.g.expand(stored);
    }

    let d = i64::from(hp.n_embd_head_k);
    let (n_head, n_head_kv) = (i64::from(hp.n_head[il]), i64::from(hp.n_head_kv[il]));
    if n_head_kv != hd || n_head % n_head_kv != 0 {
        return Err(Error::model(format!(
            "{}: block-sparse attention needs one indexer head per KV head ({hd} and {n_head_kv})",
            hp.arch_name
        )));
    }
    let gp = n_head / n_head_kv;
    let top = i64::from(ix.top_k).min(n_blocks);
    let stream_rows = bd.kv.stream_size() as i64;
    let s0 = bd.shape.first_stream;
    let inputs = msa_inputs(bd, tps == 1)?;
    let scores = Scores {
        scale: kq_scale,
        max_bias: hp.max_alibi_bias,
        softcap: 0.0,
    };
    let g = &mut bd.g;
    let stream_bytes = |t: TensorRef, width: i64| row_size(t.ggml_type(), width * stream_rows);
    let idx_stream = stream_bytes(idx_cache, d_idx);
    let (k_stream, v_stream) = (stream_bytes(kc, d * n_head_kv), stream_bytes(vc, d * n_head_kv));
    let out = if tps == 1 {
        let slot_f = inputs
            .pos_slot_f
            .ok_or_else(|| Error::Internal("no position slots to gather".into()))?;
        let ik3 = g.view(
            idx_cache,
            &[d_idx, n_kv, ns],
            &[row_size(idx_cache.ggml_type(), d_idx), idx_stream],
            idx_stream * s0,
        )?;
        let ikp = g.get_rows(ik3, inputs.pos_slot)?;
        let ikp = g.reshape(ikp, &[d_idx, n_pos, 1, ns])?;
        let iq4 = g.reshape(iq, &[d_idx, hd, 1, ns])?;
        let sc = g.mul_mat(ikp, iq4)?;
        let pm = g.reshape(inputs.pos_mask, &[n_pos, 1, 1, ns])?;
        let sc = g.add(sc, pm)?;
        let bs = g.max_pool_rows(sc, blk)?;
        let bias = g.reshape(inputs.bias, &[n_blocks, 1, 1, ns])?;
        let bsf = g.add(bs, bias)?;
        let picked = g.top_k(bsf, top)?;
        // Positions of the picked blocks, then their cells, then each head's row of them.
        let a = g.cast(picked, F32)?;
        let a = g.scale(a, blk as f32)?;
        let a = g.reshape(a, &[1, top, hd, ns])?;
        let a = g.repeat(a, [blk, top, hd, ns])?;
        let ramp = g.arange(0, blk)?;
        let ramp = g.reshape(ramp, &[blk, 1, 1])?;
        let tj = g.add(a, ramp)?;
        let n_sel = blk * top * hd;
        let tj = g.reshape(tj, &[n_sel, ns])?;
        let tokj = g.cast(tj, I32)?;
        let slots = g.reshape(slot_f, &[1, n_pos, ns])?;
        let cs = g.get_rows(slots, tokj)?;
        let cs = g.reshape(cs, &[blk, top, hd, ns])?;
        let cs = g.scale(cs, n_head_kv as f32)?;
        let heads = g.arange(0, n_head_kv)?;
        let heads = g.reshape(heads, &[1, 1, hd])?;
        let tr = g.add(cs, heads)?;
        let tr = g.reshape(tr, &[n_sel, ns])?;
        let tokr = g.cast(tr, I32)?;
        let head_rows = |g: &mut Graph, c: TensorRef, stream: usize| {
            g.view(
                c,
                &[d, n_head_kv * n_kv, ns],
                &[row_size(c.ggml_type(), d), stream],
                stream * s0,
            )
        };
        let k3 = head_rows(g, kc, k_stream)?;
        let v3 = head_rows(g, vc, v_stream)?;
        let mp = g.reshape(inputs.pos_mask, &[1, n_pos, ns])?;
        let kg = g.get_rows(k3, tokr)?;
        let vg = g.get_rows(v3, tokr)?;
        let mg = g.get_rows(mp, tokj)?;
        let gathered = |g: &mut Graph, x: TensorRef, c: TensorRef| -> crate::ggml::OpResult {
            let x = g.reshape(x, &[d, blk * top, 1, hd * ns])?;
            let want = if crate::ggml::is_quantized(c.ggml_type()) {
                F16
            } else {
                c.ggml_type()
            };
            if x.ggml_type() == want {
                Ok(x)
            } else {
                g.cast(x, want)
            }
        };
        let kfa = gathered(g, kg, kc)?;
        let vfa = gathered(g, vg, vc)?;
        let mfa = g.reshape(mg, &[blk * top, 1, 1, hd * ns])?;
        let mfa = g.cast(mfa, F16)?;
        grouped_attention(g, q, kfa, vfa, mfa, gp, scores)?
    } else {
        let cell_blk = inputs
            .cell_blk
            .ok_or_else(|| Error::Internal("no cell blocks to mask by".into()))?;
        let mask = bd.mask(false)?;
        let g = &mut bd.g;
        let mask_f = g.cast(mask, F32)?;
        let mask_f = g.reshape(mask_f, &[n_kv, tps, 1, ns])?;
        let f32_row = |n: i64| row_size(F32, n);
        let mut out: Option<TensorRef> = None;
        for st in 0..ns {
            let su = st as usize;
            let iq_s = g.view(iq, &[d_idx, hd * tps], &[iq.nb()[1]], su * tps as usize * iq.nb()[2])?;
            let ik_s = g.view(
                idx_cache,
                &[d_idx, n_kv],
                &[row_size(idx_cache.ggml_type(), d_idx)],
                idx_stream * (s0 + su),
            )?;
            let slot_s = g.view(inputs.pos_slot, &[n_pos], &[], su * row_size(I32, n_pos))?;
            let pm_s = g.view(
                inputs.pos_mask,
                &[n_pos, 1, tps],
                &[f32_row(n_pos), f32_row(n_pos)],
                su * tps as usize * f32_row(n_pos),
            )?;
            let cb_s = g.view(cell_blk, &[n_kv], &[], su * row_size(I32, n_kv))?;
            let mf_s = g.view(
                mask_f,
                &[n_kv, tps, 1],
                &[f32_row(n_kv), f32_row(n_kv * tps)],
                su * f32_row(n_kv * tps),
            )?;
            let bias_s = g.view(
                inputs.bias,
                &[n_blocks, 1, tps],
                &[f32_row(n_blocks), f32_row(n_blocks)],
                su * tps as usize * f32_row(n_blocks),
            )?;
            let q_s = g.view(
                q,
                &[d, n_head, tps],
                &[q.nb()[1], q.nb()[2]],
                su * tps as usize * q.nb()[2],
            )?;
            let cache_s = |g: &mut Graph, c: TensorRef, stream: usize| {
                let row = row_size(c.ggml_type(), d);
                let s = g.view(
                    c,
                    &[d, n_head_kv, n_kv, 1],
                    &[row, row * n_head_kv as usize, stream],
                    stream * (s0 + su),
                )?;
                g.permute(s, [0, 3, 1, 2])
            };
            let kfa = cache_s(g, kc, k_stream)?;
            let vfa = cache_s(g, vc, v_stream)?;

            let ikp = g.get_rows(ik_s, slot_s)?;
            let sc = g.mul_mat(ikp, iq_s)?;
            let sc = g.reshape(sc, &[n_pos, hd, tps])?;
            let sc = g.add(sc, pm_s)?;
            let bs = g.max_pool_rows(sc, blk)?;
            let bsf = g.add(bs, bias_s)?;
            let picked = g.top_k(bsf, top)?;
            // Every block closed (-inf), then the picked ones opened, per head and token.
            let closed = g.scale_bias(bias_s, 0.0, -1e30)?;
            let closed = g.cast(closed, F16)?;
            let closed = g.repeat(closed, [n_blocks, hd, tps, 1])?;
            let zero = g.cast(picked, F32)?;
            let zero = g.scale(zero, 0.0)?;
            let closed = g.reshape(closed, &[1, n_blocks, hd * tps])?;
            let zero = g.reshape(zero, &[1, top, hd * tps])?;
            let picks = g.reshape(picked, &[top, hd * tps])?;
            let bm = g.set_rows(closed, zero, picks)?;
            let bm = g.reshape(bm, &[n_blocks, hd, tps])?;
            let bm = g.permute(bm, [0, 2, 1, 3])?;
            let bm = g.cont(bm)?;
            let bm = g.reshape(bm, &[n_blocks, tps * hd])?;
            let bm = g.transpose(bm)?;
            let bm = g.cont(bm)?;
            // Each cell takes its block's row: [tps * hd, n_kv], then back.
            let per_cell = g.get_rows(bm, cb_s)?;
            let per_cell = g.transpose(per_cell)?;
            let per_cell = g.cont(per_cell)?;
            let per_cell = g.reshape(per_cell, &[n_kv, tps, hd])?;
            let mask4 = g.add(per_cell, mf_s)?;
            let mask4 = g.reshape(mask4, &[n_kv, tps, 1, hd])?;
            let mask4 = g.cast(mask4, F16)?;
            let o = grouped_attention(g, q_s, kfa, vfa, mask4, gp, scores)?;
            out = Some(match out {
                Some(prev) => g.concat(prev, o, 1)?,
                None => o,
            });
        }
        out.ok_or_else(|| Error::Internal("a ubatch without streams".into()))?
    };
    let out = bd.unrotate(out, v_rot)?;
    Ok(bd.name(out, "kqv_out", l))
}

/// The position maps (made once; the gather slots for one token per stream, the cell blocks
/// otherwise).
fn msa_inputs(bd: &mut Builder, decode: bool) -> Result<MsaInputs> {
    if let Some(&m) = bd.inputs.of::<MsaInputs>().next() {
        return Ok(m);
    }
    let nt = bd.shape.n_tokens as i64;
    let ns = bd.shape.n_streams.max(1) as i64;
    let n_pos = bd.shape.n_pos as i64;
    let n_blocks = n_pos / i64::from(bd.hp.indexer.block.max(1));
    let n_kv = bd.shape.n_kv as i64;
    let g = &mut bd.g;
    let m = MsaInputs {
        bias: g.input(F32, &[n_blocks, nt], "inp_msa_bias")?,
        pos_mask: g.input(F32, &[n_pos, nt], "inp_msa_pos_mask")?,
        pos_slot: g.input(I32, &[n_pos, ns], "inp_msa_pos_slot")?,
        pos_slot_f: match decode {
            true => Some(g.input(F32, &[n_pos, ns], "inp_msa_pos_slot_f")?),
            false => None,
        },
        cell_blk: match decode {
            true => None,
            false => Some(g.input(I32, &[n_kv, ns], "inp_msa_cell_blk")?),
        },
    };
    bd.inputs.add(m);
    Ok(m)
}

/// Flash attention of the queries `q` ([head, n_head, n_tokens]) in groups of `gp` heads over
/// `k` and `v` ([head, n_keys, 1, groups]) with `mask` ([n_keys, rows, 1, groups], F16):
/// [head * n_head, n_tokens].
fn grouped_attention(
    g: &mut Graph,
    q: TensorRef,
    k: TensorRef,
    v: TensorRef,
    mask: TensorRef,
    gp: i64,
    scores: Scores,
) -> Result<TensorRef> {
    let [d, n_head, nt, _] = q.ne();
    let groups = k.ne()[3];
    let rows = n_head * nt / (gp * groups);
    let q = if q.nb()[1] == row_size(q.ggml_type(), d) && q.nb()[2] == row_size(q.ggml_type(), d * n_head) {
        q
    } else {
        g.cont(q)?
    };
    let q = g.reshape(q, &[d, gp, groups, rows])?;
    let q = g.permute(q, [0, 2, 3, 1])?;
    let o = g.flash_attn(q, k, v, mask, scores, None)?;
    let o = g.permute(o, [0, 1, 3, 2])?;
    let o = g.cont(o)?;
    g.reshape(o, &[d * n_head, nt]).map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of 16 cells holding sequence 0 at positions 0..6 and sequence 1 at 0..2.
    fn cache() -> KvCache {
        let mut kv = KvCache::without_layers(16);
        let tokens: Vec<TokenPlace> = (0..6)
            .map(|p| TokenPlace::at(0, p))
            .chain((0..2).map(|p| TokenPlace::at(1, p)))
            .collect();
        kv.place(&tokens).expect("room");
        kv
    }

    #[test]
    fn positions_map_to_their_cells_and_blocks() {
        let kv = cache();
        let ninf = f32::NEG_INFINITY;
        let t = [TokenPlace::at(0, 4)];
        assert_eq!(pos_mask(&kv, &t, 8), [0.0, 0.0, 0.0, 0.0, 0.0, ninf, ninf, ninf]);
        // Sequence 1's cells follow sequence 0's.
        assert_eq!(pos_slots(&kv, &[TokenPlace::at(1, 1)], 1, 4), [6, 7, 0, 0]);
        assert_eq!(pos_slots(&kv, &t, 1, 8), [0, 1, 2, 3, 4, 5, 0, 0]);
        assert_eq!(cell_blocks(&kv, &t, 1, 8, 4), [0, 0, 0, 0, 1, 1, 0, 0]);
    }

    #[test]
    fn local_blocks_end_at_the_tokens_own() {
        let t = [TokenPlace::at(0, 9), TokenPlace::at(0, 2)];
        assert_eq!(local_bias(&t, 4, 4, 2), [0.0, 1e30, 1e30, 0.0, 1e30, 0.0, 0.0, 0.0]);
        // Blocks past the covered positions are left out.
        assert_eq!(local_bias(&[TokenPlace::at(0, 9)], 2, 4, 1), [0.0, 0.0]);
    }
}
