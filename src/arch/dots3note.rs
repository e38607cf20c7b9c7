//! dots.llm3 ("dots3note"): DeepSeek V3.2's sparse absorbed latent attention on the full layers,
//! plain absorbed latent attention through a sliding window on the others, the shared rotated key
//! part RMS-normed before its rotation, a sigmoid gate per head on the attention's output, then
//! leading dense FFNs and routed experts beside shared ones, every FFN product scaled by its
//! weight's scale.
//!
//! llama.cpp lets the sliding layers' latent differ in width from the full layers'; the engine's
//! cache keeps one key width, so such files are refused (none is known yet).

use super::created::{layered, sparse_ffn, HEAD};
use super::deepseek2::{self, absorbed_attention, ffn_block, queries_from_latent, query_latent};
use super::minicpm3;
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_NEOX};
use crate::graph::{is_sliding, Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Dots3Note;

impl ArchSpec for Dots3Note {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "dots3note",
            about: "dots.llm3: sparse latent attention on the full layers, latent attention through a sliding window \
                on the others, a normed shared key part, a sigmoid gate per head; sliding layers with a latent \
                of another width refused.",
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_MLA,
                super::READS_INDEXER,
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &[
                    "attention.sliding_window_pattern",
                    "attention.key_length_mla_swa",
                    "attention.value_length_mla_swa",
                    "attention.kv_lora_rank_swa",
                    "attention.indexer.types",
                ],
            ],
            saved_rules: &[super::HELD_NORM_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("dots3note.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        hp.n_layer_dense_lead = meta.u32(&key("leading_dense_block_count"))?;
        deepseek2::load_shared_experts(meta, hp)?;
        // Required here; "none" routes by sigmoid, where llama.cpp's graph would abort.
        meta.u32(&key("expert_gating_func"))?;
        super::load_sigmoid_routing(meta, hp)?;
        hp.n_lora_q = meta.u32(&key("attention.q_lora_rank"))?;
        hp.n_lora_kv = meta.u32(&key("attention.kv_lora_rank"))?;
        hp.n_embd_head_k_mla = meta.u32(&key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&key("attention.value_length_mla"))?;
        let sliding = [
            ("attention.kv_lora_rank_swa", hp.n_lora_kv),
            ("attention.key_length_mla_swa", hp.n_embd_head_k_mla),
            ("attention.value_length_mla_swa", hp.n_embd_head_v_mla),
        ];
        for (k, full) in sliding {
            let v = meta.u32(&key(k))?;
            if v != full {
                return Err(Error::NotImplemented(
                    "dots3note with sliding-window layers whose latent differs in size from the full layers'",
                ));
            }
        }
        if meta
            .u32_opt(&key("attention.key_length_swa"))?
            .is_some_and(|k| k != hp.n_embd_head_k)
        {
            return Err(Error::NotImplemented(
                "dots3note with sliding-window layers whose cached keys differ in size from the full layers'",
            ));
        }
        super::load_sliding_window_array(meta, hp)?;
        // Required here, as llama.cpp's loader reads it (its value is read with the window).
        meta.f32(&key("rope.freq_base_swa"))?;
        hp.shift_freq_scale_swa = Some(1.0);
        let types = key("attention.indexer.types");
        let indexed = super::layer_flags(meta, hp, &types, false)?
            .ok_or_else(|| Error::model(format!("dots3note needs the per-layer array '{types}'")))?;
        deepseek2::load_indexer(meta, hp, indexed, ROPE_NEOX)?;
        hp.indexer.hadamard = true;
        // The indexer's key norm (llama.cpp fixes it).
        hp.norm_eps = 1e-6;
        deepseek2::check_heads(hp)?;
        if !hp.kv_latent() {
            return Err(Error::model("dots3note needs absorbed latent attention"));
        }
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        hp.size_label = if hp.n_layer == 46 { "288B.A19B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        dots3note(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = deepseek2::latent_tensors(hp, true);
        // llama.cpp requires the routers' selection biases here.
        for s in specs.iter_mut().filter(|s| s.name.ends_with("exp_probs_b.bias")) {
            s.required = true;
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_rot], true));
            specs.push(TensorSpec::matmul(
                b("attn_gate.weight"),
                &[hp.n_embd, hp.n_head[il]],
                true,
            ));
        }
        specs
    }
}

/// dots.llm3's (`dots3note`): DeepSeek-V3.2's attention with a norm of the rotated key part and
/// an output gate per head, the indexer in the layers that have one.
fn dots3note(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let indexer = if hp.indexer.layers.get(il) == Some(&true) {
            deepseek2::INDEXER
        } else {
            ""
        };
        format!(
            "attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_k_norm.weight attn_q_a.weight \
             attn_q_b.weight attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight \
             attn_gate.weight ffn_norm.weight {indexer} {}",
            sparse_ffn(hp, il)
        )
    })
}

impl Decoder for Dots3Note {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        super::deepseek2::SPARSE_WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k_mla);
        let kq_scale = 1.0 / (hk as f32).sqrt();
        let moe = Moe::silu(hp.expert_gating_func, Gating::Sigmoid, hp.expert_weights_norm, true);
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let qr = query_latent(b, il, cur)?.ok_or_else(|| Error::model("dots3note needs attn_q_a_norm"))?;
            // Only the full layers index; the sliding ones see their window.
            let picks = match is_sliding(hp, il) {
                true => None,
                false => Some(b.lightning_top_k(il, cur, qr)?),
            };
            let q = queries_from_latent(b, il, qr, hk)?;
            let (latent, k_pe) = minicpm3::latent_kv_normed(b, il, cur, None, true)?;
            let mask = picks.map(|p| b.sparse_mask(p)).transpose()?;
            let att = absorbed_attention(b, il, q, latent, k_pe, kq_scale, mask)?;
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let gate = b.g.sigmoid(gate)?;
            let att = b.gate_heads(il, att, gate)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            x = ffn_block(b, il, att, residual, moe)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
