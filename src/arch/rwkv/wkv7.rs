//! RWKV-7's time mix: static token-shift mixing of six inputs (five without the gate),
//! receptance, key and value projections, low-rank decay, in-context learning rate, value
//! residual (each layer's values pulled towards the first layer's) and gate, and the WKV-7
//! recurrence (a delta rule on L2-normed keys), followed by a group norm where the layer has one
//! and the receptance-key bonus.

use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::graph::Builder;
use crate::model::hparams::HParams;
use crate::model::spec::TensorSpec;

/// The time mix's tensors llama.cpp's loader creates without a file, after the layer's norms.
pub(super) const CREATED: &str = "time_mix_w0.weight time_mix_w1.weight time_mix_w2.weight \
    time_mix_a0.weight time_mix_a1.weight time_mix_a2.weight time_mix_v0.weight time_mix_v1.weight \
    time_mix_v2.weight time_mix_g1.weight time_mix_g2.weight time_mix_lerp_fused.weight \
    time_mix_k_k.weight time_mix_k_a.weight time_mix_r_k.weight time_mix_key.weight \
    time_mix_value.weight time_mix_receptance.weight time_mix_ln.weight time_mix_ln.bias \
    time_mix_output.weight channel_mix_lerp_k.weight channel_mix_key.weight channel_mix_value.weight";

/// The hybrid's, before its FFN (the same time mix, no channel mix).
pub(super) const CREATED_HYBRID: &str = "time_mix_w0.weight time_mix_w1.weight time_mix_w2.weight \
    time_mix_a0.weight time_mix_a1.weight time_mix_a2.weight time_mix_v0.weight time_mix_v1.weight \
    time_mix_v2.weight time_mix_g1.weight time_mix_g2.weight time_mix_lerp_fused.weight \
    time_mix_k_k.weight time_mix_k_a.weight time_mix_r_k.weight time_mix_key.weight \
    time_mix_value.weight time_mix_receptance.weight time_mix_ln.weight time_mix_ln.bias \
    time_mix_output.weight";

/// Layer `il`'s time-mix tensors (and RWKV-7's channel mix). The hybrid's gate and group norm
/// are optional, its fused mix then five inputs wide.
pub(super) fn tensors(hp: &HParams, il: usize, hybrid: bool, specs: &mut Vec<TensorSpec>) {
    let e = hp.n_embd;
    let w = &hp.wkv;
    let b = |s: &str| format!("blk.{il}.{s}");
    // The first layer's value residual is never used; its low rank is the learning rate's.
    let v_rank = if il == 0 { w.lora_iclr } else { w.lora_value_res_mix };
    let low_rank = [
        ("w", w.lora_decay, true),
        ("a", w.lora_iclr, true),
        ("v", v_rank, true),
        ("g", w.lora_gate, !hybrid),
    ];
    for (x, rank, required) in low_rank {
        if x != "g" {
            specs.push(TensorSpec::new(b(&format!("time_mix_{x}0.weight")), &[e], true));
        }
        specs.push(TensorSpec::matmul(
            b(&format!("time_mix_{x}1.weight")),
            &[e, rank],
            required,
        ));
        specs.push(TensorSpec::matmul(
            b(&format!("time_mix_{x}2.weight")),
            &[rank, e],
            required,
        ));
    }
    let lerp = TensorSpec::new(b("time_mix_lerp_fused.weight"), &[e, 1, 1, 6], true);
    specs.push(if hybrid { lerp.or_shape(&[e, 1, 1, 5]) } else { lerp });
    for name in ["time_mix_k_k", "time_mix_k_a", "time_mix_r_k"] {
        specs.push(TensorSpec::new(b(&format!("{name}.weight")), &[e], true));
    }
    for name in [
        "time_mix_key",
        "time_mix_value",
        "time_mix_receptance",
        "time_mix_output",
    ] {
        specs.push(TensorSpec::matmul(b(&format!("{name}.weight")), &[e, e], true));
    }
    specs.push(TensorSpec::new(b("time_mix_ln.weight"), &[e], !hybrid));
    specs.push(TensorSpec::new(b("time_mix_ln.bias"), &[e], !hybrid));
    if !hybrid {
        let ff = hp.n_ff[il];
        specs.push(TensorSpec::new(b("channel_mix_lerp_k.weight"), &[e, 1, 1], true));
        specs.push(TensorSpec::matmul(b("channel_mix_key.weight"), &[e, ff], true));
        specs.push(TensorSpec::matmul(b("channel_mix_value.weight"), &[ff, e], true));
    }
}

/// `blk.{il}.time_mix_{x}2` times `blk.{il}.time_mix_{x}1` times `x`, with `act` between
/// (llama.cpp's plain `ggml_mul_mat`: no adapters).
fn low_rank(
    b: &mut Builder,
    il: usize,
    x: &str,
    input: TensorRef,
    act: Option<fn(&mut Builder, TensorRef) -> Result<TensorRef>>,
) -> Result<TensorRef> {
    let w1 = b.layer_weight(il, &format!("time_mix_{x}1.weight"))?;
    let w2 = b.layer_weight(il, &format!("time_mix_{x}2.weight"))?;
    let y = b.g.mul_mat(w1, input)?;
    let y = match act {
        Some(f) => f(b, y)?,
        None => y,
    };
    b.g.mul_mat(w2, y).map_err(Error::from)
}

fn tanh(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    b.g.tanh(x).map_err(Error::from)
}

fn sigmoid(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    b.g.sigmoid(x).map_err(Error::from)
}

/// Layer `il`'s time mix over the normed inputs `x` and their shifted copy `x_prev`
/// ([n_embd, n_seq_tokens, n_seqs]), in the same shape; the WKV state is read and written back.
/// `v_first`: the first layer's values, kept there for the later layers' residual.
pub(super) fn time_mix(
    b: &mut Builder,
    il: usize,
    x: TensorRef,
    x_prev: TensorRef,
    v_first: &mut Option<TensorRef>,
) -> Result<TensorRef> {
    let hp = b.hp;
    let n_embd = i64::from(hp.n_embd);
    let [_, nst, n_seqs, _] = x.ne();
    let n_tokens = nst * n_seqs;
    let head = i64::from(hp.wkv.head_size);
    let n_head = n_embd / head;
    let gated = b.layer_weight_opt(il, "time_mix_g1.weight").is_some()
        && b.layer_weight_opt(il, "time_mix_g2.weight").is_some();

    let sx = b.g.sub(x_prev, x)?;
    let sx = b.g.repeat(sx, [n_embd, nst, n_seqs, if gated { 6 } else { 5 }])?;
    let lerp = b.layer_weight(il, "time_mix_lerp_fused.weight")?;
    let xxx = b.g.mul(sx, lerp)?;
    let xxx = b.g.add(xxx, x)?;
    let row = xxx.nb()[1];
    let part = |b: &mut Builder, i: i64| -> Result<TensorRef> {
        let at = row_size(xxx.ggml_type(), i * n_embd * n_tokens);
        b.g.view(xxx, &[n_embd, n_tokens], &[row], at).map_err(Error::from)
    };
    let (xr, xw, xk, xv, xa) = (part(b, 0)?, part(b, 1)?, part(b, 2)?, part(b, 3)?, part(b, 4)?);

    let r = b.layer_matmul(il, "time_mix_receptance.weight", xr)?;
    let w = low_rank(b, il, "w", xw, Some(tanh))?;
    let w0 = b.layer_weight(il, "time_mix_w0.weight")?;
    let w = b.g.add(w, w0)?;
    let w = b.g.sigmoid(w)?;
    let w = b.g.scale(w, (-0.606531f64) as f32)?;
    let w = b.g.exp(w)?;

    let k = b.layer_matmul(il, "time_mix_key.weight", xk)?;
    let mut v = b.layer_matmul(il, "time_mix_value.weight", xv)?;
    match *v_first {
        None => *v_first = Some(v),
        Some(first) => {
            let mix = low_rank(b, il, "v", xv, None)?;
            let v0 = b.layer_weight(il, "time_mix_v0.weight")?;
            let mix = b.g.add(mix, v0)?;
            let mix = b.g.sigmoid(mix)?;
            let pull = b.g.sub(first, v)?;
            let pull = b.g.mul(pull, mix)?;
            v = b.g.add(v, pull)?;
        }
    }
    let g = match gated {
        true => {
            let xg = part(b, 5)?;
            Some(low_rank(b, il, "g", xg, Some(sigmoid))?)
        }
        false => None,
    };
    let a = low_rank(b, il, "a", xa, None)?;
    let a0 = b.layer_weight(il, "time_mix_a0.weight")?;
    let a = b.g.add(a, a0)?;
    let a = b.g.sigmoid(a)?;

    let heads = [head, n_head, n_tokens];
    let k_k = b.layer_weight(il, "time_mix_k_k.weight")?;
    let kk = b.g.mul(k, k_k)?;
    let kk = b.g.reshape(kk, &heads)?;
    let kk = b.g.l2_norm(kk, 1e-12f64 as f32)?;
    let k_a = b.layer_weight(il, "time_mix_k_a.weight")?;
    let ka = b.g.mul(k, k_a)?;
    let aka = b.g.mul(a, ka)?;
    let aka = b.g.sub(aka, ka)?;
    let k = b.g.add(k, aka)?;

    let [r, w, k, v, a] = [r, w, k, v, a].map(|t| b.g.reshape(t, &heads));
    let (r, w, k, v, a) = (r?, w?, k?, v?, a?);

    let neg_kk = b.g.neg(kk)?;
    let kka = b.g.mul(kk, a)?;
    let cur = super::wkv(b, il, |b, state| {
        b.g.wkv7(r, w, k, v, neg_kk, kka, state).map_err(Error::from)
    })?;
    let ln = b.layer_weight_opt(il, "time_mix_ln.weight");
    let ln_b = b.layer_weight_opt(il, "time_mix_ln.bias");
    let mut cur = match (ln, ln_b) {
        (Some(ln), Some(ln_b)) => super::group_norm(b, cur, ln, ln_b)?,
        _ => cur,
    };
    let r_k = b.layer_weight(il, "time_mix_r_k.weight")?;
    let r_k = b.g.reshape(r_k, &[head, n_head])?;
    let kr = b.g.mul(k, r)?;
    let kr = b.g.mul(kr, r_k)?;
    let rk = b.g.sum_rows(kr)?;
    let bonus = b.g.mul(v, rk)?;
    let bonus = b.g.reshape(bonus, &[n_embd, n_tokens])?;
    cur = b.g.add(cur, bonus)?;
    if let Some(g) = g {
        cur = b.g.mul(cur, g)?;
    }
    let cur = b.layer_matmul(il, "time_mix_output.weight", cur)?;
    b.g.reshape(cur, &[n_embd, nst, n_seqs]).map_err(Error::from)
}
