/* Batches longer than n_ubatch whose ubatches carry outputs anywhere or nowhere: a prompt with
 * logits for its last token only (every chat turn), for its first only, for a few, for none; one
 * sequence or several, in a per-sequence or a unified cache. Each decodes, caches every token, and
 * gives the rows a decode with every output gives. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 300
#define N_UBATCH 64

static struct llama_model *model;
static int n_vocab;
static llama_token toks[N_TOK];

static struct llama_context *new_ctx(uint32_t n_ubatch, uint32_t n_seq_max, bool unified) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 1024;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = n_seq_max;
    cp.kv_unified = unified;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context: %s\n", llama_engine_last_error());
        exit(2);
    }
    return ctx;
}

/* Decode toks[from, to) of sequence `seq` at their own positions; outputs where want[i] is set. */
static int decode_range(struct llama_context *ctx, int from, int to, llama_seq_id seq, const bool *want) {
    struct llama_batch b = llama_batch_init(to - from, 0, 1);
    for (int i = from; i < to; i++) {
        int k = b.n_tokens++;
        b.token[k] = toks[i];
        b.pos[k] = i;
        b.n_seq_id[k] = 1;
        b.seq_id[k][0] = seq;
        b.logits[k] = want[i];
    }
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

static float max_diff(const float *a, const float *b) {
    float d = 0;
    for (int i = 0; i < n_vocab; i++) {
        d = fmaxf(d, fabsf(a[i] - b[i]));
    }
    return d;
}

/* The row of every position from one decode with every output. */
static float *all_rows(uint32_t n_ubatch) {
    bool want[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        want[i] = true;
    }
    struct llama_context *ctx = new_ctx(n_ubatch, 1, false);
    CHECK(decode_range(ctx, 0, N_TOK, 0, want) == 0, "decode with every output");
    float *rows = malloc(sizeof(float) * (size_t)n_vocab * N_TOK);
    memcpy(rows, llama_get_logits(ctx), sizeof(float) * (size_t)n_vocab * N_TOK);
    llama_free(ctx);
    return rows;
}

static void check_pattern(const char *name, const float *ref, const int *outs, int n_outs) {
    bool want[N_TOK] = {false};
    for (int k = 0; k < n_outs; k++) {
        want[outs[k]] = true;
    }
    struct llama_context *ctx = new_ctx(N_UBATCH, 1, false);
    tu_log_clear();
    int rc = decode_range(ctx, 0, N_TOK, 0, want);
    CHECK(rc == 0, "%s: decode returned %d: %s", name, rc, llama_engine_last_error());
    CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == N_TOK - 1, "%s: every token is cached", name);
    for (int k = 0; rc == 0 && k < n_outs; k++) {
        const float *row = llama_get_logits_ith(ctx, outs[k]);
        CHECK(row != NULL, "%s: a row for output %d", name, outs[k]);
        if (row) {
            float d = max_diff(row, ref + (size_t)outs[k] * n_vocab);
            CHECK(d < 1e-3f, "%s: position %d differs by %g from a decode with every output", name, outs[k], d);
        }
        CHECK(llama_get_logits_ith(ctx, k - n_outs) == row, "%s: output %d counted from the end", name, k);
    }
    if (n_outs < N_TOK) {
        int not_out = want[1] ? 2 : 1;
        CHECK(llama_get_logits_ith(ctx, not_out) == NULL, "%s: no row where no output was asked", name);
    }
    /* The cache holds what it should: the next token continues from there. */
    llama_token next = toks[7];
    struct llama_batch one = llama_batch_get_one(&next, 1);
    CHECK(llama_decode(ctx, one) == 0, "%s: the next decode", name);
    CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == N_TOK, "%s: continued at %d", name, N_TOK);
    llama_free(ctx);
}

/* The row of the token after toks[0, N_TOK - 1), decoded with every output or with none: what a
 * ubatch outputs must not change what it caches, so the two are identical. */
static float *next_row(bool outputs) {
    bool want[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        want[i] = outputs;
    }
    struct llama_context *ctx = new_ctx(N_UBATCH, 1, false);
    CHECK(decode_range(ctx, 0, N_TOK - 1, 0, want) == 0, "outputs %d: decode", outputs);
    CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == N_TOK - 2, "outputs %d: every token is cached",
          outputs);
    want[N_TOK - 1] = true;
    CHECK(decode_range(ctx, N_TOK - 1, N_TOK, 0, want) == 0, "outputs %d: the next decode", outputs);
    float *row = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(row, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)n_vocab);
    llama_free(ctx);
    return row;
}

/* Three sequences of 200, 7 and 93 tokens in one batch; with every output and with only the last
 * one's, that row is the same. */
static float *sequences_row(bool unified, uint32_t n_ubatch, bool every_output) {
    const int start[3] = {0, 200, 207}, end[3] = {200, 207, N_TOK};
    struct llama_batch b = llama_batch_init(N_TOK, 0, 1);
    for (int s = 0; s < 3; s++) {
        for (int i = start[s]; i < end[s]; i++) {
            int k = b.n_tokens++;
            b.token[k] = toks[i];
            b.pos[k] = i - start[s];
            b.n_seq_id[k] = 1;
            b.seq_id[k][0] = s;
            b.logits[k] = every_output || (s == 2 && i == end[s] - 1);
        }
    }
    struct llama_context *ctx = new_ctx(n_ubatch, 3, unified);
    int rc = llama_decode(ctx, b);
    CHECK(rc == 0, "sequences (unified %d, ubatch %u): decode returned %d: %s", unified, n_ubatch, rc,
          llama_engine_last_error());
    llama_memory_t mem = llama_get_memory(ctx);
    for (int s = 0; s < 3; s++) {
        CHECK(llama_memory_seq_pos_max(mem, s) == end[s] - start[s] - 1, "sequence %d is cached", s);
    }
    float *row = malloc(sizeof(float) * (size_t)n_vocab);
    const float *got = llama_get_logits_ith(ctx, N_TOK - 1);
    CHECK(got != NULL, "sequences: a row for the last token");
    if (got) {
        memcpy(row, got, sizeof(float) * (size_t)n_vocab);
    }
    llama_free(ctx);
    llama_batch_free(b);
    return row;
}

static void check_sequences(bool unified, uint32_t n_ubatch) {
    float *every = sequences_row(unified, n_ubatch, true);
    float *last = sequences_row(unified, n_ubatch, false);
    float d = max_diff(every, last);
    CHECK(d < 1e-3f, "sequences (unified %d, ubatch %u): the last row differs by %g with fewer outputs", unified,
          n_ubatch, d);
    free(every);
    free(last);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    model = tu_load(SMOLLM2_FILE, false);
    n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const char *text = "Once upon a time, in a small village by the sea, there lived an old fisherman who told "
                       "stories to anyone who would listen. ";
    char long_text[8192] = "";
    for (int i = 0; i < 20; i++) {
        strcat(long_text, text);
    }
    int n = llama_tokenize(llama_model_get_vocab(model), long_text, (int)strlen(long_text), toks, N_TOK, true, false);
    CHECK(n < 0 || n >= N_TOK, "the text gives at least %d tokens (%d)", N_TOK, n);

    float *ref = all_rows(N_UBATCH);
    const int last[] = {N_TOK - 1}, first[] = {0}, some[] = {3, 150, N_TOK - 1}, ends[] = {0, N_TOK - 1};
    check_pattern("last token only", ref, last, 1);
    check_pattern("first token only", ref, first, 1);
    check_pattern("three outputs", ref, some, 3);
    check_pattern("first and last", ref, ends, 2);
    float *after_every = next_row(true), *after_none = next_row(false);
    CHECK(memcmp(after_every, after_none, sizeof(float) * (size_t)n_vocab) == 0,
          "a batch without outputs caches what one with every output caches");
    free(after_every);
    free(after_none);
    check_sequences(false, N_UBATCH);
    check_sequences(true, N_UBATCH);
    check_sequences(false, 7);
    free(ref);

    /* Ubatches of one token: every ubatch but one has no output. */
    float *ref1 = all_rows(1);
    struct llama_context *ctx = new_ctx(1, 1, false);
    bool want[N_TOK] = {false};
    want[N_TOK - 1] = true;
    CHECK(decode_range(ctx, 0, N_TOK, 0, want) == 0, "n_ubatch 1: decode");
    const float *row = llama_get_logits_ith(ctx, -1);
    CHECK(row != NULL && max_diff(row, ref1 + (size_t)(N_TOK - 1) * n_vocab) < 1e-3f, "n_ubatch 1: the last row");
    llama_free(ctx);
    free(ref1);

    llama_model_free(model);
    llama_backend_free();
    return tu_finish("test_ubatch_outputs");
}
