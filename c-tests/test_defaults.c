/* Every *_default_params value and global query equals ../shared/llama-h/defaults.json. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* The text of the JSON object named `name` inside `json` (copied into `out`). */
static void object_of(const char *json, const char *name, char *out, size_t cap) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":{", name);
    const char *p = strstr(json, pat);
    if (!p) {
        fprintf(stderr, "defaults.json has no %s\n", name);
        exit(2);
    }
    p += strlen(pat);
    const char *q = strchr(p, '}');
    size_t n = (size_t)(q - p) < cap - 1 ? (size_t)(q - p) : cap - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

static void check_num(const char *obj, const char *key, double actual) {
    double want;
    bool b;
    if (tu_json_bool(obj, key, &b)) {
        want = b;
    } else if (tu_json_is_null(obj, key)) {
        want = 0; /* NULL pointers */
    } else {
        CHECK(tu_json_double(obj, key, &want), "key %s missing", key);
    }
    CHECK(actual == want, "%s = %g, expected %g", key, actual, want);
}

int main(void) {
    const char *dir = getenv("ENGINE_REFERENCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/../llama-h/defaults.json", dir ? dir : "../shared/reference");
    char *json = tu_read_file(path, NULL);
    char obj[8192];

    struct llama_model_params mp = llama_model_default_params();
    object_of(json, "llama_model_default_params", obj, sizeof obj);
    check_num(obj, "devices", mp.devices != NULL);
    check_num(obj, "tensor_buft_overrides", mp.tensor_buft_overrides != NULL);
    check_num(obj, "n_gpu_layers", mp.n_gpu_layers);
    check_num(obj, "split_mode", mp.split_mode);
    check_num(obj, "load_mode", mp.load_mode);
    check_num(obj, "lazy_mode", mp.lazy_mode);
    check_num(obj, "main_gpu", mp.main_gpu);
    check_num(obj, "tensor_split", mp.tensor_split != NULL);
    check_num(obj, "progress_callback", mp.progress_callback != NULL);
    check_num(obj, "progress_callback_user_data", mp.progress_callback_user_data != NULL);
    check_num(obj, "kv_overrides", mp.kv_overrides != NULL);
    check_num(obj, "vocab_only", mp.vocab_only);
    check_num(obj, "check_tensors", mp.check_tensors);
    check_num(obj, "use_extra_bufts", mp.use_extra_bufts);
    check_num(obj, "no_host", mp.no_host);
    check_num(obj, "no_alloc", mp.no_alloc);
    check_num(obj, "load_mtp", mp.load_mtp);

    struct llama_context_params cp = llama_context_default_params();
    object_of(json, "llama_context_default_params", obj, sizeof obj);
    check_num(obj, "n_ctx", cp.n_ctx);
    check_num(obj, "n_batch", cp.n_batch);
    check_num(obj, "n_ubatch", cp.n_ubatch);
    check_num(obj, "n_seq_max", cp.n_seq_max);
    check_num(obj, "n_rs_seq", cp.n_rs_seq);
    check_num(obj, "n_outputs_max", cp.n_outputs_max);
    check_num(obj, "n_outputs_max_per_seq", cp.n_outputs_max_per_seq);
    /* The one allowed difference: min(4, cores available) threads. */
    CHECK(cp.n_threads >= 1 && cp.n_threads <= 4, "n_threads = %d", cp.n_threads);
    CHECK(cp.n_threads_batch == cp.n_threads, "n_threads_batch = %d", cp.n_threads_batch);
    check_num(obj, "ctx_type", cp.ctx_type);
    check_num(obj, "rope_scaling_type", cp.rope_scaling_type);
    check_num(obj, "pooling_type", cp.pooling_type);
    check_num(obj, "attention_type", cp.attention_type);
    check_num(obj, "flash_attn_type", cp.flash_attn_type);
    check_num(obj, "rope_freq_base", cp.rope_freq_base);
    check_num(obj, "rope_freq_scale", cp.rope_freq_scale);
    check_num(obj, "yarn_ext_factor", cp.yarn_ext_factor);
    check_num(obj, "yarn_attn_factor", cp.yarn_attn_factor);
    check_num(obj, "yarn_beta_fast", cp.yarn_beta_fast);
    check_num(obj, "yarn_beta_slow", cp.yarn_beta_slow);
    check_num(obj, "yarn_orig_ctx", cp.yarn_orig_ctx);
    check_num(obj, "defrag_thold", cp.defrag_thold);
    check_num(obj, "cb_eval", cp.cb_eval != NULL);
    check_num(obj, "cb_eval_user_data", cp.cb_eval_user_data != NULL);
    check_num(obj, "type_k", cp.type_k);
    check_num(obj, "type_v", cp.type_v);
    check_num(obj, "abort_callback", cp.abort_callback != NULL);
    check_num(obj, "abort_callback_data", cp.abort_callback_data != NULL);
    check_num(obj, "embeddings", cp.embeddings);
    check_num(obj, "offload_kqv", cp.offload_kqv);
    check_num(obj, "no_perf", cp.no_perf);
    check_num(obj, "op_offload", cp.op_offload);
    check_num(obj, "swa_full", cp.swa_full);
    check_num(obj, "kv_unified", cp.kv_unified);
    check_num(obj, "samplers", cp.samplers != NULL);
    check_num(obj, "n_samplers", (double)cp.n_samplers);
    check_num(obj, "ctx_other", cp.ctx_other != NULL);

    struct llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    object_of(json, "llama_sampler_chain_default_params", obj, sizeof obj);
    check_num(obj, "no_perf", sp.no_perf);

    check_num(json, "llama_max_devices", (double)llama_max_devices());
    check_num(json, "llama_max_parallel_sequences", (double)llama_max_parallel_sequences());
    check_num(json, "llama_supports_mmap", llama_supports_mmap());
    check_num(json, "llama_supports_mlock", llama_supports_mlock());

    free(json);
    return tu_finish("test_defaults");
}
