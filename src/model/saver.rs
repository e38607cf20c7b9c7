//! `llama_model_save_to_file`: the GGUF file llama.cpp's model saver writes, byte for byte.
//! llama.cpp does not copy the file's metadata: it writes its hyper-parameters as it holds them
//! after loading (every one, defaults included, in its own order), then its vocabulary, then the
//! tensors in the order of its model's members. That is reproduced here from what llama.cpp's
//! loader reads for each architecture (`Facts::read_keys`), the values it sets itself
//! (`Facts::saved_rules`, from what loading derived here) and its members' order.

use super::hparams::{HParams, Ple};
use super::spec::ArchSpec;
use crate::error::{Error, Result};
use crate::gguf::{Array, GgufFile, MetaWriter, Sink, TensorEntry, TensorInfo, Value};
use crate::model::metadata::Meta;
use crate::vocab::Vocab;

/// llama.cpp's `LLAMA_MAX_LAYERS`: the length of the hyper-parameter arrays it writes whole.
const MAX_LAYERS: usize = 512;

/// How llama.cpp arrives at the value it writes for a key.
#[derive(Clone, Copy)]
pub enum Rule {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// A required count.
    Required,
    /// The vocabulary's size.
    VocabSize,
    /// Written only when the file gives a non-zero value.
    NonZero,
    /// One value per layer (a scalar or an array in the file): one value when all agree.
    Layers(u32),
    /// As `Layers`, defaulting to the head count.
    LayersOfHeads,
    /// The first layer's value of a per-layer count.
    FirstLayer,
    /// One float per layer, written whole.
    LayerF32,
    /// A whole `MAX_LAYERS` array, filled with its default.
    FullI32(i32),
    FullF32(f32),
    /// M-RoPE's four sections.
    Sections,
    /// Key or value head size: the file's, or the width per head.
    HeadDim,
    /// The rotary dimensions: the file's, or the key head size.
    RopeDims,
    /// The sliding-window layers' sizes: the file's, or the full layers' (keys `_swa`).
    SwaOf(&'static str),
    /// The context length YaRN was trained with: the file's, or the training context.
    OrigCtx,
    /// The rope scaling type's name.
    ScalingType,
    /// The rope scaling factor, through llama.cpp's inverse and back.
    ScalingFactor,
    /// A classifier's labels (an empty array when none).
    Labels,
    /// Which layers slide (one flag per layer, never collapsed), when any does.
    SlidingPattern,
    /// What llama.cpp's loader sets itself, as loading here derived it.
    Held(fn(&Facts) -> Value),
    /// Of the per-layer embeddings' group, which llama.cpp writes whole where the model has
    /// them and not at all otherwise.
    PleGroup(fn(&Ple) -> Value),
}

use Rule::*;

/// The keys llama.cpp's loader reads for every architecture (without the architecture prefix).
const COMMON: &[&str] = &[
    "vocab_size",
    "context_length",
    "embedding_length",
    "embedding_length_out",
    "attention.causal",
    "pooling_type",
    "block_count",
    "nextn_predict_layers",
    "expert_count",
    "expert_used_count",
    "expert_group_count",
    "expert_group_used_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "rope.scaling.finetuned",
    "rope.scaling.original_context_length",
    "rope.freq_base",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.attn_factor",
    "attention.key_length",
    "attention.value_length",
    "rope.dimension_count",
    "attention.key_length_swa",
    "attention.value_length_swa",
    "rope.dimension_count_swa",
    "classifier.output_labels",
];

/// The keys before the vocabulary, in llama.cpp's order (`{arch}.` prefixed).
const HEAD: &[(&str, Rule)] = &[
    ("vocab_size", VocabSize),
    ("context_length", Required),
    ("embedding_length", Required),
    ("embedding_length_out", NonZero),
    ("block_count", Required),
    ("leading_dense_block_count", U32(0)),
    ("feed_forward_length", Layers(0)),
    ("expert_feed_forward_length", U32(0)),
    ("expert_latent_length", U32(0)),
    ("expert_shared_feed_forward_length", U32(0)),
    ("expert_chunk_feed_forward_length", U32(0)),
    ("swiglu_clamp_exp", LayerF32),
    ("swiglu_clamp_shexp", LayerF32),
    ("use_parallel_residual", Bool(false)),
    ("expert_count", U32(0)),
    ("expert_used_count", FirstLayer),
    ("expert_shared_count", U32(0)),
    ("expert_group_count", U32(0)),
    ("expert_group_used_count", U32(0)),
    ("expert_weights_scale", F32(0.0)),
    ("expert_weights_norm", Bool(false)),
    ("expert_gating_func", U32(0)),
    ("expert_group_scale", F32(0.05)),
    ("experts_per_group", U32(0)),
    ("moe_every_n_layers", U32(0)),
    ("nextn_predict_layers", U32(0)),
    ("n_deepstack_layers", U32(0)),
    ("deepstack_mapping", FullI32(-1)),
    ("pooling_type", U32(u32::MAX)),
    ("logit_scale", F32(0.0)),
    ("decoder_start_token_id", I32(-1)),
    ("decoder_block_count", U32(0)),
    ("attn_logit_softcapping", F32(50.0)),
    ("router_logit_softcapping", F32(30.0)),
    ("final_logit_softcapping", F32(30.0)),
    ("swin_norm", Bool(false)),
    ("rescale_every_n_layers", U32(0)),
    ("time_mix_extra_dim", U32(0)),
    ("time_decay_extra_dim", U32(0)),
    ("residual_scale", F32(0.0)),
    ("embedding_scale", F32(0.0)),
    ("hrm.layers_per_stack", U32(0)),
    ("hrm.h_cycles", U32(0)),
    ("hrm.l_cycles", U32(0)),
    ("hrm.prefix_lm", Bool(false)),
    ("token_shift_count", U32(2)),
    ("interleave_moe_layer_step", U32(0)),
    ("attention.head_count", Layers(0)),
    ("attention.head_count_kv", LayersOfHeads),
    ("attention.max_alibi_bias", F32(0.0)),
    ("attention.clamp_kqv", F32(0.0)),
    ("attention.key_length", HeadDim),
    ("attention.value_length", HeadDim),
    ("attention.layer_norm_epsilon", F32(0.0)),
    ("attention.layer_norm_rms_epsilon", F32(0.0)),
    ("attention.group_norm_epsilon", F32(0.0)),
    ("attention.group_norm_groups", U32(0)),
    ("attention.causal", Bool(true)),
    ("attention.q_lora_rank", U32(0)),
    ("attention.kv_lora_rank", U32(0)),
    ("attention.decay_lora_rank", U32(0)),
    ("attention.iclr_lora_rank", U32(0)),
    ("attention.value_residual_mix_lora_rank", U32(0)),
    ("attention.gate_lora_rank", U32(0)),
    ("attention.relative_buckets_count", U32(0)),
    ("attention.rope_pattern", Layers(1)),
    ("attention.sliding_window", U32(0)),
    ("attention.sliding_window_pattern", SlidingPattern),
    ("attention.scale", F32(0.0)),
    ("attention.output_scale", F32(0.0)),
    ("attention.value_scale", F32(0.0)),
    ("attention.temperature_length", U32(0)),
    ("attention.temperature_scale", F32(0.0)),
    ("attention.key_length_mla", U32(0)),
    ("attention.value_length_mla", U32(0)),
    ("attention.key_length_swa", SwaOf("attention.key_length")),
    ("attention.value_length_swa", SwaOf("attention.value_length")),
    ("attention.key_length_mla_swa", U32(0)),
    ("attention.value_length_mla_swa", U32(0)),
    ("attention.kv_lora_rank_swa", U32(0)),
    ("attention.indexer.head_count", U32(0)),
    ("attention.indexer.key_length", U32(0)),
    ("attention.indexer.top_k", U32(0)),
    ("attention.indexer.block_size", U32(0)),
    ("attention.indexer.kpool", U32(0)),
    ("attention.indexer.kpool_select_tail", Bool(true)),
    ("attention.indexer.local_blocks", U32(0)),
    ("attention.indexer.types", Layers(0)),
    (
        "attention.recurrent_layers",
        Held(|f| flags(&f.hp.recurrent_layers[..f.n_layer])),
    ),
    ("attention.output_group_count", U32(0)),
    ("attention.output_lora_rank", U32(0)),
    ("attention.compress_rope_freq_base", F32(0.0)),
    ("attention.compress_ratios", Held(compress_ratios)),
    ("hyper_connection.count", U32(0)),
    ("hyper_connection.sinkhorn_iterations", U32(0)),
    ("hyper_connection.epsilon", F32(0.0)),
    ("hyper_connection.magnitude", F32(0.0)),
    ("hash_layer_count", U32(0)),
    ("hyper_connection.low_rank", U32(0)),
    (
        "ple.layers",
        PleGroup(|p| Value::Array(Array::U32(vec![p.layer as u32]))),
    ),
    ("ple.ngram_size", PleGroup(|p| Value::U32(p.ngram))),
    ("ple.heads_per_ngram", PleGroup(|p| Value::U32(p.heads_per_ngram))),
    ("ple.conv_kernel", PleGroup(|p| Value::U32(p.conv_kernel))),
    ("ple.eos_token_id", PleGroup(|p| Value::U32(p.eos))),
    ("embedding_length_per_layer_input", PleGroup(|p| Value::U32(p.head_dim))),
    (
        "ple.layer_multipliers",
        PleGroup(|p| Value::Array(Array::U64(p.multipliers.clone()))),
    ),
    (
        "ple.head_offsets",
        PleGroup(|p| Value::Array(Array::U64(p.offsets.iter().map(|&o| o.into()).collect()))),
    ),
    (
        "ple.head_vocab_sizes",
        PleGroup(|p| Value::Array(Array::U64(p.vocab_sizes.iter().map(|&n| n.into()).collect()))),
    ),
    ("rope.dimension_count", RopeDims),
    ("rope.dimension_count_swa", SwaOf("rope.dimension_count")),
    ("rope.dimension_sections", Sections),
    ("rope.freq_base", F32(10000.0)),
    ("rope.freq_base_swa", F32(10000.0)),
    ("rope.scaling.type", ScalingType),
    ("rope.scaling.factor", ScalingFactor),
    ("rope.scaling.attn_factor", F32(1.0)),
    ("rope.scaling.original_context_length", OrigCtx),
    ("rope.scaling.finetuned", Bool(false)),
    ("rope.scaling.yarn_log_multiplier", F32(0.0)),
    ("rope.scaling.yarn_ext_factor", F32(-1.0)),
    ("rope.scaling.yarn_attn_factor", F32(1.0)),
    ("rope.scaling.yarn_beta_fast", F32(32.0)),
    ("rope.scaling.yarn_beta_slow", F32(1.0)),
    ("ssm.inner_size", U32(0)),
    ("ssm.conv_kernel", U32(0)),
    ("ssm.state_size", U32(0)),
    ("ssm.time_step_rank", U32(0)),
    ("ssm.group_count", U32(0)),
    ("ssm.dt_b_c_rms", Bool(false)),
    ("kda.head_dim", U32(0)),
    ("kda.safe_gate", Bool(false)),
    ("kda.gate_lower_bound", F32(f32::NEG_INFINITY)),
    ("wkv.head_size", U32(0)),
];

/// The keys after the vocabulary; `xielu.*` carry no architecture prefix (llama.cpp's names).
const TAIL: &[(&str, Rule)] = &[
    ("posnet.embedding_length", U32(0)),
    ("posnet.block_count", U32(0)),
    ("convnext.embedding_length", U32(0)),
    ("convnext.block_count", U32(0)),
    ("classifier.output_labels", Labels),
    ("shortconv.l_cache", U32(0)),
    ("xielu.alpha_n", FullF32(0.0)),
    ("xielu.alpha_p", FullF32(0.0)),
    ("xielu.beta", FullF32(0.0)),
    ("xielu.eps", FullF32(0.0)),
    ("attn_res.block_size", U32(0)),
    ("activation.situ_beta", F32(1.0)),
    ("activation.situ_linear_beta", F32(0.0)),
    ("dense_2_feat_in", U32(0)),
    ("dense_2_feat_out", U32(0)),
    ("dense_3_feat_in", U32(0)),
    ("dense_3_feat_out", U32(0)),
];

/// Tensors outside the layers, in the order of llama.cpp's model members (`token_embd.weight`
/// goes first when a separate output head exists, else where the output head goes).
const MODEL_TENSORS: &[&str] = &[
    "token_types.weight",
    "position_embd.weight",
    "token_embd_norm.weight",
    "token_embd_norm.bias",
    "output_norm.weight",
    "output_norm.bias",
    "output.weight",
    "output.bias",
    "enc.output_norm.weight",
    "output.scale",
    "output.input_scale",
    "output_res_score.weight",
    "nextn.pre_projection.weight",
    "nextn.post_projection.weight",
    "cls.weight",
    "cls.bias",
    "cls.output.weight",
    "cls.output.bias",
    "cls.norm.weight",
    "hrm.z_l_init",
    "output_hc_fn.weight",
    "output_hc_base.weight",
    "output_hc_scale.weight",
    "per_layer_token_embd.weight",
    "output_hc_norm.weight",
    "output_hc_down.weight",
    "output_hc_up.weight",
];

/// Tensors outside the layers that llama.cpp loads into members its saver does not write.
const NOT_SAVED: &[&str] = &[
    "dense_2.weight",
    "dense_2.bias",
    "dense_3.weight",
    "per_layer_model_proj.weight",
    "per_layer_proj_norm.weight",
    "altup_proj.weight",
    "altup_unembd_proj.weight",
    "conv1d.weight",
    "conv1d.bias",
];

/// The member of a name for every architecture that names no other (`Facts::layer_members`).
const ANY: Option<&str> = None;

/// A layer's tensors (after `blk.N.`, or `enc.blk.N.` for `enc.*`: an encoder-decoder's encoder
/// layers; `rope_*` are whole names; `stack/name` is `stack.N.name`, a convolutional stack's
/// block N), in the order of llama.cpp's
/// `llama_layer` members, whose pointers its saver walks. A name that architectures give to
/// different members is listed at each: with the member where some architectures put it
/// (`Facts::layer_members`), and `ANY` at the member every other architecture uses.
const LAYER_TENSORS: &[(&str, Option<&str>)] = &[
    ("attn_norm.weight", ANY),
    ("attn_norm.bias", ANY),
    ("attn_norm_2.weight", ANY),
    ("attn_norm_2.bias", ANY),
    ("attn_q_norm.weight", ANY),
    ("attn_q_norm.bias", ANY),
    ("attn_k_norm.weight", ANY),
    ("attn_k_norm.bias", ANY),
    ("attn_output_norm.weight", ANY),
    ("attn_output_norm.bias", ANY),
    ("attn_q_a_norm.weight", ANY),
    ("attn_kv_a_norm.weight", ANY),
    ("attn_sub_norm.weight", ANY),
    ("post_attention_norm", ANY),
    ("post_attention_norm.weight", ANY),
    ("ffn_sub_norm.weight", ANY),
    ("enc.attn_norm.weight", ANY),
    ("ssm_norm.weight", ANY),
    ("ssm_dt_norm", ANY),
    ("ssm_dt_norm.weight", ANY),
    ("ssm_b_norm", ANY),
    ("ssm_b_norm.weight", ANY),
    ("ssm_c_norm", ANY),
    ("ssm_c_norm.weight", ANY),
    ("attn_q.weight", ANY),
    ("attn_k.weight", ANY),
    ("attn_v.weight", ANY),
    ("attn_output.weight", ANY),
    ("attn_qkv.weight", ANY),
    ("attn_gate.weight", Some("wg")),
    ("attn_q_a.weight", ANY),
    ("attn_q.bias", ANY),
    ("attn_q_b.weight", ANY),
    ("attn_kv_a_mqa.weight", ANY),
    ("attn_kv_b.weight", ANY),
    ("attn_kv.weight", ANY),
    ("attn_k.bias", ANY),
    ("attn_k_b.weight", ANY),
    ("attn_v.bias", ANY),
    ("attn_v_b.weight", ANY),
    ("attn_qkv.bias", ANY),
    ("attn_output_a.weight", ANY),
    ("attn_output.bias", ANY),
    ("attn_output_b.weight", ANY),
    ("enc.attn_q.weight", ANY),
    ("enc.attn_k.weight", ANY),
    ("enc.attn_v.weight", ANY),
    ("enc.attn_o.weight", ANY),
    ("attn_gate.weight", ANY),
    ("enc.attn_rel_b.weight", ANY),
    ("ffn_norm", ANY),
    ("ffn_norm.weight", ANY),
    ("ffn_norm.bias", ANY),
    ("layer_output_norm.weight", Some("ffn_post_norm")),
    ("post_ffw_norm", ANY),
    ("post_ffw_norm.weight", ANY),
    ("post_ffw_norm_1.weight", ANY),
    ("post_ffw_norm_2.weight", ANY),
    ("pre_ffw_norm_2.weight", ANY),
    ("layer_output_norm.weight", ANY),
    ("layer_output_norm.bias", ANY),
    ("ffn_norm_exps.weight", ANY),
    ("enc.ffn_norm.weight", ANY),
    ("ffn_gate.weight", ANY),
    ("ffn_down.weight", ANY),
    ("ffn_up.weight", ANY),
    ("enc.ffn_gate.weight", ANY),
    ("enc.ffn_down.weight", ANY),
    ("enc.ffn_up.weight", ANY),
    ("ffn_gate_inp.weight", ANY),
    ("ffn_gate_inp.scale", ANY),
    ("ffn_gate_exps.weight", ANY),
    ("ffn_down_exps.weight", ANY),
    ("ffn_up_exps.weight", ANY),
    ("ffn_gate_up_exps.weight", ANY),
    ("ffn_gate_inp.bias", ANY),
    ("ffn_gate_exps.bias", ANY),
    ("ffn_down_exps.bias", ANY),
    ("ffn_up_exps.bias", ANY),
    ("ffn_gate_exps.scale", ANY),
    ("ffn_down_exps.scale", ANY),
    ("ffn_up_exps.scale", ANY),
    ("ffn_latent_down.weight", ANY),
    ("ffn_latent_up.weight", ANY),
    ("ffn_gate_inp_shexp.weight", ANY),
    ("ffn_gate_shexp.weight", ANY),
    ("ffn_down_shexp.weight", ANY),
    ("ffn_up_shexp.weight", ANY),
    ("ffn_gate_chexps.weight", ANY),
    ("ffn_down_chexps.weight", ANY),
    ("ffn_up_chexps.weight", ANY),
    ("ffn_gate.bias", ANY),
    ("ffn_down.bias", ANY),
    ("ffn_up.bias", ANY),
    ("ffn.act.scales", ANY),
    ("exp_probs_b", ANY),
    ("exp_probs_b.bias", ANY),
    ("exp_probs_b_vl.bias", ANY),
    ("ffn_gate_tid2eid.weight", ANY),
    ("attn_conv_base", ANY),
    ("attn_conv_proj.weight", ANY),
    ("ffn_conv_base", ANY),
    ("ffn_conv_proj.weight", ANY),
    ("ssm_in.weight", ANY),
    ("ssm_x.weight", ANY),
    ("ssm_dt.bias", Some("ssm_dt")),
    ("ssm_dt.weight", ANY),
    ("ssm_out.weight", ANY),
    ("ssm_conv1d.weight", ANY),
    ("ssm_a", ANY),
    ("ssm_d", ANY),
    ("ssm_conv1d.bias", ANY),
    ("ssm_dt.bias", ANY),
    ("ssm_ba.weight", ANY),
    ("ssm_alpha.weight", ANY),
    ("time_mix_w1.weight", ANY),
    ("time_mix_w2.weight", ANY),
    ("time_mix_lerp_x.weight", ANY),
    ("time_mix_lerp_w.weight", ANY),
    ("time_mix_lerp_k.weight", ANY),
    ("time_mix_lerp_v.weight", ANY),
    ("time_mix_lerp_r.weight", ANY),
    ("time_mix_lerp_g.weight", ANY),
    ("time_mix_lerp_fused.weight", ANY),
    ("time_mix_first.weight", ANY),
    ("time_mix_decay.weight", ANY),
    ("time_mix_decay_w1.weight", ANY),
    ("time_mix_decay_w2.weight", ANY),
    ("time_mix_key.weight", ANY),
    ("time_mix_key.bias", ANY),
    ("time_mix_value.weight", ANY),
    ("time_mix_value.bias", ANY),
    ("time_mix_receptance.weight", ANY),
    ("time_mix_receptance.bias", ANY),
    ("time_mix_gate.weight", ANY),
    ("time_mix_w0.weight", ANY),
    ("time_mix_a0.weight", ANY),
    ("time_mix_a1.weight", ANY),
    ("time_mix_a2.weight", ANY),
    ("time_mix_v0.weight", ANY),
    ("time_mix_v1.weight", ANY),
    ("time_mix_v2.weight", ANY),
    ("time_mix_g1.weight", ANY),
    ("time_mix_g2.weight", ANY),
    ("time_mix_k_k.weight", ANY),
    ("time_mix_k_a.weight", ANY),
    ("time_mix_r_k.weight", ANY),
    ("time_mix_ln.weight", ANY),
    ("time_mix_ln.bias", ANY),
    ("time_mix_output.weight", ANY),
    ("channel_mix_lerp_k.weight", ANY),
    ("channel_mix_lerp_r.weight", ANY),
    ("channel_mix_key.weight", ANY),
    ("channel_mix_receptance.weight", ANY),
    ("channel_mix_value.weight", ANY),
    ("rope_factors_long.weight", ANY),
    ("rope_factors_short.weight", ANY),
    ("rope_freqs.weight", ANY),
    ("attn_q.scale", ANY),
    ("attn_k.scale", ANY),
    ("attn_v.scale", ANY),
    ("attn_output.scale", ANY),
    ("attn_qkv.scale", ANY),
    ("attn_gate.scale", ANY),
    ("ffn_gate.scale", ANY),
    ("ffn_up.scale", ANY),
    ("ffn_down.scale", ANY),
    ("ffn_gate_shexp.scale", ANY),
    ("ffn_up_shexp.scale", ANY),
    ("ffn_down_shexp.scale", ANY),
    ("ssm_in.scale", ANY),
    ("ssm_out.scale", ANY),
    ("ssm_alpha.scale", ANY),
    ("ssm_beta.scale", ANY),
    ("attn_q.input_scale", ANY),
    ("attn_k.input_scale", ANY),
    ("attn_v.input_scale", ANY),
    ("attn_output.input_scale", ANY),
    ("attn_qkv.input_scale", ANY),
    ("attn_gate.input_scale", ANY),
    ("ffn_gate.input_scale", ANY),
    ("ffn_up.input_scale", ANY),
    ("ffn_down.input_scale", ANY),
    ("ffn_gate_exps.input_scale", ANY),
    ("ffn_down_exps.input_scale", ANY),
    ("ffn_up_exps.input_scale", ANY),
    ("ffn_gate_shexp.input_scale", ANY),
    ("ffn_up_shexp.input_scale", ANY),
    ("ffn_down_shexp.input_scale", ANY),
    ("ssm_in.input_scale", ANY),
    ("ssm_out.input_scale", ANY),
    ("ssm_alpha.input_scale", ANY),
    ("ssm_beta.input_scale", ANY),
    ("inp_gate.weight", ANY),
    ("proj.weight", ANY),
    ("post_norm.weight", ANY),
    ("altup_correct_coef.weight", ANY),
    ("altup_correct_scale.weight", ANY),
    ("altup_predict_coef.weight", ANY),
    ("altup_router.weight", ANY),
    ("altup_router_norm.weight", ANY),
    ("laurel_l.weight", ANY),
    ("laurel_r.weight", ANY),
    ("laurel_post_norm.weight", ANY),
    ("attn_sinks.weight", ANY),
    ("attn_kv_a_norm.weight", Some("attn_kv_norm")),
    ("hc_attn_fn.weight", ANY),
    ("hc_attn_base.weight", ANY),
    ("hc_attn_scale.weight", ANY),
    ("hc_ffn_fn.weight", ANY),
    ("hc_ffn_base.weight", ANY),
    ("hc_ffn_scale.weight", ANY),
    ("attn_compressor_kv.weight", ANY),
    ("attn_compressor_gate.weight", ANY),
    ("attn_compressor_ape.weight", ANY),
    ("attn_compressor_norm.weight", ANY),
    ("indexer_compressor_kv.weight", ANY),
    ("indexer_compressor_gate.weight", ANY),
    ("indexer_compressor_ape.weight", ANY),
    ("indexer_compressor_norm.weight", ANY),
    ("vis_attn_qkv.weight", ANY),
    ("vis_attn_output.weight", ANY),
    ("vis_gate.weight", ANY),
    ("vis_down.weight", ANY),
    ("vis_up.weight", ANY),
    ("ssm_conv1d_q.weight", ANY),
    ("ssm_conv1d_k.weight", ANY),
    ("ssm_conv1d_v.weight", ANY),
    ("ssm_f_a.weight", ANY),
    ("ssm_f_b.weight", ANY),
    ("ssm_beta.weight", ANY),
    ("ssm_g_a.weight", ANY),
    ("ssm_g_b.weight", ANY),
    ("ssm_norm.weight", Some("ssm_o_norm")),
    ("ssm_g.weight", ANY),
    ("attn_res_score.weight", ANY),
    ("ffn_res_score.weight", ANY),
    ("ffn_routed_down.weight", ANY),
    ("ffn_routed_up.weight", ANY),
    ("ffn_routed_norm.weight", ANY),
    ("indexer.k_norm.weight", ANY),
    ("indexer.k_norm.bias", ANY),
    ("indexer.proj.weight", ANY),
    ("indexer.attn_k.weight", ANY),
    ("indexer.attn_q_b.weight", ANY),
    ("indexer_compressor_gate.weight", Some("indexer_kpool_gate")),
    ("indexer_compressor_ape.weight", Some("indexer_kpool_ape")),
    ("indexer.q_proj.weight", ANY),
    ("indexer.k_proj.weight", ANY),
    ("indexer.q_norm.weight", ANY),
    ("indexer.k_norm.weight", Some("index_k_norm")),
    ("hc_attn_norm.weight", ANY),
    ("hc_attn_down.weight", ANY),
    ("hc_attn_up.weight", ANY),
    ("hc_attn_inject.weight", ANY),
    ("hc_ffn_norm.weight", ANY),
    ("hc_ffn_down.weight", ANY),
    ("hc_ffn_up.weight", ANY),
    ("hc_ffn_inject.weight", ANY),
    ("ple_key.weight", ANY),
    ("ple_value.weight", ANY),
    ("ple_norm_key.weight", ANY),
    ("ple_norm_query.weight", ANY),
    ("ple_norm_conv.weight", ANY),
    ("ple_conv1d.weight", ANY),
    ("layer_output_scale.weight", ANY),
    ("posnet/norm1.weight", ANY),
    ("posnet/norm1.bias", ANY),
    ("posnet/conv1.weight", ANY),
    ("posnet/conv1.bias", ANY),
    ("posnet/norm2.weight", ANY),
    ("posnet/norm2.bias", ANY),
    ("posnet/conv2.weight", ANY),
    ("posnet/conv2.bias", ANY),
    ("posnet/attn_norm.weight", ANY),
    ("posnet/attn_norm.bias", ANY),
    ("posnet/attn_q.weight", ANY),
    ("posnet/attn_q.bias", ANY),
    ("posnet/attn_k.weight", ANY),
    ("posnet/attn_k.bias", ANY),
    ("posnet/attn_v.weight", ANY),
    ("posnet/attn_v.bias", ANY),
    ("posnet/attn_output.weight", ANY),
    ("posnet/attn_output.bias", ANY),
    ("convnext/dw.weight", ANY),
    ("convnext/dw.bias", ANY),
    ("convnext/norm.weight", ANY),
    ("convnext/norm.bias", ANY),
    ("convnext/pw1.weight", ANY),
    ("convnext/pw1.bias", ANY),
    ("convnext/pw2.weight", ANY),
    ("convnext/pw2.bias", ANY),
    ("convnext/gamma.weight", ANY),
    ("shortconv.in_proj.weight", ANY),
    ("shortconv.conv.weight", ANY),
    ("shortconv.out_proj.weight", ANY),
    ("nextn.eh_proj.weight", ANY),
    ("nextn.eh_proj.scale", ANY),
    ("nextn.eh_proj.input_scale", ANY),
    ("nextn.embed_tokens.weight", ANY),
    ("nextn.enorm.weight", ANY),
    ("nextn.hnorm.weight", ANY),
    ("nextn.shared_head_head.weight", ANY),
    ("nextn.shared_head_head.scale", ANY),
    ("nextn.shared_head_head.input_scale", ANY),
    ("layer_output_norm.weight", Some("nextn.shared_head_norm")),
    ("nextn.shared_head_norm.weight", ANY),
    ("attn_q.lora_a", ANY),
    ("attn_q.lora_b", ANY),
    ("attn_k.lora_a", ANY),
    ("attn_k.lora_b", ANY),
    ("attn_v.lora_a", ANY),
    ("attn_v.lora_b", ANY),
    ("attn_output.lora_a", ANY),
    ("attn_output.lora_b", ANY),
    ("ffn_gate.lora_a", ANY),
    ("ffn_gate.lora_b", ANY),
    ("ffn_up.lora_a", ANY),
    ("ffn_up.lora_b", ANY),
    ("ffn_down.lora_a", ANY),
    ("ffn_down.lora_b", ANY),
];

/// The metadata pairs of a saved file: llama.cpp's hyper-parameters before the vocabulary's
/// pairs and after them.
type Pairs = (Vec<(String, Value)>, Vec<(String, Value)>);

/// What saving needs from the loaded files, read while loading: the metadata llama.cpp would
/// write (or why this model cannot be saved) and where each tensor's bytes are.
pub struct Saving {
    arch: &'static dyn ArchSpec,
    pairs: std::result::Result<Pairs, String>,
    /// `general.name` ("n/a" when the file has none, as llama.cpp).
    name: Vec<u8>,
    n_layer_all: usize,
    /// Per layer, the block whose weights it runs (HRM-Text's cycles run blocks again).
    blocks: Vec<usize>,
    /// Per layer, whether its `llama_layer` holds the model's rotary factors (a table all layers
    /// share is written where the first of them meets it).
    factor_layers: Vec<bool>,
    tensors: Vec<SavedTensor>,
}

impl Saving {
    /// Reads what llama.cpp would hold from the file's metadata (after overrides) and from what
    /// loading derived (`hp`, for the values llama.cpp's loader sets itself); `blocks`: per layer,
    /// the block whose weights it runs.
    pub fn read(
        arch: &'static dyn ArchSpec,
        hp: &HParams,
        meta: &Meta,
        n_vocab: u32,
        blocks: Vec<usize>,
        tensors: Vec<SavedTensor>,
    ) -> Result<Saving> {
        // A name that is not a string does not stop loading here (llama.cpp refuses such a file).
        let name = match meta.str_opt("general.name") {
            Ok(Some(s)) => s.split(|&b| b == 0).next().unwrap_or_default().to_vec(),
            _ => b"n/a".to_vec(),
        };
        let pairs = Facts::read(arch, hp, meta, n_vocab)
            .and_then(|f| Ok((f.pairs(HEAD)?, f.pairs(TAIL)?)))
            .map_err(|e| e.to_string());
        Ok(Saving {
            arch,
            pairs,
            name,
            n_layer_all: meta.u32(&format!("{}.block_count", arch.facts().name))? as usize,
            blocks,
            factor_layers: (0..hp.n_layer as usize)
                .map(|il| hp.rope_factors_swa || !hp.is_swa(il))
                .collect(),
            tensors,
        })
    }

    /// Writes the model as llama.cpp's saver would, aside and then renamed into place; `files`:
    /// the bytes of the loaded files (the weights as they are now, trained or not);
    /// `n_ctx_train`: the training context as the model holds it now (training sets it).
    pub fn write(&self, path: &str, n_ctx_train: u32, vocab: &Vocab, files: &[&[u8]]) -> Result<()> {
        let arch = self.arch.facts().name;
        if !self.arch.facts().saved {
            return Err(Error::invalid(format!(
                "llama.cpp 0.3.36 does not save '{arch}' models (its saver stops the process on them)"
            )));
        }
        let (head, tail) = self.pairs.as_ref().map_err(|why| Error::invalid(why.clone()))?;
        let mut w = MetaWriter::default();
        w.set("general.architecture", Value::Str(arch.as_bytes().to_vec()));
        w.set("general.name", Value::Str(self.name.clone()));
        let ctx_key = format!("{arch}.context_length");
        let head = head.iter().map(|(k, v)| match *k == ctx_key {
            true => (k.clone(), Value::U32(n_ctx_train)),
            false => (k.clone(), v.clone()),
        });
        for (key, value) in head.chain(vocab_pairs(vocab)?).chain(tail.iter().cloned()) {
            w.set(&key, value);
        }
        let layers = (self.n_layer_all, self.blocks.as_slice(), self.factor_layers.as_slice());
        let order = tensor_order(&self.tensors, self.arch, layers)?;
        for t in &order {
            w.add_tensor(t.entry.clone())?;
        }
        let mut sink = Sink::new(&[path.to_string()], &[w])?;
        for t in order {
            let bytes = files
                .get(t.file)
                .and_then(|f| f.get(t.start..t.start + t.size))
                .ok_or_else(|| Error::Internal(format!("tensor '{}' lies outside its file", t.entry.name)))?;
            sink.write(bytes)?;
            sink.pad(t.size as u64)?;
        }
        sink.finish()
    }
}

/// The file's values llama.cpp's generic loading derives others from, and what loading here
/// derived (`hp`: the values llama.cpp's loader sets itself, `Rule::Held`).
pub struct Facts<'a, 'm> {
    arch: &'a dyn ArchSpec,
    pub hp: &'a HParams,
    meta: &'a Meta<'m>,
    n_vocab: u32,
    pub n_layer_all: usize,
    /// Layers without the next-token-prediction ones (llama.cpp's `n_layer()`).
    pub n_layer: usize,
    pub n_head: u32,
    pub key_length: u32,
    value_length: u32,
    n_rot: u32,
    pub n_embd: u32,
    /// Sliding-window layers, when any.
    sliding: Option<Vec<u32>>,
}

impl<'a, 'm> Facts<'a, 'm> {
    fn read(arch: &'a dyn ArchSpec, hp: &'a HParams, meta: &'a Meta<'m>, n_vocab: u32) -> Result<Facts<'a, 'm>> {
        let sliding = hp.has_sliding_layers().then_some(hp.swa_layers.as_slice());
        let key = |s: &str| format!("{}.{s}", arch.facts().name);
        let n_layer_all = meta.u32(&key("block_count"))? as usize;
        let nextn = meta.u32_opt(&key("nextn_predict_layers"))?.unwrap_or(0) as usize;
        let n_embd = meta.u32(&key("embedding_length"))?;
        let heads = meta.u32_per_layer(&key("attention.head_count"), n_layer_all)?;
        let n_head = heads.and_then(|h| h.first().copied()).unwrap_or(0);
        let head_dim = |s: &str| -> Result<u32> {
            Ok(match n_head {
                0 => 0,
                n => meta.u32_opt(&key(s))?.unwrap_or(n_embd / n),
            })
        };
        let key_length = head_dim("attention.key_length")?;
        let value_length = head_dim("attention.value_length")?;
        let n_rot = match n_head {
            0 => 0,
            _ => meta.u32_opt(&key("rope.dimension_count"))?.unwrap_or(key_length),
        };
        Ok(Facts {
            arch,
            hp,
            meta,
            n_vocab,
            n_layer_all,
            n_layer: n_layer_all.saturating_sub(nextn),
            n_head,
            key_length,
            value_length,
            n_rot,
            n_embd,
            sliding: match sliding {
                Some(s) if s.len() == n_layer_all => Some(s.iter().map(|&b| u32::from(b)).collect()),
                Some(s) => {
                    return Err(Error::Internal(format!(
                        "{} sliding-window flags for {n_layer_all} layers",
                        s.len()
                    )))
                }
                None => None,
            },
        })
    }

    fn pairs(&self, table: &[(&str, Rule)]) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::with_capacity(table.len());
        for &(suffix, rule) in table {
            let own = self.arch.facts().saved_rules.iter().find(|&&(key, _)| key == suffix);
            let rule = own.map_or(rule, |&(_, rule)| rule);
            let key = match suffix.starts_with("xielu.") {
                true => suffix.to_string(),
                false => format!("{}.{suffix}", self.arch.facts().name),
            };
            let read = COMMON.contains(&suffix) || self.arch.facts().reads(suffix);
            if let Some(v) = self.value(&key, rule, read)? {
                out.push((key, v));
            }
        }
        Ok(out)
    }

    /// The value llama.cpp writes for `key`; `read`: whether its loader reads the key for this
    /// architecture (if not, the value is the one it holds without the file).
    fn value(&self, key: &str, rule: Rule, read: bool) -> Result<Option<Value>> {
        let unread = GgufFile::default();
        let unread = Meta(&unread);
        let m = if read { self.meta } else { &unread };
        let u32_or = |d: u32| -> Result<Value> { Ok(Value::U32(m.u32_opt(key)?.unwrap_or(d))) };
        // llama.cpp reads a per-layer array of flags as counts too.
        let per_layer = |d: u32| -> Result<Vec<u32>> {
            let v = match m.0.get(key) {
                Some(Value::Array(Array::Bool(_))) => m
                    .bool_per_layer(key, self.n_layer_all)?
                    .map(|b| b.into_iter().map(u32::from).collect()),
                _ => m.u32_per_layer(key, self.n_layer_all)?,
            };
            Ok(v.unwrap_or_else(|| vec![d; self.n_layer_all]))
        };
        Ok(Some(match rule {
            U32(d) => u32_or(d)?,
            I32(d) => Value::I32(
                m.int_opt(key)?
                    .map_or(Ok(d), i32::try_from)
                    .map_err(|_| out_of_range(key))?,
            ),
            F32(d) => Value::F32(m.f32_opt(key)?.unwrap_or(d)),
            Bool(d) => Value::Bool(m.bool_opt(key)?.unwrap_or(d)),
            Required => Value::U32(m.u32(key)?),
            VocabSize => Value::U32(self.n_vocab),
            NonZero => match m.u32_opt(key)? {
                Some(n) if n > 0 => Value::U32(n),
                _ => return Ok(None),
            },
            Layers(d) => collapse(&per_layer(d)?[..self.n_layer]),
            LayersOfHeads => collapse(&per_layer(self.n_head)?[..self.n_layer]),
            FirstLayer => Value::U32(per_layer(0)?.first().copied().unwrap_or(0)),
            LayerF32 => Value::Array(Array::F32(
                m.f32_per_layer(key, self.n_layer_all)?
                    .unwrap_or_else(|| vec![0.0; self.n_layer_all]),
            )),
            FullI32(d) => Value::Array(Array::I32(vec![d; MAX_LAYERS])),
            FullF32(d) => Value::Array(Array::F32(vec![d; MAX_LAYERS])),
            Sections => Value::Array(Array::I32(m.i32_array(key, 4)?.unwrap_or(vec![0; 4]))),
            HeadDim if key.ends_with("key_length") => Value::U32(self.key_length),
            HeadDim => Value::U32(self.value_length),
            RopeDims => Value::U32(self.n_rot),
            SwaOf(full) => u32_or(match full {
                "attention.key_length" => self.key_length,
                "attention.value_length" => self.value_length,
                _ => self.n_rot,
            })?,
            OrigCtx => u32_or(m.u32(&format!("{}.context_length", self.arch.facts().name))?)?,
            ScalingType => Value::Str(m.str_opt(key)?.unwrap_or(b"linear").to_vec()),
            ScalingFactor => {
                // llama.cpp keeps the inverse (1 when absent or 0) and inverts it again to write.
                let old = format!("{}.rope.scale_linear", self.arch.facts().name);
                let factor = match m.f32_opt(key)? {
                    Some(f) => f,
                    None => m.f32_opt(&old)?.unwrap_or(0.0),
                };
                let scale = if factor == 0.0 { 1.0 } else { 1.0 / factor };
                Value::F32(if scale == 1.0 { 0.0 } else { 1.0 / scale })
            }
            Labels => Value::Array(Array::Str(m.str_array_opt(key)?.map(<[_]>::to_vec).unwrap_or_default())),
            SlidingPattern => match &self.sliding {
                Some(flags) => Value::Array(Array::U32(flags.clone())),
                None => return Ok(None),
            },
            Held(held) => held(self),
            PleGroup(of) => match &self.hp.ple {
                Some(p) => of(p),
                None => return Ok(None),
            },
        }))
    }
}

fn out_of_range(key: &str) -> Error {
    Error::model(format!("key '{key}' is out of range"))
}

/// llama.cpp writes a per-layer value once when every layer has the same. The hyper-connected
/// models' ratios are written whole (`whole_compress_ratios`); others' as any per-layer value.
fn compress_ratios(f: &Facts) -> Value {
    match f.hp.hc_count > 0 {
        true => whole_compress_ratios(f),
        false => collapse(&layer_compress_ratios(f)[..f.n_layer]),
    }
}

/// The compression ratios written whole, one per layer (next-token-prediction layers too).
pub fn whole_compress_ratios(f: &Facts) -> Value {
    Value::Array(Array::U32(layer_compress_ratios(f)))
}

fn layer_compress_ratios(f: &Facts) -> Vec<u32> {
    let mut ratios = f.hp.compress_ratios.clone();
    ratios.resize(f.n_layer_all, 0);
    ratios
}

/// Per-layer flags as llama.cpp writes them (one value when all agree).
pub fn flags(v: &[bool]) -> Value {
    collapse(&v.iter().map(|&b| u32::from(b)).collect::<Vec<_>>())
}

fn collapse(v: &[u32]) -> Value {
    match v.first() {
        Some(&x) if v.iter().all(|&y| y == x) => Value::U32(x),
        _ => Value::Array(Array::U32(v.to_vec())),
    }
}

/// llama.cpp's `llama_token_type` for a token's attributes (a combination of flags: undefined).
fn token_type(attr: u32) -> i32 {
    match attr {
        1 => 2,  // unknown
        2 => 5,  // unused
        4 => 1,  // normal
        8 => 3,  // control
        16 => 4, // user defined
        32 => 6, // byte
        _ => 0,  // undefined
    }
}

/// The vocabulary's pairs, as llama.cpp's saver writes them.
fn vocab_pairs(vocab: &Vocab) -> Result<Vec<(String, Value)>> {
    let facts = vocab.saved_facts();
    if facts.has_charsmap {
        // llama.cpp's saver aborts on a precompiled character map (it has no GGUF type for it).
        return Err(Error::invalid(
            "llama.cpp cannot save a vocabulary with a precompiled character map",
        ));
    }
    let n = vocab.n_tokens();
    let mut texts = Vec::with_capacity(n);
    let mut scores = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    for id in 0..n as i32 {
        texts.push(vocab.text(id)?.to_vec());
        scores.push(vocab.score(id)?);
        types.push(token_type(vocab.attr(id)?));
    }
    let key = |s: &str| format!("tokenizer.ggml.{s}");
    let mut out = vec![
        (key("model"), Value::Str(facts.model.clone())),
        (key("pre"), Value::Str(facts.pre.clone())),
        (key("tokens"), Value::Array(Array::Str(texts))),
        (key("token_type"), Value::Array(Array::I32(types))),
        (key("token_type_count"), Value::U32(facts.n_token_types)),
        (key("scores"), Value::Array(Array::F32(scores))),
        (key("merges"), Value::Array(Array::Str(facts.merges.clone()))),
    ];
    // llama.cpp's saver writes no empty string (a vocabulary without a pre-tokenizer).
    out.retain(|(_, v)| !matches!(v, Value::Str(s) if s.is_empty()));
    let ids = vocab.special_ids();
    let id_pairs = |names: &[(&str, i32)], out: &mut Vec<(String, Value)>| {
        for &(name, id) in names {
            if id >= 0 {
                out.push((key(name), Value::U32(id as u32)));
            }
        }
    };
    id_pairs(
        &[
            ("bos_token_id", ids.bos),
            ("eos_token_id", ids.eos),
            ("eot_token_id", ids.eot),
            ("eom_token_id", ids.eom),
            ("unknown_token_id", ids.unk),
            ("seperator_token_id", ids.sep),
            ("padding_token_id", ids.pad),
        ],
        &mut out,
    );
    out.extend([
        (key("add_bos_token"), Value::Bool(vocab.add_bos())),
        (key("add_eos_token"), Value::Bool(vocab.add_eos())),
        (key("add_sep_token"), Value::Bool(vocab.add_sep())),
        (key("add_space_prefix"), Value::Bool(vocab.add_space_prefix())),
        (
            key("remove_extra_whitespaces"),
            Value::Bool(facts.remove_extra_whitespaces),
        ),
    ]);
    id_pairs(
        &[
            ("fim_pre_token_id", ids.fim_pre),
            ("fim_suf_token_id", ids.fim_suf),
            ("fim_mid_token_id", ids.fim_mid),
            ("fim_pad_token_id", ids.fim_pad),
            ("fim_rep_token_id", ids.fim_rep),
            ("fim_sep_token_id", ids.fim_sep),
        ],
        &mut out,
    );
    Ok(out)
}

/// A tensor of the loaded files: its entry and where its bytes are.
pub struct SavedTensor {
    pub entry: TensorEntry,
    pub file: usize,
    /// Byte offset in the file.
    pub start: usize,
    pub size: usize,
}

impl SavedTensor {
    pub fn new(file: usize, data_offset: u64, info: &TensorInfo) -> Result<SavedTensor> {
        let start = data_offset
            .checked_add(info.offset)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| Error::model(format!("tensor '{}': offset out of range", info.name)))?;
        Ok(SavedTensor {
            entry: TensorEntry {
                name: info.name.clone(),
                ne: info.ne,
                ggml_type: info.ggml_type,
            },
            file,
            start,
            size: usize::try_from(info.size).map_err(|_| Error::model("tensor too large"))?,
        })
    }

    /// The tensor as llama.cpp holds it: one the file gives in another shape of the same size
    /// than `shape`, the one the architecture asks for (a flat [n_embd * hc] norm of [n_embd, hc]),
    /// llama.cpp reshapes (`TENSOR_ALLOW_RESHAPE`) and saves reshaped.
    pub fn as_loaded(mut self, shape: Option<&[u64]>) -> SavedTensor {
        let Some(shape) = shape.filter(|s| s.len() <= 4) else {
            return self;
        };
        let mut ne = [1u64; 4];
        ne[..shape.len()].copy_from_slice(shape);
        let count = |ne: &[u64]| ne.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
        if count(&ne) == count(&self.entry.ne) {
            self.entry.ne = ne;
        }
        self
    }
}

/// The layer tensors' names in `arch`'s order (see `LAYER_TENSORS`).
fn layer_order(arch: &dyn ArchSpec) -> impl Iterator<Item = &'static str> + '_ {
    let own = arch.facts().layer_members;
    LAYER_TENSORS.iter().filter_map(move |&(name, member)| {
        let here = match member {
            None => !own.iter().any(|&(n, _)| n == name),
            Some(member) => own.contains(&(name, member)),
        };
        here.then_some(name)
    })
}

/// The tensors in llama.cpp's order: the model's members, then each of the `n_layer` layers'
/// (a tensor shared by all layers is written where the first layer meets it: the rotary factors
/// where the first layer `factor_layers` says holds them, every layer when empty). A tensor whose
/// place is not known here refuses the save. `blocks`: see `Saving::blocks`.
fn tensor_order<'t>(
    tensors: &'t [SavedTensor],
    arch: &dyn ArchSpec,
    (n_layer, blocks, factor_layers): (usize, &[usize], &[bool]),
) -> Result<Vec<&'t SavedTensor>> {
    let by_name: std::collections::HashMap<&str, &SavedTensor> =
        tensors.iter().map(|t| (t.entry.name.as_str(), t)).collect();
    let mut out: Vec<&SavedTensor> = Vec::with_capacity(tensors.len());
    let mut placed = std::collections::HashSet::new();
    let mut push = |name: &str, out: &mut Vec<&'t SavedTensor>| {
        if let Some(&t) = by_name.get(name) {
            if placed.insert(t.entry.name.as_str()) {
                out.push(t);
            }
        }
    };
    let separate_output = by_name.contains_key("output.weight");
    if separate_output {
        push("token_embd.weight", &mut out);
    }
    for &name in MODEL_TENSORS {
        if name == "output.weight" && !separate_output && arch.facts().has_output_head {
            push("token_embd.weight", &mut out);
        }
        push(name, &mut out);
    }
    let layer: Vec<&str> = layer_order(arch).collect();
    for il in 0..n_layer {
        // A layer that runs another block's weights holds them (written with that block, once)
        // and its own scales, as llama.cpp's layers alias a block's members.
        let block = blocks.get(il).copied().unwrap_or(il);
        for &suffix in &layer {
            if let Some((stack, name)) = suffix.split_once('/') {
                push(&format!("{stack}.{il}.{name}"), &mut out);
                continue;
            }
            match (suffix.starts_with("rope_"), suffix.ends_with("scale")) {
                (true, _) if factor_layers.get(il) != Some(&false) => push(suffix, &mut out),
                (true, _) => {}
                (false, true) => push(&format!("blk.{il}.{suffix}"), &mut out),
                (false, false) => match suffix.strip_prefix("enc.") {
                    Some(rest) => push(&format!("enc.blk.{block}.{rest}"), &mut out),
                    None => push(&format!("blk.{block}.{suffix}"), &mut out),
                },
            }
        }
    }
    // Without an output head llama.cpp's saver never meets the token embeddings.
    let dropped =
        |name: &str| NOT_SAVED.contains(&name) || (name == "token_embd.weight" && !arch.facts().has_output_head);
    if let Some(t) = tensors
        .iter()
        .find(|t| !placed.contains(t.entry.name.as_str()) && !dropped(&t.entry.name))
    {
        return Err(Error::invalid(format!(
            "tensor '{}': its place in llama.cpp's saved files is not known here",
            t.entry.name
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_layer_values_collapse_only_when_all_agree() {
        assert_eq!(collapse(&[3, 3, 3]), Value::U32(3));
        assert_eq!(collapse(&[1, 0, 1]), Value::Array(Array::U32(vec![1, 0, 1])));
    }

    #[test]
    fn token_types_of_single_attributes_and_combinations() {
        assert_eq!(token_type(4), 1);
        assert_eq!(token_type(8), 3);
        assert_eq!(token_type(32), 6);
        // CONTROL | RSTRIP: llama.cpp's saver knows no type for a combination.
        assert_eq!(token_type(8 | 256), 0);
    }

    fn tensor(name: &str) -> SavedTensor {
        SavedTensor {
            entry: TensorEntry {
                name: name.into(),
                ne: [1, 1, 1, 1],
                ggml_type: 0,
            },
            file: 0,
            start: 0,
            size: 4,
        }
    }

    fn names(tensors: &[SavedTensor]) -> Result<Vec<String>> {
        names_of(tensors, "llama")
    }

    fn arch(name: &str) -> &'static dyn ArchSpec {
        crate::arch::spec(name).unwrap()
    }

    fn names_of(tensors: &[SavedTensor], arch_name: &str) -> Result<Vec<String>> {
        Ok(tensor_order(tensors, arch(arch_name), (2, &[], &[]))?
            .iter()
            .map(|t| t.entry.name.clone())
            .collect())
    }

    #[test]
    fn a_name_architectures_give_different_members_goes_where_the_architecture_puts_it() {
        let layer = [
            "blk.0.attn_output.bias",
            "blk.0.attn_gate.weight",
            "blk.0.attn_qkv.weight",
        ]
        .map(tensor);
        // MiniMax-01's gate is its `wg`, next to the projections; Qwen3-Next's is `wqkv_gate`,
        // after every attention projection and bias.
        assert_eq!(
            names_of(&layer, "minimax-01").unwrap(),
            [
                "blk.0.attn_qkv.weight",
                "blk.0.attn_gate.weight",
                "blk.0.attn_output.bias"
            ]
        );
        assert_eq!(
            names_of(&layer, "qwen3next").unwrap(),
            [
                "blk.0.attn_qkv.weight",
                "blk.0.attn_output.bias",
                "blk.0.attn_gate.weight"
            ]
        );
        for name in ["minimax-01", "qwen3next", "llama"] {
            assert_eq!(layer_order(arch(name)).filter(|&n| n == "attn_gate.weight").count(), 1);
        }
    }

    #[test]
    fn rotary_factors_go_with_the_first_layer_that_holds_them() {
        let tensors = ["blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "rope_freqs.weight"].map(tensor);
        // Sliding layers holding no factors (Gemma 4's; here the first).
        let order = tensor_order(&tensors, arch("gemma3"), (2, &[], &[false, true])).unwrap();
        let names: Vec<&str> = order.iter().map(|t| t.entry.name.as_str()).collect();
        assert_eq!(
            names,
            ["blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "rope_freqs.weight"]
        );
    }

    #[test]
    fn tensors_llama_cpp_does_not_save_are_left_out() {
        let bert = ["token_embd.weight", "token_types.weight", "blk.0.attn_q.weight"].map(tensor);
        // Without an output head llama.cpp's saver never reaches the token embeddings.
        assert_eq!(
            names_of(&bert, "bert").unwrap(),
            ["token_types.weight", "blk.0.attn_q.weight"]
        );
        let gemma = ["token_embd.weight", "dense_2.weight", "output_norm.weight"].map(tensor);
        assert_eq!(
            names_of(&gemma, "gemma3").unwrap(),
            ["output_norm.weight", "token_embd.weight"]
        );
    }

    #[test]
    fn a_layer_running_another_block_holds_its_weights_and_its_own_scales() {
        let tensors = [
            "blk.0.attn_q.weight",
            "blk.1.attn_q.weight",
            "blk.0.attn_q.scale",
            "blk.1.attn_q.scale",
            "blk.2.attn_q.scale",
            "blk.3.attn_q.scale",
        ]
        .map(tensor);
        // Layers 0 to 3 run blocks 0, 0, 0, 1 (HRM-Text's cycles): block 1's weights first come
        // with layer 3.
        let order = tensor_order(&tensors, arch("hrm_text"), (4, &[0, 0, 0, 1], &[])).unwrap();
        assert_eq!(
            order.iter().map(|t| t.entry.name.as_str()).collect::<Vec<_>>(),
            [
                "blk.0.attn_q.weight",
                "blk.0.attn_q.scale",
                "blk.1.attn_q.scale",
                "blk.2.attn_q.scale",
                "blk.1.attn_q.weight",
                "blk.3.attn_q.scale"
            ]
        );
    }

    #[test]
    fn a_tensor_llama_cpp_reshapes_is_saved_in_its_shape() {
        let mut flat = tensor("output_hc_norm.weight");
        flat.entry.ne = [12, 1, 1, 1];
        assert_eq!(flat.as_loaded(Some(&[4, 3])).entry.ne, [4, 3, 1, 1]);
        // Another size is another tensor (a gate per head where one per element was asked).
        let mut gate = tensor("blk.0.attn_gate.weight");
        gate.entry.ne = [8, 2, 1, 1];
        assert_eq!(gate.as_loaded(Some(&[8, 4])).entry.ne, [8, 2, 1, 1]);
    }

    #[test]
    fn every_architecture_names_keys_and_members_the_saver_writes() {
        let written = |key: &str| HEAD.iter().chain(TAIL).any(|&(k, _)| k == key);
        let mut members_used = std::collections::HashSet::new();
        for a in crate::arch::ARCHITECTURES.iter() {
            let name = a.facts().name;
            let reads: Vec<&str> = a
                .facts()
                .read_keys
                .iter()
                .flat_map(|group| group.iter().copied())
                .collect();
            for (i, key) in reads.iter().enumerate() {
                // A common key is read for every architecture: listing it would say nothing.
                assert!(written(key) && !COMMON.contains(key), "{name} reads '{key}'");
                assert!(!reads[..i].contains(key), "{name} reads '{key}' twice");
            }
            let rules = a.facts().saved_rules;
            for (i, &(key, rule)) in rules.iter().enumerate() {
                assert!(written(key), "{name} has a rule for '{key}'");
                assert!(
                    rules[..i].iter().all(|&(k, _)| k != key),
                    "{name} has two rules for '{key}'"
                );
                // Another default than the generic rule's applies only to a value read from the file.
                if matches!(rule, U32(_) | I32(_) | F32(_) | Bool(_)) {
                    assert!(
                        COMMON.contains(&key) || reads.contains(&key),
                        "{name} does not read '{key}'"
                    );
                }
            }
            for &(tensor, member) in a.facts().layer_members {
                assert!(
                    LAYER_TENSORS.contains(&(tensor, Some(member))),
                    "{name}: {tensor} in {member}"
                );
                members_used.insert((tensor, member));
            }
        }
        // Each member the table names is some architecture's.
        for &(tensor, member) in LAYER_TENSORS {
            if let Some(member) = member {
                assert!(members_used.contains(&(tensor, member)), "{tensor} in {member}");
            }
        }
    }

    #[test]
    fn tensors_follow_llama_cpp_members() {
        let tied = [
            "blk.1.ffn_up.weight",
            "output_norm.weight",
            "blk.0.attn_q.weight",
            "token_embd.weight",
        ]
        .map(tensor);
        // No separate output head: the embeddings are written where the head goes.
        assert_eq!(
            names(&tied).unwrap(),
            [
                "output_norm.weight",
                "token_embd.weight",
                "blk.0.attn_q.weight",
                "blk.1.ffn_up.weight"
            ]
        );
        let separate = [
            "output.weight",
            "rope_freqs.weight",
            "blk.0.attn_norm.weight",
            "token_embd.weight",
        ]
        .map(tensor);
        assert_eq!(
            names(&separate).unwrap(),
            [
                "token_embd.weight",
                "output.weight",
                "blk.0.attn_norm.weight",
                "rope_freqs.weight"
            ]
        );
        let unknown = ["token_embd.weight", "blk.0.something_new.weight"].map(tensor);
        assert!(names(&unknown).is_err());
    }
}
