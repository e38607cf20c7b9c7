//! The RWKV family: no attention, every layer a WKV time mix (a linear attention whose per-head
//! matrix state is carried from token to token) over token-shifted inputs, then a channel mix
//! over token-shifted inputs (RWKV-6, RWKV-7) or a Qwen2-style gated FFN (the hybrids
//! RWKV6-Qwen2 and ARWKV-7, distilled from Qwen2 models). The context keeps, per layer and
//! sequence, the previous token's normed inputs (the token shift) and the WKV state. The time
//! mixes of the two generations are `rwkv/wkv6.rs` and `rwkv/wkv7.rs`.

mod wkv6;
mod wkv7;

use super::created::layered;
use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::{HParams, Wkv};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

/// A member of the family: its generation of time mix, and whether it is a hybrid (RMS norms,
/// one token-shift vector per layer, a gated FFN for the channel mix, no embedding norm).
pub struct Member {
    facts: Facts,
    generation: Generation,
    hybrid: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Generation {
    Six,
    Seven,
}

/// What every member is: recurrent and unrotated.
const RWKV: Facts = Facts {
    rope_type: ROPE_NONE,
    memory: Memory::Recurrent,
    ..Facts::BASE
};

/// What every member reads: both norms' epsilons, its heads' size and its token shift.
const READS_RWKV: &[&str] = &[
    "attention.layer_norm_epsilon",
    "attention.layer_norm_rms_epsilon",
    "wkv.head_size",
    "token_shift_count",
];
/// WKV-6's low ranks and rescaling.
const READS_SIX: &[&str] = &["time_mix_extra_dim", "time_decay_extra_dim", "rescale_every_n_layers"];
/// WKV-7's low ranks.
const READS_SEVEN: &[&str] = &[
    "attention.decay_lora_rank",
    "attention.iclr_lora_rank",
    "attention.value_residual_mix_lora_rank",
    "attention.gate_lora_rank",
];

pub const RWKV6: Member = Member {
    facts: Facts {
        name: "rwkv6",
        about: "RWKV-6 (Finch): WKV-6 time mixing and a channel mix, both over token-shifted inputs; \
            recurrent memory (the token shift and the WKV state per layer).",
        read_keys: &[READS_SIX, READS_RWKV],
        ..RWKV
    },
    generation: Generation::Six,
    hybrid: false,
};

pub const RWKV6QWEN2: Member = Member {
    facts: Facts {
        name: "rwkv6qwen2",
        about: "RWKV-6's time mixing on a Qwen2 model (QRWKV6): gated linear attention (no bonus \
            term, no group norm), grouped keys and values, RMS norms and Qwen2's FFN.",
        ..RWKV6.facts
    },
    generation: Generation::Six,
    hybrid: true,
};

pub const RWKV7: Member = Member {
    facts: Facts {
        name: "rwkv7",
        about: "RWKV-7 (Goose): WKV-7 time mixing (a delta-rule state with in-context learning rates \
            and a value residual from the first layer) and a channel mix; recurrent memory.",
        read_keys: &[READS_SEVEN, READS_RWKV],
        ..RWKV
    },
    generation: Generation::Seven,
    hybrid: false,
};

pub const ARWKV7: Member = Member {
    facts: Facts {
        name: "arwkv7",
        about: "RWKV-7's time mixing on a Qwen2 model (ARWKV-7), with RMS norms and Qwen2's FFN; its \
            gate and group norm optional.",
        ..RWKV7.facts
    },
    generation: Generation::Seven,
    hybrid: true,
};

/// Bounds of the low ranks and head size a file may give.
const LIMIT: u32 = 1 << 16;

impl Member {
    fn size_label(&self, hp: &HParams) -> &'static str {
        match (self.generation, hp.n_layer, hp.n_embd) {
            (Generation::Six, 24, _) => "1.6B",
            (Generation::Six, 32, 2560) => "3B",
            (Generation::Six, 32, 4096) => "7B",
            (Generation::Six, 61, _) => "14B",
            (Generation::Six, 64, _) => "32B",
            (Generation::Seven, 12, 768) => "190M",
            (Generation::Seven, 24, 1024) => "450M",
            (Generation::Seven, 24, 2048) | (Generation::Seven, 28, 1536) => "1.5B",
            (Generation::Seven, 28, 3584) | (Generation::Seven, 32, 4096) => "7B",
            (Generation::Seven, 32, 2560) => "2.9B",
            (Generation::Seven, 61, 4096) => "14B",
            _ => "?B",
        }
    }
}

impl ArchSpec for Member {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.norm_eps = meta.f32_opt(&hp.key("attention.layer_norm_epsilon"))?.unwrap_or(0.0);
        hp.rms_eps = meta
            .f32_opt(&hp.key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(0.0);
        let key = |k: &str| hp.key(k);
        let mut w = Wkv {
            head_size: meta.u32(&key("wkv.head_size"))?,
            token_shift_count: meta.u32_opt(&key("token_shift_count"))?.unwrap_or(2),
            ..Wkv::default()
        };
        match self.generation {
            Generation::Six => {
                w.mix_extra_dim = meta.u32(&key("time_mix_extra_dim"))?;
                w.decay_extra_dim = meta.u32(&key("time_decay_extra_dim"))?;
                w.rescale_every = meta.u32_opt(&key("rescale_every_n_layers"))?.unwrap_or(0);
            }
            Generation::Seven => {
                w.lora_decay = meta.u32(&key("attention.decay_lora_rank"))?;
                w.lora_iclr = meta.u32(&key("attention.iclr_lora_rank"))?;
                w.lora_value_res_mix = meta.u32(&key("attention.value_residual_mix_lora_rank"))?;
                w.lora_gate = meta.u32_opt(&key("attention.gate_lora_rank"))?.unwrap_or(0);
            }
        }
        let ranks = [
            w.mix_extra_dim,
            w.decay_extra_dim,
            w.lora_decay,
            w.lora_iclr,
            w.lora_value_res_mix,
            w.lora_gate,
        ];
        if w.head_size == 0
            || w.head_size > LIMIT
            || !hp.n_embd.is_multiple_of(w.head_size)
            || ranks.iter().any(|&r| r > LIMIT)
        {
            return Err(Error::model(format!(
                "{}: a WKV head size of {} must divide the width {}, and low ranks {ranks:?} be at most {LIMIT}",
                self.facts.name, w.head_size, hp.n_embd
            )));
        }
        // llama.cpp's graphs assert these token-shift counts.
        let shifts = if self.hybrid { 1 } else { 2 };
        if w.token_shift_count != shifts {
            return Err(Error::model(format!(
                "{}: a token shift count of {} is not supported (llama.cpp's graph takes {shifts})",
                self.facts.name, w.token_shift_count
            )));
        }
        let n_head = hp.n_embd / w.head_size;
        if let Some(&kv) = hp.n_head_kv.iter().find(|&&kv| kv != 0 && !n_head.is_multiple_of(kv)) {
            return Err(Error::model(format!(
                "{}: {n_head} WKV heads cannot be grouped over {kv} key/value heads",
                self.facts.name
            )));
        }
        hp.wkv = w;
        hp.recurrent_layers = vec![true; hp.n_layer as usize];
        hp.rope = false;
        hp.size_label = self.size_label(hp);
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("output_norm.weight", &[e], true),
            TensorSpec::new("output_norm.bias", &[e], !self.hybrid),
            TensorSpec::matmul("output.weight", &[e, v], true),
        ];
        if !self.hybrid {
            specs.push(TensorSpec::new("token_embd_norm.weight", &[e], true));
            specs.push(TensorSpec::new("token_embd_norm.bias", &[e], true));
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if self.hybrid {
                specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
                let ff = hp.n_ff[il];
                specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
                specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
                specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            } else {
                specs.push(TensorSpec::new(b("attn_norm.bias"), &[e], true));
                specs.push(TensorSpec::new(b("attn_norm_2.weight"), &[e], true));
                specs.push(TensorSpec::new(b("attn_norm_2.bias"), &[e], true));
            }
            match self.generation {
                Generation::Six => wkv6::tensors(hp, il, self.hybrid, &mut specs),
                Generation::Seven => wkv7::tensors(hp, il, self.hybrid, &mut specs),
            }
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let head = match self.hybrid {
            false => {
                "token_embd.weight token_embd_norm.weight token_embd_norm.bias output_norm.weight output_norm.bias \
                 output.weight"
            }
            true if self.generation == Generation::Six => {
                "token_embd.weight output_norm.weight output_norm.bias output.weight"
            }
            true => "token_embd.weight output_norm.weight output.weight",
        };
        let norms = match self.hybrid {
            false => "attn_norm.weight attn_norm.bias attn_norm_2.weight attn_norm_2.bias",
            true => "attn_norm.weight",
        };
        let ffn = match self.hybrid {
            false => "",
            true => "ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight",
        };
        let mix = match (self.generation, self.hybrid) {
            (Generation::Six, false) => wkv6::CREATED,
            (Generation::Six, true) => wkv6::CREATED_HYBRID,
            (Generation::Seven, false) => wkv7::CREATED,
            (Generation::Seven, true) => wkv7::CREATED_HYBRID,
        };
        layered(hp, head, |_| format!("{norms} {mix} {ffn}"))
    }
}

/// Layer `il`'s token-shift state as `n` vectors per sequence: [n_embd, n, n_seqs].
fn load_shift(b: &mut Builder, il: usize) -> Result<TensorRef> {
    let hp = b.hp;
    let (r_all, _) = b.rs_layer(il)?;
    let n_seqs = b.recurrent_shape()?.n_seqs as i64;
    let shift = b.gather_states(r_all, i64::from(hp.n_embd_r()), None)?;
    let n = i64::from(hp.wkv.token_shift_count);
    b.g.reshape(shift, &[i64::from(hp.n_embd), n, n_seqs])
        .map_err(Error::from)
}

/// Write `shift` (the vectors to shift into the next ubatch) to layer `il`'s token-shift state,
/// read as llama.cpp reads it: one run of `n_embd_r · n_seqs` floats from its start. For the
/// hybrids' strided view of each sequence's last token, that is the first sequence's and the
/// floats after it (the next sequence's first tokens, not its last), as llama.cpp stores them.
fn store_shift(b: &mut Builder, il: usize, shift: TensorRef) -> Result<()> {
    let hp = b.hp;
    let (r_all, _) = b.rs_layer(il)?;
    let rs = b.recurrent_shape()?;
    let n = i64::from(hp.n_embd_r()) * rs.n_seqs as i64;
    let src = b.g.view(shift, &[n], &[], 0)?;
    let dst = b.g.view(r_all, &[n], &[], rs.window.head * r_all.nb()[1])?;
    let saved = b.g.copy_into(src, dst)?;
    b.g.expand(saved);
    Ok(())
}

/// Layer `il`'s WKV: `op` over each sequence's state (gathered, [n_embd_s, n_seqs]) gives the
/// outputs and then the last states, which go back to the state rows. Returns the outputs,
/// [n_embd, n_tokens].
fn wkv(b: &mut Builder, il: usize, op: impl FnOnce(&mut Builder, TensorRef) -> Result<TensorRef>) -> Result<TensorRef> {
    let hp = b.hp;
    let rs = b.recurrent_shape()?;
    let (_, s_all) = b.rs_layer(il)?;
    let (n_embd, n_tokens, n_seqs) = (i64::from(hp.n_embd), b.shape.n_tokens as i64, rs.n_seqs as i64);
    let n_state = i64::from(hp.n_embd_s());
    let state = b.gather_states(s_all, n_state, None)?;
    let out = op(b, state)?;
    let outputs = b.g.view(out, &[n_embd * n_tokens], &[], 0)?;
    let at = row_size(out.ggml_type(), n_embd * n_tokens);
    let last = b.g.view(out, &[n_state * n_seqs], &[], at)?;
    let row = row_size(s_all.ggml_type(), n_state);
    let dst = b.g.view(s_all, &[n_state * n_seqs], &[], rs.window.head * row)?;
    let saved = b.g.copy_into(last, dst)?;
    b.g.expand(saved);
    b.g.reshape(outputs, &[n_embd, n_tokens]).map_err(Error::from)
}

/// The group norm of the WKV's outputs `x` ([n_embd, n_tokens]): a norm per head, then the
/// layer's scale `ln` and shift `ln_b`.
fn group_norm(b: &mut Builder, x: TensorRef, ln: TensorRef, ln_b: TensorRef) -> Result<TensorRef> {
    let [n_embd, n_tokens, ..] = x.ne();
    let head = i64::from(b.hp.wkv.head_size);
    let y = b.g.reshape(x, &[head, n_embd / head, n_tokens])?;
    let y = b.g.norm(y, 64e-5)?;
    let y = b.g.reshape(y, &[n_embd, n_tokens])?;
    let y = b.g.mul(y, ln)?;
    b.g.add(y, ln_b).map_err(Error::from)
}

/// Each sequence's inputs `x` ([n_embd, n_seq_tokens, n_seqs]) moved one token later, `first`
/// ([n_embd, 1, n_seqs], the token before the ubatch) in front.
fn shifted(b: &mut Builder, first: TensorRef, x: TensorRef) -> Result<TensorRef> {
    let [n_embd, nst, n_seqs, _] = x.ne();
    let nb = x.nb();
    let before = b.g.view(x, &[n_embd, nst - 1, n_seqs], &[nb[1], nb[2]], 0)?;
    b.g.concat(first, before, 1).map_err(Error::from)
}

/// Each sequence's last token of `x` ([n_embd, n_seq_tokens, n_seqs]): [n_embd, 1, n_seqs].
fn last_token(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let [n_embd, nst, n_seqs, _] = x.ne();
    let nb = x.nb();
    b.g.view(x, &[n_embd, 1, n_seqs], &[nb[1], nb[2]], (nst as usize - 1) * nb[1])
        .map_err(Error::from)
}

/// One vector of `shift` ([n_embd, n, n_seqs]): the `i`-th of each sequence.
fn shift_vector(b: &mut Builder, shift: TensorRef, i: usize) -> Result<TensorRef> {
    let [n_embd, _, n_seqs, _] = shift.ne();
    let nb = shift.nb();
    b.g.view(shift, &[n_embd, 1, n_seqs], &[nb[1], nb[2]], i * nb[1])
        .map_err(Error::from)
}

impl Member {
    /// The norm before the time mix (`attn_norm`) or the channel mix (`attn_norm_2`): a layer
    /// norm with bias, or the hybrids' RMS norm.
    fn norm(&self, b: &mut Builder, il: usize, x: TensorRef, name: &str, label: &str) -> Result<TensorRef> {
        let w = b.layer_weight(il, &format!("{name}.weight"))?;
        let y = match self.hybrid {
            true => b.rms_norm(x, w)?,
            false => {
                let bias = b.layer_weight(il, &format!("{name}.bias"))?;
                b.layer_norm(x, w, bias)?
            }
        };
        Ok(b.name(y, label, Some(il)))
    }

    /// The time mix of layer `il` over `x` and the shifted `x_prev` ([n_embd, n_seq_tokens,
    /// n_seqs]), in the same shape.
    fn time_mix(
        &self,
        b: &mut Builder,
        il: usize,
        x: TensorRef,
        x_prev: TensorRef,
        v_first: &mut Option<TensorRef>,
    ) -> Result<TensorRef> {
        match self.generation {
            Generation::Six => wkv6::time_mix(b, il, x, x_prev),
            Generation::Seven => wkv7::time_mix(b, il, x, x_prev, v_first),
        }
    }

    /// The channel mix of layer `il` over `x` and the shifted `x_prev` ([n_embd, n_outputs]).
    fn channel_mix(&self, b: &mut Builder, il: usize, x: TensorRef, x_prev: TensorRef) -> Result<TensorRef> {
        let sx = b.g.sub(x_prev, x)?;
        let mix = |b: &mut Builder, name: &str| -> Result<TensorRef> {
            let lerp = b.layer_weight(il, name)?;
            let y = b.g.mul(sx, lerp)?;
            b.g.add(y, x).map_err(Error::from)
        };
        let xk = mix(b, "channel_mix_lerp_k.weight")?;
        let k = b.layer_matmul(il, "channel_mix_key.weight", xk)?;
        let k = b.g.relu(k)?;
        let k = b.g.sqr(k)?;
        let kv = b.layer_matmul(il, "channel_mix_value.weight", k)?;
        if self.generation == Generation::Seven {
            return Ok(kv);
        }
        let xr = mix(b, "channel_mix_lerp_r.weight")?;
        let r = b.layer_matmul(il, "channel_mix_receptance.weight", xr)?;
        let r = b.g.sigmoid(r)?;
        b.g.mul(r, kv).map_err(Error::from)
    }

    /// A layer of RWKV-6 or RWKV-7: the time mix and the channel mix, each after its norm and
    /// over its own shifted inputs. Returns the layer's output ([n_embd, n_outputs] in the last
    /// layer, else every token's).
    fn layer(&self, b: &mut Builder, il: usize, x: TensorRef, v_first: &mut Option<TensorRef>) -> Result<TensorRef> {
        let shift = load_shift(b, il)?;
        let att_norm = self.norm(b, il, x, "attn_norm", "attn_norm")?;
        let att_shift = shift_vector(b, shift, 0)?;
        let x_prev = shifted(b, att_shift, att_norm)?;
        let cur = self.time_mix(b, il, att_norm, x_prev, v_first)?;
        let ffn_inp = b.add(cur, x)?;
        let ffn_inp = b.name(ffn_inp, "ffn_inp", Some(il));
        let ffn_norm = self.norm(b, il, ffn_inp, "attn_norm_2", "ffn_norm")?;
        let ffn_shift = shift_vector(b, shift, 1)?;
        let x_prev = shifted(b, ffn_shift, ffn_norm)?;
        let att_last = last_token(b, att_norm)?;
        let ffn_last = last_token(b, ffn_norm)?;
        let next = b.g.concat(att_last, ffn_last, 1)?;
        store_shift(b, il, next)?;

        let n_tokens = b.shape.n_tokens as i64;
        let mut tokens = [ffn_inp, ffn_norm, x_prev];
        for t in &mut tokens {
            *t = b.g.reshape(*t, &[i64::from(b.hp.n_embd), n_tokens])?;
            if il + 1 == b.hp.n_layer as usize {
                *t = b.select_outputs(*t)?;
            }
        }
        let [ffn_inp, ffn_norm, x_prev] = tokens;
        let cur = self.channel_mix(b, il, ffn_norm, x_prev)?;
        let mut cur = b.add(cur, ffn_inp)?;
        let every = b.hp.wkv.rescale_every as usize;
        if every != 0 && (il + 1).is_multiple_of(every) {
            cur = b.scale(cur, 0.5)?;
        }
        Ok(cur)
    }

    /// A layer of the hybrids: the time mix after an RMS norm (its input's last token the only
    /// shift kept), then Qwen2's gated FFN.
    fn hybrid_layer(
        &self,
        b: &mut Builder,
        il: usize,
        x: TensorRef,
        v_first: &mut Option<TensorRef>,
    ) -> Result<TensorRef> {
        let shift = load_shift(b, il)?;
        let att_norm = self.norm(b, il, x, "attn_norm", "attn_norm")?;
        let x_prev = shifted(b, shift, att_norm)?;
        let cur = self.time_mix(b, il, att_norm, x_prev, v_first)?;
        let last = last_token(b, att_norm)?;
        store_shift(b, il, last)?;
        let ffn_inp = b.add(cur, x)?;
        let ffn_inp = b.name(ffn_inp, "ffn_inp", Some(il));
        let ffn_inp =
            b.g.reshape(ffn_inp, &[i64::from(b.hp.n_embd), b.shape.n_tokens as i64])?;
        let ffn_inp = match il + 1 == b.hp.n_layer as usize {
            true => b.select_outputs(ffn_inp)?,
            false => ffn_inp,
        };
        let cur = b.layer_rms_norm(il, ffn_inp, "ffn_norm.weight", "ffn_norm")?;
        let cur = b.gated_ffn(il, cur, Ffn::default())?;
        let cur = b.name(cur, "ffn_out", Some(il));
        b.add(cur, ffn_inp)
    }
}

impl Decoder for Member {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let n_seqs = b.recurrent_shape()?.n_seqs as i64;
        let n_embd = i64::from(hp.n_embd);
        let nst = b.shape.n_tokens as i64 / n_seqs;
        let mut inp = b.embed_tokens()?;
        if !self.hybrid {
            let (w, bias) = (b.weight("token_embd_norm.weight")?, b.weight("token_embd_norm.bias")?);
            inp = b.layer_norm(inp, w, bias)?;
        }
        let mut v_first = None;
        for il in 0..hp.n_layer as usize {
            let x = b.g.reshape(inp, &[n_embd, nst, n_seqs])?;
            let out = match self.hybrid {
                true => self.hybrid_layer(b, il, x, &mut v_first)?,
                false => self.layer(b, il, x, &mut v_first)?,
            };
            inp = b.layer_out(out, il)?;
        }
        let w = b.weight("output_norm.weight")?;
        let x = match (self.hybrid, b.weight_opt("output_norm.bias")) {
            (false, bias) => {
                let bias = bias.ok_or_else(|| Error::model("missing tensor 'output_norm.bias'"))?;
                b.layer_norm(inp, w, bias)?
            }
            (true, bias) => {
                let x = b.rms_norm(inp, w)?;
                match bias {
                    Some(bias) => b.add(x, bias)?,
                    None => x,
                }
            }
        };
        b.output_projection(x, None).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::tests::writer::{File, Kv};
    use crate::gguf::{GgufFile, Value};

    /// HParams of a two-layer RWKV-7 file, 128 wide in heads of 64, with `extra` keys added.
    fn rwkv7(extra: Vec<Kv>) -> Result<HParams> {
        let mut f = File::new();
        let a = |k: &str| format!("rwkv7.{k}");
        f.kvs = vec![
            Kv::new("general.architecture", Value::Str(b"rwkv7".to_vec())),
            Kv::new(&a("block_count"), Value::U32(2)),
            Kv::new(&a("context_length"), Value::U32(64)),
            Kv::new(&a("embedding_length"), Value::U32(128)),
            Kv::new(&a("feed_forward_length"), Value::U32(256)),
            Kv::new(&a("attention.head_count"), Value::U32(0)),
            Kv::new(&a("attention.layer_norm_epsilon"), Value::F32(1e-5)),
            Kv::new(&a("wkv.head_size"), Value::U32(64)),
            Kv::new(&a("attention.decay_lora_rank"), Value::U32(8)),
            Kv::new(&a("attention.iclr_lora_rank"), Value::U32(8)),
            Kv::new(&a("attention.value_residual_mix_lora_rank"), Value::U32(4)),
        ];
        f.kvs.extend(extra);
        let file = GgufFile::parse(&f.bytes())?;
        HParams::load(&RWKV7, &Meta(&file), 16)
    }

    #[test]
    fn the_state_is_two_shifted_vectors_and_a_square_per_head() {
        let hp = rwkv7(vec![]).expect("loads");
        assert_eq!((hp.n_embd_r(), hp.n_embd_s()), (2 * 128, 128 * 64));
        assert!(hp.is_recurrent(1));
    }

    #[test]
    fn a_token_shift_count_llama_cpp_s_graph_asserts_on_is_refused() {
        let one = Kv::new("rwkv7.token_shift_count", Value::U32(1));
        let err = rwkv7(vec![one]).unwrap_err().to_string();
        assert!(err.contains("token shift count of 1 is not supported"), "{err}");
    }
}
