//! How an architecture lists the tensors llama.cpp's loader creates for a model made without a
//! file (`ArchSpec::created_tensors`, for `llama_model_init_from_user`), and the words the lists
//! share; each architecture's list is in its own file. A list names, in the loader's order, every
//! tensor it asks for whose shape is valid, the optional ones included (without a file nothing is
//! missing); each was checked against llama.cpp's calls with benches/init_user_bench.c
//! (benches/compare.sh runs it). In the lists, `QKV` stands for the split attention projections
//! and their biases (`create_tensor_qkv` without a file skips the fused one), `ROPE` for the rotary
//! factors Llama's loader picks (LongRoPE's long and short, else `rope_freqs`), `ROPE_FREQS` and
//! `ROPE_LONG_SHORT` for fixed ones: one tensor for all layers, which llama.cpp makes again for
//! every layer.

use crate::model::hparams::{HParams, RopeScaling};

pub(crate) const HEAD: &str = "token_embd.weight output_norm.weight output.weight";
/// A head whose output is the token embeddings, made again (llama.cpp's `TENSOR_DUPLICATED`).
pub(crate) const TIED_HEAD: &str = "token_embd.weight output_norm.weight token_embd.weight";

/// The attention of most decoders: norm, projections, output projection.
pub(crate) const ATTN: &str = "attn_norm.weight QKV attn_output.weight";
/// The gated FFN in the order most loaders make it, after its norm.
pub(crate) const FFN: &str = "ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight";
/// The gated FFN's projections, and with their biases.
pub(crate) const GATED: &str = "ffn_gate.weight ffn_down.weight ffn_up.weight";
pub(crate) const GATED_BIASED: &str =
    "ffn_gate.weight ffn_down.weight ffn_up.weight ffn_gate.bias ffn_down.bias ffn_up.bias";
/// Per-head key, then query norms, after the attention output.
pub(crate) const KQ_NORMS: &str = "attn_k_norm.weight attn_q_norm.weight";
/// Routed experts after their router.
pub(crate) const EXPERTS: &str = "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight";

/// `head`, then each layer's names from `layer` (under `blk.{il}.`, but the rotary factors).
pub(crate) fn layered(hp: &HParams, head: &str, layer: impl Fn(usize) -> String) -> Vec<String> {
    let mut names: Vec<String> = head.split_whitespace().map(String::from).collect();
    for il in 0..hp.n_layer as usize {
        push_layer(hp, &mut names, il, &layer(il));
    }
    names
}

/// Block `il`'s names from `words`, the placeholders expanded.
pub(crate) fn push_layer(hp: &HParams, names: &mut Vec<String>, il: usize, words: &str) {
    for word in words.split_whitespace() {
        match word {
            "QKV" => names.extend(
                [
                    "attn_q.weight",
                    "attn_k.weight",
                    "attn_v.weight",
                    "attn_q.bias",
                    "attn_k.bias",
                    "attn_v.bias",
                ]
                .map(|s| format!("blk.{il}.{s}")),
            ),
            "ROPE" if hp.rope_scaling == RopeScaling::LongRope => {
                names.extend(["rope_factors_long.weight", "rope_factors_short.weight"].map(String::from))
            }
            "ROPE" | "ROPE_FREQS" => names.push("rope_freqs.weight".into()),
            "ROPE_LONG_SHORT" => {
                names.extend(["rope_factors_long.weight", "rope_factors_short.weight"].map(String::from))
            }
            name => names.push(format!("blk.{il}.{name}")),
        }
    }
}

/// The plain decoder (SmolLM3, Baichuan, InternLM 2, XVERSE), with `head`.
pub(crate) fn plain(hp: &HParams, head: &str) -> Vec<String> {
    layered(hp, head, |_| format!("{ATTN} {FFN}"))
}

/// [`plain`] with the usual head.
pub(crate) fn plain_head(hp: &HParams) -> Vec<String> {
    plain(hp, HEAD)
}

/// A head with a biased output norm.
pub(crate) const BIASED_HEAD: &str = "token_embd.weight output_norm.weight output_norm.bias output.weight";

/// Layer `il`'s FFN where the first `n_layer_dense_lead` layers are dense: the gated FFN there,
/// `experts` elsewhere.
pub(crate) fn dense_lead(hp: &HParams, il: usize, experts: &str) -> String {
    if il < hp.n_layer_dense_lead as usize {
        GATED.into()
    } else {
        experts.into()
    }
}

/// Shared experts in the gate, down, up order.
pub(crate) const SHARED_GDU: &str = "ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight";
/// Shared experts in the gate, up, down order.
pub(crate) const SHARED_GUD: &str = "ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight";

/// Routed experts with the router's selection bias, then shared ones (gate, down, up).
pub(crate) const BIASED_EXPERTS: &str = "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight";

/// Dense leading layers (gate, down, up), then experts with the router's selection bias and
/// shared ones where the model has them.
pub(crate) fn sparse_ffn(hp: &HParams, il: usize) -> String {
    let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
    match il < hp.n_layer_dense_lead as usize {
        true => GATED.to_string(),
        false => format!(
            "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}"
        ),
    }
}
