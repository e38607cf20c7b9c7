//! Metadata values: the 13 GGUF value types, how they are read, and how llama.cpp prints them.

use super::reader::Reader;
use crate::error::{Error, Result};

// GGUF value type ids (gguf.h `enum gguf_type`).
const U8: u32 = 0;
const I8: u32 = 1;
const U16: u32 = 2;
const I16: u32 = 3;
const U32: u32 = 4;
const I32: u32 = 5;
const F32: u32 = 6;
const BOOL: u32 = 7;
const STR: u32 = 8;
const ARR: u32 = 9;
const U64: u32 = 10;
const I64: u32 = 11;
const F64: u32 = 12;

/// GGUF's own name for each value type id, as `gguf_type_name` gives it.
fn gguf_type_name(id: u32) -> &'static str {
    match id {
        U8 => "u8",
        I8 => "i8",
        U16 => "u16",
        I16 => "i16",
        U32 => "u32",
        I32 => "i32",
        F32 => "f32",
        BOOL => "bool",
        STR => "str",
        ARR => "arr",
        U64 => "u64",
        I64 => "i64",
        F64 => "f64",
        _ => "unknown",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    /// Raw bytes: GGUF does not enforce an encoding on string values.
    Str(Vec<u8>),
    Array(Array),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// An array value. GGUF allows arrays of arrays, but nothing uses them and this reader rejects them.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Str(Vec<Vec<u8>>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl Value {
    /// GGUF's name of the value's type ("u32", "str", "arr", ...).
    pub fn type_name(&self) -> &'static str {
        gguf_type_name(self.type_id())
    }

    fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => U8,
            Value::I8(_) => I8,
            Value::U16(_) => U16,
            Value::I16(_) => I16,
            Value::U32(_) => U32,
            Value::I32(_) => I32,
            Value::F32(_) => F32,
            Value::Bool(_) => BOOL,
            Value::Str(_) => STR,
            Value::Array(_) => ARR,
            Value::U64(_) => U64,
            Value::I64(_) => I64,
            Value::F64(_) => F64,
        }
    }

    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Value::U32(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_i32(&self) -> Option<i32> {
        match self {
            Value::I32(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::U64(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_f32(&self) -> Option<f32> {
        match self {
            Value::F32(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&[u8]> {
        match self {
            Value::Str(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The value's type id and payload, as GGUF stores them after the key.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.type_id().to_le_bytes());
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Bool(v) => out.push(u8::from(*v)),
            Value::Str(v) => encode_str(v, out),
            Value::Array(a) => a.encode(out),
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }

    /// The value as llama.cpp's `gguf_kv_to_str` prints it (what `llama_model_meta_val_str` returns).
    pub fn to_meta_string(&self) -> String {
        match self {
            Value::U8(v) => v.to_string(),
            Value::I8(v) => v.to_string(),
            Value::U16(v) => v.to_string(),
            Value::I16(v) => v.to_string(),
            Value::U32(v) => v.to_string(),
            Value::I32(v) => v.to_string(),
            Value::F32(v) => c_float(f64::from(*v)),
            Value::Bool(v) => v.to_string(),
            Value::Str(v) => String::from_utf8_lossy(v).into_owned(),
            Value::Array(a) => a.to_meta_string(),
            Value::U64(v) => v.to_string(),
            Value::I64(v) => v.to_string(),
            Value::F64(v) => c_float(*v),
        }
    }
}

impl Array {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// GGUF's name of the element type; llama.cpp shows arrays as `arr[<this>,<len>]`.
    pub fn type_name(&self) -> &'static str {
        gguf_type_name(self.elem_type_id())
    }

    fn elem_type_id(&self) -> u32 {
        match self {
            Array::U8(_) => U8,
            Array::I8(_) => I8,
            Array::U16(_) => U16,
            Array::I16(_) => I16,
            Array::U32(_) => U32,
            Array::I32(_) => I32,
            Array::F32(_) => F32,
            Array::Bool(_) => BOOL,
            Array::Str(_) => STR,
            Array::U64(_) => U64,
            Array::I64(_) => I64,
            Array::F64(_) => F64,
        }
    }

    /// Element type, length and elements, as GGUF stores them.
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.elem_type_id().to_le_bytes());
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        match self {
            Array::U8(v) => out.extend_from_slice(v),
            Array::I8(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::U16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::I16(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::U32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::I32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::F32(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
            Array::Str(v) => v.iter().for_each(|s| encode_str(s, out)),
            Array::U64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::I64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Array::F64(v) => v.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        }
    }

    fn to_meta_string(&self) -> String {
        match self {
            Array::U8(v) => bracketed(v, u8::to_string),
            Array::I8(v) => bracketed(v, i8::to_string),
            Array::U16(v) => bracketed(v, u16::to_string),
            Array::I16(v) => bracketed(v, i16::to_string),
            Array::U32(v) => bracketed(v, u32::to_string),
            Array::I32(v) => bracketed(v, i32::to_string),
            Array::F32(v) => bracketed(v, |x| c_float(f64::from(*x))),
            Array::Bool(v) => bracketed(v, bool::to_string),
            Array::Str(v) => bracketed(v, |s| quoted(s)),
            Array::U64(v) => bracketed(v, u64::to_string),
            Array::I64(v) => bracketed(v, i64::to_string),
            Array::F64(v) => bracketed(v, |x| c_float(*x)),
        }
    }
}

/// A GGUF string: its length as a u64, then its bytes.
pub(super) fn encode_str(s: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

fn bracketed<T>(items: &[T], show: impl Fn(&T) -> String) -> String {
    let shown: Vec<String> = items.iter().map(show).collect();
    format!("[{}]", shown.join(", "))
}

/// A string array element as llama.cpp shows it: in double quotes, with `\` and `"` escaped.
fn quoted(s: &[u8]) -> String {
    let s = String::from_utf8_lossy(s);
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// C++ `std::to_string` of a floating-point value, i.e. printf `%f` (glibc spelling of inf and nan).
fn c_float(x: f64) -> String {
    if x.is_nan() {
        if x.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if x.is_infinite() {
        if x < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{x:.6}")
    }
}

/// Reads a value's type id and payload; `key` names the value in error messages.
pub(super) fn read_value(r: &mut Reader, key: &str) -> Result<Value> {
    let type_at = r.pos();
    let id = r
        .u32()
        .map_err(|e| e.reading(format_args!("the value type of key '{key}'")))?;
    let value = match id {
        U8 => Value::U8(scalar(r, key, u8::from_le_bytes)?),
        I8 => Value::I8(scalar(r, key, i8::from_le_bytes)?),
        U16 => Value::U16(scalar(r, key, u16::from_le_bytes)?),
        I16 => Value::I16(scalar(r, key, i16::from_le_bytes)?),
        U32 => Value::U32(scalar(r, key, u32::from_le_bytes)?),
        I32 => Value::I32(scalar(r, key, i32::from_le_bytes)?),
        F32 => Value::F32(scalar(r, key, f32::from_le_bytes)?),
        BOOL => {
            let at = r.pos();
            let byte = scalar(r, key, u8::from_le_bytes)?;
            Value::Bool(to_bool(byte, at, || format!("key '{key}'"))?)
        }
        STR => {
            let s = r
                .string()
                .map_err(|e| e.reading(format_args!("the value of key '{key}'")))?;
            Value::Str(s.to_vec())
        }
        ARR => Value::Array(read_array(r, key)?),
        U64 => Value::U64(scalar(r, key, u64::from_le_bytes)?),
        I64 => Value::I64(scalar(r, key, i64::from_le_bytes)?),
        F64 => Value::F64(scalar(r, key, f64::from_le_bytes)?),
        _ => return Err(Error::gguf(type_at, format!("key '{key}' has unknown value type {id}"))),
    };
    Ok(value)
}

/// Reads one fixed-size little-endian number, the value of `key`.
fn scalar<T, const N: usize>(r: &mut Reader, key: &str, decode: fn([u8; N]) -> T) -> Result<T> {
    r.array()
        .map(decode)
        .map_err(|e| e.reading(format_args!("the value of key '{key}'")))
}

/// Reads an array's element type, length and elements (the array type id is already consumed).
fn read_array(r: &mut Reader, key: &str) -> Result<Array> {
    let type_at = r.pos();
    let id = r
        .u32()
        .map_err(|e| e.reading(format_args!("the element type of array '{key}'")))?;
    let n = r
        .u64()
        .map_err(|e| e.reading(format_args!("the length of array '{key}'")))?;
    let array = match id {
        U8 => Array::U8(numbers(r, n, key, u8::from_le_bytes)?),
        I8 => Array::I8(numbers(r, n, key, i8::from_le_bytes)?),
        U16 => Array::U16(numbers(r, n, key, u16::from_le_bytes)?),
        I16 => Array::I16(numbers(r, n, key, i16::from_le_bytes)?),
        U32 => Array::U32(numbers(r, n, key, u32::from_le_bytes)?),
        I32 => Array::I32(numbers(r, n, key, i32::from_le_bytes)?),
        F32 => Array::F32(numbers(r, n, key, f32::from_le_bytes)?),
        BOOL => {
            let start = r.pos();
            let bytes = numbers(r, n, key, u8::from_le_bytes)?;
            let mut bools = Vec::with_capacity(bytes.len());
            for (i, (byte, at)) in bytes.into_iter().zip(start..).enumerate() {
                bools.push(to_bool(byte, at, || format!("element {i} of array '{key}'"))?);
            }
            Array::Bool(bools)
        }
        STR => {
            // Each string is at least its 8-byte length.
            let n = r.check_count(n, 8, format_args!("the length of array '{key}'"))?;
            let mut strings = Vec::with_capacity(n);
            for i in 0..n {
                let s = r
                    .string()
                    .map_err(|e| e.reading(format_args!("element {i} of array '{key}'")))?;
                strings.push(s.to_vec());
            }
            Array::Str(strings)
        }
        U64 => Array::U64(numbers(r, n, key, u64::from_le_bytes)?),
        I64 => Array::I64(numbers(r, n, key, i64::from_le_bytes)?),
        F64 => Array::F64(numbers(r, n, key, f64::from_le_bytes)?),
        ARR => {
            return Err(Error::gguf(
                type_at,
                format!("key '{key}' is an array of arrays; nested arrays are not supported"),
            ))
        }
        _ => {
            return Err(Error::gguf(
                type_at,
                format!("array '{key}' has unknown element type {id}"),
            ))
        }
    };
    Ok(array)
}

/// Reads `n` fixed-size little-endian numbers, after checking that the file holds them.
fn numbers<T, const N: usize>(r: &mut Reader, n: u64, key: &str, decode: fn([u8; N]) -> T) -> Result<Vec<T>> {
    r.check_count(n, N as u64, format_args!("the length of array '{key}'"))?;
    let bytes = r
        .bytes(n.saturating_mul(N as u64))
        .map_err(|e| e.reading(format_args!("the elements of array '{key}'")))?;
    let (chunks, _) = bytes.as_chunks::<N>();
    Ok(chunks.iter().map(|c| decode(*c)).collect())
}

/// The GGUF spec defines a bool byte as 0 or 1; anything else means a broken writer or file.
fn to_bool(byte: u8, at: u64, what: impl Fn() -> String) -> Result<bool> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::gguf(
            at,
            format!("{} is a bool with byte value {byte}; it must be 0 or 1", what()),
        )),
    }
}
