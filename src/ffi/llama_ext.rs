//! llama.cpp's staging API (`src/llama-ext.h` in its source, not part of llama.h), which its
//! `common` library and llama-cpp-python's `llama_cpp_ext.py` call with C++ linkage: the symbols are
//! the Itanium-mangled names of those C++ functions, exported here with C calling conventions that
//! match them on x86-64 and AArch64 (pointers, integers and bools in registers; a returned
//! `std::map` through the caller's return slot, which the only C++ of the library fills, see
//! `cxx_abi.cpp`). They are not in `include/llama.h` (the module is `cbindgen:ignore`).
//!
//! The answers are those llama.cpp gives for the models the engine runs on the CPU: no offload
//! devices, no next-token-prediction heads, no extracted layer inputs.

use super::entry::entry;
use super::handle::{ctx, ctx_mut, model};
use super::sampler::c_slice;
use super::types::{llama_context, llama_model, llama_sampler, llama_token};
use crate::error::Error;
use std::ffi::c_void;

/// One row of the memory breakdown as `cxx_abi.cpp` reads it.
#[repr(C)]
struct BreakdownEntry {
    buft: usize,
    model: usize,
    context: usize,
    compute: usize,
}

extern "C" {
    /// Constructs `std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>` in `slot`
    /// with `entries`; 0 when all went in, -1 when memory ran out (the map is valid either way).
    fn engine_memory_breakdown_construct(slot: *mut c_void, entries: *const BreakdownEntry, n: usize) -> i32;
    /// Constructs a `std::string` in `slot` holding the `n` bytes at `bytes`; 0, or -1 when memory
    /// ran out (the string is valid, empty, either way).
    fn engine_string_construct(slot: *mut c_void, bytes: *const u8, n: usize) -> i32;
    /// Up to `cap` of the data pointers and lengths of the `std::vector<std::vector<int32_t>>` at
    /// `vectors`; returns how many vectors it holds.
    fn engine_token_vectors(vectors: *const c_void, data: *mut *const i32, lens: *mut usize, cap: usize) -> usize;
}

/// `int32_t llama_model_n_expert(const llama_model *)`
#[export_name = "_Z20llama_model_n_expertPK11llama_model"]
pub unsafe extern "C" fn llama_model_n_expert(m: *const llama_model) -> i32 {
    entry!(0, {
        let m = model(m)?;
        Ok(m.hparams
            .as_ref()
            .map_or(0, |h| i32::try_from(h.n_expert).unwrap_or(i32::MAX)))
    })
}

/// `int32_t llama_model_n_devices(const llama_model *)`: the offload devices the model was given
/// (its layers split over them); none when everything is on the CPU.
#[export_name = "_Z21llama_model_n_devicesPK11llama_model"]
pub unsafe extern "C" fn llama_model_n_devices(m: *const llama_model) -> i32 {
    entry!(0, {
        let m = model(m)?;
        Ok(i32::try_from(m.placement.devices.len()).unwrap_or(i32::MAX))
    })
}

/// `ggml_backend_dev_t llama_model_get_device(const llama_model *, int)`: device `i` of those, NULL
/// out of range, as in llama.cpp.
#[export_name = "_Z22llama_model_get_devicePK11llama_modeli"]
pub unsafe extern "C" fn llama_model_get_device(m: *const llama_model, i: i32) -> *mut c_void {
    entry!(std::ptr::null_mut(), {
        let m = model(m)?;
        let dev = usize::try_from(i).ok().and_then(|i| m.placement.devices.get(i));
        Ok(dev.map_or(std::ptr::null_mut(), |d| d.raw().cast()))
    })
}

/// `llama_memory_breakdown llama_get_memory_breakdown(const llama_context *)`: bytes of model
/// weights, cache and compute buffers per buffer type. The map is returned by value, so the caller
/// passes the slot to construct it in (the first argument), which is also returned.
///
/// # Safety
/// `slot` must be the caller's uninitialised return slot for the map, as the C++ ABI passes it.
#[export_name = "_Z26llama_get_memory_breakdownPK13llama_context"]
pub unsafe extern "C" fn llama_get_memory_breakdown(slot: *mut c_void, c: *const llama_context) -> *mut c_void {
    entry!(slot, {
        let entries = ctx_mut(c).map(|c| {
            c.memory_breakdown()
                .into_iter()
                .map(|(buft, [model, context, compute])| BreakdownEntry {
                    buft: buft.addr(),
                    model,
                    context,
                    compute,
                })
                .collect::<Vec<_>>()
        });
        // The map must exist in the slot whatever happened above: the caller will destroy it.
        let list = entries.as_deref().unwrap_or_default();
        // SAFETY: the slot is the caller's return slot; `list` is a live array of its length.
        if unsafe { engine_memory_breakdown_construct(slot, list.as_ptr(), list.len()) } != 0 {
            return Err(Error::Internal("out of memory building the breakdown map".into()));
        }
        entries.map(|_| slot)
    })
}

/// `void llama_set_embeddings_nextn(llama_context *, bool value, bool masked)`: the models the
/// engine runs have no next-token-prediction head, so there is nothing to switch.
#[export_name = "_Z26llama_set_embeddings_nextnP13llama_contextbb"]
pub unsafe extern "C" fn llama_set_embeddings_nextn(c: *mut llama_context, value: bool, masked: bool) {
    let _ = (value, masked);
    entry!((), {
        ctx(c)?;
        Ok(())
    })
}

/// `void llama_set_nextn_layer_offset(llama_context *, int32_t)`: no next-token-prediction blocks.
#[export_name = "_Z28llama_set_nextn_layer_offsetP13llama_contexti"]
pub unsafe extern "C" fn llama_set_nextn_layer_offset(c: *mut llama_context, offset: i32) {
    let _ = offset;
    entry!((), {
        ctx(c)?;
        Ok(())
    })
}

/// `float * llama_get_embeddings_nextn(llama_context *)`: NULL, as llama.cpp answers without them.
#[export_name = "_Z26llama_get_embeddings_nextnP13llama_context"]
pub unsafe extern "C" fn llama_get_embeddings_nextn(c: *mut llama_context) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        ctx(c)?;
        Ok(std::ptr::null_mut())
    })
}

/// `float * llama_get_embeddings_nextn_ith(llama_context *, int32_t)`: NULL and an error line, as
/// in llama.cpp.
#[export_name = "_Z30llama_get_embeddings_nextn_ithP13llama_contexti"]
pub unsafe extern "C" fn llama_get_embeddings_nextn_ith(c: *mut llama_context, i: i32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        ctx(c)?;
        Err(Error::invalid(format!(
            "invalid nextn embeddings id {i}: no nextn embeddings"
        )))
    })
}

/// `void llama_set_embeddings_layer_inp(llama_context *, uint32_t lid, bool)`: layer inputs are not
/// extracted; asking for them is recorded nowhere, and reading them answers NULL.
#[export_name = "_Z30llama_set_embeddings_layer_inpP13llama_contextjb"]
pub unsafe extern "C" fn llama_set_embeddings_layer_inp(c: *mut llama_context, lid: u32, value: bool) {
    entry!((), {
        ctx(c)?;
        if value {
            crate::log_warn!(
                "llama_set_embeddings_layer_inp: the input of layer {lid} is not extracted by this engine"
            );
        }
        Ok(())
    })
}

/// `float * llama_get_embeddings_layer_inp(llama_context *, uint32_t lid)`: NULL with an error
/// line (llama.cpp aborts when the layer's input was not extracted).
#[export_name = "_Z30llama_get_embeddings_layer_inpP13llama_contextj"]
pub unsafe extern "C" fn llama_get_embeddings_layer_inp(c: *mut llama_context, lid: u32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        ctx(c)?;
        Err(Error::invalid(format!("the input of layer {lid} was not extracted")))
    })
}

/// `llama_context * llama_get_ctx_other(llama_context *)`: the paired context of a
/// multi-token-prediction context; NULL for the default contexts the engine makes.
#[export_name = "_Z19llama_get_ctx_otherP13llama_context"]
pub unsafe extern "C" fn llama_get_ctx_other(c: *mut llama_context) -> *mut llama_context {
    entry!(std::ptr::null_mut(), {
        ctx(c)?;
        Ok(std::ptr::null_mut())
    })
}

/// `int32_t llama_model_dflash_selector_top_k(const llama_model *)`: 0 without a DFlash head.
#[export_name = "_Z33llama_model_dflash_selector_top_kPK11llama_model"]
pub unsafe extern "C" fn llama_model_dflash_selector_top_k(m: *const llama_model) -> i32 {
    entry!(0, {
        model(m)?;
        Ok(0)
    })
}

/// `const int32_t * llama_model_target_layer_ids(const llama_model *)`: NULL, no draft-model layers.
#[export_name = "_Z28llama_model_target_layer_idsPK11llama_model"]
pub unsafe extern "C" fn llama_model_target_layer_ids(m: *const llama_model) -> *const i32 {
    entry!(std::ptr::null(), {
        model(m)?;
        Ok(std::ptr::null())
    })
}

/// `uint32_t llama_model_target_layer_ids_n(const llama_model *)`: 0.
#[export_name = "_Z30llama_model_target_layer_ids_nPK11llama_model"]
pub unsafe extern "C" fn llama_model_target_layer_ids_n(m: *const llama_model) -> u32 {
    entry!(0, {
        model(m)?;
        Ok(0)
    })
}

/// The UTF-8 bytes of code point `cpt` as llama.cpp's internal `unicode_cpt_to_utf8` writes them:
/// the usual encoding, surrogates included (three bytes, like any other code point below 0x10000).
/// None above 0x10FFFF, where llama.cpp throws.
fn utf8_of(cpt: u32) -> Option<Vec<u8>> {
    let cont = |shift: u32| 0x80 | ((cpt >> shift) & 0x3f) as u8;
    Some(match cpt {
        0..=0x7f => vec![cpt as u8],
        0x80..=0x7ff => vec![0xc0 | (cpt >> 6) as u8, cont(0)],
        0x800..=0xffff => vec![0xe0 | (cpt >> 12) as u8, cont(6), cont(0)],
        0x1_0000..=0x10_ffff => vec![0xf0 | (cpt >> 18) as u8, cont(12), cont(6), cont(0)],
        _ => return None,
    })
}

/// `std::string unicode_cpt_to_utf8(uint32_t)`: not llama.h nor llama-ext.h but llama.cpp's internal
/// `unicode.h`, which libllama.so exports and llama.cpp's tokenizer tests (test-tokenizer-1-spm, -bpe)
/// link against. An invalid code point, where llama.cpp throws, gives "" and a log line.
///
/// # Safety
/// `slot` must be the caller's uninitialised return slot for the string, as the C++ ABI passes it.
#[export_name = "_Z19unicode_cpt_to_utf8B5cxx11j"]
pub unsafe extern "C" fn unicode_cpt_to_utf8(slot: *mut c_void, cpt: u32) -> *mut c_void {
    entry!(slot, {
        let bytes = utf8_of(cpt);
        let b = bytes.as_deref().unwrap_or_default();
        // SAFETY: the slot is the caller's return slot; `b` is a live byte array of its length.
        if unsafe { engine_string_construct(slot, b.as_ptr(), b.len()) } != 0 {
            return Err(Error::Internal("out of memory building the string".into()));
        }
        bytes
            .map(|_| slot)
            .ok_or_else(|| Error::invalid(format!("invalid codepoint {cpt:#x}")))
    })
}

/// `llama_sampler * llama_sampler_init_dry_testing(float, float, int32_t, int32_t,
/// const std::vector<std::vector<llama_token>> &)`: llama.cpp's testing constructor of the DRY
/// sampler (its test-sampling links against it), with breakers as token sequences.
#[export_name = "_Z30llama_sampler_init_dry_testingffiiRKSt6vectorIS_IiSaIiEESaIS1_EE"]
pub unsafe extern "C" fn llama_sampler_init_dry_testing(
    multiplier: f32,
    base: f32,
    allowed_length: i32,
    penalty_last_n: i32,
    seq_breakers: *const c_void,
) -> *mut llama_sampler {
    entry!(std::ptr::null_mut(), {
        if seq_breakers.is_null() {
            return Err(Error::invalid("seq_breakers is NULL"));
        }
        // SAFETY: the caller's vector of vectors, alive during the call; the first call only
        // counts, the second fills `n` entries.
        let n = unsafe { engine_token_vectors(seq_breakers, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        let mut data = vec![std::ptr::null::<llama_token>(); n];
        let mut lens = vec![0usize; n];
        // SAFETY: as above; both arrays hold `n` entries.
        unsafe { engine_token_vectors(seq_breakers, data.as_mut_ptr(), lens.as_mut_ptr(), n) };
        let mut breakers = Vec::with_capacity(n);
        for (&p, &len) in data.iter().zip(&lens) {
            // SAFETY: each inner vector's data holds its length in tokens.
            breakers.push(unsafe { c_slice(p, len, "a breaker") }?);
        }
        super::sampler::make(|| {
            Ok(crate::sampling::Dry::with_token_breakers(
                multiplier,
                base,
                allowed_length,
                penalty_last_n,
                &breakers,
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::utf8_of;

    #[test]
    fn code_points_encode_as_llama_cpp_encodes_them() {
        for cpt in (0..0x11_0000)
            .step_by(7)
            .chain([0x7f, 0x80, 0x7ff, 0x800, 0xffff, 0x1_0000, 0x10_ffff])
        {
            let ours = utf8_of(cpt).expect("in range");
            match char::from_u32(cpt) {
                Some(c) => assert_eq!(ours, c.to_string().into_bytes(), "{cpt:#x}"),
                // Surrogates: the three-byte pattern, which UTF-8 proper forbids.
                None => assert_eq!(ours.len(), 3, "{cpt:#x}"),
            }
        }
        assert_eq!(utf8_of(0xd800), Some(vec![0xed, 0xa0, 0x80]));
        assert_eq!(utf8_of(0x11_0000), None);
    }
}
