//! Training: the parameter filter; `llama_opt_init` and `llama_opt_epoch` are not implemented.

use super::entry::entry;
use super::types::*;
use std::ffi::c_void;

/// llama.h's filter that makes every tensor a trainable parameter: true for any tensor, NULL too
/// (llama.cpp's does not look at it either).
#[no_mangle]
pub extern "C" fn llama_opt_param_filter_all(tensor: *const ggml_tensor, userdata: *mut c_void) -> bool {
    let _ = (tensor, userdata);
    entry!(true, { Ok(true) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_opt_init(
    lctx: *mut llama_context,
    model: *mut llama_model,
    lopt_params: llama_opt_params,
) {
    let _ = (lctx, model, lopt_params);
    entry!((), not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_opt_epoch(
    lctx: *mut llama_context,
    dataset: ggml_opt_dataset_t,
    result_train: ggml_opt_result_t,
    result_eval: ggml_opt_result_t,
    idata_split: i64,
    callback_train: ggml_opt_epoch_callback,
    callback_eval: ggml_opt_epoch_callback,
) {
    let _ = (
        lctx,
        dataset,
        result_train,
        result_eval,
        idata_split,
        callback_train,
        callback_eval,
    );
    entry!((), not_implemented)
}
