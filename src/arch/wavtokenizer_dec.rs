//! WavTokenizer's decoder (`wavtokenizer-dec`), the vocoder of llama.cpp's TTS: audio codes'
//! embeddings (`features_length` wide) through a 1-D convolution, PosNet (residual blocks of group
//! norms, SiLU and convolutions, one attention block over all the ubatch's tokens, a final group
//! norm), a layer norm, ConvNeXt blocks (a depthwise convolution, a layer norm, a GELU FFN scaled
//! per channel, added back) and a projection to `embedding_length` outputs per token, which are
//! the embeddings a context gives (no logits, no memory). Tensors are [length, channels] between
//! the convolutions, [channels, length] for the norms and products, as llama.cpp's graph keeps
//! them.

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

pub struct WavTokenizerDec;

/// PosNet's blocks by position: residual, residual, attention, residual, residual, norm.
#[derive(Clone, Copy, PartialEq)]
enum PosNetBlock {
    Residual,
    Attention,
    Norm,
}

fn posnet_block(il: usize) -> PosNetBlock {
    match il {
        2 => PosNetBlock::Attention,
        5 => PosNetBlock::Norm,
        _ => PosNetBlock::Residual,
    }
}

/// The kernel widths of the input convolution and of ConvNeXt's depthwise ones, and of PosNet's.
const WIDE_KERNEL: u32 = 7;
const POSNET_KERNEL: u32 = 3;

impl ArchSpec for WavTokenizerDec {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "wavtokenizer-dec",
            about: "WavTokenizer's decoder, the TTS vocoder: codes' embeddings through a convolution, PosNet (group \
                norms, convolutions, one attention block), ConvNeXt blocks and a projection, read as embeddings \
                (no logits, no memory).",
            rope_type: ROPE_NONE,
            read_keys: &[
                super::READS_NORM_EPS,
                &[
                    "attention.group_norm_epsilon",
                    "attention.group_norm_groups",
                    "posnet.embedding_length",
                    "posnet.block_count",
                    "convnext.embedding_length",
                    "convnext.block_count",
                ],
            ],
            // llama.cpp takes the features' width for the model's and the file's embedding length for
            // the outputs' width; the head sizes follow from the former.
            saved_rules: &[
                ("embedding_length", Rule::Held(|f| Value::U32(f.hp.n_embd))),
                ("embedding_length_out", Rule::Held(|f| Value::U32(f.hp.n_embd_out))),
                ("attention.key_length", Rule::Held(|f| Value::U32(f.hp.n_embd_head_k))),
                ("attention.value_length", Rule::Held(|f| Value::U32(f.hp.n_embd_head_v))),
                (
                    "attention.key_length_swa",
                    Rule::Held(|f| Value::U32(f.hp.n_embd_head_k)),
                ),
                (
                    "attention.value_length_swa",
                    Rule::Held(|f| Value::U32(f.hp.n_embd_head_v)),
                ),
                ("rope.dimension_count", Rule::Held(|f| Value::U32(f.hp.n_rot))),
                ("rope.dimension_count_swa", Rule::Held(|f| Value::U32(f.hp.n_rot))),
            ],
            memory: Memory::None,
            has_output_head: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("wavtokenizer-dec.{k}");
        hp.norm_eps = meta.f32(&key("attention.layer_norm_epsilon"))?;
        hp.group_norm_eps = meta.f32(&key("attention.group_norm_epsilon"))?;
        hp.norm_groups = meta.u32(&key("attention.group_norm_groups"))?;
        hp.n_embd_out = hp.n_embd;
        hp.n_embd = meta.u32(&key("features_length"))?;
        let n_head = hp.n_head[0].max(1);
        hp.n_embd_head_k = meta
            .u32_opt(&key("attention.key_length"))?
            .unwrap_or(hp.n_embd / n_head);
        hp.n_embd_head_v = meta
            .u32_opt(&key("attention.value_length"))?
            .unwrap_or(hp.n_embd / n_head);
        hp.n_rot = meta.u32_opt(&key("rope.dimension_count"))?.unwrap_or(hp.n_embd_head_k);
        hp.posnet = [
            meta.u32(&key("posnet.embedding_length"))?,
            meta.u32(&key("posnet.block_count"))?,
        ];
        hp.convnext = [
            meta.u32(&key("convnext.embedding_length"))?,
            meta.u32(&key("convnext.block_count"))?,
        ];
        let [width, posnet_blocks] = hp.posnet;
        if posnet_blocks > 6 || posnet_blocks > hp.n_layer || hp.convnext[1] > hp.n_layer {
            return Err(Error::model(format!(
                "wavtokenizer-dec: {posnet_blocks} PosNet blocks (at most 6) and {} ConvNeXt blocks for {} layers",
                hp.convnext[1], hp.n_layer
            )));
        }
        if width != hp.convnext[0] || width == 0 || hp.norm_groups == 0 || hp.n_embd == 0 {
            return Err(Error::model(format!(
                "wavtokenizer-dec: PosNet ({width}) and ConvNeXt ({}) must be as wide, with group norms ({} groups) \
                 and features",
                hp.convnext[0], hp.norm_groups
            )));
        }
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (feat, ch, ff, out) = (hp.n_embd, hp.posnet[0], hp.n_ff[0], hp.embd_out());
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[feat, hp.n_vocab], true),
            TensorSpec::new("conv1d.weight", &[WIDE_KERNEL, feat, ch], true),
            TensorSpec::new("conv1d.bias", &[1, ch], true),
        ];
        for il in 0..hp.posnet[1] as usize {
            let t = |s: &str, shape: &[u32]| TensorSpec::new(format!("posnet.{il}.{s}"), shape, true);
            match posnet_block(il) {
                PosNetBlock::Residual => specs.extend(["norm1", "conv1", "norm2", "conv2"].iter().flat_map(|n| {
                    let kernel = n.starts_with("conv");
                    let w = if kernel {
                        vec![POSNET_KERNEL, ch, ch]
                    } else {
                        vec![1, ch]
                    };
                    [t(&format!("{n}.weight"), &w), t(&format!("{n}.bias"), &[1, ch])]
                })),
                PosNetBlock::Attention => {
                    specs.extend([t("attn_norm.weight", &[1, ch]), t("attn_norm.bias", &[1, ch])]);
                    for n in ["attn_q", "attn_k", "attn_v", "attn_output"] {
                        specs.extend([
                            t(&format!("{n}.weight"), &[1, ch, ch]),
                            t(&format!("{n}.bias"), &[1, ch]),
                        ]);
                    }
                }
                PosNetBlock::Norm => specs.extend([t("attn_norm.weight", &[1, ch]), t("attn_norm.bias", &[1, ch])]),
            }
        }
        specs.extend([
            TensorSpec::new("token_embd_norm.weight", &[ch], true),
            TensorSpec::new("token_embd_norm.bias", &[ch], true),
        ]);
        for il in 0..hp.convnext[1] as usize {
            let c = |s: &str| format!("convnext.{il}.{s}");
            specs.extend([
                TensorSpec::new(c("dw.weight"), &[WIDE_KERNEL, 1, ch], true),
                TensorSpec::new(c("dw.bias"), &[1, ch], true),
                TensorSpec::new(c("norm.weight"), &[ch], true),
                TensorSpec::new(c("norm.bias"), &[ch], true),
                TensorSpec::matmul(c("pw1.weight"), &[ch, ff], true),
                TensorSpec::new(c("pw1.bias"), &[ff], true),
                TensorSpec::matmul(c("pw2.weight"), &[ff, ch], true),
                TensorSpec::new(c("pw2.bias"), &[ch], true),
                TensorSpec::new(c("gamma.weight"), &[ch], true),
            ]);
        }
        specs.extend([
            TensorSpec::new("output_norm.weight", &[ch], true),
            TensorSpec::new("output_norm.bias", &[ch], true),
            TensorSpec::matmul("output.weight", &[ch, out], true),
            TensorSpec::new("output.bias", &[out], true),
        ]);
        specs
    }

    /// Its loader creates them in the order `tensors` lists them.
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        self.tensors(hp).into_iter().map(|s| s.name).collect()
    }
}

impl Decoder for WavTokenizerDec {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let x = b.embed_tokens()?;
        let x = transposed(b, x)?;
        let mut cur = conv(b, "conv1d", x)?;
        for il in 0..hp.posnet[1] as usize {
            let p = |s: &str| format!("posnet.{il}.{s}");
            let input = cur;
            cur = match posnet_block(il) {
                PosNetBlock::Residual => {
                    let h = group_norm(b, &p("norm1"), cur)?;
                    let h = swish(b, h)?;
                    let h = conv(b, &p("conv1"), h)?;
                    let h = group_norm(b, &p("norm2"), h)?;
                    let h = swish(b, h)?;
                    let h = conv(b, &p("conv2"), h)?;
                    b.add(h, input)?
                }
                PosNetBlock::Attention => {
                    let h = group_norm(b, &p("attn_norm"), cur)?;
                    let att = attention(b, il, h)?;
                    b.add(att, input)?
                }
                PosNetBlock::Norm => group_norm(b, &p("attn_norm"), cur)?,
            };
        }
        let h = transposed(b, cur)?;
        let h = norm(b, "token_embd_norm", h)?;
        let mut x = transposed(b, h)?;
        for il in 0..hp.convnext[1] as usize {
            let c = |s: &str| format!("convnext.{il}.{s}");
            let dw = b.weight(&c("dw.weight"))?;
            let h = b.g.conv_1d_depthwise_same(dw, x)?;
            let h = b.add(h, b.weight(&c("dw.bias"))?)?;
            let h = transposed(b, h)?;
            let h = norm(b, &c("norm"), h)?;
            let h = linear(b, &c("pw1"), h)?;
            let h = b.g.gelu(h)?;
            let h = linear(b, &c("pw2"), h)?;
            let h = b.g.mul(h, b.weight(&c("gamma.weight"))?)?;
            let h = transposed(b, h)?;
            x = b.add(h, x)?;
        }
        let h = transposed(b, x)?;
        let h = norm(b, "output_norm", h)?;
        let out = linear(b, "output", h)?;
        let out = b.name(out, "result_embd", None);
        b.set_hidden(out);
        Ok(None)
    }
}

/// `x` transposed into a contiguous tensor.
fn transposed(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let t = b.g.permute(x, [1, 0, 2, 3])?;
    b.g.cont(t).map_err(Error::from)
}

/// The convolution `{name}.weight` (padded to keep the length) of `x`, plus its bias.
fn conv(b: &mut Builder, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.weight(&format!("{name}.weight"))?;
    let y = b.g.conv_1d_same(w, x)?;
    let bias = b.weight(&format!("{name}.bias"))?;
    b.add(y, bias)
}

/// The group norm of `x` ([length, channels]) scaled by `{name}.weight` and shifted by its bias.
fn group_norm(b: &mut Builder, name: &str, x: TensorRef) -> Result<TensorRef> {
    let [len, ch, ..] = x.ne();
    let t = b.g.reshape(x, &[len, 1, ch])?;
    let t = b.g.group_norm(t, b.hp.norm_groups, b.hp.group_norm_eps)?;
    let t = b.g.reshape(t, &[len, ch])?;
    let t = b.g.mul(t, b.weight(&format!("{name}.weight"))?)?;
    b.add(t, b.weight(&format!("{name}.bias"))?)
}

/// The layer norm of `x` ([channels, length]) with `{name}.weight` and its bias.
fn norm(b: &mut Builder, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.weight(&format!("{name}.weight"))?;
    let bias = b.weight(&format!("{name}.bias"))?;
    b.layer_norm(x, w, bias)
}

/// `x` times the sigmoid of itself.
fn swish(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let s = b.g.sigmoid(x)?;
    b.g.mul(s, x).map_err(Error::from)
}

/// `{name}.weight` times `x` plus its bias.
fn linear(b: &mut Builder, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.weight(&format!("{name}.weight"))?;
    let bias = b.weight(&format!("{name}.bias"))?;
    b.linear(w, Some(bias), x)
}

/// PosNet's attention block over `h` ([length, channels]): one head as wide as the channels,
/// every token attending to every token of the ubatch, its queries, keys, values and output
/// 1-wide convolutions.
fn attention(b: &mut Builder, il: usize, h: TensorRef) -> Result<TensorRef> {
    let p = |s: &str| format!("posnet.{il}.{s}");
    let q = conv(b, &p("attn_q"), h)?;
    let k = conv(b, &p("attn_k"), h)?;
    let v = conv(b, &p("attn_v"), h)?;
    let q = transposed(b, q)?;
    let k = transposed(b, k)?;
    let kq = b.g.mul_mat(k, q)?;
    // The softmax's scale applied first: the product ggml's softmax would form itself.
    let kq = b.scale(kq, 1.0 / (b.hp.posnet[0] as f32).sqrt())?;
    let kq = b.g.soft_max_rows(kq)?;
    let att = b.g.mul_mat(kq, v)?;
    conv(b, &p("attn_output"), att)
}
