//! Qwen3.5: a hybrid of gated delta net layers (linear attention with a per-head [S, S] state,
//! `graph/ssm.rs`) and full attention layers every few layers (a query with an output gate from
//! one doubled projection, per-head query and key norms, interleaved multi-dimensional rope);
//! each layer's output passes a post-attention norm into a gated FFN. Rows are selected for the
//! outputs only after the final norm, as llama.cpp does here. Qwen3.5-MoE (`qwen35moe`): the FFNs
//! are softmax-routed experts beside a shared expert scaled by its own sigmoid gate. Qwen3-Next
//! (`qwen3next`): Qwen3.5-MoE's forerunner, with NeoX rotation, unscaled delta-net projections
//! and β and α from one projection (`graph::DeltaNet`).

use super::created::{layered, GATED, HEAD, SHARED_GUD};
use super::{attention_tensors, head_tensors, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, DeltaNet, Ffn, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_IMROPE, ROPE_NEOX};

/// One of the family: its name, rotation, delta-net flavour, whether its FFNs are experts,
/// whether llama.cpp keeps rollback snapshots for it, and llama.cpp's size labels.
pub struct Qwen35 {
    facts: Facts,
    style: DeltaNet,
    experts: bool,
    size: fn(&HParams) -> &'static str,
}

/// Qwen3.5 (interleaved M-RoPE).
/// Qwen3.5's delta net: scaled projections, β and α apart.
const QWEN35_NET: DeltaNet = DeltaNet {
    fused_beta_alpha: false,
    sigmoid_gate: false,
};
/// Qwen3-Next's: β and α in one plain projection.
const QWEN3_NEXT_NET: DeltaNet = DeltaNet {
    fused_beta_alpha: true,
    sigmoid_gate: false,
};

/// What every member reads: its recurrent layers' pattern, state-space sizes and norms' epsilon.
const READS_DELTA_NET: &[&str] = &["attention.recurrent_layers", "ssm.group_count"];
/// The experts' and the shared expert's widths.
const READS_EXPERTS: &[&str] = &["expert_feed_forward_length", "expert_shared_feed_forward_length"];
/// M-RoPE's sections.
const READS_SECTIONS: &[&str] = &["rope.dimension_sections"];

pub const QWEN35: Qwen35 = Qwen35 {
    facts: Facts {
        name: "qwen35",
        about: "Qwen3.5: gated delta net layers beside gated full attention with interleaved M-RoPE.",
        rope_type: ROPE_IMROPE,
        read_keys: &[READS_DELTA_NET, super::READS_SSM, super::READS_RMS_EPS, READS_SECTIONS],
        rollback: true,
        layer_members: &[("ssm_dt.bias", "ssm_dt")],
        memory: Memory::Hybrid,
        ..Facts::BASE
    },
    style: QWEN35_NET,
    experts: false,
    size: |hp| match hp.n_layer {
        24 if hp.n_embd == 1024 => "0.8B",
        24 => "2B",
        32 if hp.n_embd == 2560 => "4B",
        32 => "9B",
        64 => "27B",
        _ => "?B",
    },
};

pub const QWEN35_MOE: Qwen35 = Qwen35 {
    facts: Facts {
        name: "qwen35moe",
        about: "Qwen3.5's layers with softmax-routed experts, fused or separate gate and up stacks, beside a gated \
            shared expert.",
        read_keys: &[
            READS_DELTA_NET,
            super::READS_SSM,
            super::READS_RMS_EPS,
            READS_SECTIONS,
            READS_EXPERTS,
        ],
        ..QWEN35.facts
    },
    style: QWEN35_NET,
    experts: true,
    size: |hp| match hp.n_layer {
        40 => "35B.A3B",
        48 => "122B.A10B",
        60 => "397B.A17B",
        _ => "?B",
    },
};

/// Qwen3-Next (NeoX rotation; llama.cpp keeps no rollback snapshots for it).
pub const QWEN3_NEXT: Qwen35 = Qwen35 {
    facts: Facts {
        name: "qwen3next",
        about: "Qwen3.5's forerunner: NeoX rotation, unscaled projections, β and α from one projection.",
        rope_type: ROPE_NEOX,
        read_keys: &[READS_DELTA_NET, super::READS_SSM, super::READS_RMS_EPS, READS_EXPERTS],
        rollback: false,
        ..QWEN35.facts
    },
    style: QWEN3_NEXT_NET,
    experts: true,
    size: |hp| if hp.n_layer == 48 { "80B.A3B" } else { "?B" },
};

impl ArchSpec for Qwen35 {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        if hp.n_expert > 0 && !self.experts {
            return Err(Error::model(format!("{} has no experts", self.facts.name)));
        }
        load_hparams(meta, hp)?;
        if self.experts {
            load_experts(meta, hp)?;
        }
        hp.size_label = (self.size)(hp);
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp, self.style)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen35(hp, self.style == QWEN3_NEXT_NET)
    }
}

/// Qwen3.5's (and Qwen3.5 MoE's, Qwen3-Next's): both norms, then a gated delta-net mixer (fused
/// projection, gate, convolution, step bias, decay, beta and alpha projections, norm, output;
/// Qwen3-Next's with its older interleaved projection first and beta and alpha fused) or
/// attention with query and key norms; the gated FFN, or experts with gate and up fused (made
/// fused without a file) and a gated shared expert.
fn qwen35(hp: &HParams, next: bool) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match (hp.is_recurrent(il), next) {
            (true, false) => {
                "attn_qkv.weight attn_gate.weight ssm_conv1d.weight ssm_dt.bias ssm_a ssm_beta.weight \
                     ssm_alpha.weight ssm_norm.weight ssm_out.weight"
            }
            (true, true) => {
                "ssm_in.weight attn_qkv.weight attn_gate.weight ssm_conv1d.weight ssm_dt.bias ssm_a \
                     ssm_ba.weight ssm_norm.weight ssm_out.weight"
            }
            (false, _) => "QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight",
        };
        let ffn = match hp.n_expert {
            0 => GATED.to_string(),
            _ => format!(
                "ffn_gate_inp.weight ffn_down_exps.weight ffn_gate_up_exps.weight ffn_gate_inp_shexp.weight {SHARED_GUD}"
            ),
        };
        format!("attn_norm.weight post_attention_norm.weight {mixer} {ffn}")
    })
}

/// The experts' keys (required: these architectures have no dense FFN).
pub(super) fn load_experts(meta: &Meta, hp: &mut HParams) -> Result<()> {
    if hp.n_expert == 0 || hp.n_expert_used == 0 {
        return Err(Error::model(format!(
            "{} needs expert_count and expert_used_count",
            hp.arch_name
        )));
    }
    if hp.n_ff_exp == 0 {
        hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
    }
    hp.n_ff_shexp = meta
        .u32_opt(&hp.key("expert_shared_feed_forward_length"))?
        .unwrap_or(hp.n_ff[0]);
    hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
    Ok(())
}

fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    if hp.n_pos_per_embd() > 1 {
        super::load_rope_sections(meta, hp)?;
    }
    mamba::load_ssm(meta, hp, true)?;
    let n = hp.n_layer as usize;
    hp.recurrent_layers = match meta.bool_per_layer(&hp.key("attention.recurrent_layers"), n)? {
        Some(r) => r,
        None => {
            let interval = meta.u32_opt(&hp.key("full_attention_interval"))?.unwrap_or(4).max(1) as usize;
            (0..n).map(|il| (il + 1) % interval != 0).collect()
        }
    };
    hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
    hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
    if hp.n_embd_head_k != hp.n_embd_head_v {
        return Err(Error::model("qwen35 needs equal key and value head sizes"));
    }
    Ok(())
}

fn tensors(hp: &HParams, style: DeltaNet) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    head_tensors(hp, &mut specs);
    let e = hp.n_embd;
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
        specs.push(TensorSpec::new(b("post_attention_norm.weight"), &[e], true));
        if hp.is_recurrent(il) {
            delta_net_tensors(hp, il, style, &mut specs);
        } else {
            // The query projection is doubled: each head's query, then its output gate.
            let mut attn = Vec::new();
            attention_tensors(hp, il, &mut attn);
            let q = hp.n_embd_head_k * hp.n_head[il];
            for s in attn.iter_mut() {
                if s.name.ends_with("attn_q.weight") {
                    *s = TensorSpec::matmul(b("attn_q.weight"), &[e, 2 * q], true);
                } else if s.name.ends_with("attn_q.bias") {
                    *s = TensorSpec::new(b("attn_q.bias"), &[2 * q], false);
                }
            }
            // A fused projection would need the doubled query split out of it too.
            attn.retain(|s| !s.name.contains("attn_qkv"));
            specs.extend(attn);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k], true));
        }
        if hp.n_expert == 0 {
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
            continue;
        }
        expert_tensors(hp, il, &mut specs);
    }
    specs
}

/// Layer `il`'s gated delta net.
pub(super) fn delta_net_tensors(hp: &HParams, il: usize, style: DeltaNet, specs: &mut Vec<TensorSpec>) {
    let e = hp.n_embd;
    let (head, n_k, n_v, inner) = (hp.ssm_d_state, hp.ssm_n_group, hp.ssm_dt_rank, hp.ssm_d_inner);
    let conv_dim = 2 * head * n_k + inner;
    let b = |s: &str| format!("blk.{il}.{s}");
    specs.push(TensorSpec::matmul(b("attn_qkv.weight"), &[e, conv_dim], true));
    specs.push(TensorSpec::matmul(b("attn_gate.weight"), &[e, inner], true));
    specs.push(TensorSpec::new(
        b("ssm_conv1d.weight"),
        &[hp.ssm_d_conv, conv_dim],
        true,
    ));
    specs.push(TensorSpec::new(b("ssm_dt.bias"), &[n_v], true));
    specs.push(TensorSpec::new(b("ssm_a"), &[n_v], true));
    if style == QWEN3_NEXT_NET {
        specs.push(TensorSpec::matmul(b("ssm_ba.weight"), &[e, 2 * n_v], true));
        // The older files' interleaved q, k, v, z projection, which llama.cpp loads and
        // leaves unused once the split projections are there.
        specs.push(TensorSpec::matmul(b("ssm_in.weight"), &[e, conv_dim + inner], false));
    } else {
        specs.push(TensorSpec::matmul(b("ssm_beta.weight"), &[e, n_v], true));
        specs.push(TensorSpec::matmul(b("ssm_alpha.weight"), &[e, n_v], true));
    }
    specs.push(TensorSpec::new(b("ssm_norm.weight"), &[inner / n_v], true));
    specs.push(TensorSpec::matmul(b("ssm_out.weight"), &[inner, e], true));
}

/// Layer `il`'s softmax-routed experts (gate and up fused or apart) and gated shared expert.
pub(super) fn expert_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let (e, n, x) = (hp.n_embd, hp.n_expert, hp.n_ff_exp);
    let b = |s: &str| format!("blk.{il}.{s}");
    specs.push(TensorSpec::matmul(b("ffn_gate_inp.weight"), &[e, n], true));
    specs.extend(super::gate_up_exps(hp, il));
    specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, n], true));
    specs.push(TensorSpec::new(b("ffn_gate_inp_shexp.weight"), &[e], true));
    super::shared_expert_tensors(hp, il, specs);
}

impl Decoder for Qwen35 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b, self.style)
    }
}

/// The experts (softmax routing, weights normalised) plus the shared expert times the sigmoid of
/// its gate.
pub(super) fn experts_ffn(b: &mut Builder, il: usize, x: TensorRef) -> Result<TensorRef> {
    let moe = Moe {
        normalize: true,
        scaled: true,
        ..Moe::BASE
    };
    let routed = b.moe_ffn(il, x, moe)?;
    let ffn = Ffn {
        scaled: true,
        ..Ffn::default()
    };
    let shared = b.gated_ffn_named(il, x, ffn, "_shexp")?;
    let gate_w = b.layer_weight(il, "ffn_gate_inp_shexp.weight")?;
    let gate = b.linear(gate_w, None, x)?;
    let gate = b.g.sigmoid(gate)?;
    let shared = b.g.mul(shared, gate)?;
    b.add(routed, shared)
}

fn decoder(b: &mut Builder, style: DeltaNet) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    let mut x = b.embed_tokens_as(if style == QWEN3_NEXT_NET {
        "model.embed_tokens"
    } else {
        "model.input_embed"
    })?;
    for il in 0..hp.n_layer as usize {
        let l = Some(il);
        let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let cur = if hp.is_recurrent(il) {
            b.gated_delta_layer(il, cur, style)?
        } else {
            gated_attention(b, il, cur)?
        };
        let h = b.add(cur, x)?;
        let h = b.name(h, "attn_residual", l);
        let normed = b.layer_rms_norm(il, h, "post_attention_norm.weight", "attn_post_norm")?;
        let ffn = if hp.n_expert > 0 {
            experts_ffn(b, il, normed)?
        } else {
            let ffn = Ffn {
                scaled: true,
                ..Ffn::default()
            };
            b.gated_ffn(il, normed, ffn)?
        };
        let ffn = b.name(ffn, "ffn_out", l);
        x = b.add(ffn, h)?;
        x = b.layer_out(x, il)?;
    }
    b.output_head_selecting(x).map(Some)
}

/// Full attention with an output gate: one projection gives each head's query and gate.
fn gated_attention(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let qkv = b.qkv(il, cur, false)?;
    gated_attention_of(b, il, qkv, None)
}

/// Gated attention from the doubled query projection, the keys and the values of layer `il`
/// (flat, [width, n_tokens]); `picks`, sparse attention's cells (`Builder::sparse_mask`), limit
/// what it sees.
pub(super) fn gated_attention_of(
    b: &mut Builder,
    il: usize,
    (q_full, k, v): (TensorRef, TensorRef, TensorRef),
    picks: Option<TensorRef>,
) -> Result<TensorRef> {
    let hp = b.hp;
    let (hd, nh, nkv) = (
        i64::from(hp.n_embd_head_k),
        i64::from(hp.n_head[il]),
        i64::from(hp.n_head_kv[il]),
    );
    let nt = q_full.ne()[1];
    let q_full = b.g.reshape(q_full, &[2 * hd, nh, nt])?;
    let es = crate::ggml::row_size(q_full.ggml_type(), 1);
    let stride = [2 * hd as usize * es, 2 * (hd * nh) as usize * es];
    let q = b.g.view(q_full, &[hd, nh, nt], &stride, 0)?;
    let q_norm = b.layer_weight(il, "attn_q_norm.weight")?;
    let q = b.rms_norm(q, q_norm)?;
    let k = b.g.reshape(k, &[hd, nkv, nt])?;
    let k_norm = b.layer_weight(il, "attn_k_norm.weight")?;
    let k = b.rms_norm(k, k_norm)?;
    let gate = b.g.view(q_full, &[hd, nh, nt], &stride, hd as usize * es)?;
    let gate = b.g.cont(gate)?;
    let gate = b.g.reshape(gate, &[hd * nh, nt])?;
    let v = b.g.reshape(v, &[hd, nkv, nt])?;
    let q = b.rope(q, il, None)?;
    let k = b.rope(k, il, None)?;
    let att = match picks {
        Some(picks) => {
            let mask = b.sparse_mask(picks)?;
            b.attention_masked(il, (q, k, v), hp.kq_scale(), mask)?
        }
        None => b.attention(il, q, k, v, hp.kq_scale(), false)?,
    };
    let gate = b.g.sigmoid(gate)?;
    let att = b.g.mul(att, gate)?;
    let out = b.layer_linear(il, "attn_output", att)?;
    Ok(b.name(out, "attn_output", Some(il)))
}
