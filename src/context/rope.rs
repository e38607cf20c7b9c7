//! The rotary-embedding settings of a context, from its parameters and the model's, as llama.cpp
//! derives them (`llama_context`'s constructor): which scaling applies, YaRN's extrapolation mix
//! and magnitude correction, and whether LongRoPE's long-context factors are in use.

use super::Params;
use crate::graph::RopeParams;
use crate::model::hparams::{HParams, RopeScaling};

/// The settings for a context of `n_ctx_seq` cells per sequence (`hp` None: a vocab-only model).
pub fn settings(p: &Params, hp: Option<&HParams>, n_ctx_seq: u32) -> RopeParams {
    let or_default = |v: f32, default: f32| if v >= 0.0 { v } else { default };
    let scaling = p
        .rope_scaling
        .or(hp.map(|h| h.rope_scaling))
        .unwrap_or(RopeScaling::Linear);
    let freq_scale = match (scaling, p.rope_freq_scale) {
        // No scaling means none, whatever the scale says.
        (RopeScaling::None, _) => 1.0,
        (_, s) if s != 0.0 => s,
        _ => hp.map_or(0.0, |h| h.rope_freq_scale),
    };
    let n_ctx_orig = match (p.yarn_orig_ctx, hp) {
        (0, Some(h)) if h.n_ctx_orig_yarn != 0 => h.n_ctx_orig_yarn,
        (0, Some(h)) => h.n_ctx_train,
        (v, _) => v,
    };
    // The context's value, else the model's (llama.cpp's hparams defaults without a model).
    let yarn = |v: f32, model: fn(&HParams) -> f32, default: f32| or_default(v, hp.map_or(default, model));
    let ext_factor = match yarn(p.yarn_ext_factor, |h| h.yarn_ext_factor, -1.0) {
        v if v >= 0.0 => v,
        _ if scaling == RopeScaling::Yarn => 1.0,
        _ => 0.0,
    };
    let mut attn_factor = yarn(p.yarn_attn_factor, |h| h.yarn_attn_factor, 1.0);
    if ext_factor != 0.0 {
        // YaRN's magnitude correction for the stretch factor (over the one a log multiplier asks
        // for), cancelled by the one ggml's rope applies itself when mixing in extrapolation
        // (ggml's ops.cpp).
        let factor = 1.0 / freq_scale;
        let mscale = |m: f32| {
            if factor <= 1.0 {
                1.0
            } else {
                0.1 * m * factor.ln() + 1.0
            }
        };
        attn_factor = match hp.map_or(0.0, |h| h.rope_yarn_log_mul) {
            0.0 => mscale(1.0),
            log_mul => mscale(hp.map_or(1.0, |h| h.rope_yarn_mscale)) / mscale(log_mul),
        };
        attn_factor *= 1.0 / (1.0 + 0.1 * factor.ln());
    }
    attn_factor *= hp.map_or(1.0, |h| h.rope_attn_factor);
    RopeParams {
        freq_base: if p.rope_freq_base == 0.0 {
            hp.map_or(0.0, |h| h.rope_freq_base)
        } else {
            p.rope_freq_base
        },
        freq_scale,
        n_ctx_orig,
        ext_factor,
        attn_factor,
        beta_fast: yarn(p.yarn_beta_fast, |h| h.yarn_beta_fast, 32.0),
        beta_slow: yarn(p.yarn_beta_slow, |h| h.yarn_beta_slow, 1.0),
        long_factors: hp.is_some_and(|h| n_ctx_seq > h.n_ctx_orig_yarn),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests::{load, params, SMOLLM2};

    fn hparams() -> HParams {
        load(SMOLLM2.0).hparams.clone().expect("hparams")
    }

    #[test]
    fn yarn_mixes_extrapolation_and_corrects_magnitudes_as_llama_cpp() {
        let mut hp = hparams();
        hp.rope_scaling = RopeScaling::Yarn;
        hp.rope_freq_scale = 0.25;
        hp.rope_attn_factor = 1.5;
        let r = settings(&params(4096, 512, 1), Some(&hp), 4096);
        assert_eq!((r.ext_factor, r.freq_scale), (1.0, 0.25));
        let f = 4.0f32;
        assert_eq!(r.attn_factor, (0.1 * f.ln() + 1.0) * (1.0 / (1.0 + 0.1 * f.ln())) * 1.5);
        // An explicit extrapolation factor of 0 turns YaRN's correction off.
        let mut p = params(4096, 512, 1);
        p.yarn_ext_factor = 0.0;
        p.yarn_attn_factor = 2.0;
        let r = settings(&p, Some(&hp), 4096);
        assert_eq!((r.ext_factor, r.attn_factor), (0.0, 3.0));
    }

    #[test]
    fn yarn_settings_fall_back_to_the_model_then_to_llama_cpp_defaults() {
        let mut hp = hparams();
        hp.rope_scaling = RopeScaling::Yarn;
        hp.rope_freq_scale = 0.25;
        hp.yarn_beta_fast = 8.0;
        hp.rope_yarn_log_mul = 0.5;
        let r = settings(&params(4096, 512, 1), Some(&hp), 4096);
        assert_eq!((r.beta_fast, r.beta_slow), (8.0, 1.0));
        let f = 4.0f32;
        let m = |m: f32| 0.1 * m * f.ln() + 1.0;
        assert_eq!(r.attn_factor, m(1.0) / m(0.5) * (1.0 / (1.0 + 0.1 * f.ln())));
        // A scale equal to the log multiplier: the correction cancels.
        hp.rope_yarn_mscale = 0.5;
        let r = settings(&params(4096, 512, 1), Some(&hp), 4096);
        assert_eq!(r.attn_factor, 1.0 / (1.0 + 0.1 * f.ln()));
        // The context's own value wins.
        let mut p = params(4096, 512, 1);
        p.yarn_beta_fast = 16.0;
        assert_eq!(settings(&p, Some(&hp), 4096).beta_fast, 16.0);
    }

    #[test]
    fn scaling_none_never_scales_and_linear_keeps_the_scale() {
        let mut hp = hparams();
        hp.rope_freq_scale = 0.5;
        let mut p = params(4096, 512, 1);
        assert_eq!(settings(&p, Some(&hp), 4096).freq_scale, 0.5);
        p.rope_scaling = Some(RopeScaling::None);
        p.rope_freq_scale = 0.125;
        let r = settings(&p, Some(&hp), 4096);
        assert_eq!((r.freq_scale, r.ext_factor, r.attn_factor), (1.0, 0.0, 1.0));
    }

    #[test]
    fn long_factors_apply_past_the_trained_context() {
        let mut hp = hparams();
        hp.n_ctx_orig_yarn = 512;
        let p = params(512, 512, 1);
        assert!(!settings(&p, Some(&hp), 512).long_factors);
        assert!(settings(&p, Some(&hp), 513).long_factors);
        assert!(
            !settings(&p, None, 100_000).long_factors,
            "a vocab-only model has no factors"
        );
    }
}
