//! T5's cross-attention: each decoder layer's queries attend to the encoder's outputs that
//! `llama_encode` left (`graph::Cross`), each token to those of its own sequences, without
//! position biases.

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{mask_type, set_f32, set_mask, Builder, GraphInput, UbatchView};
use crate::model::hparams::HParams;
use crate::model::spec::TensorSpec;

/// The encoder's outputs ([n_embd, n_enc], `cross_embd`) and which of them each token sees
/// ([n_enc, n_tokens]).
#[derive(Clone, Copy)]
pub(super) struct Encoded {
    embd: TensorRef,
    mask: TensorRef,
}

impl GraphInput for Encoded {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let cross = ub
            .cross
            .ok_or_else(|| Error::invalid("T5's decoder needs the encoder's outputs: call llama_encode first"))?;
        set_f32(self.embd, &cross.rows)?;
        let mask: Vec<f32> = ub
            .places
            .iter()
            .flat_map(|t| {
                cross
                    .seqs
                    .iter()
                    .map(move |s| if s.intersects(&t.seqs) { 0.0 } else { f32::NEG_INFINITY })
            })
            .collect();
        set_mask(self.mask, &mask)
    }
}

/// The decoder's inputs of the encoder's outputs.
pub(super) fn inputs(b: &mut Builder) -> Result<Encoded> {
    let (n_embd, n_enc, n) = (i64::from(b.hp.n_embd), b.shape.n_enc as i64, b.shape.n_tokens as i64);
    let f32 = ggml_sys::ggml_type_GGML_TYPE_F32;
    let embd = b.g.input(f32, &[n_embd, n_enc], "cross_embd")?;
    let mask =
        b.g.input(mask_type(b.params.flash_attn), &[n_enc, n], "cross_kq_mask")?;
    let enc = Encoded { embd, mask };
    b.inputs.add(enc);
    Ok(enc)
}

/// Decoder layer `il`'s cross-attention tensors (its position biases are loaded, unused, as in
/// llama.cpp).
pub(super) fn tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("dec.blk.{il}.cross_attn_{s}");
    let e = hp.n_embd;
    let (k, v) = (hp.n_embd_head_k * hp.n_head_kv[il], hp.n_embd_head_v * hp.n_head_kv[il]);
    specs.extend([
        TensorSpec::new(b("norm.weight"), &[e], true),
        TensorSpec::new(b("rel_b.weight"), &[hp.n_head[il], hp.n_rel_attn_bkts], false),
        TensorSpec::matmul(b("q.weight"), &[e, k], true),
        TensorSpec::matmul(b("k.weight"), &[e, k], true),
        TensorSpec::matmul(b("v.weight"), &[e, v], true),
        TensorSpec::matmul(b("o.weight"), &[v, e], true),
    ]);
}

/// Decoder layer `il`'s cross-attention from the stream `h`: its norm, the queries of `h`, the
/// keys and values of the encoder's outputs, attention and the output projection.
pub(super) fn attention(b: &mut Builder, il: usize, h: TensorRef, enc: Encoded) -> Result<TensorRef> {
    let (hp, l) = (b.hp, Some(il));
    let w = |s: &str| format!("dec.blk.{il}.cross_attn_{s}.weight");
    let norm = b.weight(&w("norm"))?;
    let cur = b.rms_norm(h, norm)?;
    let cur = b.name(cur, "attn_norm_cross", l);
    let (head, n_head, n_kv) = (
        i64::from(hp.n_embd_head_k),
        i64::from(hp.n_head[il]),
        i64::from(hp.n_head_kv[il]),
    );
    let n_enc = enc.embd.ne()[1];
    let mut proj = |name: &str, x: TensorRef, label: &str, shape: [i64; 3]| -> Result<TensorRef> {
        let wt = b.weight(&w(name))?;
        let t = b.weight_mm(wt, x)?;
        let t = b.name(t, label, l);
        b.g.reshape(t, &shape).map_err(Error::from)
    };
    let q = proj("q", cur, "Qcur", [head, n_head, cur.ne()[1]])?;
    let k = proj("k", enc.embd, "Kcur", [head, n_kv, n_enc])?;
    let v = proj("v", enc.embd, "Vcur", [head, n_kv, n_enc])?;
    let att = b.attention_over((q, k, v), enc.mask, None, 1.0)?;
    let wo = b.weight(&w("o"))?;
    let att = b.weight_mm(wo, att)?;
    Ok(b.name(att, "kqv_out", l))
}
