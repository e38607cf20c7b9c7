/* Every *_default_params value and global query is the value llama.cpp 0.3.36's sources set (its
 * llama_model_default_params(), llama_context_default_params(), llama_sampler_chain_default_params(),
 * llama_max_devices() and friends, llama_opt_param_filter_all; pointers are NULL where 0 is
 * expected), written out here. benches/compare.sh compares them with llama.cpp's library live
 * (compare_bench's "small" section); this test keeps them where the suite runs without it. */
#include "testutil.h"

#define EXPECT(actual, want)                                                                   \
    CHECK((double)(actual) == (double)(want), "%s = %g, llama.cpp gives %g", #actual, (double)(actual), \
          (double)(want))

int main(void) {
    struct llama_model_params mp = llama_model_default_params();
    EXPECT(mp.devices != NULL, 0);
    EXPECT(mp.tensor_buft_overrides != NULL, 0);
    EXPECT(mp.n_gpu_layers, -1);
    EXPECT(mp.split_mode, 1);
    EXPECT(mp.load_mode, -1);
    EXPECT(mp.lazy_mode, 1);
    EXPECT(mp.main_gpu, 0);
    EXPECT(mp.tensor_split != NULL, 0);
    EXPECT(mp.progress_callback != NULL, 0);
    EXPECT(mp.progress_callback_user_data != NULL, 0);
    EXPECT(mp.kv_overrides != NULL, 0);
    EXPECT(mp.vocab_only, 0);
    EXPECT(mp.check_tensors, 0);
    EXPECT(mp.use_extra_bufts, 1);
    EXPECT(mp.no_host, 0);
    EXPECT(mp.no_alloc, 0);
    EXPECT(mp.load_mtp, 0);

    struct llama_context_params cp = llama_context_default_params();
    EXPECT(cp.n_ctx, 512);
    EXPECT(cp.n_batch, 2048);
    EXPECT(cp.n_ubatch, 512);
    EXPECT(cp.n_seq_max, 1);
    EXPECT(cp.n_rs_seq, 0);
    EXPECT(cp.n_outputs_max, 0);
    EXPECT(cp.n_outputs_max_per_seq, 1);
    /* llama.cpp's thread count, whatever the machine: it decides the bits of flash attention. */
    CHECK(cp.n_threads == GGML_DEFAULT_N_THREADS, "n_threads = %d, llama.cpp's default is 4", cp.n_threads);
    CHECK(cp.n_threads_batch == cp.n_threads, "n_threads_batch = %d", cp.n_threads_batch);
    EXPECT(cp.ctx_type, 0);
    EXPECT(cp.rope_scaling_type, -1);
    EXPECT(cp.pooling_type, -1);
    EXPECT(cp.attention_type, -1);
    EXPECT(cp.flash_attn_type, -1);
    EXPECT(cp.rope_freq_base, 0);
    EXPECT(cp.rope_freq_scale, 0);
    EXPECT(cp.yarn_ext_factor, -1);
    EXPECT(cp.yarn_attn_factor, -1);
    EXPECT(cp.yarn_beta_fast, -1);
    EXPECT(cp.yarn_beta_slow, -1);
    EXPECT(cp.yarn_orig_ctx, 0);
    EXPECT(cp.defrag_thold, -1);
    EXPECT(cp.cb_eval != NULL, 0);
    EXPECT(cp.cb_eval_user_data != NULL, 0);
    EXPECT(cp.type_k, 1);
    EXPECT(cp.type_v, 1);
    EXPECT(cp.abort_callback != NULL, 0);
    EXPECT(cp.abort_callback_data != NULL, 0);
    EXPECT(cp.embeddings, 0);
    EXPECT(cp.offload_kqv, 1);
    EXPECT(cp.no_perf, 1);
    EXPECT(cp.op_offload, 1);
    EXPECT(cp.swa_full, 1);
    EXPECT(cp.kv_unified, 0);
    EXPECT(cp.samplers != NULL, 0);
    EXPECT((double)cp.n_samplers, 0);
    EXPECT(cp.ctx_other != NULL, 0);

    struct llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    EXPECT(sp.no_perf, 1);

    EXPECT((double)llama_max_devices(), 16);
    EXPECT((double)llama_max_parallel_sequences(), 256);
    EXPECT(llama_supports_mmap(), 1);
    EXPECT(llama_supports_mlock(), 1);
    /* The training parameter filter takes every tensor (llama.cpp's ignores its arguments). */
    EXPECT(llama_opt_param_filter_all(NULL, NULL), 1);

    return tu_finish("test_defaults");
}
