//! Command R and Cohere 2 (Command R7B): layer norms without biases, attention and a SwiGLU FFN
//! both reading the layer's one norm output and both added to the stream, the output head tied to
//! the token embeddings and the logits multiplied by `logit_scale`. Command R normalises each
//! query and key head from 64 layers on (llama.cpp loads the norms only then); Cohere 2 slides three layers of four, rotates only
//! those (with the context's frequencies, as llama.cpp's graph does) and scales its FFN by the
//! weights' scales. Cohere 2 MoE: the same block with RMS norms (layer norms when the file gives
//! only that epsilon), leading dense layers that rotate too, sigmoid-routed experts (fused or
//! separate gate and up stacks, their weights' scales applied) averaged with shared experts, and
//! its output rows picked after the final norm rather than in the last layer, as llama.cpp's
//! graph does; multi-token-prediction layers refused.

use super::created::{dense_lead, layered, ATTN, GATED, HEAD, SHARED_GDU, TIED_HEAD};
use super::gpt2;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Cohere {
    facts: Facts,
    /// Sliding layers (which alone rotate) and FFN scales: Cohere 2.
    sliding: bool,
    /// Experts after leading dense layers: Cohere 2 MoE.
    experts: bool,
    sizes: &'static [(u32, &'static str)],
}

pub const COMMAND_R: Cohere = Cohere {
    facts: Facts {
        name: "command-r",
        about: "Attention and FFN from one norm without bias, tied head, logit scale.",
        read_keys: &[super::READS_NORM_EPS, &["logit_scale"]],
        ..Facts::BASE
    },
    sliding: false,
    experts: false,
    sizes: &[(40, "35B")],
};

pub const COHERE2: Cohere = Cohere {
    facts: Facts {
        name: "cohere2",
        about: "Command-R's layers; only the sliding layers rotate.",
        read_keys: &[super::READS_NORM_EPS, super::READS_SLIDING, &["logit_scale"]],
        ..Facts::BASE
    },
    sliding: true,
    experts: false,
    sizes: &[(32, "8B")],
};

pub const COHERE2MOE: Cohere = Cohere {
    facts: Facts {
        name: "cohere2moe",
        about: "Cohere 2's layers with RMS norms, rotating leading dense layers, sigmoid-routed experts averaged \
        with shared experts; multi-token-prediction layers refused.",
        read_keys: &[
            super::READS_SHARED_MOE,
            super::READS_GATING,
            super::READS_RMS_EPS,
            super::READS_NORM_EPS,
            super::READS_SLIDING,
            &["expert_shared_feed_forward_length", "logit_scale"],
        ],
        saved_rules: &[super::HELD_GATING],
        ..Facts::BASE
    },
    sliding: true,
    experts: true,
    sizes: &[(49, "30B.A3B")],
};

/// Cohere 2's sliding layers: three of every four.
const SWA_PERIOD: u32 = 4;

/// From this many layers Command R normalises query and key heads.
const HEAD_NORM_LAYERS: u32 = 64;

impl ArchSpec for Cohere {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        if self.experts {
            load_experts(meta, hp)?;
        } else {
            hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        }
        let logit_scale = meta.f32_opt(&hp.key("logit_scale"))?;
        if self.experts {
            hp.logit_scale =
                logit_scale.ok_or_else(|| Error::model(format!("missing key '{}'", hp.key("logit_scale"))))?;
            let window = meta.u32(&hp.key("attention.sliding_window"))?;
            let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
            super::load_sliding_window_dense_first(meta, hp, window, SWA_PERIOD, base, scale)?;
        } else if self.sliding {
            hp.logit_scale =
                logit_scale.ok_or_else(|| Error::model(format!("missing key '{}'", hp.key("logit_scale"))))?;
            let window = meta.u32(&hp.key("attention.sliding_window"))?;
            let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
            super::load_sliding_window(meta, hp, window, SWA_PERIOD, base, scale)?;
        } else {
            hp.logit_scale = logit_scale.unwrap_or(0.0);
        }
        hp.size_label = self
            .sizes
            .iter()
            .find(|(n, _)| *n == hp.n_layer)
            .map_or("?B", |(_, s)| s);
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match (self.sliding, self.experts) {
            (false, _) => command_r(hp),
            (true, false) => cohere2(hp),
            (true, true) => cohere2moe(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, hp.n_vocab], true),
            TensorSpec::new("output_norm.weight", &[e], true),
        ];
        if self.experts {
            specs.push(TensorSpec::matmul("output.weight", &[e, hp.n_vocab], false));
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if self.experts && il >= hp.n_layer_dense_lead as usize {
                super::routed_expert_tensors(hp, il, &mut specs);
                continue;
            }
            specs.extend([
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
            if !self.sliding && hp.n_layer >= HEAD_NORM_LAYERS {
                let (hk, nh, nkv) = (hp.n_embd_head_k, hp.n_head[il], hp.n_head_kv[il]);
                specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk, nh], true));
                specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk, nkv], true));
            }
        }
        if self.sliding {
            super::rope_factor_tensors(hp, &mut specs);
        }
        specs
    }
}

/// Command R's: no FFN norm; from 64 layers on, query and key norms first.
fn command_r(hp: &HParams) -> Vec<String> {
    let norms = if hp.n_layer >= 64 {
        "attn_q_norm.weight attn_k_norm.weight "
    } else {
        ""
    };
    layered(hp, TIED_HEAD, |_| {
        format!("attn_norm.weight {norms}QKV attn_output.weight {GATED}")
    })
}

/// Cohere 2's: Command R's without the norms.
fn cohere2(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| format!("{ATTN} {GATED}"))
}

/// Cohere 2 MoE's: dense leading layers, then experts with fused gate and up projections (made
/// fused without a file) and shared ones where the model has them; no FFN norm.
fn cohere2moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight ffn_down_exps.weight ffn_gate_up_exps.weight {shared}");
        format!("{ATTN} {}", dense_lead(hp, il, &experts))
    })
}

/// Cohere 2 MoE's norms, leading dense layers and experts, as llama.cpp reads them.
fn load_experts(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let rms = meta.f32_opt(&hp.key("attention.layer_norm_rms_epsilon"))?;
    let plain = meta.f32_opt(&hp.key("attention.layer_norm_epsilon"))?;
    if rms.is_none() && plain.is_none() {
        return Err(Error::model("cohere2moe needs a norm epsilon"));
    }
    // Without the RMS epsilon (0), llama.cpp's graph takes layer norms.
    hp.rms_eps = rms.unwrap_or(0.0);
    hp.norm_eps = plain.unwrap_or(0.0);
    super::refuse_mtp(meta, hp)?;
    super::check_experts(hp)?;
    hp.n_layer_dense_lead = meta.u32(&hp.key("leading_dense_block_count"))?;
    meta.u32(&hp.key("expert_feed_forward_length"))?;
    if hp.n_ff_exp == 0 {
        hp.n_ff_exp = hp.n_ff[0];
    }
    let shared = meta.u32_opt(&hp.key("expert_shared_count"))?.unwrap_or(0);
    let width = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
    hp.n_ff_shexp = match (shared, width) {
        (0, _) => 0,
        (_, 0) => hp.n_ff_exp * shared,
        (_, w) => w,
    };
    super::load_sigmoid_routing(meta, hp)?;
    Ok(())
}

/// The layer norm or, when the model has an RMS epsilon, the RMS norm of weight `name`.
fn norm(b: &mut Builder, name: &str, x: TensorRef, label: &str, il: Option<usize>) -> Result<TensorRef> {
    if b.hp.rms_eps == 0.0 {
        return gpt2::norm(b, name, x, label, il);
    }
    let w = b.weight(&format!("{name}.weight"))?;
    let y = b.rms_norm(x, w)?;
    Ok(b.name(y, label, il))
}

impl Decoder for Cohere {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let dense = il < hp.n_layer_dense_lead as usize;
            let cur = norm(b, &format!("blk.{il}.attn_norm"), x, "attn_norm", l)?;
            let (mut q, mut k, v) = b.qkv(il, cur, true)?;
            let sliding = hp.swa_layers[il];
            if self.sliding {
                // Cohere 2 MoE's leading dense layers rotate too.
                if sliding || (self.experts && dense) {
                    let p = b.params.rope;
                    q = b.rope_ext(q, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, factors)?;
                    k = b.rope_ext(k, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, factors)?;
                }
            } else {
                for (t, which) in [(&mut q, "q"), (&mut k, "k")] {
                    if b.layer_weight_opt(il, &format!("attn_{which}_norm.weight")).is_some() {
                        let name = format!("blk.{il}.attn_{which}_norm");
                        *t = gpt2::norm(b, &name, *t, &format!("{}cur_normed", which.to_uppercase()), l)?;
                    }
                }
                q = b.rope(q, il, None)?;
                k = b.rope(k, il, None)?;
            }
            let att = b.attention(il, q, k, v, kq_scale, sliding)?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let (att, residual, cur) = if self.experts {
                (att, x, cur)
            } else {
                let (att, residual) = b.last_layer_rows(il, att, x)?;
                let (cur, _) = b.last_layer_rows(il, cur, cur)?;
                (att, residual, cur)
            };
            let ffn = Ffn {
                scaled: self.sliding,
                ..Ffn::default()
            };
            let ffn = if self.experts && !dense {
                experts(b, il, cur)?
            } else {
                b.gated_ffn(il, cur, ffn)?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            let sum = b.add(ffn, residual)?;
            x = b.add(sum, att)?;
            x = b.layer_out(x, il)?;
        }
        let mut x = norm(b, "output_norm", x, "result_norm", None)?;
        if self.experts {
            x = b.select_outputs(x)?;
        }
        let mut logits = b.output_head_unnormed(x)?;
        if hp.logit_scale != 0.0 {
            logits = b.scale(logits, hp.logit_scale)?;
        }
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Cohere 2 MoE's experts over `cur`, averaged with the shared experts where the layer has them.
fn experts(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let moe = Moe {
        gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Sigmoid),
        normalize: hp.expert_weights_norm,
        scaled: true,
        ..Moe::BASE
    };
    let routed = b.moe_ffn(il, cur, moe)?;
    if b.layer_weight_opt(il, "ffn_up_shexp.weight").is_none() {
        return Ok(routed);
    }
    let scaled = Ffn {
        scaled: true,
        ..Ffn::default()
    };
    let shared = b.gated_ffn_named(il, cur, scaled, "_shexp")?;
    let shared = b.name(shared, "ffn_shexp", Some(il));
    let sum = b.add(routed, shared)?;
    b.scale(sum, 0.5)
}
