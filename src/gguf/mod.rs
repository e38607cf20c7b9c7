//! A bounds-checked GGUF reader: header, metadata, tensor infos and the layout of the data section.
//!
//! `GgufFile::parse` validates everything but the tensor bytes themselves, so later layers can index
//! the file with the offsets and sizes it returns without further checks. It never panics and never
//! reserves memory from a count the file has not shown it can back with bytes.

#[cfg(any(test, feature = "fuzzing"))]
pub mod mutate;
mod reader;
mod sink;
mod tensor;
mod value;
mod writer;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashMap;

use crate::error::{Error, Result};
use reader::Reader;

pub use sink::Sink;
pub use tensor::{type_traits, TensorInfo, TypeTraits};
pub use value::{Array, Value};
pub use writer::{padded, MetaWriter, TensorEntry};

/// "GGUF" read as a little-endian u32.
const MAGIC: u32 = u32::from_le_bytes(*b"GGUF");
/// Magics of the formats llama.cpp used before GGUF, as the little-endian u32 at offset 0.
const LEGACY_MAGICS: [(u32, &str); 3] = [(0x6767_6d6c, "GGML"), (0x6767_6d66, "GGMF"), (0x6767_6a74, "GGJT")];
const ALIGNMENT_KEY: &str = "general.alignment";
/// The alignment of tensor data when `general.alignment` does not say.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Smallest encodings, to bound counts before reserving memory for them.
/// A metadata pair: key length, one key byte, value type, a one-byte value.
const MIN_KV_SIZE: u64 = 8 + 1 + 4 + 1;
/// A tensor info: name length, one name byte, dimension count, one dimension, type, offset.
const MIN_TENSOR_INFO_SIZE: u64 = 8 + 1 + 4 + 8 + 4 + 8;

#[derive(Debug, Default)]
pub struct GgufFile {
    version: u32,
    alignment: u64,
    data_offset: u64,
    data_size: u64,
    metadata: Vec<(String, Value)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl GgufFile {
    /// Parse and validate everything except tensor data. `bytes` is the whole file (usually a memory map).
    pub fn parse(bytes: &[u8]) -> Result<GgufFile> {
        GgufFile::parse_with(bytes, true)
    }

    /// The same for metadata without the data section (ggml's `gguf_get_meta_data`): tensor
    /// infos are read, their data is not looked for (`data_size` is 0).
    pub fn parse_metadata(bytes: &[u8]) -> Result<GgufFile> {
        GgufFile::parse_with(bytes, false)
    }

    fn parse_with(bytes: &[u8], with_data: bool) -> Result<GgufFile> {
        let mut r = Reader::new(bytes);
        let version = read_magic_and_version(&mut r)?;

        let n_tensors = read_count(&mut r, "tensor count")?;
        let n_kv = read_count(&mut r, "metadata count")?;

        let n_kv = r.check_count(n_kv, MIN_KV_SIZE, "the metadata count")?;
        let mut metadata = Vec::with_capacity(n_kv);
        let mut metadata_index = HashMap::with_capacity(n_kv);
        let mut alignment = DEFAULT_ALIGNMENT;
        for i in 0..n_kv {
            let key_at = r.pos();
            let key = read_key(&mut r, i)?;
            let value_at = r.pos();
            let value = value::read_value(&mut r, &key)?;
            if key == ALIGNMENT_KEY {
                alignment = check_alignment(&value, value_at)?;
            }
            if let Some(first) = metadata_index.insert(key.clone(), i) {
                return Err(Error::gguf(
                    key_at,
                    format!("duplicate metadata key '{key}' (pairs {first} and {i})"),
                ));
            }
            metadata.push((key, value));
        }

        let n_tensors = r.check_count(n_tensors, MIN_TENSOR_INFO_SIZE, "the tensor count")?;
        let mut tensors = Vec::with_capacity(n_tensors);
        let mut offset_fields = Vec::with_capacity(n_tensors);
        let mut tensor_index = HashMap::with_capacity(n_tensors);
        for i in 0..n_tensors {
            let name_at = r.pos();
            let (info, offset_at) = tensor::read_tensor_info(&mut r, i as u64)?;
            if info.offset % alignment != 0 {
                return Err(Error::gguf(
                    offset_at,
                    format!(
                        "tensor '{}' data offset {} is not a multiple of the alignment {alignment}",
                        info.name, info.offset
                    ),
                ));
            }
            if let Some(first) = tensor_index.insert(info.name.clone(), i) {
                return Err(Error::gguf(
                    name_at,
                    format!("duplicate tensor name '{}' (tensors {first} and {i})", info.name),
                ));
            }
            tensors.push(info);
            offset_fields.push(offset_at);
        }

        let header_end = r.pos();
        let data_offset = header_end
            .checked_next_multiple_of(alignment)
            .ok_or_else(|| Error::gguf(header_end, "data section offset overflows 64 bits"))?;
        let data_size = if with_data {
            check_layout(&tensors, &offset_fields, data_offset, bytes.len() as u64)?
        } else {
            0
        };

        Ok(GgufFile {
            version,
            alignment,
            data_offset,
            data_size,
            metadata,
            metadata_index,
            tensors,
            tensor_index,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// `general.alignment`, or the default 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute file offset of the tensor data section: the end of the tensor infos, aligned.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Bytes from `data_offset` to the end of the tensor whose data ends last (0 without tensors).
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// Metadata pairs in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        let i = *self.metadata_index.get(key)?;
        self.metadata.get(i).map(|(_, v)| v)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(*self.tensor_index.get(name)?)
    }
}

fn read_magic_and_version(r: &mut Reader) -> Result<u32> {
    let len = r.left();
    let magic = r
        .u32()
        .map_err(|_| Error::gguf(0, format!("not a GGUF file: it is only {len} bytes long")))?;
    if magic != MAGIC {
        let msg = match LEGACY_MAGICS.iter().find(|(m, _)| *m == magic) {
            Some((_, name)) => {
                format!("this is a legacy {name} file, the llama.cpp format before GGUF; convert it to GGUF")
            }
            None => format!(
                "not a GGUF file (magic bytes {:02x?}, expected \"GGUF\")",
                magic.to_le_bytes()
            ),
        };
        return Err(Error::gguf(0, msg));
    }

    let version_at = r.pos();
    let version = r.u32().map_err(|e| e.reading("the version"))?;
    let msg = match version {
        2 | 3 => return Ok(version),
        1 => "GGUF version 1 is a legacy format that is no longer supported; convert the file again".to_string(),
        // A big-endian writer stores the version's bytes reversed.
        v if matches!(v.swap_bytes(), 2 | 3) => format!(
            "big-endian GGUF is not supported (version reads as {v:#010x}, byte-swapped {})",
            v.swap_bytes()
        ),
        v => format!("unsupported GGUF version {v}; versions 2 and 3 are supported"),
    };
    Err(Error::gguf(version_at, msg))
}

/// Reads a header count, which ggml declares as int64_t.
fn read_count(r: &mut Reader, what: &str) -> Result<u64> {
    let at = r.pos();
    let count = r.u64().map_err(|e| e.reading(format_args!("the {what}")))?;
    if i64::try_from(count).is_err() {
        return Err(Error::gguf(
            at,
            format!("the {what} is {count}, more than i64::MAX (negative as an i64)"),
        ));
    }
    Ok(count)
}

fn read_key(r: &mut Reader, index: usize) -> Result<String> {
    let at = r.pos();
    let raw = r
        .string()
        .map_err(|e| e.reading(format_args!("metadata key {index}")))?;
    let bad = |what: String| Err(Error::gguf(at, format!("metadata key {index} {what}")));
    if raw.is_empty() {
        return bad("is empty".into());
    }
    let Ok(key) = std::str::from_utf8(raw) else {
        return bad(format!("is not valid UTF-8 ('{}')", String::from_utf8_lossy(raw)));
    };
    // Keys travel through the C API as NUL-terminated strings.
    if key.contains('\0') {
        return bad(format!("contains a NUL byte ('{key}')"));
    }
    Ok(key.to_owned())
}

fn check_alignment(value: &Value, at: u64) -> Result<u64> {
    let Some(alignment) = value.as_u32() else {
        return Err(Error::gguf(
            at,
            format!("key '{ALIGNMENT_KEY}' must be of type u32 but is {}", value.type_name()),
        ));
    };
    if !alignment.is_power_of_two() {
        return Err(Error::gguf(
            at,
            format!("key '{ALIGNMENT_KEY}' is {alignment}, which is not a power of two"),
        ));
    }
    Ok(u64::from(alignment))
}

/// Checks that every tensor's data lies inside the file and that no two overlap; returns the
/// data section size (end of the last tensor data relative to `data_offset`).
fn check_layout(tensors: &[TensorInfo], offset_fields: &[u64], data_offset: u64, file_len: u64) -> Result<u64> {
    let mut spans = Vec::with_capacity(tensors.len());
    for (t, &at) in tensors.iter().zip(offset_fields) {
        let end = t.offset.checked_add(t.size);
        let in_file = end
            .and_then(|end| end.checked_add(data_offset))
            .is_some_and(|abs_end| abs_end <= file_len);
        match end {
            Some(end) if in_file => spans.push((t.offset, end, t, at)),
            _ => {
                return Err(Error::gguf(
                    at,
                    format!(
                        "tensor '{}' data ({} bytes at offset {} after the data section start {data_offset}) \
                         extends past the end of the file ({file_len} bytes)",
                        t.name, t.size, t.offset
                    ),
                ))
            }
        }
    }

    // Sorted by start, a tensor overlaps an earlier one exactly when it starts before the
    // furthest end seen so far. Empty tensors occupy no bytes and overlap nothing.
    spans.sort_unstable_by_key(|&(start, end, _, _)| (start, end));
    let mut furthest: Option<(u64, &TensorInfo)> = None;
    for &(start, end, t, at) in spans.iter().filter(|(start, end, _, _)| end > start) {
        if let Some((prev_end, prev)) = furthest {
            if start < prev_end {
                return Err(Error::gguf(
                    at,
                    format!(
                        "tensor '{}' data (bytes {start}..{end} of the data section) overlaps tensor '{}' (which ends at {prev_end})",
                        t.name, prev.name
                    ),
                ));
            }
        }
        if furthest.is_none_or(|(prev_end, _)| end > prev_end) {
            furthest = Some((end, t));
        }
    }
    Ok(furthest.map_or(0, |(end, _)| end))
}

impl GgufFile {
    /// Replace the value of `key`, or add it; used for caller-supplied metadata overrides.
    pub fn set(&mut self, key: &str, value: Value) {
        match self.metadata_index.get(key).and_then(|&i| self.metadata.get_mut(i)) {
            Some(kv) => kv.1 = value,
            None => {
                self.metadata_index.insert(key.to_string(), self.metadata.len());
                self.metadata.push((key.to_string(), value));
            }
        }
    }
}
