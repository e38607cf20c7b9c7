//! PLaMo 3: one fused projection for queries, keys and values with per-head norms before NeoX
//! rotation, norms after attention and after the FFN (gate and up fused in `ffn_up`), per-layer
//! head counts, and with a window in the file, sliding layers (seven of each eight by default).
//! Its post-norms are named without `.weight`, as llama.cpp names them for this architecture.

use super::created::{layered, HEAD};
use super::head_tensors;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Plamo3;

/// Without a pattern in the file, the last layer of each eight attends globally.
const DEFAULT_SWA_PERIOD: u32 = 8;

impl ArchSpec for Plamo3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "plamo3",
            about: "Fused projection with head norms, post-norms, sliding layers.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, super::READS_SLIDING],
            saved_rules: &[super::HELD_SWA_BASE_IF_WINDOW],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        // llama.cpp's defaults for the sliding layers' rotation (not the model's own).
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, 10000.0, 1.0)?;
        hp.size_label = if hp.n_layer == 24 { "2B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        plamo3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (q, kv, ff) = (hk * hp.n_head[il], hk * hp.n_head_kv[il], hp.n_ff[il]);
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("attn_qkv.weight"), &[e, q + 2 * kv], true));
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            specs.push(TensorSpec::matmul(b("attn_output.weight"), &[q, e], true));
            specs.push(TensorSpec::new(b("post_attention_norm"), &[e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("post_ffw_norm"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }
}

/// PLaMo 3's: PLaMo 2's attention layers, the FFN's post-norm before it.
fn plamo3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "attn_norm.weight attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight post_attention_norm ffn_norm.weight post_ffw_norm ffn_up.weight ffn_down.weight".into()
    })
}

impl Decoder for Plamo3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            // llama.cpp's graph leaves the fused projection's scale out.
            let (q, k, v) = b.qkv_scaled(il, cur, true, false)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            x = sandwich_ffn(b, il, att, x)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The rest of a PLaMo layer after its mixer's output `mixed`: the norm after it, the residual
/// sum with the layer's input `x`, then the fused SwiGLU FFN between its own norms, added on.
pub(super) fn sandwich_ffn(b: &mut Builder, il: usize, mixed: TensorRef, x: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let (mixed, residual) = b.last_layer_rows(il, mixed, x)?;
    let mixed = b.layer_rms_norm(il, mixed, "post_attention_norm", "attn_post_norm")?;
    let h = b.add(mixed, residual)?;
    let h = b.name(h, "ffn_inp", l);
    let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
    let ffn = b.fused_gated_ffn(il, cur)?;
    let ffn = b.layer_rms_norm(il, ffn, "post_ffw_norm", "ffn_post_norm")?;
    let out = b.add(ffn, h)?;
    b.layer_out(out, il)
}
