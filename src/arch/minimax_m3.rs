//! MiniMax-M3: attention with per-head query and key norms and NeoX rotation; past the leading
//! dense layers, block-sparse attention (MSA, `minimax_m3/msa.rs`: a small indexer picks, per KV head,
//! the blocks of positions its queries attend to) and experts beside shared ones, every FFN
//! gpt-oss's clamped SwiGLU. As in llama.cpp, the sparse layers attend densely (over every cell)
//! without flash attention or with several sequences in one unified cache, still keeping their
//! (then unused) indexer cache.

mod msa;

use super::created::{layered, sparse_ffn, GATED, HEAD};
use super::{attention_tensors, head_tensors};
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_NEOX};
use crate::graph::{Builder, Decoder, ExpertAct, Ffn, Gating, Moe};
use crate::model::hparams::{HParams, Indexer};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct MinimaxM3;

impl ArchSpec for MinimaxM3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "minimax-m3",
            about: "MiniMax-M3: per-head norms, then block-sparse attention past the leading dense layers (an \
                indexer head per KV head picks the blocks of positions its queries attend to, gathered for one \
                token per stream, masked for longer ubatches; dense, as in llama.cpp, without flash attention or \
                with several sequences in one unified cache) beside routed and shared experts, gpt-oss's SwiGLU \
                in every FFN.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_INDEXER,
                super::READS_RMS_EPS,
                &["attention.indexer.block_size", "attention.indexer.local_blocks"],
            ],
            layer_members: &[("indexer.k_norm.weight", "index_k_norm")],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("minimax-m3.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        hp.n_layer_dense_lead = meta.u32_opt(&key("leading_dense_block_count"))?.unwrap_or(0);
        super::deepseek2::load_shared_experts(meta, hp)?;
        // Required here; "none" routes by sigmoid, where llama.cpp's graph would abort.
        meta.u32(&key("expert_gating_func"))?;
        super::load_sigmoid_routing(meta, hp)?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model("minimax-m3: key and value heads must be as wide"));
        }
        let ix = |k: &str| key(&format!("attention.indexer.{k}"));
        let dense = hp.n_layer_dense_lead as usize;
        hp.indexer = Indexer {
            n_head: meta.u32(&ix("head_count"))?,
            head_size: meta.u32(&ix("key_length"))?,
            top_k: meta.u32(&ix("top_k"))?,
            layers: (0..hp.n_layer as usize).map(|il| il >= dense).collect(),
            rope_mode: ROPE_NEOX,
            rope_trailing: false,
            hadamard: false,
            block: meta.u32(&ix("block_size"))?,
            local: meta.u32(&ix("local_blocks"))?,
            values: true,
            kpool: 0,
            kpool_tail: false,
        };
        let ix = &hp.indexer;
        if ix.block == 0 || ix.n_head == 0 || ix.top_k == 0 || ix.head_size < hp.n_rot {
            return Err(Error::model(format!(
                "minimax-m3: indexer of {} heads of {} (blocks of {}, top {}) cannot work",
                ix.n_head, ix.head_size, ix.block, ix.top_k
            )));
        }
        hp.size_label = if hp.n_layer == 60 { "428B.A23B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        minimax_m3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        let (ih, d) = (hp.indexer.n_head, hp.indexer.head_size);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            if il < hp.n_layer_dense_lead as usize {
                super::ffn_tensors(hp, il, false, &mut specs);
                continue;
            }
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[hp.n_expert], true));
            super::routed_expert_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::matmul(b("indexer.q_proj.weight"), &[e, ih * d], true),
                TensorSpec::matmul(b("indexer.k_proj.weight"), &[e, d], true),
                TensorSpec::new(b("indexer.q_norm.weight"), &[d], true),
                TensorSpec::new(b("indexer.k_norm.weight"), &[d], true),
            ]);
        }
        specs
    }
}

/// MiniMax-M3's: the projections first, query and key norms; dense leading layers, then experts
/// with the router's selection bias, shared ones and the block-sparse attention's indexer.
fn minimax_m3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "{} indexer.q_proj.weight indexer.k_proj.weight indexer.q_norm.weight indexer.k_norm.weight",
                sparse_ffn(hp, il)
            ),
        };
        format!("QKV attn_output.weight attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {ffn}")
    })
}

impl Decoder for MinimaxM3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let l = |il: usize| Some(il);
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let oai = Ffn {
            oai: true,
            ..Ffn::default()
        };
        let moe = Moe {
            act: ExpertAct::SwigluOai,
            ..Moe::silu(hp.expert_gating_func, Gating::Sigmoid, hp.expert_weights_norm, false)
        };
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let sparse = b.params.block_sparse && il >= hp.n_layer_dense_lead as usize;
            let att = if sparse {
                let (q, k, v) = b.qkv(il, cur, true)?;
                let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
                let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
                let q = b.rope(q, il, None)?;
                let k = b.rope(k, il, None)?;
                let att = msa::msa_attention(b, il, cur, (q, k, v), kq_scale)?;
                let wo = b.layer_weight(il, "attn_output.weight")?;
                b.linear(wo, None, att)?
            } else {
                b.head_normed_attention(il, cur, kq_scale, None)?
            };
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l(il));
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.gated_ffn(il, cur, oai)?
            } else {
                let routed = b.moe_ffn(il, cur, moe)?;
                let shared = b.gated_ffn_named(il, cur, oai, "_shexp")?;
                b.add(routed, shared)?
            };
            let out = b.add(ffn, h)?;
            x = b.layer_out(out, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
