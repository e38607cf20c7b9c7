//! Tensor infos and the ggml type table their sizes are computed from.

use super::reader::Reader;
use crate::error::{Error, Result};

/// Block geometry of a ggml type: `block_size` elements are stored in `type_size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct TypeTraits {
    pub name: &'static str,
    pub block_size: u64,
    pub type_size: u64,
}

const fn tt(name: &'static str, block_size: u64, type_size: u64) -> Option<TypeTraits> {
    Some(TypeTraits {
        name,
        block_size,
        type_size,
    })
}

/// ggml's `type_traits` (0.25.3, llama.cpp 0.3.36's) (names, blck_size, type_size), indexed by `enum ggml_type`.
/// `None` marks ids whose support ggml removed.
static TYPES: [Option<TypeTraits>; 43] = [
    tt("f32", 1, 4),        // 0
    tt("f16", 1, 2),        // 1
    tt("q4_0", 32, 18),     // 2
    tt("q4_1", 32, 20),     // 3
    None,                   // 4: q4_2, removed
    None,                   // 5: q4_3, removed
    tt("q5_0", 32, 22),     // 6
    tt("q5_1", 32, 24),     // 7
    tt("q8_0", 32, 34),     // 8
    tt("q8_1", 32, 36),     // 9
    tt("q2_K", 256, 84),    // 10
    tt("q3_K", 256, 110),   // 11
    tt("q4_K", 256, 144),   // 12
    tt("q5_K", 256, 176),   // 13
    tt("q6_K", 256, 210),   // 14
    tt("q8_K", 256, 292),   // 15
    tt("iq2_xxs", 256, 66), // 16
    tt("iq2_xs", 256, 74),  // 17
    tt("iq3_xxs", 256, 98), // 18
    tt("iq1_s", 256, 50),   // 19
    tt("iq4_nl", 32, 18),   // 20
    tt("iq3_s", 256, 110),  // 21
    tt("iq2_s", 256, 82),   // 22
    tt("iq4_xs", 256, 136), // 23
    tt("i8", 1, 1),         // 24
    tt("i16", 1, 2),        // 25
    tt("i32", 1, 4),        // 26
    tt("i64", 1, 8),        // 27
    tt("f64", 1, 8),        // 28
    tt("iq1_m", 256, 56),   // 29
    tt("bf16", 1, 2),       // 30
    None,                   // 31: q4_0_4_4, removed (ggml repacks q4_0 at load time instead)
    None,                   // 32: q4_0_4_8, removed
    None,                   // 33: q4_0_8_8, removed
    tt("tq1_0", 256, 54),   // 34
    tt("tq2_0", 256, 66),   // 35
    None,                   // 36: iq4_nl_4_4, removed (ggml repacks iq4_nl at load time instead)
    None,                   // 37: iq4_nl_4_8, removed
    None,                   // 38: iq4_nl_8_8, removed
    tt("mxfp4", 32, 17),    // 39
    tt("nvfp4", 64, 36),    // 40
    tt("q1_0", 128, 18),    // 41
    tt("q2_0", 64, 18),     // 42
];

/// The block geometry of a ggml type id, or `None` for ids ggml does not know or no longer supports.
pub fn type_traits(ggml_type: u32) -> Option<&'static TypeTraits> {
    TYPES.get(usize::try_from(ggml_type).ok()?)?.as_ref()
}

/// ggml's `GGML_MAX_NAME` is 64 bytes including the terminating NUL.
const MAX_NAME_LEN: usize = 63;
/// ggml's `GGML_MAX_DIMS`.
const MAX_DIMS: u32 = 4;

#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ggml_type: u32,
    pub n_dims: u32,
    /// Elements per dimension; dimensions past `n_dims` are 1.
    pub ne: [u64; 4],
    /// Byte offset of the data, relative to `GgufFile::data_offset`.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        // A parsed tensor's product fits in an i64; saturating only guards hand-built infos.
        self.ne.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }
}

/// Reads tensor info number `index`. Returns it with the file position of its offset field,
/// where later layout errors (alignment, overlap, bounds) are reported.
pub(super) fn read_tensor_info(r: &mut Reader, index: u64) -> Result<(TensorInfo, u64)> {
    let name_at = r.pos();
    let raw_name = r
        .string()
        .map_err(|e| e.reading(format_args!("the name of tensor {index}")))?;
    let name = tensor_name(raw_name, index, name_at)?;

    let dims_at = r.pos();
    let n_dims = r
        .u32()
        .map_err(|e| e.reading(format_args!("the dimension count of tensor '{name}'")))?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(Error::gguf(
            dims_at,
            format!("tensor '{name}' has {n_dims} dimensions; it must have 1 to {MAX_DIMS}"),
        ));
    }
    let mut ne = [1u64; 4];
    for (j, dim) in ne.iter_mut().take(n_dims as usize).enumerate() {
        let at = r.pos();
        let d = r
            .i64()
            .map_err(|e| e.reading(format_args!("dimension {j} of tensor '{name}'")))?;
        *dim = u64::try_from(d)
            .map_err(|_| Error::gguf(at, format!("tensor '{name}' dimension {j} is negative ({d})")))?;
    }
    let shape = || {
        let dims: Vec<String> = ne.iter().take(n_dims as usize).map(u64::to_string).collect();
        format!("[{}]", dims.join(", "))
    };
    // ggml counts elements in an int64_t.
    let n_elements = ne
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d).filter(|&n| i64::try_from(n).is_ok()))
        .ok_or_else(|| {
            Error::gguf(
                dims_at,
                format!(
                    "tensor '{name}' of shape {} has more elements than fit in an i64",
                    shape()
                ),
            )
        })?;

    let type_at = r.pos();
    let ggml_type = r
        .u32()
        .map_err(|e| e.reading(format_args!("the type of tensor '{name}'")))?;
    let traits = type_traits(ggml_type).ok_or_else(|| {
        let in_table = usize::try_from(ggml_type).is_ok_and(|i| i < TYPES.len());
        let why = if in_table {
            "a type whose support ggml removed"
        } else {
            "not a type ggml knows"
        };
        Error::gguf(type_at, format!("tensor '{name}' has ggml type {ggml_type}, {why}"))
    })?;
    if ne[0] % traits.block_size != 0 {
        return Err(Error::gguf(
            type_at,
            format!(
                "tensor '{name}' of type {} has {} elements per row, not a multiple of the block size {}",
                traits.name, ne[0], traits.block_size
            ),
        ));
    }
    // Rows are whole blocks (checked above), so the element count divides evenly.
    let size = (n_elements / traits.block_size)
        .checked_mul(traits.type_size)
        .ok_or_else(|| {
            Error::gguf(
                type_at,
                format!(
                    "tensor '{name}' of type {} and shape {} has a size in bytes that overflows 64 bits",
                    traits.name,
                    shape()
                ),
            )
        })?;

    let offset_at = r.pos();
    let offset = r
        .u64()
        .map_err(|e| e.reading(format_args!("the data offset of tensor '{name}'")))?;

    let info = TensorInfo {
        name,
        ggml_type,
        n_dims,
        ne,
        offset,
        size,
    };
    Ok((info, offset_at))
}

fn tensor_name(raw: &[u8], index: u64, at: u64) -> Result<String> {
    let bad = |what: String| Err(Error::gguf(at, format!("tensor {index} {what}")));
    if raw.is_empty() {
        return bad("has an empty name".into());
    }
    let Ok(name) = std::str::from_utf8(raw) else {
        return bad(format!(
            "has a name that is not valid UTF-8 ('{}')",
            String::from_utf8_lossy(raw)
        ));
    };
    if name.len() > MAX_NAME_LEN {
        return bad(format!(
            "has a name of {} bytes ('{name}'); ggml allows at most {MAX_NAME_LEN}",
            name.len()
        ));
    }
    if name.contains('\0') {
        return bad(format!("has a name containing a NUL byte ('{name}')"));
    }
    Ok(name.to_owned())
}
