/* Decoding through the C API (the logits' bits equal llama.cpp's: benches/compare.sh, which the test
 * suite runs on this machine): invalid batches are refused before any state
 * changes, a full cache returns 1 and leaves the cache as it was, abort returns 2, memory operations
 * (including a K-shift) keep results right, and generation reuses its graph. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct llama_model *model;

static struct llama_context *new_ctx(uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq_max) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_seq_max = n_seq_max;
    cp.no_perf = false;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context: %s\n", llama_engine_last_error());
        exit(2);
    }
    return ctx;
}

static int n_evaluated = 0;

static bool count_nodes(struct ggml_tensor *t, bool ask, void *data) {
    (void)t;
    (void)data;
    if (!ask) {
        n_evaluated++;
    }
    return true;
}

static bool abort_now(void *data) {
    (void)data;
    return true;
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    model = tu_load(SMOLLM2_FILE, false);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    /* Reference prompt 0's tokens (only its tokens are read from the recording), n_ubatch 512. */
    char *line = tu_read_reference(SMOLLM2_REF, "logits.jsonl");
    long long ids[256];
    int n = tu_json_int_array(line, "ids", ids, 256);
    llama_token toks[256];
    for (int i = 0; i < n; i++) {
        toks[i] = (llama_token)ids[i];
    }
    char *eol = strchr(line, '\n');
    if (eol) {
        *eol = 0; /* the first line only: prompt 0 with n_ubatch 512 */
    }
    struct llama_context *ctx = new_ctx(1024, 512, 1);
    CHECK(llama_n_ctx(ctx) == 1024 && llama_n_batch(ctx) == 512 && llama_n_seq_max(ctx) == 1, "getters");
    CHECK(llama_get_model(ctx) == model, "get_model");
    struct llama_batch one = llama_batch_get_one(toks, n);
    CHECK(llama_decode(ctx, one) == 0, "decode prompt 0");
    float *l = llama_get_logits_ith(ctx, -1);
    CHECK(l != NULL && l == llama_get_logits(ctx), "the only output row");
    /* Every logit finite (their bits are llama.cpp's: benches/compare.sh). */
    for (int i = 0; l && i < n_vocab; i++) {
        if (!isfinite(l[i])) {
            CHECK(false, "logit %d is %f", i, l[i]);
            break;
        }
    }
    free(line);
    llama_memory_t mem = llama_get_memory(ctx);
    CHECK(llama_memory_seq_pos_max(mem, 0) == n - 1 && llama_memory_seq_pos_min(mem, 0) == 0, "cache positions");

    /* Invalid batches: -1 with the reason in the log, and the cache untouched. */
    tu_log_clear();
    llama_token bad_token = n_vocab;
    CHECK(tu_decode(ctx, &bad_token, 1, n, 0) == -1, "out-of-range token");
    CHECK(tu_log_contains("invalid token[0]"), "token error logged");
    CHECK(tu_decode(ctx, toks, 1, n + 5, 0) == -1, "position gap");
    CHECK(tu_log_contains("Y = X + 1"), "position error logged");
    CHECK(tu_decode(ctx, toks, 1, n, 3) == -1, "seq id out of range");
    CHECK(tu_log_contains("invalid seq_id[0][0] = 3"), "seq error logged");
    llama_token many[600] = {0};
    CHECK(tu_decode(ctx, many, 600, n, 0) == -1, "more than n_batch");
    CHECK(tu_log_contains("exceeds the context's n_batch"), "n_batch error logged");
    struct llama_batch empty = llama_batch_get_one(toks, 0);
    CHECK(llama_decode(ctx, empty) == -1, "empty batch");
    CHECK(llama_memory_seq_pos_max(mem, 0) == n - 1, "cache unchanged after invalid batches");
    CHECK(llama_get_logits_ith(ctx, 0) == NULL, "no output for token 0");
    CHECK(llama_get_logits_ith(ctx, 99) == NULL, "index out of range");
    CHECK(llama_decode(NULL, one) < 0, "NULL context");

    /* Greedy generation reuses the graph. */
    llama_token next = tu_argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    for (int i = 0; i < 32; i++) {
        CHECK(tu_decode(ctx, &next, 1, n + i, 0) == 0, "generation step %d", i);
        next = tu_argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    struct llama_perf_context_data pd = llama_perf_context(ctx);
    CHECK(pd.n_reused >= 31, "graph reused %d times in 32 steps", pd.n_reused);
    CHECK(pd.n_eval == 32 && pd.n_p_eval == n, "perf counts %d / %d", pd.n_eval, pd.n_p_eval);
    llama_perf_context_reset(ctx);
    CHECK(llama_perf_context(ctx).n_reused == 0, "perf reset");
    llama_free(ctx);

    /* A full cache: 1, and nothing changed. */
    ctx = new_ctx(256, 256, 1);
    mem = llama_get_memory(ctx);
    CHECK(tu_decode(ctx, many, 200, 0, 0) == 0, "200 tokens fit");
    CHECK(tu_decode(ctx, many, 100, 200, 0) == 1, "100 more do not");
    CHECK(llama_memory_seq_pos_max(mem, 0) == 199, "cache as it was: %d", llama_memory_seq_pos_max(mem, 0));
    CHECK(tu_decode(ctx, many, 56, 200, 0) == 0, "the rest still fits");

    /* Abort: 2. */
    llama_memory_clear(mem, true);
    llama_set_abort_callback(ctx, abort_now, NULL);
    CHECK(tu_decode(ctx, toks, n, 0, 0) == 2, "aborted");
    CHECK(llama_memory_seq_pos_max(mem, 0) == -1, "the aborted ubatch left nothing");
    llama_set_abort_callback(ctx, NULL, NULL);
    llama_free(ctx);

    /* K-shift: attention only sees relative positions, so moving every cached position by +10 and
     * asking at position n+10 must give what asking at position n gave before the move — which holds
     * only if the cached keys were re-rotated, up to F16 rounding: llama.cpp itself differs by 0.54 here
     * (maximum over the vocabulary), exactly as we do. */
    ctx = new_ctx(1024, 512, 1);
    mem = llama_get_memory(ctx);
    llama_token probe = 28;
    CHECK(tu_decode(ctx, toks, n, 0, 0) == 0, "prompt");
    CHECK(tu_decode(ctx, &probe, 1, n, 0) == 0, "probe at n");
    float *before = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(before, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)n_vocab);
    llama_memory_clear(mem, true);
    CHECK(tu_decode(ctx, toks, n, 0, 0) == 0, "prompt again");
    CHECK(llama_memory_can_shift(mem), "can shift");
    llama_memory_seq_add(mem, 0, 0, -1, 10);
    CHECK(llama_memory_seq_pos_min(mem, 0) == 10 && llama_memory_seq_pos_max(mem, 0) == n + 9, "shifted positions");
    CHECK(tu_decode(ctx, &probe, 1, n + 10, 0) == 0, "probe at n+10 after the shift");
    float *after = llama_get_logits_ith(ctx, -1);
    float maxdiff = 0;
    for (int i = 0; i < n_vocab; i++) {
        float d = fabsf(after[i] - before[i]);
        maxdiff = d > maxdiff ? d : maxdiff;
    }
    CHECK(maxdiff < 1.0f && tu_argmax(after, n_vocab) == tu_argmax(before, n_vocab), "K-shift max diff %f", maxdiff);
    free(before);
    llama_free(ctx);

    /* Memory operations on sequences, with out-of-range ids refused (not aborted). */
    ctx = new_ctx(1024, 512, 2);
    mem = llama_get_memory(ctx);
    CHECK(tu_decode(ctx, toks, n, 0, 0) == 0, "seq 0");
    llama_memory_seq_cp(mem, 0, 1, -1, -1);
    CHECK(llama_memory_seq_pos_max(mem, 1) == n - 1, "seq_cp");
    CHECK(tu_decode(ctx, &probe, 1, n, 1) == 0, "seq 1 continues on the shared prefix");
    /* The default split cache keeps each sequence in its own stream: keeping sequence 1 leaves
     * sequence 0's stream alone, and only whole sequences can be copied between streams (llama.cpp
     * aborts on a partial copy; we refuse it). */
    llama_memory_seq_keep(mem, 1);
    CHECK(llama_memory_seq_pos_max(mem, 0) == n - 1 && llama_memory_seq_pos_max(mem, 1) == n, "seq_keep");
    tu_log_clear();
    llama_memory_seq_cp(mem, 1, 0, 2, 4);
    CHECK(tu_log_contains("only whole sequences") && llama_memory_seq_pos_max(mem, 0) == n - 1, "partial copy");
    tu_log_clear();
    CHECK(llama_memory_seq_pos_max(mem, 7) == -1 && tu_log_contains("seq_id 7 is out of range"), "bad seq id");
    llama_memory_seq_rm(mem, -1, -1, -1);
    CHECK(llama_memory_seq_pos_max(mem, 1) == -1, "seq_rm of every sequence");
    llama_free(ctx);

    /* The extended batch API, as llama.cpp's own examples use it, gives the same logits. */
    ctx = new_ctx(1024, 512, 2);
    CHECK(tu_decode(ctx, toks, n, 0, 0) == 0, "llama_decode");
    float *want = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(want, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)n_vocab);
    llama_memory_clear(llama_get_memory(ctx), true);
    struct llama_batch_ext *be = llama_batch_ext_init(ctx);
    for (int i = 0; i < n; i++) {
        int32_t idx = llama_batch_ext_add_token(be, 0, toks[i]);
        CHECK(idx == i, "add_token index %d", idx);
        llama_pos p = i;
        CHECK(llama_batch_ext_set_pos(be, idx, &p), "set_pos");
    }
    CHECK(llama_batch_ext_set_output_logits(be, n - 1, true), "set_output");
    CHECK(llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be) == 0, "llama_process");
    CHECK(memcmp(want, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)n_vocab) == 0, "same logits");
    free(want);
    CHECK(llama_batch_ext_add_token(be, 5, toks[0]) == -3, "invalid sequence id");
    CHECK(llama_batch_ext_add_token(be, 0, n_vocab) == -2, "invalid token id");
    CHECK(!llama_batch_ext_set_pos(be, 99, &n), "set_pos out of range");
    llama_batch_ext_clear(be);
    for (int i = 0; i < 512; i++) {
        llama_batch_ext_add_token(be, 0, toks[0]);
    }
    CHECK(llama_batch_ext_add_token(be, 0, toks[0]) == -1, "the batch is full at n_batch");
    llama_batch_ext_free(be);
    llama_batch_ext_free(NULL);
    llama_free(ctx);

    /* cb_eval sees every computed node. */
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.cb_eval = count_nodes;
    ctx = llama_init_from_model(model, cp);
    CHECK(ctx && tu_decode(ctx, toks, n, 0, 0) == 0 && n_evaluated > 100, "cb_eval saw %d nodes", n_evaluated);
    llama_free(ctx);

    llama_model_free(model);
    llama_backend_free();
    return tu_finish("test_decode");
}
