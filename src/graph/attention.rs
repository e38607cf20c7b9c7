//! Attention: the query, key and value projections, attention over the KV cache (`attend`) and
//! without one, and the layer forms the architectures share.

use super::inputs::Rotated;
use super::{is_sliding, Builder, Order};
use crate::error::{Error, Result};
use crate::ggml::{Scores, TensorRef};

/// Where attention's values come from.
enum Values {
    /// This ubatch's values, stored in the layer's V cache beside the keys.
    Cached(TensorRef),
    /// The first `width` dimensions of each cached key (absorbed latent attention), each head's
    /// output then widened by `v_mla` ([width, head_v, n_head]).
    Latent { width: i64, v_mla: TensorRef },
    /// Another layer's cached keys and values (this ubatch's included), which that layer
    /// stored: nothing is written.
    Shared(usize),
}

impl Builder<'_> {
    /// View [n_embd_head * n_head, n_tokens] as [n_embd_head, n_head, n_tokens].
    pub fn heads(&mut self, x: TensorRef, head_dim: u32, n_head: u32) -> Result<TensorRef> {
        let h = self
            .g
            .reshape(x, &[i64::from(head_dim), i64::from(n_head), self.shape.n_tokens as i64])?;
        // The reshaped projection keeps its name ("Qcur-3"), as llama.cpp names it.
        let name = x.name();
        if !name.is_empty() {
            self.g.set_name(h, &name);
        }
        Ok(h)
    }

    /// Store this ubatch's K and V ([head_dim, n_head_kv, n_tokens]) in layer `il`'s cache rows,
    /// attend with `q` ([head_dim, n_head, n_tokens]) over the first n_kv cells, and return the
    /// heads' outputs merged, [n_embd_head_v * n_head, n_tokens].
    pub fn attention(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        v: TensorRef,
        kq_scale: f32,
        sliding: bool,
    ) -> Result<TensorRef> {
        self.attend(il, q, Some(k), Values::Cached(v), kq_scale, sliding, (None, None))
    }

    /// Attention with `q` ([head_dim, n_head, n_tokens]) over the keys and values layer `src`
    /// cached, which layer `il` shares (it has no cache of its own): the cells `src` attends,
    /// through the window where `src` slides. Returns the heads' outputs merged.
    pub fn attention_shared(&mut self, il: usize, src: usize, q: TensorRef, kq_scale: f32) -> Result<TensorRef> {
        let sliding = is_sliding(self.hp, src);
        self.attend(il, q, None, Values::Shared(src), kq_scale, sliding, (None, None))
    }

    /// `attention` over the full layers' cells with `kq_b` ([n_kv, n_tokens, n_head]) added to
    /// the scores before the softmax (learned position biases); as in llama.cpp, such scores
    /// never go through flash attention, whose mask type the context still decides.
    pub fn attention_biased(
        &mut self,
        il: usize,
        (q, k, v): (TensorRef, TensorRef, TensorRef),
        kq_b: TensorRef,
        kq_scale: f32,
    ) -> Result<TensorRef> {
        self.attend(il, q, Some(k), Values::Cached(v), kq_scale, false, (None, Some(kq_b)))
    }

    /// `attention` with `mask` ([n_kv, n_tokens]) in place of the attention mask (sparse
    /// attention's).
    pub fn attention_masked(
        &mut self,
        il: usize,
        (q, k, v): (TensorRef, TensorRef, TensorRef),
        kq_scale: f32,
        mask: TensorRef,
    ) -> Result<TensorRef> {
        self.attend(il, q, Some(k), Values::Cached(v), kq_scale, false, (Some(mask), None))
    }

    /// Absorbed multi-head latent attention (llama.cpp's attention over a keys-only cache): store
    /// `k` ([n_embd_head_k, 1, n_tokens]: the normed latent, then the rotated part), attend with
    /// `q` ([n_embd_head_k, n_head, n_tokens]) taking the values from the cached keys' first
    /// `n_lora_kv` dimensions, and widen each head's output by `v_mla` ([n_lora_kv, head_v,
    /// n_head]). Returns [head_v * n_head, n_tokens]. Never rotated by Hadamard, as in llama.cpp.
    /// `mask` ([n_kv, n_tokens]) replaces the attention mask (sparse attention's).
    pub fn attention_latent(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        v_mla: TensorRef,
        kq_scale: f32,
        mask: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let width = i64::from(self.hp.n_lora_kv);
        let sliding = is_sliding(self.hp, il);
        self.attend(
            il,
            q,
            Some(k),
            Values::Latent { width, v_mla },
            kq_scale,
            sliding,
            (mask, None),
        )
    }

    /// Attention over the cache, storing this ubatch's keys `k` (none where the values are
    /// another layer's); `mask` replaces the attention mask where sparse attention limits it,
    /// `kq_b` is added to the scores.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        il: usize,
        q: TensorRef,
        k: Option<TensorRef>,
        values: Values,
        kq_scale: f32,
        sliding: bool,
        (mask, kq_b): (Option<TensorRef>, Option<TensorRef>),
    ) -> Result<TensorRef> {
        let hp = self.hp;
        let nt = self.shape.n_tokens as i64;
        if sliding && hp.n_swa == 0 {
            return Err(Error::model("sliding-window layer without a window"));
        }
        // The layer whose cache is read: this one, or the one it shares.
        let src = match values {
            Values::Shared(src) => src,
            _ => il,
        };
        // A sliding-window layer's keys are in the sliding layers' cells, with their own rows.
        let own_cells = self.kv.sliding_layer(src);
        if own_cells != sliding {
            return Err(Error::Internal(format!(
                "layer {il}: attends {} the sliding window but its keys are cached with the {} layers",
                if sliding { "through" } else { "without" },
                if own_cells { "sliding-window" } else { "full-attention" }
            )));
        }
        let n_kv = if own_cells {
            self.shape.n_kv_swa
        } else {
            self.shape.n_kv
        } as i64;
        let hk = i64::from(hp.head_k(src));
        let n_head_kv = i64::from(hp.n_head_kv[src]);
        let kc = self.kv.k(src);
        // Per-head attention sinks, in the layers that have them.
        let sinks = self.layer_weight_opt(il, "attn_sinks.weight");
        let cached = matches!(values, Values::Cached(_));
        // Values read from a transposed cache: this layer's (unless training reads them directly)
        // or the layer's it shares.
        let values_transposed = self.kv.v_transposed()
            && match values {
                Values::Cached(_) => !self.params.training,
                Values::Shared(_) => true,
                Values::Latent { .. } => false,
            };
        // Rotated before a quantized cache stores them, as llama.cpp does (latent attention's
        // cache never is).
        let latent = matches!(values, Values::Latent { .. });
        let keys = if own_cells { Rotated::SlidingKeys } else { Rotated::Keys };
        let k_rot = if latent { None } else { self.rotation(keys)? };
        let (q, k) = match k_rot {
            Some(rot) => (
                self.g.hadamard(rot, q)?,
                k.map(|k| self.g.hadamard(rot, k)).transpose()?,
            ),
            None => (q, k),
        };
        let v_rot = if latent { None } else { self.rotation(Rotated::Values)? };
        let v = match (values, v_rot) {
            (Values::Cached(v), Some(rot)) => Values::Cached(self.g.hadamard(rot, v)?),
            (values, _) => values,
        };
        // Queries, values, then keys, in llama.cpp's graph order (queries, keys, then values in
        // a model with sliding-window layers, whose caches llama.cpp keeps apart).
        let iswa = hp.has_sliding_layers();
        let vals = match v {
            Values::Cached(v) => Some(v),
            Values::Latent { .. } | Values::Shared(_) => None,
        };
        let order = if iswa { [Some(q), k, vals] } else { [Some(q), vals, k] };
        for t in order.into_iter().flatten() {
            self.g.expand(t);
        }

        // Training reads the ubatch's keys and values directly (the cache holds no more).
        let direct = self.params.training && cached;
        if direct && (n_kv != nt || self.shape.n_streams > 1) {
            return Err(Error::Internal(format!(
                "training attends over {n_kv} cells in {} streams: needs the ubatch's {nt} in one",
                self.shape.n_streams
            )));
        }
        // Write first: the attention below reads the cache, including these rows.
        if let Some(k) = k.filter(|_| !direct) {
            let kv_rows = self.rows_input(false, own_cells)?;
            let k2 = self.merge_heads(k)?;
            let k_store = self.g.set_rows(kc, k2, kv_rows)?;
            self.g.expand(k_store);
        }

        let row = |t: TensorRef, n: i64| crate::ggml::row_size(t.ggml_type(), n);
        let mask = match mask {
            Some(m) => m,
            None => self.mask(sliding)?,
        };

        // Each group of tokens attends to its own stream's cells.
        let ns = self.shape.n_streams.max(1) as i64;
        let tps = nt / ns;
        let n_head = i64::from(hp.n_head[il]);
        let stream_rows = self.kv.layer_stream_size(src) as i64;
        let k_stream = row(kc, hk * n_head_kv * stream_rows);
        let s0 = self.shape.first_stream;
        // A view, not a reshape: queries may be strided views of a fused projection.
        let qnb = q.nb();
        let q = self
            .g
            .view(q, &[hk, n_head, tps, ns], &[qnb[1], qnb[2], qnb[2] * tps as usize], 0)?;
        let k_strides = [row(kc, hk), row(kc, hk * n_head_kv), k_stream];
        let kview = match k.filter(|_| direct) {
            Some(k) => k,
            None => self.g.view(kc, &[hk, n_head_kv, n_kv, ns], &k_strides, k_stream * s0)?,
        };
        let (vview, hv, v_mla) = match v {
            Values::Cached(v) if direct => (v, i64::from(hp.head_v(il)), None),
            Values::Cached(_) | Values::Shared(_) => {
                let vc = self
                    .kv
                    .v(src)
                    .ok_or_else(|| Error::Internal(format!("layer {src} has no V cache")))?;
                let hv = i64::from(hp.head_v(src));
                let stored = vc.ne()[0];
                let v_stream = row(vc, stored * stream_rows);
                if let Values::Cached(v) = v {
                    let v2 = self.merge_heads(v)?;
                    let v_rows = self.rows_input(true, own_cells)?;
                    if values_transposed {
                        self.store_transposed(vc, v2, v_rows)?;
                    } else {
                        let v_store = self.g.set_rows(vc, v2, v_rows)?;
                        self.g.expand(v_store);
                    }
                }
                let vview = if values_transposed {
                    // [n_kv, heads, head_dim, streams]: each dimension's cells adjacent.
                    self.g.view(
                        vc,
                        &[n_kv, n_head_kv, hv, ns],
                        &[row(vc, stream_rows * hv), row(vc, stream_rows), v_stream],
                        v_stream * s0,
                    )?
                } else {
                    self.g.view(
                        vc,
                        &[hv, n_head_kv, n_kv, ns],
                        &[row(vc, hv), row(vc, hv * n_head_kv), v_stream],
                        v_stream * s0,
                    )?
                };
                (vview, hv, None)
            }
            Values::Latent { width, v_mla } => {
                let vview = self
                    .g
                    .view(kc, &[width, n_head_kv, n_kv, ns], &k_strides, k_stream * s0)?;
                (vview, width, Some(v_mla))
            }
        };
        // Each head's output width, after latent attention's widening.
        let h_out = v_mla.map_or(hv, |w| w.ne()[1]);
        // As a 4-D view only where its shape differs (no extra node in llama.cpp's node order).
        let mask = if mask.ne() == [n_kv, tps, 1, ns] {
            mask
        } else {
            self.g.reshape(mask, &[n_kv, tps, 1, ns])?
        };

        // [head_dim, tokens, heads, streams].
        let q = self.g.permute(q, [0, 2, 1, 3])?;
        let kp = self.g.permute(kview, [0, 2, 1, 3])?;
        let vp = self.g.permute(vview, [0, 2, 1, 3])?;
        let scores = Scores {
            scale: kq_scale,
            max_bias: hp.max_alibi_bias,
            softcap: hp.attn_softcap,
        };
        let o = if self.params.flash_attn && kq_b.is_none() {
            if hp.kq_tanh_cap != 0.0 {
                return Err(Error::model(
                    "capped attention scores need attention without flash attention",
                ));
            }
            // Result [head_dim_v, n_head, tokens, streams].
            let o = self.g.flash_attn(q, kp, vp, mask, scores, sinks)?;
            match v_mla {
                // Widened as one matrix product per head, tokens in dimension 1 (as llama.cpp).
                Some(w) => {
                    let o = self.g.permute(o, [0, 2, 1, 3])?;
                    let o = self.g.mul_mat(w, o)?;
                    let o = self.g.permute(o, [0, 2, 1, 3])?;
                    self.g.cont(o)?
                }
                None => o,
            }
        } else {
            let mut kq = self.g.mul_mat(kp, q)?; // [n_kv, tokens, n_head, streams]
            if hp.kq_tanh_cap != 0.0 {
                kq = self.soft_cap(kq, hp.kq_tanh_scale, hp.kq_tanh_cap)?;
            }
            if hp.attn_softcap != 0.0 {
                kq = self.soft_cap(kq, 1.0, hp.attn_softcap)?;
            }
            if let Some(b) = kq_b {
                kq = self.g.add(kq, b)?;
            }
            let kq = self.g.soft_max(kq, mask, kq_scale, hp.max_alibi_bias, sinks)?;
            // V as [n_kv, head_dim, n_head_kv] so that V x KQ gives [head_dim, tokens, n_head]:
            // a transposed cache is that already, else it is copied so.
            let vt = if values_transposed {
                vp
            } else {
                let vt = self.g.permute(vp, [1, 0, 2, 3])?;
                self.g.cont(vt)?
            };
            let mut kqv = self.g.mul_mat(vt, kq)?;
            if let Some(w) = v_mla {
                kqv = self.g.mul_mat(w, kqv)?;
            }
            let o = self.g.permute(kqv, [0, 2, 1, 3])?; // [head_dim, n_head, tokens, streams]
            self.g.cont(o)?
        };
        let o = self.g.reshape(o, &[h_out * n_head, nt])?;
        self.unrotate(o, v_rot)
    }

    /// Store the ubatch's values `v` ([width, n_tokens]) in the transposed cache `vc`: every
    /// element a row of its own, put by `indices` (`kv::KvCache::value_indices`), the values
    /// padded to the cache's width where the layer is narrower, as llama.cpp stores them.
    fn store_transposed(&mut self, vc: TensorRef, v: TensorRef, indices: TensorRef) -> Result<()> {
        let [width, n_tokens, ..] = v.ne();
        let v = if v.nb()[1] == crate::ggml::row_size(v.ggml_type(), width) {
            v
        } else {
            self.g.cont(v)?
        };
        let stored = vc.ne()[0];
        let v = if width < stored {
            self.g.pad(v, [stored - width, 0, 0, 0])?
        } else {
            v
        };
        let dst = self.g.reshape(vc, &[1, vc.ne().iter().product()])?;
        let src = self.g.reshape(v, &[1, stored * n_tokens])?;
        let store = self.g.set_rows(dst, src, indices)?;
        self.g.expand(store);
        Ok(())
    }

    /// Layer `il`'s attention output `att` ([head_v * n_head, n_tokens]) times its gate `gate`:
    /// one value per head, spread over the head, when `gate` is [n_head, n_tokens], otherwise one
    /// per element (the gated attentions of Spark 2.5, AFMoE and Laguna).
    pub fn gate_heads(&mut self, il: usize, att: TensorRef, gate: TensorRef) -> Result<TensorRef> {
        // Each head's width as the attention output has it (latent attention's widened heads).
        let n_head = i64::from(self.hp.n_head[il]);
        let (head, n_tokens) = (att.ne()[0] / n_head.max(1), att.ne()[1]);
        let gated = if gate.ne()[0] == n_head {
            let heads = self.g.reshape(att, &[head, n_head, n_tokens])?;
            let gate = self.g.reshape(gate, &[1, n_head, n_tokens])?;
            let gated = self.g.mul(heads, gate)?;
            self.g.reshape(gated, &[head * n_head, n_tokens])?
        } else {
            self.g.mul(att, gate)?
        };
        Ok(self.name(gated, "attn_gated", Some(il)))
    }

    /// The attention's output rotated back from the values' rotation (the matrix is its own
    /// inverse).
    pub fn unrotate(&mut self, o: TensorRef, v_rot: Option<TensorRef>) -> Result<TensorRef> {
        match v_rot {
            Some(rot) => self.g.hadamard(rot, o).map_err(Error::from),
            None => Ok(o),
        }
    }

    /// Layer `il`'s rotary self-attention over the normed `cur`: per-head projections (with
    /// their biases and scales), rotation without frequency factors, attention over the cache
    /// (through the window on `sliding` layers). Returns the heads' output before the output
    /// projection ([head_v * n_head, n_tokens]).
    pub fn rotary_attention(&mut self, il: usize, cur: TensorRef, kq_scale: f32, sliding: bool) -> Result<TensorRef> {
        let l = Some(il);
        let (q, k, v) = self.qkv(il, cur, true)?;
        let q = self.rope(q, il, None)?;
        let k = self.rope(k, il, None)?;
        let (q, k, v) = (
            self.name(q, "Qcur", l),
            self.name(k, "Kcur", l),
            self.name(v, "Vcur", l),
        );
        let att = self.attention(il, q, k, v, kq_scale, sliding)?;
        Ok(self.name(att, "kqv_out", l))
    }

    /// Layer `il`'s attention over the normed `cur` with per-head query and key norms before the
    /// rotation: projections with their biases and scales, the norms, rotation
    /// with `factors`, attention over the cache and the output projection.
    pub fn head_normed_attention(
        &mut self,
        il: usize,
        cur: TensorRef,
        kq_scale: f32,
        factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let (q, k, v) = self.qkv(il, cur, true)?;
        let q = self.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
        let k = self.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
        let q = self.rope(q, il, factors)?;
        let k = self.rope(k, il, factors)?;
        let att = self.attention(il, q, k, v, kq_scale, false)?;
        let wo = self.layer_weight(il, "attn_output.weight")?;
        self.linear(wo, None, att)
    }

    /// Layer `il`'s pre-norm rotary attention over the stream `x`: `attn_norm`, attention
    /// (`rotary_attention`, full-sized layers), the output projection without a bias, and the
    /// residual sum (`ffn_inp`), the last layer keeping only the requested rows. Returns the sum
    /// and the layer's input (those rows of it in the last layer).
    pub fn pre_norm_attention(&mut self, il: usize, x: TensorRef, kq_scale: f32) -> Result<(TensorRef, TensorRef)> {
        let cur = self.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let att = self.rotary_attention(il, cur, kq_scale, false)?;
        let wo = self.layer_weight(il, "attn_output.weight")?;
        let att = self.linear(wo, None, att)?;
        let (att, input) = self.last_layer_rows(il, att, x)?;
        let h = self.add(att, input)?;
        Ok((self.name(h, "ffn_inp", Some(il)), input))
    }

    /// Layer `il`'s attention of the ubatch's tokens among themselves, without a cache
    /// (encoders): `q`, `k`, `v` are [head, n_head(_kv), n_tokens]; the mask ([n_tokens,
    /// n_tokens]) keeps each token to its own sequence (and a sliding layer's to its window).
    /// Returns [head_v * n_head, n_tokens].
    pub fn attention_no_cache(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        v: TensorRef,
        kq_scale: f32,
    ) -> Result<TensorRef> {
        self.attention_no_cache_biased(il, (q, k, v), None, kq_scale)
    }

    /// The same with `kq_b` ([n_tokens, n_tokens, n_head]) added to the scores before the
    /// softmax (learned position biases); as in llama.cpp, such scores never go through flash
    /// attention, whose mask type the context still decides.
    pub fn attention_no_cache_biased(
        &mut self,
        il: usize,
        (q, k, v): (TensorRef, TensorRef, TensorRef),
        kq_b: Option<TensorRef>,
        kq_scale: f32,
    ) -> Result<TensorRef> {
        let mask = self.ubatch_mask(super::is_sliding(self.hp, il))?;
        self.attention_over((q, k, v), mask, kq_b, kq_scale)
    }

    /// Attention of `q` ([head, n_head, n_tokens]) over keys and values made in this graph
    /// (`k`, `v`: [head, n_head_kv, n_keys]; the ubatch's own, or an encoder's outputs), under
    /// `mask` ([n_keys, n_tokens]), `kq_b` added to the scores (then without flash attention).
    /// Returns [head_v * n_head, n_tokens].
    pub fn attention_over(
        &mut self,
        (q, k, v): (TensorRef, TensorRef, TensorRef),
        mask: TensorRef,
        kq_b: Option<TensorRef>,
        kq_scale: f32,
    ) -> Result<TensorRef> {
        let (hv, n_head, nt) = (v.ne()[0], q.ne()[1], q.ne()[2]);
        let q = self.g.permute(q, [0, 2, 1, 3])?;
        let k = self.g.permute(k, [0, 2, 1, 3])?;
        let v = self.g.permute(v, [0, 2, 1, 3])?;
        let f16 = ggml_sys::ggml_type_GGML_TYPE_F16;
        // ALiBi where the model has it: the mask holds the distances.
        let scores = Scores {
            scale: kq_scale,
            max_bias: self.hp.max_alibi_bias,
            softcap: self.hp.attn_softcap,
        };
        if self.params.flash_attn && kq_b.is_none() {
            // Flash attention reads F16 keys and values.
            let k = self.g.cast(k, f16)?;
            let v = self.g.cast(v, f16)?;
            let o = self.g.flash_attn(q, k, v, mask, scores, None)?;
            self.g.reshape(o, &[hv * n_head, nt]).map_err(Error::from)
        } else {
            let mut kq = self.g.mul_mat(k, q)?; // [n_tokens, n_tokens, n_head]
            if let Some(b) = kq_b {
                kq = self.g.add(kq, b)?;
            }
            let kq = self.g.soft_max(kq, mask, kq_scale, self.hp.max_alibi_bias, None)?;
            let vt = self.g.permute(v, [1, 0, 2, 3])?;
            let vt = self.g.cont(vt)?;
            let kqv = self.g.mul_mat(vt, kq)?; // [head_v, n_tokens, n_head]
            let o = self.g.permute(kqv, [0, 2, 1, 3])?;
            let o = self.g.cont(o)?;
            self.g.reshape(o, &[hv * n_head, nt]).map_err(Error::from)
        }
    }

    /// [head, n_head, n_tokens] (heads adjacent, tokens possibly strided, as views of a fused
    /// projection are) as [head * n_head, n_tokens], without a copy.
    pub fn merge_heads(&mut self, x: TensorRef) -> Result<TensorRef> {
        let [head, n_head, n_tokens, _] = x.ne();
        let nb = x.nb();
        if nb[1] != crate::ggml::row_size(x.ggml_type(), head) {
            return Err(Error::Internal(format!("heads of {:?} are not adjacent", x.ne())));
        }
        self.g
            .view(x, &[head * n_head, n_tokens], &[nb[2]], 0)
            .map_err(Error::from)
    }

    /// Layer `il`'s queries, keys and values of `x`, from its separate projections or its fused
    /// `attn_qkv` (each with its bias and scale): per head, [head, n_head, n_tokens] (views of a
    /// fused projection), or flat and contiguous, [head * n_head, n_tokens].
    pub fn qkv(&mut self, il: usize, x: TensorRef, per_head: bool) -> Result<(TensorRef, TensorRef, TensorRef)> {
        self.qkv_scaled(il, x, per_head, true)
    }

    /// The same, leaving a fused projection's scale out unless `scaled` (OpenELM's graph does).
    pub fn qkv_scaled(
        &mut self,
        il: usize,
        x: TensorRef,
        per_head: bool,
        scaled: bool,
    ) -> Result<(TensorRef, TensorRef, TensorRef)> {
        let hp = self.hp;
        // llama.cpp clamps the projections it splits into heads when the model asks for it.
        let clamp = per_head && hp.clamp_kqv > 0.0;
        let Some(w) = self.layer_weight_opt(il, "attn_qkv.weight") else {
            let proj = |bd: &mut Builder, name: &str| -> Result<TensorRef> {
                // "Qcur-3" after the (scaled) product and again after the bias, as llama.cpp
                // names each projection.
                let label = format!("{}cur", name.trim_start_matches("attn_").to_uppercase());
                let w = bd.layer_weight(il, &format!("{name}.weight"))?;
                let t = bd.linear(w, None, x)?;
                let mut t = bd.name(t, &label, Some(il));
                if let Some(b) = bd.layer_weight_opt(il, &format!("{name}.bias")) {
                    t = bd.add(t, b)?;
                    t = bd.name(t, &label, Some(il));
                }
                if clamp {
                    bd.g.clamp(t, -hp.clamp_kqv, hp.clamp_kqv).map_err(Error::from)
                } else {
                    Ok(t)
                }
            };
            let q = proj(self, "attn_q")?;
            let k = proj(self, "attn_k")?;
            let v = proj(self, "attn_v")?;
            if !per_head {
                return Ok((q, k, v));
            }
            return Ok((
                self.heads(q, hp.head_k(il), hp.n_head[il])?,
                self.heads(k, hp.head_k(il), hp.n_head_kv[il])?,
                self.heads(v, hp.head_v(il), hp.n_head_kv[il])?,
            ));
        };
        let bias = self.layer_weight_opt(il, "attn_qkv.bias");
        let qkv = if scaled {
            self.linear(w, bias, x)?
        } else {
            self.project(w, bias, x, Order::BiasThenScale { scaled: false })?
        };
        let mut qkv = self.name(qkv, "wqkv", Some(il));
        if clamp {
            qkv = self.g.clamp(qkv, -hp.clamp_kqv, hp.clamp_kqv)?;
        }
        self.split_qkv(il, qkv, per_head)
    }

    /// Layer `il`'s queries, keys and values out of the output of its fused projection: per
    /// head (views) or flat and contiguous, as `qkv` returns them.
    pub fn split_qkv(
        &mut self,
        il: usize,
        qkv: TensorRef,
        per_head: bool,
    ) -> Result<(TensorRef, TensorRef, TensorRef)> {
        let hp = self.hp;
        let (hk, hv) = (i64::from(hp.head_k(il)), i64::from(hp.head_v(il)));
        let (nh, nkv) = (i64::from(hp.n_head[il]), i64::from(hp.n_head_kv[il]));
        let nt = qkv.ne()[1];
        let row = |n: i64| crate::ggml::row_size(qkv.ggml_type(), n);
        let nb1 = qkv.nb()[1];
        let parts = [(hk, nh, 0), (hk, nkv, hk * nh), (hv, nkv, hk * nh + hk * nkv)];
        let mut out = Vec::with_capacity(3);
        for (head, n, start) in parts {
            let t = if per_head {
                self.g.view(qkv, &[head, n, nt], &[row(head), nb1], row(start))
            } else {
                self.g.view(qkv, &[head * n, nt], &[nb1], row(start))
            }?;
            out.push(if per_head { t } else { self.g.cont(t)? });
        }
        Ok((out[0], out[1], out[2]))
    }

    /// The queries `q` scaled by attention temperature tuning where the model has it
    /// (`HParams::attn_temp`), unchanged otherwise.
    pub fn temperature_tuned(&mut self, q: TensorRef) -> Result<TensorRef> {
        if self.hp.attn_temp.scale == 0.0 {
            return Ok(q);
        }
        let t = self.attn_temperature()?;
        self.g.mul(q, t).map_err(Error::from)
    }
}
