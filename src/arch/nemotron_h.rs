//! Nemotron-H: each layer one of three kinds, told apart by its head and FFN counts — a Mamba-2
//! layer (no key/value heads, no FFN), an attention layer without rotary positions (no FFN) or a
//! squared-ReLU FFN — between an RMS norm and the residual. Only the attention layers keep keys
//! and values, only the Mamba-2 layers recurrent state. Nemotron-H MoE (`nemotron_h_moe`): the
//! FFN layers of a file with experts are squared-ReLU experts (sigmoid routing with a selection
//! bias, optionally in a narrower latent width) beside a squared-ReLU shared expert.

use super::created::{layered, HEAD};
use super::mamba::MAMBA2;
use super::{attention_tensors, head_tensors, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, ExpertAct, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

/// `nemotron_h` or `nemotron_h_moe` (one graph; the experts come with the file).
pub struct NemotronH(Facts);

/// What both are beside their names.
const NEMOTRON: Facts = Facts {
    rope_type: ROPE_NONE,
    read_keys: &[
        super::READS_SSM,
        super::READS_RMS_EPS,
        super::READS_NORM_EPS,
        &[
            "expert_feed_forward_length",
            "expert_shared_feed_forward_length",
            "expert_shared_count",
            "expert_weights_scale",
            "expert_weights_norm",
            "ssm.group_count",
        ],
    ],
    // The RMS norms' epsilon defaults to the layer norms'.
    saved_rules: &[(
        "attention.layer_norm_rms_epsilon",
        Rule::Held(|f| Value::F32(f.hp.rms_eps)),
    )],
    memory: Memory::Hybrid,
    rollback: true,
    ..Facts::BASE
};

pub const NEMOTRON_H: NemotronH = NemotronH(Facts {
    name: "nemotron_h",
    about: "A hybrid: Mamba-2, attention and squared-ReLU FFN layers.",
    ..NEMOTRON
});
pub const NEMOTRON_H_MOE: NemotronH = NemotronH(Facts {
    name: "nemotron_h_moe",
    about: "Nemotron-H's layers with squared-ReLU experts, optionally in a latent width, beside a shared expert.",
    ..NEMOTRON
});

impl ArchSpec for NemotronH {
    fn facts(&self) -> &Facts {
        &self.0
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)?;
        if self.0.name == "nemotron_h_moe" && hp.n_layer == 52 {
            hp.size_label = "31B.A3.5B";
        }
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        nemotron_h(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp)
    }
}

/// Nemotron-H's (and Nemotron-H MoE's): each layer one of a Mamba-2 mixer, attention (where the
/// layer has no FFN width), or an ungated FFN with biases; in a model with experts, squared-ReLU
/// experts with the router's selection bias, the latent projections around them (made without a
/// file, of the model's width when it has no latent one) and a shared expert.
fn nemotron_h(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let block = if hp.is_recurrent(il) {
            MAMBA2
        } else if hp.n_ff[il] == 0 {
            "QKV attn_output.weight attn_output.bias"
        } else if hp.n_expert > 0 {
            "ffn_gate_inp.weight exp_probs_b.bias ffn_latent_down.weight ffn_latent_up.weight ffn_down_exps.weight \
             ffn_up_exps.weight ffn_down_shexp.weight ffn_up_shexp.weight"
        } else {
            "ffn_down.weight ffn_up.weight ffn_down.bias ffn_up.bias"
        };
        format!("attn_norm.weight {block}")
    })
}

fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    // Its RMS norms' epsilon, else the layer norms' (which llama.cpp requires).
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
    mamba::load_mamba2(meta, hp)?;
    hp.n_ff_shexp = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
    hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
    hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
    hp.moe_latent_size = meta.u32_opt(&hp.key("moe_latent_size"))?.unwrap_or(0);
    if hp.n_expert > 0 && hp.n_expert_used == 0 {
        return Err(Error::model("nemotron_h: experts without expert_used_count"));
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

fn tensors(hp: &HParams) -> Vec<TensorSpec> {
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
        } else if hp.n_expert > 0 {
            // Experts work in the latent width when the file projects down to one.
            let (n, m) = (hp.n_expert, if hp.moe_latent_size > 0 { hp.moe_latent_size } else { e });
            let x = if hp.n_ff_exp > 0 {
                hp.n_ff_exp
            } else {
                hp.n_ff[il] / hp.n_expert_used
            };
            let sh = hp.n_ff_shexp;
            specs.push(TensorSpec::matmul(b("ffn_gate_inp.weight"), &[e, n], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[n], true));
            specs.push(TensorSpec::matmul(b("ffn_latent_down.weight"), &[e, m], false));
            specs.push(TensorSpec::matmul(b("ffn_latent_up.weight"), &[m, e], false));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[m, x, n], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, m, n], true));
            specs.push(TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, sh], true));
            specs.push(TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], true));
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

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &["ffn_latent_down", "ffn_latent_up"];

impl Decoder for NemotronH {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b)
    }
}

/// The experts' FFN: squared-ReLU experts on the (latent) input beside the shared expert.
fn experts_ffn(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let latent = match b.layer_weight_opt(il, "ffn_latent_down.weight") {
        Some(w) => b.linear(w, None, cur)?,
        None => cur,
    };
    let moe = Moe {
        gating: Gating::Sigmoid,
        normalize: b.hp.expert_weights_norm,
        act: ExpertAct::ReluSqr,
        scaled: true,
        // llama.cpp passes the layer's own count here, so a warm-up picks as usual.
        warmup_all: false,
        ..Moe::BASE
    };
    let mut out = b.moe_ffn_routed(il, latent, cur, moe)?;
    if let Some(w) = b.layer_weight_opt(il, "ffn_latent_up.weight") {
        out = b.linear(w, None, out)?;
    }
    let shared = b.relu_sqr_ffn_named(il, cur, "_shexp", crate::graph::RELU_SQR_FFN)?;
    let shared = b.name(shared, "ffn_shexp", Some(il));
    b.add(out, shared)
}

fn decoder(b: &mut Builder) -> Result<Option<TensorRef>> {
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
            // The control vector joins an FFN layer's output before its residual (llama.cpp's).
            let ffn = match hp.n_expert > 0 {
                true => experts_ffn(b, il, cur)?,
                false => b.relu_sqr_ffn(il, cur)?,
            };
            let ffn = b.name(ffn, "ffn_out", Some(il));
            b.layer_out(ffn, il)?
        };
        let (cur, residual) = b.last_layer_rows(il, cur, x)?;
        let out = b.add(cur, residual)?;
        x = b.name(out, "nemotron_h_block_out", Some(il));
    }
    b.output_head(x).map(Some)
}
