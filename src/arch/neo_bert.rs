//! NeoBERT: an encoder with RMS pre-norms, normal rotation, one fused query-key-value projection
//! and a fused SwiGLU FFN (gate and up in one matrix), ending in the encoder output norm; a
//! classifier head (`cls`, `cls.output`) where the file has one.

use super::created::layered;
use super::eurobert::prenorm_encoder;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NORMAL};

pub struct NeoBert;

impl ArchSpec for NeoBert {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "neo-bert",
            about: "An encoder with RMS pre-norms, rotation, a fused SwiGLU FFN and an optional classifier head: no \
                cache, `llama_encode`, which `llama_decode` calls for it as llama.cpp does; one ubatch per batch.",
            rope_type: ROPE_NORMAL,
            read_keys: &[super::READS_RMS_EPS],
            ..super::ENCODER
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.size_label = if hp.n_layer == 28 { "250M" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let n_cls_out = hp.n_cls_out();
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::matmul("cls.weight", &[e, e], false),
            TensorSpec::new("cls.bias", &[e], false),
            TensorSpec::matmul("cls.output.weight", &[e, n_cls_out], false),
            TensorSpec::new("cls.output.bias", &[n_cls_out], false),
            TensorSpec::new("enc.output_norm.weight", &[e], true),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            let kv = hp.n_embd_head_k * hp.n_head_kv[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("attn_qkv.weight"), &[e, e + 2 * kv], true));
            specs.push(TensorSpec::matmul(b("attn_output.weight"), &[e, e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let head = "token_embd.weight cls.weight cls.bias cls.output.weight cls.output.bias enc.output_norm.weight";
        layered(hp, head, |_| {
            "attn_norm.weight attn_qkv.weight attn_output.weight ffn_norm.weight ffn_up.weight ffn_down.weight".into()
        })
    }
}

impl Decoder for NeoBert {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        prenorm_encoder(
            b,
            |b, il, cur| b.fused_gated_ffn_named(il, cur, ""),
            "enc.output_norm.weight",
        )
    }
}
