//! ModernBERT (and its derivatives: Granite Embedding R2, gte-reranker-modernbert): an encoder
//! with bias-free layer norms (the first layer's attention norm optional), NeoX rotation, a
//! fused query-key-value projection, a fused GeGLU FFN (SwiGLU where `hidden_activation` says),
//! sliding windows reaching both ways on all but every third layer, and a ranking head that pools
//! the mean (unless the file says otherwise), then `cls`, GELU, its norm and `cls.output`.

use super::created::layered;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct ModernBert;

/// Without an explicit pattern, the first of every three layers attends globally.
const DEFAULT_SWA_PERIOD: u32 = 3;

/// llama.h's `LLAMA_POOLING_TYPE_MEAN`: ranking pools the mean where the file names no pooling.
const POOLING_TYPE_MEAN: i32 = 1;

impl ArchSpec for ModernBert {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "modern-bert",
            about: "ModernBERT: an encoder with bias-free layer norms, rotation, a fused GeGLU FFN, sliding windows \
                reaching both ways, a GELU ranking head over the mean: no cache, `llama_encode`, which \
                `llama_decode` calls for it as llama.cpp does; one ubatch per batch.",
            read_keys: &[super::READS_NORM_EPS, super::READS_SLIDING],
            ..super::ENCODER
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        if window > 0 {
            hp.swa_symmetric = true;
            super::load_sliding_window_dense_first(meta, hp, window, DEFAULT_SWA_PERIOD, 10000.0, 1.0)?;
        }
        hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // llama.cpp reads the FFN's activation by name, GeGLU when unknown; ReLU and ReGLU are
        // not run here.
        hp.ffn_swiglu = match meta.str_opt(&hp.key("hidden_activation"))? {
            Some(b"silu" | b"swish" | b"swiglu") => true,
            Some(b"relu" | b"reglu") => {
                return Err(Error::NotImplemented("a ModernBERT FFN with ReLU or ReGLU"));
            }
            _ => false,
        };
        if hp.pooling_type_cls < 0 {
            hp.pooling_type_cls = POOLING_TYPE_MEAN;
        }
        hp.cls_gelu = true;
        hp.size_label = match hp.n_layer {
            12 => "47M",
            22 => "149M",
            28 => "395M",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let n_cls_out = hp.n_cls_out();
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("token_embd_norm.weight", &[e], true),
            TensorSpec::new("output_norm.weight", &[e], true),
            TensorSpec::matmul("cls.output.weight", &[e, n_cls_out], false),
            TensorSpec::new("cls.output.bias", &[n_cls_out], false),
            TensorSpec::matmul("cls.weight", &[e, e], false),
            TensorSpec::new("cls.norm.weight", &[e], false),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            // The first layer's attention norm is the identity where the file leaves it out.
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], il != 0));
            specs.push(TensorSpec::matmul(b("attn_qkv.weight"), &[e, 3 * e], true));
            specs.push(TensorSpec::matmul(b("attn_output.weight"), &[e, e], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut names = layered(
            hp,
            "token_embd.weight token_embd_norm.weight output_norm.weight",
            |_| {
                "attn_norm.weight attn_qkv.weight attn_output.weight ffn_up.weight ffn_down.weight ffn_norm.weight"
                    .into()
            },
        );
        names.extend(["cls.output.weight", "cls.output.bias", "cls.weight", "cls.norm.weight"].map(String::from));
        names
    }
}

/// Layer norm of `x` without a bias, by the weight `w`.
fn norm(b: &mut Builder, x: TensorRef, w: TensorRef) -> Result<TensorRef> {
    let n = b.g.norm(x, b.hp.norm_eps)?;
    b.g.mul(n, w).map_err(Error::from)
}

impl Decoder for ModernBert {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let x = b.embed_tokens_as("inp_embd")?;
        let w = b.weight("token_embd_norm.weight")?;
        let x = norm(b, x, w)?;
        let mut x = b.name(x, "inp_norm", Some(0));
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = match b.layer_weight_opt(il, "attn_norm.weight") {
                Some(w) => {
                    let cur = norm(b, x, w)?;
                    b.name(cur, "attn_norm", l)
                }
                None => x,
            };
            let (q, k, v) = b.qkv(il, cur, true)?;
            let (q, k) = (b.rope(q, il, None)?, b.rope(k, il, None)?);
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention_no_cache(il, q, k, v, kq_scale)?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let att = b.name(att, "kqv_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let w = b.layer_weight(il, "ffn_norm.weight")?;
            let cur = norm(b, h, w)?;
            let cur = b.name(cur, "ffn_norm", l);
            let ffn = if hp.ffn_swiglu {
                b.fused_gated_ffn(il, cur)?
            } else {
                b.fused_geglu_ffn(il, cur)?
            };
            x = b.add(ffn, h)?;
        }
        let w = b.weight("output_norm.weight")?;
        let x = norm(b, x, w)?;
        let x = b.name(x, "final_norm_out", None);
        b.set_hidden(x);
        Ok(None)
    }
}
