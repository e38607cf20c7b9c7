//! Which type each tensor gets: llama.cpp's rules for a file type (the mixtures of k-quants and
//! i-quants by tensor role and layer), the user's overrides, and the fallbacks for rows that are
//! not whole blocks. Decided in file order, the way llama.cpp counts layers as it goes.

use regex::Regex;

/// ggml type ids (`enum ggml_type`).
pub mod ty {
    pub const F32: u32 = 0;
    pub const F16: u32 = 1;
    pub const Q4_0: u32 = 2;
    pub const Q4_1: u32 = 3;
    pub const Q5_0: u32 = 6;
    pub const Q5_1: u32 = 7;
    pub const Q8_0: u32 = 8;
    pub const Q2_K: u32 = 10;
    pub const Q3_K: u32 = 11;
    pub const Q4_K: u32 = 12;
    pub const Q5_K: u32 = 13;
    pub const Q6_K: u32 = 14;
    pub const IQ2_XXS: u32 = 16;
    pub const IQ2_XS: u32 = 17;
    pub const IQ3_XXS: u32 = 18;
    pub const IQ1_S: u32 = 19;
    pub const IQ4_NL: u32 = 20;
    pub const IQ3_S: u32 = 21;
    pub const IQ2_S: u32 = 22;
    pub const IQ4_XS: u32 = 23;
    pub const IQ1_M: u32 = 29;
    pub const BF16: u32 = 30;
    pub const TQ1_0: u32 = 34;
    pub const TQ2_0: u32 = 35;
    pub const MXFP4: u32 = 39;
    pub const Q1_0: u32 = 41;
    pub const Q2_0: u32 = 42;
}

/// llama.h's file types (`enum llama_ftype`) the rules name.
pub mod ft {
    pub const ALL_F32: i32 = 0;
    pub const F16: i32 = 1;
    pub const Q4_0: i32 = 2;
    pub const Q4_1: i32 = 3;
    pub const Q8_0: i32 = 7;
    pub const Q5_0: i32 = 8;
    pub const Q5_1: i32 = 9;
    pub const Q2_K: i32 = 10;
    pub const Q3_K_S: i32 = 11;
    pub const Q3_K_M: i32 = 12;
    pub const Q3_K_L: i32 = 13;
    pub const Q4_K_S: i32 = 14;
    pub const Q4_K_M: i32 = 15;
    pub const Q5_K_S: i32 = 16;
    pub const Q5_K_M: i32 = 17;
    pub const Q6_K: i32 = 18;
    pub const IQ2_XXS: i32 = 19;
    pub const IQ2_XS: i32 = 20;
    pub const Q2_K_S: i32 = 21;
    pub const IQ3_XS: i32 = 22;
    pub const IQ3_XXS: i32 = 23;
    pub const IQ1_S: i32 = 24;
    pub const IQ4_NL: i32 = 25;
    pub const IQ3_S: i32 = 26;
    pub const IQ3_M: i32 = 27;
    pub const IQ2_S: i32 = 28;
    pub const IQ2_M: i32 = 29;
    pub const IQ4_XS: i32 = 30;
    pub const IQ1_M: i32 = 31;
    pub const BF16: i32 = 32;
    pub const TQ1_0: i32 = 36;
    pub const TQ2_0: i32 = 37;
    pub const MXFP4_MOE: i32 = 38;
    pub const Q1_0: i32 = 40;
    pub const Q2_0: i32 = 41;
}

/// The type most tensors of a file of type `ftype` get; `None` for a file type the quantizer
/// cannot write.
pub fn default_type(ftype: i32) -> Option<u32> {
    Some(match ftype {
        ft::Q4_0 => ty::Q4_0,
        ft::Q4_1 => ty::Q4_1,
        ft::Q5_0 => ty::Q5_0,
        ft::Q5_1 => ty::Q5_1,
        ft::Q8_0 => ty::Q8_0,
        ft::F16 => ty::F16,
        ft::BF16 => ty::BF16,
        ft::ALL_F32 => ty::F32,
        ft::Q1_0 => ty::Q1_0,
        ft::Q2_0 => ty::Q2_0,
        ft::MXFP4_MOE => ty::MXFP4,
        ft::Q2_K_S | ft::Q2_K => ty::Q2_K,
        ft::IQ3_XS => ty::IQ3_S,
        ft::Q3_K_S | ft::Q3_K_M | ft::Q3_K_L => ty::Q3_K,
        ft::Q4_K_S | ft::Q4_K_M => ty::Q4_K,
        ft::Q5_K_S | ft::Q5_K_M => ty::Q5_K,
        ft::Q6_K => ty::Q6_K,
        ft::TQ1_0 => ty::TQ1_0,
        ft::TQ2_0 => ty::TQ2_0,
        ft::IQ2_XXS => ty::IQ2_XXS,
        ft::IQ2_XS | ft::IQ2_S => ty::IQ2_XS,
        ft::IQ2_M => ty::IQ2_S,
        ft::IQ3_XXS => ty::IQ3_XXS,
        ft::IQ1_S => ty::IQ1_S,
        ft::IQ1_M => ty::IQ1_M,
        ft::IQ4_NL => ty::IQ4_NL,
        ft::IQ4_XS => ty::IQ4_XS,
        ft::IQ3_S | ft::IQ3_M => ty::IQ3_S,
        _ => return None,
    })
}

/// A tensor's role, by name, for the rules (broader than the architectures' tensor names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

pub(super) fn is_token_embd(name: &str) -> bool {
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

impl Role {
    pub fn of(name: &str) -> Role {
        if name == "output.weight" {
            return Role::Output;
        }
        if is_token_embd(name) {
            return Role::TokenEmbd;
        }
        let by_part = [
            ("attn_qkv.weight", Role::AttnQkv),
            ("attn_kv_b.weight", Role::AttnKvB),
            ("attn_v.weight", Role::AttnV),
            ("attn_k.weight", Role::AttnK),
            ("attn_q.weight", Role::AttnQ),
            ("attn_output.weight", Role::AttnOutput),
            ("ffn_up", Role::FfnUp),
            ("ffn_gate", Role::FfnGate),
            ("ffn_down", Role::FfnDown),
        ];
        by_part
            .iter()
            .find(|(part, _)| name.contains(part))
            .map_or(Role::Other, |&(_, role)| role)
    }

    /// The value projections (alone or fused), which the mixtures give more bits.
    fn is_attn_v(self) -> bool {
        matches!(self, Role::AttnV | Role::AttnQkv | Role::AttnKvB)
    }
}

/// What the rules read of the model and the caller's parameters.
pub struct Rules {
    pub arch: String,
    pub ftype: i32,
    /// `hparams.n_expert`.
    pub n_expert: u32,
    /// Query heads per key/value head in the first layer (0 without key/value heads).
    pub n_gqa: u32,
    pub n_layer: u32,
    /// llama.cpp calls the model a 70B one (its value projections get more bits).
    pub is_70b: bool,
    pub has_imatrix: bool,
    pub only_copy: bool,
    pub pure: bool,
    pub quantize_output_tensor: bool,
    pub output_tensor_type: Option<u32>,
    pub token_embedding_type: Option<u32>,
    /// `--tensor-type` patterns, first match wins.
    pub overrides: Vec<(Regex, u32)>,
}

/// A warning the choice logs, in llama.cpp's words.
pub type Warn<'a> = &'a mut dyn FnMut(String);

/// The running state of one pass over the tensors in file order.
pub struct Chooser<'r> {
    rules: &'r Rules,
    n_attention_wv: usize,
    i_attention_wv: usize,
    i_ffn_down: usize,
    i_ffn_gate: usize,
    i_ffn_up: usize,
    /// Tensors whose shape forced a fallback type.
    pub n_fallback: usize,
    tied_embeddings: bool,
}

/// Block sizes of the types the rules pick (others are 1-element types).
fn block_size(t: u32) -> u64 {
    crate::gguf::type_traits(t).map_or(1, |tt| tt.block_size)
}

/// ggml's meaning: a type stored in blocks of more than one element (not floats or integers).
pub(super) fn is_quantized(t: u32) -> bool {
    !matches!(t, ty::F32 | ty::F16 | ty::BF16) && crate::gguf::type_traits(t).is_some_and(|tt| tt.block_size > 1)
}

fn type_name(t: u32) -> &'static str {
    crate::gguf::type_traits(t).map_or("?", |tt| tt.name)
}

impl<'r> Chooser<'r> {
    /// `names`: every tensor to be written, in order (they decide the counters the rules use).
    pub fn new<'n>(rules: &'r Rules, names: impl Iterator<Item = &'n str>) -> Chooser<'r> {
        let mut n_attention_wv = 0;
        let mut tied_embeddings = true;
        for name in names {
            let role = Role::of(name);
            n_attention_wv += usize::from(role.is_attn_v());
            tied_embeddings &= role != Role::Output;
        }
        Chooser {
            rules,
            n_attention_wv,
            i_attention_wv: 0,
            i_ffn_down: 0,
            i_ffn_gate: 0,
            i_ffn_up: 0,
            n_fallback: 0,
            tied_embeddings,
        }
    }

    /// Whether a tensor is one the quantizer converts at all (else it is copied as it is).
    pub fn allows_quantization(&self, name: &str, n_dims: usize) -> bool {
        let r = self.rules;
        if r.only_copy || n_dims < 2 || !name.ends_with("weight") {
            return false;
        }
        if name.contains("_norm.weight") || (!r.quantize_output_tensor && name == "output.weight") {
            return false;
        }
        // Expert routers, DeepSeek-V4's routing table, tiny Gemma 3n blocks, positional and token
        // type embeddings, convolutions, small indexer and RWKV matrices, T5's relative bias,
        // multimodal pieces: kept as they are.
        const KEPT_PARTS: [&str; 33] = [
            "ffn_gate_inp.weight",
            "ffn_gate_tid2eid.weight",
            "altup",
            "laurel",
            "per_layer_model_proj",
            "ssm_conv1d",
            "shortconv.conv.weight",
            "indexer.k_proj.weight",
            "indexer.q_proj.weight",
            "time_mix_first.weight",
            "time_mix_w0.weight",
            "time_mix_w1.weight",
            "time_mix_w2.weight",
            "time_mix_v0.weight",
            "time_mix_v1.weight",
            "time_mix_v2.weight",
            "time_mix_a0.weight",
            "time_mix_a1.weight",
            "time_mix_a2.weight",
            "time_mix_g1.weight",
            "time_mix_g2.weight",
            "time_mix_decay_w1.weight",
            "time_mix_decay_w2.weight",
            "time_mix_lerp_fused.weight",
            "attn_rel_b.weight",
            ".position_embd",
            "sam.pos_embd",
            "sam.neck.",
            "sam.net_",
            ".rel_pos",
            ".patch_embd",
            ".patch_merger",
            "a.rvq.codebook",
        ];
        if KEPT_PARTS.iter().any(|p| name.contains(p)) || name.contains("mm.a.code_embd") {
            return false;
        }
        if name == "position_embd.weight" || name == "token_types.weight" {
            return false;
        }
        const GLM5_NEXT_KEPT: [&str; 14] = [
            "hc_",
            "indexer.attn_q_b",
            "indexer.attn_k",
            "indexer.proj",
            "indexer_compressor_gate",
            "indexer_compressor_ape",
            "ssm_f_a.weight",
            "ssm_f_b.weight",
            "ssm_g_a.weight",
            "ssm_g_b.weight",
            "ssm_beta.weight",
            "attn_kv_a_mqa.weight",
            "attn_k_b.weight",
            "attn_v_b.weight",
        ];
        !(r.arch == "glm5-next" && GLM5_NEXT_KEPT.iter().any(|p| name.contains(p)))
    }

    /// The type of the next tensor (in file order): `cur` its type now, `ne` its shape.
    pub fn choose(&mut self, name: &str, cur: u32, ne: [u64; 4], n_dims: usize, warn: Warn) -> Result<u32, String> {
        let r = self.rules;
        if !self.allows_quantization(name, n_dims) {
            return Ok(cur);
        }
        let role = Role::of(name);
        if let Some(t) = r.token_embedding_type.filter(|_| role == Role::TokenEmbd) {
            // Gemma 3n's per-layer embeddings follow it unless a --tensor-type pattern names them.
            let named = name == "per_layer_token_embd.weight" && r.overrides.iter().any(|(re, _)| re.is_match(name));
            if !named {
                return Ok(t);
            }
        }
        if let Some(t) = r.output_tensor_type.filter(|_| role == Role::Output) {
            return Ok(t);
        }
        let default = default_type(r.ftype).ok_or_else(|| format!("invalid output file type {}", r.ftype))?;
        if !is_quantized(default) {
            return Ok(default);
        }
        let mut new_type = default;
        let mut manual = false;
        if let Some((_, t)) = r.overrides.iter().find(|(re, _)| re.is_match(name)) {
            if *t != new_type {
                warn(format!(
                    "llama_tensor_get_type: {name:<36} - applying manual override: {} -> {}",
                    type_name(new_type),
                    type_name(*t)
                ));
                new_type = *t;
            }
            manual = true;
        }
        if !manual && !r.pure {
            new_type = self.mixture(new_type, name, ne, role)?;
        }
        self.fallback(name, ne[0], new_type, warn)
    }

    /// llama.cpp's `tensor_type_fallback`: a type whose blocks do not divide the rows becomes a
    /// smaller-block one, or F16.
    fn fallback(&mut self, name: &str, ncols: u64, target: u32, warn: Warn) -> Result<u32, String> {
        let qk = block_size(target);
        if ncols.is_multiple_of(qk) {
            return Ok(target);
        }
        let mut msg = format!(
            "warning: {name:<36} - ncols {ncols:>6} not divisible by {qk:>3} (required for type {:>7}) ",
            type_name(target)
        );
        self.n_fallback += 1;
        let mut t = match target {
            ty::IQ1_S | ty::IQ1_M | ty::IQ2_XXS | ty::IQ2_XS | ty::IQ2_S | ty::IQ3_XXS | ty::IQ3_S | ty::IQ4_XS => {
                ty::IQ4_NL
            }
            ty::Q2_0 | ty::Q2_K | ty::Q3_K | ty::TQ1_0 | ty::TQ2_0 => ty::Q4_0,
            ty::Q4_K => ty::Q5_0,
            ty::Q5_K => ty::Q5_1,
            ty::Q6_K => ty::Q8_0,
            // A 32-block type has no smaller kin: F16 below.
            other if qk <= 32 => other,
            other => {
                warn(msg);
                return Err(format!(
                    "no tensor type fallback is defined for type {}",
                    type_name(other)
                ));
            }
        };
        if !ncols.is_multiple_of(block_size(t)) {
            msg.push_str("(WARNING: must use F16 due to unusual shape) ");
            t = ty::F16;
        }
        msg.push_str(&format!("-> falling back to {:>7}", type_name(t)));
        warn(msg);
        Ok(t)
    }

    /// Which layer the next FFN tensor of a role is in, of how many.
    fn layer_of(&self, counter: usize, name: &str) -> Result<(usize, usize), String> {
        let n_layer = self.rules.n_layer as usize;
        if self.rules.n_expert.max(1) <= 1 {
            return Ok((counter, n_layer));
        }
        // Expert tensors need not come layer by layer: the name says which layer.
        let layer = name
            .strip_prefix("blk.")
            .and_then(|rest| rest.split('.').next())
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(|| format!("Failed to determine layer for tensor {name}"))?;
        match usize::try_from(layer) {
            Ok(l) if l < n_layer => Ok((l, n_layer)),
            _ => Err(format!(
                "Bad layer {layer} for tensor {name}. Must be in [0, {n_layer})"
            )),
        }
    }

    /// llama.cpp's `llama_tensor_get_type_impl`: the file type's mixture.
    fn mixture(&mut self, mut new_type: u32, name: &str, ne: [u64; 4], role: Role) -> Result<u32, String> {
        let r = self.rules;
        let f = r.ftype;
        let use_more_bits = |i: usize, n: usize| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
        let falcon = r.arch == "falcon";
        let iq_low = [ft::IQ2_XXS, ft::IQ2_XS, ft::IQ1_S, ft::IQ2_S, ft::IQ2_M, ft::IQ1_M].contains(&f);

        if r.arch == "glm5-next"
            && ["attn_q_a", "attn_q_b", "nextn.eh_proj"]
                .iter()
                .any(|p| name.contains(p))
            && !matches!(new_type, ty::F32 | ty::BF16 | ty::F16)
        {
            return Ok(ty::Q8_0);
        }

        if role == Role::Output || (self.tied_embeddings && role == Role::TokenEmbd) {
            if let Some(t) = r.output_tensor_type {
                new_type = t;
            } else if f == ft::MXFP4_MOE || falcon || !ne[0].is_multiple_of(block_size(new_type)) {
                new_type = ty::Q8_0;
            } else if [
                ft::IQ2_XXS,
                ft::IQ2_XS,
                ft::IQ3_XXS,
                ft::IQ1_S,
                ft::IQ2_S,
                ft::IQ2_M,
                ft::IQ1_M,
            ]
            .contains(&f)
            {
                new_type = ty::Q5_K;
            } else if new_type != ty::Q8_0 {
                new_type = ty::Q6_K;
            }
        } else if f == ft::MXFP4_MOE {
            let bailing_expert = matches!(role, Role::FfnUp | Role::FfnGate | Role::FfnDown);
            new_type = if ne[2] > 1 && (r.arch != "bailingmoe3" || bailing_expert) {
                ty::MXFP4
            } else {
                ty::Q8_0
            };
        } else if role == Role::TokenEmbd {
            if let Some(t) = r.token_embedding_type {
                new_type = t;
            } else if [ft::IQ2_XXS, ft::IQ2_XS, ft::IQ1_S, ft::IQ1_M].contains(&f) {
                new_type = ty::Q2_K;
            } else if [ft::IQ2_S, ft::IQ2_M, ft::IQ3_XXS].contains(&f) {
                new_type = ty::IQ3_S;
            } else if [ft::TQ1_0, ft::TQ2_0, ft::Q2_0].contains(&f) {
                new_type = ty::Q4_K;
            }
        } else if iq_low {
            let s_or_m = f == ft::IQ2_S || f == ft::IQ2_M;
            if role.is_attn_v() {
                new_type = if r.n_gqa >= 4 || r.n_expert >= 4 {
                    ty::Q4_K
                } else if s_or_m {
                    ty::IQ3_S
                } else {
                    ty::Q2_K
                };
                self.i_attention_wv += 1;
            } else if r.n_expert == 8 && role == Role::AttnK {
                new_type = ty::Q4_K;
            } else if role == Role::FfnDown {
                if self.i_ffn_down < r.n_layer as usize / 8 {
                    new_type = if s_or_m { ty::IQ3_S } else { ty::Q2_K };
                }
                self.i_ffn_down += 1;
            } else if role == Role::AttnOutput {
                if r.n_expert == 8 {
                    new_type = ty::Q5_K;
                } else if f == ft::IQ1_S || f == ft::IQ1_M {
                    new_type = ty::IQ2_XXS;
                } else if s_or_m {
                    new_type = ty::IQ3_S;
                }
            }
        } else if role.is_attn_v() {
            let gqa4 = r.n_gqa >= 4;
            if f == ft::Q2_K {
                new_type = if gqa4 { ty::Q4_K } else { ty::Q3_K };
            } else if f == ft::Q2_K_S && gqa4 {
                new_type = ty::Q4_K;
            } else if f == ft::IQ3_XXS {
                new_type = if gqa4 {
                    ty::Q4_K
                } else if !r.has_imatrix {
                    ty::IQ3_S
                } else {
                    ty::IQ3_XXS
                };
            } else if ((f == ft::IQ3_XS || f == ft::IQ3_S) && gqa4) || f == ft::IQ3_M {
                new_type = ty::Q4_K;
            } else if f == ft::Q3_K_M {
                new_type = if self.i_attention_wv < 2 { ty::Q5_K } else { ty::Q4_K };
            } else if f == ft::Q3_K_L || ((f == ft::IQ4_NL || f == ft::IQ4_XS) && gqa4) {
                new_type = ty::Q5_K;
            } else if (f == ft::Q4_K_M || f == ft::Q5_K_M) && use_more_bits(self.i_attention_wv, self.n_attention_wv) {
                new_type = ty::Q6_K;
            } else if f == ft::Q4_K_S && self.i_attention_wv < 4 {
                new_type = ty::Q5_K;
            }
            if r.is_70b && (new_type == ty::Q3_K || new_type == ty::Q4_K) {
                new_type = ty::Q5_K;
            }
            if r.n_expert == 8 {
                new_type = ty::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if role == Role::AttnK {
            if r.n_expert == 8 {
                new_type = ty::Q8_0;
            } else if f == ft::IQ3_XS {
                new_type = ty::IQ3_XXS;
            } else if f == ft::IQ3_XXS {
                new_type = ty::IQ2_S;
            }
        } else if role == Role::AttnQ {
            if f == ft::IQ3_XS {
                new_type = ty::IQ3_XXS;
            } else if f == ft::IQ3_XXS {
                new_type = ty::IQ2_S;
            }
        } else if role == Role::FfnDown {
            let (i, n) = self.layer_of(self.i_ffn_down, name)?;
            if f == ft::Q2_K {
                new_type = ty::Q3_K;
            } else if f == ft::Q2_K_S {
                if i < n / 8 {
                    new_type = ty::Q4_K;
                }
            } else if f == ft::IQ3_XXS && !r.has_imatrix {
                new_type = if i < n / 8 { ty::Q4_K } else { ty::Q3_K };
            } else if f == ft::Q3_K_M {
                new_type = if i < n / 16 {
                    ty::Q5_K
                } else if !falcon || use_more_bits(i, n) {
                    ty::Q4_K
                } else {
                    ty::Q3_K
                };
            } else if f == ft::IQ3_M && (i < n / 8 || (r.n_expert == 8 && use_more_bits(i, n))) {
                new_type = ty::Q4_K;
            } else if f == ft::Q3_K_L {
                new_type = if falcon { ty::Q4_K } else { ty::Q5_K };
            } else if f == ft::Q4_K_M {
                if falcon {
                    new_type = if i < n / 16 {
                        ty::Q6_K
                    } else if use_more_bits(i, n) {
                        ty::Q5_K
                    } else {
                        ty::Q4_K
                    };
                } else if use_more_bits(i, n) {
                    new_type = ty::Q6_K;
                }
            } else if i < n / 8 && (f == ft::IQ4_NL || f == ft::IQ4_XS) && !r.has_imatrix {
                new_type = ty::Q5_K;
            } else if f == ft::Q5_K_M && use_more_bits(i, n) {
                new_type = ty::Q6_K;
            } else if f == ft::Q4_K_S && !falcon && i < n / 8 {
                new_type = ty::Q5_K;
            } else if (f == ft::Q4_0 || f == ft::Q5_0) && r.has_imatrix && i < n / 8 {
                new_type = if f == ft::Q4_0 { ty::Q4_1 } else { ty::Q5_1 };
            }
            self.i_ffn_down += 1;
        } else if role == Role::AttnOutput {
            if !falcon {
                if r.n_expert == 8 {
                    let bumped = [
                        ft::Q2_K,
                        ft::IQ3_XS,
                        ft::IQ3_XXS,
                        ft::Q3_K_S,
                        ft::Q3_K_M,
                        ft::IQ4_NL,
                        ft::Q4_K_S,
                        ft::Q4_K_M,
                        ft::IQ3_S,
                        ft::IQ3_M,
                        ft::IQ4_XS,
                    ];
                    if bumped.contains(&f) {
                        new_type = ty::Q5_K;
                    }
                } else {
                    new_type = match f {
                        ft::Q2_K => ty::Q3_K,
                        ft::IQ3_XXS => ty::IQ3_S,
                        ft::Q3_K_M | ft::IQ3_M => ty::Q4_K,
                        ft::Q3_K_L => ty::Q5_K,
                        _ => new_type,
                    };
                }
            } else if f == ft::Q3_K_L {
                new_type = ty::Q4_K;
            }
        } else if role == Role::AttnQkv {
            new_type = match f {
                ft::Q3_K_M | ft::Q3_K_L | ft::IQ3_M => ty::Q4_K,
                ft::Q4_K_M => ty::Q5_K,
                ft::Q5_K_M => ty::Q6_K,
                _ => new_type,
            };
        } else if role == Role::FfnGate || role == Role::FfnUp {
            let counter = if role == Role::FfnGate {
                self.i_ffn_gate
            } else {
                self.i_ffn_up
            };
            let (i, n) = self.layer_of(counter, name)?;
            if f == ft::IQ3_XS && i >= n / 8 && i < 7 * n / 8 {
                new_type = ty::IQ3_XXS;
            }
            if role == Role::FfnGate {
                self.i_ffn_gate += 1;
            } else {
                self.i_ffn_up += 1;
            }
        }
        Ok(new_type)
    }
}

/// Whether a tensor of type `t` in a file of type `ftype` cannot be made without an importance
/// matrix (llama.cpp refuses: "the result will be garbage").
pub fn requires_imatrix(name: &str, t: u32, ftype: i32) -> bool {
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match t {
        ty::IQ3_XXS | ty::IQ2_XXS | ty::IQ2_XS | ty::IQ2_S | ty::IQ1_M | ty::IQ1_S => true,
        ty::Q2_K => ftype == ft::Q2_K_S,
        _ => false,
    }
}
