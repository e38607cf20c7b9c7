//! The dense feed-forward blocks: gated (SiLU, GELU, ggml's `swiglu_oai`, clamped SwiGLU, SiTU),
//! fused, squared-ReLU and GELU FFNs.

use super::{Builder, Order};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;

/// What varies between the architectures' gated FFNs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ffn {
    /// GELU rather than SiLU.
    pub gelu: bool,
    /// The clamped, sharpened SwiGLU (ggml's `swiglu_oai`) rather than SiLU.
    pub oai: bool,
    /// Multiply each projection by its weight's scale.
    pub scaled: bool,
    /// Add each projection's bias.
    pub biased: bool,
}

/// The squared-ReLU FFN with its weights' scales and biases.
pub const RELU_SQR_FFN: Ffn = Ffn {
    gelu: false,
    oai: false,
    scaled: true,
    biased: true,
};

/// gpt-oss's SwiGLU constants (llama.cpp's).
pub(super) const OAI_ALPHA: f32 = 1.702;

pub(super) const OAI_LIMIT: f32 = 7.0;

impl Builder<'_> {
    /// SiTU: `β·tanh(gate/β)·sigmoid(gate)` times `up`, itself `β'·tanh(up/β')` when
    /// the up branch's β' is set (`HParams::situ_beta`, `situ_linear_beta`).
    pub fn situ(&mut self, gate: TensorRef, up: TensorRef) -> Result<TensorRef> {
        let (beta, linear_beta) = (self.hp.situ_beta, self.hp.situ_linear_beta);
        let squashed = |bd: &mut Builder, x: TensorRef, b: f32| -> Result<TensorRef> {
            let t = bd.g.scale(x, 1.0 / b)?;
            let t = bd.g.tanh(t)?;
            bd.g.scale(t, b).map_err(Error::from)
        };
        let a = squashed(self, gate, beta)?;
        let s = self.g.sigmoid(gate)?;
        let a = self.g.mul(a, s)?;
        let up = if linear_beta > 0.0 {
            squashed(self, up, linear_beta)?
        } else {
            up
        };
        self.g.mul(a, up).map_err(Error::from)
    }

    /// down(situ(gate x, up x)) over `ffn_{gate,up,down}{suffix}`, unscaled and unbiased.
    pub fn situ_ffn(&mut self, il: usize, x: TensorRef, suffix: &str) -> Result<TensorRef> {
        let gate = self.layer_matmul(il, &format!("ffn_gate{suffix}.weight"), x)?;
        let up = self.layer_matmul(il, &format!("ffn_up{suffix}.weight"), x)?;
        let h = self.situ(gate, up)?;
        self.layer_matmul(il, &format!("ffn_down{suffix}.weight"), h)
    }

    /// down(act(gate x) * up x), as `ffn` says: the activation, and whether the weights' scales
    /// and biases apply (some of llama.cpp's architectures load them but leave them out).
    pub fn gated_ffn(&mut self, il: usize, x: TensorRef, ffn: Ffn) -> Result<TensorRef> {
        self.gated_ffn_named(il, x, ffn, "")
    }

    /// The same over `ffn_{up,gate,down}{suffix}` (a shared expert: "_shexp").
    pub fn gated_ffn_named(&mut self, il: usize, x: TensorRef, ffn: Ffn, suffix: &str) -> Result<TensorRef> {
        let [up, gate, down] = ["ffn_up", "ffn_gate", "ffn_down"].map(|n| format!("{n}{suffix}"));
        self.gated_ffn_of(il, x, ffn, [&up, &gate, &down])
    }

    /// The same over the layer's weights `[up, gate, down]` (their names without `.weight`).
    pub fn gated_ffn_of(
        &mut self,
        il: usize,
        x: TensorRef,
        ffn: Ffn,
        [up, gate, down]: [&str; 3],
    ) -> Result<TensorRef> {
        let l = Some(il);
        let up = self.ffn_projection(il, up, x, ffn, Some("ffn_up"))?;
        let gate = self.ffn_projection(il, gate, x, ffn, Some("ffn_gate"))?;
        let limit = self.hp.swiglu_clamp_shexp.get(il).copied().filter(|&l| l > 1e-6);
        let (h, act) = match (ffn.gelu, limit) {
            (true, _) => (self.g.geglu(gate, up)?, "ffn_geglu"),
            _ if ffn.oai => (self.g.swiglu_oai(gate, up, OAI_ALPHA, OAI_LIMIT)?, "ffn_swiglu_oai"),
            (false, Some(limit)) => (self.swiglu_clamped(gate, up, limit)?, "ffn_swiglu_limited"),
            (false, None) => (self.g.swiglu(gate, up)?, "ffn_swiglu"),
        };
        let h = self.name(h, act, l);
        self.ffn_projection(il, down, h, ffn, None)
    }

    /// SwiGLU with a limit, in the form the model uses (`HParams::swiglu_clamp_fused`).
    pub(super) fn swiglu_clamped(&mut self, gate: TensorRef, up: TensorRef, limit: f32) -> Result<TensorRef> {
        if self.hp.swiglu_clamp_fused {
            return self.g.swiglu_clamp(gate, up, limit).map_err(Error::from);
        }
        let up = self.g.clamp(up, -limit, limit)?;
        let act = self.g.silu(gate)?;
        let act = self.g.clamp(act, f32::NEG_INFINITY, limit)?;
        self.g.mul(act, up).map_err(Error::from)
    }

    /// `blk.{il}.{name}.weight` times `x`, then its bias and its scale as `ffn` says (each step
    /// named after `label` when given).
    fn ffn_projection(
        &mut self,
        il: usize,
        name: &str,
        x: TensorRef,
        ffn: Ffn,
        label: Option<&str>,
    ) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        let b = self
            .layer_weight_opt(il, &format!("{name}.bias"))
            .filter(|_| ffn.biased);
        let order = Order::BiasThenScale { scaled: ffn.scaled };
        self.project_named(w, b, x, order, label.map(|l| (l, il)))
    }

    /// An ungated FFN with squared ReLU: projections with their biases and scales.
    pub fn relu_sqr_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        self.relu_sqr_ffn_named(il, x, "", RELU_SQR_FFN)
    }

    /// The same over `ffn_up{suffix}` and `ffn_down{suffix}` (a shared expert: "_shexp"), with
    /// the weights' scales and biases as `ffn` says.
    pub fn relu_sqr_ffn_named(&mut self, il: usize, x: TensorRef, suffix: &str, ffn: Ffn) -> Result<TensorRef> {
        let up = self.ffn_projection(il, &format!("ffn_up{suffix}"), x, ffn, Some("ffn_up"))?;
        let h = self.g.relu(up)?;
        let h = self.g.sqr(h)?;
        self.ffn_projection(il, &format!("ffn_down{suffix}"), h, ffn, None)
    }

    /// down(gelu(up x)), each with its bias (no scales), GELU's output divided by the layer's
    /// `ffn.act.scales` where it has them: the encoders' and early decoders' FFN.
    pub fn gelu_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        let ffn = Ffn {
            biased: true,
            ..Ffn::default()
        };
        let up = self.ffn_projection(il, "ffn_up", x, ffn, Some("ffn_up"))?;
        let mut h = self.g.gelu(up)?;
        if let Some(scales) = self.layer_weight_opt(il, "ffn.act.scales") {
            h = self.g.div(h, scales)?;
        }
        self.ffn_projection(il, "ffn_down", h, ffn, None)
    }

    /// down(swiglu(up x)): the gate and up projections fused in `ffn_up`, no biases or
    /// scales.
    pub fn fused_gated_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        self.fused_gated_ffn_named(il, x, "")
    }

    /// The same over `ffn_up{suffix}` and `ffn_down{suffix}` (a shared expert's, `_shexp`).
    pub fn fused_gated_ffn_named(&mut self, il: usize, x: TensorRef, suffix: &str) -> Result<TensorRef> {
        let up_w = self.layer_weight(il, &format!("ffn_up{suffix}.weight"))?;
        let down_w = self.layer_weight(il, &format!("ffn_down{suffix}.weight"))?;
        let up = self.weight_mm(up_w, x)?;
        let h = self.g.swiglu_fused(up)?;
        self.weight_mm(down_w, h)
    }

    /// down(geglu(up x)): GELU's gate and the up projection fused in `ffn_up`, no biases or
    /// scales.
    pub fn fused_geglu_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        let up_w = self.layer_weight(il, "ffn_up.weight")?;
        let down_w = self.layer_weight(il, "ffn_down.weight")?;
        let up = self.weight_mm(up_w, x)?;
        let h = self.g.geglu_fused(up)?;
        self.weight_mm(down_w, h)
    }
}
