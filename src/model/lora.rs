//! LoRA adapters in llama.cpp's GGUF layout: `general.type = adapter`, `adapter.type = lora`, the
//! `adapter.lora.alpha` and a `<weight>.lora_a` / `<weight>.lora_b` pair for each adapted weight
//! of the base model. The pairs are copied into memory of the base weight's device; the graph adds
//! `scale * B (A x)` to the weight's product (`graph::Builder`), so the weights are never rewritten.

use super::metadata::meta_strings;
use super::storage::Storage;
use super::{FileSource, LoadMode, MetaPair, Model};
use crate::error::{Error, Result};
use crate::ggml::{
    can_multiply, cpu_extra_buffer_types, tensor_set, type_name, BufferType, Placed, PlacedBuffers, TensorRef,
};
use crate::gguf::{Array, GgufFile, TensorInfo, Value};
use std::collections::HashMap;

/// The two matrices of one adapted weight `W` ([n_in, n_out]): `a` [n_in, rank] and `b`
/// [rank, n_out]; for the token embeddings (whose rows are looked up, not multiplied) `a` is
/// [rank, n_vocab] and `b` [rank, n_embd].
#[derive(Debug, Clone, Copy)]
pub struct LoraWeight {
    pub a: TensorRef,
    pub b: TensorRef,
}

impl LoraWeight {
    /// The factor `B (A x)` is multiplied by at the adapter's scale `scale`: `scale * alpha /
    /// rank` when the adapter has an alpha, else `scale` (llama.cpp's formula, in f32).
    pub fn scale(&self, alpha: f32, scale: f32) -> f32 {
        let rank = self.b.ne()[0] as f32;
        if alpha != 0.0 {
            scale * alpha / rank
        } else {
            scale
        }
    }
}

pub struct LoraAdapter {
    pub alpha: f32,
    /// Per adapted weight (by the base weight's name) its pair.
    weights: HashMap<String, LoraWeight>,
    meta: Vec<MetaPair>,
    /// aLoRA: the tokens that switch the adapter on (llama.cpp leaves their use to the client).
    alora_tokens: Vec<i32>,
    _buffers: PlacedBuffers,
}

impl LoraAdapter {
    /// Read an adapter from the bytes of its GGUF file and copy its tensors to the devices of the
    /// weights they adapt. Refused with a message when it is not a LoRA adapter, was made for
    /// another architecture, or names a weight the model lacks or one of another shape.
    pub fn load(model: &Model, source: &FileSource) -> Result<LoraAdapter> {
        let storage = Storage::open(source, LoadMode::Map, &mut |_| true)?;
        let bytes = storage.bytes();
        let g = GgufFile::parse(bytes)?;
        let meta = meta_strings(&g);
        let text = |key: &str| -> &[u8] { g.get(key).and_then(Value::as_str).unwrap_or(b"") };
        let general_type = text("general.type");
        if general_type != b"adapter" {
            return Err(Error::adapter(format!(
                "expected general.type 'adapter', found '{}'",
                String::from_utf8_lossy(general_type)
            )));
        }
        let arch = model
            .arch
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
        let adapter_arch = text("general.architecture");
        if adapter_arch != arch.facts().name.as_bytes() {
            return Err(Error::adapter(format!(
                "made for the architecture '{}', the model is '{}'",
                String::from_utf8_lossy(adapter_arch),
                arch.facts().name
            )));
        }
        let adapter_type = text("adapter.type");
        if adapter_type != b"lora" {
            return Err(Error::adapter(format!(
                "expected adapter.type 'lora', found '{}'",
                String::from_utf8_lossy(adapter_type)
            )));
        }
        let alpha = match g.get("adapter.lora.alpha") {
            None => 0.0,
            Some(Value::F32(a)) => *a,
            Some(v) => {
                return Err(Error::adapter(format!(
                    "adapter.lora.alpha is {}, not f32",
                    v.type_name()
                )))
            }
        };
        let alora_tokens = match g.get("adapter.alora.invocation_tokens") {
            None => Vec::new(),
            Some(Value::Array(Array::U32(t))) => t.iter().map(|&t| t as i32).collect(),
            Some(_) => return Err(Error::adapter("adapter.alora.invocation_tokens is not an array of u32")),
        };
        let pairs = pair_up(g.tensors())?;
        let weights = model
            .weights()
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
        let extra: Vec<BufferType> = cpu_extra_buffer_types().into_iter().map(|e| e.buffer_type()).collect();
        let mut placed = Placed::new(2 * pairs.len());
        let mut made = Vec::with_capacity(pairs.len());
        for (name, (a, b)) in &pairs {
            let base = weights.get(name).filter(|w| w.name() == *name).ok_or_else(|| {
                Error::adapter(format!(
                    "'{name}' is not a weight of the model (made for another model?)"
                ))
            })?;
            check_shapes(name, base, a, b)?;
            for t in [a, b] {
                if !can_multiply(t.ggml_type) {
                    return Err(Error::adapter(format!(
                        "'{}' is of type {}, which ggml cannot multiply",
                        t.name,
                        type_name(t.ggml_type)
                    )));
                }
            }
            // Repacked layouts are for the CPU's own kernels: an adapter beside such a weight
            // stays in plain CPU memory, as in llama.cpp.
            let buft = base
                .buffer_type()
                .filter(|t| !extra.contains(t))
                .unwrap_or_else(BufferType::cpu);
            let mut new = |t: &TensorInfo| {
                let ne: Vec<i64> = t.ne[..t.n_dims as usize].iter().map(|&d| d as i64).collect();
                placed
                    .new_tensor(buft, t.ggml_type, &ne, &t.name)
                    .map_err(|e| Error::adapter(format!("tensor '{}': {e}", t.name)))
            };
            let w = LoraWeight { a: new(a)?, b: new(b)? };
            made.push((name.clone(), w, [*a, *b]));
        }
        let buffers = placed.allocate()?;
        let data = bytes
            .get(usize::try_from(g.data_offset()).unwrap_or(usize::MAX)..)
            .ok_or_else(|| Error::adapter("the tensor data lies outside the file"))?;
        let mut by_name = HashMap::with_capacity(made.len());
        for (name, w, infos) in made {
            for (t, info) in [w.a, w.b].into_iter().zip(infos) {
                let start = usize::try_from(info.offset).unwrap_or(usize::MAX);
                let src = start
                    .checked_add(t.nbytes())
                    .and_then(|end| data.get(start..end))
                    .ok_or_else(|| {
                        Error::adapter(format!(
                            "the data of '{}' lies outside the file (truncated?)",
                            info.name
                        ))
                    })?;
                tensor_set(t, src)?;
            }
            by_name.insert(name, w);
        }
        crate::log_info!(
            "lora: loaded {} tensors ({:.2} MiB), alpha {alpha}",
            2 * by_name.len(),
            buffers.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(LoraAdapter {
            alpha,
            weights: by_name,
            meta,
            alora_tokens,
            _buffers: buffers,
        })
    }

    /// The pair adapting the weight `name`, if the adapter has one.
    pub fn weight(&self, name: &str) -> Option<&LoraWeight> {
        self.weights.get(name)
    }

    /// How many weights the adapter adapts.
    pub fn n_weights(&self) -> usize {
        self.weights.len()
    }

    /// Non-array metadata as (key, value) text, NUL-terminated, in file order.
    pub fn meta(&self) -> &[MetaPair] {
        &self.meta
    }

    pub fn alora_tokens(&self) -> &[i32] {
        &self.alora_tokens
    }
}

/// The `lora_a` and `lora_b` tensors of each adapted weight, by the weight's name. Norm weights
/// are skipped (llama.cpp does not apply them either); anything else is refused.
fn pair_up(tensors: &[TensorInfo]) -> Result<Vec<(String, (&TensorInfo, &TensorInfo))>> {
    let mut halves: Vec<(String, [Option<&TensorInfo>; 2])> = Vec::new();
    for t in tensors {
        let (base, half) = if let Some(base) = t.name.strip_suffix(".lora_a") {
            (base, 0)
        } else if let Some(base) = t.name.strip_suffix(".lora_b") {
            (base, 1)
        } else if t.name.ends_with("_norm.weight") {
            continue;
        } else {
            return Err(Error::adapter(format!(
                "tensor '{}' is neither a .lora_a nor a .lora_b",
                t.name
            )));
        };
        match halves.iter_mut().find(|(n, _)| n == base) {
            Some((_, h)) => h[half] = Some(t),
            None => {
                let mut h = [None, None];
                h[half] = Some(t);
                halves.push((base.to_string(), h));
            }
        }
    }
    halves
        .into_iter()
        .map(|(name, h)| match h {
            [Some(a), Some(b)] => Ok((name, (a, b))),
            _ => Err(Error::adapter(format!("'{name}' has only one of lora_a and lora_b"))),
        })
        .collect()
}

/// The pair's shapes against the base weight's (token embeddings are looked up by row, so their
/// pair is laid out the other way round); a stack of experts' weights has a pair per expert.
fn check_shapes(name: &str, base: TensorRef, a: &TensorInfo, b: &TensorInfo) -> Result<()> {
    let w = base.ne();
    let (a0, a1, b0, b1) = (a.ne[0] as i64, a.ne[1] as i64, b.ne[0] as i64, b.ne[1] as i64);
    let stacked = a.ne[2] as i64 == w[2] && b.ne[2] as i64 == w[2] && a.ne[3] == 1 && b.ne[3] == 1 && w[3] == 1;
    let fits = if name.ends_with("token_embd.weight") {
        w[0] == b1 && w[1] == a1 && a0 == b0
    } else {
        w[0] == a0 && w[1] == b1 && a1 == b0
    };
    if fits && stacked {
        Ok(())
    } else {
        Err(Error::adapter(format!(
            "'{name}' is {:?} in the model but lora_a is {:?} and lora_b {:?} \
             (made for another model, or A and B transposed?)",
            &w[..3],
            &a.ne[..3],
            &b.ne[..3]
        )))
    }
}
