//! T5 (`t5`), an encoder-decoder, and its encoder alone (`t5encoder`): RMS-normed layers whose
//! self-attention scores are biased by relative position buckets (`attn_rel_b`, learned per head;
//! a layer without its own uses the first layer's), unscaled scores, a ReLU FFN (T5) or a gated
//! GELU one (Flan-T5), and no rotation; tensors carry llama.cpp's `enc.` and `dec.` prefixes.
//! `llama_encode` runs the encoder and keeps its outputs (`graph::Cross`); `llama_decode` runs
//! the decoder, whose layers also attend to those outputs (`cross.rs`).

mod buckets;
mod cross;

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NONE};

/// T5 with its decoder.
pub struct T5;

/// T5's encoder alone, as an embedding model.
pub struct T5Encoder;

impl ArchSpec for T5 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "t5",
            about: "T5 and Flan-T5, an encoder-decoder: `llama_encode` runs the encoder and keeps its outputs, \
                `llama_decode` the decoder (from `llama_model_decoder_start_token`) over its KV cache \
                and cross-attention to them; one cache stream, as llama.cpp requires; not saved, as \
                llama.cpp's saver refuses it.",
            rope_type: ROPE_NONE,
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "attention.relative_buckets_count",
                    "decoder_start_token_id",
                    "decoder_block_count",
                ],
            ],
            has_encoder: true,
            saved: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)?;
        if let Some(t) = meta.u32_opt(&hp.key("decoder_start_token_id"))? {
            hp.dec_start_token = t as i32;
        }
        hp.dec_n_layer = meta.u32_opt(&hp.key("decoder_block_count"))?.unwrap_or(hp.n_layer);
        // The decoder's layers use the cache's, of which there are as many as encoder layers
        // (llama.cpp reads past its cache otherwise).
        if hp.dec_n_layer > hp.n_layer {
            return Err(Error::model(format!(
                "{} decoder layers: a T5 model may have at most as many as encoder layers ({})",
                hp.dec_n_layer, hp.n_layer
            )));
        }
        hp.size_label = match (hp.n_layer, hp.n_ff[0]) {
            (6, _) => "60M",
            (8, _) => "80M",
            (12, 3072) => "220M",
            (12, 2048) => "250M",
            (24, 4096) => "770M",
            (24, 2816) => "780M",
            (24, 16384 | 5120) => "3B",
            (24, 65536 | 10240) => "11B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("enc.output_norm.weight", &[e], true),
            TensorSpec::new("dec.output_norm.weight", &[e], true),
            TensorSpec::matmul("output.weight", &[e, v], false),
        ];
        for il in 0..hp.n_layer as usize {
            layer_tensors(hp, "enc", il, &mut specs);
        }
        for il in 0..hp.dec_n_layer as usize {
            layer_tensors(hp, "dec", il, &mut specs);
            cross::tensors(hp, il, &mut specs);
            specs.extend(decoder_scales(il).map(|name| TensorSpec::new(name, &[1], false)));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut names: Vec<String> = [
            "token_embd.weight",
            "enc.output_norm.weight",
            "dec.output_norm.weight",
            "output.weight",
        ]
        .map(String::from)
        .into();
        for il in 0..hp.n_layer as usize {
            names.extend(LAYER.split_whitespace().map(|n| format!("enc.blk.{il}.{n}")));
        }
        for il in 0..hp.dec_n_layer as usize {
            names.extend(DECODER_LAYER.split_whitespace().map(|n| format!("dec.blk.{il}.{n}")));
        }
        for il in 0..hp.dec_n_layer as usize {
            names.extend(decoder_scales(il));
        }
        names
    }
}

impl Decoder for T5 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        if b.shape.encoder {
            return T5Encoder.build(b);
        }
        decoder(b).map(Some)
    }
}

impl ArchSpec for T5Encoder {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "t5encoder",
            about: "T5's encoder alone: relative position buckets biasing the scores, `enc.` tensors; \
                `llama_encode` attends both ways while its contexts keep a (unused) KV cache, as \
                llama.cpp's do, so `llama_decode` runs it causally within each ubatch.",
            rope_type: ROPE_NONE,
            read_keys: &[super::READS_RMS_EPS, &["attention.relative_buckets_count"]],
            has_encoder: true,
            has_decoder: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("enc.output_norm.weight", &[e], true),
            TensorSpec::matmul("output.weight", &[e, v], false),
        ];
        for il in 0..hp.n_layer as usize {
            layer_tensors(hp, "enc", il, &mut specs);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut names: Vec<String> = ["token_embd.weight", "enc.output_norm.weight", "output.weight"]
            .map(String::from)
            .into();
        for il in 0..hp.n_layer as usize {
            names.extend(LAYER.split_whitespace().map(|n| format!("enc.blk.{il}.{n}")));
        }
        names
    }
}

impl Decoder for T5Encoder {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let x = encoder(b)?;
        let w = b.weight("enc.output_norm.weight")?;
        let x = b.rms_norm(x, w)?;
        let x = b.name(x, "result_norm", None);
        b.set_hidden(x);
        Ok(None)
    }
}

/// The weights llama.cpp's generic pass gives scales as the layer members the decoder's
/// self-attention and FFN occupy: named as other architectures' `blk.{il}.` weights (the
/// attention's scales multiply its products, the FFN's are unused, as in llama.cpp).
const DECODER_SCALED: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
];

/// Decoder layer `il`'s scales and input scales, in the generic pass's order.
fn decoder_scales(il: usize) -> impl Iterator<Item = String> {
    ["scale", "input_scale"]
        .into_iter()
        .flat_map(move |suffix| DECODER_SCALED.map(|w| format!("blk.{il}.{w}.{suffix}")))
}

/// What both read: the RMS norms' epsilon and the bucket count.
fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    hp.n_rel_attn_bkts = meta.u32(&hp.key("attention.relative_buckets_count"))?;
    // Positions reach the scores through the buckets alone: nothing rotates, nor does a K-shift.
    hp.rope = false;
    // Queries are split into the key heads (llama.cpp's T5 graphs reshape them so).
    if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_head != hp.n_head_kv {
        return Err(Error::model(format!(
            "{} needs as many key heads as query heads, of the value heads' size",
            hp.arch_name
        )));
    }
    Ok(())
}

/// A layer's tensors in the order llama.cpp's loader makes them (after `{enc,dec}.blk.{il}.`).
const LAYER: &str = "attn_norm.weight attn_rel_b.weight attn_q.weight attn_k.weight attn_v.weight attn_o.weight \
    ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight";

/// A decoder layer's: its self-attention, its cross-attention (without the position biases
/// llama.cpp skips in a model made without a file), its FFN.
const DECODER_LAYER: &str = "attn_norm.weight attn_rel_b.weight attn_q.weight attn_k.weight attn_v.weight \
    attn_o.weight cross_attn_norm.weight cross_attn_q.weight cross_attn_k.weight \
    cross_attn_v.weight cross_attn_o.weight ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight";

/// Layer `il`'s self-attention and FFN tensors under `{part}.blk.{il}.`.
fn layer_tensors(hp: &HParams, part: &str, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("{part}.blk.{il}.{s}");
    let e = hp.n_embd;
    let (k, v) = (hp.n_embd_head_k * hp.n_head_kv[il], hp.n_embd_head_v * hp.n_head_kv[il]);
    let ff = hp.n_ff[il];
    specs.extend([
        TensorSpec::new(b("attn_norm.weight"), &[e], true),
        TensorSpec::new(b("attn_rel_b.weight"), &[hp.n_head[il], hp.n_rel_attn_bkts], false),
        TensorSpec::matmul(b("attn_q.weight"), &[e, k], true),
        TensorSpec::matmul(b("attn_k.weight"), &[e, k], true),
        TensorSpec::matmul(b("attn_v.weight"), &[e, v], true),
        TensorSpec::matmul(b("attn_o.weight"), &[v, e], true),
        TensorSpec::new(b("ffn_norm.weight"), &[e], true),
        TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], false),
        TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
        TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
    ]);
}

/// The encoder's layers over the input tokens; returns their output before the final norm
/// (`result_embd`), the requested rows only.
fn encoder(b: &mut Builder) -> Result<TensorRef> {
    let hp = b.hp;
    let mut x = b.embed_tokens()?;
    let bucket = buckets::within_ubatch(b)?;
    for il in 0..hp.n_layer as usize {
        let l = Some(il);
        let w = |s: &str| format!("enc.blk.{il}.{s}");
        let norm = b.weight(&w("attn_norm.weight"))?;
        let cur = b.rms_norm(x, norm)?;
        let cur = b.name(cur, "attn_norm", l);
        let (q, k, v) = self_qkv(b, "enc", il, cur)?;
        let kq_b = buckets::bias(b, bucket, "enc", il)?;
        let att = b.attention_no_cache_biased(il, (q, k, v), Some(kq_b), 1.0)?;
        let wo = b.weight(&w("attn_o.weight"))?;
        let att = b.weight_mm(wo, att)?;
        let att = b.name(att, "kqv_out", l);
        let (att, residual) = b.last_layer_rows(il, att, x)?;
        x = ffn_block(b, "enc", il, att, residual)?;
    }
    Ok(b.name(x, "result_embd", None))
}

/// Layer `il`'s self-attention queries, keys and values of `cur` under `{part}.blk.{il}.`, per
/// head; the decoder's times the scales of the layer members they occupy (`member_scale`).
fn self_qkv(b: &mut Builder, part: &str, il: usize, cur: TensorRef) -> Result<(TensorRef, TensorRef, TensorRef)> {
    let hp = b.hp;
    let mut proj = |name: &str, label: &str| -> Result<TensorRef> {
        let w = b.weight(&format!("{part}.blk.{il}.attn_{name}.weight"))?;
        let s = if part == "dec" {
            member_scale(b, il, &format!("attn_{name}"))
        } else {
            None
        };
        let t = b.linear_scaled(w, s, cur)?;
        let t = b.name(t, label, Some(il));
        b.heads(t, hp.n_embd_head_k, hp.n_head_kv[il])
    };
    Ok((proj("q", "Qcur")?, proj("k", "Kcur")?, proj("v", "Vcur")?))
}

/// The scale llama.cpp's generic pass gives the layer member `member` (`attn_q`, ...) of layer
/// `il`, which a decoder weight occupies (see `DECODER_SCALED`).
fn member_scale(b: &Builder, il: usize, member: &str) -> Option<TensorRef> {
    b.weight_opt(&format!("blk.{il}.{member}.scale"))
}

/// The rest of layer `il` after its attention: `att` plus the residual (`ffn_inp`), its FFN
/// under its norm, the sum, and the control vector (`l_out`).
fn ffn_block(b: &mut Builder, part: &str, il: usize, att: TensorRef, residual: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let h = b.add(att, residual)?;
    let h = b.name(h, "ffn_inp", l);
    let norm = b.weight(&format!("{part}.blk.{il}.ffn_norm.weight"))?;
    let cur = b.rms_norm(h, norm)?;
    let cur = b.name(cur, "ffn_norm", l);
    let ffn = ffn(b, part, il, cur)?;
    let ffn = b.name(ffn, "ffn_out", l);
    let out = b.add(ffn, h)?;
    let out = b.add_cvec(out, il)?;
    Ok(b.name(out, "l_out", l))
}

/// T5's FFN (down of ReLU of up) or Flan-T5's (down of GELU-gated up) in layer `il` of `part`.
fn ffn(b: &mut Builder, part: &str, il: usize, x: TensorRef) -> Result<TensorRef> {
    let w = |s: &str| format!("{part}.blk.{il}.{s}.weight");
    let up_w = b.weight(&w("ffn_up"))?;
    let up = b.weight_mm(up_w, x)?;
    let up = b.name(up, "ffn_up", Some(il));
    let h = match b.weight_opt(&w("ffn_gate")) {
        Some(gate_w) => {
            let gate = b.weight_mm(gate_w, x)?;
            let gate = b.name(gate, "ffn_gate", Some(il));
            b.g.geglu(gate, up)?
        }
        None => b.g.relu(up)?,
    };
    let down_w = b.weight(&w("ffn_down"))?;
    b.weight_mm(down_w, h)
}

/// The decoder's layers over the input tokens, then its final norm and the output head: each
/// layer's self-attention over the cache (biased by the buckets of one direction), its
/// cross-attention to the encoder's outputs, its FFN.
fn decoder(b: &mut Builder) -> Result<TensorRef> {
    let hp = b.hp;
    let n_dec = hp.dec_n_layer as usize;
    let mut x = b.embed_tokens()?;
    let enc = cross::inputs(b)?;
    let bucket = buckets::over_cache(b)?;
    for il in 0..n_dec {
        let l = Some(il);
        let w = |s: &str| format!("dec.blk.{il}.{s}");
        let norm = b.weight(&w("attn_norm.weight"))?;
        let cur = b.rms_norm(x, norm)?;
        let cur = b.name(cur, "attn_norm", l);
        let (q, k, v) = self_qkv(b, "dec", il, cur)?;
        let kq_b = buckets::bias(b, bucket, "dec", il)?;
        let att = b.attention_biased(il, (q, k, v), kq_b, 1.0)?;
        let wo = b.weight(&w("attn_o.weight"))?;
        let att = b.linear_scaled(wo, member_scale(b, il, "attn_output"), att)?;
        let att = b.name(att, "kqv_out", l);
        let h = b.add(att, x)?;
        let h = b.name(h, "cross_inp", l);
        let att = cross::attention(b, il, h, enc)?;
        // The last layer keeps only the requested rows.
        let (att, h) = if il + 1 == n_dec {
            (b.select_outputs(att)?, b.select_outputs(h)?)
        } else {
            (att, h)
        };
        x = ffn_block(b, "dec", il, att, h)?;
    }
    let x = b.name(x, "result_embd", None);
    let norm = b.weight("dec.output_norm.weight")?;
    let x = b.rms_norm(x, norm)?;
    b.output_projection(x, None)
}
