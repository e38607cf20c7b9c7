/* Embeddings through the public API (their bits equal llama.cpp's: benches/compare.sh, which the
 * test suite runs on this machine): per-token embeddings with every pooling agree with each other
 * (first and last tokens exactly, the mean closely), logits are the same with embeddings on or off, the getters
 * answer NULL where there is nothing (off, pooled, out of range, unknown sequence), and
 * llama_set_embeddings switches an existing context. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *PROMPT_A = "The capital of France is Paris.";
static const char *PROMPT_B = "def add(a, b): return a + b";

static struct llama_context *new_ctx(struct llama_model *m, bool embeddings, enum llama_pooling_type pooling) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = 2;
    /* One unified cache keeps both sequences in one ubatch. Split per sequence, llama.cpp (and so
     * we) would pool each ubatch separately, and a sequence spread over two would keep only the
     * second ubatch's pooling. */
    cp.kv_unified = true;
    cp.embeddings = embeddings;
    cp.pooling_type = pooling;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    return ctx;
}

/* PROMPT_A as sequence 0 and PROMPT_B as sequence 1 in one batch, logits requested for the last
 * token of each; returns the batch positions of those tokens. */
static void decode_two(struct llama_context *ctx, const struct llama_vocab *v, int *n_a, int *n_b) {
    llama_token a[64], b[64];
    *n_a = llama_tokenize(v, PROMPT_A, (int)strlen(PROMPT_A), a, 64, true, false);
    *n_b = llama_tokenize(v, PROMPT_B, (int)strlen(PROMPT_B), b, 64, true, false);
    struct llama_batch batch = llama_batch_init(*n_a + *n_b, 0, 1);
    batch.n_tokens = *n_a + *n_b;
    for (int i = 0; i < batch.n_tokens; i++) {
        int s = i >= *n_a;
        batch.token[i] = s ? b[i - *n_a] : a[i];
        batch.pos[i] = s ? i - *n_a : i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = s;
        batch.logits[i] = i == *n_a - 1 || i == batch.n_tokens - 1;
    }
    CHECK(llama_decode(ctx, batch) == 0, "decode");
    llama_batch_free(batch);
}

static void check_model(const char *file) {
    struct llama_model *m = tu_load(file, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int ne = llama_model_n_embd(m), nv = llama_vocab_n_tokens(v);
    int n_a, n_b;

    /* One sequence, mean pooling. */
    struct llama_context *one = new_ctx(m, true, LLAMA_POOLING_TYPE_MEAN);
    llama_token a[64];
    int n = llama_tokenize(v, PROMPT_A, (int)strlen(PROMPT_A), a, 64, true, false);
    CHECK(llama_decode(one, llama_batch_get_one(a, n)) == 0, "decode");
    const float *mean = llama_get_embeddings_seq(one, 0);
    CHECK(mean != NULL, "a pooled embedding for sequence 0");
    CHECK(llama_pooling_type(one) == LLAMA_POOLING_TYPE_MEAN, "pooling type reported");
    CHECK(llama_get_embeddings(one) == NULL && llama_get_embeddings_ith(one, 0) == NULL,
          "no per-token embeddings when pooled");

    /* Per-token embeddings of two sequences; every token becomes an output. */
    struct llama_context *tok = new_ctx(m, true, LLAMA_POOLING_TYPE_NONE);
    decode_two(tok, v, &n_a, &n_b);
    int n_all = n_a + n_b;
    float *rows = malloc(sizeof(float) * (size_t)(n_all * ne));
    const float *all = llama_get_embeddings(tok);
    CHECK(all != NULL, "per-token embeddings");
    if (all) {
        memcpy(rows, all, sizeof(float) * (size_t)(n_all * ne));
    }
    CHECK(llama_get_embeddings_ith(tok, 0) == all && llama_get_embeddings_ith(tok, -1) == all + (n_all - 1) * ne,
          "rows by index, negative from the end");
    CHECK(llama_get_embeddings_ith(tok, n_all) == NULL, "an index past the batch");
    CHECK(tu_log_contains("invalid embeddings id"), "is logged");
    CHECK(llama_get_embeddings_seq(tok, 0) == NULL, "no pooled embedding without pooling");
    float *logits_on = malloc(sizeof(float) * (size_t)nv);
    memcpy(logits_on, llama_get_logits_ith(tok, -1), sizeof(float) * (size_t)nv);

    /* First and last tokens' rows exactly; the mean of each sequence's rows closely. */
    struct { enum llama_pooling_type p; int row0, row1; } exact[] = {
        {LLAMA_POOLING_TYPE_CLS, 0, n_a},
        {LLAMA_POOLING_TYPE_LAST, n_a - 1, n_all - 1},
    };
    for (int k = 0; k < 2; k++) {
        struct llama_context *c = new_ctx(m, true, exact[k].p);
        decode_two(c, v, &n_a, &n_b);
        const float *s0 = llama_get_embeddings_seq(c, 0), *s1 = llama_get_embeddings_seq(c, 1);
        CHECK(s0 && memcmp(s0, rows + exact[k].row0 * ne, sizeof(float) * (size_t)ne) == 0, "pooling %d seq 0",
              exact[k].p);
        CHECK(s1 && memcmp(s1, rows + exact[k].row1 * ne, sizeof(float) * (size_t)ne) == 0, "pooling %d seq 1",
              exact[k].p);
        CHECK(llama_get_embeddings_seq(c, 2) == NULL, "no embedding for a sequence not decoded");
        llama_free(c);
    }
    struct llama_context *mc = new_ctx(m, true, LLAMA_POOLING_TYPE_MEAN);
    decode_two(mc, v, &n_a, &n_b);
    const float *m1 = llama_get_embeddings_seq(mc, 1);
    for (int j = 0; m1 && j < ne; j += 37) {
        double sum = 0;
        for (int i = n_a; i < n_all; i++) {
            sum += rows[i * ne + j];
        }
        double want = sum / n_b;
        CHECK(fabs(m1[j] - want) <= 1e-4 * (1 + fabs(want)), "mean of sequence 1 at %d: %f vs %f", j, m1[j], want);
    }
    llama_free(mc);

    /* Embeddings do not change the logits; llama_set_embeddings switches a context. */
    struct llama_context *off = new_ctx(m, false, LLAMA_POOLING_TYPE_UNSPECIFIED);
    decode_two(off, v, &n_a, &n_b);
    CHECK(memcmp(llama_get_logits_ith(off, -1), logits_on, sizeof(float) * (size_t)nv) == 0,
          "logits with embeddings on equal those with them off");
    CHECK(llama_get_embeddings(off) == NULL, "no embeddings when off");
    llama_set_embeddings(off, true);
    llama_memory_clear(llama_get_memory(off), true);
    decode_two(off, v, &n_a, &n_b);
    CHECK(llama_get_embeddings(off) != NULL &&
              memcmp(llama_get_embeddings(off), rows, sizeof(float) * (size_t)(n_all * ne)) == 0,
          "switched on, the same embeddings");

    free(logits_on);
    free(rows);
    llama_free(off);
    llama_free(tok);
    llama_free(one);
    llama_model_free(m);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_model(SMOLLM2_FILE);
    check_model(GEMMA3_FILE);

    /* Rank pooling on a causal model without a classifier head picks each sequence's last token
     * state and reads one score per sequence (llama_model_n_cls_out) from them as llama.cpp does:
     * sequence s's score is value s of the picked states laid end to end, so both come from the
     * first sequence's state (what llama.cpp 0.3.36 returns; benches/compare.sh compares it). */
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    CHECK(llama_model_n_cls_out(m) == 1, "one score without classifier labels");
    struct llama_context *rank = new_ctx(m, true, LLAMA_POOLING_TYPE_RANK);
    struct llama_context *last = new_ctx(m, true, LLAMA_POOLING_TYPE_LAST);
    CHECK(llama_pooling_type(rank) == LLAMA_POOLING_TYPE_RANK, "pooling type");
    int n_a, n_b;
    decode_two(rank, v, &n_a, &n_b);
    decode_two(last, v, &n_a, &n_b);
    const float *state = llama_get_embeddings_seq(last, 0);
    for (int s = 0; s < 2; s++) {
        const float *score = llama_get_embeddings_seq(rank, s);
        CHECK(score && state && score[0] == state[s], "seq %d: score %f is value %d of the picked states %f", s,
              score ? score[0] : NAN, s, state ? state[s] : NAN);
    }
    llama_free(rank);
    llama_free(last);
    llama_model_free(m);
    llama_backend_free();
    return tu_finish("test_embeddings");
}
