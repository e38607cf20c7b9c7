//! Snowflake Arctic: each layer adds two FFNs to its stream, a dense one as wide as the model
//! after attention, and experts (as wide as `feed_forward_length`) reading the layer's input
//! under their own norm (`ffn_norm_exps`), softmax-routed with the picked weights normalised.

use super::created::{layered, ATTN, FFN, HEAD};
use super::{attention_tensors, head_tensors};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Arctic;

const MOE: Moe = Moe {
    normalize: true,
    ..Moe::BASE
};

impl ArchSpec for Arctic {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "arctic",
            about: "A dense FFN beside experts on the layer input.",
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_embd_head_k * hp.n_head[0] != hp.n_embd {
            return Err(Error::model("arctic needs its query heads to span the embedding"));
        }
        super::check_experts(hp)?;
        hp.n_ff_exp = hp.n_ff[0];
        hp.size_label = match (hp.n_expert, hp.n_layer) {
            (128, 35) => "10B+128x3.66B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        arctic(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, ff, ne) = (hp.n_embd, hp.n_ff_exp, hp.n_expert);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, e], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, e], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[e, e], true));
            specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true));
            specs.push(TensorSpec::new(b("ffn_norm_exps.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ff, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], true));
        }
        specs
    }
}

/// Arctic's: a dense FFN beside the experts, which have their own norm.
fn arctic(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {FFN} ffn_gate_inp.weight ffn_norm_exps.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight")
    })
}

impl Decoder for Arctic {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (h, input) = b.pre_norm_attention(il, x, kq_scale)?;
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let dense = b.gated_ffn(
                il,
                cur,
                Ffn {
                    scaled: false,
                    biased: false,
                    ..Ffn::default()
                },
            )?;
            let dense = b.name(dense, "ffn_out", l);
            let dense = b.add(dense, h)?;
            let cur = b.layer_rms_norm(il, input, "ffn_norm_exps.weight", "ffn_norm_exps")?;
            let experts = b.moe_ffn(il, cur, MOE)?;
            x = b.add(experts, dense)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
