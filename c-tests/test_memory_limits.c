/* Sizes the machine cannot hold get an error, never an abort: with the address space capped at
 * 6 GiB (setrlimit), a KV cache beyond it makes context creation return NULL, and a batch whose
 * outputs' logits alone would take 68 GB (65,536 tokens, each asking for Gemma 3's 262,144
 * logits) makes llama_decode fail and leaves the cache as it was; a batch that fits then decodes. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "testutil.h"

static struct llama_context *context(struct llama_model *model, uint32_t n_ctx, uint32_t n_batch) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = 256;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    return llama_init_from_model(model, cp);
}

int main(void) {
    tu_capture_log();
    struct rlimit cap = {6ul << 30, 6ul << 30};
    CHECK(setrlimit(RLIMIT_AS, &cap) == 0, "address space capped");
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(tu_model_path(GEMMA3_FILE), llama_model_default_params());
    CHECK(model != NULL, "Gemma 3 loads");
    if (!model) return tu_finish("test_memory_limits");

    /* 2^24 cells of 18 layers' keys and values: far beyond the cap. */
    tu_log_clear();
    CHECK(context(model, 1u << 24, 512) == NULL, "a cache beyond memory is refused");
    CHECK(tu_log_contains("cannot allocate") || tu_log_contains("out of memory"), "with a message saying why");

    const int n = 65536;
    struct llama_context *ctx = context(model, (uint32_t)n, (uint32_t)n);
    CHECK(ctx != NULL, "a 65,536-cell context fits: %s", llama_engine_last_error());
    if (ctx) {
        struct llama_batch b = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; i++) {
            b.token[i] = 2 + i % 1000;
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = n;
        tu_log_clear();
        int rc = llama_decode(ctx, b);
        CHECK(rc < 0, "logits for every one of 65,536 tokens do not fit: %d", rc);
        CHECK(tu_log_contains("out of memory"), "the log says so");
        CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == -1, "the cache is as it was");
        /* The same tokens with only the last one's logits. */
        b.n_tokens = 8;
        for (int i = 0; i < 8; i++) b.logits[i] = i == 7;
        CHECK(llama_decode(ctx, b) == 0, "a batch that fits decodes after: %s", llama_engine_last_error());
        CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == 7, "and is cached");
        llama_batch_free(b);
        llama_free(ctx);
    }
    llama_model_free(model);
    llama_backend_free();
    return tu_finish("test_memory_limits");
}
