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
/// The gated FFN in the order most loaders make it, after its norm.
const FFN: &str = "ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight";
/// The gated FFN's projections, and with their biases.
const GATED: &str = "ffn_gate.weight ffn_down.weight ffn_up.weight";
const GATED_BIASED: &str = "ffn_gate.weight ffn_down.weight ffn_up.weight ffn_gate.bias ffn_down.bias ffn_up.bias";
/// Per-head key, then query norms, after the attention output.
const KQ_NORMS: &str = "attn_k_norm.weight attn_q_norm.weight";
/// Routed experts after their router.
const EXPERTS: &str = "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight";

/// `head`, then each layer's names from `layer` (under `blk.{il}.`, but the rotary factors).
pub(crate) fn layered(hp: &HParams, head: &str, layer: impl Fn(usize) -> String) -> Vec<String> {
    let mut names: Vec<String> = head.split_whitespace().map(String::from).collect();
    for il in 0..hp.n_layer as usize {
        push_layer(hp, &mut names, il, &layer(il));
    }
    names
}

/// Block `il`'s names from `words`, the placeholders expanded.
fn push_layer(hp: &HParams, names: &mut Vec<String>, il: usize, words: &str) {
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

/// Llama's loader (and Granite's, Granite MoE's, MiniCPM's, Mistral 3's, Refact's): the attention output's bias, the rotary
/// factors, the dense FFN with its biases, or experts (with shared ones where the model has them).
pub(crate) fn llama(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        let ffn = if hp.n_expert == 0 {
            GATED_BIASED.to_string()
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
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE_FREQS {GATED_BIASED}")
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

/// Qwen3-MoE's (and Mellum's): Qwen 3's attention, then routed experts.
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
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight ROPE_FREQS {GATED}"))
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
        format!("attn_norm.weight {norms}QKV attn_output.weight {GATED}")
    })
}

/// Cohere 2's: Command R's without the norms.
pub(crate) fn cohere2(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| format!("{ATTN} {GATED}"))
}

/// GPT-2's layer (StarCoder's, Bloom's, GPT-NeoX's): layer norms with biases, the fused attention
/// projection, an ungated FFN, every bias.
const GPT2_LAYER: &str = "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias";
/// A head with a biased output norm.
const BIASED_HEAD: &str = "token_embd.weight output_norm.weight output_norm.bias output.weight";

/// GPT-2's and StarCoder's: learned positions.
pub(crate) fn gpt2(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight position_embd.weight output_norm.weight output_norm.bias output.weight",
        |_| GPT2_LAYER.into(),
    )
}

/// Bloom's: a norm of the token embeddings.
pub(crate) fn bloom(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight token_embd_norm.weight token_embd_norm.bias output_norm.weight output_norm.bias output.weight",
        |_| GPT2_LAYER.into(),
    )
}

/// GPT-NeoX's.
pub(crate) fn gptneox(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| GPT2_LAYER.into())
}

/// MPT's: GPT-2's with optional biases (all made without a file), a key norm and the FFN's
/// activation scales.
pub(crate) fn mpt(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight position_embd.weight output_norm.weight output_norm.bias output.weight",
        |_| format!("{GPT2_LAYER} attn_k_norm.weight attn_k_norm.bias ffn.act.scales"),
    )
}

/// CodeShell's: split projections.
pub(crate) fn codeshell(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// StarCoder 2's (and Nemotron's): CodeShell's, the FFN's biases last.
pub(crate) fn starcoder2(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_up.weight ffn_down.bias ffn_up.bias".into()
    })
}

/// JAIS's: GPT-2's attention, a gated FFN with biases.
pub(crate) fn jais(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_gate.weight ffn_gate.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// JAIS 2's: split projections, the FFN up before down.
pub(crate) fn jais2(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_up.weight ffn_up.bias ffn_down.weight ffn_down.bias".into()
    })
}

/// Orion's: biased norms, a gated FFN without biases.
pub(crate) fn orion(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        format!("attn_norm.weight attn_norm.bias QKV attn_output.weight ffn_norm.weight ffn_norm.bias {GATED}")
    })
}

/// StableLM's: the output norm's bias first; optional per-head query and key norms.
pub(crate) fn stablelm(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight output_norm.bias output_norm.weight output.weight",
        |_| {
            format!("attn_norm.weight attn_norm.bias QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight ffn_norm.bias {GATED}")
        },
    )
}

/// Phi-2's: an output bias, no FFN norm (attention and FFN in parallel).
pub(crate) fn phi2(hp: &HParams) -> Vec<String> {
    layered(hp, &format!("{BIASED_HEAD} output.bias"), |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// Falcon's: a second attention norm, the fused projection without biases.
pub(crate) fn falcon(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias attn_norm_2.weight attn_norm_2.bias attn_qkv.weight attn_output.weight ffn_down.weight ffn_up.weight".into()
    })
}

/// Layer `il`'s FFN where the first `n_layer_dense_lead` layers are dense: the gated FFN there,
/// `experts` elsewhere.
fn dense_lead(hp: &HParams, il: usize, experts: &str) -> String {
    if il < hp.n_layer_dense_lead as usize {
        GATED.into()
    } else {
        experts.into()
    }
}

/// Shared experts in the gate, down, up order.
const SHARED_GDU: &str = "ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight";
/// Shared experts in the gate, up, down order.
const SHARED_GUD: &str = "ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight";

/// DeepSeek's (the first): dense leading layers, then routed and shared experts.
pub(crate) fn deepseek(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "{ATTN} ffn_norm.weight {}",
            dense_lead(hp, il, &format!("{EXPERTS} {SHARED_GDU}"))
        )
    })
}

/// dots.llm1's: DeepSeek's with key and query norms and the router's selection bias.
pub(crate) fn dots1(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}");
        format!("{ATTN} {KQ_NORMS} ffn_norm.weight {}", dense_lead(hp, il, &experts))
    })
}

/// Ling's (`bailingmoe`): every layer routed and shared experts.
pub(crate) fn bailingmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight {EXPERTS} {SHARED_GDU}"))
}

/// Arctic's: a dense FFN beside the experts, which have their own norm.
pub(crate) fn arctic(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {FFN} ffn_gate_inp.weight ffn_norm_exps.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight")
    })
}

/// DBRX's: the fused projection, a norm after the attention output, experts only.
pub(crate) fn dbrx(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_output.weight attn_output_norm.weight {EXPERTS}")
    })
}

/// Grok's: a dense FFN and experts, norms after the attention output and the layer.
pub(crate) fn grok(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output_norm.weight {FFN} {EXPERTS} layer_output_norm.weight")
    })
}

/// SmallThinker's: routed experts only.
pub(crate) fn smallthinker(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight {EXPERTS}"))
}

/// PhiMoE's: biased norms and output, experts, LongRoPE's factors always.
pub(crate) fn phimoe(hp: &HParams) -> Vec<String> {
    layered(hp, &format!("{BIASED_HEAD} output.bias"), |_| {
        format!("attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias {EXPERTS} ROPE_LONG_SHORT")
    })
}

/// Hunyuan MoE's: Qwen 3's attention, routed and shared experts.
pub(crate) fn hunyuan_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS} {SHARED_GUD}")
    })
}

/// ERNIE 4.5 MoE's: ERNIE 4.5's attention, dense leading layers, then experts with the router's
/// selection bias (and shared ones where the model has them).
pub(crate) fn ernie4_5_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}");
        format!(
            "{ATTN} attn_output.bias ffn_norm.weight {}",
            dense_lead(hp, il, &experts)
        )
    })
}

/// Deci's: per layer, attention with projections, a linear replacement (norm and output only)
/// or none, and an FFN or none.
pub(crate) fn deci(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let attn = match (hp.n_head[il], hp.n_head_kv[il]) {
            (h, 0) if h > 0 => "attn_norm.weight attn_output.weight",
            (_, 0) => "",
            _ => ATTN,
        };
        let (norm, ffn) = if hp.n_ff[il] > 0 {
            ("ffn_norm.weight", GATED)
        } else {
            ("", "")
        };
        format!("{attn} attn_output.bias {norm} ROPE {ffn} ffn_gate.bias ffn_down.bias ffn_up.bias")
    })
}

/// Talkie's: no norm weights but a per-head query scale and a scale on each layer's output.
pub(crate) fn talkie(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight", |_| {
        "QKV attn_output.weight attn_q_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight layer_output_scale.weight".into()
    })
}

/// Qwen's (the first): the fused projection with its bias.
pub(crate) fn qwen(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_qkv.bias attn_output.weight ffn_norm.weight {GATED}")
    })
}

/// EXAONE 4's: `rope_freqs` after the attention output, norms after the attention and the FFN.
pub(crate) fn exaone4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("QKV attn_output.weight ROPE_FREQS post_attention_norm.weight attn_q_norm.weight attn_k_norm.weight {GATED} post_ffw_norm.weight")
    })
}

/// OLMo's (the first): no norm weights at all.
pub(crate) fn olmo(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight", |_| {
        format!("QKV attn_output.weight {GATED}")
    })
}

/// PLaMo's: one norm per layer (attention and FFN in parallel).
pub(crate) fn plamo(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} {GATED}"))
}

/// ChatGLM's: a fused gate and up projection.
pub(crate) fn chatglm(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_up.weight ffn_down.weight")
    })
}

/// GLM-4's: ChatGLM's with norms after the attention and the FFN.
pub(crate) fn glm4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight ffn_norm.weight ffn_down.weight ffn_up.weight post_ffw_norm.weight")
    })
}

/// Llama 4's: `rope_freqs`, experts (with a shared one) every `interleave_moe_layer_step` layers.
pub(crate) fn llama4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = if super::llama4::is_moe_layer(hp, il) {
            format!("{EXPERTS} {SHARED_GDU}")
        } else {
            GATED.into()
        };
        format!("{ATTN} ffn_norm.weight ROPE_FREQS {ffn}")
    })
}

/// GLM-4.5's: query and key norms, a norm after the attention, dense leading layers, then
/// experts with the router's selection bias and shared ones.
pub(crate) fn glm4moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}");
        format!(
            "{ATTN} attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight {}",
            dense_lead(hp, il, &experts)
        )
    })
}

/// Mamba's layer.
const MAMBA: &str =
    "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_x.weight ssm_dt.weight ssm_dt.bias ssm_a ssm_d ssm_out.weight";
/// Mamba-2's layer.
const MAMBA2: &str =
    "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_dt.bias ssm_a ssm_d ssm_norm.weight ssm_out.weight";

/// Mamba's.
pub(crate) fn mamba(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("attn_norm.weight {MAMBA}"))
}

/// Mamba-2's.
pub(crate) fn mamba2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("attn_norm.weight {MAMBA2}"))
}

/// Jamba's: Mamba layers with norms of dt, B and C, or attention layers; experts in every layer
/// when the model has experts (without a file, every router is made).
pub(crate) fn jamba(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_x.weight ssm_dt_norm.weight ssm_dt.weight ssm_dt.bias ssm_b_norm.weight ssm_c_norm.weight ssm_a ssm_d ssm_out.weight"
        } else {
            "QKV attn_output.weight"
        };
        let ffn = if hp.n_expert > 0 { EXPERTS } else { GATED };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

/// Granite 4's hybrid: Mamba-2 layers or attention layers with an output bias, then Granite's FFN
/// (with `rope_freqs`): experts (and a shared one) or a dense FFN with biases.
pub(crate) fn granite_hybrid(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            MAMBA2
        } else {
            "QKV attn_output.weight attn_output.bias"
        };
        let ffn = if hp.n_expert == 0 {
            GATED_BIASED.to_string()
        } else if hp.n_ff_shexp > 0 {
            format!("{EXPERTS} {SHARED_GUD}")
        } else {
            EXPERTS.to_string()
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight ROPE_FREQS {ffn}")
    })
}

/// OpenELM's: the fused projection, then query and key norms; the head tied.
pub(crate) fn openelm(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight {FFN}")
    })
}

/// PanGu Embedded's: Llama's dense layers without the FFN's biases.
pub(crate) fn pangu_embed(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE {GATED}")
    })
}

/// LLaDA-MoE's (and Maple's): query, then key norms, routed experts.
pub(crate) fn llada_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS}")
    })
}

/// MiniMax-M2's: the projections first, whole-projection query and key norms, experts with the
/// router's selection bias last.
pub(crate) fn minimax_m2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("QKV attn_output.weight attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS} exp_probs_b.bias")
    })
}

/// Routed experts with the router's selection bias, then shared ones (gate, down, up).
const BIASED_EXPERTS: &str = "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight";

/// EXAONE MoE's: the projections, `rope_freqs`, then the norms; dense leading layers.
pub(crate) fn exaone_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "QKV attn_output.weight ROPE_FREQS attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {}",
            dense_lead(hp, il, BIASED_EXPERTS)
        )
    })
}

/// Ling 2's (`bailingmoe2`): the fused projection, query and key norms, dense leading layers.
pub(crate) fn bailingmoe2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "attn_norm.weight attn_qkv.weight attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {}",
            dense_lead(hp, il, BIASED_EXPERTS)
        )
    })
}

/// Cohere 2 MoE's: dense leading layers, then experts with fused gate and up projections (made
/// fused without a file) and shared ones where the model has them; no FFN norm.
pub(crate) fn cohere2moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight ffn_down_exps.weight ffn_gate_up_exps.weight {shared}");
        format!("{ATTN} {}", dense_lead(hp, il, &experts))
    })
}

/// DeepSeek-V2's (and V3's, Mistral 4's): latent attention (queries compressed where the model
/// has a rank for them; keys and values decompressed per head when absorbed), dense leading
/// layers, then experts with the router's selection bias, fused gate and up projections (made
/// fused without a file) and shared ones where the model has them.
pub(crate) fn deepseek2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let (q_norm, q) = if hp.n_lora_q > 0 {
            ("attn_q_a_norm.weight", "attn_q_a.weight attn_q_b.weight")
        } else {
            ("", "attn_q.weight")
        };
        let kv = if hp.kv_latent() {
            "attn_k_b.weight attn_v_b.weight"
        } else {
            "attn_kv_b.weight"
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts =
            format!("ffn_gate_inp.weight exp_probs_b.bias ffn_down_exps.weight ffn_gate_up_exps.weight {shared}");
        format!(
            "attn_norm.weight {q_norm} attn_kv_a_norm.weight {q} attn_kv_a_mqa.weight {kv} attn_output.weight ffn_norm.weight {}",
            dense_lead(hp, il, &experts)
        )
    })
}

/// gpt-oss's: a norm after the attention, attention sinks, experts with biases (the biases last).
pub(crate) fn gpt_oss(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight post_attention_norm.weight QKV attn_output.weight attn_sinks.weight {EXPERTS} attn_output.bias ffn_gate_inp.bias ffn_gate_exps.bias ffn_down_exps.bias ffn_up_exps.bias")
    })
}

/// MiniCPM3's: compressed queries, keys and values, LongRoPE's factors always.
pub(crate) fn minicpm3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight attn_kv_a_mqa.weight attn_kv_b.weight attn_output.weight {FFN} ROPE_LONG_SHORT")
    })
}

/// CogVLM's: the fused projection, and a second attention and FFN for image tokens.
pub(crate) fn cogvlm(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_output.weight vis_attn_qkv.weight vis_attn_output.weight ROPE_FREQS ffn_norm.weight {GATED} vis_gate.weight vis_down.weight vis_up.weight")
    })
}

/// Spark 2.5's: an attention gate per head, the FFN gate, up, down.
pub(crate) fn spark2_5(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "attn_norm.weight QKV attn_gate.weight attn_output.weight ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight".into()
    })
}

/// PLaMo 2's: Mamba layers (with norms of dt, B and C, named without `.weight`) or attention
/// layers with per-head norms; norms after the mixer and the fused FFN.
pub(crate) fn plamo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            "ssm_in.weight ssm_conv1d.weight ssm_x.weight ssm_dt.weight ssm_dt.bias ssm_a ssm_d ssm_out.weight ssm_dt_norm ssm_b_norm ssm_c_norm"
        } else {
            "attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight"
        };
        format!(
            "attn_norm.weight {mixer} post_attention_norm ffn_norm.weight ffn_down.weight ffn_up.weight post_ffw_norm"
        )
    })
}

/// PLaMo 3's: PLaMo 2's attention layers, the FFN's post-norm before it.
pub(crate) fn plamo3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "attn_norm.weight attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight post_attention_norm ffn_norm.weight post_ffw_norm ffn_up.weight ffn_down.weight".into()
    })
}

/// Falcon-H1's: a Mamba-2 mixer and attention side by side in every layer, then Granite's FFN.
pub(crate) fn falcon_h1(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight output_norm.weight", |_| {
        format!("{MAMBA2} QKV attn_output.weight attn_output.bias attn_norm.weight ffn_norm ROPE_FREQS {GATED_BIASED}")
    })
}

/// The attention of Muse Glimmer and AFMoE: norms before and after, query and key norms, a gate.
const GATED_ATTN: &str = "attn_norm.weight post_attention_norm.weight QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight attn_gate.weight ffn_norm.weight post_ffw_norm.weight";

/// Muse Glimmer's.
pub(crate) fn muse_glimmer(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{GATED_ATTN} {GATED}"))
}

/// AFMoE's: Muse Glimmer's attention, dense leading layers, then experts with the router's
/// selection bias and shared ones where the model has them.
pub(crate) fn afmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}");
        format!("{GATED_ATTN} {}", dense_lead(hp, il, &experts))
    })
}

/// MiMo-V2's: attention sinks; the dense FFN where the layer has a width for it, and experts in
/// every layer of a model with experts (all optional, all made without a file).
pub(crate) fn mimo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let dense = if hp.n_ff[il] > 0 { GATED } else { "" };
        let experts = if hp.n_expert > 0 {
            "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight exp_probs_b.bias"
        } else {
            ""
        };
        format!("QKV attn_output.weight attn_norm.weight attn_sinks.weight ffn_norm.weight {dense} {experts}")
    })
}

/// GroveMoE's: Qwen 3's attention, routed experts and chunked ones.
pub(crate) fn grovemoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS} ffn_gate_chexps.weight ffn_down_chexps.weight ffn_up_chexps.weight")
    })
}

/// Nemotron-H's (and Nemotron-H MoE's): each layer one of a Mamba-2 mixer, attention (where the
/// layer has no FFN width), or an ungated FFN with biases; in a model with experts, squared-ReLU
/// experts with the router's selection bias, the latent projections around them (made without a
/// file, of the model's width when it has no latent one) and a shared expert.
pub(crate) fn nemotron_h(hp: &HParams) -> Vec<String> {
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

/// BERT's (and Nomic BERT's, which has no positions or classifier but a gated FFN): embeddings,
/// token types, positions, the classifier (llama.cpp's one output at least), the embedding norm;
/// layers normed after attention and after the FFN, every bias.
pub(crate) fn bert(hp: &HParams, nomic: bool) -> Vec<String> {
    let head = match nomic {
        false => {
            "token_embd.weight token_types.weight position_embd.weight cls.weight cls.bias \
                  cls.output.weight cls.output.bias token_embd_norm.weight token_embd_norm.bias"
        }
        true => "token_embd.weight token_types.weight token_embd_norm.weight token_embd_norm.bias",
    };
    let gate = if nomic { "ffn_gate.weight" } else { "" };
    layered(hp, head, |_| {
        format!(
            "QKV attn_output.weight attn_output.bias attn_output_norm.weight attn_output_norm.bias \
             ffn_up.weight ffn_up.bias ffn_down.weight ffn_down.bias {gate} layer_output_norm.weight \
             layer_output_norm.bias"
        )
    })
}

/// Granite with sliding-window layers: Llama's attention with per-head sinks, the rotary factors,
/// then the FFN with its biases, or experts (gate and up fused: made fused without a file) with a
/// shared expert whose gate and up are one projection.
pub(crate) fn granite_swa(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        let ffn = match hp.n_expert {
            0 => GATED_BIASED.to_string(),
            _ => {
                let shared = if hp.n_ff_shexp > 0 {
                    "ffn_up_shexp.weight ffn_down_shexp.weight"
                } else {
                    ""
                };
                format!("ffn_gate_inp.weight ffn_down_exps.weight ffn_gate_up_exps.weight {shared}")
            }
        };
        format!("{ATTN} attn_output.bias attn_sinks.weight ffn_norm.weight ROPE {ffn}")
    })
}

/// PocketTTS's: the head tied, its norm with a bias; normed attention and an ungated FFN, biases
/// on the norms only.
pub(crate) fn pockettts(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight output_norm.weight output_norm.bias token_embd.weight",
        |_| {
            "attn_norm.weight attn_norm.bias QKV attn_output.weight ffn_norm.weight ffn_norm.bias ffn_down.weight \
         ffn_up.weight"
                .to_string()
        },
    )
}

/// Laguna's: attention with query and key norms and a gate (per head without a file); dense
/// layers first (gate, up, down), then experts with the router's selection bias and a shared
/// expert.
pub(crate) fn laguna(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = match il >= hp.n_layer_dense_lead as usize {
            true => {
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight \
                     ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight"
            }
            false => "ffn_gate.weight ffn_up.weight ffn_down.weight",
        };
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight attn_gate.weight ffn_norm.weight {ffn}")
    })
}

/// Qwen3.5's (and Qwen3.5 MoE's, Qwen3-Next's): both norms, then a gated delta-net mixer (fused
/// projection, gate, convolution, step bias, decay, beta and alpha projections, norm, output;
/// Qwen3-Next's with its older interleaved projection first and beta and alpha fused) or
/// attention with query and key norms; the gated FFN, or experts with gate and up fused (made
/// fused without a file) and a gated shared expert.
pub(crate) fn qwen35(hp: &HParams, next: bool) -> Vec<String> {
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

/// MiniMax-01's: lightning attention layers (a norm of the mixed heads, the fused projection, an
/// output gate) or softmax attention layers, then experts.
pub(crate) fn minimax_01(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => "attn_norm_2.weight attn_qkv.weight attn_gate.weight",
            false => "QKV",
        };
        format!("attn_norm.weight {mixer} attn_output.weight ffn_norm.weight {EXPERTS}")
    })
}

/// LFM2's (and LFM2-MoE's): the output norm (`token_embd_norm`); each layer's FFN (dense leading
/// layers, then experts with the router's selection bias) before its mixer, a short convolution
/// or attention with query and key norms; LFM2-ColBERT's projection of the embeddings last.
pub(crate) fn lfm2(hp: &HParams) -> Vec<String> {
    let mut names = layered(hp, "token_embd.weight token_embd_norm.weight output.weight", |il| {
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED,
            false => {
                "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight exp_probs_b.bias"
            }
        };
        let mixer = match hp.is_recurrent(il) {
            true => "shortconv.conv.weight shortconv.in_proj.weight shortconv.out_proj.weight",
            false => "attn_q_norm.weight attn_k_norm.weight QKV attn_output.weight",
        };
        format!("ffn_norm.weight {ffn} attn_norm.weight {mixer}")
    });
    names.extend(["dense_2.weight", "dense_2.bias"].map(String::from));
    names
}

/// A Kimi delta attention mixer: the convolutions of queries, keys and values, the projections,
/// the decay's projection(s) `f`, beta, the decay rates and bias, the output gate's `g`, the norm
/// and the output.
fn kda(f: &str, g: &str) -> String {
    format!(
        "ssm_conv1d_q.weight ssm_conv1d_k.weight ssm_conv1d_v.weight QKV {f} ssm_beta.weight ssm_a ssm_dt.bias {g} \
         ssm_norm.weight attn_output.weight"
    )
}

/// Latent attention as Kimi's loaders make it: queries compressed where the model has a rank for
/// them, keys and values decompressed per head (without a file the fused decompression is
/// skipped), then `gate` (an output gate, or nothing) and the output projection.
fn mla(hp: &HParams, gate: &str) -> String {
    let (q_norm, q) = match hp.n_lora_q > 0 {
        true => ("attn_q_a_norm.weight", "attn_q_a.weight attn_q_b.weight"),
        false => ("", "attn_q.weight"),
    };
    format!(
        "{q_norm} attn_kv_a_norm.weight {q} attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight {gate} \
         attn_output.weight"
    )
}

/// Kimi-Linear's: delta attention or latent attention layers; dense leading layers, then experts,
/// shared ones (always made without a file) and the router's selection bias.
pub(crate) fn kimi_linear(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g_a.weight ssm_g_b.weight"),
            false => mla(hp, ""),
        };
        let experts = format!("{EXPERTS} {SHARED_GDU} exp_probs_b.bias");
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED,
            false => &experts,
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

/// Ling 3's (`bailingmoe3`): delta attention layers (one projection for the decay and one for the
/// gate) or latent attention (each compression's norm after it, an output gate per head); dense
/// leading layers, then experts with the router's selection bias and shared ones (gate, up, down).
pub(crate) fn bailingmoe3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let q = match hp.n_lora_q > 0 {
            true => "attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight",
            false => "attn_q.weight",
        };
        let mixer = match hp.is_recurrent(il) {
            true => kda("ssm_f_a.weight", "ssm_g_a.weight"),
            false => format!(
                "{q} attn_kv_a_mqa.weight attn_kv_a_norm.weight attn_k_b.weight attn_v_b.weight attn_gate.weight \
                 attn_output.weight"
            ),
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GUD } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => "ffn_gate.weight ffn_up.weight ffn_down.weight".to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight {shared}"
            ),
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

/// Kimi-K3's: the residual checkpoints' scores where the model banks them (one after the head,
/// two per layer); delta attention (a full-width output gate) or latent attention with an output
/// gate; dense leading layers, then experts with the router's selection bias, the latent
/// projections and norm around them where they run in a latent space, and shared experts.
pub(crate) fn kimi_k3(hp: &HParams) -> Vec<String> {
    let banks = hp.attn_res_block_size > 0;
    let head = match banks {
        true => "token_embd.weight output_norm.weight output.weight output_res_score.weight",
        false => HEAD,
    };
    layered(hp, head, |il| {
        let scores = if banks {
            "attn_res_score.weight ffn_res_score.weight"
        } else {
            ""
        };
        let mixer = match hp.is_recurrent(il) {
            true => kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g.weight"),
            false => mla(hp, "attn_gate.weight"),
        };
        let latent = match hp.n_expert_latent > 0 {
            true => "ffn_routed_down.weight ffn_routed_up.weight ffn_routed_norm.weight",
            false => "",
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight \
                 {latent} {shared}"
            ),
        };
        format!("attn_norm.weight ffn_norm.weight {scores} {mixer} {ffn}")
    })
}

/// GLM5-Next's: the hyper-connections' mixing weights around the attention and the FFN; delta
/// attention or latent attention (queries always compressed) with its lightning indexer (made in
/// every attention layer without a file); dense leading layers, then experts with the router's
/// selection bias and shared ones.
pub(crate) fn glm5_next(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g_a.weight ssm_g_b.weight"),
            false => "attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight \
                      attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight indexer.k_norm.weight \
                      indexer.k_norm.bias indexer.proj.weight indexer.attn_k.weight indexer.attn_q_b.weight \
                      indexer_compressor_gate.weight indexer_compressor_ape.weight"
                .to_string(),
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight \
                 {shared}"
            ),
        };
        format!(
            "attn_norm.weight ffn_norm.weight hc_attn_fn.weight hc_attn_base.weight hc_attn_scale.weight \
             hc_ffn_fn.weight hc_ffn_base.weight hc_ffn_scale.weight {mixer} {ffn}"
        )
    })
}

/// The lightning indexer of DeepSeek's sparse attention: its key norm (with a bias), the heads'
/// weights, keys and queries.
const INDEXER: &str =
    "indexer.k_norm.weight indexer.k_norm.bias indexer.proj.weight indexer.attn_k.weight indexer.attn_q_b.weight";

/// DeepSeek-V3.2's and GLM 5's (`glm-dsa`): latent attention with compressed queries and keys and
/// values decompressed per head, the indexer in every layer (made without a file where it is
/// optional); dense leading layers, then experts with the router's selection bias and shared ones.
pub(crate) fn dsa(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight \
             attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight ffn_norm.weight {INDEXER} {}",
            sparse_ffn(hp, il)
        )
    })
}

/// Dense leading layers (gate, down, up), then experts with the router's selection bias and
/// shared ones where the model has them.
fn sparse_ffn(hp: &HParams, il: usize) -> String {
    let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
    match il < hp.n_layer_dense_lead as usize {
        true => GATED.to_string(),
        false => format!(
            "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}"
        ),
    }
}

/// dots.llm3's (`dots3note`): DeepSeek-V3.2's attention with a norm of the rotated key part and
/// an output gate per head, the indexer in the layers that have one.
pub(crate) fn dots3note(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let indexer = if hp.indexer.layers.get(il) == Some(&true) {
            INDEXER
        } else {
            ""
        };
        format!(
            "attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_k_norm.weight attn_q_a.weight \
             attn_q_b.weight attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight \
             attn_gate.weight ffn_norm.weight {indexer} {}",
            sparse_ffn(hp, il)
        )
    })
}

/// HY-V3's: Qwen 3's attention; every FFN tensor is optional, so without a file each layer gets
/// both a dense FFN and experts (the router's selection bias named without `.bias`, gate and up
/// fused) with shared ones, and runs the experts.
pub(crate) fn hy_v3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!(
            "attn_norm.weight QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {GATED} \
             ffn_gate_inp.weight exp_probs_b ffn_down_exps.weight ffn_gate_up_exps.weight {SHARED_GUD}"
        )
    })
}

/// MiniMax-M3's: the projections first, query and key norms; dense leading layers, then experts
/// with the router's selection bias, shared ones and the block-sparse attention's indexer.
pub(crate) fn minimax_m3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "{} indexer.q_proj.weight indexer.k_proj.weight indexer.q_norm.weight indexer.k_norm.weight",
                sparse_ffn(hp, il)
            ),
        };
        format!("QKV attn_output.weight attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {ffn}")
    })
}

/// HY-V4's: the hyper-connections' head after the output; latent attention with sinks and an
/// output gate, the indexer where the layer has one, then the hyper-connections' mixing weights;
/// dense leading layers, then experts (gate, up, down) with the router's selection bias and
/// shared ones.
pub(crate) fn hy_v4(hp: &HParams) -> Vec<String> {
    let head = "token_embd.weight output_norm.weight output.weight output_hc_fn.weight output_hc_base.weight \
                output_hc_scale.weight";
    layered(hp, head, |il| {
        let indexed = hp.indexer.top_k > 0 && hp.indexer.layers.get(il) == Some(&true);
        let indexer = match indexed {
            true => {
                "indexer.attn_q_b.weight indexer.attn_k.weight indexer.k_norm.weight indexer.k_norm.bias \
                     indexer.proj.weight"
            }
            false => "",
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight {shared}"
            ),
        };
        format!(
            "attn_norm.weight attn_sinks.weight attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight \
             attn_kv_a_mqa.weight attn_kv_a_norm.weight attn_k_b.weight attn_v_b.weight attn_output.weight \
             attn_gate.weight {indexer} hc_attn_fn.weight hc_attn_base.weight hc_attn_scale.weight hc_ffn_fn.weight \
             hc_ffn_base.weight hc_ffn_scale.weight ffn_norm.weight {ffn}"
        )
    })
}

/// DeepSeek-V4's: HY-V4's head; attention with sinks, compressed queries, one key-value
/// projection and a grouped low-rank output, the hyper-connections' mixing weights, then the
/// compressor where the layer compresses its keys (with the indexer's where it compresses by 4);
/// the router with its token-to-expert table (hash layers) or selection bias, the vision
/// variant's bias, experts and shared ones.
pub(crate) fn deepseek4(hp: &HParams) -> Vec<String> {
    let head = "token_embd.weight output_norm.weight output.weight output_hc_fn.weight output_hc_base.weight \
                output_hc_scale.weight";
    layered(hp, head, |il| {
        let ratio = hp.compress_ratios.get(il).copied().unwrap_or(0);
        let compressor = match ratio {
            0 => "",
            _ => {
                "attn_compressor_kv.weight attn_compressor_gate.weight attn_compressor_ape.weight \
                  attn_compressor_norm.weight"
            }
        };
        let indexer = match ratio {
            4 => {
                "indexer.proj.weight indexer.attn_q_b.weight indexer_compressor_kv.weight \
                  indexer_compressor_gate.weight indexer_compressor_ape.weight indexer_compressor_norm.weight"
            }
            _ => "",
        };
        let routing = match (il as u32) < hp.n_hash_layers {
            true => "ffn_gate_tid2eid.weight",
            false => "exp_probs_b.bias",
        };
        format!(
            "attn_norm.weight attn_sinks.weight attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight attn_kv.weight \
             attn_kv_a_norm.weight attn_output_a.weight attn_output_b.weight hc_attn_fn.weight hc_attn_base.weight \
             hc_attn_scale.weight hc_ffn_fn.weight hc_ffn_base.weight hc_ffn_scale.weight {compressor} {indexer} \
             ffn_gate_inp.weight {routing} exp_probs_b_vl.bias ffn_norm.weight ffn_gate_exps.weight \
             ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}"
        )
    })
}

/// HRM-Text's: no output norm, the low stack's initial state; the blocks of the low stack, then
/// the high stack's (the cycles run them again: no tensors of their own but their scales, which
/// the model layer adds per layer).
pub(crate) fn hrm_text(hp: &HParams) -> Vec<String> {
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

/// Qwen4-exp's: the hyper-connections' head before the output, the per-layer embeddings' table
/// where the model has them; per layer the hyper-connections' weights around the attention and
/// the FFN, attention (a doubled query, query and key norms, the block-sparse indexer) or a gated
/// delta net, the per-layer embeddings' weights in their layer, then Qwen3.5 MoE's experts.
pub(crate) fn qwen4exp(hp: &HParams) -> Vec<String> {
    let head = match hp.ple {
        Some(_) => {
            "token_embd.weight output_hc_norm.weight output_hc_down.weight output_hc_up.weight output.weight \
                    per_layer_token_embd.weight"
        }
        None => "token_embd.weight output_hc_norm.weight output_hc_down.weight output_hc_up.weight output.weight",
    };
    layered(hp, head, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => {
                "attn_qkv.weight attn_gate.weight ssm_conv1d.weight ssm_dt.bias ssm_a ssm_beta.weight \
                 ssm_alpha.weight ssm_norm.weight ssm_out.weight"
            }
            false => {
                "QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight indexer.q_proj.weight \
                 indexer.k_proj.weight indexer.q_norm.weight indexer.k_norm.weight"
            }
        };
        let ple = match hp.ple.as_ref().is_some_and(|p| p.layer == il) {
            true => {
                "ple_key.weight ple_value.weight ple_norm_key.weight ple_norm_query.weight ple_norm_conv.weight \
                 ple_conv1d.weight"
            }
            false => "",
        };
        format!(
            "hc_attn_norm.weight hc_attn_down.weight hc_attn_up.weight hc_attn_inject.weight hc_ffn_norm.weight \
             hc_ffn_down.weight hc_ffn_up.weight hc_ffn_inject.weight {mixer} {ple} ffn_gate_inp.weight \
             ffn_down_exps.weight ffn_gate_up_exps.weight ffn_gate_inp_shexp.weight {SHARED_GUD}"
        )
    })
}
