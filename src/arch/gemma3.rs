//! Gemma 3: sliding-window attention on most layers, Q/K norms, post-attention and post-FFN norms.

use super::{common_tensors, TensorSpec};
use crate::error::Result;
use crate::gguf::{Array, Value};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;

/// Without an explicit pattern, every sixth layer attends globally.
const DEFAULT_SWA_PERIOD: u32 = 6;

pub fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let n_swa = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
    hp.n_swa = n_swa;
    if n_swa > 0 {
        hp.swa_layers = swa_pattern(meta, hp)?;
        if let Some(b) = meta.f32_opt(&hp.key("rope.freq_base_swa"))? {
            hp.rope_freq_base_swa = b;
        }
    }
    hp.final_logit_softcap = meta.f32_opt(&hp.key("final_logit_softcapping"))?.unwrap_or(0.0);
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    hp.size_label = match hp.n_layer {
        18 => "270M",
        26 => "1B",
        32 => "8B",
        34 => "4B",
        48 => "12B",
        62 => "27B",
        _ => "?B",
    };
    // The 27B model scales queries by the model width per head rather than the head size.
    let scale_dim = if hp.n_layer == 62 {
        hp.n_embd / hp.n_head[0].max(1)
    } else {
        hp.n_embd_head_k
    };
    hp.attn_scale = 1.0 / (scale_dim as f32).sqrt();
    Ok(())
}

/// Which layers use the sliding window: an explicit bool array, a period, or the default period.
fn swa_pattern(meta: &Meta, hp: &HParams) -> Result<Vec<bool>> {
    let key = hp.key("attention.sliding_window_pattern");
    let n = hp.n_layer as usize;
    if let Some(Value::Array(Array::Bool(b))) = meta.0.get(&key) {
        if b.len() != n {
            return Err(crate::Error::model(format!(
                "key '{key}' has {} entries for {n} layers",
                b.len()
            )));
        }
        return Ok(b.clone());
    }
    let period = meta.u32_opt(&key)?.unwrap_or(DEFAULT_SWA_PERIOD);
    Ok((0..hp.n_layer)
        .map(|il| period == 0 || il % period < period - 1)
        .collect())
}

pub fn tensors(hp: &HParams) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    common_tensors(hp, &mut specs);
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        specs.push(TensorSpec::new(b("post_attention_norm.weight"), &[hp.n_embd], true));
        specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k], true));
        specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k], true));
        specs.push(TensorSpec::new(b("post_ffw_norm.weight"), &[hp.n_embd], true));
    }
    specs
}
