//! Nemotron-H: each layer one of three kinds, told apart by its head and FFN counts — a Mamba-2
//! layer (no key/value heads, no FFN), an attention layer without rotary positions (no FFN) or a
//! squared-ReLU FFN — between an RMS norm and the residual. Only the attention layers keep keys
//! and values, only the Mamba-2 layers recurrent state.

use super::{attention_tensors, head_tensors, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Memory, TensorSpec};

pub struct NemotronH;

impl ArchSpec for NemotronH {
    fn name(&self) -> &'static str {
        "nemotron_h"
    }

    fn rope_type(&self) -> i32 {
        -1
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        // Its RMS norms' epsilon, else the layer norms' (which llama.cpp requires).
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        mamba::load_mamba2(meta, hp)?;
        if hp.n_expert > 0 {
            return Err(Error::NotImplemented("nemotron_h with experts"));
        }
        let n = hp.n_layer as usize;
        hp.recurrent_layers = (0..n).map(|il| hp.n_head_kv[il] == 0 && hp.n_ff[il] == 0).collect();
        hp.kv_layers = (0..n).map(|il| !hp.recurrent_layers[il] && hp.n_ff[il] == 0).collect();
        hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
        hp.rope = false;
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model("nemotron_h needs equal key and value head sizes"));
        }
        hp.size_label = match hp.n_layer {
            56 => "9B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if hp.is_recurrent(il) {
                mamba::mamba2_tensors(hp, il, true, &mut specs);
            } else if hp.has_kv(il) {
                attention_tensors(hp, il, &mut specs);
                specs.push(TensorSpec::new(b("attn_output.bias"), &[e], false));
            } else {
                let ff = hp.n_ff[il];
                specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
                specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
                specs.push(TensorSpec::new(b("ffn_up.bias"), &[ff], false));
                specs.push(TensorSpec::new(b("ffn_down.bias"), &[e], false));
            }
        }
        specs
    }

    fn memory(&self) -> Memory {
        Memory::Hybrid
    }

    fn rollback(&self) -> bool {
        true
    }
}

impl Decoder for NemotronH {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = hp.kq_scale();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let cur = if hp.is_recurrent(il) {
                b.mamba2_layer(il, cur)?
            } else if hp.has_kv(il) {
                let (q, k, v) = b.qkv(il, cur, true)?;
                let att = b.attention(il, q, k, v, kq_scale, false)?;
                let att = b.layer_linear(il, "attn_output", att)?;
                b.name(att, "attn_out", Some(il))
            } else {
                let ffn = b.relu_sqr_ffn(il, cur)?;
                b.name(ffn, "ffn_out", Some(il))
            };
            let (cur, residual) = b.last_layer_rows(il, cur, x)?;
            let out = b.add(cur, residual)?;
            x = b.name(out, "nemotron_h_block_out", Some(il));
        }
        b.output_head(x).map(Some)
    }
}
