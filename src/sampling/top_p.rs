//! Top-p (nucleus): keep the smallest prefix of the sorted candidates whose probability reaches p.

use super::backend::{self, GraphBound, GraphData, GraphPart};
use super::candidates::{bucket_partial_sort, softmax, sort_top};
use super::{Candidates, Empty, Sampler, TokenData};
use crate::ggml::Graph;
use std::ffi::CStr;

#[derive(Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
    buf_sort: Vec<TokenData>,
    graph: GraphBound,
}

impl TopP {
    /// `p >= 1` is a no-op sampler ("?top-p").
    pub fn boxed(p: f32, min_keep: usize) -> Box<dyn Sampler> {
        if p >= 1.0 {
            Box::new(Empty::new(c"?top-p"))
        } else {
            Box::new(TopP {
                p,
                min_keep,
                buf_sort: Vec::new(),
                graph: GraphBound::default(),
            })
        }
    }
}

impl Sampler for TopP {
    fn name(&self) -> &'static CStr {
        self.graph.name([c"top-p", c"+top-p", c"-top-p"])
    }

    /// Unsorted large arrays are first sorted only for their top 256 (most nuclei are smaller), and
    /// fully only if the cumulative sum has not reached p by then.
    fn apply(&mut self, cur: &mut Candidates<'_>) {
        if self.p >= 1.0 || cur.is_empty() {
            return;
        }
        softmax(cur, false);
        let size = cur.len();
        let mut k = size;
        let use_buf = !cur.sorted && size > 1024;
        if use_buf {
            k = 256.min(size);
            bucket_partial_sort(cur.data(), k, &mut self.buf_sort);
        } else if !cur.sorted {
            sort_top(cur, k);
        }
        let mut cum_sum = 0.0f32;
        let mut last_idx = size;
        for i in 0..size {
            let p = if use_buf { self.buf_sort[i].p } else { cur.data()[i].p };
            cum_sum += p;
            if cum_sum >= self.p && i + 1 >= self.min_keep {
                last_idx = i + 1;
                break;
            }
            if use_buf && i == k - 1 {
                k = size;
                bucket_partial_sort(cur.data(), k, &mut self.buf_sort);
            }
        }
        if use_buf {
            cur.data_mut()[..last_idx].copy_from_slice(&self.buf_sort[..last_idx]);
            cur.sorted = true;
        }
        cur.truncate(last_idx);
    }

    fn box_clone(&self) -> Box<dyn Sampler> {
        Box::new(TopP {
            p: self.p,
            min_keep: self.min_keep,
            buf_sort: Vec::new(),
            graph: self.graph.clone(),
        })
    }

    fn graph_part(&mut self) -> Option<&mut dyn GraphPart> {
        Some(self)
    }
}

impl GraphPart for TopP {
    fn bound(&mut self) -> &mut GraphBound {
        &mut self.graph
    }

    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> std::result::Result<(), crate::ggml::GgmlError> {
        backend::top_p(g, d, self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::*;
    use super::super::Dist;
    use super::*;

    fn run(p: f32, expected: &[f32]) {
        let mut v = from_probs(&[0.1, 0.2, 0.3, 0.4]);
        let mut c = Candidates::new(&mut v, -1, false);
        TopP::boxed(p, 0).apply(&mut c);
        Dist::new(0).apply(&mut c);
        assert_probs(&c, expected);
    }

    #[test]
    fn keeps_the_nucleus() {
        run(0.0, &[1.0]);
        run(0.65, &[0.571429, 0.428571]);
        // Exactly at the boundary (0.4 + 0.3) the nucleus is closed, as llama.cpp's `>=`. Miri
        // perturbs exp and ln by an ulp or so on purpose, which moves the sum off the boundary.
        if !cfg!(miri) {
            run(0.7, &[0.571429, 0.428571]);
        }
        run(0.8, &[0.44444, 0.33333, 0.22222]);
        run(1.0, &[0.1, 0.2, 0.3, 0.4]);
    }

    #[test]
    fn large_arrays_take_the_adaptive_path() {
        // logits ln(i): p_i proportional to i; the nucleus for 0.8 is the top tokens summing to 80%.
        // Past the 1024 candidates that take the adaptive path; fewer under Miri, which is slow.
        let n = if cfg!(miri) { 2000usize } else { 10000 };
        let logits: Vec<f32> = (0..n).map(|i| (i as f32).ln()).collect();
        for p in [0.0003f32, 0.8] {
            let mut v = from_logits(&logits);
            let mut c = Candidates::new(&mut v, -1, false);
            TopP::boxed(p, 1).apply(&mut c);
            assert!(c.sorted);
            let divisor = (n * (n - 1) / 2) as f64;
            let target = (f64::from(p) * divisor).ceil();
            let (mut sum, mut size, mut id) = (0.0, 0usize, n);
            while sum < target {
                id -= 1;
                size += 1;
                sum += id as f64;
            }
            assert_eq!(c.len(), size, "p={p}");
            assert_eq!(c.data()[size - 1].id as usize, id);
        }
    }
}
