//! PLaMo 2: a hybrid of PLaMo-2 Mamba layers (the layers without KV heads) and attention layers
//! (one fused projection, per-head query and key norms with a weight per head, NeoX rotation,
//! scores scaled by the value head size). Every layer has norms before and after its mixer and
//! its FFN, an ungated-looking SwiGLU FFN whose one projection holds gate and up.

use super::created::{layered, HEAD};
use super::{head_tensors, mamba, plamo3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

pub struct Plamo2;

impl ArchSpec for Plamo2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "plamo2",
            about: "PLaMo 2: PLaMo-2 Mamba layers (z and x interleaved per head, normed B, C and Δt) beside \
                attention with per-head norm weights, norms around every mixer and FFN; llama.cpp 0.3.36 stores \
                a multi-sequence ubatch's states at the wrong cells and the engine does not, so results agree \
                where one sequence is decoded at a time.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_SSM, super::READS_RMS_EPS, &["ssm.group_count"]],
            memory: Memory::Hybrid,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        mamba::load_ssm(meta, hp, true)?;
        hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        hp.size_label = match (hp.n_layer, hp.n_embd) {
            (16, _) => "1B",
            (32, 2048) => "2B",
            (32, 4096) => "8B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        plamo2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, inner, state, heads, conv) = (hp.n_embd, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank, hp.ssm_d_conv);
        let dt_dim = (hp.n_embd / 16).max(64);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("post_attention_norm"), &[e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::new(b("post_ffw_norm"), &[e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
            if hp.is_recurrent(il) {
                specs.extend([
                    TensorSpec::matmul(b("ssm_in.weight"), &[e, 2 * inner], true),
                    TensorSpec::new(b("ssm_conv1d.weight"), &[conv, inner], true),
                    TensorSpec::matmul(b("ssm_x.weight"), &[inner, dt_dim + 2 * state], true),
                    TensorSpec::matmul(b("ssm_dt.weight"), &[dt_dim, heads], true),
                    TensorSpec::new(b("ssm_dt.bias"), &[heads], true),
                    TensorSpec::new(b("ssm_a"), &[heads], true),
                    TensorSpec::new(b("ssm_d"), &[heads], true),
                    TensorSpec::matmul(b("ssm_out.weight"), &[inner, e], true),
                    TensorSpec::new(b("ssm_dt_norm"), &[dt_dim], true),
                    TensorSpec::new(b("ssm_b_norm"), &[state], true),
                    TensorSpec::new(b("ssm_c_norm"), &[state], true),
                ]);
            } else {
                let (hk, hv) = (hp.n_embd_head_k, hp.n_embd_head_v);
                let (nh, nkv) = (hp.n_head[il], hp.n_head_kv[il]);
                specs.extend([
                    TensorSpec::matmul(b("attn_qkv.weight"), &[e, nh * hk + nkv * hk + nkv * hv], true),
                    TensorSpec::new(b("attn_q_norm.weight"), &[hk, nh], true),
                    TensorSpec::new(b("attn_k_norm.weight"), &[hk, nkv], true),
                    TensorSpec::matmul(b("attn_output.weight"), &[nh * hv, e], true),
                ]);
            }
        }
        specs
    }
}

/// PLaMo 2's: Mamba layers (with norms of dt, B and C, named without `.weight`) or attention
/// layers with per-head norms; norms after the mixer and the fused FFN.
fn plamo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            "ssm_in.weight ssm_conv1d.weight ssm_x.weight ssm_dt.weight ssm_dt.bias ssm_a ssm_d ssm_out.weight ssm_dt_norm ssm_b_norm ssm_c_norm"
        } else {
            "attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight"
        };
        format!(
            "attn_norm.weight {mixer} post_attention_norm ffn_norm.weight ffn_down.weight ffn_up.weight post_ffw_norm"
        )
    })
}

impl Decoder for Plamo2 {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_v as f32).sqrt();
        let mut x = b.embed_tokens_as("embedding_output")?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let mixed = if hp.is_recurrent(il) {
                mamba_layer(b, il, cur)?
            } else {
                let qkv = b.layer_matmul(il, "attn_qkv.weight", cur)?;
                let (q, k, v) = b.split_qkv(il, qkv, true)?;
                let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
                let q = b.rope(q, il, None)?;
                let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
                let k = b.rope(k, il, None)?;
                let att = b.attention(il, q, k, v, kq_scale, false)?;
                let wo = b.layer_weight(il, "attn_output.weight")?;
                b.linear(wo, None, att)?
            };
            x = plamo3::sandwich_ffn(b, il, mixed, x)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// PLaMo-2's Mamba layer over `cur` ([n_embd, n_tokens]): one projection to the gate z and x
/// interleaved per head, the causal convolution of x, one projection of the convolved x to
/// B, C and Δt (each RMS-normed by its weight), per-head Δt projected with its bias, the scan
/// with a scalar decay per head and one group, D, gating and the output projection. The
/// projection's split reads tokens and sequences as llama.cpp's graph does (a transposed
/// copy, re-read in token-major order), whatever the ubatch holds.
fn mamba_layer(bd: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = bd.hp;
    let rs = bd.recurrent_shape()?;
    let (conv_all, ssm_all) = bd.rs_layer(il)?;
    let (d_inner, d_state, n_head) = (
        i64::from(hp.ssm_d_inner),
        i64::from(hp.ssm_d_state),
        i64::from(hp.ssm_dt_rank),
    );
    if n_head == 0 || d_inner % n_head != 0 || hp.ssm_n_group != 0 {
        return Err(Error::model(format!(
            "plamo2: inner size {d_inner} must split into {n_head} heads, without groups"
        )));
    }
    let head_dim = d_inner / n_head;
    let dt_dim = i64::from((hp.n_embd / 16).max(64));
    let n_seqs = rs.n_seqs as i64;
    let n_seq_tokens = bd.shape.n_tokens as i64 / n_seqs;
    let cur = bd.g.reshape(cur, &[i64::from(hp.n_embd), n_seq_tokens, n_seqs])?;
    let zx = bd.layer_matmul(il, "ssm_in.weight", cur)?;
    let zx = bd.g.permute(zx, [0, 2, 1, 3])?;
    let zx = bd.g.cont(zx)?;
    let zx = bd.g.reshape(zx, &[head_dim * 2, n_head, n_seq_tokens, n_seqs])?;
    let nb = zx.nb();
    let shape = [head_dim, n_head, n_seq_tokens, n_seqs];
    let x = bd.sub(zx, &shape, &[nb[1], nb[2], nb[3]], head_dim)?;
    let x = bd.g.cont(x)?;
    let x = bd.g.reshape(x, &[d_inner, n_seq_tokens, n_seqs])?;
    let z = bd.sub(zx, &shape, &[nb[1], nb[2], nb[3]], 0)?;
    let conv_x = bd.conv_window(conv_all, x, d_inner, 1, false)?;
    let x = bd.conv_silu(il, conv_x)?;

    let bcdt = bd.layer_matmul(il, "ssm_x.weight", x)?;
    let nb = bcdt.nb();
    let part =
        |bd: &mut Builder, width: i64, at: i64| bd.sub(bcdt, &[width, n_seq_tokens, n_seqs], &[nb[1], nb[2]], at);
    let b = part(bd, d_state, 0)?;
    let c = part(bd, d_state, d_state)?;
    let dt = part(bd, dt_dim, 2 * d_state)?;
    let norm = |bd: &mut Builder, t: TensorRef, name: &str| -> Result<TensorRef> {
        let w = bd.layer_weight(il, name)?;
        bd.rms_norm(t, w)
    };
    let b = norm(bd, b, "ssm_b_norm")?;
    let c = norm(bd, c, "ssm_c_norm")?;
    let dt = norm(bd, dt, "ssm_dt_norm")?;
    let dt = bd.layer_matmul(il, "ssm_dt.weight", dt)?;
    let dt_b = bd.layer_weight(il, "ssm_dt.bias")?;
    let dt = bd.g.add(dt, dt_b)?;

    let per_head = |bd: &mut Builder, name: &str| -> Result<TensorRef> {
        let t = bd.layer_weight(il, name)?;
        bd.g.reshape(t, &[1, n_head]).map_err(Error::from)
    };
    let a = per_head(bd, "ssm_a")?;
    let xnb0 = x.nb()[0];
    let x = bd.sub(
        x,
        &shape,
        &[
            head_dim as usize * xnb0,
            d_inner as usize * xnb0,
            (d_inner * n_seq_tokens) as usize * xnb0,
        ],
        0,
    )?;
    let one_group = |bd: &mut Builder, t: TensorRef| {
        let nb = t.nb();
        bd.sub(
            t,
            &[d_state, 1, n_seq_tokens, n_seqs],
            &[d_state as usize * nb[0], nb[1], nb[2]],
            0,
        )
    };
    let b = one_group(bd, b)?;
    let c = one_group(bd, c)?;
    let y_ssm = bd.scan(a, ssm_all, x, dt, b, c, (head_dim, n_head), 1)?;
    let y = bd.sub(
        y_ssm,
        &shape,
        &[
            head_dim as usize * xnb0,
            d_inner as usize * xnb0,
            (d_inner * n_seq_tokens) as usize * xnb0,
        ],
        0,
    )?;
    let d = per_head(bd, "ssm_d")?;
    let y = bd.gate_ssm(d, y, x, z)?;
    let ynb = y.nb();
    let y = bd.sub(y, &[d_inner, n_seq_tokens, n_seqs], &[ynb[2], ynb[3]], 0)?;
    let out = bd.layer_matmul(il, "ssm_out.weight", y)?;
    let out = bd.g.reshape(out, &[i64::from(hp.n_embd), bd.shape.n_tokens as i64])?;
    Ok(bd.name(out, "mamba_out", Some(il)))
}
