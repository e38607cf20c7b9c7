//! PLM: MiniCPM3's latent attention kept decompressed, with full-rank queries and normal (not
//! NeoX) rotation, a squared-ReLU FFN without gate, and the token embeddings as the output head.

use super::created::{layered, TIED_HEAD};
use super::minicpm3::{decompressed_attention, latent_kv};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Plm;

impl ArchSpec for Plm {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "plm",
            about: "Latent attention kept decompressed (MiniCPM3's, with full-rank queries), a squared-ReLU FFN, the \
                head tied to the embeddings.",
            read_keys: &[super::READS_RMS_EPS, &["attention.kv_lora_rank"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.n_lora_kv = meta.u32(&hp.key("attention.kv_lora_rank"))?;
        // Every query head has its key head (llama.cpp's graph widens the latent to `n_head`).
        if hp.n_head.iter().zip(&hp.n_head_kv).any(|(q, kv)| q != kv) {
            return Err(Error::model("plm needs as many KV heads as query heads"));
        }
        hp.size_label = if hp.n_layer == 32 { "1.8B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let (hk, hv, rot, kv_rank) = (hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot, hp.n_lora_kv);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("output_norm.weight", &[e], true),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (n_head, ff) = (hp.n_head[il], hp.n_ff[il]);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("attn_q.weight"), &[e, n_head * hk], true),
                TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
                TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
                TensorSpec::matmul(b("attn_kv_b.weight"), &[kv_rank, n_head * (hk - rot + hv)], true),
                TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
            ]);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        layered(hp, TIED_HEAD, |_| {
            "attn_norm.weight attn_q.weight attn_kv_a_mqa.weight attn_kv_a_norm.weight attn_kv_b.weight attn_output.weight ffn_norm.weight ffn_down.weight ffn_up.weight".into()
        })
    }
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &["attn_q", "attn_kv_a_mqa", "attn_kv_b"];

impl Decoder for Plm {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k);
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let q = b.layer_matmul(il, "attn_q.weight", cur)?;
            let q = b.g.reshape(q, &[hk, i64::from(hp.n_head[il]), q.ne()[1]])?;
            let q = b.name(q, "q", l);
            // llama.cpp's graph rotates without the rotary factors (PLM's files have none).
            let (latent, k_pe) = latent_kv(b, il, cur, None)?;
            let att = decompressed_attention(b, il, q, latent, k_pe, kq_scale, None)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.relu_sqr_ffn_named(il, cur, "", Ffn::default())?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
