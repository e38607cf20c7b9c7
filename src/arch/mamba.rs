//! Mamba and Mamba-2: no attention, every layer a selective state-space block (`graph/ssm.rs`)
//! between an RMS norm and the residual; the context keeps one recurrent state per sequence.

use super::created::{layered, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

pub struct Mamba;
pub struct Mamba2;

/// The keys both read (llama.cpp's), and what they derive.
pub(super) fn load_ssm(meta: &Meta, hp: &mut HParams, groups: bool) -> Result<()> {
    hp.ssm_d_conv = meta.u32(&hp.key("ssm.conv_kernel"))?;
    hp.ssm_d_inner = meta.u32(&hp.key("ssm.inner_size"))?;
    hp.ssm_d_state = meta.u32(&hp.key("ssm.state_size"))?;
    hp.ssm_dt_rank = meta.u32(&hp.key("ssm.time_step_rank"))?;
    if groups {
        hp.ssm_n_group = meta.u32(&hp.key("ssm.group_count"))?;
    } else {
        hp.ssm_dt_b_c_rms = meta.bool_opt(&hp.key("ssm.dt_b_c_rms"))?.unwrap_or(false);
    }
    // Required, as llama.cpp's loaders read it, but where the architecture set a fallback first
    // (Nemotron-H's layer-norm epsilon).
    let eps = hp.key("attention.layer_norm_rms_epsilon");
    hp.rms_eps = match meta.f32_opt(&eps)? {
        Some(e) => e,
        None if hp.rms_eps != 0.0 => hp.rms_eps,
        None => return Err(crate::model::metadata::missing(&eps)),
    };
    let limit = 1 << 20;
    let sizes = [hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank];
    if sizes.iter().any(|&v| v == 0 || v > limit) || hp.ssm_n_group > limit {
        return Err(Error::model(format!(
            "{}: state-space sizes (conv {}, inner {}, state {}, rank {}, groups {}) out of range",
            hp.arch_name, hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank, hp.ssm_n_group
        )));
    }
    hp.size_label = match (hp.n_layer, hp.n_embd) {
        (24, 768) => "0.1B",
        (48, 1024) => "0.4B",
        (48, 1536) => "0.8B",
        (48, 2048) => "1.5B",
        (64, 2560) => "3B",
        (64, 4096) if groups => "7B",
        _ => "?B",
    };
    Ok(())
}

/// A state-space model's tensors: the head's, and per layer its norm and `layer`'s.
fn state_space_tensors(hp: &HParams, layer: impl Fn(usize, &mut Vec<TensorSpec>)) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    super::head_tensors(hp, &mut specs);
    for il in 0..hp.n_layer as usize {
        specs.push(TensorSpec::new(
            format!("blk.{il}.attn_norm.weight"),
            &[hp.n_embd],
            true,
        ));
        layer(il, &mut specs);
    }
    specs
}

/// A Mamba layer's tensors; `norms`: the norms of Δt, B and C are required (Jamba), else optional
/// (Falcon Mamba has them, Mamba not).
pub(super) fn mamba_tensors(hp: &HParams, il: usize, norms: bool, specs: &mut Vec<TensorSpec>) {
    let (e, inner, state, rank, conv) = (hp.n_embd, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank, hp.ssm_d_conv);
    let b = |s: &str| format!("blk.{il}.{s}");
    specs.push(TensorSpec::matmul(b("ssm_in.weight"), &[e, 2 * inner], true));
    specs.push(TensorSpec::new(b("ssm_conv1d.weight"), &[conv, inner], true));
    specs.push(TensorSpec::new(b("ssm_conv1d.bias"), &[inner], true));
    specs.push(TensorSpec::matmul(b("ssm_x.weight"), &[inner, rank + 2 * state], true));
    specs.push(TensorSpec::matmul(b("ssm_dt.weight"), &[rank, inner], true));
    specs.push(TensorSpec::new(b("ssm_dt.bias"), &[inner], true));
    specs.push(TensorSpec::new(b("ssm_a"), &[state, inner], true));
    specs.push(TensorSpec::new(b("ssm_d"), &[inner], true));
    specs.push(TensorSpec::new(b("ssm_dt_norm.weight"), &[rank], norms));
    specs.push(TensorSpec::new(b("ssm_b_norm.weight"), &[state], norms));
    specs.push(TensorSpec::new(b("ssm_c_norm.weight"), &[state], norms));
    specs.push(TensorSpec::matmul(b("ssm_out.weight"), &[inner, e], true));
}

/// A Mamba-2 layer's tensors (the convolution's bias may be optional).
pub(super) fn mamba2_tensors(hp: &HParams, il: usize, conv_bias: bool, specs: &mut Vec<TensorSpec>) {
    let (e, inner, state, heads, conv, groups) = (
        hp.n_embd,
        hp.ssm_d_inner,
        hp.ssm_d_state,
        hp.ssm_dt_rank,
        hp.ssm_d_conv,
        hp.ssm_n_group,
    );
    let channels = inner + 2 * groups * state;
    let b = |s: &str| format!("blk.{il}.{s}");
    specs.push(TensorSpec::matmul(
        b("ssm_in.weight"),
        &[e, inner + channels + heads],
        true,
    ));
    specs.push(TensorSpec::new(b("ssm_conv1d.weight"), &[conv, channels], true));
    specs.push(TensorSpec::new(b("ssm_conv1d.bias"), &[channels], conv_bias));
    specs.push(TensorSpec::new(b("ssm_dt.bias"), &[heads], true));
    specs.push(TensorSpec::new(b("ssm_a"), &[1, heads], true));
    specs.push(TensorSpec::new(b("ssm_d"), &[1, heads], true));
    specs.push(TensorSpec::new(b("ssm_norm.weight"), &[inner / groups, groups], true));
    specs.push(TensorSpec::matmul(b("ssm_out.weight"), &[inner, e], true));
}

/// The keys of Mamba-2 layers, and the split of their inner width into heads and groups.
pub(super) fn load_mamba2(meta: &Meta, hp: &mut HParams) -> Result<()> {
    load_ssm(meta, hp, true)?;
    let (inner, heads, groups) = (hp.ssm_d_inner, hp.ssm_dt_rank, hp.ssm_n_group);
    if groups == 0 || inner % heads != 0 || inner % groups != 0 {
        return Err(Error::model(format!(
            "{}: inner size {inner} must split into {heads} heads and {groups} groups",
            hp.arch_name
        )));
    }
    Ok(())
}

impl ArchSpec for Mamba {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "mamba",
            about: "The state-space model Mamba: recurrent memory.",
            rope_type: ROPE_NONE,
            read_keys: &[super::READS_SSM, super::READS_RMS_EPS, &["ssm.dt_b_c_rms"]],
            memory: Memory::Recurrent,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_ssm(meta, hp, false)?;
        hp.recurrent_layers = vec![true; hp.n_layer as usize];
        hp.rope = false;
        // llama.cpp's only supported expansion factor.
        if hp.ssm_d_inner != 2 * hp.n_embd {
            return Err(Error::model("mamba: only an expansion factor of 2 is supported"));
        }
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        mamba(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        state_space_tensors(hp, |il, specs| mamba_tensors(hp, il, false, specs))
    }
}

/// Mamba's layer.
const MAMBA: &str =
    "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_x.weight ssm_dt.weight ssm_dt.bias ssm_a ssm_d ssm_out.weight";

/// Mamba's.
fn mamba(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("attn_norm.weight {MAMBA}"))
}

impl ArchSpec for Mamba2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "mamba2",
            about: "The state-space model Mamba-2: recurrent memory.",
            rope_type: ROPE_NONE,
            read_keys: &[super::READS_SSM, super::READS_RMS_EPS, &["ssm.group_count"]],
            memory: Memory::Recurrent,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_mamba2(meta, hp)?;
        hp.recurrent_layers = vec![true; hp.n_layer as usize];
        hp.rope = false;
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        mamba2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        state_space_tensors(hp, |il, specs| mamba2_tensors(hp, il, true, specs))
    }
}

/// Mamba-2's layer.
pub(super) const MAMBA2: &str =
    "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_dt.bias ssm_a ssm_d ssm_norm.weight ssm_out.weight";

/// Mamba-2's.
fn mamba2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("attn_norm.weight {MAMBA2}"))
}

/// Embeddings, then per layer norm → state-space block → residual, then the output head.
fn decoder(
    b: &mut Builder,
    layer: impl Fn(&mut Builder, usize, TensorRef) -> Result<TensorRef>,
) -> Result<Option<TensorRef>> {
    let mut inp = b.embed_tokens()?;
    for il in 0..b.hp.n_layer as usize {
        let cur = b.layer_rms_norm(il, inp, "attn_norm.weight", "attn_norm")?;
        let cur = layer(b, il, cur)?;
        let (cur, inp_rows) = b.last_layer_rows(il, cur, inp)?;
        let out = b.add(cur, inp_rows)?;
        inp = b.layer_out(out, il)?;
    }
    b.output_head(inp).map(Some)
}

impl Decoder for Mamba {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b, |b, il, x| b.mamba_layer(il, x))
    }
}

impl Decoder for Mamba2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b, |b, il, x| b.mamba2_layer(il, x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::tests::writer::{File, Kv};
    use crate::gguf::{GgufFile, Value};

    /// HParams of a two-layer Mamba file with `extra` keys added.
    fn mamba(extra: Vec<Kv>) -> Result<HParams> {
        let mut f = File::new();
        let a = |k: &str| format!("mamba.{k}");
        f.kvs = vec![
            Kv::new("general.architecture", Value::Str(b"mamba".to_vec())),
            Kv::new(&a("block_count"), Value::U32(2)),
            Kv::new(&a("context_length"), Value::U32(64)),
            Kv::new(&a("embedding_length"), Value::U32(16)),
            Kv::new(&a("feed_forward_length"), Value::U32(0)),
            Kv::new(&a("attention.head_count"), Value::U32(0)),
            Kv::new(&a("ssm.conv_kernel"), Value::U32(4)),
            Kv::new(&a("ssm.inner_size"), Value::U32(32)),
            Kv::new(&a("ssm.state_size"), Value::U32(16)),
            Kv::new(&a("ssm.time_step_rank"), Value::U32(1)),
        ];
        f.kvs.extend(extra);
        let file = GgufFile::parse(&f.bytes())?;
        HParams::load(&Mamba, &Meta(&file), 4)
    }

    #[test]
    fn the_rms_epsilon_is_required_as_llama_cpp_requires_it() {
        let err = mamba(vec![]).unwrap_err().to_string();
        assert!(
            err.contains("required key 'mamba.attention.layer_norm_rms_epsilon' is missing"),
            "{err}"
        );
        let eps = Kv::new("mamba.attention.layer_norm_rms_epsilon", Value::F32(1e-5));
        assert_eq!(mamba(vec![eps]).map(|hp| hp.rms_eps).ok(), Some(1e-5));
    }
}
