//! Tencent HY-V4 ("hy_v4"): absorbed latent attention with attention sinks and an elementwise
//! sigmoid gate, sparse where the file has a lightning indexer (whose queries and keys rotate
//! their last dimensions, without a Hadamard matrix; layers may share the last full layer's
//! picks), leading dense FFNs then routed and shared experts (the routed SwiGLU clamped). The
//! residual stream is `hc_count` copies mixed by hyper-connections: before each block the copies
//! are summed with sigmoid weights computed from all of them (RMS-normed together), after it each
//! copy adds the block's output times its own sigmoid gate; a last such sum feeds the head.

use super::created::{layered, GATED, SHARED_GDU};
use super::deepseek2::{self, absorbed_attention, latent_queries, queries_from_latent, query_latent};
use super::minicpm3;
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_NORMAL};
use crate::graph::{Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct HyV4;

impl ArchSpec for HyV4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "hy_v4",
            about: "HY-V4: latent attention with sinks and an elementwise gate, sparse where the file has an \
                indexer, a residual stream of hyper-connected copies, clamped SwiGLU experts.",
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_MLA,
                super::READS_INDEXER,
                super::READS_RMS_EPS,
                &[
                    "swiglu_clamp_exp",
                    "attention.indexer.types",
                    "hyper_connection.count",
                    "hyper_connection.epsilon",
                    "hyper_connection.magnitude",
                ],
            ],
            saved_rules: &[super::HELD_NORM_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("hy_v4.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        hp.n_layer_dense_lead = meta.u32_opt(&key("leading_dense_block_count"))?.unwrap_or(0);
        hp.n_lora_q = meta.u32(&key("attention.q_lora_rank"))?;
        hp.n_lora_kv = meta.u32(&key("attention.kv_lora_rank"))?;
        hp.n_embd_head_k_mla = meta.u32(&key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&key("attention.value_length_mla"))?;
        deepseek2::load_shared_experts(meta, hp)?;
        // Absent or "none": sigmoid, where llama.cpp's graph would abort.
        super::load_sigmoid_routing(meta, hp)?;
        let n = hp.n_layer as usize;
        if let Some(limits) = meta.f32_per_layer(&key("swiglu_clamp_exp"), n)? {
            hp.swiglu_clamp_exp = limits;
        }
        // llama.cpp clamps HY-V4's experts with ggml's fused op.
        hp.swiglu_clamp_fused = true;
        hp.hc_count = meta.u32(&key("hyper_connection.count"))?;
        hp.hc_eps = meta.f32(&key("hyper_connection.epsilon"))?;
        hp.hc_magnitude = meta.f32(&key("hyper_connection.magnitude"))?;
        if hp.hc_count == 0 {
            return Err(Error::model("hy_v4 needs hyper-connections (hyper_connection.count)"));
        }
        // A top_k of 0 (or none): a full-attention checkpoint without an indexer.
        if meta.u32_opt(&key("attention.indexer.top_k"))?.unwrap_or(0) > 0 {
            let types = key("attention.indexer.types");
            let layers = meta.bool_per_layer(&types, n)?.unwrap_or_else(|| vec![true; n]);
            if layers.first() == Some(&false) {
                return Err(Error::model(
                    "hy_v4: layer 0 shares another layer's indexer, but none precedes it",
                ));
            }
            deepseek2::load_indexer(meta, hp, layers, ROPE_NORMAL)?;
            hp.indexer.rope_trailing = true;
            if hp.indexer.head_size <= hp.n_rot {
                return Err(Error::model(
                    "hy_v4: the indexer's keys must be wider than the rotated part",
                ));
            }
            // The indexer's key norm takes the RMS norms' epsilon.
            hp.norm_eps = hp.rms_eps;
        }
        if !hp.kv_latent() {
            return Err(Error::model("hy_v4 needs absorbed latent attention"));
        }
        deepseek2::check_heads(hp)?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        hy_v4(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = deepseek2::latent_tensors(hp, hp.indexer.head_size > 0);
        let (e, hc) = (hp.n_embd, hp.hc_count);
        specs.extend(head_tensors(hp));
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let n_head = hp.n_head[il];
            specs.push(TensorSpec::new(b("attn_sinks.weight"), &[n_head], true));
            let gate = n_head * hp.n_embd_head_v_mla;
            specs.push(TensorSpec::matmul(b("attn_gate.weight"), &[e, gate], true));
            for part in ["attn", "ffn"] {
                specs.extend([
                    TensorSpec::matmul(b(&format!("hc_{part}_fn.weight")), &[hc * e, 2 * hc], true),
                    TensorSpec::new(b(&format!("hc_{part}_base.weight")), &[2 * hc], true),
                    TensorSpec::new(b(&format!("hc_{part}_scale.weight")), &[2], true),
                ]);
            }
        }
        specs
    }
}

/// HY-V4's: the hyper-connections' head after the output; latent attention with sinks and an
/// output gate, the indexer where the layer has one, then the hyper-connections' mixing weights;
/// dense leading layers, then experts (gate, up, down) with the router's selection bias and
/// shared ones.
fn hy_v4(hp: &HParams) -> Vec<String> {
    let head = "token_embd.weight output_norm.weight output.weight output_hc_fn.weight output_hc_base.weight \
                output_hc_scale.weight";
    layered(hp, head, |il| {
        let indexed = hp.indexer.top_k > 0 && hp.indexer.layers.get(il) == Some(&true);
        let indexer = match indexed {
            true => {
                "indexer.attn_q_b.weight indexer.attn_k.weight indexer.k_norm.weight indexer.k_norm.bias \
                     indexer.proj.weight"
            }
            false => "",
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight {shared}"
            ),
        };
        format!(
            "attn_norm.weight attn_sinks.weight attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight \
             attn_kv_a_mqa.weight attn_kv_a_norm.weight attn_k_b.weight attn_v_b.weight attn_output.weight \
             attn_gate.weight {indexer} hc_attn_fn.weight hc_attn_base.weight hc_attn_scale.weight hc_ffn_fn.weight \
             hc_ffn_base.weight hc_ffn_scale.weight ffn_norm.weight {ffn}"
        )
    })
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_k_b",
    "attn_gate",
    "indexer.attn_k",
    "indexer.attn_q_b",
    "indexer.proj",
];

impl Decoder for HyV4 {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k_mla);
        let kq_scale = 1.0 / (hk as f32).sqrt();
        let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
        let moe = Moe::silu(hp.expert_gating_func, Gating::Sigmoid, hp.expert_weights_norm, false);
        let sparse = hp.indexer.head_size > 0;
        let x = b.embed_tokens()?;
        let nt = x.ne()[1];
        let x = b.g.reshape(x, &[e, 1, nt])?;
        let mut x = b.g.repeat(x, [e, hc, nt, 1])?;
        let mut last_picks = None;
        for il in 0..hp.n_layer as usize {
            let (cur, post) = hc_pre(b, il, x, "attn")?;
            let cur = b.layer_rms_norm(il, cur, "attn_norm.weight", "attn_norm")?;
            let (q, mask) = if sparse {
                let qr = query_latent(b, il, cur)?.ok_or_else(|| Error::model("hy_v4 needs attn_q_a_norm"))?;
                if hp.indexer.keeps(il) {
                    last_picks = Some(b.lightning_top_k(il, cur, qr)?);
                }
                let picks = last_picks.ok_or_else(|| Error::Internal("hy_v4: no indexer picks to share".into()))?;
                (queries_from_latent(b, il, qr, hk)?, Some(b.sparse_mask(picks)?))
            } else {
                (latent_queries(b, il, cur, hk)?, None)
            };
            let (latent, k_pe) = minicpm3::latent_kv(b, il, cur, None)?;
            let att = absorbed_attention(b, il, q, latent, k_pe, kq_scale, mask)?;
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let gate = b.g.sigmoid(gate)?;
            let att = b.g.mul(att, gate)?;
            // Unscaled, whatever scales the file has (llama.cpp's graph passes none here).
            let att = b.layer_matmul(il, "attn_output.weight", att)?;
            x = hc_post(b, att, x, post)?;

            let (cur, post) = hc_pre(b, il, x, "ffn")?;
            let cur = b.layer_rms_norm(il, cur, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.gated_ffn(il, cur, Ffn::default())?
            } else {
                let routed = b.moe_ffn(il, cur, moe)?;
                let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
                b.add(routed, shared)?
            };
            x = hc_post(b, ffn, x, post)?;
        }
        // The requested rows, then the copies' last weighted sum.
        let flat = b.g.reshape(x, &[e * hc, nt])?;
        let flat = b.select_outputs(flat)?;
        let n_out = flat.ne()[1];
        let x = b.g.reshape(flat, &[e, hc, n_out])?;
        let cur = hc_head(b, x)?;
        let logits = b.output_head(cur)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The weights of `hc_head`'s gates.
pub(super) fn head_tensors(hp: &HParams) -> [TensorSpec; 3] {
    let (e, hc) = (hp.n_embd, hp.hc_count);
    [
        TensorSpec::matmul("output_hc_fn.weight", &[hc * e, hc], true),
        TensorSpec::new("output_hc_base.weight", &[hc], true),
        TensorSpec::new("output_hc_scale.weight", &[1], true),
    ]
}

/// The copies `x` ([n_embd, hc, n_outputs]) summed once more by gates of their own
/// (`output_hc_*`), for the output head.
pub(super) fn hc_head(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let (fn_w, scale, base) = (
        b.weight("output_hc_fn.weight")?,
        b.weight("output_hc_scale.weight")?,
        b.weight("output_hc_base.weight")?,
    );
    let mixes = hc_mixes(b, x, fn_w)?;
    let pre = b.g.mul(mixes, scale)?;
    let pre = hc_gate(b, pre, base)?;
    hc_sum(b, x, pre)
}

/// Layer `il`'s mixes of the copies `x` before its `part` ("attn" or "ffn"), and the scale and
/// base they are taken through.
pub(super) fn hc_layer_mixes(
    b: &mut Builder,
    il: usize,
    x: TensorRef,
    part: &str,
) -> Result<(TensorRef, TensorRef, TensorRef)> {
    let w = |n: &str| format!("hc_{part}_{n}.weight");
    let (fn_w, scale, base) = (
        b.layer_weight(il, &w("fn"))?,
        b.layer_weight(il, &w("scale"))?,
        b.layer_weight(il, &w("base"))?,
    );
    Ok((hc_mixes(b, x, fn_w)?, scale, base))
}

/// The mixes of the copies `x` ([n_embd, hc, n_tokens]): all copies RMS-normed together (no
/// weight), times `fn_w`.
fn hc_mixes(b: &mut Builder, x: TensorRef, fn_w: TensorRef) -> Result<TensorRef> {
    let [e, hc, nt, _] = x.ne();
    let flat = b.g.reshape(x, &[e * hc, nt])?;
    let normed = b.g.rms_norm(flat, b.hp.rms_eps)?;
    b.g.mul_mat(fn_w, normed).map_err(Error::from)
}

/// `sigmoid(x + base) + eps`, the hyper-connections' gate.
pub(super) fn hc_gate(b: &mut Builder, x: TensorRef, base: TensorRef) -> Result<TensorRef> {
    let g = b.g.add(x, base)?;
    let g = b.g.sigmoid(g)?;
    b.g.scale_bias(g, 1.0, b.hp.hc_eps).map_err(Error::from)
}

/// Per token, the copies `x` ([n_embd, hc, n_tokens]) summed weighted by `w` ([hc, n_tokens]),
/// copy by copy in order (llama.cpp's sum).
fn hc_sum(b: &mut Builder, x: TensorRef, w: TensorRef) -> Result<TensorRef> {
    let [e, hc, nt, _] = x.ne();
    let (xnb, wnb) = (x.nb(), w.nb());
    let mut sum: Option<TensorRef> = None;
    for h in 0..hc {
        let xh = b.g.view(x, &[e, nt], &[xnb[2]], h as usize * xnb[1])?;
        let wh = b.g.view(w, &[1, nt], &[wnb[1]], h as usize * wnb[0])?;
        let term = b.g.mul(xh, wh)?;
        sum = Some(match sum {
            Some(s) => b.g.add(s, term)?,
            None => term,
        });
    }
    sum.ok_or_else(|| Error::model("hy_v4 without hyper-connection copies"))
}

/// Before layer `il`'s `part` ("attn" or "ffn"): the copies `x` summed by their pre gates, and
/// the post gates ([hc, n_tokens]) `hc_post` weights the block's output by.
fn hc_pre(b: &mut Builder, il: usize, x: TensorRef, part: &str) -> Result<(TensorRef, TensorRef)> {
    let hc = x.ne()[1];
    let (mixes, scale, base) = hc_layer_mixes(b, il, x, part)?;
    let nt = mixes.ne()[1];
    let row = |t: TensorRef, i: i64| crate::ggml::row_size(t.ggml_type(), i);
    let half = |b: &mut Builder, t: TensorRef, i: i64| -> Result<TensorRef> {
        b.g.view(t, &[hc, nt], &[t.nb()[1]], row(t, i * hc))
            .map_err(Error::from)
    };
    let one = |b: &mut Builder, t: TensorRef, i: i64, n: i64| -> Result<TensorRef> {
        b.g.view(t, &[n], &[], row(t, i)).map_err(Error::from)
    };
    let (scale_pre, scale_post) = (one(b, scale, 0, 1)?, one(b, scale, 1, 1)?);
    let (base_pre, base_post) = (one(b, base, 0, hc)?, one(b, base, hc, hc)?);
    let pre = half(b, mixes, 0)?;
    let pre = b.g.mul(pre, scale_pre)?;
    let pre = hc_gate(b, pre, base_pre)?;
    let post = half(b, mixes, 1)?;
    let post = b.g.mul(post, scale_post)?;
    let post = b.g.add(post, base_post)?;
    let post = b.g.sigmoid(post)?;
    let post = b.g.scale(post, b.hp.hc_magnitude)?;
    let post = b.g.scale_bias(post, 1.0, b.hp.hc_eps)?;
    Ok((hc_sum(b, x, pre)?, post))
}

/// After a block: each copy of `residual` ([n_embd, hc, n_tokens]) plus the block's output `out`
/// ([n_embd, n_tokens]) times the copy's post gate.
fn hc_post(b: &mut Builder, out: TensorRef, residual: TensorRef, post: TensorRef) -> Result<TensorRef> {
    let [e, hc, nt, _] = residual.ne();
    let (rnb, pnb) = (residual.nb(), post.nb());
    let mut copies: Option<TensorRef> = None;
    for h in 0..hc {
        let rh = b.g.view(residual, &[e, nt], &[rnb[2]], h as usize * rnb[1])?;
        let ph = b.g.view(post, &[1, nt], &[pnb[1]], h as usize * pnb[0])?;
        let scaled = b.g.mul(out, ph)?;
        let copy = b.g.add(rh, scaled)?;
        let copy = b.g.reshape(copy, &[e, 1, nt])?;
        copies = Some(match copies {
            Some(c) => b.g.concat(c, copy, 1)?,
            None => copy,
        });
    }
    copies.ok_or_else(|| Error::model("hy_v4 without hyper-connection copies"))
}
