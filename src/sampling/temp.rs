//! Temperature: plain (logits / t) and dynamic ("temp-ext": t chosen from the entropy).

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::candidates::{apply_temp, cxx_max, softmax};
use super::{Candidates, Empty, Sampler};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct Temp {
    t: f32,
    graph: GraphBound,
}

impl Temp {
    /// `t == 1` is a no-op sampler ("?temp"); `t <= 0` keeps only the best candidate.
    pub fn boxed(t: f32) -> Box<dyn Sampler> {
        if t == 1.0 {
            Box::new(Empty::new(c"?temp"))
        } else {
            Box::new(Temp {
                t,
                graph: GraphBound::default(),
            })
        }
    }
}

impl Sampler for Temp {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"temp", c"+temp", c"-temp"])
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        apply_temp(cur, self.t);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for Temp {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::temperature(g, d, self.t)
    }
}

#[derive(Clone)]
pub struct TempExt {
    t: f32,
    delta: f32,
    exponent: f32,
    graph: GraphBound,
}

impl TempExt {
    /// `t == 1` without a range (`delta <= 0`) is a no-op sampler ("?temp-ext").
    pub fn boxed(t: f32, delta: f32, exponent: f32) -> Box<dyn Sampler> {
        if t == 1.0 && delta <= 0.0 {
            Box::new(Empty::new(c"?temp-ext"))
        } else {
            Box::new(TempExt {
                t,
                delta,
                exponent,
                graph: GraphBound::default(),
            })
        }
    }

    /// The temperature moves within [t - delta, t + delta] with the normalised entropy raised to
    /// `exponent`; the probabilities are then recomputed in double, as llama.cpp does.
    fn apply_dynamic(&self, cur: &mut Candidates<'_>) {
        let min_temp = cxx_max(0.0, self.t - self.delta);
        let max_temp = self.t + self.delta;
        if cur.len() <= 1 {
            return;
        }
        let max_entropy = -(1.0f32 / cur.len() as f32).ln();
        softmax(cur, true);
        let entropy = cur
            .data()
            .iter()
            .fold(0.0f32, |e, d| if d.p > 0.0 { e - d.p * d.p.ln() } else { e });
        let normalized_entropy = entropy / max_entropy;
        let dyn_temp = min_temp + (max_temp - min_temp) * normalized_entropy.powf(self.exponent);
        apply_temp(cur, dyn_temp);

        let data = cur.data_mut();
        let max_l = f64::from(data[0].logit);
        let mut cum_sum = 0.0f64;
        for d in data.iter_mut() {
            let p = (f64::from(d.logit) - max_l).exp();
            d.p = p as f32;
            cum_sum += p;
        }
        for d in data.iter_mut() {
            d.p = (f64::from(d.p) / cum_sum) as f32;
        }
    }
}

impl Sampler for TempExt {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"temp-ext", c"+temp-ext", c"-temp-ext"])
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.delta > 0.0 {
            self.apply_dynamic(cur);
        } else {
            apply_temp(cur, self.t);
        }
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for TempExt {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::temperature_ext(g, d, self.t, self.delta, self.exponent)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::Dist;
    use super::*;

    fn run(s: Box<dyn Sampler>, expected: &[f32]) {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        let mut s = s;
        s.apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn temperature_one_and_zero() {
        run(Temp::boxed(1.0), &[0.1, 0.2, 0.3, 0.4]);
        run(Temp::boxed(0.0), &[0.0, 0.0, 0.0, 1.0]);
        run(TempExt::boxed(1.0, 0.0, 1.0), &[0.1, 0.2, 0.3, 0.4]);
        run(TempExt::boxed(0.0, 0.0, 1.0), &[0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn temperature_two_flattens() {
        // p_i ∝ sqrt(p_i): sqrt(.1), sqrt(.2), sqrt(.3), sqrt(.4) normalised.
        let s: f32 = [0.1f32, 0.2, 0.3, 0.4].iter().map(|p| p.sqrt()).sum();
        run(
            Temp::boxed(2.0),
            &[
                0.1f32.sqrt() / s,
                0.2f32.sqrt() / s,
                0.3f32.sqrt() / s,
                0.4f32.sqrt() / s,
            ],
        );
    }

    #[test]
    fn dynamic_temperature_uses_the_entropy() {
        // Uniform input: normalised entropy 1, so t = t + delta = 1.5; the distribution stays uniform
        // and is sorted (by the softmax it needed).
        let mut v = from_logits(&[0.0; 4]);
        let mut c = Candidates::new(&mut v, -1, false);
        TempExt::boxed(1.0, 0.5, 1.0).apply(&mut c);
        assert_probs(&c, &[0.25; 4]);
        assert!(c.sorted);
        assert_eq!(c.data()[0].logit, 0.0 / 1.5);
    }
}
