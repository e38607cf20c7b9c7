//! Hyper-parameters common to the supported architectures, read from `{arch}.*` keys.

use super::spec::{ArchSpec, Memory};
use crate::error::{Error, Result};
use crate::model::metadata::{missing, Meta};

/// llama.cpp's limit on layers; a larger count is a corrupt or hostile file.
pub const MAX_LAYERS: u32 = 512;
/// Sanity bounds that keep derived sizes far from overflow.
const MAX_EMBD: u32 = 1 << 20;
const MAX_HEADS: u32 = 1 << 12;

/// llama.h's `enum llama_rope_scaling_type` (without "unspecified").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeScaling {
    None,
    Linear,
    Yarn,
    LongRope,
}

impl RopeScaling {
    fn from_name(name: &[u8]) -> Option<RopeScaling> {
        Some(match name {
            b"none" => RopeScaling::None,
            b"linear" => RopeScaling::Linear,
            b"yarn" => RopeScaling::Yarn,
            b"longrope" => RopeScaling::LongRope,
            _ => return None,
        })
    }
}

/// How a sliding-window layer limits attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swa {
    /// To the last `n` positions.
    Window(u32),
    /// To the token's own chunk of `n` positions (Llama 4's chunked attention).
    Chunked(u32),
    /// To the positions at most `n / 2` before or after the token (an encoder's window).
    Symmetric(u32),
}

impl Swa {
    /// Whether a token at `pos` no longer sees a cell at `p0` (llama.cpp's `is_masked_swa`).
    pub fn hides(self, pos: i32, p0: i32) -> bool {
        match self {
            Swa::Window(n) => pos.saturating_sub(p0) >= n as i32,
            // No chunk size: one chunk (the caller never builds one; no division by zero).
            Swa::Chunked(0) => false,
            Swa::Chunked(n) => p0 < pos / n as i32 * n as i32,
            Swa::Symmetric(n) => (pos - p0).abs() > (n / 2) as i32,
        }
    }
}

/// See `HParams::attn_temp`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AttnTemp {
    pub scale: f32,
    pub length: u32,
    pub offset: f32,
}

impl AttnTemp {
    /// The scale of a token at `pos`, computed as llama.cpp computes it (in float, then the
    /// logarithm in double).
    pub fn at(&self, pos: i32) -> f32 {
        let chunks = ((pos as f32 + self.offset) / self.length.max(1) as f32).floor();
        ((f64::from(chunks) + 1.0).ln() * f64::from(self.scale) + 1.0) as f32
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HParams {
    /// `general.architecture`, whose keys are `{arch_name}.*`.
    pub arch_name: &'static str,
    /// llama.h `enum llama_rope_type` of the architecture.
    pub rope_type: i32,
    /// A multi-dimensional rope's sections (dimension pairs per position kind).
    pub rope_sections: [i32; 4],
    pub n_vocab: u32,
    pub n_ctx_train: u32,
    pub n_embd: u32,
    pub n_layer: u32,
    /// Per layer.
    pub n_head: Vec<u32>,
    pub n_head_kv: Vec<u32>,
    pub n_ff: Vec<u32>,
    pub n_embd_head_k: u32,
    pub n_embd_head_v: u32,
    pub n_rot: u32,
    /// The same of the sliding-window layers (`attention.key_length_swa`, `value_length_swa`,
    /// `rope.dimension_count_swa`; the others' when absent): read through `head_k`, `head_v`
    /// and `rot`, which pick by layer.
    pub n_embd_head_k_swa: u32,
    pub n_embd_head_v_swa: u32,
    pub n_rot_swa: u32,
    /// Latent ranks of multi-head latent attention's compressed queries and keys/values
    /// (`attention.q_lora_rank`, `attention.kv_lora_rank`); 0: none. With a key rank, each key
    /// head rotates its last `n_rot` dimensions rather than its first.
    pub n_lora_q: u32,
    pub n_lora_kv: u32,
    /// Absorbed latent attention's key and value head sizes once decompressed
    /// (`attention.key_length_mla`, `attention.value_length_mla`; 0: not absorbed). The cache's
    /// heads are then the latent's: see `kv_latent`.
    pub n_embd_head_k_mla: u32,
    pub n_embd_head_v_mla: u32,
    /// Attention temperature tuning (Llama 4, Mistral Large): a token at `pos` scales its
    /// queries by `ln(floor((pos + offset) / length) + 1) · scale + 1` (`scale` 0: none).
    pub attn_temp: AttnTemp,
    /// Experts only every this many layers (Llama 4's `interleave_moe_layer_step`; 0: not used).
    pub n_moe_layer_step: u32,
    /// `{arch}.moe_every_n_layers`: layer `il` has experts where `il % n == 1` (Nomic BERT MoE's;
    /// 0: none).
    pub moe_every_n_layers: u32,
    /// GroveMoE's chunk experts: their FFN width, the factor their output is added with, and how
    /// many experts share one chunk expert (`expert_chunk_feed_forward_length`,
    /// `expert_group_scale`, `experts_per_group`).
    pub n_ff_chexp: u32,
    pub expert_group_scale: f32,
    pub n_group_experts: u32,
    /// HRM-Text's stacks: layers per stack, high cycles, low cycles (`hrm.*`; zeros otherwise).
    pub hrm: [u32; 3],
    pub rms_eps: f32,
    /// Epsilon of the layer norms (mean and variance) of the architectures that use them.
    pub norm_eps: f32,
    /// `{arch}.attention.causal`: false for encoders, whose tokens see their whole sequence.
    pub causal: bool,
    /// `{arch}.pooling_type` (llama.h's `enum llama_pooling_type`; -1 when the file has none).
    pub pooling_type: i32,
    /// Token types BERT-style models embed (`tokenizer.ggml.token_type_count`).
    pub n_token_types: u32,
    /// Buckets of relative positions whose attention biases the model learned
    /// (`attention.relative_buckets_count`; 0: none).
    pub n_rel_attn_bkts: u32,
    /// An encoder-decoder's decoder: its layer count (`decoder_block_count`, else `n_layer`) and
    /// the token it starts from (`decoder_start_token_id`; -1: none).
    pub dec_n_layer: u32,
    pub dec_start_token: i32,
    /// `{arch}.embedding_length_out`: the width of the embeddings a context gives where it is
    /// not the model's (after LFM2-ColBERT's dense projection; 0: `n_embd`).
    pub n_embd_out: u32,
    /// The widths between the dense projections after pooling (`dense_2_feat_out`,
    /// `dense_3_feat_in`), where the architecture reads them; 0 otherwise.
    pub dense_2_feat_out: u32,
    pub dense_3_feat_in: u32,
    /// Vision features added to the outputs of the first this-many layers (Qwen3-VL's "deepstack"):
    /// input embedding rows carry them after the first `n_embd` values.
    pub n_deepstack: u32,
    /// Ranking ends with a softmax over the classifier's labels (Qwen3's rerankers).
    pub rank_softmax: bool,
    /// `{arch}.classifier.pooling_type`: how ranking pools before its classifier head (mean,
    /// else the first or last token; -1 when the file has none).
    pub pooling_type_cls: i32,
    /// The classifier head's activation is GELU rather than tanh (ModernBERT's).
    pub cls_gelu: bool,
    /// A fused FFN gated by SiLU rather than GELU (ModernBERT's derivatives that say so).
    pub ffn_swiglu: bool,
    pub rope_freq_base: f32,
    /// Base frequency on sliding-window layers (llama.cpp defaults it to 10000, not the global base);
    /// sliding layers rotate with it.
    pub rope_freq_base_swa: f32,
    pub rope_freq_scale: f32,
    /// How the model was trained to extend its context (`{arch}.rope.scaling.type`), and the
    /// factor its rotations' magnitudes are multiplied by (`rope.scaling.attn_factor`).
    pub rope_scaling: RopeScaling,
    pub rope_attn_factor: f32,
    /// YaRN's settings where a context leaves them unset (negative): extrapolation mix (-1: by
    /// the scaling type), magnitude factor, correction range; and the magnitude's log multiplier
    /// (`rope.scaling.yarn_log_multiplier`, 0: none). Only the architectures whose llama.cpp
    /// loader reads the keys take them from the file.
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub rope_yarn_log_mul: f32,
    /// YaRN's magnitude scale over the one the log multiplier asks for (llama.cpp assumes 1;
    /// DeepSeek 2 takes the log multiplier itself, which cancels the correction).
    pub rope_yarn_mscale: f32,
    /// Frequency scale on sliding-window layers (1 unless the architecture says otherwise).
    pub rope_freq_scale_swa: f32,
    /// The frequency scale llama.cpp's K-shift gives sliding layers where its graph rotates them
    /// by another (dots.llm3's graph takes the context's, its K-shift llama.cpp's default of 1).
    pub shift_freq_scale_swa: Option<f32>,
    pub n_ctx_orig_yarn: u32,
    /// Sliding-window size (0: none) and which layers use it; chunked (Llama 4) when
    /// `swa_chunked`, or reaching both ways (EmbeddingGemma) when `swa_symmetric`, rather than
    /// trailing the token.
    pub n_swa: u32,
    pub swa_chunked: bool,
    pub swa_symmetric: bool,
    pub swa_layers: Vec<bool>,
    /// Scale of attention scores; 0 means 1/sqrt(head size).
    pub attn_scale: f32,
    /// Soft caps (cap * tanh(x / cap)) of the attention scores and of the logits; 0 means none.
    pub attn_softcap: f32,
    pub final_logit_softcap: f32,
    /// Grok's capping of attention scores before the softmax, cap * tanh(kq * scale / cap)
    /// (cap 0: none); llama.cpp has it only without flash attention, which it turns off for
    /// such models.
    pub kq_tanh_scale: f32,
    pub kq_tanh_cap: f32,
    /// Per-layer limits of the experts' and of the other FFNs' clamped SwiGLU
    /// (`swiglu_clamp_exp`, `swiglu_clamp_shexp`; empty or at most 1e-6: plain SwiGLU), in one of
    /// llama.cpp's two forms: ggml's fused `swiglu_clamp` (Maple's experts), or up clamped to
    /// ±limit times SiLU(gate) capped at limit.
    pub swiglu_clamp_exp: Vec<f32>,
    pub swiglu_clamp_shexp: Vec<f32>,
    pub swiglu_clamp_fused: bool,
    /// Per layer, the xIELU activation's alpha_n, alpha_p, beta and eps (`xielu.*`; empty: the
    /// model has none).
    pub xielu: Vec<[f32; 4]>,
    /// Attention and FFN both read the layer's input and are added to it (GPT-NeoX's
    /// `use_parallel_residual`).
    pub parallel_residual: bool,
    /// Norms after attention and after the FFN instead of before them (`swin_norm`, Swin
    /// Transformer v2's placement).
    pub swin_norm: bool,
    /// ALiBi's maximum bias (0: no ALiBi): scores are biased by head slopes times distance.
    pub max_alibi_bias: f32,
    /// Multipliers of the token embeddings and of each block's attention and FFN outputs, and the
    /// logits' scale (Granite divides by it, Command R multiplies); 0 means none.
    pub embedding_scale: f32,
    pub residual_scale: f32,
    pub logit_scale: f32,
    /// Multiplier of the attention's projected output (MiMo-V2's `attention.value_scale`); 0: none.
    pub attn_value_scale: f32,
    /// Whether the layers rotate queries and keys at all (and the K-shift rotates the cache), and
    /// which of them do when not all (`attention.rope_pattern`; empty: every layer).
    pub rope: bool,
    pub rope_layers: Vec<bool>,
    /// Whether the model's rotary frequency factors (`rope_freqs`) apply to its sliding-window
    /// layers too (else to the others only, whose `llama_layer` alone holds them in llama.cpp).
    pub rope_factors_swa: bool,
    /// A context made non-causal (`llama_set_causal_attn`) lets only the sliding-window layers see
    /// later tokens; the others stay causal (llama.cpp's `LLAMA_NON_CAUSAL_TYPE_SWA_ONLY`).
    pub non_causal_sliding_only: bool,
    /// Width of each layer's slice of the per-layer embeddings
    /// (`embedding_length_per_layer_input`; 0: none).
    pub n_embd_per_layer: u32,
    /// Experts per layer (0: a dense model), how many each token uses, their FFN width (0: not
    /// given) and the factor their mixing weights are multiplied by (0: none).
    pub n_expert: u32,
    pub n_expert_used: u32,
    pub n_ff_exp: u32,
    pub expert_weights_scale: f32,
    /// The first layers with a dense FFN before the experts' layers begin.
    pub n_layer_dense_lead: u32,
    /// llama.cpp's `expert_gating_func` (0: the architecture's own).
    pub expert_gating_func: u32,
    /// Divide the picked experts' weights by their sum (where the architecture reads it).
    pub expert_weights_norm: bool,
    /// The shared expert's FFN width (0: none).
    pub n_ff_shexp: u32,
    /// Clamp queries, keys and values to ±this (0: no clamp; OLMo's `attention.clamp_kqv`).
    pub clamp_kqv: f32,
    /// The width experts work in when they project down to it first (0: n_embd).
    pub moe_latent_size: u32,
    /// Classifier output labels (classifier models only), NUL-terminated.
    pub cls_labels: Vec<Vec<u8>>,
    /// llama.cpp's size label ("256M", "1B", ...) for `llama_model_desc`.
    pub size_label: &'static str,
    /// Which layers keep recurrent state (all of a Mamba, some of a hybrid), and which keep keys
    /// and values (those that attend; every layer unless the architecture says otherwise).
    pub recurrent_layers: Vec<bool>,
    pub kv_layers: Vec<bool>,
    /// Group norms' group count and epsilon (`attention.group_norm_groups`,
    /// `attention.group_norm_epsilon`; 0 where the architecture has none).
    pub norm_groups: u32,
    pub group_norm_eps: f32,
    /// A convolutional decoder's two stacks, each [width, blocks]: PosNet's and ConvNeXt's
    /// (`posnet.*`, `convnext.*`; zeros otherwise).
    pub posnet: [u32; 2],
    pub convnext: [u32; 2],
    /// The cached keys cannot be turned to new positions: llama.cpp refuses a K-shift where the
    /// layers rotate different numbers of dimensions (its shift assumes one).
    pub fixed_keys: bool,
    /// Attention layers after the `n_layer` blocks whose keys and values only the cache holds
    /// (a router's, attending over per-token signals rather than hidden states); the per-layer
    /// vectors cover them. llama.cpp counts them as next-token-prediction layers
    /// (`llama_model_n_layer_nextn`).
    pub n_layer_cache_only: u32,
    /// Adapters built into the model that tokens switch on (see `TokenAdapters`).
    pub token_adapters: Option<TokenAdapters>,
    /// State-space layers: convolution width, inner width, state size per channel, step-size
    /// rank (Mamba 2: heads) and groups; whether Δt, B and C are RMS-normed (Falcon Mamba).
    pub ssm_d_conv: u32,
    pub ssm_d_inner: u32,
    pub ssm_d_state: u32,
    pub ssm_dt_rank: u32,
    pub ssm_n_group: u32,
    pub ssm_dt_b_c_rms: bool,
    /// LFM2's short convolutions: the window they see, the current token included (0: none).
    pub shortconv_l_cache: u32,
    /// How Kimi delta attention turns its decay projection into the decay.
    pub kda_decay: KdaDecay,
    /// Kimi-K3's SiTU activation: the gate branch's β and the up branch's (0: up unchanged).
    pub situ_beta: f32,
    pub situ_linear_beta: f32,
    /// Kimi-K3's routed experts' width when they run in a latent space (0: the model's), and the
    /// block of layers after which its cross-layer residual attention banks a checkpoint (0: none).
    pub n_expert_latent: u32,
    pub attn_res_block_size: u32,
    /// DeepSeek sparse attention's lightning indexer (none: `head_size` 0).
    pub indexer: Indexer,
    /// Hyper-connections (HY-V4): the residual stream's copies (0: a plain residual), the gates'
    /// floor and the post gate's magnitude.
    pub hc_count: u32,
    pub hc_eps: f32,
    pub hc_magnitude: f32,
    /// GLM5-Next's hyper-connections mix the copies by a matrix made doubly stochastic by this
    /// many Sinkhorn iterations (0: no mixing matrix).
    pub hc_sinkhorn_iters: u32,
    /// The epsilon of the delta rule's query and key L2 norms (0: the RMS norms').
    pub delta_l2_eps: f32,
    /// Qwen4-exp's low-rank hyper-connections: the rank of their gate projections.
    pub hc_low_rank: u32,
    /// Per layer, how many positions one compressed key covers (0: none): Qwen4-exp's sparse
    /// attention (QSA) pools its indexer keys so; DeepSeek-V4 compresses its keys by 4 (CSA,
    /// with a lightning indexer picking among them) or 128 (HCA) beside the sliding window.
    pub compress_ratios: Vec<u32>,
    /// DeepSeek-V4: the rope base of its compressing layers and compressed keys.
    pub compress_rope_base: f32,
    /// DeepSeek-V4's grouped low-rank output projection: head groups, and each group's rank.
    pub o_groups: u32,
    pub o_lora_rank: u32,
    /// DeepSeek-V4's first layers route each token by a fixed table of experts (hash routing).
    pub n_hash_layers: u32,
    /// Qwen4-exp's n-gram hash embeddings (PLE) into one linear layer's residual streams.
    pub ple: Option<Ple>,
    /// The WKV time mixing's sizes (none: head size 0).
    pub wkv: Wkv,
}

/// The sizes of WKV time mixing (a linear attention whose per-head matrix state is carried from
/// token to token, with token-shifted inputs): the head size (0: none); the previous token's
/// vectors each layer keeps per sequence (`token_shift_count`); the low ranks of the
/// token-shift mix and of the decay (`time_mix_extra_dim`, `time_decay_extra_dim`), or of the
/// decay, in-context learning rate, value residual and gate (`attention.*_lora_rank`); and how
/// many layers pass between halvings of the residual stream (0: never).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wkv {
    pub head_size: u32,
    pub token_shift_count: u32,
    pub mix_extra_dim: u32,
    pub decay_extra_dim: u32,
    pub lora_decay: u32,
    pub lora_iclr: u32,
    pub lora_value_res_mix: u32,
    pub lora_gate: u32,
    pub rescale_every: u32,
}

/// Qwen4-exp's per-layer embeddings (PLE): each token's n-grams (it and up to `ngram - 1` tokens
/// before it, cut at an end-of-sequence token) are hashed to rows of `per_layer_token_embd`,
/// `heads_per_ngram` heads of `head_dim` per n-gram length; a gated value and a causal
/// convolution (dilated by `ngram`, its history kept in the recurrent state) join `layer`'s
/// residual streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Ple {
    pub layer: usize,
    pub ngram: u32,
    pub heads_per_ngram: u32,
    pub conv_kernel: u32,
    pub eos: u32,
    /// The token an embedding input stands for (llama.cpp falls back to `eos`).
    pub image_token: u32,
    pub head_dim: u32,
    /// The hash's multiplier for each n-gram offset.
    pub multipliers: Vec<u64>,
    /// Per head, the first row of its range in the table and the range's size.
    pub offsets: Vec<u32>,
    pub vocab_sizes: Vec<u32>,
}

impl Ple {
    pub fn n_heads(&self) -> u32 {
        (self.ngram - 1) * self.heads_per_ngram
    }

    /// Floats of the convolution's history per sequence: `(kernel - 1) * ngram` steps of every
    /// stream's channels.
    pub fn conv_state(&self, n_embd: u32, hc: u32) -> u32 {
        (self.conv_kernel - 1) * self.ngram * hc * n_embd
    }
}

/// The lightning indexer of DeepSeek sparse attention: per token it scores every cached key with
/// `n_head` small query heads against one cached indexer key of `head_size` (the layers marked
/// in `layers` keep such keys), and attention then sees only the `top_k` best-scored cells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Indexer {
    pub n_head: u32,
    pub head_size: u32,
    pub top_k: u32,
    pub layers: Vec<bool>,
    /// How the graph rotates the indexer's queries and keys (the K-shift rotates them as NeoX
    /// does whatever this is, as llama.cpp's indexer cache does), and whether their last `n_rot`
    /// dimensions rather than the first.
    pub rope_mode: i32,
    pub rope_trailing: bool,
    /// Whether queries and keys are multiplied by a Hadamard matrix as wide as a key.
    pub hadamard: bool,
    /// MiniMax-M3's block-sparse attention (MSA): positions in blocks of `block` (0: DeepSeek's
    /// per-cell sparse attention instead), `top_k` blocks picked per token and indexer head, the
    /// `local` blocks ending at a token's own always among them.
    pub block: u32,
    pub local: u32,
    /// The indexer's cache keeps a V beside its keys, never written but part of the state
    /// (llama.cpp's MSA indexer cache is a full KV cache).
    pub values: bool,
    /// GLM5-Next's k-pool indexer: pools of `kpool` consecutive positions are scored as one
    /// (0: per cell), and with `kpool_tail` a token also sees its incomplete pool. Each cached
    /// row then holds the key, the pool gate and the pooled key.
    pub kpool: u32,
    pub kpool_tail: bool,
}

impl Indexer {
    /// Whether layer `il` keeps indexer keys.
    pub fn keeps(&self, il: usize) -> bool {
        self.head_size > 0 && self.layers.get(il).copied().unwrap_or(false)
    }

    /// The width of a cached indexer row: the key, with a k-pool also its gate and pooled key.
    pub fn row_width(&self) -> u32 {
        if self.kpool > 0 {
            3 * self.head_size
        } else {
            self.head_size
        }
    }
}

/// Kimi delta attention's decay from its projection `x` (plus the Δt bias) and the per-head
/// `A`, stored as `-exp(A_log)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KdaDecay {
    /// `A · softplus(x)` (Kimi-Linear).
    Softplus,
    /// `bound · sigmoid(-A · x)`, bounded below by `bound` (Kimi-K3).
    LowerBound(f32),
    /// `bound · sigmoid(A · x)` (BailingMoE 3's "safe gate").
    SafeGate(f32),
}

impl HParams {
    /// The width of the embeddings a context gives (`llama_model_n_embd_out`).
    pub fn embd_out(&self) -> u32 {
        match self.n_embd_out {
            0 => self.n_embd,
            n => n,
        }
    }

    /// The width of input embedding rows (`llama_model_n_embd_inp`): the model's embeddings and,
    /// after them, one row of features per deepstack layer.
    pub fn n_embd_inp(&self) -> u32 {
        self.n_embd * (1 + self.n_deepstack)
    }

    /// Scores a ranking head gives per sequence: one per classifier label, 1 without labels.
    pub fn n_cls_out(&self) -> u32 {
        (self.cls_labels.len() as u32).max(1)
    }

    /// The scale of attention scores: the model's, else 1/sqrt(key head size).
    pub fn kq_scale(&self) -> f32 {
        if self.attn_scale != 0.0 {
            self.attn_scale
        } else {
            1.0 / (self.n_embd_head_k as f32).sqrt()
        }
    }

    pub fn is_recurrent(&self, il: usize) -> bool {
        self.recurrent_layers.get(il).copied().unwrap_or(false)
    }

    /// Whether layer `il` rotates its queries and keys (llama.cpp's `has_rope`).
    pub fn has_rope(&self, il: usize) -> bool {
        self.rope && self.rope_layers.get(il).copied().unwrap_or(true)
    }

    /// Absorbed latent attention (DeepSeek's MLA files): the cache keeps only keys, each the
    /// normed latent (`n_lora_kv` wide) then the rotated part, and the values are the latent,
    /// read from the keys. No V cache.
    pub fn kv_latent(&self) -> bool {
        self.n_embd_head_k_mla != 0 && self.n_embd_head_v_mla != 0
    }

    /// How the sliding-window layers limit attention (`n_swa`; trailing, chunked or symmetric).
    pub fn swa(&self) -> Swa {
        if self.swa_chunked {
            Swa::Chunked(self.n_swa)
        } else if self.swa_symmetric {
            Swa::Symmetric(self.n_swa)
        } else {
            Swa::Window(self.n_swa)
        }
    }

    /// Whether some layers attend through a sliding window: llama.cpp then keeps those layers'
    /// keys and values in a cache of their own (its "iswa" caches).
    pub fn has_sliding_layers(&self) -> bool {
        self.n_swa > 0 && self.swa_layers.iter().any(|&s| s)
    }

    /// Whether layer `il` is a sliding-window layer (llama.cpp's `is_swa`, whatever the window).
    pub fn is_swa(&self, il: usize) -> bool {
        self.swa_layers.get(il) == Some(&true)
    }

    /// Layer `il`'s key head size, value head size and rotated dimensions: a sliding-window
    /// layer's own where the model gives them (llama.cpp's `n_embd_head_k(il)`, ...).
    pub fn head_k(&self, il: usize) -> u32 {
        self.sliding_or(il, self.n_embd_head_k_swa, self.n_embd_head_k)
    }

    pub fn head_v(&self, il: usize) -> u32 {
        self.sliding_or(il, self.n_embd_head_v_swa, self.n_embd_head_v)
    }

    pub fn rot(&self, il: usize) -> u32 {
        self.sliding_or(il, self.n_rot_swa, self.n_rot)
    }

    fn sliding_or(&self, il: usize, swa: u32, full: u32) -> u32 {
        if self.is_swa(il) {
            swa
        } else {
            full
        }
    }

    pub fn has_kv(&self, il: usize) -> bool {
        self.kv_layers.get(il).copied().unwrap_or(false)
    }

    /// Floats of a sequence's convolution state per layer: the last `d_conv - 1` inputs of every
    /// convolved channel (the inner width and, in Mamba 2, B and C), or WKV's token-shifted
    /// vectors.
    pub fn n_embd_r(&self) -> u32 {
        if self.wkv.head_size > 0 {
            return self.wkv.token_shift_count * self.n_embd;
        }
        if self.shortconv_l_cache > 0 {
            return self.n_embd * (self.shortconv_l_cache - 1);
        }
        self.ssm_d_conv.saturating_sub(1) * (self.ssm_d_inner + 2 * self.ssm_n_group * self.ssm_d_state)
    }

    /// Positions per token: four for a multi-dimensional rope (M-RoPE, interleaved or not), else
    /// one (also without rotation, rope type -1).
    pub fn n_pos_per_embd(&self) -> u32 {
        if self.rope_type == crate::ggml::ROPE_MROPE || self.rope_type == crate::ggml::ROPE_IMROPE {
            4
        } else {
            1
        }
    }

    /// Floats of a sequence's scan state per layer (WKV's: a head-size square per head).
    pub fn n_embd_s(&self) -> u32 {
        if self.wkv.head_size > 0 {
            return self.n_embd * self.wkv.head_size;
        }
        self.ssm_d_state * self.ssm_d_inner
    }

    /// `{arch}.{suffix}`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch_name)
    }

    pub fn load(arch: &dyn ArchSpec, meta: &Meta, n_vocab: u32) -> Result<HParams> {
        let mut hp = HParams::load_general(arch, meta, n_vocab)?;
        arch.load_hparams(meta, &mut hp)?;
        // Each architecture reads the epsilon of the norms it uses.
        let eps = if hp.norm_eps != 0.0 { hp.norm_eps } else { hp.rms_eps };
        // 0 is llama.cpp's own value where it never reads the key (Qwen2-VL).
        if !(0.0..1.0).contains(&eps) {
            return Err(Error::model(format!("layer-norm epsilon {eps} is out of range")));
        }
        Ok(hp)
    }

    /// The keys every architecture reads (its own are left at their defaults).
    pub fn load_general(arch: &dyn ArchSpec, meta: &Meta, n_vocab: u32) -> Result<HParams> {
        let key = |s: &str| format!("{}.{s}", arch.facts().name);
        let n_layer = meta.u32(&key("block_count"))?;
        if n_layer == 0 || n_layer > MAX_LAYERS {
            return Err(Error::model(format!(
                "absurd layer count {n_layer} (key '{}'; must be 1..={MAX_LAYERS})",
                key("block_count")
            )));
        }
        let n = n_layer as usize;
        let n_embd = meta.u32(&key("embedding_length"))?;
        check_range(&key("embedding_length"), n_embd, 1, MAX_EMBD)?;
        let n_embd_out = meta.u32_opt(&key("embedding_length_out"))?.unwrap_or(0);
        check_range(&key("embedding_length_out"), n_embd_out, 0, MAX_EMBD)?;
        let n_head = meta
            .u32_per_layer(&key("attention.head_count"), n)?
            .ok_or_else(|| missing(&key("attention.head_count")))?;
        let n_head_kv = meta
            .u32_per_layer(&key("attention.head_count_kv"), n)?
            .unwrap_or_else(|| n_head.clone());
        let n_ff = meta
            .u32_per_layer(&key("feed_forward_length"), n)?
            .ok_or_else(|| missing(&key("feed_forward_length")))?;
        // Recurrent layers have no attention heads (and a Mamba no FFN): their files say 0.
        let lo = u32::from(!matches!(arch.facts().memory, Memory::Recurrent | Memory::Hybrid));
        for il in 0..n {
            check_range(&key("attention.head_count"), n_head[il], lo, MAX_HEADS)?;
            // Without attention heads a file may still give its key/value projections' heads
            // (RWKV6-Qwen2's grouped keys and values).
            let kv_max = if n_head[il] == 0 { MAX_HEADS } else { n_head[il] };
            check_range(&key("attention.head_count_kv"), n_head_kv[il], lo, kv_max)?;
            if n_head_kv[il] > 0 && n_head[il] % n_head_kv[il] != 0 {
                return Err(Error::model(format!(
                    "layer {il}: {} query heads cannot be grouped over {} key/value heads",
                    n_head[il], n_head_kv[il]
                )));
            }
            check_range(&key("feed_forward_length"), n_ff[il], lo, 16 * MAX_EMBD)?;
        }
        let head_size = n_embd.checked_div(n_head[0]).unwrap_or(0);
        let n_embd_head_k = meta.u32_opt(&key("attention.key_length"))?.unwrap_or(head_size);
        let n_embd_head_v = meta.u32_opt(&key("attention.value_length"))?.unwrap_or(head_size);
        check_range(&key("attention.key_length"), n_embd_head_k, lo, MAX_EMBD)?;
        check_range(&key("attention.value_length"), n_embd_head_v, lo, MAX_EMBD)?;
        let n_rot = meta.u32_opt(&key("rope.dimension_count"))?.unwrap_or(n_embd_head_k);
        if n_rot > n_embd_head_k || n_rot % 2 != 0 {
            return Err(Error::model(format!(
                "rope dimension count {n_rot} must be even and at most the head size {n_embd_head_k}"
            )));
        }
        // Sliding-window layers' own sizes, where the file gives them.
        let n_embd_head_k_swa = meta.u32_opt(&key("attention.key_length_swa"))?.unwrap_or(n_embd_head_k);
        let n_embd_head_v_swa = meta
            .u32_opt(&key("attention.value_length_swa"))?
            .unwrap_or(n_embd_head_v);
        check_range(&key("attention.key_length_swa"), n_embd_head_k_swa, lo, MAX_EMBD)?;
        check_range(&key("attention.value_length_swa"), n_embd_head_v_swa, lo, MAX_EMBD)?;
        let n_rot_swa = meta.u32_opt(&key("rope.dimension_count_swa"))?.unwrap_or(n_rot);
        if n_rot_swa > n_embd_head_k_swa || n_rot_swa % 2 != 0 {
            return Err(Error::model(format!(
                "'{}' ({n_rot_swa}) must be even and at most '{}' ({n_embd_head_k_swa})",
                key("rope.dimension_count_swa"),
                key("attention.key_length_swa")
            )));
        }
        let n_ctx_train = meta.u32(&key("context_length"))?;
        check_range(&key("context_length"), n_ctx_train, 1, u32::MAX)?;
        let rope_freq_base = meta.f32_opt(&key("rope.freq_base"))?.unwrap_or(10000.0);
        let scale = match meta.f32_opt(&key("rope.scaling.factor"))? {
            Some(f) => Some(f),
            None => meta.f32_opt(&key("rope.scale_linear"))?,
        };
        let rope_freq_scale = match scale {
            Some(f) if f != 0.0 => 1.0 / f,
            _ => 1.0,
        };
        let rope_scaling = match meta.str_opt(&key("rope.scaling.type"))? {
            None => RopeScaling::Linear,
            Some(t) => RopeScaling::from_name(t).ok_or_else(|| {
                Error::model(format!(
                    "unknown rope scaling type '{}' (key '{}')",
                    String::from_utf8_lossy(t),
                    key("rope.scaling.type")
                ))
            })?,
        };
        let (n_expert, n_expert_used) = load_expert_counts(meta, &key, n)?;
        let cls_labels = meta
            .str_array_opt(&key("classifier.output_labels"))?
            .map(|a| a.iter().map(|l| [l.as_slice(), b"\0"].concat()).collect())
            .unwrap_or_default();
        let hp = HParams {
            arch_name: arch.facts().name,
            rope_type: arch.facts().rope_type,
            rope_sections: [0; 4],
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            n_ff,
            n_embd_head_k,
            n_embd_head_v,
            n_rot,
            n_embd_head_k_swa,
            n_embd_head_v_swa,
            n_rot_swa,
            n_lora_q: 0,
            n_lora_kv: 0,
            n_embd_head_k_mla: 0,
            n_embd_head_v_mla: 0,
            hrm: [0; 3],
            n_ff_chexp: 0,
            expert_group_scale: 0.0,
            n_group_experts: 0,
            n_moe_layer_step: 0,
            moe_every_n_layers: 0,
            attn_temp: AttnTemp::default(),
            rms_eps: 0.0,
            norm_eps: 0.0,
            causal: meta.bool_opt(&key("attention.causal"))?.unwrap_or(true),
            // Stored as uint32 or int32; anything outside llama.h's values reads as unspecified.
            pooling_type: meta
                .int_opt(&key("pooling_type"))?
                .filter(|v| (0..=4).contains(v))
                .map_or(-1, |v| v as i32),
            pooling_type_cls: meta
                .int_opt(&key("classifier.pooling_type"))?
                .filter(|v| (0..=4).contains(v))
                .map_or(-1, |v| v as i32),
            cls_gelu: false,
            ffn_swiglu: false,
            n_token_types: meta.u32_opt("tokenizer.ggml.token_type_count")?.unwrap_or(0),
            n_embd_out,
            dense_2_feat_out: 0,
            dense_3_feat_in: 0,
            n_deepstack: 0,
            rank_softmax: false,
            rope_freq_base,
            rope_freq_base_swa: 10000.0,
            rope_freq_scale,
            rope_scaling,
            rope_attn_factor: meta.f32_opt(&key("rope.scaling.attn_factor"))?.unwrap_or(1.0),
            yarn_ext_factor: -1.0,
            yarn_attn_factor: 1.0,
            yarn_beta_fast: 32.0,
            yarn_beta_slow: 1.0,
            rope_yarn_log_mul: 0.0,
            rope_yarn_mscale: 1.0,
            rope_freq_scale_swa: 1.0,
            shift_freq_scale_swa: None,
            n_ctx_orig_yarn: meta
                .u32_opt(&key("rope.scaling.original_context_length"))?
                .unwrap_or(n_ctx_train),
            n_swa: 0,
            swa_chunked: false,
            swa_symmetric: false,
            swa_layers: vec![false; n],
            attn_scale: 0.0,
            attn_softcap: 0.0,
            final_logit_softcap: 0.0,
            kq_tanh_scale: 0.0,
            kq_tanh_cap: 0.0,
            swiglu_clamp_exp: Vec::new(),
            xielu: Vec::new(),
            swin_norm: false,
            swiglu_clamp_shexp: Vec::new(),
            swiglu_clamp_fused: false,
            max_alibi_bias: 0.0,
            parallel_residual: false,
            embedding_scale: 0.0,
            residual_scale: 0.0,
            attn_value_scale: 0.0,
            logit_scale: 0.0,
            rope: true,
            rope_layers: Vec::new(),
            rope_factors_swa: true,
            non_causal_sliding_only: false,
            n_embd_per_layer: 0,
            n_expert,
            n_expert_used,
            n_ff_exp: meta.u32_opt(&key("expert_feed_forward_length"))?.unwrap_or(0),
            expert_weights_scale: 0.0,
            n_layer_dense_lead: 0,
            expert_gating_func: 0,
            expert_weights_norm: false,
            n_ff_shexp: 0,
            clamp_kqv: 0.0,
            moe_latent_size: 0,
            cls_labels,
            size_label: "?B",
            n_rel_attn_bkts: 0,
            dec_n_layer: 0,
            dec_start_token: -1,
            recurrent_layers: vec![false; n],
            kv_layers: vec![true; n],
            norm_groups: 0,
            group_norm_eps: 0.0,
            posnet: [0; 2],
            convnext: [0; 2],
            fixed_keys: false,
            n_layer_cache_only: 0,
            token_adapters: None,
            ssm_d_conv: 0,
            ssm_d_inner: 0,
            ssm_d_state: 0,
            ssm_dt_rank: 0,
            ssm_n_group: 0,
            ssm_dt_b_c_rms: false,
            shortconv_l_cache: 0,
            kda_decay: KdaDecay::Softplus,
            situ_beta: 0.0,
            situ_linear_beta: 0.0,
            n_expert_latent: 0,
            attn_res_block_size: 0,
            indexer: Indexer::default(),
            hc_count: 0,
            hc_eps: 0.0,
            hc_magnitude: 0.0,
            hc_sinkhorn_iters: 0,
            delta_l2_eps: 0.0,
            hc_low_rank: 0,
            compress_ratios: Vec::new(),
            compress_rope_base: 0.0,
            o_groups: 0,
            o_lora_rank: 0,
            n_hash_layers: 0,
            ple: None,
            wkv: Wkv::default(),
        };
        Ok(hp)
    }
}

/// LoRA adapters stacked in the model's own tensors (`<weight>.lora_a`, `.lora_b`, one slot per
/// adapter after slot 0, the base's), each switched on by an activation token: a router layer
/// over the cache finds, per token, the adapter of the activation token it attends to most.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenAdapters {
    /// The adapters' largest rank (the stacks' inner width).
    pub rank: u32,
    /// The router keys' magnitude: +gain at an activation token, -gain elsewhere.
    pub router_gain: f32,
    /// Per adapter, its activation token and the token embedded in its place.
    pub activate: Vec<i32>,
    pub substitute: Vec<i32>,
}

impl TokenAdapters {
    /// The slot (1 on) a token switches on and the token embedded for it; of several adapters
    /// with one activation token, the last (as llama.cpp's maps keep it).
    pub fn of(&self, tok: i32) -> Option<(usize, i32)> {
        let i = self.activate.iter().rposition(|&t| t == tok)?;
        Some((i + 1, self.substitute[i]))
    }
}

/// llama.cpp's limit on experts per layer.
const MAX_EXPERTS: u32 = 1024;

/// `{arch}.expert_count` and `{arch}.expert_used_count` (one count, or one per layer that is the
/// same for all): both 0 for a dense model, otherwise 1..=count used of at most 1024.
fn load_expert_counts(meta: &Meta, key: &dyn Fn(&str) -> String, n_layer: usize) -> Result<(u32, u32)> {
    let n_expert = meta.u32_opt(&key("expert_count"))?.unwrap_or(0);
    check_range(&key("expert_count"), n_expert, 0, MAX_EXPERTS)?;
    let used = meta
        .u32_per_layer(&key("expert_used_count"), n_layer)?
        .unwrap_or_default();
    let n_used = used.first().copied().unwrap_or(0);
    if used.iter().any(|&u| u != n_used) {
        return Err(Error::model(format!(
            "key '{}': a different expert count per layer is not supported",
            key("expert_used_count")
        )));
    }
    let lo = u32::from(n_expert > 0);
    check_range(&key("expert_used_count"), n_used, lo, n_expert)?;
    Ok((n_expert, n_used))
}

fn check_range(key: &str, v: u32, lo: u32, hi: u32) -> Result<()> {
    if v < lo || v > hi {
        return Err(Error::model(format!("key '{key}' = {v} is out of range ({lo}..={hi})")));
    }
    Ok(())
}
