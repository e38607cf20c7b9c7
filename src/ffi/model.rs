//! Model loading and the model getters.

use super::entry::entry;
use super::handle::{model, model_free, model_into_raw, vocab_handle};
use super::params::{model_load_params, path_arg, quantize_params, Progress};
use super::strings::{c_str, write_c_str};
use super::types::*;
use crate::error::{Error, Result};
use crate::model::hparams::HParams;
use crate::model::{FileSource, MetaPair, Model};
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::FromRawFd;

/// Load from `paths` with the caller's parameters, wiring the C progress callback.
///
/// # Safety
/// Pointers inside `params` must be valid as llama.h documents.
unsafe fn load(paths: Vec<String>, params: &llama_model_params) -> Result<*mut llama_model> {
    let sources: Vec<FileSource> = paths.into_iter().map(FileSource::Path).collect();
    // SAFETY: forwarded contract.
    unsafe { load_from(&sources, params) }
}

/// # Safety
/// As [`load`].
unsafe fn load_from(sources: &[FileSource], params: &llama_model_params) -> Result<*mut llama_model> {
    // SAFETY: forwarded contract.
    let (mut lp, progress) = unsafe { model_load_params(params) }?;
    let mut progress: Option<Progress> = progress;
    let mut call = |p: f32| progress.as_mut().is_none_or(|cb| cb.call(p));
    lp.progress = Some(&mut call);
    let m = Model::load_from(sources, lp, crate::arch::spec)?;
    Ok(model_into_raw(m))
}

/// `<name>-00001-of-00003.gguf` names all its splits; any other name is one file.
fn split_paths(path: &str) -> Vec<String> {
    let parse = |s: &str| s.parse::<u32>().ok();
    let Some(stem) = path.strip_suffix(".gguf") else {
        return vec![path.to_string()];
    };
    let Some((rest, count)) = stem.rsplit_once("-of-") else {
        return vec![path.to_string()];
    };
    let Some((prefix, no)) = rest.rsplit_once('-') else {
        return vec![path.to_string()];
    };
    match (parse(no), parse(count)) {
        (Some(1), Some(n)) if n > 1 && no.len() == 5 && count.len() == 5 => {
            (1..=n).map(|i| format!("{prefix}-{i:05}-of-{n:05}.gguf")).collect()
        }
        _ => vec![path.to_string()],
    }
}

/// # Safety
/// `path_model` NULL or NUL-terminated; pointers in `params` valid as llama.h documents.
#[no_mangle]
pub unsafe extern "C" fn llama_model_load_from_file(
    path_model: *const c_char,
    params: llama_model_params,
) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        let path = unsafe { path_arg(path_model, "path_model") }?;
        // SAFETY: forwarded contract.
        unsafe { load(split_paths(&path), &params) }
    })
}

/// # Safety
/// As [`llama_model_load_from_file`].
#[deprecated(note = "use llama_model_load_from_file instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_load_model_from_file(
    path_model: *const c_char,
    params: llama_model_params,
) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_model_load_from_file(path_model, params) })
    })
}

/// # Safety
/// `paths` must hold `n_paths` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn llama_model_load_from_splits(
    paths: *mut *const c_char,
    n_paths: usize,
    params: llama_model_params,
) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        if paths.is_null() || n_paths == 0 {
            return Err(Error::invalid("paths is NULL or empty"));
        }
        let mut v = Vec::with_capacity(n_paths);
        for i in 0..n_paths {
            // SAFETY: the caller passes `n_paths` string pointers.
            let p = unsafe { *paths.add(i) };
            // SAFETY: forwarded contract.
            v.push(unsafe { path_arg(p, "paths[i]") }?);
        }
        // SAFETY: forwarded contract.
        unsafe { load(v, &params) }
    })
}

/// # Safety
/// `model` must be NULL or a live model handle, freed only once.
#[no_mangle]
pub unsafe extern "C" fn llama_model_free(model: *mut llama_model) {
    entry!((), { model_free(model) })
}

/// # Safety
/// As [`llama_model_free`].
#[deprecated(note = "use llama_model_free instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_free_model(model: *mut llama_model) {
    entry!((), {
        // SAFETY: forwarded contract.
        unsafe { llama_model_free(model) };
        Ok(())
    })
}

/// A model of the architecture and hyper-parameters in `metadata`, its tensors (those
/// llama.cpp creates, F32 unless `metadata` lists one with another type) filled by
/// `set_tensor_data`, one call per tensor in llama.cpp's order. Architectures whose list of
/// tensors is not checked against llama.cpp yet are refused (NULL, and a log line).
///
/// # Safety
/// `metadata` NULL or a live `gguf_context`; `set_tensor_data` a function that may write the
/// tensor it is given (through ggml's backend API); pointers in `params` as llama.h documents.
#[no_mangle]
pub unsafe extern "C" fn llama_model_init_from_user(
    metadata: *mut gguf_context,
    set_tensor_data: llama_model_set_tensor_data_t,
    set_tensor_data_ud: *mut c_void,
    params: llama_model_params,
) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        if metadata.is_null() {
            return Err(Error::invalid("metadata is NULL"));
        }
        let Some(set_tensor_data) = set_tensor_data else {
            return Err(Error::invalid("set_tensor_data is NULL"));
        };
        // SAFETY: a live gguf_context by the contract.
        let bytes = unsafe { crate::ggml::user_fill::gguf_meta_bytes(metadata.cast()) };
        // SAFETY: forwarded contract.
        let (mut lp, progress) = unsafe { model_load_params(&params) }?;
        let mut progress: Option<Progress> = progress;
        let mut call = |p: f32| progress.as_mut().is_none_or(|cb| cb.call(p));
        lp.progress = Some(&mut call);
        // SAFETY: the caller's function, with its own user data, on a tensor placed in memory
        // the model owns, as the contract allows.
        let mut fill = |t: crate::ggml::TensorRef| unsafe { set_tensor_data(t.as_ptr().cast(), set_tensor_data_ud) };
        let m = Model::from_user(&bytes, lp, crate::arch::spec, &mut fill)?;
        Ok(model_into_raw(m))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_load_from_file_ptr(
    file: *mut libc::FILE,
    params: llama_model_params,
) -> *mut llama_model {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        let source = unsafe { file_source(file) }?;
        // SAFETY: forwarded contract.
        unsafe { load_from(std::slice::from_ref(&source), &params) }
    })
}

/// The GGUF in a caller's open file, from where its reads have got to.
///
/// # Safety
/// `file` NULL or a live `FILE*`.
pub(crate) unsafe fn file_source(file: *mut libc::FILE) -> Result<FileSource> {
    if file.is_null() {
        return Err(Error::invalid("file is NULL"));
    }
    // SAFETY: a live FILE* by the contract; ftello accounts for what stdio has buffered, so
    // the GGUF starts where the caller's reads have got to.
    let (fd, start) = unsafe { (libc::fileno(file), libc::ftello(file)) };
    if fd < 0 || start < 0 {
        return Err(Error::invalid("file has no usable descriptor or position"));
    }
    // SAFETY: `fd` is open (the caller's); dup gives us a descriptor of our own, read by position
    // only, so the caller's offset does not move.
    let own = unsafe { libc::dup(fd) };
    if own < 0 {
        return Err(Error::io(
            "cannot duplicate the descriptor of",
            format!("FILE* (fd {fd})"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `own` is a fresh descriptor nothing else owns.
    let owned = unsafe { std::fs::File::from_raw_fd(own) };
    Ok(FileSource::Open {
        file: owned,
        start: start as u64,
        name: format!("FILE* (fd {fd}, from byte {start})"),
    })
}

/// Writes the model as llama.cpp's saver does (see `model::saver`); returns nothing, so a
/// refusal or failure is logged and leaves no file behind.
///
/// # Safety
/// `path_model` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn llama_model_save_to_file(model_ptr: *const llama_model, path_model: *const c_char) {
    entry!((), {
        let m = model(model_ptr)?;
        // SAFETY: forwarded contract.
        let path = unsafe { path_arg(path_model, "path_model") }?;
        m.save(&path)
            .map_err(|e| Error::invalid(format!("cannot save the model to '{path}': {e}")))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_quantize(
    fname_inp: *const c_char,
    fname_out: *const c_char,
    params: *const llama_model_quantize_params,
) -> u32 {
    // llama.h: 0 means success; llama.cpp returns 1 for every failure.
    entry!(1, {
        // SAFETY: forwarded contract.
        let input = unsafe { path_arg(fname_inp, "fname_inp") }?;
        // SAFETY: forwarded contract.
        let output = unsafe { path_arg(fname_out, "fname_out") }?;
        if params.is_null() {
            return Err(Error::invalid("params is NULL"));
        }
        // SAFETY: a non-NULL `params` points to a filled struct (forwarded contract).
        let p = unsafe { quantize_params(&*params) }?;
        crate::model::quantize::quantize(&split_paths(&input), &output, &p, crate::arch::spec)?;
        Ok(0)
    })
}

/// A getter over the model's hyper-parameters; a vocab-only model reports `none`.
fn hp_getter<T: Copy>(p: *const llama_model, none: T, f: impl FnOnce(&HParams) -> T) -> Result<T> {
    let m = model(p)?;
    Ok(m.hparams.as_ref().map_or(none, f))
}

fn i32_of(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// # Safety
/// `model` must be NULL or a live model handle (the same for every getter below).
#[no_mangle]
pub unsafe extern "C" fn llama_model_n_ctx_train(model: *const llama_model) -> i32 {
    entry!(-1, {
        let m = super::handle::model(model)?;
        Ok(m.n_ctx_train().map_or(0, i32_of))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_embd(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_embd)) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_embd_inp(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_embd_inp())) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_embd_out(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.embd_out())) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_layer(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_layer)) })
}

/// No supported architecture runs multi-token-prediction layers; llama.cpp counts a model's
/// cache-only layers as such.
#[no_mangle]
pub unsafe extern "C" fn llama_model_n_layer_nextn(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_layer_cache_only)) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_head(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_head[0])) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_head_kv(model: *const llama_model) -> i32 {
    entry!(-1, { hp_getter(model, 0, |h| i32_of(h.n_head_kv[0])) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_swa(model: *const llama_model) -> i32 {
    entry!(-1, {
        hp_getter(model, 0, |h| {
            let reported = crate::arch::find(h.arch_name).is_ok_and(|a| a.facts().reports_window);
            if reported {
                i32_of(h.n_swa)
            } else {
                0
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_rope_freq_scale_train(model: *const llama_model) -> f32 {
    entry!(0.0, { hp_getter(model, 0.0, |h| { h.rope_freq_scale }) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_cls_out(model: *const llama_model) -> u32 {
    entry!(0, { hp_getter(model, 0, |h| h.n_cls_out()) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_cls_label(model: *const llama_model, i: u32) -> *const c_char {
    entry!(std::ptr::null(), {
        let m = self::model(model)?;
        Ok(m.cls_label(i as usize).map_or(std::ptr::null(), |l| l.as_ptr().cast()))
    })
}

#[deprecated(note = "use llama_model_n_ctx_train instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_n_ctx_train(model: *const llama_model) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_model_n_ctx_train(model) })
    })
}

#[deprecated(note = "use llama_model_n_embd instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_n_embd(model: *const llama_model) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_model_n_embd(model) })
    })
}

#[deprecated(note = "use llama_model_n_layer instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_n_layer(model: *const llama_model) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_model_n_layer(model) })
    })
}

#[deprecated(note = "use llama_model_n_head instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_n_head(model: *const llama_model) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_model_n_head(model) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_get_vocab(model: *const llama_model) -> *const llama_vocab {
    entry!(std::ptr::null(), { vocab_handle(model) })
}

const NO_ROPE: RopeType = RopeType(llama_rope_type::LLAMA_ROPE_TYPE_NONE as c_int);

#[no_mangle]
pub unsafe extern "C" fn llama_model_rope_type(model: *const llama_model) -> RopeType {
    entry!(NO_ROPE, {
        // The loaded hyper-parameters' type: some architectures' depends on the file (GLM-4's
        // M-RoPE sections).
        let m = self::model(model)?;
        let arch_type = m.arch.map_or(NO_ROPE, |a| RopeType(a.facts().rope_type));
        Ok(m.hparams.as_ref().map_or(arch_type, |h| RopeType(h.rope_type)))
    })
}

/// # Safety
/// `key` NULL or NUL-terminated; `buf` valid for `buf_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_val_str(
    model: *const llama_model,
    key: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: an empty string is written on failure, as llama.h promises.
        unsafe { write_c_str(buf, buf_size, b"") };
        let m = self::model(model)?;
        // SAFETY: forwarded contract.
        unsafe { meta_lookup(m.meta(), key, buf, buf_size) }
    })
}

/// The value of `key` in `meta` written to `buf`; -1 when absent (the caller has emptied `buf`,
/// as llama.h promises on failure).
///
/// # Safety
/// `key` NULL or NUL-terminated; `buf` valid for `buf_size` bytes.
pub(crate) unsafe fn meta_lookup(
    meta: &[MetaPair],
    key: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
) -> Result<i32> {
    // SAFETY: forwarded contract.
    let key = unsafe { c_str(key, "key") }?;
    match crate::model::metadata::find_meta(meta, key) {
        // SAFETY: forwarded contract; the stored value ends with NUL, which is not copied.
        Some(v) => Ok(unsafe { write_c_str(buf, buf_size, &v[..v.len() - 1]) }),
        None => Ok(-1),
    }
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_count(model: *const llama_model) -> i32 {
    entry!(-1, { Ok(self::model(model)?.meta().len() as i32) })
}

/// Entry `i` of the metadata of `owner` (a model, an adapter; `meta` reads it), its key or its value
/// as `pick` says, written to `buf`; -1 and an empty `buf` when out of range, as llama.h promises.
///
/// # Safety
/// `buf` valid for `buf_size` bytes.
pub(crate) unsafe fn meta_by_index<T>(
    owner: Result<T>,
    meta: fn(&T) -> &[MetaPair],
    i: i32,
    (buf, buf_size): (*mut c_char, usize),
    pick: fn(&MetaPair) -> &[u8],
) -> Result<i32> {
    // SAFETY: an empty string is written on failure, as llama.h promises.
    unsafe { write_c_str(buf, buf_size, b"") };
    let owner = owner?;
    let Some(kv) = usize::try_from(i).ok().and_then(|i| meta(&owner).get(i)) else {
        return Ok(-1);
    };
    let s = pick(kv);
    // SAFETY: forwarded contract; strip the stored NUL.
    Ok(unsafe { write_c_str(buf, buf_size, &s[..s.len() - 1]) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_key_by_index(
    model: *const llama_model,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        unsafe { meta_by_index(self::model(model), |m| m.meta(), i, (buf, buf_size), |kv| &kv.0) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_meta_val_str_by_index(
    model: *const llama_model,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        unsafe { meta_by_index(self::model(model), |m| m.meta(), i, (buf, buf_size), |kv| &kv.1) }
    })
}

#[no_mangle]
pub extern "C" fn llama_model_meta_key_str(key: ModelMetaKey) -> *const c_char {
    entry!(std::ptr::null(), {
        let name: &'static [u8] = match key.0 {
            0 => b"general.sampling.sequence\0",
            1 => b"general.sampling.top_k\0",
            2 => b"general.sampling.top_p\0",
            3 => b"general.sampling.min_p\0",
            4 => b"general.sampling.xtc_probability\0",
            5 => b"general.sampling.xtc_threshold\0",
            6 => b"general.sampling.temp\0",
            7 => b"general.sampling.penalty_last_n\0",
            8 => b"general.sampling.penalty_repeat\0",
            9 => b"general.sampling.mirostat\0",
            10 => b"general.sampling.mirostat_tau\0",
            11 => b"general.sampling.mirostat_eta\0",
            k => return Err(Error::invalid(format!("unknown model meta key {k}"))),
        };
        Ok(name.as_ptr().cast())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_desc(model: *const llama_model, buf: *mut c_char, buf_size: usize) -> i32 {
    entry!(-1, {
        let m = self::model(model)?;
        // SAFETY: `buf` valid for `buf_size` bytes.
        Ok(unsafe { write_c_str(buf, buf_size, m.desc()) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_ftype(model: *const llama_model) -> Ftype {
    entry!(Ftype(llama_ftype::LLAMA_FTYPE_GUESSED as c_int), {
        Ok(Ftype(self::model(model)?.ftype()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_size(model: *const llama_model) -> u64 {
    entry!(0, { Ok(self::model(model)?.size()) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_n_params(model: *const llama_model) -> u64 {
    entry!(0, { Ok(self::model(model)?.n_params()) })
}

/// The chat template stored in the model (`tokenizer.chat_template` or, for a name,
/// `tokenizer.chat_template.<name>`), or NULL.
///
/// # Safety
/// `name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn llama_model_chat_template(model: *const llama_model, name: *const c_char) -> *const c_char {
    entry!(std::ptr::null(), {
        let m = self::model(model)?;
        let key = if name.is_null() {
            b"tokenizer.chat_template".to_vec()
        } else {
            // SAFETY: non-NULL, NUL-terminated by contract.
            let n = unsafe { c_str(name, "name") }?;
            [b"tokenizer.chat_template.".as_slice(), n].concat()
        };
        Ok(m.meta_value(&key).map_or(std::ptr::null(), |v| v.as_ptr().cast()))
    })
}

/// What the model's architecture says, or `unknown` for an architecture a vocab-only load does
/// not know (llama.cpp's answer for its unknown architecture).
fn arch_flag(
    p: *const llama_model,
    unknown: bool,
    flag: fn(&dyn crate::model::spec::ArchSpec) -> bool,
) -> Result<bool> {
    Ok(model(p)?.arch.map_or(unknown, flag))
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_has_encoder(model: *const llama_model) -> bool {
    entry!(false, { arch_flag(model, false, |a| a.facts().has_encoder) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_has_decoder(model: *const llama_model) -> bool {
    entry!(false, { arch_flag(model, true, |a| a.facts().has_decoder) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_is_recurrent(p: *const llama_model) -> bool {
    entry!(false, {
        let m = model(p)?;
        Ok(m.arch
            .is_some_and(|a| a.facts().memory == crate::model::spec::Memory::Recurrent))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_is_hybrid(p: *const llama_model) -> bool {
    entry!(false, {
        let m = model(p)?;
        // DeepSeek-V4's compressed caches count as hybrid memory, as llama.cpp counts them.
        Ok(m.arch.is_some_and(|a| {
            matches!(
                a.facts().memory,
                crate::model::spec::Memory::Hybrid | crate::model::spec::Memory::Compressed
            )
        }))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_model_is_diffusion(model: *const llama_model) -> bool {
    entry!(false, { arch_flag(model, false, |a| a.facts().is_diffusion) })
}

/// Only encoder-decoder models have a decoder start token.
#[no_mangle]
pub unsafe extern "C" fn llama_model_decoder_start_token(model: *const llama_model) -> llama_token {
    entry!(LLAMA_TOKEN_NULL, {
        let m = self::model(model)?;
        Ok(m.hparams.as_ref().map_or(LLAMA_TOKEN_NULL, |h| h.dec_start_token))
    })
}

#[cfg(test)]
mod tests {
    use super::split_paths;

    #[test]
    fn the_first_split_names_all_splits() {
        assert_eq!(
            split_paths("/m/x-00001-of-00003.gguf"),
            [
                "/m/x-00001-of-00003.gguf",
                "/m/x-00002-of-00003.gguf",
                "/m/x-00003-of-00003.gguf"
            ]
        );
        assert_eq!(split_paths("/m/x-00002-of-00003.gguf"), ["/m/x-00002-of-00003.gguf"]);
        assert_eq!(split_paths("/m/plain.gguf"), ["/m/plain.gguf"]);
    }
}
