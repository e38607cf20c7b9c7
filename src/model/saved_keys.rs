//! The hyper-parameter keys llama.cpp's loader reads for each architecture beyond the ones it
//! reads for all (`saver::COMMON`): its saver writes the value it holds, so a key an architecture
//! does not read is saved with llama.cpp's default whatever the file says. Read from each
//! architecture's `load_arch_hparams` in llama.cpp 0.3.36 (the keys its saver writes only).

/// Architectures (by `general.architecture`), and the keys (without the architecture prefix)
/// each of them reads.
#[rustfmt::skip]
pub(super) const READ_KEYS: &[(&[&str], &[&str])] = &[
    (
        &["afmoe"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &[
            "arcee", "arctic", "baichuan", "chatglm", "cogvlm", "deci", "dream", "exaone", "gemma",
            "internlm2", "llada", "llama", "maincoder", "nanbeige", "olmoe", "openelm",
            "pangu-embedded", "phimoe", "plamo", "qwen", "qwen2", "qwen3", "refact", "seed_oss",
            "smollm3", "xverse"
        ],
        &["attention.layer_norm_rms_epsilon"],
    ),
    (
        &["bailingmoe"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["bailingmoe2"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "expert_shared_count", "expert_weights_scale",
            "expert_weights_norm", "expert_gating_func", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["bailingmoe3"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "swiglu_clamp_exp", "swiglu_clamp_shexp",
            "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
            "expert_gating_func", "attention.layer_norm_rms_epsilon", "attention.q_lora_rank",
            "attention.kv_lora_rank", "attention.key_length_mla", "attention.value_length_mla",
            "rope.dimension_sections", "ssm.conv_kernel", "kda.head_dim", "kda.safe_gate",
            "kda.gate_lower_bound"
        ],
    ),
    (
        &[
            "bert", "bloom", "codeshell", "falcon", "gpt2", "jais2", "nemotron", "nomic-bert",
            "orion", "phi2", "pockettts", "stablelm", "starcoder", "starcoder2"
        ],
        &["attention.layer_norm_epsilon"],
    ),
    (
        &["cohere2"],
        &[
            "logit_scale", "attention.layer_norm_epsilon", "attention.sliding_window",
            "rope.freq_base_swa"
        ],
    ),
    (
        &["cohere2moe"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "expert_shared_count", "expert_weights_scale",
            "expert_weights_norm", "expert_gating_func", "logit_scale",
            "attention.layer_norm_epsilon", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["command-r"],
        &["logit_scale", "attention.layer_norm_epsilon"],
    ),
    (
        &["dbrx", "olmo"],
        &["attention.clamp_kqv", "attention.layer_norm_epsilon"],
    ),
    (
        &["deepseek"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["deepseek2", "mistral4"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank",
            "attention.temperature_length", "attention.temperature_scale", "attention.key_length_mla",
            "attention.value_length_mla", "rope.scaling.yarn_log_multiplier"
        ],
    ),
    (
        &["deepseek32"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank",
            "attention.key_length_mla", "attention.value_length_mla", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "rope.dimension_sections",
            "rope.scaling.yarn_log_multiplier"
        ],
    ),
    (
        &["deepseek4"],
        &[
            "expert_feed_forward_length", "swiglu_clamp_exp", "swiglu_clamp_shexp",
            "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
            "expert_gating_func", "attention.layer_norm_rms_epsilon", "attention.q_lora_rank",
            "attention.sliding_window", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "attention.output_group_count",
            "attention.output_lora_rank", "attention.compress_rope_freq_base",
            "attention.compress_ratios", "hyper_connection.count",
            "hyper_connection.sinkhorn_iterations", "hyper_connection.epsilon", "hash_layer_count"
        ],
    ),
    (
        &["dots1"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["dots3note"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank",
            "attention.sliding_window", "attention.sliding_window_pattern",
            "attention.key_length_mla", "attention.value_length_mla", "attention.key_length_mla_swa",
            "attention.value_length_mla_swa", "attention.kv_lora_rank_swa",
            "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
            "attention.indexer.types", "rope.freq_base_swa"
        ],
    ),
    (
        &["ernie4_5", "ernie4_5-moe", "paddleocr"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "interleave_moe_layer_step",
            "attention.layer_norm_rms_epsilon", "rope.dimension_sections"
        ],
    ),
    (
        &["exaone-moe", "laguna"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length",
            "expert_shared_feed_forward_length", "expert_shared_count", "expert_weights_scale",
            "expert_weights_norm", "expert_gating_func", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["exaone4", "olmo2", "plamo3"],
        &["attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base_swa"],
    ),
    (
        &["falcon-h1", "mamba2", "plamo2"],
        &[
            "attention.layer_norm_rms_epsilon", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["gemma2"],
        &[
            "attn_logit_softcapping", "final_logit_softcapping", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["gemma3"],
        &[
            "final_logit_softcapping", "attention.layer_norm_rms_epsilon", "attention.sliding_window",
            "rope.freq_base_swa"
        ],
    ),
    (
        &["glm-dsa"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank",
            "attention.key_length_mla", "attention.value_length_mla", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "attention.indexer.types",
            "rope.dimension_sections"
        ],
    ),
    (
        &["glm4", "hunyuan-dense", "hunyuan_vl"],
        &["attention.layer_norm_rms_epsilon", "rope.dimension_sections"],
    ),
    (
        &["glm4moe"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "rope.dimension_sections"
        ],
    ),
    (
        &["glm5-next"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "swiglu_clamp_exp",
            "swiglu_clamp_shexp", "expert_shared_count", "expert_weights_scale",
            "expert_weights_norm", "expert_gating_func", "attention.layer_norm_epsilon",
            "attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank",
            "attention.key_length_mla", "attention.value_length_mla", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "attention.indexer.kpool",
            "attention.indexer.kpool_select_tail", "attention.indexer.types",
            "hyper_connection.count", "hyper_connection.sinkhorn_iterations",
            "hyper_connection.epsilon", "ssm.conv_kernel", "kda.head_dim", "kda.gate_lower_bound"
        ],
    ),
    (
        &["gpt-oss", "mellum"],
        &[
            "expert_feed_forward_length", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["gptneox"],
        &["use_parallel_residual", "attention.layer_norm_epsilon"],
    ),
    (
        &["granite"],
        &[
            "expert_shared_feed_forward_length", "deepstack_mapping", "logit_scale", "residual_scale",
            "embedding_scale", "attention.layer_norm_rms_epsilon", "attention.scale"
        ],
    ),
    (
        &["granite_swa"],
        &[
            "expert_shared_feed_forward_length", "deepstack_mapping", "logit_scale", "residual_scale",
            "embedding_scale", "attention.layer_norm_rms_epsilon", "attention.rope_pattern",
            "attention.sliding_window", "attention.sliding_window_pattern", "attention.scale"
        ],
    ),
    (
        &["granitehybrid"],
        &[
            "expert_shared_feed_forward_length", "logit_scale", "residual_scale", "embedding_scale",
            "attention.layer_norm_rms_epsilon", "attention.scale", "ssm.inner_size",
            "ssm.conv_kernel", "ssm.state_size", "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["granitemoe"],
        &[
            "expert_shared_feed_forward_length", "logit_scale", "residual_scale", "embedding_scale",
            "attention.layer_norm_rms_epsilon", "attention.scale"
        ],
    ),
    (
        &["grok"],
        &[
            "expert_feed_forward_length", "logit_scale", "attn_logit_softcapping",
            "router_logit_softcapping", "final_logit_softcapping", "embedding_scale",
            "attention.layer_norm_rms_epsilon", "attention.output_scale",
            "attention.temperature_length", "rope.scaling.yarn_ext_factor",
            "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast",
            "rope.scaling.yarn_beta_slow"
        ],
    ),
    (
        &["grovemoe"],
        &[
            "expert_feed_forward_length", "expert_chunk_feed_forward_length", "expert_group_scale",
            "experts_per_group", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["hrm_text"],
        &[
            "embedding_scale", "hrm.layers_per_stack", "hrm.h_cycles", "hrm.l_cycles",
            "hrm.prefix_lm", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["hunyuan-moe", "qwen2moe"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length",
            "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["hy_v3"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length", "expert_weights_scale",
            "expert_weights_norm", "expert_gating_func", "attention.layer_norm_rms_epsilon"
        ],
    ),
    (
        &["hy_v4"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "swiglu_clamp_exp",
            "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
            "expert_gating_func", "attention.layer_norm_rms_epsilon", "attention.q_lora_rank",
            "attention.kv_lora_rank", "attention.key_length_mla", "attention.value_length_mla",
            "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
            "attention.indexer.types", "hyper_connection.count", "hyper_connection.epsilon",
            "hyper_connection.magnitude"
        ],
    ),
    (
        &["jais"],
        &["attention.max_alibi_bias", "attention.layer_norm_epsilon"],
    ),
    (
        &["jamba"],
        &[
            "attention.layer_norm_rms_epsilon", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank"
        ],
    ),
    (
        &["kimi-k3"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_latent_length",
            "expert_shared_count", "expert_weights_scale", "expert_weights_norm",
            "expert_gating_func", "attention.layer_norm_rms_epsilon", "attention.q_lora_rank",
            "attention.kv_lora_rank", "attention.key_length_mla", "attention.value_length_mla",
            "ssm.conv_kernel", "kda.head_dim", "kda.gate_lower_bound", "attn_res.block_size",
            "activation.situ_beta", "activation.situ_linear_beta"
        ],
    ),
    (
        &["kimi-linear"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_gating_func", "attention.layer_norm_rms_epsilon",
            "attention.kv_lora_rank", "attention.key_length_mla", "attention.value_length_mla",
            "ssm.conv_kernel", "kda.head_dim"
        ],
    ),
    (
        &["lfm2"],
        &["attention.layer_norm_rms_epsilon", "attention.sliding_window", "shortconv.l_cache"],
    ),
    (
        &["lfm2moe"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "shortconv.l_cache"
        ],
    ),
    (
        &["llada-moe", "qwen3moe", "rnd1"],
        &["expert_feed_forward_length", "attention.layer_norm_rms_epsilon"],
    ),
    (
        &["llama4"],
        &[
            "expert_feed_forward_length", "interleave_moe_layer_step",
            "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["mamba"],
        &[
            "attention.layer_norm_rms_epsilon", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.dt_b_c_rms"
        ],
    ),
    (
        &["maple"],
        &[
            "expert_feed_forward_length", "swiglu_clamp_exp", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa"
        ],
    ),
    (
        &["mimo2"],
        &[
            "expert_feed_forward_length", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "attention.sliding_window_pattern", "attention.value_scale",
            "rope.freq_base_swa"
        ],
    ),
    (
        &["minicpm"],
        &["logit_scale", "residual_scale", "embedding_scale", "attention.layer_norm_rms_epsilon"],
    ),
    (
        &["minicpm3"],
        &["attention.layer_norm_rms_epsilon", "attention.q_lora_rank", "attention.kv_lora_rank"],
    ),
    (
        &["minimax-01"],
        &["residual_scale", "attention.layer_norm_rms_epsilon", "attention.recurrent_layers"],
    ),
    (
        &["minimax-m2"],
        &["expert_feed_forward_length", "expert_gating_func", "attention.layer_norm_rms_epsilon"],
    ),
    (
        &["minimax-m3"],
        &[
            "leading_dense_block_count", "expert_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
            "attention.layer_norm_rms_epsilon", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "attention.indexer.block_size",
            "attention.indexer.local_blocks"
        ],
    ),
    (
        &["mistral3"],
        &[
            "attention.layer_norm_rms_epsilon", "attention.temperature_scale",
            "rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_beta_fast",
            "rope.scaling.yarn_beta_slow"
        ],
    ),
    (
        &["mpt"],
        &["attention.max_alibi_bias", "attention.clamp_kqv", "attention.layer_norm_epsilon"],
    ),
    (
        &["muse-glimmer"],
        &[
            "logit_scale", "final_logit_softcapping", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["nemotron_h", "nemotron_h_moe"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length", "expert_shared_count",
            "expert_weights_scale", "expert_weights_norm", "attention.layer_norm_epsilon",
            "attention.layer_norm_rms_epsilon", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["phi3"],
        &["attention.layer_norm_rms_epsilon", "attention.sliding_window"],
    ),
    (
        &["qwen2vl"],
        &["rope.dimension_sections"],
    ),
    (
        &["qwen35"],
        &[
            "attention.layer_norm_rms_epsilon", "attention.recurrent_layers",
            "rope.dimension_sections", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["qwen35moe"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length",
            "attention.layer_norm_rms_epsilon", "attention.recurrent_layers",
            "rope.dimension_sections", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["qwen3next"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length",
            "attention.layer_norm_rms_epsilon", "attention.recurrent_layers", "ssm.inner_size",
            "ssm.conv_kernel", "ssm.state_size", "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["qwen3tts", "qwen3vl"],
        &["n_deepstack_layers", "attention.layer_norm_rms_epsilon", "rope.dimension_sections"],
    ),
    (
        &["qwen3vlmoe"],
        &[
            "expert_feed_forward_length", "n_deepstack_layers", "attention.layer_norm_rms_epsilon",
            "rope.dimension_sections"
        ],
    ),
    (
        &["qwen4exp"],
        &[
            "expert_feed_forward_length", "expert_shared_feed_forward_length",
            "attention.layer_norm_rms_epsilon", "attention.indexer.head_count",
            "attention.indexer.key_length", "attention.indexer.top_k", "attention.recurrent_layers",
            "attention.compress_ratios", "hyper_connection.count", "hyper_connection.low_rank",
            "rope.dimension_sections", "ssm.inner_size", "ssm.conv_kernel", "ssm.state_size",
            "ssm.time_step_rank", "ssm.group_count"
        ],
    ),
    (
        &["smallthinker"],
        &[
            "expert_feed_forward_length", "expert_gating_func", "attention.layer_norm_rms_epsilon",
            "attention.sliding_window", "rope.freq_base_swa"
        ],
    ),
    (
        &["spark2_5"],
        &[
            "attention.layer_norm_rms_epsilon", "attention.sliding_window",
            "attention.sliding_window_pattern", "rope.freq_base_swa"
        ],
    ),
    (
        &["talkie"],
        &["logit_scale", "attention.layer_norm_rms_epsilon"],
    ),
];
