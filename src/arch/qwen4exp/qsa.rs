//! Qwen4-exp's sparse attention (QSA): the cached (raw) indexer keys are pooled by blocks of
//! `ratio` positions, each pooled key normed and rotated to its block's first position, and
//! scored against small rotated indexer queries (per head ReLU, summed); every cell takes its
//! block's score, and attention sees the best `top_k + ratio - 1` cells (whole blocks, and the
//! incomplete block at the token's own position always). The block maps are inputs set from the
//! cache's cells (`maps`), in llama.cpp's order, so the picks agree to the cell.

use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::graph::{set_f32, set_i32, Builder, GraphInput, UbatchView};
use crate::kv::{KvCache, SeqSet, TokenPlace};

/// The block maps of one ratio's sparse layers in a ubatch's graph.
#[derive(Debug, Clone, Copy)]
pub struct QsaInputs {
    pub ratio: u32,
    /// I32 [n_kv, n_streams]: the block each cell's score comes from.
    pub cell_blk: TensorRef,
    /// I32 [ratio * n_blocks, n_streams]: each block's cells, in position order.
    pub blk_cells: TensorRef,
    /// I32 [4 * n_blocks * n_streams]: each block's first position, per rope section.
    pub blk_pos: TensorRef,
    /// F32 [n_blocks, n_tokens]: per token, -inf on blocks it may not pick, 1e9 on those it
    /// always attends to.
    pub bias: TensorRef,
}

impl GraphInput for QsaInputs {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let (ns, n_kv) = (ub.shape.n_streams.max(1), ub.shape.n_kv);
        let m = maps(ub.kv, ub.places, ns, n_kv, self.ratio as usize, ub.params.causal)?;
        set_i32(self.cell_blk, &m.cell_blk)?;
        set_i32(self.blk_cells, &m.blk_cells)?;
        set_i32(self.blk_pos, &m.blk_pos)?;
        set_f32(self.bias, &m.bias)
    }
}

/// What the inputs of `QsaInputs` hold for a ubatch.
#[derive(Debug, Default, PartialEq)]
pub struct Maps {
    pub cell_blk: Vec<i32>,
    pub blk_cells: Vec<i32>,
    pub blk_pos: Vec<i32>,
    pub bias: Vec<f32>,
}

/// A group of cells sharing a position block and a sequence set.
struct Group {
    first: usize,
    /// Which of the block's `ratio` positions the group holds.
    slots: u64,
    block: Option<usize>,
}

/// The block maps for `places` (grouped by stream, `n_streams` groups) over the first `n_kv`
/// cells of their streams: full blocks of `ratio` positions held by the same sequences are
/// numbered in position order; cells in no full block share one spare block (the incomplete
/// tail, which a token always attends to). llama.cpp ranks the cells instead of their positions
/// where an image repeats M-RoPE positions; embedding inputs are refused here, so none do.
fn maps(
    kv: &KvCache,
    places: &[TokenPlace],
    n_streams: usize,
    n_kv: usize,
    ratio: usize,
    causal: bool,
) -> Result<Maps> {
    if ratio == 0 || ratio > 64 {
        return Err(Error::model(format!(
            "sparse attention blocks of {ratio} positions (1..=64)"
        )));
    }
    let n_blocks = n_kv.div_ceil(ratio);
    let tps = places.len() / n_streams.max(1);
    let full = if ratio == 64 { u64::MAX } else { (1u64 << ratio) - 1 };
    let mut m = Maps {
        cell_blk: vec![0; n_kv * n_streams],
        blk_cells: vec![0; ratio * n_blocks * n_streams],
        blk_pos: vec![0; 4 * n_blocks * n_streams],
        bias: vec![0.0; n_blocks * places.len()],
    };
    for s in 0..n_streams {
        let seq0 = places[s * tps].primary_seq;
        let cells = kv.stream(kv.stream_of(seq0));
        let mut present = SeqSet::default();
        for j in 0..cells.size() {
            cells.seqs(j).iter().for_each(|q| present.insert(q));
        }
        let one_seq = present.iter().nth(1).is_none();

        // Per block, its groups (the latest first, as llama.cpp walks them).
        let mut groups: Vec<Group> = Vec::new();
        let mut of_block: Vec<Vec<usize>> = vec![Vec::new(); n_blocks];
        let mut cell_grp: Vec<Option<usize>> = vec![None; n_kv];
        for (j, g_of) in cell_grp.iter_mut().enumerate() {
            let Some(pos) = cells.pos(j) else { continue };
            let pb = pos as usize / ratio;
            if pb >= n_blocks {
                return Err(Error::invalid(format!(
                    "sparse attention: a cell at position {pos} lies past the {n_kv} cells in use (llama.cpp asserts here)"
                )));
            }
            let found = of_block[pb]
                .iter()
                .copied()
                .find(|&g| one_seq || cells.seqs(groups[g].first) == cells.seqs(j));
            let g = found.unwrap_or_else(|| {
                groups.push(Group {
                    first: j,
                    slots: 0,
                    block: None,
                });
                of_block[pb].insert(0, groups.len() - 1);
                groups.len() - 1
            });
            *g_of = Some(g);
            groups[g].slots |= 1 << (pos as usize % ratio);
        }

        // Full groups are numbered block by block.
        let mut bid_pos = Vec::new();
        let mut bid_cell = Vec::new();
        for (pb, list) in of_block.iter().enumerate() {
            for &g in list {
                if groups[g].slots == full {
                    groups[g].block = Some(bid_pos.len());
                    bid_pos.push((pb * ratio) as i32);
                    bid_cell.push(groups[g].first);
                }
            }
        }
        let n_bid = bid_pos.len();
        for (b, &p) in bid_pos.iter().enumerate() {
            for sec in 0..4 {
                m.blk_pos[sec * n_blocks * n_streams + s * n_blocks + b] = p;
            }
        }
        let have_dead = n_bid < n_blocks;
        let dead = if have_dead { n_bid } else { n_blocks - 1 };
        for (j, g) in cell_grp.iter().enumerate() {
            let block = g.and_then(|g| groups[g].block);
            if let (Some(b), Some(pos)) = (block, cells.pos(j)) {
                m.blk_cells[s * ratio * n_blocks + b * ratio + pos as usize % ratio] = j as i32;
            }
            m.cell_blk[s * n_kv + j] = block.unwrap_or(dead) as i32;
        }

        for (i, t) in places.iter().enumerate().skip(s * tps).take(tps) {
            let tail_start = ((t.pos as usize + 1) / ratio * ratio) as i32;
            let row = &mut m.bias[i * n_blocks..(i + 1) * n_blocks];
            for (b, v) in row.iter_mut().enumerate() {
                *v = if b >= n_bid || !cells.seqs(bid_cell[b]).contains(t.primary_seq) {
                    f32::NEG_INFINITY
                } else if causal && bid_pos[b] >= tail_start {
                    1e9
                } else {
                    0.0
                };
            }
            if have_dead {
                row[dead] = 1e9;
            }
        }
    }
    Ok(m)
}

const F32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
const I32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_I32;

/// The block maps of `ratio` (made by its first sparse layer).
fn qsa_inputs(bd: &mut Builder, ratio: u32) -> Result<QsaInputs> {
    if let Some(&inp) = bd.inputs.of::<QsaInputs>().find(|q| q.ratio == ratio) {
        return Ok(inp);
    }
    let ns = bd.shape.n_streams.max(1) as i64;
    let (n_kv, nt) = (bd.shape.n_kv as i64, bd.shape.n_tokens as i64);
    let r = i64::from(ratio);
    let n_blocks = (n_kv + r - 1) / r;
    let mut input = |ty, ne: &[i64], name: &str| bd.g.input(ty, ne, &format!("{name}_r{ratio}")).map_err(Error::from);
    let inp = QsaInputs {
        ratio,
        cell_blk: input(I32, &[n_kv, ns], "qsa_cell_blk")?,
        blk_cells: input(I32, &[r * n_blocks, ns], "qsa_blk_cells")?,
        blk_pos: input(I32, &[4 * n_blocks * ns], "qsa_blk_pos")?,
        bias: input(F32, &[n_blocks, nt / ns, ns], "qsa_bias")?,
    };
    bd.inputs.add(inp);
    Ok(inp)
}

/// Layer `il`'s picked cells, I32 [width, n_tokens / n_streams, 1, n_streams], from its
/// block input `cur` ([n_embd, n_tokens]); stores the tokens' raw indexer keys.
pub(super) fn qsa_top_k(bd: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = bd.hp;
    let ix = &hp.indexer;
    let ratio = hp.compress_ratios.get(il).copied().unwrap_or(0);
    let (d, n_ih) = (i64::from(ix.head_size), i64::from(ix.n_head));
    let nt = bd.shape.n_tokens as i64;
    let ns = bd.shape.n_streams.max(1) as i64;
    let (tps, n_kv, r) = (nt / ns, bd.shape.n_kv as i64, i64::from(ratio));
    let n_blocks = (n_kv + r - 1) / r;
    let l = Some(il);
    let inp = qsa_inputs(bd, ratio)?;
    let cache = bd
        .kv
        .indexer_k(il)
        .filter(|_| ix.keeps(il))
        .ok_or_else(|| Error::Internal(format!("layer {il} has no indexer cache")))?;

    // The cache keeps the raw keys: pooling comes before the norm and the rotation.
    let k = bd.layer_matmul(il, "indexer.k_proj.weight", cur)?;
    let rows = bd.kv_rows()?;
    let stored = bd.g.set_rows(cache, k, rows)?;
    bd.g.expand(stored);

    let stream = row_size(cache.ggml_type(), d * bd.kv.stream_size() as i64);
    let keys = bd.g.view(
        cache,
        &[d, n_kv, ns],
        &[row_size(cache.ggml_type(), d), stream],
        stream * bd.shape.first_stream,
    )?;
    let members = bd.g.get_rows(keys, inp.blk_cells)?;
    let members = bd.g.reshape(members, &[d, r, n_blocks, ns])?;
    let nb = members.nb();
    let mut pooled: Option<TensorRef> = None;
    for i in 0..r {
        let slice =
            bd.g.view(members, &[d, n_blocks, ns], &[nb[2], nb[3]], i as usize * nb[1])?;
        let slice = bd.g.cont(slice)?;
        pooled = Some(match pooled {
            Some(p) => bd.add(p, slice)?,
            None => slice,
        });
    }
    let pooled = pooled.ok_or_else(|| Error::model("sparse attention blocks of 0 positions"))?;
    let pooled = bd.scale(pooled, 1.0 / r as f32)?;
    let pooled = bd.g.reshape(pooled, &[d, n_blocks * ns, 1])?;
    let pooled = bd.layer_rms_norm(il, pooled, "indexer.k_norm.weight", "indexer_k_normed")?;
    let pooled = bd.g.reshape(pooled, &[d, 1, n_blocks * ns])?;
    let pooled = bd.rope_at(pooled, il, inp.blk_pos)?;
    let pooled = bd.g.reshape(pooled, &[d, n_blocks, ns])?;
    let pooled = bd.name(pooled, "indexer_k", l);

    let q = bd.layer_matmul(il, "indexer.q_proj.weight", cur)?;
    let q = bd.g.reshape(q, &[d, n_ih, nt])?;
    let q = bd.layer_rms_norm(il, q, "indexer.q_norm.weight", "indexer_q_normed")?;
    let q = bd.rope(q, il, None)?;
    let q = bd.name(q, "indexer_q", l);

    // Per head ReLU of the dot products, then the heads summed.
    let q = bd.g.reshape(q, &[d, n_ih * tps, ns])?;
    let score = bd.g.mul_mat(pooled, q)?;
    let score = bd.g.reshape(score, &[n_blocks, n_ih, tps, ns])?;
    let score = bd.g.relu(score)?;
    let nb = score.nb();
    let mut summed: Option<TensorRef> = None;
    for h in 0..n_ih {
        let slice =
            bd.g.view(score, &[n_blocks, tps, ns], &[nb[2], nb[3]], h as usize * nb[1])?;
        summed = Some(match summed {
            Some(s) => bd.add(s, slice)?,
            None => bd.g.cont(slice)?,
        });
    }
    let score = summed.ok_or_else(|| Error::model("an indexer of no heads"))?;
    let score = bd.add(score, inp.bias)?;
    let score = bd.name(score, "indexer_score", l);

    // Each cell takes its block's score, then the attention mask's.
    let t = bd.g.permute(score, [1, 0, 2, 3])?;
    let t = bd.g.cont(t)?;
    let cells = bd.g.get_rows(t, inp.cell_blk)?;
    let cells = bd.g.permute(cells, [1, 0, 2, 3])?;
    let cells = bd.g.cont(cells)?;
    let mask = bd.mask(false)?;
    let mask = match mask.ggml_type() {
        F32 => mask,
        _ => bd.g.cast(mask, F32)?,
    };
    let mask = bd.g.reshape(mask, &[n_kv, tps, ns])?;
    let cells = bd.add(cells, mask)?;
    let cells = bd.name(cells, "indexer_score_tokens", l);

    // Whole blocks plus the incomplete one.
    let width = (i64::from(ix.top_k) + r - 1).min(n_kv);
    let picks = bd.g.top_k(cells, width)?;
    let picks = bd.g.cont(picks)?;
    let picks = bd.g.reshape(picks, &[width, tps, 1, ns])?;
    Ok(bd.name(picks, "indexer_top_k", l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(tokens: &[TokenPlace]) -> KvCache {
        let mut kv = KvCache::without_layers(16);
        kv.place(tokens).expect("room");
        kv
    }

    #[test]
    fn full_blocks_are_numbered_and_the_tail_is_spare() {
        // One sequence at positions 0..10: blocks of 4 at 0 and 4 are full, 8..10 is the tail.
        let kv = cache(&(0..10).map(|p| TokenPlace::at(0, p)).collect::<Vec<_>>());
        let m = maps(&kv, &[TokenPlace::at(0, 9)], 1, 10, 4, true).unwrap();
        assert_eq!(m.cell_blk, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
        assert_eq!(m.blk_cells, [0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0]);
        assert_eq!(&m.blk_pos[..3], [0, 4, 0]);
        assert_eq!(m.blk_pos.len(), 12);
        // The tail block (8..) starts at or after the token's block end: always attended.
        assert_eq!(m.bias, [0.0, 0.0, 1e9]);
        // At position 6 the block at 4 is the token's incomplete one: picked whatever its score
        // (without causality, it competes).
        let m = maps(&kv, &[TokenPlace::at(0, 6)], 1, 10, 4, true).unwrap();
        assert_eq!(m.bias, [0.0, 1e9, 1e9]);
        let m = maps(&kv, &[TokenPlace::at(0, 6)], 1, 10, 4, false).unwrap();
        assert_eq!(m.bias, [0.0, 0.0, 1e9]);
    }

    #[test]
    fn blocks_of_other_sequences_are_closed() {
        // Sequence 0 at 0..4 and sequence 1 at 0..4: two full groups in block 0.
        let tokens: Vec<TokenPlace> = (0..4)
            .map(|p| TokenPlace::at(0, p))
            .chain((0..4).map(|p| TokenPlace::at(1, p)))
            .collect();
        let kv = cache(&tokens);
        let m = maps(&kv, &[TokenPlace::at(1, 3)], 1, 8, 4, true).unwrap();
        // The later group comes first.
        assert_eq!(m.cell_blk, [1, 1, 1, 1, 0, 0, 0, 0]);
        assert_eq!(m.blk_cells, [4, 5, 6, 7, 0, 1, 2, 3]);
        // No spare block: both are full; the other sequence's is closed.
        assert_eq!(m.bias, [0.0, f32::NEG_INFINITY]);
    }

    #[test]
    fn positions_past_the_cells_are_refused() {
        let kv = cache(&[TokenPlace::at(0, 40)]);
        assert!(maps(&kv, &[TokenPlace::at(0, 40)], 1, 1, 4, true).is_err());
    }
}
