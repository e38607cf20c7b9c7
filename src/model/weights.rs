//! Weight tensors placed in CPU backend buffers that view the model's file bytes (no copy), or a
//! copy of the data section when the file's alignment does not satisfy ggml. Matrix weights the
//! CPU backend multiplies faster in a repacked layout are copied into such a buffer instead, and
//! the weights of layers on another device (an RPC server, a GPU) into that device's memory.

use crate::error::{Error, Result};
use crate::ggml::{
    cpu_extra_buffer_types, tensor_set, Arena, BufferType, BufferTypeId, HostBuffer, OwnedBuffer, TensorRef,
    CPU_BUFFER_ALIGNMENT,
};
use crate::gguf::TensorInfo;
use memmap2::MmapMut;
use std::collections::{HashMap, HashSet};

/// One file's tensors and where its data section lies in its bytes.
pub struct FileTensors<'a> {
    pub bytes: &'a [u8],
    pub data_offset: u64,
    pub data_size: u64,
    pub tensors: Vec<&'a TensorInfo>,
}

pub struct Weights {
    // Declared first: buffers are released before the arenas and copies.
    copied: Vec<(OwnedBuffer, Arena)>,
    buffers: Vec<HostBuffer>,
    _arena: Arena,
    /// Data sections that had to be copied to satisfy ggml's alignment.
    _copies: Vec<MmapMut>,
    by_name: HashMap<String, TensorRef>,
}

impl Weights {
    /// Create a ggml tensor for every tensor of every file and point it at its data; the tensors
    /// named in `repackable` go to the CPU backend's extra buffer types where one supports them.
    /// `tied` names a tensor and the name of a matrix it also serves as (the token embeddings as
    /// output head): where an extra buffer type takes it, a repacked copy is made under that name,
    /// as llama.cpp duplicates the tensor. `device_of` names the buffer type of a device that
    /// holds a tensor (by the name it goes by), if not the CPU. `progress` gets the fraction of
    /// bytes placed; returning false cancels.
    pub fn place(
        files: &[FileTensors],
        repackable: &HashSet<&str>,
        tied: Option<(&str, &str)>,
        device_of: &dyn Fn(&str) -> Result<Option<BufferType>>,
        progress: &mut dyn FnMut(f32) -> bool,
    ) -> Result<Weights> {
        let n_tensors: usize = files.iter().map(|f| f.tensors.len()).sum();
        let total: u64 = files.iter().map(|f| f.data_size).sum::<u64>().max(1);
        let mut arena = Arena::new(n_tensors)?;
        let mut buffers = Vec::new();
        let mut copies = Vec::new();
        let mut by_name = HashMap::with_capacity(n_tensors);
        let mut to_copy = Vec::new();
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
                HostBuffer::over(data)?
            } else {
                crate::log_warn!(
                    "model: tensor data is not {CPU_BUFFER_ALIGNMENT}-byte aligned in memory; copying it ({len} bytes)"
                );
                let mut copy = memmap2::MmapOptions::new()
                    .len(len.max(1))
                    .map_anon()
                    .map_err(|e| Error::io("cannot allocate memory for", "tensor data", e))?;
                copy[..len].copy_from_slice(data);
                let b = HostBuffer::over(&copy[..len])?;
                copies.push(copy);
                b
            };
            for info in &f.tensors {
                let t = new_tensor(&mut arena, info)?;
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
                let alias = tied.filter(|(from, _)| *from == info.name).map(|(_, to)| to);
                let name = alias.unwrap_or(info.name.as_str());
                let device = device_of(name)?;
                if repackable.contains(info.name.as_str()) || alias.is_some() || device.is_some() {
                    let bytes = data
                        .get(offset..offset + t.nbytes())
                        .ok_or_else(|| Error::Internal(format!("tensor '{}' placed outside its data", info.name)))?;
                    to_copy.push(Candidate {
                        name,
                        info,
                        bytes,
                        view: t,
                        device,
                    });
                }
                done += info.size;
                if !progress(done as f32 / total as f32) {
                    return Err(Error::Cancelled(
                        "model loading cancelled by the progress callback".into(),
                    ));
                }
            }
            buffers.push(buffer);
        }
        let copied = copy_out(&to_copy, &mut by_name)?;
        Ok(Weights {
            copied,
            buffers,
            _arena: arena,
            _copies: copies,
            by_name,
        })
    }

    pub fn get(&self, name: &str) -> Option<TensorRef> {
        self.by_name.get(name).copied()
    }

    /// The names of all weights (in no particular order).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Bytes held per buffer type: the views of the file and the copies.
    pub fn memory_breakdown(&self) -> Vec<(BufferTypeId, usize)> {
        let views = self.buffers.iter().map(|b| (b.buffer_type(), b.size()));
        let copies = self.copied.iter().map(|(b, _)| (b.buffer_type(), b.size()));
        views.chain(copies).collect()
    }
}

fn new_tensor(arena: &mut Arena, info: &TensorInfo) -> Result<TensorRef> {
    let ne: Vec<i64> = info.ne[..info.n_dims as usize]
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect();
    arena
        .new_tensor(info.ggml_type, &ne, &info.name)
        .map_err(|e| Error::model(format!("tensor '{}': {e}", info.name)))
}

/// A weight that goes to a buffer of its own: the name the copy goes by, its description, its
/// bytes in the file, its view of them, and the device that holds it (else the CPU, repacked).
#[derive(Clone, Copy)]
struct Candidate<'a> {
    name: &'a str,
    info: &'a TensorInfo,
    bytes: &'a [u8],
    view: TensorRef,
    device: Option<BufferType>,
}

/// Copy each candidate into its device's memory, or else into the first CPU extra buffer type
/// that can multiply it (converting it to that type's layout), and point `by_name` at the copy.
/// Candidates of the CPU no buffer type takes stay views of the file.
fn copy_out(candidates: &[Candidate], by_name: &mut HashMap<String, TensorRef>) -> Result<Vec<(OwnedBuffer, Arena)>> {
    let bufts = cpu_extra_buffer_types();
    let mut groups: Vec<(BufferType, bool, Vec<Candidate>)> = Vec::new();
    for &c in candidates {
        let target = match c.device {
            Some(d) => (d, true),
            None => match bufts.iter().copied().find(|b| b.supports_matmul(c.view)) {
                Some(b) => (b.buffer_type(), false),
                None => continue,
            },
        };
        match groups.iter_mut().find(|(b, _, _)| *b == target.0) {
            Some((_, _, g)) => g.push(c),
            None => groups.push((target.0, target.1, vec![c])),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (buft, on_device, group) in groups {
        let mut arena = Arena::new(group.len())?;
        let tensors = group
            .iter()
            .map(|c| new_tensor(&mut arena, c.info))
            .collect::<Result<Vec<_>>>()?;
        let buffer = OwnedBuffer::for_weights_in(&arena, buft)
            .map_err(|e| Error::model(format!("weights for {}: {e}", buft.name())))?;
        for (t, c) in tensors.iter().zip(&group) {
            tensor_set(*t, c.bytes).map_err(|e| Error::model(format!("tensor '{}': {e}", c.info.name)))?;
            by_name.insert(c.name.to_string(), *t);
        }
        crate::log_info!(
            "model: {} weight tensors ({:.2} MiB) {} {}",
            group.len(),
            buffer.size() as f64 / (1024.0 * 1024.0),
            if on_device { "copied to" } else { "repacked for" },
            buft.name()
        );
        out.push((buffer, arena));
    }
    Ok(out)
}
