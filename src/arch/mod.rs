//! Architectures, one file each (or one per family, each member's differences in it): the
//! hyper-parameter keys it reads and what its loader sets itself for the saver, the tensors it
//! expects with their shapes and those llama.cpp creates without a file (`model::spec::ArchSpec`),
//! and the graph it builds from the shared primitives of `graph/`, with its LoRA and
//! control-vector behaviour (`graph::Decoder`), and its note in docs/architectures.md
//! (`Facts::about`). The registry below lists them. Adding one also takes its test model's
//! generator in `scripts/gen-models.py` (docs/adding-an-architecture.md); nothing below this layer
//! names an architecture but the quantizer's type rules (`model/quantize`, as llama.cpp's own).

pub(crate) mod created;

use crate::error::{Error, Result};
use crate::gguf::{Array, Value};
use crate::graph::{Builder, Decoder};
use crate::model::hparams::{HParams, RopeScaling, MAX_LAYERS};
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

/// An architecture the engine runs.
pub trait Architecture: ArchSpec + Decoder {}

impl<T: ArchSpec + Decoder> Architecture for T {}

/// The registry: each architecture module, declared here with the values it registers, one line
/// a file, so that an architecture added in a file of its own is that one line. `ARCHITECTURES`
/// lists every architecture the engine runs, in this order.
macro_rules! registry {
    ($($module:ident: [$($value:ident),+];)+) => {
        $(pub(crate) mod $module;)+

        /// Every architecture the engine runs.
        pub(crate) static ARCHITECTURES: &[&dyn Architecture] = &[$($(&$module::$value,)+)+];
    };
}

registry! {
    afmoe: [Afmoe];
    apertus: [Apertus];
    arctic: [Arctic];
    baichuan: [Baichuan];
    bailingmoe3: [BailingMoe3];
    bert: [BERT];
    bitnet: [BitNet];
    chameleon: [Chameleon];
    chatglm: [ChatGlm];
    cogvlm: [CogVlm];
    cohere: [COMMAND_R, COHERE2, COHERE2MOE];
    dbrx: [Dbrx];
    deepseek2: [DEEPSEEK2, MISTRAL4, DEEPSEEK32, GLM_DSA];
    deepseek2_ocr: [DeepSeek2Ocr];
    deepseek4: [Deepseek4];
    dots3note: [Dots3Note];
    ernie4_5_moe: [Ernie45Moe];
    eurobert: [EuroBert];
    exaone4: [Exaone4];
    exaone_moe: [ExaoneMoe];
    falcon_h1: [FalconH1];
    gemma: [Gemma];
    gemma2: [Gemma2];
    gemma3: [Gemma3];
    gemma3n: [Gemma3n];
    gemma4: [Gemma4];
    gemma_embedding: [GemmaEmbedding];
    glm4: [Glm4];
    glm5_next: [Glm5Next];
    gpt2: [POCKETTTS, ORION, STABLELM, PHI2, GPTNEOX, FALCON, NEMOTRON, JAIS2, GPT2, STARCODER, CODESHELL, STARCODER2, BLOOM, MPT, JAIS];
    gpt_oss: [GptOss];
    granite: [GRANITE, GRANITE_MOE, MINICPM];
    granite_hybrid: [GraniteHybrid];
    granite_swa: [GraniteSwa];
    granite_switch: [GraniteSwitch];
    grok: [Grok];
    grovemoe: [GroveMoe];
    hrm_text: [HrmText];
    hunyuan_moe: [HunyuanMoe];
    hy_v3: [HyV3];
    hy_v4: [HyV4];
    jamba: [Jamba];
    jina_bert_v2: [JinaBertV2];
    jina_bert_v3: [JINA_BERT_V3];
    kimi_k3: [KimiK3];
    kimi_linear: [KimiLinear];
    laguna: [Laguna];
    lfm2: [Lfm2, Lfm2Moe];
    llama: [Llama, LlamaEmbed];
    llama4: [Llama4];
    llama_like: [DECI, XVERSE, EXAONE, ERNIE4_5, ARCEE, MISTRAL3, OLMOE, SEED_OSS, REFACT, INTERNLM2, QWEN, NANBEIGE, MAINCODER, OPENELM, HUNYUAN_DENSE, HUNYUAN_VL, PADDLEOCR, PANGU_EMBED, DREAM, LLADA];
    mamba: [Mamba, Mamba2];
    maple: [Maple];
    mellum: [Mellum];
    mimo2: [Mimo2];
    minicpm3: [MiniCpm3];
    minimax_01: [Minimax01];
    minimax_m2: [MinimaxM2];
    minimax_m3: [MinimaxM3];
    modern_bert: [ModernBert];
    muse_glimmer: [MuseGlimmer];
    nemotron_h: [NEMOTRON_H, NEMOTRON_H_MOE];
    neo_bert: [NeoBert];
    nomic_bert: [NOMIC_BERT, NomicBertMoe];
    olmo: [Olmo];
    olmo2: [Olmo2];
    phi3: [PHI3, PHIMOE];
    plamo: [Plamo];
    plamo2: [Plamo2];
    plamo3: [Plamo3];
    plm: [Plm];
    qwen2: [Qwen2, Qwen2Moe, Qwen2Vl];
    qwen3: [Qwen3, QWEN3VL, QWEN3TTS];
    qwen35: [QWEN35, QWEN35_MOE, QWEN3_NEXT];
    qwen3moe: [QWEN3MOE, LLADA_MOE, RND1, QWEN3VLMOE];
    qwen4exp: [Qwen4Exp];
    rwkv: [RWKV6, RWKV6QWEN2, RWKV7, ARWKV7];
    shared_experts: [DOTS1, BAILINGMOE, BAILINGMOE2, GLM4MOE, DEEPSEEK];
    smallthinker: [SmallThinker];
    smollm3: [SmolLm3];
    spark2_5: [Spark2_5];
    step35: [Step35];
    t5: [T5, T5Encoder];
    talkie: [Talkie];
    wavtokenizer_dec: [WavTokenizerDec];
}

/// The architecture of a `general.architecture` name.
pub fn find(name: &str) -> Result<&'static dyn Architecture> {
    ARCHITECTURES.iter().copied().find(|a| a.facts().name == name).ok_or_else(|| {
        let known: Vec<&str> = ARCHITECTURES.iter().map(|a| a.facts().name).collect();
        Error::model(format!(
            "unknown or unsupported architecture '{name}' (the engine follows llama.cpp 0.3.36's list, of which it runs: {})",
            known.join(", ")
        ))
    })
}

/// What loading needs of the architecture of a `general.architecture` name (`model::ArchLookup`).
pub fn spec(name: &str) -> Result<&'static dyn ArchSpec> {
    Ok(find(name)?)
}

// Keys llama.cpp's loader reads for several architectures, in the groups kin share
// (`Facts::read_keys`).

/// The RMS norms' epsilon.
pub(crate) const READS_RMS_EPS: &[&str] = &["attention.layer_norm_rms_epsilon"];
/// The layer norms' epsilon.
pub(crate) const READS_NORM_EPS: &[&str] = &["attention.layer_norm_epsilon"];
/// Leading dense layers, then experts beside shared experts, their weights scaled.
pub(crate) const READS_SHARED_MOE: &[&str] = &[
    "leading_dense_block_count",
    "expert_feed_forward_length",
    "expert_shared_count",
    "expert_weights_scale",
];
/// How the experts' weights are normalised and gated.
pub(crate) const READS_GATING: &[&str] = &["expert_weights_norm", "expert_gating_func"];
/// Latent attention's ranks and head sizes.
pub(crate) const READS_MLA: &[&str] = &[
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "attention.key_length_mla",
    "attention.value_length_mla",
];
/// A lightning indexer's heads and picks.
pub(crate) const READS_INDEXER: &[&str] = &[
    "attention.indexer.head_count",
    "attention.indexer.key_length",
    "attention.indexer.top_k",
];
/// The sliding window and its layers' rotary base.
pub(crate) const READS_SLIDING: &[&str] = &["attention.sliding_window", "rope.freq_base_swa"];
/// A state space's sizes.
pub(crate) const READS_SSM: &[&str] = &[
    "ssm.inner_size",
    "ssm.conv_kernel",
    "ssm.state_size",
    "ssm.time_step_rank",
];

/// What an encoder is: no memory, no output head, NeoX rotation where it rotates.
pub(crate) const ENCODER: Facts = Facts {
    rope_type: ROPE_NEOX,
    memory: Memory::None,
    has_output_head: false,
    ..Facts::BASE
};

// Values llama.cpp's loader sets itself for several architectures, as loading here derived them
// (`Facts::saved_rules`).

/// The ALiBi bias the architecture fixes.
pub(crate) const HELD_ALIBI: (&str, Rule) = (
    "attention.max_alibi_bias",
    Rule::Held(|f| Value::F32(f.hp.max_alibi_bias)),
);
/// The sliding layers' rotary base (the global one where the file gives none).
pub(crate) const HELD_SWA_BASE: (&str, Rule) = (
    "rope.freq_base_swa",
    Rule::Held(|f| Value::F32(f.hp.rope_freq_base_swa)),
);
/// The same, read (or defaulted to the global base) only where the model has a sliding window.
pub(crate) const HELD_SWA_BASE_IF_WINDOW: (&str, Rule) = (
    "rope.freq_base_swa",
    Rule::Held(|f| {
        Value::F32(match f.hp.n_swa {
            0 => 10000.0,
            _ => f.hp.rope_freq_base_swa,
        })
    }),
);
/// The sliding window.
pub(crate) const HELD_WINDOW: (&str, Rule) = ("attention.sliding_window", Rule::Held(|f| Value::U32(f.hp.n_swa)));
/// The latent cache's width, as the value head size.
pub(crate) const HELD_LATENT_VALUE_LENGTH: (&str, Rule) =
    ("attention.value_length", Rule::Held(|f| Value::U32(f.hp.n_lora_kv)));
/// The hyper-connected output's width.
pub(crate) const HELD_EMBD_OUT: (&str, Rule) = ("embedding_length_out", Rule::Held(|f| Value::U32(f.hp.n_embd_out)));
/// The layer norms' epsilon.
pub(crate) const HELD_NORM_EPS: (&str, Rule) = (
    "attention.layer_norm_epsilon",
    Rule::Held(|f| Value::F32(f.hp.norm_eps)),
);
/// Whether attention is causal (the diffusion models attend both ways).
pub(crate) const HELD_CAUSAL: (&str, Rule) = ("attention.causal", Rule::Held(|f| Value::Bool(f.hp.causal)));
/// The experts' gating function, the architecture's default where the file names none.
pub(crate) const HELD_GATING: (&str, Rule) = (
    "expert_gating_func",
    Rule::Held(|f| Value::U32(f.hp.expert_gating_func)),
);

/// llama.cpp's requirement of the Llama-like decoders: one head size for keys, values and
/// rotation.
pub(crate) fn check_equal_head_sizes(hp: &HParams) -> Result<()> {
    if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot != hp.n_embd_head_k {
        return Err(Error::model(format!(
            "{} needs equal key, value and rotary head sizes (got {}, {}, {})",
            hp.arch_name, hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
        )));
    }
    Ok(())
}

/// GLM-4's and GLM-4.5's graphs take embeddings only from files with M-RoPE sections (the
/// multimodal conversions); llama.cpp stops the process on others, which are refused here.
pub(super) fn refuse_embeddings_without_mrope(b: &Builder) -> Result<()> {
    if b.takes_embeddings() && b.hp.n_pos_per_embd() == 1 {
        return Err(Error::invalid(format!(
            "this '{}' file has no M-RoPE sections, so it takes no embeddings (reconvert it for multimodal use)",
            b.hp.arch_name
        )));
    }
    Ok(())
}

/// Multi-token-prediction layers (`nextn_predict_layers` > 0) are not run here: such a file is
/// refused rather than run without them.
pub(crate) fn refuse_mtp(meta: &Meta, hp: &HParams) -> Result<()> {
    if meta.u32_opt(&hp.key("nextn_predict_layers"))?.unwrap_or(0) > 0 {
        return Err(Error::NotImplemented(
            "multi-token-prediction layers (nextn_predict_layers)",
        ));
    }
    Ok(())
}

/// A mixture of experts needs an expert count and a count used per token.
pub(crate) fn check_experts(hp: &HParams) -> Result<()> {
    if hp.n_expert == 0 || hp.n_expert_used == 0 {
        return Err(Error::model(format!(
            "{} needs experts (expert_count, expert_used_count)",
            hp.arch_name
        )));
    }
    Ok(())
}

/// The experts' routing as the sigmoid-routed families read it: `expert_gating_func` (absent or
/// "none": sigmoid, as llama.cpp defaults it for them), and the picked weights' optional
/// normalisation and scale.
pub(crate) fn load_sigmoid_routing(meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
    hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
    let gating = match meta.u32_opt(&hp.key("expert_gating_func"))?.unwrap_or(0) {
        0 => 2,
        g => g,
    };
    if crate::graph::Gating::from_llama(gating).is_none() {
        return Err(Error::model(format!(
            "{}: unknown expert gating function {gating}",
            hp.arch_name
        )));
    }
    hp.expert_gating_func = gating;
    Ok(())
}

/// Layer `il`'s FFN norm and FFN: dense within the leading dense layers, otherwise a router with a
/// required selection bias, its experts and the shared experts where the model has them (AFMoE's
/// and Laguna's layout).
pub(crate) fn biased_expert_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let experts = il >= hp.n_layer_dense_lead as usize;
    ffn_tensors(hp, il, experts, specs);
    if experts {
        specs.push(TensorSpec::new(
            format!("blk.{il}.exp_probs_b.bias"),
            &[hp.n_expert],
            true,
        ));
        if hp.n_ff_shexp > 0 {
            shared_expert_tensors(hp, il, specs);
        }
    }
}

/// Layer `il`'s router, experts (gate and up fused or separate) and shared experts where the
/// model has them (Cohere 2 MoE's and DeepSeek 2's layout).
pub(crate) fn routed_expert_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let (e, n, x) = (hp.n_embd, hp.n_expert, hp.n_ff_exp);
    let b = |s: &str| format!("blk.{il}.{s}");
    specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, n], true));
    specs.extend(gate_up_exps(hp, il));
    specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, n], true));
    if hp.n_ff_shexp > 0 {
        shared_expert_tensors(hp, il, specs);
    }
}

/// Layer `il`'s experts' gate and up projections: fused in one stack (as llama.cpp's
/// `create_tensor_gate_up_exps` makes them without a file), or two.
pub(crate) fn gate_up_exps(hp: &HParams, il: usize) -> [TensorSpec; 3] {
    let (e, n, x) = (hp.n_embd, hp.n_expert, hp.n_ff_exp);
    let fused = format!("blk.{il}.ffn_gate_up_exps.weight");
    [
        TensorSpec::matmul(format!("blk.{il}.ffn_gate_exps.weight"), &[e, x, n], true).unless(&fused),
        TensorSpec::matmul(format!("blk.{il}.ffn_up_exps.weight"), &[e, x, n], true).unless(&fused),
        TensorSpec::matmul(fused, &[e, 2 * x, n], false),
    ]
}

/// The same where rotation may cover only part of each head.
pub(crate) fn check_head_sizes_partial_rotation(hp: &HParams) -> Result<()> {
    if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_rot > hp.n_embd_head_k {
        return Err(Error::model(format!(
            "{} needs equal key and value head sizes and at most that many rotated dimensions (got {}, {}, {})",
            hp.arch_name, hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
        )));
    }
    Ok(())
}

/// Tensors every decoder of this family has: embeddings, output norm, an optional separate output
/// head, and per layer the attention projections (with optional biases) and the gated FFN, or,
/// for an architecture with `experts` in a file with `hp.n_expert` > 0, the experts' gated FFNs
/// and their router.
pub(crate) fn common_tensors(hp: &HParams, experts: bool, specs: &mut Vec<TensorSpec>) {
    head_tensors(hp, specs);
    for il in 0..hp.n_layer as usize {
        specs.push(TensorSpec::new(
            format!("blk.{il}.attn_norm.weight"),
            &[hp.n_embd],
            true,
        ));
        attention_tensors(hp, il, specs);
        ffn_tensors(hp, il, experts, specs);
    }
}

/// Token embeddings, the output norm and the optional separate output head.
pub(crate) fn head_tensors(hp: &HParams, specs: &mut Vec<TensorSpec>) {
    let (e, v) = (hp.n_embd, hp.n_vocab);
    specs.push(TensorSpec::new("token_embd.weight", &[e, v], true));
    specs.push(TensorSpec::new("output_norm.weight", &[e], true));
    specs.push(TensorSpec::matmul("output.weight", &[e, v], false));
}

/// Layer `il`'s attention projections: separate or one fused, with optional biases.
pub(crate) fn attention_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let e = hp.n_embd;
    let b = |s: &str| format!("blk.{il}.{s}");
    let q = hp.n_embd_head_k * hp.n_head[il];
    let k = hp.n_embd_head_k * hp.n_head_kv[il];
    let vv = hp.n_embd_head_v * hp.n_head_kv[il];
    // The projections, or one fused projection (llama.cpp takes either for every architecture).
    let qkv = b("attn_qkv.weight");
    specs.push(TensorSpec::matmul(&qkv, &[e, q + k + vv], false));
    specs.push(TensorSpec::new(b("attn_qkv.bias"), &[q + k + vv], false));
    specs.push(TensorSpec::matmul(b("attn_q.weight"), &[e, q], true).unless(&qkv));
    specs.push(TensorSpec::matmul(b("attn_k.weight"), &[e, k], true).unless(&qkv));
    specs.push(TensorSpec::matmul(b("attn_v.weight"), &[e, vv], true).unless(&qkv));
    specs.push(TensorSpec::new(b("attn_q.bias"), &[q], false));
    specs.push(TensorSpec::new(b("attn_k.bias"), &[k], false));
    specs.push(TensorSpec::new(b("attn_v.bias"), &[vv], false));
    specs.push(TensorSpec::matmul(b("attn_output.weight"), &[q, e], true));
}

/// The optional biases of layer `il`'s gated FFN.
pub(crate) fn ffn_bias_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let (e, ff) = (hp.n_embd, hp.n_ff[il]);
    specs.push(TensorSpec::new(format!("blk.{il}.ffn_gate.bias"), &[ff], false));
    specs.push(TensorSpec::new(format!("blk.{il}.ffn_up.bias"), &[ff], false));
    specs.push(TensorSpec::new(format!("blk.{il}.ffn_down.bias"), &[e], false));
}

/// Layer `il`'s FFN norm and gated FFN, or (`experts`, in a file with experts) its router and
/// experts.
pub(crate) fn ffn_tensors(hp: &HParams, il: usize, experts: bool, specs: &mut Vec<TensorSpec>) {
    let e = hp.n_embd;
    let b = |s: &str| format!("blk.{il}.{s}");
    let ff = hp.n_ff[il];
    specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
    if !experts || hp.n_expert == 0 {
        specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
        specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
        specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
    } else {
        let (ffe, ne) = (hp.n_ff_exp, hp.n_expert);
        specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true));
        specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ffe, ne], true));
        specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ffe, ne], true));
        specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ffe, e, ne], true));
    }
}

/// YaRN's correction range from `rope.scaling.yarn_beta_fast`/`_slow` where the file has them
/// (the architectures whose llama.cpp loader reads the keys); other values stay as they are.
pub(crate) fn load_yarn_betas(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let fast = meta.f32_opt(&hp.key("rope.scaling.yarn_beta_fast"))?;
    let slow = meta.f32_opt(&hp.key("rope.scaling.yarn_beta_slow"))?;
    hp.yarn_beta_fast = fast.unwrap_or(hp.yarn_beta_fast);
    hp.yarn_beta_slow = slow.unwrap_or(hp.yarn_beta_slow);
    Ok(())
}

/// Make the separate output head required (architectures whose llama.cpp loader never ties it).
pub(crate) fn require_output(specs: &mut [TensorSpec]) {
    for s in specs.iter_mut().filter(|s| s.name == "output.weight") {
        s.required = true;
    }
}

/// Layer `il`'s shared expert: gated FFN projections `ffn_{gate,up,down}_shexp` as wide as
/// `hp.n_ff_shexp`.
pub(crate) fn shared_expert_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let (e, sh) = (hp.n_embd, hp.n_ff_shexp);
    specs.push(TensorSpec::matmul(
        format!("blk.{il}.ffn_gate_shexp.weight"),
        &[e, sh],
        true,
    ));
    specs.push(TensorSpec::matmul(
        format!("blk.{il}.ffn_up_shexp.weight"),
        &[e, sh],
        true,
    ));
    specs.push(TensorSpec::matmul(
        format!("blk.{il}.ffn_down_shexp.weight"),
        &[sh, e],
        true,
    ));
}

/// The layer of a `blk.{il}.*` tensor name.
pub(crate) fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

/// Make the first `n_layer_dense_lead` layers of `specs` (a model whose layers are all experts)
/// dense: their specs become those `dense` gives for the model without experts.
pub(crate) fn dense_lead(hp: &HParams, specs: &mut Vec<TensorSpec>, dense: impl Fn(&HParams) -> Vec<TensorSpec>) {
    let lead = hp.n_layer_dense_lead as usize;
    let mut without_experts = hp.clone();
    without_experts.n_expert = 0;
    specs.retain(|s| layer_of(&s.name).is_none_or(|il| il >= lead));
    specs.extend(
        dense(&without_experts)
            .into_iter()
            .filter(|s| layer_of(&s.name).is_some_and(|il| il < lead)),
    );
}

/// M-RoPE's four sections (`rope.dimension_sections`, required).
pub(crate) fn load_rope_sections(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let sections = meta
        .i32_array(&hp.key("rope.dimension_sections"), 4)?
        .ok_or_else(|| Error::model(format!("{}: rope.dimension_sections is missing", hp.arch_name)))?;
    hp.rope_sections.copy_from_slice(&sections);
    Ok(())
}

/// The rotary frequency factors llama.cpp reads for the Llama family: LongRoPE's long and short
/// factors for a model trained with LongRoPE, otherwise Llama 3's `rope_freqs` (all optional).
pub(crate) fn rope_factor_tensors(hp: &HParams, specs: &mut Vec<TensorSpec>) {
    let names: &[&str] = if hp.rope_scaling == RopeScaling::LongRope {
        &["rope_factors_long.weight", "rope_factors_short.weight"]
    } else {
        &["rope_freqs.weight"]
    };
    for name in names {
        specs.push(TensorSpec::new(*name, &[hp.n_rot / 2], false));
    }
}

/// A model's sliding window: `window` tokens (0: none, nothing else is set), the layers that use
/// it (`swa_layers`), and how those rotate: `{arch}.rope.freq_base_swa`, else `base`, with `scale`
/// (llama.cpp's per-architecture defaults for `rope_freq_base_train_swa` and
/// `rope_freq_scale_train_swa`).
pub(crate) fn load_sliding_window(
    meta: &Meta,
    hp: &mut HParams,
    window: u32,
    default_period: u32,
    base: f32,
    scale: f32,
) -> Result<()> {
    load_window(meta, hp, window, (default_period, false), base, scale)
}

/// The same where the first layer of each period attends globally (llama.cpp's `dense_first`).
pub(crate) fn load_sliding_window_dense_first(
    meta: &Meta,
    hp: &mut HParams,
    window: u32,
    default_period: u32,
    base: f32,
    scale: f32,
) -> Result<()> {
    load_window(meta, hp, window, (default_period, true), base, scale)
}

fn load_window(meta: &Meta, hp: &mut HParams, window: u32, period: (u32, bool), base: f32, scale: f32) -> Result<()> {
    if window == 0 {
        return Ok(());
    }
    hp.n_swa = window;
    hp.swa_layers = swa_layers(meta, hp, period)?;
    // llama.cpp gives sliding layers their own head sizes and rotated dimensions when the file
    // has them; the graphs loading this way use one for all layers, so a file that differs is
    // refused, not misread.
    let own = [
        ("attention.key_length_swa", hp.n_embd_head_k_swa, hp.n_embd_head_k),
        ("attention.value_length_swa", hp.n_embd_head_v_swa, hp.n_embd_head_v),
        ("rope.dimension_count_swa", hp.n_rot_swa, hp.n_rot),
    ];
    for (key, v, full) in own {
        if v != full && hp.swa_layers.contains(&true) {
            return Err(Error::model(format!(
                "'{}' is {v}, not {full} as on the other layers: not supported",
                hp.key(key)
            )));
        }
    }
    hp.rope_freq_base_swa = meta.f32_opt(&hp.key("rope.freq_base_swa"))?.unwrap_or(base);
    hp.rope_freq_scale_swa = scale;
    Ok(())
}

/// A sliding window whose layers llama.cpp reads only from a per-layer array (required, as is a
/// nonzero `attention.sliding_window`), the sliding layers rotating with the model's own settings.
pub(crate) fn load_sliding_window_array(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let pattern = hp.key("attention.sliding_window_pattern");
    if !matches!(meta.0.get(&pattern), Some(Value::Array(_))) {
        return Err(Error::model(format!(
            "{} needs the per-layer array '{pattern}'",
            hp.arch_name
        )));
    }
    let window_key = hp.key("attention.sliding_window");
    let window = meta.u32(&window_key)?;
    if window == 0 {
        return Err(Error::model(format!("'{window_key}' is 0")));
    }
    let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
    load_sliding_window(meta, hp, window, 0, base, scale)
}

/// Which layers attend through the sliding window, from `{arch}.attention.sliding_window_pattern`
/// as llama.cpp reads it: one flag per layer (an array of bools or integers, nonzero meaning
/// sliding; layers past its end attend globally), or a period (the default's when the key is
/// absent; 0: every layer slides) whose last layer of each group attends globally, or its first
/// when `dense_first`.
fn swa_layers(meta: &Meta, hp: &HParams, (default_period, dense_first): (u32, bool)) -> Result<Vec<bool>> {
    let key = hp.key("attention.sliding_window_pattern");
    if let Some(flags) = layer_flags(meta, hp, &key, false)? {
        return Ok(flags);
    }
    let period = meta.u32_opt(&key)?.unwrap_or(default_period);
    Ok((0..hp.n_layer)
        .map(|il| {
            period == 0
                || if dense_first {
                    il % period != 0
                } else {
                    il % period < period - 1
                }
        })
        .collect())
}

/// A per-layer flag array as llama.cpp reads one into a fixed-size array (bools or 32-bit integers,
/// nonzero meaning set; layers past its end take `pad`), or None when `key` holds no array.
pub(crate) fn layer_flags(meta: &Meta, hp: &HParams, key: &str, pad: bool) -> Result<Option<Vec<bool>>> {
    let mut flags: Vec<bool> = match meta.0.get(key) {
        Some(Value::Array(Array::Bool(b))) => b.clone(),
        Some(Value::Array(Array::U32(v))) => v.iter().map(|&x| x != 0).collect(),
        Some(Value::Array(Array::I32(v))) => v.iter().map(|&x| x != 0).collect(),
        Some(Value::Array(_)) => {
            return Err(Error::model(format!("key '{key}' must hold bools or 32-bit integers")));
        }
        _ => return Ok(None),
    };
    if flags.len() > MAX_LAYERS as usize {
        return Err(Error::model(format!(
            "key '{key}' has {} entries, more than {MAX_LAYERS}",
            flags.len()
        )));
    }
    flags.resize(hp.n_layer as usize, pad);
    Ok(Some(flags))
}

#[cfg(test)]
pub(crate) mod tests;
