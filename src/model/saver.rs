//! `llama_model_save_to_file`: the GGUF file llama.cpp's model saver writes, byte for byte.
//! llama.cpp does not copy the file's metadata: it writes its hyper-parameters as it holds them
//! after loading (every one, defaults included, in its own order), then its vocabulary, then the
//! tensors in the order of its model's members. That is reproduced here for the architectures
//! whose saved files `benches/compare.sh` compares with llama.cpp's (`ARCHS`); for the others the
//! hyper-parameters llama.cpp derives per architecture are not known here, and saving is refused.

use crate::error::{Error, Result};
use crate::gguf::{Array, MetaWriter, Sink, TensorEntry, TensorInfo, Value};
use crate::model::metadata::Meta;
use crate::vocab::Vocab;

/// Architectures whose saved files match llama.cpp's (checked by benches/compare.sh).
const ARCHS: &[&str] = &[
    "arcee",
    "arctic",
    "baichuan",
    "bailingmoe",
    "bailingmoe2",
    "chatglm",
    "cogvlm",
    "deci",
    "deepseek",
    "dots1",
    "ernie4_5",
    "ernie4_5-moe",
    "exaone",
    "gemma",
    "gemma3",
    "glm4",
    "granitemoe",
    "hunyuan-moe",
    "hunyuan_vl",
    "internlm2",
    "llama",
    "maincoder",
    "minicpm3",
    "minimax-01",
    "minimax-m2",
    "minimax-m3",
    "nanbeige",
    "olmo2",
    "olmoe",
    "openelm",
    "paddleocr",
    "pangu-embedded",
    "phi3",
    "phimoe",
    "plamo",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen3",
    "qwen35",
    "qwen35moe",
    "qwen3moe",
    "qwen3next",
    "qwen3tts",
    "qwen3vl",
    "qwen3vlmoe",
    "seed_oss",
    "smollm3",
    "talkie",
    "xverse",
];

/// Of `ARCHS`, those whose sliding-window layers are saved too (llama.cpp writes their pattern).
const SLIDING_ARCHS: &[&str] = &["gemma3"];

/// llama.cpp's `LLAMA_MAX_LAYERS`: the length of the hyper-parameter arrays it writes whole.
const MAX_LAYERS: usize = 512;

/// How llama.cpp arrives at the value it writes for a key.
#[derive(Clone, Copy)]
enum Rule {
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
    /// Gemma 3's attention scale, which llama.cpp computes whatever the file says: one over the
    /// square root of the key head size (of the width per head for the 62-layer 27B).
    Gemma3Scale,
}

/// Where llama.cpp's loading of an architecture sets a value other than the generic rule's.
fn arch_rule(arch: &str, suffix: &str) -> Option<Rule> {
    match (arch, suffix) {
        ("gemma3", "final_logit_softcapping") => Some(F32(0.0)),
        ("gemma3", "attention.scale") => Some(Gemma3Scale),
        _ => None,
    }
}

use Rule::*;

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
    ("attention.recurrent_layers", Layers(0)),
    ("attention.output_group_count", U32(0)),
    ("attention.output_lora_rank", U32(0)),
    ("attention.compress_rope_freq_base", F32(0.0)),
    ("attention.compress_ratios", Layers(0)),
    ("hyper_connection.count", U32(0)),
    ("hyper_connection.sinkhorn_iterations", U32(0)),
    ("hyper_connection.epsilon", F32(0.0)),
    ("hyper_connection.magnitude", F32(0.0)),
    ("hash_layer_count", U32(0)),
    ("hyper_connection.low_rank", U32(0)),
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
    "cls.weight",
    "cls.bias",
    "cls.output.weight",
    "cls.output.bias",
];

/// A layer's tensors (after `blk.N.`; or a whole name, met in the first layer), in the order of
/// llama.cpp's layer members, for the tensors of `ARCHS`.
const LAYER_TENSORS: &[&str] = &[
    "attn_norm.weight",
    "attn_norm.bias",
    "attn_norm_2.weight",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "attn_q_a_norm.weight",
    "attn_kv_a_norm.weight",
    "post_attention_norm.weight",
    "ssm_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "attn_qkv.weight",
    "attn_q_a.weight",
    "attn_q.bias",
    "attn_q_b.weight",
    "attn_kv_a_mqa.weight",
    "attn_kv_b.weight",
    "attn_k.bias",
    "attn_v.bias",
    "attn_qkv.bias",
    "attn_output.bias",
    "attn_gate.weight",
    "ffn_norm.weight",
    "ffn_norm.bias",
    "post_ffw_norm.weight",
    "ffn_norm_exps.weight",
    "ffn_gate.weight",
    "ffn_down.weight",
    "ffn_up.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_exps.weight",
    "ffn_down_exps.weight",
    "ffn_up_exps.weight",
    "ffn_gate_up_exps.weight",
    "ffn_gate_exps.scale",
    "ffn_down_exps.scale",
    "ffn_up_exps.scale",
    "ffn_gate_inp_shexp.weight",
    "ffn_gate_shexp.weight",
    "ffn_down_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_gate.bias",
    "ffn_down.bias",
    "ffn_up.bias",
    "exp_probs_b.bias",
    "ssm_dt.bias",
    "ssm_out.weight",
    "ssm_conv1d.weight",
    "ssm_a",
    "ssm_ba.weight",
    "ssm_alpha.weight",
    "rope_factors_long.weight",
    "rope_factors_short.weight",
    "rope_freqs.weight",
    "attn_q.scale",
    "attn_k.scale",
    "attn_v.scale",
    "attn_output.scale",
    "attn_qkv.scale",
    "attn_gate.scale",
    "ffn_gate.scale",
    "ffn_up.scale",
    "ffn_down.scale",
    "ffn_gate_shexp.scale",
    "ffn_up_shexp.scale",
    "ffn_down_shexp.scale",
    "ssm_in.scale",
    "ssm_out.scale",
    "ssm_alpha.scale",
    "ssm_beta.scale",
    "attn_q.input_scale",
    "attn_k.input_scale",
    "attn_v.input_scale",
    "attn_output.input_scale",
    "attn_qkv.input_scale",
    "attn_gate.input_scale",
    "ffn_gate.input_scale",
    "ffn_up.input_scale",
    "ffn_down.input_scale",
    "ffn_gate_exps.input_scale",
    "ffn_down_exps.input_scale",
    "ffn_up_exps.input_scale",
    "ffn_gate_shexp.input_scale",
    "ffn_up_shexp.input_scale",
    "ffn_down_shexp.input_scale",
    "ssm_in.input_scale",
    "ssm_out.input_scale",
    "ssm_alpha.input_scale",
    "ssm_beta.input_scale",
    "vis_attn_qkv.weight",
    "vis_attn_output.weight",
    "vis_gate.weight",
    "vis_down.weight",
    "vis_up.weight",
    "ssm_beta.weight",
    "indexer.q_proj.weight",
    "indexer.k_proj.weight",
    "indexer.q_norm.weight",
    "indexer.k_norm.weight",
    "layer_output_scale.weight",
];

/// The metadata pairs of a saved file: llama.cpp's hyper-parameters before the vocabulary's
/// pairs and after them.
type Pairs = (Vec<(String, Value)>, Vec<(String, Value)>);

/// What saving needs from the loaded files, read while loading: the metadata llama.cpp would
/// write (or why this model cannot be saved) and where each tensor's bytes are.
pub struct Saving {
    pairs: std::result::Result<Pairs, String>,
    /// `general.name` ("n/a" when the file has none, as llama.cpp).
    name: Vec<u8>,
    n_layer_all: usize,
    tensors: Vec<SavedTensor>,
}

impl Saving {
    /// Reads what llama.cpp would hold from the file's metadata (after overrides). `sliding`:
    /// which layers slide, when any does.
    pub fn read(
        arch: &str,
        meta: &Meta,
        n_vocab: u32,
        sliding: Option<&[bool]>,
        tensors: Vec<SavedTensor>,
    ) -> Result<Saving> {
        // A name that is not a string does not stop loading here (llama.cpp refuses such a file).
        let name = match meta.str_opt("general.name") {
            Ok(Some(s)) => s.split(|&b| b == 0).next().unwrap_or_default().to_vec(),
            _ => b"n/a".to_vec(),
        };
        let pairs = if !ARCHS.contains(&arch) {
            Err(format!(
                "saving '{arch}' models is not supported yet: the hyper-parameters llama.cpp derives for \
                 it have not been checked here"
            ))
        } else if sliding.is_some() && !SLIDING_ARCHS.contains(&arch) {
            Err(format!(
                "saving '{arch}' models with sliding-window layers is not supported yet"
            ))
        } else {
            Facts::read(arch, meta, n_vocab, sliding)
                .and_then(|f| Ok((f.pairs(HEAD)?, f.pairs(TAIL)?)))
                .map_err(|e| e.to_string())
        };
        Ok(Saving {
            pairs,
            name,
            n_layer_all: meta.u32(&format!("{arch}.block_count"))? as usize,
            tensors,
        })
    }

    /// Writes the model as llama.cpp's saver would, aside and then renamed into place; `files`:
    /// the bytes of the loaded files (the weights as they are now, trained or not);
    /// `n_ctx_train`: the training context as the model holds it now (training sets it).
    pub fn write(&self, path: &str, (arch, n_ctx_train): (&str, u32), vocab: &Vocab, files: &[&[u8]]) -> Result<()> {
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
        let order = tensor_order(&self.tensors, self.n_layer_all)?;
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

/// The file's values llama.cpp's generic loading derives others from.
struct Facts<'a, 'm> {
    arch: &'a str,
    meta: &'a Meta<'m>,
    n_vocab: u32,
    n_layer_all: usize,
    /// Layers without the next-token-prediction ones (llama.cpp's `n_layer()`).
    n_layer: usize,
    n_head: u32,
    key_length: u32,
    value_length: u32,
    n_rot: u32,
    n_embd: u32,
    /// Sliding-window layers, when any.
    sliding: Option<Vec<u32>>,
}

impl<'a, 'm> Facts<'a, 'm> {
    fn read(arch: &'a str, meta: &'a Meta<'m>, n_vocab: u32, sliding: Option<&[bool]>) -> Result<Facts<'a, 'm>> {
        let key = |s: &str| format!("{arch}.{s}");
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
            let rule = arch_rule(self.arch, suffix).unwrap_or(rule);
            let key = match suffix.starts_with("xielu.") {
                true => suffix.to_string(),
                false => format!("{}.{suffix}", self.arch),
            };
            if let Some(v) = self.value(&key, rule)? {
                out.push((key, v));
            }
        }
        Ok(out)
    }

    fn value(&self, key: &str, rule: Rule) -> Result<Option<Value>> {
        let m = self.meta;
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
            OrigCtx => u32_or(m.u32(&format!("{}.context_length", self.arch))?)?,
            ScalingType => Value::Str(m.str_opt(key)?.unwrap_or(b"linear").to_vec()),
            ScalingFactor => {
                // llama.cpp keeps the inverse (1 when absent or 0) and inverts it again to write.
                let old = format!("{}.rope.scale_linear", self.arch);
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
            Gemma3Scale => {
                let width = match self.n_layer {
                    62 => self.n_embd / self.n_head.max(1),
                    _ => self.key_length,
                };
                Value::F32(1.0 / (width as f32).sqrt())
            }
        }))
    }
}

fn out_of_range(key: &str) -> Error {
    Error::model(format!("key '{key}' is out of range"))
}

/// llama.cpp writes a per-layer value once when every layer has the same.
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
}

/// The tensors in llama.cpp's order: the model's members, then each layer's (a tensor shared by
/// all layers is written where the first layer meets it). A tensor whose place is not known
/// here refuses the save.
fn tensor_order<'t>(tensors: &'t [SavedTensor], n_layer: usize) -> Result<Vec<&'t SavedTensor>> {
    let by_name: std::collections::HashMap<&str, &SavedTensor> =
        tensors.iter().map(|t| (t.entry.name.as_str(), t)).collect();
    let mut out: Vec<&SavedTensor> = Vec::with_capacity(tensors.len());
    let push = |name: &str, out: &mut Vec<&'t SavedTensor>| {
        if let Some(&t) = by_name.get(name) {
            if !out.iter().any(|o| o.entry.name == name) {
                out.push(t);
            }
        }
    };
    let separate_output = by_name.contains_key("output.weight");
    if separate_output {
        push("token_embd.weight", &mut out);
    }
    for &name in MODEL_TENSORS {
        if name == "output.weight" && !separate_output {
            push("token_embd.weight", &mut out);
        }
        push(name, &mut out);
    }
    for il in 0..n_layer {
        for &suffix in LAYER_TENSORS {
            match suffix.starts_with("rope_") {
                true => push(suffix, &mut out),
                false => push(&format!("blk.{il}.{suffix}"), &mut out),
            }
        }
    }
    if let Some(t) = tensors
        .iter()
        .find(|t| !out.iter().any(|o| o.entry.name == t.entry.name))
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
        Ok(tensor_order(tensors, 2)?.iter().map(|t| t.entry.name.clone()).collect())
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
