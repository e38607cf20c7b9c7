//! The metadata part of a GGUF file being written: header, key/value pairs, tensor infos, padded
//! to the data section. Laid out as ggml's `gguf_get_meta_data` lays it out (version 3, the
//! default alignment whatever the pairs say, a set key moved to the end), so a file written
//! with it has the bytes of one ggml would write.

use super::tensor::type_traits;
use super::value::{encode_str, Value};
use super::{DEFAULT_ALIGNMENT, MAGIC};
use crate::error::{Error, Result};

/// The GGUF version ggml writes.
const VERSION: u32 = 3;

/// A tensor's entry: name, dimensions (past the last non-1 one they are 1) and ggml type.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorEntry {
    pub name: String,
    pub ne: [u64; 4],
    pub ggml_type: u32,
}

impl TensorEntry {
    /// Bytes of data, or `None` when the type is unknown or rows are not whole blocks.
    pub fn n_bytes(&self) -> Option<u64> {
        let tt = type_traits(self.ggml_type)?;
        if !self.ne[0].is_multiple_of(tt.block_size) {
            return None;
        }
        let row = (self.ne[0] / tt.block_size).checked_mul(tt.type_size)?;
        self.ne[1..].iter().try_fold(row, |n, &d| n.checked_mul(d))
    }

    /// `ggml_n_dims`: dimensions up to the last one above 1 (at least one).
    fn n_dims(&self) -> usize {
        (1..4).rev().find(|&i| self.ne[i] > 1).map_or(1, |i| i + 1)
    }
}

#[derive(Debug, Default)]
pub struct MetaWriter {
    kv: Vec<(String, Value)>,
    tensors: Vec<TensorEntry>,
}

/// `n` rounded up to the data alignment.
pub fn padded(n: u64) -> u64 {
    n.div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT
}

impl MetaWriter {
    /// Sets `key` to `value`, at the end of the pairs (an earlier pair of that key goes).
    pub fn set(&mut self, key: &str, value: Value) {
        self.remove(key);
        self.kv.push((key.to_string(), value));
    }

    pub fn remove(&mut self, key: &str) {
        self.kv.retain(|(k, _)| k != key);
    }

    pub fn add_tensor(&mut self, t: TensorEntry) -> Result<()> {
        if self.tensors.iter().any(|e| e.name == t.name) {
            return Err(Error::invalid(format!("duplicate tensor name: {}", t.name)));
        }
        self.tensors.push(t);
        Ok(())
    }

    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// Changes the type of tensor `i` (its data size with it).
    pub fn set_tensor_type(&mut self, i: usize, ggml_type: u32) -> Result<()> {
        let t = self
            .tensors
            .get_mut(i)
            .ok_or_else(|| Error::Internal(format!("no tensor {i}")))?;
        t.ggml_type = ggml_type;
        Ok(())
    }

    /// The bytes before the data section; tensor data follows in order, each padded to the
    /// alignment.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (key, value) in &self.kv {
            encode_str(key.as_bytes(), &mut out);
            value.encode(&mut out);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            encode_str(t.name.as_bytes(), &mut out);
            let n_dims = t.n_dims();
            out.extend_from_slice(&(n_dims as u32).to_le_bytes());
            for d in &t.ne[..n_dims] {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ggml_type.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            let size = t.n_bytes().ok_or_else(|| match type_traits(t.ggml_type) {
                Some(tt) => Error::invalid(format!(
                    "tensor '{}' cannot be stored as {}: its rows of {} are not whole blocks of {}",
                    t.name, tt.name, t.ne[0], tt.block_size
                )),
                None => Error::invalid(format!("tensor '{}': unknown type {}", t.name, t.ggml_type)),
            })?;
            offset = offset
                .checked_add(padded(size))
                .ok_or_else(|| Error::invalid("tensor data too large"))?;
        }
        out.resize(padded(out.len() as u64) as usize, 0);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufFile;

    fn entry(name: &str, ne: [u64; 4], ggml_type: u32) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            ne,
            ggml_type,
        }
    }

    #[test]
    fn what_it_writes_reads_back() {
        let mut w = MetaWriter::default();
        w.set("general.architecture", Value::Str(b"llama".to_vec()));
        w.set("general.file_type", Value::U32(1));
        w.set(
            "a.list",
            Value::Array(crate::gguf::Array::Str(vec![b"x".to_vec(), b"yz".to_vec()])),
        );
        w.set("general.file_type", Value::U32(7));
        w.add_tensor(entry("norm.weight", [5, 1, 1, 1], 0)).unwrap();
        w.add_tensor(entry("w.weight", [64, 3, 1, 1], 1)).unwrap();
        w.add_tensor(entry("experts", [32, 2, 4, 1], 0)).unwrap();
        assert!(w.add_tensor(entry("w.weight", [64, 3, 1, 1], 1)).is_err());
        w.set_tensor_type(1, 8).unwrap();
        let mut bytes = w.encode().unwrap();
        assert_eq!(bytes.len() % 32, 0);
        let data: u64 = w.tensors().iter().map(|t| padded(t.n_bytes().unwrap())).sum();
        bytes.resize(bytes.len() + data as usize, 0);
        let g = GgufFile::parse(&bytes).unwrap();
        let keys: Vec<&str> = g.metadata().iter().map(|(k, _)| k.as_str()).collect();
        // A key set again moves to the end, as ggml's gguf_set_val_* moves it.
        assert_eq!(keys, ["general.architecture", "a.list", "general.file_type"]);
        assert_eq!(g.get("general.file_type"), Some(&Value::U32(7)));
        let t = g.tensors();
        assert_eq!((t[0].n_dims, t[0].offset, t[0].size), (1, 0, 20));
        // 3 rows of 64 Q8_0 values: 2 blocks of 34 bytes each.
        assert_eq!((t[1].ggml_type, t[1].offset, t[1].size), (8, 32, 204));
        assert_eq!((t[2].n_dims, t[2].offset), (3, 32 + 224));
    }

    #[test]
    fn a_type_that_does_not_fit_is_refused() {
        let mut w = MetaWriter::default();
        w.add_tensor(entry("w", [48, 2, 1, 1], 12)).unwrap();
        assert!(w.encode().is_err());
    }
}
