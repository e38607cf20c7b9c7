//! MiniMax-01's lightning attention: linear attention with a fixed per-head decay (ALiBi-like
//! slopes, scaled per layer), a [head, head] state per head and sequence. Within a ubatch each
//! sequence's tokens attend causally with decayed weights; the state carries everything earlier,
//! decayed by the ubatch's length. The decay exponents depend only on the tokens' positions
//! relative to the first of their sequence in the ubatch: they are graph inputs, computed here on
//! the host as llama.cpp computes them.

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{seq_index, set_f32, Builder, GraphInput, UbatchView};

/// The decay inputs of a ubatch's graph (each made once, read by every lightning layer).
#[derive(Debug, Clone, Copy)]
pub struct LightningInputs {
    /// The per-head slopes, F32 [n_head].
    pub slopes: TensorRef,
    /// Per token and head, the exponents of the queries' and the keys' decay, F32 [1, n_head,
    /// n_seq_tokens, n_seqs].
    pub q_decay: TensorRef,
    pub k_decay: TensorRef,
    /// Per sequence, head, query and key token, the exponent of their weight's decay (−∞ where
    /// the key follows the query), F32 [n_seq_tokens (key), n_seq_tokens (query), n_head, n_seqs].
    pub diag_decay: TensorRef,
}

impl GraphInput for LightningInputs {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let slopes = slopes(self.slopes.ne()[0] as usize);
        let pos: Vec<i32> = ub.places.iter().map(|p| p.pos).collect();
        let idx: Vec<usize> = ub.places.iter().map(|p| seq_index(ub.seqs, p.primary_seq)).collect();
        let n_seqs = ub.shape.recurrent.map_or(1, |r| r.n_seqs);
        let (q, k, diag) = decays(&slopes, &pos, &idx, n_seqs);
        set_f32(self.slopes, &slopes)?;
        set_f32(self.q_decay, &q)?;
        set_f32(self.k_decay, &k)?;
        set_f32(self.diag_decay, &diag)
    }
}

/// The heads' slopes: a geometric sequence from 2^(−2^(3 − log2 n_head)) (llama.cpp's formula, in
/// single precision as it computes it).
fn slopes(n_head: usize) -> Vec<f32> {
    let start = 2f32.powf(-(2f32.powf(-((n_head as f32).log2() - 3.0))));
    (0..n_head).map(|h| start * start.powf(h as f32)).collect()
}

/// The decay exponents of a ubatch of `n_seqs` equal runs of tokens at positions `pos`, the token
/// of each run all in one sequence, `seq_idx` the index of each token's sequence among the
/// ubatch's (sorted) sequences: (queries, keys, diagonal) as `LightningInputs` lays them out.
/// A token's exponents count from the first position its sequence has in the ubatch.
fn decays(slopes: &[f32], pos: &[i32], seq_idx: &[usize], n_seqs: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n_head = slopes.len();
    let n = pos.len();
    let nst = n.checked_div(n_seqs).unwrap_or(0);
    // A run's block is its sequence's place (the run's own where that place is out of range).
    let block = |t: usize| Some(seq_idx[t]).filter(|&si| si < n_seqs).unwrap_or(t / nst.max(1));
    let mut p0 = vec![i32::MAX; n_seqs];
    for t in 0..nst * n_seqs {
        p0[block(t)] = p0[block(t)].min(pos[t]);
    }
    let rel = |t: usize| pos[t] - p0[block(t)];
    let mut q = vec![0f32; n_seqs * n_head * nst];
    let mut k = vec![0f32; n_seqs * n_head * nst];
    let mut diag = vec![0f32; n_seqs * n_head * nst * nst];
    for s in 0..n_seqs {
        for i in 0..nst {
            let t = s * nst + i;
            let si = block(t);
            for (h, &slope) in slopes.iter().enumerate() {
                q[si * n_head * nst + i * n_head + h] = -slope * (rel(t) + 1) as f32;
                k[si * n_head * nst + i * n_head + h] = -slope * (nst as i32 - rel(t) - 1) as f32;
            }
        }
        for (h, &slope) in slopes.iter().enumerate() {
            for j in 0..nst {
                let tj = s * nst + j;
                let si = block(tj);
                for i in 0..nst {
                    let index = rel(tj) - (pos[s * nst + i] - p0[si]);
                    let v = if index >= 0 {
                        -slope * index as f32
                    } else {
                        f32::NEG_INFINITY
                    };
                    diag[si * n_head * nst * nst + h * nst * nst + j * nst + i] = v;
                }
            }
        }
    }
    (q, k, diag)
}

/// The decay inputs, made by the first lightning layer.
fn lightning_inputs(bd: &mut Builder) -> Result<LightningInputs> {
    if let Some(&l) = bd.inputs.of::<LightningInputs>().next() {
        return Ok(l);
    }
    let rs = bd.recurrent_shape()?;
    let n_head = i64::from(bd.hp.n_head[0]);
    let n_seqs = rs.n_seqs as i64;
    let nst = bd.shape.n_tokens as i64 / n_seqs;
    let f32_type = ggml_sys::ggml_type_GGML_TYPE_F32;
    let mut input = |ne: &[i64], name: &str| bd.g.input(f32_type, ne, name).map_err(Error::from);
    let l = LightningInputs {
        slopes: input(&[n_head], "slopes")?,
        q_decay: input(&[1, n_head, nst, n_seqs], "q_decay_exp")?,
        k_decay: input(&[1, n_head, nst, n_seqs], "k_decay_exp")?,
        diag_decay: input(&[nst, nst, n_head, n_seqs], "diag_decay_exp")?,
    };
    bd.inputs.add(l);
    Ok(l)
}

/// A lightning attention layer over `cur` ([n_embd, n_tokens]): SiLU of one q, k, v
/// projection; per head, the causal decayed attention within the ubatch plus the queries'
/// decayed read of the carried state; the state decayed by the ubatch's length plus the
/// ubatch's decayed keys times values; an RMS norm (`attn_norm_2`) gated by the sigmoid of
/// `attn_gate`, and the output projection. Node for node as llama.cpp builds it.
pub(super) fn lightning_layer(bd: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = bd.hp;
    let rs = bd.recurrent_shape()?;
    let inp = lightning_inputs(bd)?;
    let (_, ssm_all) = bd.rs_layer(il)?;
    let (hd, nh) = (i64::from(hp.n_embd_head_k), i64::from(hp.n_head[0]));
    let n_embd = i64::from(hp.n_embd);
    let n_seqs = rs.n_seqs as i64;
    let nst = bd.shape.n_tokens as i64 / n_seqs;
    let slope_scale = (1.0 - il as f64 / (f64::from(hp.n_layer) - 1.0) + 1e-5) as f32;
    let slope_rate = bd.g.scale(inp.slopes, slope_scale)?;

    let cur = bd.g.reshape(cur, &[n_embd, nst, 1, n_seqs])?;
    let qkv = bd.layer_matmul(il, "attn_qkv.weight", cur)?;
    let qkv = bd.g.silu(qkv)?;
    let qkv = bd.g.reshape(qkv, &[3 * hd, nh, nst, n_seqs])?;
    let nb = qkv.nb();
    let part = |bd: &mut Builder, i: usize| {
        bd.g.view(
            qkv,
            &[hd, nh, nst, n_seqs],
            &[nb[1], nb[2], nb[3]],
            i * hd as usize * nb[0],
        )
        .map_err(Error::from)
    };
    let (q, k, v) = (part(bd, 0)?, part(bd, 1)?, part(bd, 2)?);

    let n_state = i64::from(hp.n_embd_s());
    let state = bd.gather_states(ssm_all, n_state, None)?;
    let kv_old = bd.g.reshape(state, &[hd, hd, nh, n_seqs])?;

    let decay = |bd: &mut Builder, t: TensorRef| -> Result<TensorRef> {
        let t = bd.g.scale(t, slope_scale)?;
        bd.g.exp(t).map_err(Error::from)
    };
    let q_decay = decay(bd, inp.q_decay)?;
    let k_decay = decay(bd, inp.k_decay)?;
    let diag_decay = decay(bd, inp.diag_decay)?;

    let q_s = bd.g.mul(q, q_decay)?;
    let q_s = bd.g.permute(q_s, [0, 2, 1, 3])?;
    let carried = bd.g.mul_mat(kv_old, q_s)?;
    let q_t = bd.g.permute(q, [0, 2, 1, 3])?;
    let k_t = bd.g.permute(k, [0, 2, 1, 3])?;
    let qk = bd.g.mul_mat(k_t, q_t)?;
    let qk = bd.g.mul(qk, diag_decay)?;
    let v_t = bd.g.permute(v, [1, 2, 0, 3])?;
    let v_t = bd.g.cont(v_t)?;
    let within = bd.g.mul_mat(v_t, qk)?;
    let out = bd.g.add(carried, within)?;
    bd.g.expand(out);

    let block = bd.g.scale(slope_rate, -(nst as f32))?;
    let block = bd.g.exp(block)?;
    let block = bd.g.reshape(block, &[1, 1, nh])?;
    let kv_old_s = bd.g.mul(kv_old, block)?;
    let k_after = bd.g.mul(k, k_decay)?;
    let k_after = bd.g.permute(k_after, [1, 2, 0, 3])?;
    let k_after = bd.g.cont(k_after)?;
    let kv_cur = bd.g.mul_mat(k_after, v_t)?;
    let kv_new = bd.g.add(kv_old_s, kv_cur)?;
    let row = crate::ggml::row_size(ssm_all.ggml_type(), n_state);
    let dst = bd.g.view(ssm_all, &[n_state * n_seqs], &[], rs.window.head * row)?;
    let saved = bd.g.copy_into(kv_new, dst)?;
    bd.g.expand(saved);

    let out = bd.g.permute(out, [0, 2, 1, 3])?;
    let out = bd.g.cont(out)?;
    let out = bd.g.reshape(out, &[hd * nh, nst, 1, n_seqs])?;
    let norm_w = bd.layer_weight(il, "attn_norm_2.weight")?;
    let normed = bd.rms_norm(out, norm_w)?;
    let g = bd.layer_matmul(il, "attn_gate.weight", cur)?;
    let g = bd.g.sigmoid(g)?;
    let y = bd.g.mul(g, normed)?;
    let y = bd.layer_matmul(il, "attn_output.weight", y)?;
    let y = bd.g.reshape(y, &[n_embd, nst * n_seqs])?;
    Ok(bd.name(y, "attn_out", Some(il)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slopes_halve_geometrically_for_eight_heads() {
        // 2^-(2^0) = 1/2, then powers of it.
        assert_eq!(
            slopes(8),
            vec![0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
        );
    }

    #[test]
    fn decays_count_from_each_sequences_first_position() {
        // Two sequences of two tokens, at positions 5, 6 and 0, 1; one head of slope 1.
        let (q, k, diag) = decays(&[1.0], &[5, 6, 0, 1], &[1, 1, 0, 0], 2);
        // Indexed by the sequence's place among the ubatch's, not the run's.
        assert_eq!(q, vec![-1.0, -2.0, -1.0, -2.0]);
        assert_eq!(k, vec![-1.0, -0.0, -1.0, -0.0]);
        let ninf = f32::NEG_INFINITY;
        // [key, query]: a query sees its own token (0) and earlier keys (−distance).
        assert_eq!(diag, vec![-0.0, ninf, -1.0, -0.0, -0.0, ninf, -1.0, -0.0]);
    }
}
