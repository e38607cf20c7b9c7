//! SmallThinker: a decoder of experts only. Each layer's router reads the layer's input (before
//! the attention norm), its experts are ReLU-gated; with a sliding window in the file, llama.cpp
//! fixes the window at 4096 tokens, slides every layer but the first of each four, and leaves
//! those first layers unrotated (in the graph only: a K-shift rotates every layer).

use super::common_tensors;
use super::created::{layered, ATTN, EXPERTS, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, ExpertAct, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct SmallThinker;

/// llama.cpp's window whatever the file says, and its layer period (sliding pattern and the
/// unrotated layers both).
const WINDOW: u32 = 4096;
const PERIOD: u32 = 4;

impl ArchSpec for SmallThinker {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "smallthinker",
            about: "ReLU-gated experts routed from the layer input, llama.cpp's fixed window.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_feed_forward_length", "expert_gating_func"],
            ],
            saved_rules: &[super::HELD_SWA_BASE_IF_WINDOW, super::HELD_WINDOW],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert == 0 || hp.n_expert_used == 0 || hp.n_ff_exp == 0 {
            return Err(Error::model(
                "smallthinker needs expert_count, expert_used_count and expert_feed_forward_length",
            ));
        }
        // llama.cpp reads the gating function only from the file (no default it can build).
        let gating = meta.u32(&hp.key("expert_gating_func"))?;
        if Gating::from_llama(gating).is_none() {
            return Err(Error::NotImplemented("smallthinker with that expert gating function"));
        }
        hp.expert_gating_func = gating;
        if meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0) > 0 {
            let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
            super::load_sliding_window_dense_first(meta, hp, WINDOW, PERIOD, base, scale)?;
        }
        hp.size_label = match hp.n_layer {
            32 => "4B",
            52 => "20B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        smallthinker(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        common_tensors(hp, true, &mut specs);
        specs
    }
}

/// SmallThinker's: routed experts only.
fn smallthinker(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight {EXPERTS}"))
}

impl Decoder for SmallThinker {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let n_layer = hp.n_layer as usize;
        let moe = Moe {
            gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
            normalize: true,
            act: ExpertAct::Relu,
            ..Moe::BASE
        };
        // Without a window every layer rotates; with one, all but the first of each PERIOD (and
        // all of them in a model of exactly PERIOD layers, as llama.cpp's test reads).
        let step = if hp.n_swa > 0 { PERIOD as usize } else { n_layer };
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..n_layer {
            let l = Some(il);
            let mut logits = b.router_logits(il, x)?;
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let (q, k) = if step == n_layer || il % step != 0 {
                (b.rope(q, il, None)?, b.rope(k, il, None)?)
            } else {
                (q, k)
            };
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let att = b.name(att, "kqv_out", l);
            let att = b.layer_linear(il, "attn_output", att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            if il + 1 == n_layer {
                logits = b.select_outputs(logits)?;
            }
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.moe_ffn_from_logits(il, cur, logits, moe)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
