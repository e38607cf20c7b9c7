//! HRM-Text: a low and a high stack of `hrm.layers_per_stack` decoder layers each, run in turns
//! over the same tokens. Per high cycle, the low stack runs `hrm.l_cycles` times on the high state
//! plus the low state (starting from the learned `hrm.z_l_init`), then the high stack once on the
//! sum of the two. Every pass of a layer has a cache slot of its own (the file's block count is
//! the number of slots), while the weights are the first pass's: blocks `0..lps` hold the low
//! stack, `lps..2·lps` the high one. Layers are weightless RMS norms, NeoX-rotated attention with
//! a full-width sigmoid gate before the output projection, a SwiGLU FFN; each stack ends in a
//! weightless RMS norm, the last of which feeds the head.
//!
//! The optional per-tensor scales of the projections are read per slot (`blk.{slot}.*.scale`),
//! as llama.cpp reads them, so passes of one layer may scale apart; the FFN's and the gate's are
//! left out, as llama.cpp's graph leaves them.

use super::created::{push_layer, GATED};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct HrmText;

impl ArchSpec for HrmText {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "hrm_text",
            about: "HRM-Text: a low and a high stack run in cycles, a cache slot per pass over shared weights, gated \
                attention.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "embedding_scale",
                    "hrm.layers_per_stack",
                    "hrm.h_cycles",
                    "hrm.l_cycles",
                    "hrm.prefix_lm",
                ],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(0.0);
        super::check_equal_head_sizes(hp)?;
        let lps = meta.u32(&hp.key("hrm.layers_per_stack"))?;
        let h = meta.u32(&hp.key("hrm.h_cycles"))?;
        let l = meta.u32(&hp.key("hrm.l_cycles"))?;
        let slots = u64::from(lps) * u64::from(h) * (u64::from(l) + 1);
        if lps == 0 || h == 0 || l == 0 || slots != u64::from(hp.n_layer) {
            return Err(Error::model(format!(
                "hrm_text: {lps} layers per stack, {h} high and {l} low cycles do not make the {} cache slots of block_count",
                hp.n_layer
            )));
        }
        hp.hrm = [lps, h, l];
        hp.size_label = if hp.n_embd == 1536 { "1B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        hrm_text(hp)
    }

    fn weights_of_layer(&self, hp: &HParams, il: usize) -> usize {
        let [lps, _, l_cycles] = hp.hrm.map(|n| n as usize);
        let high = (il / lps) % (l_cycles + 1) == l_cycles;
        if high {
            lps + il % lps
        } else {
            il % lps
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::matmul("output.weight", &[e, v], false),
            TensorSpec::new("hrm.z_l_init", &[e], true),
        ];
        for bid in 0..2 * hp.hrm[0] as usize {
            let ff = hp.n_ff[bid];
            let (q, kv) = (hp.n_embd_head_k * hp.n_head[bid], hp.n_embd_head_k * hp.n_head_kv[bid]);
            let b = |s: &str| format!("blk.{bid}.{s}");
            for (name, width) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
                specs.push(TensorSpec::matmul(b(&format!("{name}.weight")), &[e, width], true));
                specs.push(TensorSpec::new(b(&format!("{name}.bias")), &[width], false));
            }
            specs.extend([
                TensorSpec::matmul(b("attn_output.weight"), &[q, e], true),
                TensorSpec::matmul(b("attn_gate.weight"), &[e, hp.n_embd_head_k * hp.n_head[bid]], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
        }
        // llama.cpp reads optional per-tensor scales under every slot's name (see above).
        let matrices = [
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "attn_gate",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ];
        for slot in 2 * hp.hrm[0] as usize..hp.n_layer as usize {
            for m in matrices {
                for suffix in ["scale", "input_scale"] {
                    specs.push(TensorSpec::new(format!("blk.{slot}.{m}.{suffix}"), &[1], false));
                }
            }
        }
        specs
    }
}

/// HRM-Text's: no output norm, the low stack's initial state; the blocks of the low stack, then
/// the high stack's (the cycles run them again: no tensors of their own but their scales, which
/// the model layer adds per layer).
fn hrm_text(hp: &HParams) -> Vec<String> {
    let mut names: Vec<String> = ["token_embd.weight", "output.weight", "hrm.z_l_init"]
        .map(String::from)
        .into();
    for bid in 0..2 * hp.hrm[0] as usize {
        push_layer(
            hp,
            &mut names,
            bid,
            &format!("QKV attn_gate.weight attn_output.weight {GATED}"),
        );
    }
    names
}

impl Decoder for HrmText {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let [lps, h_cycles, l_cycles] = hp.hrm.map(|n| n as usize);
        let mut z_h = b.embed_tokens()?;
        let mut z_l = b.weight("hrm.z_l_init")?;
        for h in 0..h_cycles {
            for l in 0..=l_cycles {
                let slot_base = (h * (l_cycles + 1) + l) * lps;
                let high = l == l_cycles;
                let input = b.add(z_h, z_l)?;
                let out = stack(b, input, slot_base, if high { lps } else { 0 })?;
                if high {
                    z_h = out;
                } else {
                    z_l = out;
                }
            }
        }
        let x = b.select_outputs(z_h)?;
        let logits = b.output_projection(x, None)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// One pass of a stack over `x`: its `lps` layers in cache slots from `slot_base`, with the
/// weights of blocks from `block_base`, then the stack's weightless norm.
fn stack(b: &mut Builder, mut x: TensorRef, slot_base: usize, block_base: usize) -> Result<TensorRef> {
    let hp = b.hp;
    let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
    for il in 0..hp.hrm[0] as usize {
        let (slot, bid) = (slot_base + il, block_base + il);
        let l = Some(slot);
        let cur = b.g.rms_norm(x, hp.rms_eps)?;
        let cur = b.name(cur, "attn_norm", l);
        let gate = b.layer_matmul(bid, "attn_gate.weight", cur)?;
        let [q, k, v] = ["attn_q", "attn_k", "attn_v"].map(|name| projection(b, bid, slot, name, cur));
        let (head, n_head, n_head_kv) = (hp.n_embd_head_k, hp.n_head[bid], hp.n_head_kv[bid]);
        let q = b.heads(q?, head, n_head)?;
        let k = b.heads(k?, head, n_head_kv)?;
        let v = b.heads(v?, head, n_head_kv)?;
        let q = b.rope(q, slot, None)?;
        let k = b.rope(k, slot, None)?;
        let att = b.attention(slot, q, k, v, kq_scale, false)?;
        let gate = b.g.sigmoid(gate)?;
        let gated = b.gate_heads(slot, att, gate)?;
        let att = projection(b, bid, slot, "attn_output", gated)?;
        let h = b.add(att, x)?;
        let h = b.name(h, "attn_add", l);
        let cur = b.g.rms_norm(h, hp.rms_eps)?;
        let cur = b.name(cur, "ffn_norm", l);
        let ffn = b.gated_ffn(bid, cur, Ffn::default())?;
        x = b.add(ffn, h)?;
        x = b.layer_out(x, slot)?;
    }
    let out = b.g.rms_norm(x, hp.rms_eps)?;
    Ok(b.name(out, "stack_norm", Some(slot_base)))
}

/// Block `bid`'s projection `name` of `x`, times slot `slot`'s scale where the file has one, with
/// the LoRA adapters' parts, plus the block's bias where it has one.
fn projection(b: &mut Builder, bid: usize, slot: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.layer_weight(bid, &format!("{name}.weight"))?;
    let mut y = b.g.mul_mat(w, x)?;
    if let Some(s) = b.layer_weight_opt(slot, &format!("{name}.scale")) {
        y = b.g.mul(y, s)?;
    }
    // The adapters' parts join after the scale, as in llama.cpp's `build_lora_mm`.
    y = b.add_lora(w, x, y, None)?;
    if let Some(bias) = b.layer_weight_opt(bid, &format!("{name}.bias")) {
        y = b.add(y, bias)?;
    }
    Ok(y)
}
