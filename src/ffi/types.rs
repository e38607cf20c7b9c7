//! `#[repr(C)]` mirrors of everything llama.h declares: enums, structs, typedefs, callback types and
//! `#define`s. cbindgen turns this file into `include/llama.h`; the layout asserts at the bottom hold
//! the Rust side to the pinned llama.h's layout (the sdist's header; `scripts/abi_check.py` checks
//! the generated header against it item by item).
//!
//! A C enum is emitted from a Rust `#[repr(C)] enum` that only provides the constants. Values that
//! arrive from C are held in a `#[repr(transparent)]` integer newtype (`SplitMode`, `Ftype`, ...) which
//! cbindgen prints as `enum llama_...`: a caller may pass any integer, and a Rust enum holding an
//! unlisted value would be undefined behaviour.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::mem::{align_of, offset_of, size_of};

/// ggml types that llama.h mentions; the header takes their definitions from ggml's own headers.
pub use ggml_sys::{
    ggml_abort_callback, ggml_backend_buffer_type_t, ggml_backend_dev_t, ggml_backend_sched_eval_callback, ggml_cgraph,
    ggml_context, ggml_log_callback, ggml_log_level, ggml_numa_strategy, ggml_tensor, ggml_threadpool_t, ggml_type,
    gguf_context,
};

// ggml-opt.h is not among the ggml bindings: its handles are opaque pointers here, its callbacks
// are declared in ggml::opt (the header takes all of them from ggml-opt.h).
pub type ggml_opt_dataset_t = *mut c_void;
pub type ggml_opt_result_t = *mut c_void;
pub type ggml_opt_epoch_callback = crate::ggml::opt::EpochCallback;
pub type ggml_opt_get_optimizer_params = crate::ggml::opt::GetOptimizerParams;
pub type ggml_opt_optimizer_type = u32;

pub const LLAMA_DEFAULT_SEED: u32 = 0xFFFFFFFF;
pub const LLAMA_TOKEN_NULL: llama_token = -1;
pub const LLAMA_FILE_MAGIC_GGLA: u32 = 0x67676c61;
pub const LLAMA_FILE_MAGIC_GGSN: u32 = 0x6767736e;
pub const LLAMA_FILE_MAGIC_GGSQ: u32 = 0x67677371;
pub const LLAMA_SESSION_MAGIC: u32 = LLAMA_FILE_MAGIC_GGSN;
pub const LLAMA_SESSION_VERSION: c_int = 10;
pub const LLAMA_STATE_SEQ_MAGIC: u32 = LLAMA_FILE_MAGIC_GGSQ;
pub const LLAMA_STATE_SEQ_VERSION: c_int = 3;
pub const LLAMA_STATE_SEQ_FLAGS_NONE: llama_state_seq_flags = 0;
pub const LLAMA_STATE_SEQ_FLAGS_SWA_ONLY: llama_state_seq_flags = 1;
pub const LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: llama_state_seq_flags = 1;
pub const LLAMA_STATE_SEQ_FLAGS_ON_DEVICE: llama_state_seq_flags = 2;
/// `LLAMA_ROPE_SCALING_TYPE_MAX_VALUE` repeats a value of the enum, which a Rust enum cannot.
pub const LLAMA_ROPE_SCALING_TYPE_MAX_VALUE: c_int = 3;

pub type llama_pos = i32;
pub type llama_token = i32;
pub type llama_seq_id = i32;
pub type llama_state_seq_flags = u32;
pub type llama_sampler_context_t = *mut c_void;
pub type llama_memory_t = *mut llama_memory_i;

pub type llama_progress_callback = Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> bool>;
pub type llama_model_set_tensor_data_t = Option<unsafe extern "C" fn(tensor: *mut ggml_tensor, userdata: *mut c_void)>;
pub type llama_opt_param_filter =
    Option<unsafe extern "C" fn(tensor: *const ggml_tensor, userdata: *mut c_void) -> bool>;

// Opaque handles: C only ever holds pointers to these.
pub struct llama_model {
    _opaque: [u8; 0],
}
pub struct llama_context {
    _opaque: [u8; 0],
}
pub struct llama_vocab {
    _opaque: [u8; 0],
}
pub struct llama_memory_i {
    _opaque: [u8; 0],
}
pub struct llama_adapter_lora {
    _opaque: [u8; 0],
}
pub struct llama_batch_ext {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_vocab_type {
    LLAMA_VOCAB_TYPE_NONE = 0,
    LLAMA_VOCAB_TYPE_SPM = 1,
    LLAMA_VOCAB_TYPE_BPE = 2,
    LLAMA_VOCAB_TYPE_WPM = 3,
    LLAMA_VOCAB_TYPE_UGM = 4,
    LLAMA_VOCAB_TYPE_RWKV = 5,
    LLAMA_VOCAB_TYPE_PLAMO2 = 6,
    LLAMA_VOCAB_TYPE_TEST = 7,
}

/// `enum llama_vocab_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_rope_type {
    LLAMA_ROPE_TYPE_NONE = -1,
    LLAMA_ROPE_TYPE_NORM = 0,
    LLAMA_ROPE_TYPE_NEOX = 2,
    LLAMA_ROPE_TYPE_MROPE = 8,
    LLAMA_ROPE_TYPE_IMROPE = 40,
    LLAMA_ROPE_TYPE_VISION = 24,
}

/// `enum llama_rope_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RopeType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_token_type {
    LLAMA_TOKEN_TYPE_UNDEFINED = 0,
    LLAMA_TOKEN_TYPE_NORMAL = 1,
    LLAMA_TOKEN_TYPE_UNKNOWN = 2,
    LLAMA_TOKEN_TYPE_CONTROL = 3,
    LLAMA_TOKEN_TYPE_USER_DEFINED = 4,
    LLAMA_TOKEN_TYPE_UNUSED = 5,
    LLAMA_TOKEN_TYPE_BYTE = 6,
}

/// `enum llama_token_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_token_attr {
    LLAMA_TOKEN_ATTR_UNDEFINED = 0,
    LLAMA_TOKEN_ATTR_UNKNOWN = 1,
    LLAMA_TOKEN_ATTR_UNUSED = 2,
    LLAMA_TOKEN_ATTR_NORMAL = 4,
    LLAMA_TOKEN_ATTR_CONTROL = 8,
    LLAMA_TOKEN_ATTR_USER_DEFINED = 16,
    LLAMA_TOKEN_ATTR_BYTE = 32,
    LLAMA_TOKEN_ATTR_NORMALIZED = 64,
    LLAMA_TOKEN_ATTR_LSTRIP = 128,
    LLAMA_TOKEN_ATTR_RSTRIP = 256,
    LLAMA_TOKEN_ATTR_SINGLE_WORD = 512,
}

/// `enum llama_token_attr` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenAttr(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_ftype {
    LLAMA_FTYPE_ALL_F32 = 0,
    LLAMA_FTYPE_MOSTLY_F16 = 1,
    LLAMA_FTYPE_MOSTLY_Q4_0 = 2,
    LLAMA_FTYPE_MOSTLY_Q4_1 = 3,
    LLAMA_FTYPE_MOSTLY_Q8_0 = 7,
    LLAMA_FTYPE_MOSTLY_Q5_0 = 8,
    LLAMA_FTYPE_MOSTLY_Q5_1 = 9,
    LLAMA_FTYPE_MOSTLY_Q2_K = 10,
    LLAMA_FTYPE_MOSTLY_Q3_K_S = 11,
    LLAMA_FTYPE_MOSTLY_Q3_K_M = 12,
    LLAMA_FTYPE_MOSTLY_Q3_K_L = 13,
    LLAMA_FTYPE_MOSTLY_Q4_K_S = 14,
    LLAMA_FTYPE_MOSTLY_Q4_K_M = 15,
    LLAMA_FTYPE_MOSTLY_Q5_K_S = 16,
    LLAMA_FTYPE_MOSTLY_Q5_K_M = 17,
    LLAMA_FTYPE_MOSTLY_Q6_K = 18,
    LLAMA_FTYPE_MOSTLY_IQ2_XXS = 19,
    LLAMA_FTYPE_MOSTLY_IQ2_XS = 20,
    LLAMA_FTYPE_MOSTLY_Q2_K_S = 21,
    LLAMA_FTYPE_MOSTLY_IQ3_XS = 22,
    LLAMA_FTYPE_MOSTLY_IQ3_XXS = 23,
    LLAMA_FTYPE_MOSTLY_IQ1_S = 24,
    LLAMA_FTYPE_MOSTLY_IQ4_NL = 25,
    LLAMA_FTYPE_MOSTLY_IQ3_S = 26,
    LLAMA_FTYPE_MOSTLY_IQ3_M = 27,
    LLAMA_FTYPE_MOSTLY_IQ2_S = 28,
    LLAMA_FTYPE_MOSTLY_IQ2_M = 29,
    LLAMA_FTYPE_MOSTLY_IQ4_XS = 30,
    LLAMA_FTYPE_MOSTLY_IQ1_M = 31,
    LLAMA_FTYPE_MOSTLY_BF16 = 32,
    LLAMA_FTYPE_MOSTLY_TQ1_0 = 36,
    LLAMA_FTYPE_MOSTLY_TQ2_0 = 37,
    LLAMA_FTYPE_MOSTLY_MXFP4_MOE = 38,
    LLAMA_FTYPE_MOSTLY_NVFP4 = 39,
    LLAMA_FTYPE_MOSTLY_Q1_0 = 40,
    LLAMA_FTYPE_MOSTLY_Q2_0 = 41,
    LLAMA_FTYPE_GUESSED = 1024,
}

/// `enum llama_ftype` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ftype(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_rope_scaling_type {
    LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED = -1,
    LLAMA_ROPE_SCALING_TYPE_NONE = 0,
    LLAMA_ROPE_SCALING_TYPE_LINEAR = 1,
    LLAMA_ROPE_SCALING_TYPE_YARN = 2,
    LLAMA_ROPE_SCALING_TYPE_LONGROPE = 3,
}

/// `enum llama_rope_scaling_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RopeScalingType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_pooling_type {
    LLAMA_POOLING_TYPE_UNSPECIFIED = -1,
    LLAMA_POOLING_TYPE_NONE = 0,
    LLAMA_POOLING_TYPE_MEAN = 1,
    LLAMA_POOLING_TYPE_CLS = 2,
    LLAMA_POOLING_TYPE_LAST = 3,
    LLAMA_POOLING_TYPE_RANK = 4,
}

/// `enum llama_pooling_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolingType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_attention_type {
    LLAMA_ATTENTION_TYPE_UNSPECIFIED = -1,
    LLAMA_ATTENTION_TYPE_CAUSAL = 0,
    LLAMA_ATTENTION_TYPE_NON_CAUSAL = 1,
}

/// `enum llama_attention_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_flash_attn_type {
    LLAMA_FLASH_ATTN_TYPE_AUTO = -1,
    LLAMA_FLASH_ATTN_TYPE_DISABLED = 0,
    LLAMA_FLASH_ATTN_TYPE_ENABLED = 1,
}

/// `enum llama_flash_attn_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashAttnType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_split_mode {
    LLAMA_SPLIT_MODE_NONE = 0,
    LLAMA_SPLIT_MODE_LAYER = 1,
    LLAMA_SPLIT_MODE_ROW = 2,
    LLAMA_SPLIT_MODE_TENSOR = 3,
}

/// `enum llama_split_mode` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMode(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_load_mode {
    LLAMA_LOAD_MODE_AUTO = -1,
    LLAMA_LOAD_MODE_NONE = 0,
    LLAMA_LOAD_MODE_MMAP = 1,
    LLAMA_LOAD_MODE_MLOCK = 2,
    LLAMA_LOAD_MODE_MMAP_MLOCK = 3,
    LLAMA_LOAD_MODE_DIRECT_IO = 4,
}

/// `enum llama_load_mode` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadMode(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_lazy_mode {
    LLAMA_LAZY_MODE_OFF = 0,
    LLAMA_LAZY_MODE_AUTO = 1,
    LLAMA_LAZY_MODE_ON = 2,
}

/// `enum llama_lazy_mode` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LazyMode(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_context_type {
    LLAMA_CONTEXT_TYPE_DEFAULT = 0,
    LLAMA_CONTEXT_TYPE_MTP = 1,
}

/// `enum llama_context_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_model_kv_override_type {
    LLAMA_KV_OVERRIDE_TYPE_INT = 0,
    LLAMA_KV_OVERRIDE_TYPE_FLOAT = 1,
    LLAMA_KV_OVERRIDE_TYPE_BOOL = 2,
    LLAMA_KV_OVERRIDE_TYPE_STR = 3,
}

/// `enum llama_model_kv_override_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelKvOverrideType(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_model_meta_key {
    LLAMA_MODEL_META_KEY_SAMPLING_SEQUENCE = 0,
    LLAMA_MODEL_META_KEY_SAMPLING_TOP_K = 1,
    LLAMA_MODEL_META_KEY_SAMPLING_TOP_P = 2,
    LLAMA_MODEL_META_KEY_SAMPLING_MIN_P = 3,
    LLAMA_MODEL_META_KEY_SAMPLING_XTC_PROBABILITY = 4,
    LLAMA_MODEL_META_KEY_SAMPLING_XTC_THRESHOLD = 5,
    LLAMA_MODEL_META_KEY_SAMPLING_TEMP = 6,
    LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_LAST_N = 7,
    LLAMA_MODEL_META_KEY_SAMPLING_PENALTY_REPEAT = 8,
    LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT = 9,
    LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_TAU = 10,
    LLAMA_MODEL_META_KEY_SAMPLING_MIROSTAT_ETA = 11,
}

/// `enum llama_model_meta_key` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelMetaKey(pub c_int);

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum llama_process_type {
    LLAMA_PROCESS_TYPE_ENCODE = 0,
    LLAMA_PROCESS_TYPE_DECODE = 1,
}

/// `enum llama_process_type` as received from C: any integer may arrive, so it is held raw and checked where used.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessType(pub c_int);

#[repr(C)]
pub struct llama_token_data {
    pub id: llama_token,
    pub logit: f32,
    pub p: f32,
}

#[repr(C)]
pub struct llama_token_data_array {
    pub data: *mut llama_token_data,
    pub size: usize,
    pub selected: i64,
    pub sorted: bool,
}

#[repr(C)]
pub struct llama_batch {
    pub n_tokens: i32,
    pub token: *mut llama_token,
    pub embd: *mut f32,
    pub pos: *mut llama_pos,
    pub n_seq_id: *mut i32,
    pub seq_id: *mut *mut llama_seq_id,
    pub logits: *mut i8,
}

/// The value part of `struct llama_model_kv_override`. C declares it as an anonymous union, which
/// cbindgen cannot express: the header gets the C definition from `cbindgen.toml` (`after_includes`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union llama_model_kv_override_value {
    pub val_i64: i64,
    pub val_f64: f64,
    pub val_bool: bool,
    pub val_str: [c_char; 128],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct llama_model_kv_override {
    pub tag: ModelKvOverrideType,
    pub key: [c_char; 128],
    pub value: llama_model_kv_override_value,
}

#[repr(C)]
pub struct llama_model_tensor_buft_override {
    pub pattern: *const c_char,
    pub buft: ggml_backend_buffer_type_t,
}

#[repr(C)]
pub struct llama_model_params {
    pub devices: *mut ggml_backend_dev_t,
    pub tensor_buft_overrides: *const llama_model_tensor_buft_override,
    pub n_gpu_layers: i32,
    pub split_mode: SplitMode,
    pub load_mode: LoadMode,
    pub lazy_mode: LazyMode,
    pub main_gpu: i32,
    pub tensor_split: *const f32,
    pub progress_callback: llama_progress_callback,
    pub progress_callback_user_data: *mut c_void,
    pub kv_overrides: *const llama_model_kv_override,
    pub vocab_only: bool,
    pub check_tensors: bool,
    pub use_extra_bufts: bool,
    pub no_host: bool,
    pub no_alloc: bool,
    pub load_mtp: bool,
}

#[repr(C)]
pub struct llama_sampler_seq_config {
    pub seq_id: llama_seq_id,
    pub sampler: *mut llama_sampler,
}

#[repr(C)]
pub struct llama_context_params {
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_rs_seq: u32,
    pub n_outputs_max: u32,
    pub n_outputs_max_per_seq: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub ctx_type: ContextType,
    pub rope_scaling_type: RopeScalingType,
    pub pooling_type: PoolingType,
    pub attention_type: AttentionType,
    pub flash_attn_type: FlashAttnType,
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub yarn_orig_ctx: u32,
    pub defrag_thold: f32,
    pub cb_eval: ggml_backend_sched_eval_callback,
    pub cb_eval_user_data: *mut c_void,
    pub type_k: ggml_type,
    pub type_v: ggml_type,
    pub abort_callback: ggml_abort_callback,
    pub abort_callback_data: *mut c_void,
    pub embeddings: bool,
    pub offload_kqv: bool,
    pub no_perf: bool,
    pub op_offload: bool,
    pub swa_full: bool,
    pub kv_unified: bool,
    pub samplers: *mut llama_sampler_seq_config,
    pub n_samplers: usize,
    pub ctx_other: *mut llama_context,
}

#[repr(C)]
pub struct llama_model_tensor_override {
    pub pattern: *const c_char,
    pub r#type: ggml_type,
}

#[repr(C)]
pub struct llama_model_imatrix_data {
    pub name: *const c_char,
    pub data: *const f32,
    pub size: usize,
}

#[repr(C)]
pub struct llama_model_quantize_params {
    pub nthread: i32,
    pub ftype: Ftype,
    pub output_tensor_type: ggml_type,
    pub token_embedding_type: ggml_type,
    pub allow_requantize: bool,
    pub quantize_output_tensor: bool,
    pub only_copy: bool,
    pub pure: bool,
    pub keep_split: bool,
    pub dry_run: bool,
    pub imatrix: *const llama_model_imatrix_data,
    pub kv_overrides: *const llama_model_kv_override,
    pub tt_overrides: *const llama_model_tensor_override,
    pub prune_layers: *const i32,
    pub max_buf_size: usize,
}

#[repr(C)]
pub struct llama_logit_bias {
    pub token: llama_token,
    pub bias: f32,
}

#[repr(C)]
pub struct llama_sampler_chain_params {
    pub no_perf: bool,
}

#[repr(C)]
pub struct llama_chat_message {
    pub role: *const c_char,
    pub content: *const c_char,
}

#[repr(C)]
pub struct llama_embd {
    pub data: *const f32,
    pub n_rows: usize,
    pub n_embd: usize,
}

#[repr(C)]
pub struct llama_sampler_data {
    pub logits: *mut ggml_tensor,
    pub probs: *mut ggml_tensor,
    pub sampled: *mut ggml_tensor,
    pub candidates: *mut ggml_tensor,
}

/// The vtable of a sampler; C code may fill one to write its own sampler.
#[repr(C)]
pub struct llama_sampler_i {
    pub name: Option<unsafe extern "C" fn(smpl: *const llama_sampler) -> *const c_char>,
    pub accept: Option<unsafe extern "C" fn(smpl: *mut llama_sampler, token: llama_token)>,
    pub apply: Option<unsafe extern "C" fn(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array)>,
    pub reset: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    pub clone: Option<unsafe extern "C" fn(smpl: *const llama_sampler) -> *mut llama_sampler>,
    pub free: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    pub backend_init: Option<
        unsafe extern "C" fn(
            smpl: *mut llama_sampler,
            buft: ggml_backend_buffer_type_t,
            n_outputs_max_per_seq: u32,
        ) -> bool,
    >,
    pub backend_accept: Option<
        unsafe extern "C" fn(
            smpl: *mut llama_sampler,
            ctx: *mut ggml_context,
            gf: *mut ggml_cgraph,
            selected_token: *mut ggml_tensor,
        ),
    >,
    pub backend_apply: Option<
        unsafe extern "C" fn(
            smpl: *mut llama_sampler,
            ctx: *mut ggml_context,
            gf: *mut ggml_cgraph,
            data: *mut llama_sampler_data,
        ),
    >,
    pub backend_set_input: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    pub backend_reset: Option<unsafe extern "C" fn(smpl: *mut llama_sampler)>,
    pub copy_state: Option<unsafe extern "C" fn(src: *const llama_sampler, dst: *mut llama_sampler)>,
}

#[repr(C)]
pub struct llama_sampler {
    pub iface: *mut llama_sampler_i,
    pub ctx: llama_sampler_context_t,
}

#[repr(C)]
pub struct llama_perf_context_data {
    pub t_start_ms: f64,
    pub t_load_ms: f64,
    pub t_p_eval_ms: f64,
    pub t_eval_ms: f64,
    pub n_p_eval: i32,
    pub n_eval: i32,
    pub n_reused: i32,
}

#[repr(C)]
pub struct llama_perf_sampler_data {
    pub t_sample_ms: f64,
    pub n_sample: i32,
}

#[repr(C)]
pub struct llama_opt_params {
    pub n_ctx_train: u32,
    pub param_filter: llama_opt_param_filter,
    pub param_filter_ud: *mut c_void,
    pub get_opt_pars: ggml_opt_get_optimizer_params,
    pub get_opt_pars_ud: *mut c_void,
    pub optimizer_type: ggml_opt_optimizer_type,
}

// The Rust layouts must equal the pinned C layouts (x86_64 Linux), field by field.
const _: () = {
    assert!(size_of::<llama_token_data>() == 12 && align_of::<llama_token_data>() == 4);
    assert!(offset_of!(llama_token_data, id) == 0);
    assert!(offset_of!(llama_token_data, logit) == 4);
    assert!(offset_of!(llama_token_data, p) == 8);
    assert!(size_of::<llama_token_data_array>() == 32 && align_of::<llama_token_data_array>() == 8);
    assert!(offset_of!(llama_token_data_array, data) == 0);
    assert!(offset_of!(llama_token_data_array, size) == 8);
    assert!(offset_of!(llama_token_data_array, selected) == 16);
    assert!(offset_of!(llama_token_data_array, sorted) == 24);
    assert!(size_of::<llama_batch>() == 56 && align_of::<llama_batch>() == 8);
    assert!(offset_of!(llama_batch, n_tokens) == 0);
    assert!(offset_of!(llama_batch, token) == 8);
    assert!(offset_of!(llama_batch, embd) == 16);
    assert!(offset_of!(llama_batch, pos) == 24);
    assert!(offset_of!(llama_batch, n_seq_id) == 32);
    assert!(offset_of!(llama_batch, seq_id) == 40);
    assert!(offset_of!(llama_batch, logits) == 48);
    assert!(size_of::<llama_model_kv_override>() == 264 && align_of::<llama_model_kv_override>() == 8);
    assert!(offset_of!(llama_model_kv_override, tag) == 0);
    assert!(offset_of!(llama_model_kv_override, key) == 4);
    assert!(size_of::<llama_model_tensor_buft_override>() == 16 && align_of::<llama_model_tensor_buft_override>() == 8);
    assert!(offset_of!(llama_model_tensor_buft_override, pattern) == 0);
    assert!(offset_of!(llama_model_tensor_buft_override, buft) == 8);
    assert!(size_of::<llama_model_params>() == 80 && align_of::<llama_model_params>() == 8);
    assert!(offset_of!(llama_model_params, devices) == 0);
    assert!(offset_of!(llama_model_params, tensor_buft_overrides) == 8);
    assert!(offset_of!(llama_model_params, n_gpu_layers) == 16);
    assert!(offset_of!(llama_model_params, split_mode) == 20);
    assert!(offset_of!(llama_model_params, load_mode) == 24);
    assert!(offset_of!(llama_model_params, lazy_mode) == 28);
    assert!(offset_of!(llama_model_params, main_gpu) == 32);
    assert!(offset_of!(llama_model_params, tensor_split) == 40);
    assert!(offset_of!(llama_model_params, progress_callback) == 48);
    assert!(offset_of!(llama_model_params, progress_callback_user_data) == 56);
    assert!(offset_of!(llama_model_params, kv_overrides) == 64);
    assert!(offset_of!(llama_model_params, vocab_only) == 72);
    assert!(offset_of!(llama_model_params, check_tensors) == 73);
    assert!(offset_of!(llama_model_params, use_extra_bufts) == 74);
    assert!(offset_of!(llama_model_params, no_host) == 75);
    assert!(offset_of!(llama_model_params, no_alloc) == 76);
    assert!(offset_of!(llama_model_params, load_mtp) == 77);
    assert!(size_of::<llama_sampler_seq_config>() == 16 && align_of::<llama_sampler_seq_config>() == 8);
    assert!(offset_of!(llama_sampler_seq_config, seq_id) == 0);
    assert!(offset_of!(llama_sampler_seq_config, sampler) == 8);
    assert!(size_of::<llama_context_params>() == 160 && align_of::<llama_context_params>() == 8);
    assert!(offset_of!(llama_context_params, n_ctx) == 0);
    assert!(offset_of!(llama_context_params, n_batch) == 4);
    assert!(offset_of!(llama_context_params, n_ubatch) == 8);
    assert!(offset_of!(llama_context_params, n_seq_max) == 12);
    assert!(offset_of!(llama_context_params, n_rs_seq) == 16);
    assert!(offset_of!(llama_context_params, n_outputs_max) == 20);
    assert!(offset_of!(llama_context_params, n_outputs_max_per_seq) == 24);
    assert!(offset_of!(llama_context_params, n_threads) == 28);
    assert!(offset_of!(llama_context_params, n_threads_batch) == 32);
    assert!(offset_of!(llama_context_params, ctx_type) == 36);
    assert!(offset_of!(llama_context_params, rope_scaling_type) == 40);
    assert!(offset_of!(llama_context_params, pooling_type) == 44);
    assert!(offset_of!(llama_context_params, attention_type) == 48);
    assert!(offset_of!(llama_context_params, flash_attn_type) == 52);
    assert!(offset_of!(llama_context_params, rope_freq_base) == 56);
    assert!(offset_of!(llama_context_params, rope_freq_scale) == 60);
    assert!(offset_of!(llama_context_params, yarn_ext_factor) == 64);
    assert!(offset_of!(llama_context_params, yarn_attn_factor) == 68);
    assert!(offset_of!(llama_context_params, yarn_beta_fast) == 72);
    assert!(offset_of!(llama_context_params, yarn_beta_slow) == 76);
    assert!(offset_of!(llama_context_params, yarn_orig_ctx) == 80);
    assert!(offset_of!(llama_context_params, defrag_thold) == 84);
    assert!(offset_of!(llama_context_params, cb_eval) == 88);
    assert!(offset_of!(llama_context_params, cb_eval_user_data) == 96);
    assert!(offset_of!(llama_context_params, type_k) == 104);
    assert!(offset_of!(llama_context_params, type_v) == 108);
    assert!(offset_of!(llama_context_params, abort_callback) == 112);
    assert!(offset_of!(llama_context_params, abort_callback_data) == 120);
    assert!(offset_of!(llama_context_params, embeddings) == 128);
    assert!(offset_of!(llama_context_params, offload_kqv) == 129);
    assert!(offset_of!(llama_context_params, no_perf) == 130);
    assert!(offset_of!(llama_context_params, op_offload) == 131);
    assert!(offset_of!(llama_context_params, swa_full) == 132);
    assert!(offset_of!(llama_context_params, kv_unified) == 133);
    assert!(offset_of!(llama_context_params, samplers) == 136);
    assert!(offset_of!(llama_context_params, n_samplers) == 144);
    assert!(offset_of!(llama_context_params, ctx_other) == 152);
    assert!(size_of::<llama_model_tensor_override>() == 16 && align_of::<llama_model_tensor_override>() == 8);
    assert!(offset_of!(llama_model_tensor_override, pattern) == 0);
    assert!(offset_of!(llama_model_tensor_override, r#type) == 8);
    assert!(size_of::<llama_model_imatrix_data>() == 24 && align_of::<llama_model_imatrix_data>() == 8);
    assert!(offset_of!(llama_model_imatrix_data, name) == 0);
    assert!(offset_of!(llama_model_imatrix_data, data) == 8);
    assert!(offset_of!(llama_model_imatrix_data, size) == 16);
    assert!(size_of::<llama_model_quantize_params>() == 64 && align_of::<llama_model_quantize_params>() == 8);
    assert!(offset_of!(llama_model_quantize_params, nthread) == 0);
    assert!(offset_of!(llama_model_quantize_params, ftype) == 4);
    assert!(offset_of!(llama_model_quantize_params, output_tensor_type) == 8);
    assert!(offset_of!(llama_model_quantize_params, token_embedding_type) == 12);
    assert!(offset_of!(llama_model_quantize_params, allow_requantize) == 16);
    assert!(offset_of!(llama_model_quantize_params, quantize_output_tensor) == 17);
    assert!(offset_of!(llama_model_quantize_params, only_copy) == 18);
    assert!(offset_of!(llama_model_quantize_params, pure) == 19);
    assert!(offset_of!(llama_model_quantize_params, keep_split) == 20);
    assert!(offset_of!(llama_model_quantize_params, dry_run) == 21);
    assert!(offset_of!(llama_model_quantize_params, imatrix) == 24);
    assert!(offset_of!(llama_model_quantize_params, kv_overrides) == 32);
    assert!(offset_of!(llama_model_quantize_params, tt_overrides) == 40);
    assert!(offset_of!(llama_model_quantize_params, prune_layers) == 48);
    assert!(offset_of!(llama_model_quantize_params, max_buf_size) == 56);
    assert!(size_of::<llama_logit_bias>() == 8 && align_of::<llama_logit_bias>() == 4);
    assert!(offset_of!(llama_logit_bias, token) == 0);
    assert!(offset_of!(llama_logit_bias, bias) == 4);
    assert!(size_of::<llama_sampler_chain_params>() == 1 && align_of::<llama_sampler_chain_params>() == 1);
    assert!(offset_of!(llama_sampler_chain_params, no_perf) == 0);
    assert!(size_of::<llama_chat_message>() == 16 && align_of::<llama_chat_message>() == 8);
    assert!(offset_of!(llama_chat_message, role) == 0);
    assert!(offset_of!(llama_chat_message, content) == 8);
    assert!(size_of::<llama_embd>() == 24 && align_of::<llama_embd>() == 8);
    assert!(offset_of!(llama_embd, data) == 0);
    assert!(offset_of!(llama_embd, n_rows) == 8);
    assert!(offset_of!(llama_embd, n_embd) == 16);
    assert!(size_of::<llama_sampler_data>() == 32 && align_of::<llama_sampler_data>() == 8);
    assert!(offset_of!(llama_sampler_data, logits) == 0);
    assert!(offset_of!(llama_sampler_data, probs) == 8);
    assert!(offset_of!(llama_sampler_data, sampled) == 16);
    assert!(offset_of!(llama_sampler_data, candidates) == 24);
    assert!(size_of::<llama_sampler_i>() == 96 && align_of::<llama_sampler_i>() == 8);
    assert!(offset_of!(llama_sampler_i, name) == 0);
    assert!(offset_of!(llama_sampler_i, accept) == 8);
    assert!(offset_of!(llama_sampler_i, apply) == 16);
    assert!(offset_of!(llama_sampler_i, reset) == 24);
    assert!(offset_of!(llama_sampler_i, clone) == 32);
    assert!(offset_of!(llama_sampler_i, free) == 40);
    assert!(offset_of!(llama_sampler_i, backend_init) == 48);
    assert!(offset_of!(llama_sampler_i, backend_accept) == 56);
    assert!(offset_of!(llama_sampler_i, backend_apply) == 64);
    assert!(offset_of!(llama_sampler_i, backend_set_input) == 72);
    assert!(offset_of!(llama_sampler_i, backend_reset) == 80);
    assert!(offset_of!(llama_sampler_i, copy_state) == 88);
    assert!(size_of::<llama_sampler>() == 16 && align_of::<llama_sampler>() == 8);
    assert!(offset_of!(llama_sampler, iface) == 0);
    assert!(offset_of!(llama_sampler, ctx) == 8);
    assert!(size_of::<llama_perf_context_data>() == 48 && align_of::<llama_perf_context_data>() == 8);
    assert!(offset_of!(llama_perf_context_data, t_start_ms) == 0);
    assert!(offset_of!(llama_perf_context_data, t_load_ms) == 8);
    assert!(offset_of!(llama_perf_context_data, t_p_eval_ms) == 16);
    assert!(offset_of!(llama_perf_context_data, t_eval_ms) == 24);
    assert!(offset_of!(llama_perf_context_data, n_p_eval) == 32);
    assert!(offset_of!(llama_perf_context_data, n_eval) == 36);
    assert!(offset_of!(llama_perf_context_data, n_reused) == 40);
    assert!(size_of::<llama_perf_sampler_data>() == 16 && align_of::<llama_perf_sampler_data>() == 8);
    assert!(offset_of!(llama_perf_sampler_data, t_sample_ms) == 0);
    assert!(offset_of!(llama_perf_sampler_data, n_sample) == 8);
    assert!(size_of::<llama_opt_params>() == 48 && align_of::<llama_opt_params>() == 8);
    assert!(offset_of!(llama_opt_params, n_ctx_train) == 0);
    assert!(offset_of!(llama_opt_params, param_filter) == 8);
    assert!(offset_of!(llama_opt_params, param_filter_ud) == 16);
    assert!(offset_of!(llama_opt_params, get_opt_pars) == 24);
    assert!(offset_of!(llama_opt_params, get_opt_pars_ud) == 32);
    assert!(offset_of!(llama_opt_params, optimizer_type) == 40);
};
