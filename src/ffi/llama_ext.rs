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
use super::handle::{ctx, ctx_mut, model, type_selection_free, type_selection_into_raw, with_type_selection};
use super::params::quantize_params;
use super::sampler::c_slice;
use super::types::{llama_context, llama_model, llama_model_quantize_params, llama_sampler, llama_token};
use crate::error::{Error, Result};
use crate::model::quantize::{TensorShape, TypeSelection};
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
    /// The bytes and length of the `std::string` at `str`.
    fn engine_string_view(str: *const c_void, bytes: *mut *const u8, n: *mut usize);
    /// Constructs a `std::vector<uint32_t>` in `slot` holding the `n` values at `values`; 0, or -1
    /// when memory ran out (the vector is valid, empty, either way).
    fn engine_u32_vector_construct(slot: *mut c_void, values: *const u32, n: usize) -> i32;
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

/// `uint32_t llama_model_get_tok_embd(const llama_model *, float * out)`: the token embedding
/// matrix as F32 values (n_embd per token, dequantized), written to `out` unless it is NULL; the
/// number of values, or 0 without a vocabulary or the matrix.
///
/// # Safety
/// `out` must be NULL or have room for the number of values a NULL `out` answers.
#[export_name = "_Z24llama_model_get_tok_embdPK11llama_modelPf"]
pub unsafe extern "C" fn llama_model_get_tok_embd(m: *const llama_model, out: *mut f32) -> u32 {
    entry!(0, {
        let m = model(m)?;
        let Some(n) = m.token_embd_len() else { return Ok(0) };
        let count = u32::try_from(n).map_err(|_| Error::invalid("the token embeddings hold more than 2^32 values"))?;
        if !out.is_null() {
            // SAFETY: a non-NULL `out` has room for `n` floats (the caller's contract).
            m.token_embd_f32(unsafe { std::slice::from_raw_parts_mut(out, n) })?;
        }
        Ok(count)
    })
}

/// `ggml_cgraph * llama_graph_reserve(llama_context *, uint32_t n_tokens, uint32_t n_seqs,
/// uint32_t n_outputs)`: the context's graph for a ubatch of that shape over its whole memory,
/// reserved in its scheduler; valid until the next call (or the context's end). NULL with a log
/// line for a shape the context cannot run.
#[export_name = "_Z19llama_graph_reserveP13llama_contextjjj"]
pub extern "C" fn llama_graph_reserve(
    c: *mut llama_context,
    n_tokens: u32,
    n_seqs: u32,
    n_outputs: u32,
) -> *mut ggml_sys::ggml_cgraph {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(c)?;
        let graph = c.reserve_graph(n_tokens as usize, n_seqs as usize, n_outputs as usize)?;
        Ok(graph.raw())
    })
}

/// `ggml_type llama_ftype_get_default_type(llama_ftype)`: the type most tensors of a file of that
/// type get; GGML_TYPE_COUNT for a file type the quantizer cannot write.
#[export_name = "_Z28llama_ftype_get_default_type11llama_ftype"]
pub extern "C" fn llama_ftype_get_default_type(ftype: i32) -> u32 {
    entry!(ggml_sys::ggml_type_GGML_TYPE_COUNT, {
        Ok(crate::model::quantize::default_type(ftype).unwrap_or(ggml_sys::ggml_type_GGML_TYPE_COUNT))
    })
}

/// `quantize_state_impl * llama_quant_init(const llama_model *, const llama_model_quantize_params *)`:
/// the quantizer's type rules for `m` with `params` (its `ftype` is replaced by each
/// `llama_quant_compute_types` call's); NULL with a log line if either is unusable.
///
/// # Safety
/// `params` must be NULL or point to a filled struct.
#[export_name = "_Z16llama_quant_initPK11llama_modelPK27llama_model_quantize_params"]
pub unsafe extern "C" fn llama_quant_init(
    m: *const llama_model,
    params: *const llama_model_quantize_params,
) -> *mut c_void {
    entry!(std::ptr::null_mut(), {
        let m = model(m)?;
        let hp = m
            .hparams
            .as_ref()
            .ok_or_else(|| Error::invalid("a vocabulary-only model has no tensors to quantize"))?;
        if params.is_null() {
            return Err(Error::invalid("params is NULL"));
        }
        // SAFETY: a non-NULL `params` points to a filled struct (the caller's contract).
        let p = unsafe { quantize_params(&*params) }?;
        let arch = m
            .meta_value(b"general.architecture\0")
            .map_or(hp.arch_name.to_string(), |v| {
                String::from_utf8_lossy(v.strip_suffix(b"\0").unwrap_or(v)).into_owned()
            });
        Ok(type_selection_into_raw(TypeSelection::new(&arch, hp, &p)))
    })
}

/// llama-ext.h's `llama_quant_model_desc`.
#[repr(C)]
pub struct llama_quant_model_desc {
    architecture: *const std::ffi::c_char,
    n_embd: u32,
    n_ff: u32,
    n_layer: u32,
    n_head: u32,
    n_head_kv: u32,
    n_expert: u32,
    n_embd_head_k: u32,
    n_embd_head_v: u32,
}

/// `llama_model * llama_quant_model_from_metadata(const llama_quant_model_desc *)`: a model of
/// those facts only, for the type rules (freed with `llama_model_free`); NULL with a log line for
/// an architecture the engine does not know or facts out of range.
///
/// # Safety
/// `desc` must be NULL or point to a filled struct whose `architecture` is NULL or a C string.
#[export_name = "_Z31llama_quant_model_from_metadataPK22llama_quant_model_desc"]
pub unsafe extern "C" fn llama_quant_model_from_metadata(desc: *const llama_quant_model_desc) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        if desc.is_null() {
            return Err(Error::invalid("desc is NULL"));
        }
        // SAFETY: a filled struct (the caller's contract).
        let d = unsafe { &*desc };
        // SAFETY: forwarded contract.
        let arch = unsafe { super::strings::c_str(d.architecture, "desc->architecture") }?;
        let arch = std::str::from_utf8(arch).map_err(|_| Error::invalid("desc->architecture is not UTF-8"))?;
        let facts = crate::model::quantize::ModelFacts {
            arch,
            n_embd: d.n_embd,
            n_ff: d.n_ff,
            n_layer: d.n_layer,
            n_head: d.n_head,
            n_head_kv: d.n_head_kv,
            n_expert: d.n_expert,
            n_embd_head_k: d.n_embd_head_k,
            n_embd_head_v: d.n_embd_head_v,
        };
        let m = crate::model::quantize::model_of_facts(&facts, crate::arch::spec)?;
        Ok(super::handle::model_into_raw(m))
    })
}

/// `void llama_quant_free(quantize_state_impl *)`
#[export_name = "_Z16llama_quant_freeP19quantize_state_impl"]
pub extern "C" fn llama_quant_free(qs: *mut c_void) {
    entry!((), {
        if !qs.is_null() {
            type_selection_free(qs)?;
        }
        Ok(())
    })
}

/// A client's tensor as the type rules see it: name, type, shape and dimensions.
///
/// # Safety
/// `t` must be a live ggml tensor.
unsafe fn tensor_shape<'t>(t: *const ggml_sys::ggml_tensor) -> Result<TensorShape<'t>> {
    if t.is_null() {
        return Err(Error::invalid("a tensor is NULL"));
    }
    // SAFETY: a live tensor (the caller's contract); its name is a NUL-terminated array in it.
    unsafe {
        let name = std::ffi::CStr::from_ptr((*t).name.as_ptr())
            .to_str()
            .map_err(|_| Error::invalid("a tensor name is not UTF-8"))?;
        Ok(TensorShape {
            name,
            ggml_type: (*t).type_,
            ne: (*t).ne.map(|n| n.max(0) as u64),
            n_dims: ggml_sys::ggml_n_dims(t) as usize,
        })
    }
}

/// `bool llama_quant_tensor_allows_quantization(const quantize_state_impl *, const ggml_tensor *)`:
/// whether the quantizer converts the tensor (by its name and dimensions) or copies it.
///
/// # Safety
/// `tensor` must be NULL or a live ggml tensor.
#[export_name = "_Z38llama_quant_tensor_allows_quantizationPK19quantize_state_implPK11ggml_tensor"]
pub unsafe extern "C" fn llama_quant_tensor_allows_quantization(
    qs: *const c_void,
    tensor: *const ggml_sys::ggml_tensor,
) -> bool {
    entry!(false, {
        // SAFETY: forwarded contract.
        let t = unsafe { tensor_shape(tensor) }?;
        with_type_selection(qs, |s| s.allows_quantization(t.name, t.n_dims))
    })
}

/// `void llama_quant_compute_types(quantize_state_impl *, llama_ftype, ggml_tensor **, ggml_type *,
/// size_t)`: the type each tensor gets in a file of type `ftype` (GGML_TYPE_COUNT for a file type
/// the quantizer cannot write), the tensors taken in order as a file's.
///
/// # Safety
/// `tensors` and `result_types` must hold `n_tensors` entries, the former live ggml tensors.
#[export_name = "_Z25llama_quant_compute_typesP19quantize_state_impl11llama_ftypePP11ggml_tensorP9ggml_typem"]
pub unsafe extern "C" fn llama_quant_compute_types(
    qs: *mut c_void,
    ftype: i32,
    tensors: *mut *mut ggml_sys::ggml_tensor,
    result_types: *mut u32,
    n_tensors: usize,
) {
    entry!((), {
        // SAFETY: forwarded contract (NULL only with no entries).
        let tensors = unsafe { c_slice(tensors.cast_const(), n_tensors, "tensors") }?;
        let shapes = tensors
            .iter()
            // SAFETY: forwarded contract.
            .map(|&t| unsafe { tensor_shape(t.cast_const()) })
            .collect::<Result<Vec<_>>>()?;
        let types = with_type_selection(qs, |s| s.choose_all(ftype, &shapes))?;
        if n_tensors > 0 && result_types.is_null() {
            return Err(Error::invalid("result_types is NULL"));
        }
        for (i, t) in types.into_iter().enumerate() {
            // SAFETY: `result_types` holds `n_tensors` entries (the caller's contract).
            unsafe { *result_types.add(i) = t.unwrap_or(ggml_sys::ggml_type_GGML_TYPE_COUNT) };
        }
        Ok(())
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

/// `std::vector<uint32_t> unicode_cpts_from_utf8(const std::string &)`: llama.cpp's internal
/// `unicode.h` again (test-tokenizer-1-bpe links against it): the code points of the bytes, U+FFFD
/// for each byte of a malformed sequence, as llama.cpp decodes them.
///
/// # Safety
/// `slot` must be the caller's uninitialised return slot for the vector, `utf8` a live string.
#[export_name = "_Z22unicode_cpts_from_utf8RKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"]
pub unsafe extern "C" fn unicode_cpts_from_utf8(slot: *mut c_void, utf8: *const c_void) -> *mut c_void {
    entry!(slot, {
        let (mut bytes, mut n) = (std::ptr::null(), 0usize);
        // SAFETY: `utf8` is a live std::string (the caller's contract); its bytes stay valid during
        // the call.
        let text = unsafe {
            engine_string_view(utf8, &mut bytes, &mut n);
            if n == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(bytes, n)
            }
        };
        let cpts = crate::vocab::code_points(text);
        // SAFETY: the slot is the caller's return slot; `cpts` is a live array of its length.
        if unsafe { engine_u32_vector_construct(slot, cpts.as_ptr(), cpts.len()) } != 0 {
            return Err(Error::Internal("out of memory building the vector".into()));
        }
        Ok(slot)
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
