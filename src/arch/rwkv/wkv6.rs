//! RWKV-6's time mix: data-dependent token-shift mixing (a low-rank projection per mixed input),
//! receptance, key, value and gate projections, a data-dependent decay, and the WKV-6 recurrence
//! with its bonus `time_mix_first` followed by a group norm; without the bonus (RWKV6-Qwen2's
//! files), gated linear attention with keys scaled by `1 - w`, a sigmoid gate and no group norm.

use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::graph::Builder;
use crate::model::hparams::HParams;
use crate::model::spec::TensorSpec;

/// The inputs mixed from the token and its predecessor, in the order of the fused weights.
const MIXED: [&str; 5] = ["w", "k", "v", "r", "g"];

/// The time mix's tensors llama.cpp's loader creates without a file, after the layer's norms.
pub(super) const CREATED: &str = "time_mix_w1.weight time_mix_w2.weight time_mix_lerp_x.weight \
    time_mix_lerp_w.weight time_mix_lerp_k.weight time_mix_lerp_v.weight time_mix_lerp_r.weight \
    time_mix_lerp_g.weight time_mix_lerp_fused.weight time_mix_first.weight time_mix_decay.weight \
    time_mix_decay_w1.weight time_mix_decay_w2.weight time_mix_key.weight time_mix_value.weight \
    time_mix_receptance.weight time_mix_gate.weight time_mix_ln.weight time_mix_ln.bias \
    time_mix_output.weight channel_mix_lerp_k.weight channel_mix_lerp_r.weight channel_mix_key.weight \
    channel_mix_value.weight channel_mix_receptance.weight";

/// The hybrid's, before its FFN.
pub(super) const CREATED_HYBRID: &str = "time_mix_w1.weight time_mix_w2.weight time_mix_lerp_x.weight \
    time_mix_lerp_fused.weight time_mix_first.weight time_mix_decay.weight time_mix_decay_w1.weight \
    time_mix_decay_w2.weight time_mix_key.weight time_mix_value.weight time_mix_receptance.weight \
    time_mix_gate.weight time_mix_key.bias time_mix_value.bias time_mix_receptance.bias time_mix_output.weight";

/// Layer `il`'s time-mix tensors (and RWKV-6's channel mix).
pub(super) fn tensors(hp: &HParams, il: usize, hybrid: bool, specs: &mut Vec<TensorSpec>) {
    let e = hp.n_embd;
    let (head, extra, decay) = (hp.wkv.head_size, hp.wkv.mix_extra_dim, hp.wkv.decay_extra_dim);
    let b = |s: &str| format!("blk.{il}.{s}");
    // The hybrid's keys and values may have fewer heads than its receptances.
    let kv = match hp.n_head_kv.first().copied().unwrap_or(0) {
        n if hybrid && n != 0 && n != e / head => n * head,
        _ => e,
    };
    let fused = b("time_mix_lerp_fused.weight");
    specs.push(TensorSpec::matmul(b("time_mix_w1.weight"), &[e, 5 * extra], true));
    specs.push(TensorSpec::new(b("time_mix_w2.weight"), &[extra, e, 5], true));
    specs.push(TensorSpec::new(b("time_mix_lerp_x.weight"), &[e, 1, 1], true));
    specs.push(TensorSpec::new(&fused, &[e, 1, 1, 5], hybrid));
    if !hybrid {
        for m in MIXED {
            specs.push(TensorSpec::new(b(&format!("time_mix_lerp_{m}.weight")), &[e, 1, 1], true).unless(&fused));
        }
    }
    specs.push(TensorSpec::new(b("time_mix_first.weight"), &[head, e / head], !hybrid));
    specs.push(TensorSpec::new(b("time_mix_decay.weight"), &[e], true));
    specs.push(TensorSpec::matmul(b("time_mix_decay_w1.weight"), &[e, decay], true));
    specs.push(TensorSpec::matmul(b("time_mix_decay_w2.weight"), &[decay, e], true));
    specs.push(TensorSpec::matmul(b("time_mix_key.weight"), &[e, kv], true));
    specs.push(TensorSpec::matmul(b("time_mix_value.weight"), &[e, kv], true));
    specs.push(TensorSpec::matmul(b("time_mix_receptance.weight"), &[e, e], true));
    specs.push(TensorSpec::matmul(b("time_mix_gate.weight"), &[e, e], true));
    specs.push(TensorSpec::matmul(b("time_mix_output.weight"), &[e, e], true));
    if hybrid {
        specs.push(TensorSpec::new(b("time_mix_key.bias"), &[kv], false));
        specs.push(TensorSpec::new(b("time_mix_value.bias"), &[kv], false));
        specs.push(TensorSpec::new(b("time_mix_receptance.bias"), &[e], false));
        return;
    }
    specs.push(TensorSpec::new(b("time_mix_ln.weight"), &[e], true));
    specs.push(TensorSpec::new(b("time_mix_ln.bias"), &[e], true));
    let ff = hp.n_ff[il];
    specs.push(TensorSpec::new(b("channel_mix_lerp_k.weight"), &[e, 1, 1], true));
    specs.push(TensorSpec::new(b("channel_mix_lerp_r.weight"), &[e, 1, 1], true));
    specs.push(TensorSpec::matmul(b("channel_mix_key.weight"), &[e, ff], true));
    specs.push(TensorSpec::matmul(b("channel_mix_value.weight"), &[ff, e], true));
    specs.push(TensorSpec::matmul(b("channel_mix_receptance.weight"), &[e, e], true));
}

/// `blk.{il}.{name}` times `x` without adapters (llama.cpp's plain `ggml_mul_mat`).
fn plain(b: &mut Builder, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.layer_weight(il, name)?;
    b.g.mul_mat(w, x).map_err(Error::from)
}

/// Layer `il`'s time mix over the normed inputs `x` and their shifted copy `x_prev`
/// ([n_embd, n_seq_tokens, n_seqs]), in the same shape; the WKV state is read and written back.
pub(super) fn time_mix(b: &mut Builder, il: usize, x: TensorRef, x_prev: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let n_embd = i64::from(hp.n_embd);
    let [_, nst, n_seqs, _] = x.ne();
    let n_tokens = nst * n_seqs;
    let head = i64::from(hp.wkv.head_size);
    let n_head = n_embd / head;
    let n_head_kv = i64::from(hp.n_head_kv.get(il).copied().unwrap_or(0));
    let bonus = b.layer_weight_opt(il, "time_mix_first.weight");

    let sx = b.g.sub(x_prev, x)?;
    let sx = b.g.reshape(sx, &[n_embd, n_tokens])?;
    let cur = b.g.reshape(x, &[n_embd, n_tokens])?;
    let lerp_x = b.layer_weight(il, "time_mix_lerp_x.weight")?;
    let xxx = b.g.mul(sx, lerp_x)?;
    let xxx = b.g.add(xxx, cur)?;
    let w1 = b.layer_weight(il, "time_mix_w1.weight")?;
    let xxx = b.g.mul_mat(w1, xxx)?;
    let xxx = b.g.tanh(xxx)?;
    let xxx = b.g.reshape(xxx, &[w1.ne()[1] / 5, 1, 5, n_tokens])?;
    let xxx = b.g.permute(xxx, [0, 1, 3, 2])?;
    let xxx = b.g.cont(xxx)?;
    let w2 = b.layer_weight(il, "time_mix_w2.weight")?;
    let w2 = b.g.reshape(w2, &[w2.ne()[0], w2.ne()[1], 1, 5])?;
    let mut xxx = b.g.mul_mat(w2, xxx)?;

    let fused = b.layer_weight_opt(il, "time_mix_lerp_fused.weight");
    if let Some(lerp) = fused {
        let sx3 = b.g.reshape(sx, &[n_embd, 1, n_tokens])?;
        let cur3 = b.g.reshape(cur, &[n_embd, 1, n_tokens])?;
        let y = b.g.add(xxx, lerp)?;
        let y = b.g.mul(y, sx3)?;
        xxx = b.g.add(y, cur3)?;
    }
    let row = xxx.nb()[1];
    let mut mixed = [cur; 5];
    for (i, m) in MIXED.iter().enumerate() {
        let part = b.g.view(
            xxx,
            &[n_embd, n_tokens],
            &[row],
            i * row_size(xxx.ggml_type(), n_embd * n_tokens),
        )?;
        mixed[i] = match fused {
            Some(_) => part,
            None => {
                let lerp = b.layer_weight(il, &format!("time_mix_lerp_{m}.weight"))?;
                let y = b.g.add(part, lerp)?;
                let y = b.g.mul(y, sx)?;
                b.g.add(y, cur)?
            }
        };
    }
    let [xw, xk, xv, xr, xg] = mixed;

    let project = |b: &mut Builder, name: &str, x: TensorRef| -> Result<TensorRef> {
        let y = b.layer_matmul(il, &format!("{name}.weight"), x)?;
        match b.layer_weight_opt(il, &format!("{name}.bias")) {
            Some(bias) => b.add(y, bias),
            None => Ok(y),
        }
    };
    let r = project(b, "time_mix_receptance", xr)?;
    let mut k = project(b, "time_mix_key", xk)?;
    let mut v = project(b, "time_mix_value", xv)?;
    let g = b.layer_matmul(il, "time_mix_gate.weight", xg)?;
    let g = match bonus {
        Some(_) => b.g.silu(g)?,
        None => b.g.sigmoid(g)?,
    };
    if n_head_kv != 0 && n_head_kv != n_head {
        let shape = [head, n_head / n_head_kv, n_head_kv, n_tokens];
        for t in [&mut k, &mut v] {
            let grouped = b.g.reshape(*t, &[head, 1, n_head_kv, n_tokens])?;
            *t = b.g.repeat(grouped, shape)?;
        }
    }
    let heads = [head, n_head, n_tokens];
    let mut k = b.g.reshape(k, &heads)?;
    let v = b.g.reshape(v, &heads)?;
    let r = b.g.reshape(r, &heads)?;

    let w = plain(b, il, "time_mix_decay_w1.weight", xw)?;
    let w = b.g.tanh(w)?;
    let w = plain(b, il, "time_mix_decay_w2.weight", w)?;
    let decay = b.layer_weight(il, "time_mix_decay.weight")?;
    let w = b.g.add(w, decay)?;
    let w = b.g.exp(w)?;
    let w = b.g.neg(w)?;
    let w = b.g.exp(w)?;
    let w = b.g.reshape(w, &heads)?;
    if bonus.is_none() {
        let kw = b.g.mul(k, w)?;
        k = b.g.sub(k, kw)?;
    }

    let cur = super::wkv(b, il, |b, state| match bonus {
        Some(u) => b.g.wkv6(k, v, r, u, w, state).map_err(Error::from),
        None => {
            let scale = (head as f64).powf(-0.5) as f32;
            b.g.gated_linear_attn(k, v, r, w, state, scale).map_err(Error::from)
        }
    })?;
    let cur = match bonus {
        Some(_) => {
            let ln = b.layer_weight(il, "time_mix_ln.weight")?;
            let ln_b = b.layer_weight(il, "time_mix_ln.bias")?;
            super::group_norm(b, cur, ln, ln_b)?
        }
        None => cur,
    };
    let cur = b.g.mul(cur, g)?;
    let cur = b.layer_matmul(il, "time_mix_output.weight", cur)?;
    b.g.reshape(cur, &[n_embd, nst, n_seqs]).map_err(Error::from)
}
