//! Llama (and Qwen2, which is Llama with attention biases and NeoX rotation).

use super::{common_tensors, Arch, TensorSpec};
use crate::error::Result;
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;

pub fn load_hparams(arch: Arch, meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    if arch == Arch::Llama && hp.n_rot != hp.n_embd_head_k {
        return Err(crate::Error::model(format!(
            "invalid rope dimension count {}: llama needs it equal to the head size {}",
            hp.n_rot, hp.n_embd_head_k
        )));
    }
    // Size labels as llama.cpp derives them from the layer count, for llama_model_desc.
    hp.size_label = match (arch, hp.n_layer) {
        (Arch::Llama, 16 | 22) => "1B",
        (Arch::Llama, 26 | 28) => "3B",
        (Arch::Llama, 30) => "256M",
        (Arch::Llama, 32) if hp.n_vocab == 49152 => "3B",
        (Arch::Llama, 32) if hp.n_vocab < 40000 => "7B",
        (Arch::Llama, 32) => "8B",
        (Arch::Llama, 36) => "8B",
        (Arch::Llama, 40) => "13B",
        (Arch::Llama, 48) => "34B",
        (Arch::Llama, 60) => "30B",
        (Arch::Llama, 80) if hp.n_head[0] == hp.n_head_kv[0] => "65B",
        (Arch::Llama, 80) => "70B",
        (Arch::Qwen2, 24) if hp.n_embd == 1024 => "0.5B",
        (Arch::Qwen2, 24) => "1B",
        (Arch::Qwen2, 28) if hp.n_embd == 1536 => "1.5B",
        (Arch::Qwen2, 28) => "7B",
        (Arch::Qwen2, 32) => "7B",
        (Arch::Qwen2, 36) => "3B",
        (Arch::Qwen2, 40) if hp.n_head[0] == 20 => "4B",
        (Arch::Qwen2, 40) => "13B",
        (Arch::Qwen2, 48) => "14B",
        (Arch::Qwen2, 64) => "32B",
        (Arch::Qwen2, 80) => "70B",
        _ => "?B",
    };
    Ok(())
}

pub fn tensors(arch: Arch, hp: &HParams) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    common_tensors(hp, &mut specs);
    if arch == Arch::Qwen2 {
        specs.push(TensorSpec::new("output.bias", &[hp.n_vocab], false));
    }
    // Llama 3 stores rotary frequency factors once for all layers.
    specs.push(TensorSpec::new("rope_freqs.weight", &[hp.n_rot / 2], false));
    for il in 0..hp.n_layer as usize {
        let e = hp.n_embd;
        let ff = hp.n_ff[il];
        specs.push(TensorSpec::new(format!("blk.{il}.attn_output.bias"), &[e], false));
        specs.push(TensorSpec::new(format!("blk.{il}.ffn_gate.bias"), &[ff], false));
        specs.push(TensorSpec::new(format!("blk.{il}.ffn_up.bias"), &[ff], false));
        specs.push(TensorSpec::new(format!("blk.{il}.ffn_down.bias"), &[e], false));
    }
    specs
}
