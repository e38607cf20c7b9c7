//! Granite Switch's adapters switched per token: activation tokens are embedded as their
//! substitutes, and a one-head router layer over the cache (after the blocks, its keys +gain at
//! an activation token and -gain elsewhere, its values the activated slot) gives each token the
//! slot of the activation token it attends to most; every block's projections then add the low
//! rank delta of that slot (`<weight>.lora_a` then `.lora_b`, stacked per slot, slot 0 the
//! base's).

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{set_f32, set_i32, Builder, GraphInput, UbatchView};

/// The ubatch's substituted token ids (written over the token ids input, which the embeddings
/// read) and the router's query, key and value signals, F32 [n_tokens] each.
struct Signals {
    tokens: TensorRef,
    key: TensorRef,
    value: TensorRef,
    query: TensorRef,
}

impl GraphInput for Signals {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let adapters = ub
            .hp
            .token_adapters
            .as_ref()
            .ok_or_else(|| Error::Internal("switched adapters without adapters".into()))?;
        let gain = adapters.router_gain;
        let n = ub.places.len();
        let (mut tokens, mut key, mut value) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for t in ub.places {
            let tok = t.ext.tok;
            let (k, v, sub) = match adapters.of(tok) {
                Some((slot, sub)) => (gain, slot as f32, sub),
                None => (-gain, 0.0, tok),
            };
            tokens.push(sub);
            key.push(k);
            value.push(v);
        }
        set_i32(self.tokens, &tokens)?;
        set_f32(self.key, &key)?;
        set_f32(self.value, &value)?;
        set_f32(self.query, &vec![1.0; n])
    }
}

/// The embeddings of the ubatch's tokens, activation tokens replaced by their substitutes and
/// scaled by the model's embedding scale, [n_embd, n_tokens]; and per token the adapter slot the
/// router picks, I32 [n_tokens].
pub(super) fn embed_and_route(b: &mut Builder) -> Result<(TensorRef, TensorRef)> {
    let hp = b.hp;
    let n_adapters = hp
        .token_adapters
        .as_ref()
        .map(|a| a.activate.len())
        .ok_or_else(|| Error::Internal("switched adapters without adapters".into()))?;
    let tokens = b.token_ids()?;
    let nt = b.shape.n_tokens as i64;
    let f32t = ggml_sys::ggml_type_GGML_TYPE_F32;
    let key = b.g.input(f32t, &[nt], "inp_router_k")?;
    let value = b.g.input(f32t, &[nt], "inp_router_v")?;
    let query = b.g.input(f32t, &[nt], "inp_router_q")?;
    b.inputs.add(Signals {
        tokens,
        key,
        value,
        query,
    });
    let table = b.weight("token_embd.weight")?;
    let mut x = b.g.get_rows(table, tokens)?;
    if hp.embedding_scale != 0.0 {
        x = b.scale(x, hp.embedding_scale)?;
    }
    let x = b.name(x, "inp_embd", None);
    // Only the first dimension of the router's heads carries a signal.
    let head = i64::from(hp.n_embd_head_k);
    let lane = |b: &mut Builder, s: TensorRef| -> Result<TensorRef> {
        let t = b.g.reshape(s, &[1, 1, nt])?;
        b.g.pad(t, [head - 1, 0, 0, 0]).map_err(Error::from)
    };
    let (q, k, v) = (lane(b, query)?, lane(b, key)?, lane(b, value)?);
    let router = hp.n_layer as usize;
    let out = b.attention(router, q, k, v, 1.0, false)?;
    let out = b.name(out, "router_out", Some(router));
    let slot = b.g.view(out, &[1, nt], &[out.nb()[1]], 0)?;
    let slot = b.g.cont(slot)?;
    let slot = b.g.reshape(slot, &[nt])?;
    let slot = b.g.clamp(slot, 0.0, n_adapters as f32)?;
    let slot = b.g.round(slot)?;
    let ids = b.g.cast(slot, ggml_sys::ggml_type_GGML_TYPE_I32)?;
    Ok((x, b.name(ids, "adapter_ids", None)))
}

/// Layer `il`'s delta of the adapter `ids` picks per token for the weight `stem` on `x`
/// ([n_in, n_tokens]): `.lora_b` times `.lora_a` times `x`, [n_out, n_tokens].
pub(super) fn delta(b: &mut Builder, il: usize, stem: &str, x: TensorRef, ids: TensorRef) -> Result<TensorRef> {
    let [n_in, nt, ..] = x.ne();
    let a = b.layer_weight(il, &format!("{stem}.lora_a"))?;
    let lb = b.layer_weight(il, &format!("{stem}.lora_b"))?;
    let x = b.g.reshape(x, &[n_in, 1, nt])?;
    let ids = b.g.reshape(ids, &[1, nt])?;
    let low = b.g.mul_mat_id(a, x, ids)?;
    let d = b.g.mul_mat_id(lb, low, ids)?;
    b.g.reshape(d, &[d.ne()[0], nt]).map_err(Error::from)
}

/// Layer `il`'s weight `stem` times `x` plus its switched delta.
pub(super) fn switched(b: &mut Builder, il: usize, stem: &str, x: TensorRef, ids: TensorRef) -> Result<TensorRef> {
    let base = b.layer_matmul(il, &format!("{stem}.weight"), x)?;
    let d = delta(b, il, stem, x, ids)?;
    b.add(base, d)
}
