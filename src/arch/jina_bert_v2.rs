//! Jina BERT v2 (jina-embeddings-v2, jina-reranker-v1): BERT's post-norm layers without positions,
//! attention biased by distance (ALiBi, maximum bias 8); optional layer norms (with biases) of the
//! query and key projections and a second attention norm; a GELU FFN, gated (GeGLU) by a
//! separate gate or by an up projection twice as wide; a one-score classifier head (`cls`, tanh).

use super::created::layered;
use super::{attention_tensors, bert};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NONE};

pub struct JinaBertV2;

impl ArchSpec for JinaBertV2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "jina-bert-v2",
            about: "An encoder: BERT's layers with ALiBi instead of positions, optional query/key norms, a GeGLU \
                FFN: no cache, `llama_encode`, which `llama_decode` calls for it as llama.cpp does; one \
                ubatch per batch.",
            rope_type: ROPE_NONE,
            read_keys: &[super::READS_NORM_EPS],
            saved_rules: &[super::HELD_ALIBI],
            ..super::ENCODER
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        bert::load_hparams(meta, hp)?;
        hp.rope = false;
        hp.max_alibi_bias = 8.0;
        hp.size_label = match hp.n_layer {
            4 => "33M",
            12 => "137M",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, hp.n_vocab], true),
            TensorSpec::new("token_types.weight", &[e, hp.n_token_types], true),
            TensorSpec::new("token_embd_norm.weight", &[e], true),
            TensorSpec::new("token_embd_norm.bias", &[e], true),
            TensorSpec::matmul("cls.weight", &[e, 1], false),
            TensorSpec::new("cls.bias", &[1], false),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            attention_tensors(hp, il, &mut specs);
            let optional = ["attn_q_norm", "attn_k_norm", "attn_norm_2"];
            for name in optional
                .iter()
                .flat_map(|n| [format!("{n}.weight"), format!("{n}.bias")])
            {
                specs.push(TensorSpec::new(b(&name), &[e], false));
            }
            let required = [
                "attn_output.bias",
                "attn_output_norm.weight",
                "attn_output_norm.bias",
                "ffn_down.bias",
            ];
            for name in required
                .into_iter()
                .chain(["layer_output_norm.weight", "layer_output_norm.bias"])
            {
                specs.push(TensorSpec::new(b(name), &[e], true));
            }
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], false));
            // The up projection holds the gate too where it is twice as wide.
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true).or_shape(&[e, 2 * ff]));
            specs.push(TensorSpec::new(b("ffn_up.bias"), &[ff], false).or_shape(&[2 * ff]));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let head =
            "token_embd.weight token_types.weight token_embd_norm.weight token_embd_norm.bias cls.weight cls.bias";
        layered(hp, head, |_| {
            "QKV attn_q_norm.weight attn_q_norm.bias attn_k_norm.weight attn_k_norm.bias attn_output.weight \
             attn_output.bias attn_output_norm.weight attn_output_norm.bias attn_norm_2.weight attn_norm_2.bias \
             ffn_gate.weight ffn_up.weight ffn_up.bias ffn_down.weight ffn_down.bias layer_output_norm.weight \
             layer_output_norm.bias"
                .into()
        })
    }
}

/// Layer `il`'s layer norm `{name}.weight`, `{name}.bias` of `x`.
fn layer_norm(b: &mut Builder, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.layer_weight(il, &format!("{name}.weight"))?;
    let bias = b.layer_weight(il, &format!("{name}.bias"))?;
    b.layer_norm(x, w, bias)
}

/// Layer `il`'s norm `name` of the projection `x` where the layer has it.
fn projection_norm(b: &mut Builder, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
    match b.layer_weight_opt(il, &format!("{name}.weight")) {
        Some(_) => layer_norm(b, il, name, x),
        None => Ok(x),
    }
}

impl Decoder for JinaBertV2 {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        // Every token is of type 0: the first row of the token-type table.
        let types = b.weight("token_types.weight")?;
        let row0 = b.g.view(types, &[i64::from(hp.n_embd)], &[], 0)?;
        x = b.add(x, row0)?;
        let x = b.name(x, "inp_embd", None);
        let (w, bias) = (b.weight("token_embd_norm.weight")?, b.weight("token_embd_norm.bias")?);
        let x = b.layer_norm(x, w, bias)?;
        let mut x = b.name(x, "inp_norm", Some(0));
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (q, k, v) = b.qkv(il, x, false)?;
            let q = projection_norm(b, il, "attn_q_norm", q)?;
            let k = projection_norm(b, il, "attn_k_norm", k)?;
            let q = b.heads(q, hp.n_embd_head_k, hp.n_head[il])?;
            let k = b.heads(k, hp.n_embd_head_k, hp.n_head_kv[il])?;
            let v = b.heads(v, hp.n_embd_head_v, hp.n_head_kv[il])?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention_no_cache(il, q, k, v, kq_scale)?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let att = b.name(att, "kqv_out", l);
            let (att, input) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, input)?;
            let mut h = layer_norm(b, il, "attn_output_norm", h)?;
            if b.layer_weight_opt(il, "attn_norm_2.weight").is_some() {
                h = b.add(h, input)?;
                h = layer_norm(b, il, "attn_norm_2", h)?;
            }
            let h = b.name(h, "ffn_inp", l);
            let up = b.layer_linear(il, "ffn_up", h)?;
            let act = match b.layer_weight_opt(il, "ffn_gate.weight") {
                Some(w) => {
                    let gate = b.weight_mm(w, h)?;
                    b.g.geglu(gate, up)?
                }
                None if up.ne()[0] != i64::from(hp.n_ff[il]) => b.g.geglu_fused(up)?,
                None => b.g.gelu(up)?,
            };
            let ffn = b.layer_linear(il, "ffn_down", act)?;
            let ffn = b.name(ffn, "ffn_out", l);
            let out = b.add(ffn, h)?;
            x = layer_norm(b, il, "layer_output_norm", out)?;
        }
        let x = b.name(x, "result_embd", None);
        b.set_hidden(x);
        Ok(None)
    }
}
