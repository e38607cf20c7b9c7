//! A model made from a caller's metadata and tensor data (`llama_model_init_from_user`), as
//! llama.cpp makes one without a file: the tensors are those its loader creates for the
//! architecture (`ArchSpec::created_tensors`, then the weights' optional scales), F32 unless the
//! metadata lists a tensor of that name with another type, handed to the caller to fill in
//! llama.cpp's order. They are laid out as a GGUF file in memory, which then loads like a file.

use super::hparams::HParams;
use super::spec::{with_weight_scales, ArchSpec};
use crate::error::{Error, Result};
use crate::ggml::user_fill::{hand_out, Slot as Handed};
use crate::gguf::{padded, GgufFile, MetaWriter, TensorEntry};
use memmap2::{MmapMut, MmapOptions};
use std::collections::HashMap;

const F32: u32 = 0;

/// The layer weights llama.cpp's generic pass gives an optional `.scale` and `.input_scale`, in
/// groups: the attention's and the dense FFN's first, the state-space and next-token ones last;
/// between them the shared experts' then the routed ones' for scales, the other way round for
/// input scales.
const ATTN_AND_FFN: [&str; 9] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "attn_qkv",
    "attn_gate",
    "ffn_gate",
    "ffn_down",
    "ffn_up",
];
const SHARED: [&str; 3] = ["ffn_gate_shexp", "ffn_down_shexp", "ffn_up_shexp"];
const ROUTED: [&str; 3] = ["ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"];
const LAST: [&str; 6] = [
    "ssm_in",
    "ssm_out",
    "ssm_alpha",
    "ssm_beta",
    "nextn.eh_proj",
    "nextn.shared_head_head",
];

/// One tensor the caller fills: its name, type, shape, and where its bytes go in the image (from
/// the data section's start).
struct Slot {
    name: String,
    ggml_type: u32,
    ne: [u64; 4],
    offset: usize,
    size: usize,
    /// For a copy, the offset of the first.
    copy_of: Option<usize>,
}

/// The model's GGUF image, its tensors' data still to be filled.
pub struct Image {
    pub bytes: MmapMut,
    /// Where the data section starts in `bytes`.
    data_offset: usize,
    /// In llama.cpp's order of creation; a tensor it makes again per layer has a slot per copy,
    /// the later ones past the data section.
    slots: Vec<Slot>,
}

impl Image {
    /// The image for `g`'s metadata and the tensors llama.cpp creates for `arch` with `hp`.
    pub fn plan(g: &GgufFile, arch: &dyn ArchSpec, hp: &HParams) -> Result<Image> {
        if g.alignment() != crate::gguf::DEFAULT_ALIGNMENT {
            return Err(Error::NotImplemented(
                "a model made by llama_model_init_from_user with a general.alignment other than 32",
            ));
        }
        let names = arch.created_tensors(hp);
        let names = with_scales(names, hp, arch);
        let specs = with_weight_scales(arch.tensors(hp));
        let shapes: HashMap<&str, &[u64]> = specs.iter().map(|s| (s.name.as_str(), s.shape.as_slice())).collect();

        let mut meta = pairs_of(g);
        let mut entries: Vec<(String, u32, [u64; 4])> = Vec::new();
        for name in names {
            let shape = shapes.get(name.as_str()).ok_or_else(|| {
                Error::Internal(format!("{}: created tensor '{name}' has no spec", arch.facts().name))
            })?;
            // llama.cpp leaves out an optional tensor whose shape has an empty dimension.
            if shape.contains(&0) {
                continue;
            }
            let mut ne = [1u64; 4];
            ne[..shape.len()].copy_from_slice(shape);
            let ggml_type = g.tensor(&name).map_or(F32, |t| t.ggml_type);
            entries.push((name, ggml_type, ne));
        }

        // The data section holds each tensor once, in order of first creation; the copies
        // llama.cpp makes per layer get room after it, to be compared with the first.
        let mut firsts: HashMap<&str, usize> = HashMap::new();
        let mut data_len = 0usize;
        let mut copies = Vec::new();
        let mut slots = Vec::with_capacity(entries.len());
        for (name, ggml_type, ne) in &entries {
            let entry = TensorEntry {
                name: name.clone(),
                ne: *ne,
                ggml_type: *ggml_type,
            };
            let size = entry.n_bytes().ok_or_else(|| {
                Error::invalid(format!(
                    "tensor '{name}' cannot have type {ggml_type} with shape {ne:?} (its rows are not whole blocks)"
                ))
            })?;
            let (size, room) = (to_usize(size)?, to_usize(padded(size))?);
            let copy_of = firsts.get(name.as_str()).copied();
            let offset = match copy_of {
                Some(_) => {
                    copies.push(slots.len());
                    0
                }
                None => {
                    meta.add_tensor(entry)?;
                    firsts.insert(name, data_len);
                    let offset = data_len;
                    data_len = grow(data_len, room)?;
                    offset
                }
            };
            slots.push(Slot {
                name: name.clone(),
                ggml_type: *ggml_type,
                ne: *ne,
                offset,
                size,
                copy_of,
            });
        }
        let mut end = data_len;
        for &i in &copies {
            slots[i].offset = end;
            end = grow(end, to_usize(padded(slots[i].size as u64))?)?;
        }
        Image::with(&meta, end, slots)
    }

    /// The image of `g`'s pairs alone (a vocabulary-only model: llama.cpp creates no tensor).
    pub fn empty(g: &GgufFile) -> Result<Image> {
        Image::with(&pairs_of(g), 0, Vec::new())
    }

    /// `meta`'s header and pairs followed by `data_len` bytes of zeros.
    fn with(meta: &MetaWriter, data_len: usize, slots: Vec<Slot>) -> Result<Image> {
        let header = meta.encode()?;
        let data_offset = header.len();
        let total = grow(data_len, data_offset)?;
        // Anonymous memory is page aligned, so the data section is aligned as ggml wants.
        let mut bytes = MmapOptions::new()
            .len(total)
            .map_anon()
            .map_err(|e| Error::io("cannot allocate memory for", "the model", e))?;
        bytes[..data_offset].copy_from_slice(&header);
        Ok(Image {
            bytes,
            data_offset,
            slots,
        })
    }

    /// Hands every tensor to `fill` in llama.cpp's order; a tensor llama.cpp copies per layer
    /// must get the same data each time, as the engine keeps one.
    pub fn fill(&mut self, fill: &mut dyn FnMut(crate::ggml::TensorRef)) -> Result<()> {
        let slots: Vec<Handed> = self
            .slots
            .iter()
            .map(|s| Handed {
                name: &s.name,
                ggml_type: s.ggml_type,
                ne: s.ne,
                offset: s.offset,
            })
            .collect();
        hand_out(&mut self.bytes[self.data_offset..], &slots, fill)?;
        let data = &self.bytes[self.data_offset..];
        for s in &self.slots {
            if let Some(first) = s.copy_of {
                if data[first..first + s.size] != data[s.offset..s.offset + s.size] {
                    return Err(Error::invalid(format!(
                        "the set_tensor_data callback gave the copies of '{}' different data: \
                         llama.cpp makes one per layer, the engine keeps one for all",
                        s.name
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A writer holding `g`'s pairs, in order.
fn pairs_of(g: &GgufFile) -> MetaWriter {
    let mut meta = MetaWriter::default();
    for (key, value) in g.metadata() {
        meta.set(key, value.clone());
    }
    meta
}

/// `names` followed, layer by layer, by the scales llama.cpp's generic pass adds for the layer
/// weights among them (those of the block the layer runs), but `arch`'s unscaled ones (their
/// shapes, one value or one per expert of a stack, come from the specs).
fn with_scales(mut names: Vec<String>, hp: &HParams, arch: &dyn ArchSpec) -> Vec<String> {
    let created: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    let unscaled = arch.facts().unscaled_weights;
    let mut scales = Vec::new();
    for il in 0..hp.n_layer as usize {
        let block = arch.weights_of_layer(hp, il);
        let scaled = ATTN_AND_FFN.iter().chain(&SHARED).chain(&ROUTED).chain(&LAST);
        let input_scaled = ATTN_AND_FFN.iter().chain(&ROUTED).chain(&SHARED).chain(&LAST);
        for (list, suffix) in [(scaled, "scale"), (input_scaled, "input_scale")] {
            for base in list.filter(|base| !unscaled.contains(base)) {
                if created.contains(format!("blk.{block}.{base}.weight").as_str()) {
                    scales.push(format!("blk.{il}.{base}.{suffix}"));
                }
            }
        }
    }
    names.append(&mut scales);
    names
}

fn grow(n: usize, by: usize) -> Result<usize> {
    n.checked_add(by).ok_or_else(|| Error::invalid("model too large"))
}

fn to_usize(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::invalid("model too large for this platform"))
}
