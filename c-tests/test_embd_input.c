/* Inputs that are not token ids: a prompt's token embeddings, given as embeddings (llama_batch.embd,
 * llama_batch_ext_add_embd), give the logits of the tokens themselves, bit for bit, when the
 * ubatches are the same: over several ubatches, with only the last logits, after a turn given as
 * tokens, and before one, with an F16 or a Q8_0 cache. Gemma 3 takes embeddings unscaled (its token path scales them), so its
 * rows are taken after the scaling. Bad embeddings, batches mixing kinds and embeddings for a
 * model that takes none are refused with nothing stored. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define N_UBATCH 8

/* The tensor named `capture_name` as the token path computes it ([n_embd, n_tokens] floats; the
 * CPU backend keeps it in host memory). */
static const char *capture_name;
static float *captured;
static size_t captured_n;

static bool capture(struct ggml_tensor *t, bool ask, void *data) {
    (void)data;
    if (strcmp(t->name, capture_name) != 0 || t->type != GGML_TYPE_F32) {
        return !ask;
    }
    if (ask) {
        return true;
    }
    size_t n = (size_t)(t->ne[0] * t->ne[1]);
    float *grown = realloc(captured, (captured_n + n) * sizeof *captured);
    if (grown) {
        captured = grown;
        memcpy(captured + captured_n, t->data, n * sizeof *captured);
        captured_n += n;
    }
    return true;
}

static struct llama_context *context(struct llama_model *model, bool capturing, bool quantized_cache) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    if (quantized_cache) {
        cp.type_k = GGML_TYPE_Q8_0;
        cp.type_v = GGML_TYPE_Q8_0;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    }
    cp.n_ubatch = N_UBATCH;
    cp.n_seq_max = 2;
    cp.kv_unified = true;
    if (capturing) {
        cp.cb_eval = capture;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "no context\n");
        exit(1);
    }
    return ctx;
}

/* Decode entries [from, to) of the prompt in sequence `seq`, as tokens (`rows` NULL) or as the
 * embedding rows; outputs for every entry or the last. */
static int decode_part(struct llama_context *ctx, const llama_token *ids, const float *rows, int n_embd, int from,
                       int to, llama_seq_id seq, bool all) {
    int n = to - from;
    struct llama_batch b = llama_batch_init(n, rows ? n_embd : 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        if (rows) {
            memcpy(b.embd + (size_t)i * n_embd, rows + (size_t)(from + i) * n_embd, sizeof *rows * (size_t)n_embd);
        } else {
            b.token[i] = ids[from + i];
        }
        b.pos[i] = from + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = all || i == n - 1;
    }
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

static bool same_row(struct llama_context *ctx, int i, const float *want, int n_vocab) {
    const float *got = llama_get_logits_ith(ctx, i);
    return got && !memcmp(got, want, sizeof *want * (size_t)n_vocab);
}

static void check_model(const char *file, const char *rows_name, bool quantized_cache) {
    struct llama_model *model = tu_load(file, false);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    int n_embd = llama_model_n_embd(model);
    static const char *chat = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                              "Name three rivers of Europe and say which is longest.<|im_end|>\n<|im_start|>assistant\n";
    llama_token ids[256];
    int n = llama_tokenize(vocab, chat, (int)strlen(chat), ids, 256, true, true);
    CHECK(n > 3 * N_UBATCH, "%s: the prompt spans several ubatches (%d tokens)", file, n);

    /* The tokens: every row's logits, and the rows the graph embedded them to. */
    capture_name = rows_name;
    captured_n = 0;
    struct llama_context *ctx = context(model, true, quantized_cache);
    CHECK(decode_part(ctx, ids, NULL, n_embd, 0, n, 0, true) == 0, "%s: tokens decode", file);
    CHECK(captured_n == (size_t)n * (size_t)n_embd, "%s: %zu floats of '%s' captured", file, captured_n, rows_name);
    if (captured_n != (size_t)n * (size_t)n_embd) {
        llama_free(ctx);
        llama_model_free(model);
        return;
    }
    float *rows = captured;
    captured = NULL;
    float *want = malloc(sizeof *want * (size_t)n * (size_t)n_vocab);
    for (int i = 0; i < n; i++) {
        memcpy(want + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i), sizeof *want * (size_t)n_vocab);
    }
    /* The same prompt in two turns (a chat history, then its continuation), as tokens. */
    int h = 13;
    llama_memory_clear(llama_get_memory(ctx), true);
    CHECK(decode_part(ctx, ids, NULL, n_embd, 0, h, 0, false) == 0, "%s: first turn", file);
    CHECK(decode_part(ctx, ids, NULL, n_embd, h, n, 0, false) == 0, "%s: second turn", file);
    float *want_turns = malloc(sizeof *want_turns * (size_t)n_vocab);
    memcpy(want_turns, llama_get_logits_ith(ctx, -1), sizeof *want_turns * (size_t)n_vocab);
    llama_free(ctx);

    ctx = context(model, false, quantized_cache);
    struct llama_memory_i *mem = llama_get_memory(ctx);
    /* Every row, over ubatches of 8. */
    CHECK(decode_part(ctx, ids, rows, n_embd, 0, n, 0, true) == 0, "%s: embeddings decode", file);
    int same = 0;
    for (int i = 0; i < n; i++) {
        same += same_row(ctx, i, want + (size_t)i * n_vocab, n_vocab);
    }
    CHECK(same == n, "%s: %d of %d rows are the tokens' logits", file, same, n);
    /* Only the last logits. */
    llama_memory_clear(mem, true);
    CHECK(decode_part(ctx, ids, rows, n_embd, 0, n, 0, false) == 0, "%s: last-only decode", file);
    CHECK(same_row(ctx, -1, want + (size_t)(n - 1) * n_vocab, n_vocab), "%s: last row", file);
    CHECK(llama_memory_seq_pos_max(mem, 0) == n - 1, "%s: the cache holds the prompt", file);
    /* Tokens, then embeddings continuing the sequence; and embeddings, then tokens. */
    llama_memory_clear(mem, true);
    CHECK(decode_part(ctx, ids, NULL, n_embd, 0, h, 0, false) == 0, "%s: tokens first", file);
    CHECK(decode_part(ctx, ids, rows, n_embd, h, n, 0, false) == 0, "%s: then embeddings", file);
    CHECK(same_row(ctx, -1, want_turns, n_vocab), "%s: tokens then embeddings", file);
    llama_memory_clear(mem, true);
    CHECK(decode_part(ctx, ids, rows, n_embd, 0, h, 0, false) == 0, "%s: embeddings first", file);
    CHECK(decode_part(ctx, ids, NULL, n_embd, h, n, 0, false) == 0, "%s: then tokens", file);
    CHECK(same_row(ctx, -1, want_turns, n_vocab), "%s: embeddings then tokens", file);

    /* The extended batch, in sequence 1 beside sequence 0. */
    struct llama_batch_ext *be = llama_batch_ext_init(ctx);
    for (int i = 0; i < n; i++) {
        struct llama_embd e = {rows + (size_t)i * n_embd, 1, (size_t)n_embd};
        int idx = llama_batch_ext_add_embd(be, 1, e);
        llama_pos pos = i;
        CHECK(idx == i && llama_batch_ext_set_pos(be, idx, &pos), "%s: entry %d", file, i);
    }
    llama_batch_ext_set_output_logits(be, n - 1, true);
    CHECK(llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be) == 0, "%s: llama_process", file);
    CHECK(same_row(ctx, -1, want + (size_t)(n - 1) * n_vocab, n_vocab), "%s: llama_process's last row", file);
    CHECK(llama_memory_seq_pos_max(mem, 1) == n - 1, "%s: sequence 1 holds the prompt", file);

    /* Refusals. A row of the wrong size, or none: -2, the batch as it was. */
    llama_batch_ext_clear(be);
    struct llama_embd short_row = {rows, 1, (size_t)n_embd - 1};
    struct llama_embd no_data = {NULL, 1, (size_t)n_embd};
    struct llama_embd two_halves = {rows, 2, (size_t)n_embd / 2};
    tu_log_clear();
    CHECK(llama_batch_ext_add_embd(be, 0, short_row) == -2, "%s: a short row", file);
    CHECK(tu_log_contains("size mismatch"), "%s: the log says why: %s", file, tu_log_text());
    CHECK(llama_batch_ext_add_embd(be, 0, no_data) == -2, "%s: no data", file);
    CHECK(llama_batch_ext_add_embd(be, 5, two_halves) == -3, "%s: a bad sequence id", file);
    /* Two rows of half the width make one row, as in llama.cpp. */
    CHECK(llama_batch_ext_add_embd(be, 0, two_halves) == 0, "%s: rows x width", file);
    CHECK(!llama_batch_ext_set_embd_token(be, 0, two_halves), "%s: a second embedding", file);
    CHECK(!llama_batch_ext_set_embd_token(be, 7, two_halves), "%s: no such entry", file);
    CHECK(!llama_batch_ext_set_embd_state(be, 0, two_halves), "%s: state embeddings are not taken", file);
    /* An entry of each kind: refused, nothing stored. */
    llama_memory_clear(mem, true);
    llama_batch_ext_clear(be);
    llama_pos p0 = 0, p1 = 1;
    int t = llama_batch_ext_add_token(be, 0, ids[0]);
    struct llama_embd row1 = {rows + n_embd, 1, (size_t)n_embd};
    int e = llama_batch_ext_add_embd(be, 0, row1);
    CHECK(t == 0 && e == 1, "%s: entries %d %d", file, t, e);
    llama_batch_ext_set_pos(be, t, &p0);
    llama_batch_ext_set_pos(be, e, &p1);
    tu_log_clear();
    CHECK(llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be) == -1, "%s: a mixed batch", file);
    CHECK(tu_log_contains("same kinds of input"), "%s: the log says why: %s", file, tu_log_text());
    CHECK(llama_memory_seq_pos_max(mem, 0) == -1, "%s: nothing stored", file);
    /* A token with an embedding as well is decoded by its id (the row is for other stages). */
    llama_batch_ext_clear(be);
    for (int i = 0; i < n; i++) {
        int idx = llama_batch_ext_add_token(be, 0, ids[i]);
        struct llama_embd wrong = {rows, 1, (size_t)n_embd};
        llama_pos pos = i;
        llama_batch_ext_set_pos(be, idx, &pos);
        CHECK(llama_batch_ext_set_embd_token(be, idx, wrong), "%s: embedding beside token %d", file, i);
    }
    llama_batch_ext_set_output_logits(be, n - 1, true);
    CHECK(llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be) == 0, "%s: tokens with embeddings", file);
    CHECK(same_row(ctx, -1, want + (size_t)(n - 1) * n_vocab, n_vocab), "%s: the ids decide", file);
    llama_batch_ext_free(be);

    /* A failed embeddings decode (a bad sequence id at the end) leaves the cache as it was. */
    struct llama_batch b = llama_batch_init(2, n_embd, 1);
    b.n_tokens = 2;
    memcpy(b.embd, rows, sizeof *rows * 2 * (size_t)n_embd);
    for (int i = 0; i < 2; i++) {
        b.pos[i] = n + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = i == 0 ? 0 : 9;
        b.logits[i] = 1;
    }
    CHECK(llama_decode(ctx, b) == -1, "%s: a bad sequence id", file);
    CHECK(llama_memory_seq_pos_max(mem, 0) == n - 1, "%s: the cache as it was", file);
    llama_batch_free(b);

    free(want_turns);
    free(want);
    free(rows);
    llama_free(ctx);
    llama_model_free(model);
}

/* GLM-4.5 without M-RoPE sections takes no embeddings (llama.cpp stops the process): refused,
 * nothing stored. */
static void check_refused(void) {
    const char *dir = getenv("ENGINE_GEN_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/glm4moe-f32.gguf", dir ? dir : ".");
    struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
    CHECK(model != NULL, "%s loads", path);
    if (!model) {
        return;
    }
    struct llama_context *ctx = context(model, false, false);
    int n_embd = llama_model_n_embd(model);
    float *rows = calloc((size_t)n_embd * 4, sizeof *rows);
    tu_log_clear();
    CHECK(decode_part(ctx, NULL, rows, n_embd, 0, 4, 0, false) == -1, "glm4moe: embeddings refused");
    CHECK(tu_log_contains("no M-RoPE sections"), "glm4moe: the log says why: %s", tu_log_text());
    CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == -1, "glm4moe: nothing stored");
    free(rows);
    llama_free(ctx);
    llama_model_free(model);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_model(SMOLLM2_FILE, "embd", false);
    check_model(SMOLLM2_FILE, "embd", true);
    check_model(GEMMA3_FILE, "inp_scaled", false);
    check_refused();
    return tu_finish("test_embd_input");
}
