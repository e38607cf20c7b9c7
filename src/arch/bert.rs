//! BERT and its embedding models (BGE, MiniLM, ...): an encoder without a cache; learned
//! position and token-type embeddings; post-layer norms (mean and variance) with biases; a GELU
//! FFN; embeddings pooled as the model asks (mean, first token, or a ranking head's scores). Its
//! tensors and graph also serve the members of its family that differ by a `Variant` (Nomic BERT,
//! `nomic_bert.rs`: rotary positions, a SwiGLU FFN).

use super::created::layered;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, ExpertAct, Ffn, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

/// A member of the family whose facts are BERT's but for its name, note, sizes and `Variant`
/// (BERT itself, Nomic BERT, Jina BERT v3).
pub struct Member {
    pub facts: Facts,
    pub variant: Variant,
    /// llama.cpp's size label of a model of this many layers (and width).
    pub size_label: fn(&HParams) -> &'static str,
}

/// What an encoder of the family is: an encoder reading its layer norms' epsilon.
pub const LAYER_NORMED: Facts = Facts {
    read_keys: &[super::READS_NORM_EPS],
    ..super::ENCODER
};

pub const BERT: Member = Member {
    facts: Facts {
        name: "bert",
        about: "An encoder (BGE-style embedding models and rerankers): no cache, `llama_encode`, which \
            `llama_decode` calls for it as llama.cpp does; one ubatch per batch.",
        ..LAYER_NORMED
    },
    variant: PLAIN,
    size_label: |hp| match (hp.n_layer, hp.n_embd) {
        (3, _) => "17M",
        (6, _) => "22M",
        (12, 384) => "33M",
        (12, 768) => "109M",
        (24, _) => "335M",
        _ => "?B",
    },
};

impl ArchSpec for Member {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)?;
        // BERT's position table stands in for rotation.
        hp.rope = self.variant.rope;
        hp.size_label = (self.size_label)(hp);
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp, self.variant)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        bert(hp, self.variant)
    }
}

impl Decoder for Member {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        encoder(b, self.variant)
    }
}

/// How a member of the family differs from BERT.
#[derive(Clone, Copy)]
pub struct Variant {
    /// Rotary positions instead of a position table, and no classifier head.
    pub rope: bool,
    /// A SwiGLU FFN (its biases loaded but not applied) rather than GELU's.
    pub gated: bool,
}

const PLAIN: Variant = Variant {
    rope: false,
    gated: false,
};

/// BERT's (and its variants', which may have no positions or classifier, or a gated FFN):
/// embeddings, token types, positions, the classifier (llama.cpp's one output at least), the
/// embedding norm; layers normed after attention and after the FFN, every bias.
pub(super) fn bert(hp: &HParams, variant: Variant) -> Vec<String> {
    let head = match variant.rope {
        false => {
            "token_embd.weight token_types.weight position_embd.weight cls.weight cls.bias \
                  cls.output.weight cls.output.bias token_embd_norm.weight token_embd_norm.bias"
        }
        true => "token_embd.weight token_types.weight token_embd_norm.weight token_embd_norm.bias",
    };
    let gate = if variant.gated { "ffn_gate.weight" } else { "" };
    layered(hp, head, |_| {
        format!(
            "QKV attn_output.weight attn_output.bias attn_output_norm.weight attn_output_norm.bias \
             ffn_up.weight ffn_up.bias ffn_down.weight ffn_down.bias {gate} layer_output_norm.weight \
             layer_output_norm.bias"
        )
    })
}

/// What BERT and Nomic BERT both read: the layer norms' epsilon; both need equal head sizes and
/// their token type count.
pub(super) fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
    if hp.n_embd_head_k != hp.n_embd_head_v {
        return Err(Error::model(format!(
            "{} needs equal key and value head sizes",
            hp.arch_name
        )));
    }
    if hp.n_token_types == 0 {
        return Err(Error::model(format!(
            "{} needs its token type count (tokenizer.ggml.token_type_count)",
            hp.arch_name
        )));
    }
    Ok(())
}

/// BERT's tensors, or a variant's (without a position table or classifier head where it rotates,
/// a gate projection in every FFN where it is gated).
pub(super) fn tensors(hp: &HParams, variant: Variant) -> Vec<TensorSpec> {
    let (e, v) = (hp.n_embd, hp.n_vocab);
    let n_cls_out = hp.n_cls_out();
    let mut specs = vec![
        TensorSpec::new("token_embd.weight", &[e, v], true),
        TensorSpec::new("token_types.weight", &[e, hp.n_token_types], false),
        TensorSpec::new("token_embd_norm.weight", &[e], true),
        TensorSpec::new("token_embd_norm.bias", &[e], true),
    ];
    if !variant.rope {
        specs.extend([
            TensorSpec::new("position_embd.weight", &[e, hp.n_ctx_train], true),
            TensorSpec::matmul("cls.weight", &[e, e], false),
            TensorSpec::new("cls.bias", &[e], false),
            TensorSpec::matmul("cls.output.weight", &[e, n_cls_out], false),
            TensorSpec::new("cls.output.bias", &[n_cls_out], false),
        ]);
    }
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        let q = hp.n_embd_head_k * hp.n_head[il];
        let kv = hp.n_embd_head_k * hp.n_head_kv[il];
        let ff = hp.n_ff[il];
        let qkv = b("attn_qkv.weight");
        specs.push(TensorSpec::matmul(&qkv, &[e, q + 2 * kv], false));
        specs.push(TensorSpec::new(b("attn_qkv.bias"), &[q + 2 * kv], false));
        for (name, width) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
            specs.push(TensorSpec::matmul(b(&format!("{name}.weight")), &[e, width], true).unless(&qkv));
            specs.push(TensorSpec::new(b(&format!("{name}.bias")), &[width], false));
        }
        specs.push(TensorSpec::matmul(b("attn_output.weight"), &[q, e], true));
        specs.push(TensorSpec::new(b("attn_output.bias"), &[e], false));
        specs.push(TensorSpec::new(b("attn_output_norm.weight"), &[e], true));
        specs.push(TensorSpec::new(b("attn_output_norm.bias"), &[e], true));
        specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
        specs.push(TensorSpec::new(b("ffn_up.bias"), &[ff], false));
        specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        specs.push(TensorSpec::new(b("ffn_down.bias"), &[e], false));
        if variant.gated {
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
        }
        specs.push(TensorSpec::new(b("layer_output_norm.weight"), &[e], true));
        specs.push(TensorSpec::new(b("layer_output_norm.bias"), &[e], true));
    }
    specs
}

/// The BERT encoder, or a variant's.
pub(super) fn encoder(b: &mut Builder, variant: Variant) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
    let pos = b.positions()?;
    let mut x = b.embed_tokens()?;
    // Every token is of type 0: the first row of the token-type table.
    if let Some(types) = b.weight_opt("token_types.weight") {
        let row0 = b.g.view(types, &[i64::from(hp.n_embd)], &[], 0)?;
        x = b.add(x, row0)?;
    }
    if !variant.rope {
        let pos_table = b.weight("position_embd.weight")?;
        let pos_embd = b.g.get_rows(pos_table, pos)?;
        x = b.add(pos_embd, x)?;
    }
    let x0 = b.name(x, "inp_embd", None);
    let (w, bias) = (b.weight("token_embd_norm.weight")?, b.weight("token_embd_norm.bias")?);
    x = b.layer_norm(x0, w, bias)?;
    x = b.name(x, "inp_norm", Some(0));
    let n_layer = hp.n_layer as usize;
    for il in 0..n_layer {
        let l = Some(il);
        let (q, k, v) = b.qkv(il, x, true)?;
        let (q, k) = if variant.rope {
            (b.rope(q, il, None)?, b.rope(k, il, None)?)
        } else {
            (q, k)
        };
        let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
        let att = b.attention_no_cache(il, q, k, v, kq_scale)?;
        let att = b.name(att, "kqv_out", l);
        let att = b.layer_linear(il, "attn_output", att)?;
        let (att, residual) = b.last_layer_rows(il, att, x)?;
        let h = b.add(att, residual)?;
        let (w, bias) = (
            b.layer_weight(il, "attn_output_norm.weight")?,
            b.layer_weight(il, "attn_output_norm.bias")?,
        );
        let h = b.layer_norm(h, w, bias)?;
        let h = b.name(h, "ffn_inp", l);
        // A layer with a router has GELU experts instead (Nomic BERT MoE's).
        let ffn = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
            let moe = Moe {
                act: ExpertAct::Gelu,
                ..Moe::BASE
            };
            let ffn = b.moe_ffn(il, h, moe)?;
            b.name(ffn, "ffn_moe_out", l)
        } else if variant.gated {
            let ffn = b.gated_ffn(il, h, Ffn::default())?;
            b.name(ffn, "ffn_out", l)
        } else {
            let ffn = b.gelu_ffn(il, h)?;
            b.name(ffn, "ffn_out", l)
        };
        let out = b.add(ffn, h)?;
        let (w, bias) = (
            b.layer_weight(il, "layer_output_norm.weight")?,
            b.layer_weight(il, "layer_output_norm.bias")?,
        );
        x = b.layer_norm(out, w, bias)?;
    }
    let x = b.name(x, "result_embd", None);
    b.set_hidden(x);
    Ok(None)
}
