//! The model file type (`enum llama_ftype`): read from `general.file_type` or guessed from the most
//! common tensor type, its display name, and the data checks of `check_tensors`.

use crate::error::{Error, Result};
use crate::gguf::TensorInfo;
use crate::model::metadata::Meta;

/// Flag llama.h ORs into a file type that was guessed rather than stated.
pub const GUESSED: i32 = 1024;

/// The name llama.cpp gives a file type, NUL-terminated for C callers; guessed types get the
/// prefix "(guessed) ".
pub fn name_c(ftype: i32) -> &'static [u8] {
    macro_rules! both {
        ($($v:literal => $n:literal),* $(,)?) => {
            match (ftype & !GUESSED, ftype & GUESSED != 0) {
                $( ($v, false) => concat!($n, "\0").as_bytes(), ($v, true) => concat!("(guessed) ", $n, "\0").as_bytes(), )*
                (_, false) => b"unknown, may not work\0",
                (_, true) => b"(guessed) unknown, may not work\0",
            }
        };
    }
    both! {
        0 => "all F32", 1 => "F16", 32 => "BF16", 40 => "Q1_0", 41 => "Q2_0", 2 => "Q4_0", 3 => "Q4_1",
        8 => "Q5_0", 9 => "Q5_1", 7 => "Q8_0", 38 => "MXFP4 MoE", 39 => "NVFP4", 10 => "Q2_K - Medium",
        21 => "Q2_K - Small", 11 => "Q3_K - Small", 12 => "Q3_K - Medium", 13 => "Q3_K - Large",
        14 => "Q4_K - Small", 15 => "Q4_K - Medium", 16 => "Q5_K - Small", 17 => "Q5_K - Medium",
        18 => "Q6_K", 36 => "TQ1_0 - 1.69 bpw ternary", 37 => "TQ2_0 - 2.06 bpw ternary",
        19 => "IQ2_XXS - 2.0625 bpw", 20 => "IQ2_XS - 2.3125 bpw", 28 => "IQ2_S - 2.5 bpw",
        29 => "IQ2_M - 2.7 bpw", 22 => "IQ3_XS - 3.3 bpw", 23 => "IQ3_XXS - 3.0625 bpw",
        24 => "IQ1_S - 1.5625 bpw", 31 => "IQ1_M - 1.75 bpw", 25 => "IQ4_NL - 4.5 bpw",
        30 => "IQ4_XS - 4.25 bpw", 26 => "IQ3_S - 3.4375 bpw", 27 => "IQ3_S mix - 3.66 bpw",
    }
}

/// [`name_c`] without the terminator.
pub fn name(ftype: i32) -> &'static str {
    let c = name_c(ftype);
    std::str::from_utf8(&c[..c.len() - 1]).unwrap_or_default()
}

/// `general.file_type` if present, else the llama_ftype of the most common tensor type (ties go to
/// the type that reached the count first in tensor-name order, as llama.cpp counts), flagged GUESSED.
pub fn of(meta: &Meta, types_by_tensor: impl Iterator<Item = (String, u32)>) -> Result<i32> {
    if let Some(v) = meta.u32_opt("general.file_type")? {
        return i32::try_from(v).map_err(|_| Error::model(format!("general.file_type {v} is out of range")));
    }
    let mut sorted: Vec<(String, u32)> = types_by_tensor.collect();
    sorted.sort();
    let mut counts = std::collections::HashMap::new();
    let (mut best, mut best_n) = (0u32, 0u32);
    for (_, t) in sorted {
        let n = counts.entry(t).or_insert(0u32);
        *n += 1;
        if *n > best_n {
            best_n = *n;
            best = t;
        }
    }
    let ftype = match best {
        0 => 0,
        1 => 1,
        30 => 32,
        2 => 2,
        3 => 3,
        6 => 8,
        7 => 9,
        8 => 7,
        10 => 10,
        11 => 12,
        12 => 15,
        13 => 17,
        14 => 18,
        34 => 36,
        35 => 37,
        16 => 19,
        17 => 20,
        22 => 28,
        18 => 23,
        19 => 24,
        29 => 31,
        20 => 25,
        23 => 30,
        21 => 26,
        40 => 39,
        other => {
            crate::log_warn!("model: cannot name a file type after tensor type {other}; reporting all F32");
            0
        }
    };
    Ok(ftype | GUESSED)
}

/// `check_tensors`: reject NaN or infinite values, in float tensors (naming the element) and in
/// the blocks of quantized ones (ggml's check, as llama.cpp's loader makes it).
pub fn validate_data(t: &TensorInfo, bytes: &[u8], data_offset: u64) -> Result<()> {
    let start = data_offset
        .checked_add(t.offset)
        .and_then(|s| usize::try_from(s).ok())
        .ok_or_else(|| Error::model(format!("tensor '{}' lies outside the file", t.name)))?;
    let len = usize::try_from(t.size).map_err(|_| Error::model("tensor too large"))?;
    let data = bytes
        .get(start..start.saturating_add(len))
        .ok_or_else(|| Error::model(format!("tensor '{}' lies outside the file", t.name)))?;
    let bad = match t.ggml_type {
        0 => data
            .chunks_exact(4)
            .position(|c| !f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()),
        // f16: exponent bits all ones means inf or NaN.
        1 => data
            .chunks_exact(2)
            .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7c00 == 0x7c00),
        // bf16: the top half of an f32.
        30 => data
            .chunks_exact(2)
            .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7f80 == 0x7f80),
        _ if crate::ggml::quant::validate_rows(t.ggml_type, data) => None,
        _ => {
            return Err(Error::model(format!(
                "tensor '{}' has invalid data (a NaN or infinite value in its blocks)",
                t.name
            )))
        }
    };
    match bad {
        Some(i) => Err(Error::model(format!(
            "tensor '{}' has a NaN or infinite value at element {i}",
            t.name
        ))),
        None => Ok(()),
    }
}
