//! Mixture-of-experts FFNs: the router's choice of experts and their weights (`Gating`), and the
//! picked experts' products.

use super::ffn::{OAI_ALPHA, OAI_LIMIT};
use super::Builder;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;

/// How a mixture-of-experts layer turns the router's logits into expert weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all experts, then pick the largest.
    Softmax,
    /// Each expert's sigmoid, then pick the largest.
    Sigmoid,
    /// Pick the largest logits, then softmax over the picked.
    SoftmaxWeight,
    /// sqrt(softplus) of each logit, then pick the largest.
    SqrtSoftplus,
}

impl Gating {
    /// llama.cpp's `expert_gating_func` value (the ones implemented here).
    pub fn from_llama(v: u32) -> Option<Gating> {
        match v {
            1 => Some(Gating::Softmax),
            2 => Some(Gating::Sigmoid),
            3 => Some(Gating::SoftmaxWeight),
            4 => Some(Gating::SqrtSoftplus),
            _ => None,
        }
    }
}

/// The experts' gated activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertAct {
    /// silu(gate) * up (SiLU of up alone without a gate).
    Silu,
    /// The clamped, sharpened SwiGLU (ggml's `swiglu_oai`).
    SwigluOai,
    /// relu(up)², experts without a gate.
    ReluSqr,
    /// relu(gate) * up (relu of up alone without a gate).
    Relu,
    /// gelu(gate) * up (gelu of up alone without a gate).
    Gelu,
    /// SiTU of gate and up (`Builder::situ`); needs a gate.
    Situ,
}

/// What varies between the mixture-of-experts layers of the architectures.
#[derive(Debug, Clone, Copy)]
pub struct Moe {
    pub gating: Gating,
    /// Divide the picked experts' weights by their sum.
    pub normalize: bool,
    pub act: ExpertAct,
    /// Multiply the experts' products by their per-expert scales (where llama.cpp's graph
    /// passes them).
    pub scaled: bool,
    /// A warm-up routes every expert (where llama.cpp's graph passes its warm-up count).
    pub warmup_all: bool,
    /// Weights first: experts picked by the raw logits, and each picked expert's weight
    /// multiplied into its input rather than into its output.
    pub weights_first: bool,
    /// GroveMoE's routing: experts picked by the sigmoid of the logits, weighted by `gating`.
    pub pick_by_sigmoid: bool,
}

impl Moe {
    /// What an architecture's experts do unless it says otherwise: SiLU experts picked and
    /// weighted by softmax, weights unnormalised and unscaled, every expert routed in a warm-up.
    pub const BASE: Moe = Moe {
        gating: Gating::Softmax,
        normalize: false,
        act: ExpertAct::Silu,
        scaled: false,
        warmup_all: true,
        weights_first: false,
        pick_by_sigmoid: false,
    };

    /// SiLU experts routed by the model's gating (`default` where it names none known), each
    /// picked weight normalised where `normalize`, every expert routed in a warm-up.
    pub fn silu(gating: u32, default: Gating, normalize: bool, scaled: bool) -> Moe {
        Moe {
            gating: Gating::from_llama(gating).unwrap_or(default),
            normalize,
            scaled,
            ..Moe::BASE
        }
    }
}

impl Builder<'_> {
    /// A mixture-of-experts FFN over `x` ([n_embd, n_tokens]), as llama.cpp builds it: the router
    /// `ffn_gate_inp` picks `n_expert_used` experts per token, whose gated FFNs
    /// (`ffn_{gate,up,down}_exps`, the gate optional; SiLU) are mixed by the router's weights.
    pub fn moe_ffn(&mut self, il: usize, x: TensorRef, moe: Moe) -> Result<TensorRef> {
        self.moe_ffn_routed(il, x, x, moe)
    }

    /// The same with the router reading `router_x` rather than the experts' input `x` (which a
    /// latent projection may have narrowed).
    pub fn moe_ffn_routed(&mut self, il: usize, x: TensorRef, router_x: TensorRef, moe: Moe) -> Result<TensorRef> {
        let logits = self.router_logits(il, router_x)?;
        self.moe_ffn_from_logits(il, x, logits, moe)
    }

    /// The router's logits for `x`: `ffn_gate_inp` times it, plus the router's bias if any
    /// ([n_expert, n_tokens]).
    pub fn router_logits(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        let l = Some(il);
        let router = self.layer_weight(il, "ffn_gate_inp.weight")?;
        let mut logits = self.weight_mm(router, x)?;
        logits = self.name(logits, "ffn_moe_logits", l);
        if let Some(b) = self.layer_weight_opt(il, "ffn_gate_inp.bias") {
            logits = self.add(logits, b)?;
            logits = self.name(logits, "ffn_moe_logits_biased", l);
        }
        Ok(logits)
    }

    /// The experts over `x`, routed by `logits` (`router_logits`, computed where the architecture
    /// computes them).
    pub fn moe_ffn_from_logits(&mut self, il: usize, x: TensorRef, logits: TensorRef, moe: Moe) -> Result<TensorRef> {
        let (picked, weights) = self.moe_route(il, logits, moe)?;
        self.moe_experts(il, x, picked, weights, moe, "_exps")
    }

    /// How many experts a token picks: every one in a warm-up, as llama.cpp's does, so each
    /// expert's weights are read.
    pub fn moe_pick_count(&self, moe: Moe) -> i64 {
        if self.params.warmup && moe.warmup_all {
            i64::from(self.hp.n_expert)
        } else {
            i64::from(self.hp.n_expert_used)
        }
    }

    /// The experts each token picks from the router's `logits` ([n_expert, n_tokens]) and their
    /// weights: the picked ids, I32 [n_pick, n_tokens], and the weights, [1, n_pick, n_tokens].
    pub fn moe_route(&mut self, il: usize, logits: TensorRef, moe: Moe) -> Result<(TensorRef, TensorRef)> {
        // HY-V3 names the bias without its suffix.
        let bias = self
            .layer_weight_opt(il, "exp_probs_b.bias")
            .or_else(|| self.layer_weight_opt(il, "exp_probs_b"));
        self.moe_route_biased(il, logits, moe, bias)
    }

    /// The same with the per-expert selection bias `bias` (a per-expert bias steers the choice
    /// only; the weights come from the unbiased probabilities).
    pub fn moe_route_biased(
        &mut self,
        il: usize,
        logits: TensorRef,
        moe: Moe,
        bias: Option<TensorRef>,
    ) -> Result<(TensorRef, TensorRef)> {
        let l = Some(il);
        let n_pick = self.moe_pick_count(moe);
        let probs = self.moe_probs(il, logits, moe)?;
        let selection = if moe.weights_first {
            logits
        } else if moe.pick_by_sigmoid {
            self.g.sigmoid(logits)?
        } else if let Some(b) = bias {
            let biased = self.add(probs, b)?;
            self.name(biased, "ffn_moe_probs_biased", l)
        } else {
            probs
        };
        let picked = self.g.argsort_top_k(selection, n_pick)?;
        let picked = self.name(picked, "ffn_moe_topk", l);
        let weights = self.moe_weights(il, probs, picked, moe)?;
        Ok((picked, weights))
    }

    /// The router's `logits` turned into expert probabilities as `moe.gating` says.
    pub fn moe_probs(&mut self, il: usize, logits: TensorRef, moe: Moe) -> Result<TensorRef> {
        let probs = match moe.gating {
            Gating::Softmax => self.g.soft_max_rows(logits)?,
            Gating::Sigmoid => self.g.sigmoid(logits)?,
            Gating::SoftmaxWeight => logits,
            Gating::SqrtSoftplus => {
                let s = self.g.softplus(logits)?;
                self.g.sqrt(s)?
            }
        };
        Ok(self.name(probs, "ffn_moe_probs", Some(il)))
    }

    /// The weights of the `picked` experts ([n_pick, n_tokens]) read from `probs` ([n_expert,
    /// n_tokens]): softmaxed, normalised and scaled as `moe` and the model say.
    pub fn moe_weights(&mut self, il: usize, probs: TensorRef, picked: TensorRef, moe: Moe) -> Result<TensorRef> {
        let l = Some(il);
        let hp = self.hp;
        let [n_expert, n_tokens, ..] = probs.ne();
        let n_pick = picked.ne()[0];
        let probs = self.g.reshape(probs, &[1, n_expert, n_tokens])?;
        let mut weights = self.g.get_rows(probs, picked)?;
        weights = self.name(weights, "ffn_moe_weights", l);
        if moe.gating == Gating::SoftmaxWeight {
            let w = self.g.reshape(weights, &[n_pick, n_tokens])?;
            let w = self.g.soft_max_rows(w)?;
            weights = self.g.reshape(w, &[1, n_pick, n_tokens])?;
            weights = self.name(weights, "ffn_moe_weights_softmax", l);
        }
        if moe.normalize {
            let w = self.g.reshape(weights, &[n_pick, n_tokens])?;
            let sum = self.g.sum_rows(w)?;
            // The smallest normal F16, so a sum of zeros does not divide by zero.
            let sum = self.g.clamp(sum, 6.103_515_6e-5, f32::INFINITY)?;
            let w = self.g.div(w, sum)?;
            weights = self.g.reshape(w, &[1, n_pick, n_tokens])?;
            weights = self.name(weights, "ffn_moe_weights_norm", l);
        }
        if hp.expert_weights_scale != 0.0 && hp.expert_weights_scale != 1.0 {
            weights = self.scale(weights, hp.expert_weights_scale)?;
        }
        // Early, as llama.cpp does, so the node order (and any fusion) is the same.
        self.g.expand(weights);
        Ok(weights)
    }

    /// `x` through the `picked` experts of layer `il`'s stacks `ffn_{gate,up,down}{suffix}` (or
    /// `ffn_gate_up{suffix}`), weighted by `weights`, summed over the first `n_expert_used`.
    pub fn moe_experts(
        &mut self,
        il: usize,
        x: TensorRef,
        picked: TensorRef,
        weights: TensorRef,
        moe: Moe,
        suffix: &str,
    ) -> Result<TensorRef> {
        let l = Some(il);
        let hp = self.hp;
        let n_used = i64::from(hp.n_expert_used);
        let n_pick = picked.ne()[0];
        let [n_embd, n_tokens, ..] = x.ne();
        let mut x = self.g.reshape(x, &[n_embd, 1, n_tokens])?;
        if moe.weights_first {
            let repeated = self.g.repeat(x, [n_embd, n_pick, n_tokens, 1])?;
            x = self.g.mul(repeated, weights)?;
            x = self.name(x, "ffn_moe_weighted", l);
        }
        let (up, gate) = if self
            .layer_weight_opt(il, &format!("ffn_gate_up{suffix}.weight"))
            .is_some()
        {
            // Gate and up in one stack: one product, split into its halves.
            let gate_up = self.experts_linear(il, &format!("ffn_gate_up{suffix}"), x, picked, moe.scaled)?;
            let gate_up = self.name(gate_up, "ffn_moe_gate_up", l);
            let [n2, n_p, n_t, _] = gate_up.ne();
            let nb = gate_up.nb();
            let half = |bd: &mut Builder, at: usize| bd.g.view(gate_up, &[n2 / 2, n_p, n_t], &[nb[1], nb[2]], at);
            let gate = half(self, 0)?;
            let up = half(self, (n2 / 2) as usize * nb[0])?;
            (up, Some(gate))
        } else {
            let up = self.experts_linear(il, &format!("ffn_up{suffix}"), x, picked, moe.scaled)?;
            let up = self.name(up, "ffn_moe_up", l);
            let gate = if self.layer_weight_opt(il, &format!("ffn_gate{suffix}.weight")).is_some() {
                let gate = self.experts_linear(il, &format!("ffn_gate{suffix}"), x, picked, moe.scaled)?;
                Some(self.name(gate, "ffn_moe_gate", l))
            } else {
                None
            };
            (up, gate)
        };
        // A layer's SwiGLU limit, in the model's form.
        let limit = hp.swiglu_clamp_exp.get(il).copied().filter(|&l| l > 1e-6);
        let h = match (gate, moe.act) {
            (Some(gate), ExpertAct::Silu) => match limit {
                Some(limit) => Ok(self.swiglu_clamped(gate, up, limit)?),
                None => self.g.swiglu(gate, up),
            },
            (None, ExpertAct::Silu) => self.g.silu(up),
            (Some(gate), ExpertAct::SwigluOai) => self.g.swiglu_oai(gate, up, OAI_ALPHA, OAI_LIMIT),
            (None, ExpertAct::SwigluOai) => return Err(Error::model("experts with the clamped SwiGLU need a gate")),
            (None, ExpertAct::ReluSqr) => self.g.relu(up).and_then(|h| self.g.sqr(h)),
            (Some(gate), ExpertAct::Relu) => self.g.reglu(gate, up),
            (None, ExpertAct::Relu) => self.g.relu(up),
            (Some(gate), ExpertAct::Gelu) => self.g.geglu(gate, up),
            (None, ExpertAct::Gelu) => self.g.gelu(up),
            (gate, ExpertAct::Situ) => {
                let gate = gate.ok_or_else(|| Error::model("SiTU experts need a gate"))?;
                Ok(self.situ(gate, up)?)
            }
            (Some(_), ExpertAct::ReluSqr) => {
                return Err(Error::model(
                    "squared-ReLU experts have no gate (llama.cpp has no gated form)",
                ))
            }
        }?;
        let experts = self.experts_linear(il, &format!("ffn_down{suffix}"), h, picked, moe.scaled)?;
        let experts = self.name(experts, "ffn_moe_down", l);
        let experts = if moe.weights_first {
            experts
        } else {
            self.g.mul(experts, weights)?
        };
        self.g.expand(experts);

        // Sum over the first n_used picked experts (all of them but in a warm-up): views first,
        // then the additions, in llama.cpp's order.
        let [_, nb1, nb2, _] = experts.nb();
        let mut views = Vec::with_capacity(n_used as usize);
        for i in 0..n_used as usize {
            let v = self.g.view(experts, &[n_embd, n_tokens], &[nb2], i * nb1)?;
            self.g.expand(v);
            views.push(v);
        }
        let mut out = views[0];
        for &v in &views[1..] {
            out = self.add(out, v)?;
            self.g.expand(out);
        }
        if n_used == 1 {
            out = self.g.cont(out)?;
        }
        Ok(self.name(out, "ffn_moe_out", l))
    }

    /// The picked experts' matrices of the stack `blk.{il}.{name}.weight` times `x` ([k, 1 or
    /// n_pick, n_tokens]), each times its expert's scale when `scaled` and the stack has scales,
    /// plus its expert's bias when the stack has biases.
    fn experts_linear(
        &mut self,
        il: usize,
        name: &str,
        x: TensorRef,
        picked: TensorRef,
        scaled: bool,
    ) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        let mut y = self.g.mul_mat_id(w, x, picked)?;
        if let Some(s) = self.weight_scale(w).filter(|_| scaled) {
            let n_expert = s.ne()[0];
            let n_tokens = x.ne()[2];
            let s = self.g.reshape(s, &[1, n_expert, 1])?;
            let s = self.g.repeat(s, [1, n_expert, n_tokens, 1])?;
            let s = self.g.get_rows(s, picked)?;
            y = self.g.mul(y, s)?;
        }
        y = self.add_lora(w, x, y, Some(picked))?;
        if let Some(b) = self.layer_weight_opt(il, &format!("{name}.bias")) {
            y = self.g.add_id(y, b, picked)?;
        }
        Ok(y)
    }
}
