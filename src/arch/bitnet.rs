//! BitNet b1.58: the Llama decoder with an RMS norm before each output projection (of attention
//! and of the FFN), every projection scaled by its weight's optional per-tensor scale, NeoX
//! rotation, and the token embeddings as the output head. Its weights are usually ternary
//! (`TQ1_0`, `TQ2_0`).

use super::created::layered;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

/// The projections, each with the optional scale llama.cpp's loader makes beside it (so its
/// generic pass makes only their input scales, which it loads and leaves unused).
const PROJECTIONS: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
];

pub struct BitNet;

impl ArchSpec for BitNet {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "bitnet",
            about: "BitNet b1.58: the Llama decoder with norms before the attention's and the FFN's output \
                projections, per-tensor weight scales, the head tied to the embeddings.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            saved: false,
            unscaled_weights: &PROJECTIONS,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model("bitnet needs equal key and value head sizes"));
        }
        // The query and output projections are as wide as the embeddings.
        if hp.n_head.iter().any(|&n| n * hp.n_embd_head_k != hp.n_embd) {
            return Err(Error::model(
                "bitnet needs query heads as wide as the embeddings together",
            ));
        }
        hp.size_label = if hp.n_layer == 26 { "3B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("output_norm.weight", &[e], true),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (ff, kv) = (hp.n_ff[il], hp.n_embd_head_k * hp.n_head_kv[il]);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_sub_norm.weight"), &[e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::new(b("ffn_sub_norm.weight"), &[ff], true),
            ]);
            let shapes = [[e, e], [e, kv], [e, kv], [e, e], [e, ff], [ff, e], [e, ff]];
            for (name, shape) in PROJECTIONS.iter().zip(shapes) {
                specs.push(TensorSpec::matmul(b(&format!("{name}.weight")), &shape, true));
                specs.push(TensorSpec::new(b(&format!("{name}.scale")), &[1], false));
                specs.push(TensorSpec::new(b(&format!("{name}.input_scale")), &[1], false));
            }
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut names = layered(hp, "token_embd.weight output_norm.weight", |_| {
            "attn_norm.weight attn_sub_norm.weight attn_q.weight attn_q.scale attn_k.weight attn_k.scale attn_v.weight attn_v.scale attn_output.weight attn_output.scale ffn_norm.weight ffn_sub_norm.weight ffn_gate.weight ffn_gate.scale ffn_down.weight ffn_down.scale ffn_up.weight ffn_up.scale".into()
        });
        // llama.cpp's generic pass, after every layer: the input scales its loader did not make.
        for il in 0..hp.n_layer as usize {
            names.extend(PROJECTIONS.iter().map(|p| format!("blk.{il}.{p}.input_scale")));
        }
        names
    }
}

impl Decoder for BitNet {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let att = b.layer_rms_norm(il, att, "attn_sub_norm.weight", "attn_sub_norm")?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let att = b.name(att, "attn_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let up_w = b.layer_weight(il, "ffn_up.weight")?;
            let up = b.linear(up_w, None, cur)?;
            let gate_w = b.layer_weight(il, "ffn_gate.weight")?;
            let gate = b.linear(gate_w, None, cur)?;
            let act = b.g.swiglu(gate, up)?;
            let act = b.name(act, "ffn_sub_out", l);
            let act = b.layer_rms_norm(il, act, "ffn_sub_norm.weight", "ffn_sub_norm")?;
            let down_w = b.layer_weight(il, "ffn_down.weight")?;
            let down = b.linear(down_w, None, act)?;
            let down = b.name(down, "ffn_down", l);
            x = b.add(down, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
