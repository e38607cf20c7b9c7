//! Typed access to GGUF metadata with messages that name the key, and caller-supplied overrides.

use crate::error::{Error, Result};
use crate::gguf::{Array, GgufFile, Value};

/// A value from `llama_model_params.kv_overrides`.
#[derive(Debug, Clone, PartialEq)]
pub enum OverrideValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct KvOverride {
    pub key: String,
    pub value: OverrideValue,
}

/// Replace (or add) the overridden keys in `g`, keeping the file's value type where it has one,
/// so every reader (hparams, vocab) sees the override. An override of the wrong kind is an error.
pub fn apply_overrides(g: &mut GgufFile, overrides: &[KvOverride]) -> Result<()> {
    for ov in overrides {
        let existing = g.get(&ov.key);
        let value = converted(existing, &ov.value).ok_or_else(|| {
            Error::model(format!(
                "override of '{}' has the wrong type: the file holds {}, the override is {:?}",
                ov.key,
                existing.map_or("nothing", Value::type_name),
                ov.value
            ))
        })?;
        crate::log_info!("model: overriding '{}' with {}", ov.key, value.to_meta_string());
        g.set(&ov.key, value);
    }
    Ok(())
}

fn converted(existing: Option<&Value>, ov: &OverrideValue) -> Option<Value> {
    use OverrideValue as O;
    Some(match (existing, ov) {
        (None, O::Int(v)) => Value::I64(*v),
        (None, O::Float(v)) => Value::F64(*v),
        (None, O::Bool(v)) => Value::Bool(*v),
        (None, O::Str(v)) | (Some(Value::Str(_)), O::Str(v)) => Value::Str(v.clone()),
        (Some(Value::Bool(_)), O::Bool(v)) => Value::Bool(*v),
        (Some(Value::F32(_)), O::Float(v)) => Value::F32(*v as f32),
        (Some(Value::F64(_)), O::Float(v)) => Value::F64(*v),
        (Some(Value::U8(_)), O::Int(v)) => Value::U8((*v).try_into().ok()?),
        (Some(Value::I8(_)), O::Int(v)) => Value::I8((*v).try_into().ok()?),
        (Some(Value::U16(_)), O::Int(v)) => Value::U16((*v).try_into().ok()?),
        (Some(Value::I16(_)), O::Int(v)) => Value::I16((*v).try_into().ok()?),
        (Some(Value::U32(_)), O::Int(v)) => Value::U32((*v).try_into().ok()?),
        (Some(Value::I32(_)), O::Int(v)) => Value::I32((*v).try_into().ok()?),
        (Some(Value::U64(_)), O::Int(v)) => Value::U64((*v).try_into().ok()?),
        (Some(Value::I64(_)), O::Int(v)) => Value::I64(*v),
        _ => return None,
    })
}

/// Any integer value as i64 (GGUF writers differ in the width they use for the same key).
fn int_of(v: &Value) -> Option<i64> {
    Some(match *v {
        Value::U8(x) => x.into(),
        Value::I8(x) => x.into(),
        Value::U16(x) => x.into(),
        Value::I16(x) => x.into(),
        Value::U32(x) => x.into(),
        Value::I32(x) => x.into(),
        Value::U64(x) => x.try_into().ok()?,
        Value::I64(x) => x,
        _ => return None,
    })
}

fn mistyped(key: &str, v: &Value, want: &str) -> Error {
    Error::model(format!(
        "key '{key}' has type {} but {want} was expected",
        v.type_name()
    ))
}

/// The error of a required key the file lacks.
pub(crate) fn missing(key: &str) -> Error {
    Error::model(format!("required key '{key}' is missing"))
}

/// Typed reads of one GGUF file's metadata.
pub struct Meta<'a>(pub &'a GgufFile);

impl Meta<'_> {
    /// An unsigned 32-bit value (counts, lengths), if present.
    pub fn u32_opt(&self, key: &str) -> Result<Option<u32>> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        let i = int_of(v).ok_or_else(|| mistyped(key, v, "an integer"))?;
        u32::try_from(i)
            .map(Some)
            .map_err(|_| Error::model(format!("key '{key}' = {i} is out of range")))
    }

    /// An integer key of any width and sign.
    pub fn int_opt(&self, key: &str) -> Result<Option<i64>> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        int_of(v).map(Some).ok_or_else(|| mistyped(key, v, "an integer"))
    }

    pub fn u32(&self, key: &str) -> Result<u32> {
        self.u32_opt(key)?.ok_or_else(|| missing(key))
    }

    pub fn f32_opt(&self, key: &str) -> Result<Option<f32>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(v) => Err(mistyped(key, v, "a float")),
        }
    }

    pub fn f32(&self, key: &str) -> Result<f32> {
        self.f32_opt(key)?.ok_or_else(|| missing(key))
    }

    pub fn bool_opt(&self, key: &str) -> Result<Option<bool>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(mistyped(key, v, "a bool")),
        }
    }

    pub fn bool(&self, key: &str) -> Result<bool> {
        self.bool_opt(key)?.ok_or_else(|| missing(key))
    }

    pub fn str_opt(&self, key: &str) -> Result<Option<&[u8]>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s)),
            Some(v) => Err(mistyped(key, v, "a string")),
        }
    }

    pub fn str(&self, key: &str) -> Result<&str> {
        let s = self.str_opt(key)?.ok_or_else(|| missing(key))?;
        std::str::from_utf8(s).map_err(|_| Error::model(format!("key '{key}' is not valid UTF-8")))
    }

    /// A per-layer value given either as one integer or as an array of `n_layer` integers.
    pub fn u32_per_layer(&self, key: &str, n_layer: usize) -> Result<Option<Vec<u32>>> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        if let Value::Array(a) = v {
            let vals: Option<Vec<i64>> = match a {
                Array::U32(x) => Some(x.iter().map(|&v| v.into()).collect()),
                Array::I32(x) => Some(x.iter().map(|&v| v.into()).collect()),
                Array::U64(x) => x.iter().map(|&v| i64::try_from(v).ok()).collect(),
                Array::I64(x) => Some(x.clone()),
                _ => None,
            };
            let vals = vals.ok_or_else(|| mistyped(key, v, "an integer array"))?;
            if vals.len() != n_layer {
                return Err(Error::model(format!(
                    "key '{key}' has {} entries but the model has {n_layer} layers",
                    vals.len()
                )));
            }
            return vals
                .into_iter()
                .map(|i| u32::try_from(i).map_err(|_| Error::model(format!("key '{key}' holds {i}, out of range"))))
                .collect::<Result<Vec<u32>>>()
                .map(Some);
        }
        Ok(self.u32_opt(key)?.map(|x| vec![x; n_layer]))
    }

    /// A per-layer float: an array of `n_layer` F32 values, or one value for every layer, if
    /// present (llama.cpp's `get_key_or_arr`).
    pub fn f32_per_layer(&self, key: &str, n_layer: usize) -> Result<Option<Vec<f32>>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::F32(x))) if x.len() == n_layer => Ok(Some(x.clone())),
            Some(Value::Array(Array::F32(x))) => Err(Error::model(format!(
                "key '{key}' has {} entries but the model has {n_layer} layers",
                x.len()
            ))),
            Some(v @ Value::Array(_)) => Err(mistyped(key, v, "a float array")),
            Some(_) => Ok(self.f32_opt(key)?.map(|x| vec![x; n_layer])),
        }
    }

    /// A per-layer flag given as an array of `n_layer` booleans (or integers), if present.
    pub fn bool_per_layer(&self, key: &str, n_layer: usize) -> Result<Option<Vec<bool>>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::Bool(b))) if b.len() == n_layer => Ok(Some(b.clone())),
            Some(_) => Ok(self
                .u32_per_layer(key, n_layer)?
                .map(|v| v.iter().map(|&x| x != 0).collect())),
        }
    }

    /// A fixed-length integer array (a scalar fills it), if present.
    pub fn i32_array(&self, key: &str, n: usize) -> Result<Option<Vec<i32>>> {
        let v = self.u32_per_layer(key, n)?;
        v.map(|v| {
            v.into_iter()
                .map(|x| i32::try_from(x).map_err(|_| Error::model(format!("key '{key}' holds {x}, out of range"))))
                .collect()
        })
        .transpose()
    }

    /// An array of non-negative integers of any width, if present.
    pub fn u64_array_opt(&self, key: &str) -> Result<Option<Vec<u64>>> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        let vals: Option<Vec<u64>> = match v {
            Value::Array(Array::U64(x)) => Some(x.clone()),
            Value::Array(Array::U32(x)) => Some(x.iter().map(|&v| v.into()).collect()),
            Value::Array(Array::I32(x)) => x.iter().map(|&v| u64::try_from(v).ok()).collect(),
            Value::Array(Array::I64(x)) => x.iter().map(|&v| u64::try_from(v).ok()).collect(),
            _ => None,
        };
        vals.map(Some)
            .ok_or_else(|| mistyped(key, v, "an array of non-negative integers"))
    }

    /// An array of strings, if present.
    pub fn str_array_opt(&self, key: &str) -> Result<Option<&[Vec<u8>]>> {
        match self.0.get(key) {
            None => Ok(None),
            Some(Value::Array(Array::Str(a))) => Ok(Some(a)),
            Some(v) => Err(mistyped(key, v, "a string array")),
        }
    }
}

/// The metadata as llama.cpp exposes it through `llama_model_meta_*`: every non-array key, with its
/// value formatted as text. Each string carries a trailing NUL so C can be handed a pointer to it.
pub fn meta_strings(g: &GgufFile) -> Vec<super::MetaPair> {
    g.metadata()
        .iter()
        .filter(|(_, v)| !matches!(v, Value::Array(_)))
        .map(|(k, v)| {
            let mut key = k.as_bytes().to_vec();
            key.push(0);
            let mut val = match v {
                Value::Str(s) => s.clone(),
                other => other.to_meta_string().into_bytes(),
            };
            val.push(0);
            (key, val)
        })
        .collect()
}

/// The value of `key` (without its NUL) in pairs made by [`meta_strings`].
pub fn find_meta<'m>(meta: &'m [super::MetaPair], key: &[u8]) -> Option<&'m [u8]> {
    meta.iter()
        .find(|(k, _)| &k[..k.len() - 1] == key)
        .map(|(_, v)| v.as_slice())
}
