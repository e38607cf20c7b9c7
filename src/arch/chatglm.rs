//! ChatGLM: pre-norm attention whose rotation may cover part of
//! each head, and an FFN whose gate and up projections are one matrix (`ffn_up`, twice as wide).

use super::created::{layered, ATTN, HEAD};
use super::{attention_tensors, head_tensors};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct ChatGlm;

impl ArchSpec for ChatGlm {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "chatglm",
            about: "Partial rotation, fused gate and up.",
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_head_sizes_partial_rotation(hp)?;
        hp.size_label = match (hp.n_layer, hp.n_head[0]) {
            (28, 16) => "1.5B",
            (28, _) => "6B",
            (40, 24) => "4B",
            (40, _) => "9B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        chatglm(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }
}

/// ChatGLM's: a fused gate and up projection.
fn chatglm(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_up.weight ffn_down.weight")
    })
}

impl Decoder for ChatGlm {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (h, _) = b.pre_norm_attention(il, x, kq_scale)?;
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.fused_gated_ffn(il, cur)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
