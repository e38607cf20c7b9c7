//! CogVLM's language model over text: Llama's layers with a fused query-key-value projection,
//! NeoX rotation at ggml's defaults (base 10000, no scaling: llama.cpp's graph ignores the
//! context's settings), and the vision expert's weights beside the text ones: a ubatch of
//! embeddings (an image) goes through the expert's projections, one of tokens through the text
//! ones. llama.cpp's graph never picks the requested rows: it computes the head over every token
//! and hands back the first `n_outputs` rows, which is done here too.

use super::created::{layered, GATED, HEAD};
use super::head_tensors;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct CogVlm;

impl ArchSpec for CogVlm {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "cogvlm",
            about: "CogVLM's language model: a fused projection, NeoX at ggml's default rotation, vision weights \
                loaded for text; llama.cpp's first `n_outputs` rows handed back.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // The fused projection is split at multiples of n_embd, every head rotated whole.
        let fits = |il: usize| hp.n_head[il] * hp.n_embd_head_k == hp.n_embd && hp.n_head_kv[il] == hp.n_head[il];
        if hp.n_rot != hp.n_embd_head_k || !(0..hp.n_layer as usize).all(fits) {
            return Err(Error::model(
                "cogvlm needs as many KV heads as heads, heads filling n_embd, and whole heads rotated",
            ));
        }
        hp.size_label = if hp.n_layer == 32 { "13B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        cogvlm(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let e = hp.n_embd;
        specs.push(TensorSpec::new("rope_freqs.weight", &[hp.n_rot / 2], false));
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            // The text weights, then the vision expert's (`vis_`).
            for prefix in ["", "vis_"] {
                let (qkv, out) = if prefix.is_empty() {
                    ("attn_qkv", "attn_output")
                } else {
                    ("vis_attn_qkv", "vis_attn_output")
                };
                let (gate, up, down) = if prefix.is_empty() {
                    ("ffn_gate", "ffn_up", "ffn_down")
                } else {
                    ("vis_gate", "vis_up", "vis_down")
                };
                specs.extend([
                    TensorSpec::matmul(b(&format!("{qkv}.weight")), &[e, 3 * e], true),
                    TensorSpec::matmul(b(&format!("{out}.weight")), &[e, e], true),
                    TensorSpec::matmul(b(&format!("{gate}.weight")), &[e, ff], true),
                    TensorSpec::matmul(b(&format!("{up}.weight")), &[e, ff], true),
                    TensorSpec::matmul(b(&format!("{down}.weight")), &[ff, e], true),
                ]);
            }
        }
        specs
    }
}

/// CogVLM's: the fused projection, and a second attention and FFN for image tokens.
fn cogvlm(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_output.weight vis_attn_qkv.weight vis_attn_output.weight ROPE_FREQS ffn_norm.weight {GATED} vis_gate.weight vis_down.weight vis_up.weight")
    })
}

impl Decoder for CogVlm {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let head = i64::from(hp.n_embd_head_k);
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        // An image's rows take the vision expert's weights.
        let [qkv_w, out_w, up, gate, down] = if b.takes_embeddings() {
            ["vis_attn_qkv", "vis_attn_output", "vis_up", "vis_gate", "vis_down"]
        } else {
            ["attn_qkv", "attn_output", "ffn_up", "ffn_gate", "ffn_down"]
        };
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let n_head = i64::from(hp.n_head[il]);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let qkv = b.layer_matmul(il, &format!("{qkv_w}.weight"), cur)?;
            let nt = qkv.ne()[1];
            let (el, nb1) = (crate::ggml::row_size(qkv.ggml_type(), 1), qkv.nb()[1]);
            let mut parts = [qkv; 3];
            for (i, p) in parts.iter_mut().enumerate() {
                let offset = i * hp.n_embd as usize * el;
                *p = b.g.view(qkv, &[head, n_head, nt], &[head as usize * el, nb1], offset)?;
            }
            let [q, k, v] = parts;
            // ggml_rope's defaults, whatever the context says.
            let (q, k) = (
                b.rope_ext(q, 10000.0, 1.0, 0.0, 1.0, None)?,
                b.rope_ext(k, 10000.0, 1.0, 0.0, 1.0, None)?,
            );
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let wo = b.layer_weight(il, &format!("{out_w}.weight"))?;
            let att = b.linear(wo, None, att)?;
            let h = b.add(att, x)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.gated_ffn_of(il, cur, Ffn::default(), [up, gate, down])?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        let logits = b.first_rows_as_outputs(logits)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
