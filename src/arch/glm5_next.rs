//! GLM5-Next (GLM-5.3-Flash): a hybrid of KDA layers (recurrent, each of q, k and v convolved
//! on its own, the decay bounded below where the file says, L2 norms of epsilon 1e-6) and
//! unrotated absorbed latent attention that sees only what a k-pool indexer picks
//! (`glm5_next/kpool.rs`; layers without an indexer of their own reuse the last one's picks), a
//! residual stream of four hyper-connection copies mixed by a Sinkhorn-normalised matrix around
//! each block, and DeepSeek-style leading dense layers then sigmoid-routed experts beside shared
//! ones. Its memory is llama.cpp's hybrid with an indexer cache: KDA states, the latent cache,
//! and per token the indexer's key, pool gate and pooled key. Multi-token-prediction layers are
//! loaded by llama.cpp but never run in its trunk graph; they are refused here.

mod kpool;

use super::created::{layered, GATED, HEAD, SHARED_GDU};
use super::{deepseek2, hy_v4, kimi_linear};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::{HParams, KdaDecay};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};
use kpool::Picks;

pub struct Glm5Next;

/// The hyper-connection copies llama.cpp supports.
const HC: u32 = 4;

impl ArchSpec for Glm5Next {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "glm5-next",
            about: "GLM-5.3-Flash: Kimi delta attention layers (q, k and v convolved apart, a decay bounded below \
                where the file says) beside unrotated absorbed latent attention that sees only what a k-pool \
                indexer picks (pools of consecutive positions, each pooled once into a key cached with the \
                pool's last token, scored per token, the best pools and the token's incomplete one attended to, \
                gathered for small ubatches); four residual copies mixed around each block by \
                Sinkhorn-normalised hyper-connections; leading dense layers, then sigmoid-routed experts beside \
                shared ones; rollback snapshots kept.",
            rope_type: ROPE_NONE,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_MLA,
                super::READS_INDEXER,
                super::READS_RMS_EPS,
                super::READS_NORM_EPS,
                &[
                    "swiglu_clamp_exp",
                    "swiglu_clamp_shexp",
                    "attention.indexer.kpool",
                    "attention.indexer.kpool_select_tail",
                    "attention.indexer.types",
                    "hyper_connection.count",
                    "hyper_connection.sinkhorn_iterations",
                    "hyper_connection.epsilon",
                    "ssm.conv_kernel",
                    "kda.head_dim",
                    "kda.gate_lower_bound",
                ],
            ],
            saved_rules: &[super::HELD_LATENT_VALUE_LENGTH, super::HELD_GATING],
            layer_members: &[
                ("ssm_norm.weight", "ssm_o_norm"),
                ("indexer_compressor_gate.weight", "indexer_kpool_gate"),
                ("indexer_compressor_ape.weight", "indexer_kpool_ape"),
            ],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("glm5-next.{k}");
        super::refuse_mtp(meta, hp)?;
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        hp.norm_eps = meta.f32_opt(&key("attention.layer_norm_epsilon"))?.unwrap_or(0.0);
        hp.rope = false;
        hp.n_embd_head_k_mla = meta.u32(&key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&key("attention.value_length_mla"))?;
        hp.n_lora_q = meta.u32(&key("attention.q_lora_rank"))?;
        hp.n_lora_kv = meta.u32(&key("attention.kv_lora_rank"))?;
        if hp.n_rot != 0 {
            return Err(Error::model(format!(
                "glm5-next: its latent attention is unrotated, but the file rotates {} dimensions",
                hp.n_rot
            )));
        }
        // The cache holds the latent as the key, and the values are read from it.
        hp.n_embd_head_k = hp.n_lora_kv;
        hp.n_embd_head_v = hp.n_lora_kv;
        kimi_linear::load_kda(meta, hp)?;
        if let Some(bound) = meta
            .f32_opt(&key("kda.gate_lower_bound"))?
            .filter(|&b| b > f32::NEG_INFINITY)
        {
            hp.kda_decay = KdaDecay::LowerBound(bound);
        }
        hp.delta_l2_eps = 1e-6;
        kimi_linear::split_layers(hp)?;

        hp.n_layer_dense_lead = meta.u32_opt(&key("leading_dense_block_count"))?.unwrap_or(0);
        deepseek2::load_shared_experts(meta, hp)?;
        super::load_sigmoid_routing(meta, hp)?;
        let n = hp.n_layer as usize;
        if let Some(limits) = meta.f32_per_layer(&key("swiglu_clamp_exp"), n)? {
            hp.swiglu_clamp_exp = limits;
        }
        hp.swiglu_clamp_shexp = match meta.f32_per_layer(&key("swiglu_clamp_shexp"), n)? {
            Some(limits) => limits,
            None => hp.swiglu_clamp_exp.clone(),
        };
        // llama.cpp clamps GLM5-Next's experts and shared experts with ggml's fused op.
        hp.swiglu_clamp_fused = true;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }

        // The indexer: in the attention layers its types mark (all by default).
        let types = meta
            .bool_per_layer(&key("attention.indexer.types"), n)?
            .unwrap_or_else(|| vec![true; n]);
        let layers: Vec<bool> = (0..n).map(|il| types[il] && hp.has_kv(il)).collect();
        if let Some(il) = (0..n).find(|&il| hp.has_kv(il)).filter(|&il| !layers[il]) {
            return Err(Error::model(format!(
                "glm5-next: attention layer {il} shares another layer's indexer picks, but none precedes it"
            )));
        }
        deepseek2::load_indexer(meta, hp, layers, 0)?;
        let ix = &mut hp.indexer;
        ix.kpool = meta.u32(&key("attention.indexer.kpool"))?;
        ix.kpool_tail = meta
            .bool_opt(&key("attention.indexer.kpool_select_tail"))?
            .unwrap_or(false);
        if ix.kpool < 2 || ix.kpool > 1 << 16 || !ix.top_k.is_multiple_of(ix.kpool) {
            return Err(Error::model(format!(
                "glm5-next: indexer pools of {} (more than one, dividing the top_k of {})",
                ix.kpool, ix.top_k
            )));
        }

        load_mixing(meta, hp)?;
        hp.size_label = if hp.n_layer == 45 { "320B.A18B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        glm5_next(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = kimi_linear::hybrid_tensors(hp, kimi_linear::KdaTensors::Glm5Next, latent_tensors);
        for il in 0..hp.n_layer as usize {
            specs.extend(mixing_tensors(hp, il));
        }
        specs
    }
}

/// GLM5-Next's: the hyper-connections' mixing weights around the attention and the FFN; delta
/// attention or latent attention (queries always compressed) with its lightning indexer (made in
/// every attention layer without a file); dense leading layers, then experts with the router's
/// selection bias and shared ones.
fn glm5_next(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => kimi_linear::kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g_a.weight ssm_g_b.weight"),
            false => "attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight \
                      attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight indexer.k_norm.weight \
                      indexer.k_norm.bias indexer.proj.weight indexer.attn_k.weight indexer.attn_q_b.weight \
                      indexer_compressor_gate.weight indexer_compressor_ape.weight"
                .to_string(),
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight \
                 {shared}"
            ),
        };
        format!(
            "attn_norm.weight ffn_norm.weight hc_attn_fn.weight hc_attn_base.weight hc_attn_scale.weight \
             hc_ffn_fn.weight hc_ffn_base.weight hc_ffn_scale.weight {mixer} {ffn}"
        )
    })
}

/// The unrotated latent attention's tensors and, where the layer has its own, the k-pool
/// indexer's.
fn latent_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, kv_rank, q_rank) = (hp.n_embd, hp.n_lora_kv, hp.n_lora_q);
    let (hk, hv, n_head) = (hp.n_embd_head_k_mla, hp.n_embd_head_v_mla, hp.n_head[il]);
    specs.extend([
        TensorSpec::new(b("attn_q_a_norm.weight"), &[q_rank], true),
        TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
        TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], true),
        TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * hk], true),
        TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank], true),
        TensorSpec::matmul(b("attn_k_b.weight"), &[hk, kv_rank, n_head], true),
        TensorSpec::matmul(b("attn_v_b.weight"), &[kv_rank, hv, n_head], true),
        TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
    ]);
    let (ix, own) = (&hp.indexer, hp.indexer.keeps(il));
    let (head, kpool) = (ix.head_size, ix.kpool);
    specs.extend([
        TensorSpec::new(b("indexer.k_norm.weight"), &[head], own),
        TensorSpec::new(b("indexer.k_norm.bias"), &[head], own),
        TensorSpec::matmul(b("indexer.proj.weight"), &[e, ix.n_head], own),
        TensorSpec::matmul(b("indexer.attn_k.weight"), &[e, head], own),
        TensorSpec::matmul(b("indexer.attn_q_b.weight"), &[q_rank, ix.n_head * head], own),
        TensorSpec::matmul(b("indexer_compressor_gate.weight"), &[e, head], own),
        TensorSpec::new(b("indexer_compressor_ape.weight"), &[head, kpool], own),
    ]);
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_k_b",
    "attn_v_b",
    "attn_output",
    "ssm_beta",
    "ssm_f_a",
    "ssm_f_b",
    "ssm_g_a",
    "ssm_g_b",
    "indexer.attn_k",
    "indexer.attn_q_b",
    "indexer.proj",
    "indexer_compressor_gate",
];

impl Decoder for Glm5Next {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
        let moe = Moe::silu(hp.expert_gating_func, Gating::Sigmoid, hp.expert_weights_norm, false);
        let x = b.embed_tokens_as("inp_embd")?;
        let nt = x.ne()[1];
        let x = b.g.reshape(x, &[e, 1, nt])?;
        let x = b.g.repeat(x, [e, hc, nt, 1])?;
        let mut x = b.name(x, "hc_init", None);
        let mut picks = None;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (cur, mix) = hc_pre(b, il, x, "attn")?;
            let cur = b.name(cur, "hc_attn_pre", l);
            let cur = b.layer_rms_norm(il, cur, "attn_norm.weight", "attn_norm")?;
            b.g.expand(cur);
            let att = if hp.is_recurrent(il) {
                b.kda_layer(il, cur, true)?
            } else {
                sparse_attention(b, il, cur, &mut picks)?
            };
            x = hc_post(b, att, x, mix)?;
            x = b.name(x, "hc_attn_post", l);

            let (cur, mix) = hc_pre(b, il, x, "ffn")?;
            let cur = b.name(cur, "hc_ffn_pre", l);
            let cur = b.layer_rms_norm(il, cur, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.gated_ffn(il, cur, Ffn::default())?
            } else {
                let routed = b.moe_ffn(il, cur, moe)?;
                let routed = b.name(routed, "ffn_moe_out", l);
                let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
                let shared = b.name(shared, "ffn_shexp", l);
                b.add(routed, shared)?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = hc_post(b, ffn, x, mix)?;
            x = b.layer_out(x, il)?;
        }
        // The requested rows, then the copies' mean.
        let flat = b.g.reshape(x, &[e * hc, nt])?;
        let flat = b.select_outputs(flat)?;
        let n_out = flat.ne()[1];
        let x = b.g.reshape(flat, &[e, hc, n_out])?;
        let xnb = x.nb();
        let mut sum = b.g.view(x, &[e, n_out], &[xnb[2]], 0)?;
        for h in 1..hc {
            let xh = b.g.view(x, &[e, n_out], &[xnb[2]], h as usize * xnb[1])?;
            sum = b.g.add(sum, xh)?;
        }
        let mean = b.g.scale(sum, 1.0 / hc as f32)?;
        let mean = b.name(mean, "hc_head", None);
        let logits = b.output_head(mean)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The hyper-connections mixed by a Sinkhorn-normalised matrix: their copies (llama.cpp runs
/// four), iterations (at least one) and epsilon.
pub(super) fn load_mixing(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let key = |k: &str| hp.key(&format!("hyper_connection.{k}"));
    let (count, iters, eps) = (key("count"), key("sinkhorn_iterations"), key("epsilon"));
    hp.hc_count = meta.u32(&count)?;
    hp.hc_sinkhorn_iters = meta.u32(&iters)?;
    hp.hc_eps = meta.f32(&eps)?;
    if hp.hc_count != HC || hp.hc_sinkhorn_iters == 0 {
        return Err(Error::model(format!(
            "{}: {} hyper-connection copies and {} Sinkhorn iterations (llama.cpp runs {HC} copies, at least one \
             iteration)",
            hp.arch_name, hp.hc_count, hp.hc_sinkhorn_iters
        )));
    }
    Ok(())
}

/// Layer `il`'s hyper-connection weights before its attention and its FFN.
pub(super) fn mixing_tensors(hp: &HParams, il: usize) -> Vec<TensorSpec> {
    let (e, hc) = (hp.n_embd, hp.hc_count);
    let mix = (2 + hc) * hc;
    ["attn", "ffn"]
        .into_iter()
        .flat_map(|part| {
            let b = |s: &str| format!("blk.{il}.hc_{part}_{s}.weight");
            [
                TensorSpec::matmul(b("fn"), &[hc * e, mix], true),
                TensorSpec::new(b("base"), &[mix], true),
                TensorSpec::new(b("scale"), &[3], true),
            ]
        })
        .collect()
}

/// The post weights ([hc, n_tokens]) and mixing matrices ([hc, hc, n_tokens]) `hc_pre` gives
/// `hc_post`.
#[derive(Clone, Copy)]
pub(super) struct Mix {
    post: TensorRef,
    comb: TensorRef,
}

/// Before layer `il`'s `part` ("attn" or "ffn"): the copies `x` ([n_embd, hc, n_tokens]) summed
/// by their pre gates, and how `hc_post` puts the block's output back.
pub(super) fn hc_pre(b: &mut Builder, il: usize, x: TensorRef, part: &str) -> Result<(TensorRef, Mix)> {
    let l = Some(il);
    let hc = x.ne()[1];
    let (mixes, scale, base) = hy_v4::hc_layer_mixes(b, il, x, part)?;
    let mixes = b.name(mixes, "hc_mixes", l);
    let nt = mixes.ne()[1];
    let row = |t: TensorRef, i: i64| crate::ggml::row_size(t.ggml_type(), i);
    let part_of = |b: &mut Builder, i: i64| -> Result<TensorRef> {
        b.g.view(mixes, &[hc, nt], &[mixes.nb()[1]], row(mixes, i * hc))
            .map_err(Error::from)
    };
    let one = |b: &mut Builder, t: TensorRef, i: i64, n: i64| -> Result<TensorRef> {
        b.g.view(t, &[n], &[], row(t, i)).map_err(Error::from)
    };
    let (scale_pre, scale_post) = (one(b, scale, 0, 1)?, one(b, scale, 1, 1)?);
    let (base_pre, base_post) = (one(b, base, 0, hc)?, one(b, base, hc, hc)?);
    let pre = part_of(b, 0)?;
    let pre = b.g.mul(pre, scale_pre)?;
    let pre = hy_v4::hc_gate(b, pre, base_pre)?;
    let pre = b.name(pre, "hc_pre", l);
    let post = part_of(b, 1)?;
    let post = b.g.mul(post, scale_post)?;
    let post = b.g.add(post, base_post)?;
    let post = b.g.sigmoid(post)?;
    let post = b.g.scale(post, 2.0)?;
    let post = b.name(post, "hc_post", l);
    let comb = b.g.hc_mixing(mixes, scale, base, b.hp.hc_eps, b.hp.hc_sinkhorn_iters)?;
    let comb = b.name(comb, "hc_comb", l);
    let cur = b.g.weighted_rows(x, pre)?;
    Ok((cur, Mix { post, comb }))
}

/// After a block: the copies of `residual` mixed by the matrix, plus the block's output `out`
/// times each copy's post weight.
pub(super) fn hc_post(b: &mut Builder, out: TensorRef, residual: TensorRef, mix: Mix) -> Result<TensorRef> {
    b.g.add_weighted_rows(out, residual, mix.post, Some(mix.comb))
        .map_err(Error::from)
}

/// Layer `il`'s latent attention over what its indexer (or the last layer's, kept in `picks`)
/// picked, projected out.
fn sparse_attention(b: &mut Builder, il: usize, cur: TensorRef, picks: &mut Option<Picks>) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let hk = i64::from(hp.n_embd_head_k_mla);
    let kq_scale = 1.0 / (hk as f32).sqrt();
    let qr = deepseek2::query_latent(b, il, cur)?.ok_or_else(|| Error::model("glm5-next needs attn_q_a_norm"))?;
    let qr = b.name(qr, "q_resid", l);
    let q = deepseek2::queries_from_latent(b, il, qr, hk)?;
    let kv = b.layer_matmul(il, "attn_kv_a_mqa.weight", cur)?;
    let kv = b.layer_rms_norm(il, kv, "attn_kv_a_norm.weight", "kv_cmpr")?;
    let kv = b.g.reshape(kv, &[i64::from(hp.n_lora_kv), 1, kv.ne()[1]])?;
    let kv = b.name(kv, "kv_cmpr", l);
    let q = b.g.permute(q, [0, 2, 1, 3])?;
    let q = b.layer_matmul(il, "attn_k_b.weight", q)?;
    let q = b.g.permute(q, [0, 2, 1, 3])?;
    let q = b.name(q, "q_absorbed", l);
    if hp.indexer.keeps(il) {
        *picks = Some(kpool::kpool_picks(b, il, cur, qr)?);
    }
    let picked = picks.ok_or_else(|| Error::Internal(format!("layer {il}: no indexer picks to share")))?;
    b.g.expand(q);
    b.g.expand(kv);
    let wv_b = b.layer_weight(il, "attn_v_b.weight")?;
    let att = match picked {
        Picks::Cells(cells) => kpool::attention_gathered(b, il, q, kv, cells, wv_b, kq_scale)?,
        Picks::Mask(mask) => b.attention_latent(il, q, kv, wv_b, kq_scale, Some(mask))?,
    };
    let att = b.name(att, "kqv_out", l);
    let out = b.layer_matmul(il, "attn_output.weight", att)?;
    Ok(b.name(out, "attn_out", l))
}
