//! The end of the graph: the requested rows, the final norm and output head, and the embeddings
//! pooled from the hidden states (with a ranking model's classifier).

use super::{Builder, Pooling};
use crate::error::{Error, Result};
use crate::ggml::{Graph, TensorRef};

impl Builder<'_> {
    /// The final-norm hidden states, reduced per sequence as `pooling` says, as a graph output.
    pub(super) fn pooled_embeddings(&mut self, pooling: Pooling) -> Result<TensorRef> {
        let h = self
            .hidden
            .ok_or_else(|| Error::Internal("the architecture built no output head".into()))?;
        let ns = self.shape.n_seqs as i64;
        let out = match pooling {
            Pooling::None => h,
            Pooling::Mean => self.mean_of_sequences(h)?,
            // A model that says so ranks its sequences' mean states (rerankers whose classifier pools by the mean).
            Pooling::Rank if Pooling::from_llama(self.hp.pooling_type_cls) == Some(Pooling::Mean) => {
                let mean = self.mean_of_sequences(h)?;
                self.classifier_head(mean)?
            }
            Pooling::Cls | Pooling::Last | Pooling::Rank => {
                let rows = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[ns], "inp_cls")?;
                self.inputs.cls = Some(rows);
                let picked = self.g.get_rows(h, rows)?;
                if pooling == Pooling::Rank {
                    self.classifier_head(picked)?
                } else {
                    picked
                }
            }
        };
        let out = self.dense_out(out)?;
        if pooling != Pooling::Rank && out.ne()[0] != i64::from(self.hp.embd_out()) {
            return Err(Error::model(format!(
                "the model's embeddings are {} wide, not the {} it declares (llama_model_n_embd_out): \
                 llama.cpp reads past its output here",
                out.ne()[0],
                self.hp.embd_out()
            )));
        }
        self.g.output(out);
        Ok(out)
    }

    /// The mean of each sequence's rows of `h` ([n_embd, n_seqs]), weighed by the `inp_mean` input.
    fn mean_of_sequences(&mut self, h: TensorRef) -> Result<TensorRef> {
        let (nt, ns) = (self.shape.n_tokens as i64, self.shape.n_seqs as i64);
        let w = self.g.input(ggml_sys::ggml_type_GGML_TYPE_F32, &[nt, ns], "inp_mean")?;
        self.inputs.mean = Some(w);
        let ht = self.g.permute(h, [1, 0, 2, 3])?;
        let ht = self.g.cont(ht)?;
        self.g.mul_mat(ht, w).map_err(Error::from)
    }

    /// The dense projections some embedding models end with (`dense_2` alone, with an
    /// optional bias, or Sentence Transformers' `dense_2` then `dense_3`), applied to the pooled
    /// embeddings `x` where the model has them.
    fn dense_out(&mut self, mut x: TensorRef) -> Result<TensorRef> {
        if let Some(w) = self.weight_opt("dense_2.weight") {
            x = self.g.mul_mat(w, x)?;
        }
        if let Some(bias) = self.weight_opt("dense_2.bias") {
            x = self.g.add(x, bias)?;
        }
        if let Some(w) = self.weight_opt("dense_3.weight") {
            x = self.g.mul_mat(w, x)?;
        }
        Ok(x)
    }

    /// The classifier head of a ranking model over the pooled states `x` ([n_embd, n_seqs]):
    /// `cls` (with its bias) and tanh (GELU where the model says), its norm `cls.norm` (no bias),
    /// then `cls.output` (with its bias), as llama.cpp applies them when present; Qwen3's
    /// rerankers end with a softmax over the labels.
    fn classifier_head(&mut self, mut x: TensorRef) -> Result<TensorRef> {
        if let Some(w) = self.weight_opt("cls.weight") {
            let b = self.weight_opt("cls.bias");
            x = self.linear(w, b, x)?;
            x = if self.hp.cls_gelu {
                self.g.gelu(x)?
            } else {
                self.tanh(x)?
            };
            if let Some(norm) = self.weight_opt("cls.norm.weight") {
                x = self.g.norm(x, self.hp.norm_eps)?;
                x = self.g.mul(x, norm)?;
            }
        }
        if let Some(w) = self.weight_opt("cls.output.weight") {
            let b = self.weight_opt("cls.output.bias");
            x = self.linear(w, b, x)?;
        }
        if self.hp.rank_softmax {
            x = self.g.soft_max_rows(x)?;
        }
        Ok(x)
    }

    /// The final hidden states the embeddings are pooled from, where they are not the output
    /// head's input (an encoder's; MiniCPM3's, scaled before its head).
    pub fn set_hidden(&mut self, x: TensorRef) {
        self.hidden = Some(x);
    }

    /// In the last layer, keep only the requested rows of a layer's output `a` and its residual
    /// `r`; other layers keep every row.
    pub fn last_layer_rows(&mut self, il: usize, a: TensorRef, r: TensorRef) -> Result<(TensorRef, TensorRef)> {
        if il + 1 < self.hp.n_layer as usize {
            return Ok((a, r));
        }
        Ok((self.select_outputs(a)?, self.select_outputs(r)?))
    }

    /// The first `n_outputs` rows of `logits` (and of the hidden states), computed for every
    /// token: what llama.cpp hands back from a graph that never picks the requested rows
    /// (CogVLM's), whichever tokens asked for them. The output-row input goes unused.
    pub fn first_rows_as_outputs(&mut self, logits: TensorRef) -> Result<TensorRef> {
        self.inputs.out_ids = None;
        let n = self.shape.n_outputs as i64;
        let first = |g: &mut Graph, t: TensorRef| -> Result<TensorRef> {
            let v = g.view(t, &[t.ne()[0], n], &[t.nb()[1]], 0)?;
            g.cont(v).map_err(Error::from)
        };
        if let Some(h) = self.hidden {
            self.hidden = Some(first(&mut self.g, h)?);
        }
        first(&mut self.g, logits)
    }

    /// Keep only the rows of the requested outputs (applied once, in the last layer).
    pub fn select_outputs(&mut self, x: TensorRef) -> Result<TensorRef> {
        match self.inputs.out_ids {
            Some(ids) => self.g.get_rows(x, ids).map_err(Error::from),
            None => Ok(x),
        }
    }

    /// Final norm and the output head ([n_vocab, n_outputs] logits). Models without a separate
    /// head reuse the token embeddings.
    pub fn output_head(&mut self, x: TensorRef) -> Result<TensorRef> {
        self.output_head_after("output_norm.weight", x)
    }

    /// The output head with its norm's weight named `norm` (some models name it `token_embd_norm`).
    pub fn output_head_after(&mut self, norm: &str, x: TensorRef) -> Result<TensorRef> {
        self.output_head_with(norm, x, false)
    }

    /// The output head of an architecture whose layers keep every row: the output rows are
    /// selected after the final norm.
    pub fn output_head_selecting(&mut self, x: TensorRef) -> Result<TensorRef> {
        self.output_head_with("output_norm.weight", x, true)
    }

    fn output_head_with(&mut self, norm: &str, x: TensorRef, select: bool) -> Result<TensorRef> {
        let norm_w = self.weight(norm)?;
        let x = self.g.rms_norm(x, self.hp.rms_eps)?;
        let x = self.name(x, "norm", None);
        let x = self.g.mul(x, norm_w)?;
        let x = if select { self.select_outputs(x)? } else { x };
        self.output_head_unnormed(x)
    }

    /// The output projection of hidden states `x` the architecture normalised itself.
    pub fn output_head_unnormed(&mut self, x: TensorRef) -> Result<TensorRef> {
        let bias = self.weight_opt("output.bias");
        self.output_projection(x, bias)
    }

    /// The output head of an architecture that loads the head's bias but leaves it out (Dream).
    pub fn output_head_without_bias(&mut self, x: TensorRef) -> Result<TensorRef> {
        let norm_w = self.weight("output_norm.weight")?;
        let x = self.rms_norm(x, norm_w)?;
        self.output_projection(x, None)
    }

    /// The output head over the already normalised `x` (which becomes `result_norm`, the hidden
    /// state embeddings read).
    pub fn output_projection(&mut self, x: TensorRef, bias: Option<TensorRef>) -> Result<TensorRef> {
        let x = self.name(x, "result_norm", None);
        self.hidden = Some(x);
        let head = match self.weight_opt("output.weight") {
            Some(w) => w,
            None => self.weight("token_embd.weight")?,
        };
        self.linear(head, bias, x)
    }
}
