//! Training: the parameter filter, `llama_opt_init` and `llama_opt_epoch` over ggml's optimizer.
//! Both return nothing in llama.h: a refusal is reported through the log (and
//! `llama_engine_last_error`), and the context is left as it was.

use super::entry::entry;
use super::handle;
use super::types::*;
use crate::context::OptSetup;
use crate::error::Error;
use crate::ggml::opt::{Dataset, OptResult};
use crate::ggml::TensorRef;
use std::ffi::c_void;
use std::ptr::NonNull;

/// llama.h's filter that makes every tensor a trainable parameter: true for any tensor, NULL too
/// (llama.cpp's does not look at it either).
#[no_mangle]
pub extern "C" fn llama_opt_param_filter_all(tensor: *const ggml_tensor, userdata: *mut c_void) -> bool {
    let _ = (tensor, userdata);
    entry!(true, { Ok(true) })
}

/// # Safety
/// `lctx` and `model` must be NULL or live handles; the callbacks in `lopt_params` must be NULL
/// or callable with their user data (the optimizer's for as long as the context trains).
#[no_mangle]
pub unsafe extern "C" fn llama_opt_init(
    lctx: *mut llama_context,
    model: *mut llama_model,
    lopt_params: llama_opt_params,
) {
    entry!((), {
        let mut c = handle::ctx_mut(lctx)?;
        let m = handle::model(model)?;
        if !std::ptr::eq(c.model, &*m) {
            return Err(Error::invalid("the model is not the one the context was made with"));
        }
        let Some(filter) = lopt_params.param_filter else {
            return Err(Error::invalid(
                "param_filter is NULL (llama_opt_param_filter_all trains every weight)",
            ));
        };
        let ud = lopt_params.param_filter_ud;
        // SAFETY: the caller's filter with its user data, asked about one of the model's tensors.
        let mut filter = |t: TensorRef| unsafe { filter(t.as_ptr(), ud) };
        c.opt_init(OptSetup {
            n_ctx_train: lopt_params.n_ctx_train,
            filter: &mut filter,
            get_opt_pars: (lopt_params.get_opt_pars, lopt_params.get_opt_pars_ud),
            optimizer: i32::try_from(lopt_params.optimizer_type).unwrap_or(i32::MAX),
        })
    })
}

/// # Safety
/// `lctx` must be NULL or a live handle, `dataset` NULL or a live dataset of this process's ggml,
/// the results NULL or live results, the callbacks NULL or callable.
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
    entry!((), {
        let mut c = handle::ctx_mut(lctx)?;
        let dataset = NonNull::new(dataset).ok_or_else(|| Error::invalid("dataset is NULL"))?;
        // SAFETY: a live dataset and results of this process's ggml, or NULL results (forwarded
        // contract); ggml records nothing for a NULL result.
        let (dataset, results) = unsafe {
            (
                Dataset::from_raw(dataset),
                [OptResult::from_raw(result_train), OptResult::from_raw(result_eval)],
            )
        };
        c.opt_epoch(dataset, results, idata_split, [callback_train, callback_eval])
    })
}
