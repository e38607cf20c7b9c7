//! The tensors llama.cpp's loaders create for a model made without a file
//! (`ArchSpec::created_tensors`, for `llama_model_init_from_user`), architecture by architecture, in
//! their order: every tensor a loader asks for whose shape is valid, the optional ones included
//! (without a file nothing is missing). Each list was checked against llama.cpp's calls with
//! benches/init_user_bench.c (benches/compare.sh runs it). In the lists, `QKV` stands for the
//! split attention projections and their biases (`create_tensor_qkv` without a file skips the
//! fused one), `ROPE` for the rotary factors Llama's loader picks (LongRoPE's long and short, else
//! `rope_freqs`), `ROPE_FREQS` and `ROPE_LONG_SHORT` for fixed ones: one tensor for all layers,
//! which llama.cpp makes again for every layer.

use crate::model::hparams::{HParams, RopeScaling};

pub(crate) const HEAD: &str = "token_embd.weight output_norm.weight output.weight";
/// A head whose output is the token embeddings, made again (llama.cpp's `TENSOR_DUPLICATED`).
pub(crate) const TIED_HEAD: &str = "token_embd.weight output_norm.weight token_embd.weight";

/// The attention of most decoders: norm, projections, output projection.
const ATTN: &str = "attn_norm.weight QKV attn_output.weight";
/// The gated FFN in the order most loaders make it.
const FFN: &str = "ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight";
/// Per-head key, then query norms, after the attention output.
const KQ_NORMS: &str = "attn_k_norm.weight attn_q_norm.weight";
/// Routed experts after their router.
const EXPERTS: &str = "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight";

/// `head`, then each layer's names from `layer` (under `blk.{il}.`, but the rotary factors).
pub(crate) fn layered(hp: &HParams, head: &str, layer: impl Fn(usize) -> String) -> Vec<String> {
    let mut names: Vec<String> = head.split_whitespace().map(String::from).collect();
    for il in 0..hp.n_layer as usize {
        for word in layer(il).split_whitespace() {
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
    names
}

/// Llama's loader (and Granite's, Granite MoE's, MiniCPM's, Mistral 3's, Refact's): the attention output's bias, the rotary
/// factors, the dense FFN with its biases, or experts (with shared ones where the model has them).
pub(crate) fn llama(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        let ffn = if hp.n_expert == 0 {
            "ffn_gate.weight ffn_down.weight ffn_up.weight ffn_gate.bias ffn_down.bias ffn_up.bias".to_string()
        } else if hp.n_ff_shexp > 0 {
            format!("{EXPERTS} ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight")
        } else {
            EXPERTS.to_string()
        };
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE {ffn}")
    })
}

/// LLaDA's: Llama's dense layers, the rotary factors always `rope_freqs`.
pub(crate) fn llada(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE_FREQS ffn_gate.weight ffn_down.weight ffn_up.weight ffn_gate.bias ffn_down.bias ffn_up.bias")
    })
}

/// The plain decoder (SmolLM3, Baichuan, InternLM 2, XVERSE), with `head`.
pub(crate) fn plain(hp: &HParams, head: &str) -> Vec<String> {
    layered(hp, head, |_| format!("{ATTN} {FFN}"))
}

/// [`plain`] with the usual head.
pub(crate) fn plain_head(hp: &HParams) -> Vec<String> {
    plain(hp, HEAD)
}

/// Qwen 2's (and Qwen2-VL's, Dream's): the plain decoder with an output bias.
pub(crate) fn qwen2(hp: &HParams) -> Vec<String> {
    plain(hp, &format!("{HEAD} output.bias"))
}

/// Qwen 3's (and Maincoder's, Hunyuan's dense ones): key and query norms after the attention
/// output, with `head`.
pub(crate) fn qwen3(hp: &HParams, head: &str) -> Vec<String> {
    layered(hp, head, |_| format!("{ATTN} {KQ_NORMS} {FFN}"))
}

/// [`qwen3`] with the usual head (Maincoder's, Hunyuan's dense ones).
pub(crate) fn qk_normed(hp: &HParams) -> Vec<String> {
    qwen3(hp, HEAD)
}

/// Qwen3-MoE's: Qwen 3's attention, then routed experts.
pub(crate) fn qwen3moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS}"))
}

/// Qwen2-MoE's: routed experts and a gated shared expert.
pub(crate) fn qwen2moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight {EXPERTS} ffn_gate_inp_shexp.weight ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight")
    })
}

/// EXAONE's: `rope_freqs` after the FFN norm.
pub(crate) fn exaone(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ROPE_FREQS ffn_gate.weight ffn_down.weight ffn_up.weight")
    })
}

/// Arcee's: `rope_freqs`, and an FFN without a gate.
pub(crate) fn arcee(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ROPE_FREQS ffn_down.weight ffn_up.weight")
    })
}

/// ERNIE 4.5's (dense): the attention output's bias.
pub(crate) fn ernie4_5(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} attn_output.bias {FFN}"))
}

/// Nanbeige's: `rope_freqs` before the FFN norm.
pub(crate) fn nanbeige(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ROPE_FREQS {FFN}"))
}

/// OLMoE's: whole-projection query and key norms, then routed experts.
pub(crate) fn olmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS}")
    })
}

/// Seed-OSS's: the projections first, then both norms; the FFN gate, up, down.
pub(crate) fn seed_oss(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "QKV attn_output.weight attn_norm.weight post_attention_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight".into()
    })
}

/// OLMo 2's: norms after the attention and the FFN.
pub(crate) fn olmo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight".into()
    })
}

/// Phi-3's: a fused gate and up projection, LongRoPE's factors always.
pub(crate) fn phi3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_down.weight ffn_up.weight ROPE_LONG_SHORT")
    })
}

/// Gemma's: the FFN gate, up, down.
pub(crate) fn gemma(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight")
    })
}

/// Gemma 2's: Gemma's with norms after the attention and the FFN.
pub(crate) fn gemma2(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight")
    })
}

/// Gemma 3's: Gemma 2's with key and query norms, and its own output head.
pub(crate) fn gemma3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight {KQ_NORMS} ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight")
    })
}

/// Command R's: no FFN norm; from 64 layers on, query and key norms first.
pub(crate) fn command_r(hp: &HParams) -> Vec<String> {
    let norms = if hp.n_layer >= 64 {
        "attn_q_norm.weight attn_k_norm.weight "
    } else {
        ""
    };
    layered(hp, TIED_HEAD, |_| {
        format!("attn_norm.weight {norms}QKV attn_output.weight ffn_gate.weight ffn_down.weight ffn_up.weight")
    })
}

/// Cohere 2's: Command R's without the norms.
pub(crate) fn cohere2(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("{ATTN} ffn_gate.weight ffn_down.weight ffn_up.weight")
    })
}
