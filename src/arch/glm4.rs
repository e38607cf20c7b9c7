//! GLM-4: the Llama layout with RMS norms after attention and after the FFN as well as before,
//! the FFN's gate and up projections fused (SwiGLU over the halves), an unbiased attention output,
//! and M-RoPE when the file's rotary sections ask for it (llama.cpp's `use_mrope`: the first two
//! sections nonzero), normal rotation otherwise. Multi-token-prediction layers are refused.

use super::created::{layered, ATTN, HEAD};
use crate::error::Result;
use crate::ggml::{TensorRef, ROPE_MROPE};
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Glm4;

impl ArchSpec for Glm4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "glm4",
            about: "Norms before and after attention and FFN, fused gate and up, M-RoPE when its sections ask.",
            read_keys: &[super::READS_RMS_EPS, &["rope.dimension_sections"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        if meta.i32_array(&hp.key("rope.dimension_sections"), 4)?.is_some() {
            super::load_rope_sections(meta, hp)?;
        }
        if hp.rope_sections[0] > 0 && hp.rope_sections[1] > 0 {
            hp.rope_type = ROPE_MROPE;
        }
        hp.size_label = match hp.n_layer {
            17 => "1B",
            40 => "9B",
            61 => "32B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        glm4(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("post_attention_norm.weight"), &[e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
                TensorSpec::new(b("post_ffw_norm.weight"), &[e], true),
            ]);
        }
        specs
    }
}

/// GLM-4's: ChatGLM's with norms after the attention and the FFN.
fn glm4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight ffn_norm.weight ffn_down.weight ffn_up.weight post_ffw_norm.weight")
    })
}

impl Decoder for Glm4 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        super::refuse_embeddings_without_mrope(b)?;
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.rotary_attention(il, cur, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.fused_gated_ffn(il, cur)?;
            let ffn = b.layer_rms_norm(il, ffn, "post_ffw_norm.weight", "ffn_post_norm")?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
