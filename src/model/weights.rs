//! Weight tensors placed in CPU backend buffers that view the model's file bytes (no copy), or a
//! copy of the data section when the file's alignment does not satisfy ggml.

use crate::error::{Error, Result};
use crate::ggml::{Arena, HostBuffer, TensorRef, CPU_BUFFER_ALIGNMENT};
use crate::gguf::TensorInfo;
use memmap2::MmapMut;
use std::collections::HashMap;

/// One file's tensors and where its data section lies in its bytes.
pub struct FileTensors<'a> {
    pub bytes: &'a [u8],
    pub data_offset: u64,
    pub data_size: u64,
    pub tensors: Vec<&'a TensorInfo>,
}

pub struct Weights {
    // Held for their lifetime only. Declared first: buffers are released before the arena and copies.
    _buffers: Vec<HostBuffer>,
    _arena: Arena,
    /// Data sections that had to be copied to satisfy ggml's alignment.
    _copies: Vec<MmapMut>,
    by_name: HashMap<String, TensorRef>,
}

impl Weights {
    /// Create a ggml tensor for every tensor of every file and point it at its data.
    /// `progress` gets the fraction of bytes placed; returning false cancels.
    pub fn place(files: &[FileTensors], progress: &mut dyn FnMut(f32) -> bool) -> Result<Weights> {
        let n_tensors: usize = files.iter().map(|f| f.tensors.len()).sum();
        let total: u64 = files.iter().map(|f| f.data_size).sum::<u64>().max(1);
        let mut arena = Arena::new(n_tensors).map_err(Error::Ggml)?;
        let mut buffers = Vec::new();
        let mut copies = Vec::new();
        let mut by_name = HashMap::with_capacity(n_tensors);
        let mut done = 0u64;
        for f in files {
            if f.tensors.is_empty() {
                continue;
            }
            let start = usize::try_from(f.data_offset).map_err(|_| Error::model("data offset too large"))?;
            let len = usize::try_from(f.data_size).map_err(|_| Error::model("data section too large"))?;
            let data = f
                .bytes
                .get(start..start.saturating_add(len))
                .ok_or_else(|| Error::model("tensor data section lies outside the file"))?;
            let buffer = if (data.as_ptr() as usize).is_multiple_of(CPU_BUFFER_ALIGNMENT) {
                HostBuffer::over(data).map_err(Error::Ggml)?
            } else {
                crate::log_warn!(
                    "model: tensor data is not {CPU_BUFFER_ALIGNMENT}-byte aligned in memory; copying it ({len} bytes)"
                );
                let mut copy = memmap2::MmapOptions::new()
                    .len(len.max(1))
                    .map_anon()
                    .map_err(|e| Error::io("cannot allocate memory for", "tensor data", e))?;
                copy[..len].copy_from_slice(data);
                let b = HostBuffer::over(&copy[..len]).map_err(Error::Ggml)?;
                copies.push(copy);
                b
            };
            for info in &f.tensors {
                let ne: Vec<i64> = info.ne[..info.n_dims as usize]
                    .iter()
                    .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
                    .collect();
                let t = arena
                    .new_tensor(info.ggml_type, &ne, &info.name)
                    .map_err(|e| Error::model(format!("tensor '{}': {e}", info.name)))?;
                if t.nbytes() as u64 != info.size {
                    return Err(Error::model(format!(
                        "tensor '{}': ggml computes {} bytes but the file describes {}",
                        info.name,
                        t.nbytes(),
                        info.size
                    )));
                }
                let offset = usize::try_from(info.offset).map_err(|_| Error::model("tensor offset too large"))?;
                buffer
                    .place(t, offset)
                    .map_err(|e| Error::model(format!("tensor '{}': {e}", info.name)))?;
                by_name.insert(info.name.clone(), t);
                done += info.size;
                if !progress(done as f32 / total as f32) {
                    return Err(Error::Cancelled(
                        "model loading cancelled by the progress callback".into(),
                    ));
                }
            }
            buffers.push(buffer);
        }
        Ok(Weights {
            _buffers: buffers,
            _arena: arena,
            _copies: copies,
            by_name,
        })
    }

    pub fn get(&self, name: &str) -> Option<TensorRef> {
        self.by_name.get(name).copied()
    }
}
