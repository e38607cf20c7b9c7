/* What llama.cpp's `common` library (llama-server, llama-cli, ...) asks at every start and every
 * token gets llama.cpp's answers, quietly: the llama_get_sampled_* getters when no backend sampler
 * ran, setting zero LoRA adapters, clearing the control vector, attaching and detaching a
 * threadpool (the context keeps its own thread counts); the version, clock, build features and
 * timings they print. Backend sampling itself: test_backend_sampling.c. */
#include "testutil.h"

#include <string.h>
#include <unistd.h>

int main(void) {
    tu_capture_log();
    llama_backend_init();
    struct llama_model *model = tu_load(SMOLLM2_FILE, false);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    tu_log_clear();
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "a context: %s", llama_engine_last_error());
    if (!ctx) {
        return tu_finish("test_common_queries");
    }

    tu_log_clear();
    CHECK(llama_set_adapters_lora(ctx, NULL, 0, NULL) == 0, "zero LoRA adapters");
    CHECK(llama_set_adapter_cvec(ctx, NULL, 0, llama_model_n_embd(model), 0, 0) == 0, "clearing the control vector");
    /* A pool of the client's own ggml: any non-NULL handle; the engine never runs it. */
    ggml_threadpool_t pool = (ggml_threadpool_t)(void *)&cp;
    llama_attach_threadpool(ctx, pool, pool);
    CHECK(llama_n_threads(ctx) == 2 && llama_n_threads_batch(ctx) == 2, "thread counts kept");

    llama_token prompt[16];
    int n = llama_tokenize(llama_model_get_vocab(model), "The capital of France is", 24, prompt, 16, true, false);
    CHECK(llama_decode(ctx, llama_batch_get_one(prompt, n)) == 0, "decode with a threadpool attached");
    CHECK(llama_get_logits_ith(ctx, -1) != NULL, "logits");

    /* No backend sampler ran: llama.cpp's answers. */
    CHECK(llama_get_sampled_token_ith(ctx, -1) == LLAMA_TOKEN_NULL, "no sampled token");
    CHECK(llama_get_sampled_probs_ith(ctx, -1) == NULL, "no probabilities");
    CHECK(llama_get_sampled_probs_count_ith(ctx, -1) == 0, "no probability count");
    CHECK(llama_get_sampled_logits_ith(ctx, -1) == NULL, "no sampled logits");
    CHECK(llama_get_sampled_logits_count_ith(ctx, -1) == (uint32_t)n_vocab, "n_vocab logits to read");
    CHECK(llama_get_sampled_candidates_count_ith(ctx, -1) == 0, "no candidate count");
    const llama_token *ids = llama_get_sampled_candidates_ith(ctx, -1);
    CHECK(ids != NULL, "the whole vocabulary as candidates");
    for (int i = 0; ids && i < n_vocab; i++) {
        if (ids[i] != i) {
            CHECK(ids[i] == i, "candidate %d is %d", i, ids[i]);
            break;
        }
    }
    llama_detach_threadpool(ctx);
    CHECK(llama_decode(ctx, llama_batch_get_one(&prompt[0], 1)) == 0, "decode after detaching");
    CHECK(!tu_log_contains("not implemented") && !tu_log_contains("invalid"), "nothing was logged as an error");

    /* A control vector of another width is refused, and the log says why (test_lora: the rest). */
    tu_log_clear();
    float data[4] = {0};
    CHECK(llama_set_adapter_cvec(ctx, data, 4, 1, 0, 0) == -1, "a control vector of width 1 was accepted");
    CHECK(tu_log_contains("n_embd"), "and says why");

    /* NULL contexts are refused, not dereferenced. */
    CHECK(llama_get_sampled_logits_count_ith(NULL, 0) == 0 && llama_get_sampled_candidates_ith(NULL, 0) == NULL,
          "NULL context");
    CHECK(llama_set_adapters_lora(NULL, NULL, 0, NULL) == -1, "NULL context for adapters");

    /* What the programs print at start and end: the library's version, the clock, the features of
     * this build (ggml's RPC backend built in), the context's timings (which count the two decodes above). */
    const char *version = llama_version();
    CHECK(version && strstr(version, "engine"), "a version naming the engine: %s", version ? version : "NULL");
    int64_t t0 = llama_time_us();
    usleep(2000);
    CHECK(llama_time_us() - t0 >= 2000, "the clock moves in microseconds");
    CHECK(llama_supports_rpc(), "the RPC backend is built in");
    tu_log_clear();
    llama_perf_context_print(ctx);
    CHECK(tu_log_contains("llama_perf_context_print: prompt eval time") && tu_log_contains("runs"),
          "the timings are printed through the log");

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return tu_finish("test_common_queries");
}
