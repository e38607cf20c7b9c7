//! A small GGUF writer for building test files, with every field overridable so tests can
//! produce the malformed files the reader must reject. Values are encoded by `Value::encode`.

use crate::gguf::{Array, Value};

pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// One metadata pair; `body` is the encoded value (type id and payload), free to be malformed.
pub struct Kv {
    pub key: Vec<u8>,
    pub body: Vec<u8>,
}

impl Kv {
    pub fn new(key: &str, v: Value) -> Kv {
        Kv {
            key: key.as_bytes().to_vec(),
            body: {
                // The engine's own encoder (the quantizer's writer uses it): the reader's tests
                // read back what it writes.
                let mut out = Vec::new();
                v.encode(&mut out);
                out
            },
        }
    }

    pub fn raw(key: &[u8], body: Vec<u8>) -> Kv {
        Kv {
            key: key.to_vec(),
            body,
        }
    }
}

pub struct Tensor {
    pub name: Vec<u8>,
    /// Written as the dimension count; defaults to `dims.len()`.
    pub n_dims: Option<u32>,
    pub dims: Vec<i64>,
    pub ggml_type: u32,
    pub offset: u64,
}

impl Tensor {
    pub fn new(name: &str, ggml_type: u32, dims: &[i64], offset: u64) -> Tensor {
        Tensor {
            name: name.as_bytes().to_vec(),
            n_dims: None,
            dims: dims.to_vec(),
            ggml_type,
            offset,
        }
    }

    /// Data bytes by the test's own size table (only the types tests use); 0 when unknown.
    pub fn size(&self) -> u64 {
        let (block, bytes) = match self.ggml_type {
            0 => (1, 4),      // f32
            1 => (1, 2),      // f16
            2 => (32, 18),    // q4_0
            12 => (256, 144), // q4_K
            24 => (1, 1),     // i8
            28 => (1, 8),     // f64
            _ => return 0,
        };
        let n: Option<u64> = self
            .dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?));
        n.and_then(|n| (n / block).checked_mul(bytes)).unwrap_or(0)
    }
}

pub struct File {
    pub magic: [u8; 4],
    pub version: u32,
    /// Header counts; default to the lengths of `tensors` and `kvs`.
    pub n_tensors: Option<u64>,
    pub n_kv: Option<u64>,
    pub kvs: Vec<Kv>,
    pub tensors: Vec<Tensor>,
    /// The data section starts at the end of the tensor infos padded to this.
    pub alignment: u64,
    /// Bytes of tensor data written; defaults to the end of the tensor whose data ends last.
    pub data_len: Option<u64>,
}

impl File {
    pub fn new() -> File {
        File {
            magic: *b"GGUF",
            version: 3,
            n_tensors: None,
            n_kv: None,
            kvs: Vec::new(),
            tensors: Vec::new(),
            alignment: 32,
            data_len: None,
        }
    }

    /// A small valid file: a few metadata pairs and three tensors of different types,
    /// with the tensor data ending exactly at the end of the file.
    pub fn sample() -> File {
        let mut f = File::new();
        f.kvs = vec![
            Kv::new("general.architecture", Value::Str(b"llama".to_vec())),
            Kv::new("llama.block_count", Value::U32(1)),
            Kv::new("llama.rope.freq_base", Value::F32(10000.0)),
            Kv::new(
                "tokenizer.ggml.tokens",
                Value::Array(Array::Str(vec![b"<s>".to_vec(), b"a".to_vec(), b"\"b\"".to_vec()])),
            ),
            Kv::new("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0, -1.5, 2.0]))),
        ];
        f.tensors = vec![
            Tensor::new("token_embd.weight", 0, &[8, 4], 0),      // 128 bytes
            Tensor::new("blk.0.attn_q.weight", 2, &[64, 2], 128), // 72 bytes
            Tensor::new("output_norm.weight", 1, &[8], 224),      // 16 bytes
        ];
        f
    }

    /// The encoded file and the offset where the tensor infos end.
    pub fn build(&self) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        out.extend_from_slice(&self.magic);
        put_u32(&mut out, self.version);
        put_u64(&mut out, self.n_tensors.unwrap_or(self.tensors.len() as u64));
        put_u64(&mut out, self.n_kv.unwrap_or(self.kvs.len() as u64));
        for kv in &self.kvs {
            put_str(&mut out, &kv.key);
            out.extend_from_slice(&kv.body);
        }
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            put_u32(&mut out, t.n_dims.unwrap_or(t.dims.len() as u32));
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            put_u32(&mut out, t.ggml_type);
            put_u64(&mut out, t.offset);
        }
        let infos_end = out.len();
        let data_len = self.data_len.unwrap_or_else(|| {
            let ends = self.tensors.iter().map(|t| t.offset.saturating_add(t.size()));
            ends.max().unwrap_or(0)
        });
        if !self.tensors.is_empty() || data_len > 0 {
            out.resize(infos_end.next_multiple_of(self.alignment as usize), 0);
            let start = out.len();
            out.extend((0..data_len).map(|i| (i % 251) as u8));
            assert_eq!(out.len() - start, data_len as usize);
        }
        (out, infos_end)
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.build().0
    }
}

/// One metadata pair of every scalar type.
pub fn all_scalars() -> Vec<(&'static str, Value)> {
    vec![
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(0.125)),
        ("t.bool", Value::Bool(true)),
        ("t.str", Value::Str(b"hello \xff world".to_vec())),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f64", Value::F64(-2.5e300)),
    ]
}

/// One metadata pair holding an array of every element type.
pub fn all_arrays() -> Vec<(&'static str, Value)> {
    let arrays = vec![
        ("a.u8", Array::U8(vec![0, 1, 255])),
        ("a.i8", Array::I8(vec![-128, 0, 127])),
        ("a.u16", Array::U16(vec![0, 65535])),
        ("a.i16", Array::I16(vec![-32768, 32767])),
        ("a.u32", Array::U32(vec![1, 2, 3, u32::MAX])),
        ("a.i32", Array::I32(vec![-1, i32::MAX])),
        ("a.f32", Array::F32(vec![1.5, -0.0, f32::INFINITY])),
        ("a.bool", Array::Bool(vec![true, false, true])),
        (
            "a.str",
            Array::Str(vec![b"x".to_vec(), Vec::new(), b"\xe2\x96\x81y".to_vec()]),
        ),
        ("a.u64", Array::U64(vec![u64::MAX, 0])),
        ("a.i64", Array::I64(vec![i64::MIN, 7])),
        ("a.f64", Array::F64(vec![1e-300, 3.0])),
    ];
    arrays.into_iter().map(|(k, a)| (k, Value::Array(a))).collect()
}

/// The sample file with every scalar and array type added to its metadata.
pub fn rich() -> File {
    let mut f = File::sample();
    for (k, v) in all_scalars().into_iter().chain(all_arrays()) {
        f.kvs.push(Kv::new(k, v));
    }
    f
}
