/* State save and restore through the public API, for both models: the whole state (memory and
 * session files) and one sequence's state carried to another context or sequence continue exactly
 * as the original does (bit-equal logits for the next token); what llama.h's calls report (sizes,
 * bytes read, token lists); and refusals that leave the cache as it was: truncated or foreign
 * data, a wrong architecture or cache type, short buffers, NULL pointers, too small token arrays.
 * (The layout is llama.cpp's: files written by either engine load in the other; that was checked
 * against llama.cpp 0.3.36 by hand, see docs/design-notes.md.) */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *PROMPT = "The history of Rome begins with a small village on the Tiber, which";

/* n_seq_max sequences in one unified cache (or, with n_seq_max 1, the default cache). */
static struct llama_context *new_ctx(struct llama_model *m, int n_seq_max, bool flash_attn) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = n_seq_max;
    cp.kv_unified = n_seq_max > 1;
    cp.flash_attn_type = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    return ctx;
}

/* Logits after decoding `next` at `pos` in `seq`, copied (the caller frees them). */
static float *next_logits(struct llama_context *ctx, llama_token next, llama_pos pos, llama_seq_id seq, int n_vocab) {
    int rc = tu_decode(ctx, &next, 1, pos, seq);
    CHECK(rc == 0, "decode returned %d", rc);
    float *out = malloc(sizeof(float) * (size_t)n_vocab);
    const float *l = rc == 0 ? llama_get_logits_ith(ctx, -1) : NULL;
    if (l) {
        memcpy(out, l, sizeof(float) * (size_t)n_vocab);
    } else {
        memset(out, 0, sizeof(float) * (size_t)n_vocab);
    }
    return out;
}

static void same(const float *a, const float *b, int n, const char *what) {
    CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "%s: the continuation differs", what);
}

static void check_model(const char *file, bool flash_attn) {
    struct llama_model *m = tu_load(file, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int nv = llama_vocab_n_tokens(v);
    llama_token toks[128];
    int n = llama_tokenize(v, PROMPT, (int)strlen(PROMPT), toks, 128, true, false);
    llama_token next = 1234;

    /* The original: prompt, state taken, then the next token. */
    struct llama_context *a = new_ctx(m, 1, flash_attn);
    CHECK(tu_decode(a, toks, n, 0, 0) == 0, "prompt");
    size_t size = llama_state_get_size(a);
    unsigned char *state = malloc(size);
    CHECK(size > 0 && llama_state_get_data(a, state, size) == size, "state of %zu bytes", size);
    CHECK(llama_state_get_data(a, state, size - 1) == 0, "a short buffer is refused");
    char path[256], seq_path[256];
    snprintf(path, sizeof path, "/tmp/engine-test-state-%d.bin", (int)getpid());
    snprintf(seq_path, sizeof seq_path, "/tmp/engine-test-seq-%d.bin", (int)getpid());
    CHECK(llama_state_save_file(a, path, toks, (size_t)n), "save_file: %s", llama_engine_last_error());
    size_t seq_size = llama_state_seq_get_size(a, 0);
    unsigned char *seq_state = malloc(seq_size);
    CHECK(seq_size > 0 && llama_state_seq_get_data(a, seq_state, seq_size, 0) == seq_size, "seq state");
    /* In memory a sequence's state has an 8-byte head (magic, sequence id) that files do not. */
    size_t seq_file_size = 12 + 4 * (size_t)n + seq_size - 8;
    CHECK(llama_state_seq_save_file(a, seq_path, 0, toks, (size_t)n) == seq_file_size,
          "seq_save_file returns the file size");
    float *want = next_logits(a, next, n, 0, nv);

    /* Whole state from memory into a fresh context. */
    struct llama_context *b = new_ctx(m, 1, flash_attn);
    CHECK(llama_state_set_data(b, state, size) == size, "set_data reads it all: %s", llama_engine_last_error());
    float *got = next_logits(b, next, n, 0, nv);
    same(want, got, nv, "set_data");
    free(got);

    /* From the session file, with its tokens. */
    struct llama_context *c = new_ctx(m, 1, flash_attn);
    llama_token back[128];
    size_t n_back = 0;
    CHECK(!llama_state_load_file(c, path, back, (size_t)n - 1, &n_back), "too small a token array is refused");
    CHECK(llama_memory_seq_pos_max(llama_get_memory(c), 0) == -1, "and the cache is untouched");
    CHECK(llama_state_load_file(c, path, back, 128, &n_back), "load_file: %s", llama_engine_last_error());
    CHECK(n_back == (size_t)n && memcmp(back, toks, sizeof(llama_token) * (size_t)n) == 0, "tokens come back");
    got = next_logits(c, next, n, 0, nv);
    same(want, got, nv, "load_file");
    free(got);

    /* One sequence into another sequence of a two-sequence context, from memory and from a file.
     * As in llama.cpp, the two caches must have as many streams: a cache split per sequence
     * (kv_unified false) has two here, and refuses. */
    struct llama_context_params split = llama_context_default_params();
    split.n_ctx = 512;
    split.n_seq_max = 2;
    split.flash_attn_type = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *s2 = llama_init_from_model(m, split);
    CHECK(llama_state_seq_set_data(s2, seq_state, seq_size, 1) == 0, "a cache of two streams refuses one stream");
    CHECK(tu_log_contains("kv_unified and n_seq_max must match"), "and says why");
    llama_free(s2);
    struct llama_context *d = new_ctx(m, 2, flash_attn);
    CHECK(llama_state_seq_set_data(d, seq_state, seq_size, 1) == seq_size, "seq_set_data: %s",
          llama_engine_last_error());
    CHECK(llama_memory_seq_pos_max(llama_get_memory(d), 1) == n - 1, "sequence 1 holds the prompt");
    CHECK(llama_memory_seq_pos_max(llama_get_memory(d), 0) == -1, "sequence 0 is still empty");
    got = next_logits(d, next, n, 1, nv);
    same(want, got, nv, "seq_set_data");
    free(got);
    size_t n_count = 0;
    CHECK(llama_state_seq_load_file(d, seq_path, 0, NULL, 0, &n_count) == 12 + 4 * (size_t)n && n_count == (size_t)n,
          "a NULL token array asks for the count");
    CHECK(llama_state_seq_load_file(d, seq_path, 0, back, 128, &n_back) == seq_file_size,
          "seq_load_file: %s", llama_engine_last_error());
    got = next_logits(d, next, n, 0, nv);
    same(want, got, nv, "seq_load_file");
    free(got);

    /* Refusals leave the cache as it was: b continues exactly as before afterwards. */
    struct llama_context *e = new_ctx(m, 1, flash_attn);
    CHECK(llama_state_set_data(e, state, size) == size, "restore");
    CHECK(llama_state_set_data(e, state, size / 2) == 0, "truncated data is refused");
    CHECK(tu_log_contains("state data ends at byte"), "with the reason in the log");
    unsigned char junk[64];
    memset(junk, 0x5a, sizeof junk);
    CHECK(llama_state_set_data(e, junk, sizeof junk) == 0, "junk is refused");
    CHECK(llama_state_seq_set_data(e, junk, sizeof junk, 0) == 0, "junk is refused for a sequence");
    CHECK(llama_state_seq_set_data(e, seq_state, seq_size, 5) == 0, "a sequence id out of range is refused");
    CHECK(llama_state_set_data(e, NULL, size) == 0 && llama_state_get_data(e, NULL, size) == 0, "NULL buffers");
    CHECK(!llama_state_load_file(e, "/nonexistent/state.bin", back, 128, &n_back), "a missing file");
    CHECK(!llama_state_load_file(e, seq_path, back, 128, &n_back), "a sequence file is not a session file");
    got = next_logits(e, next, n, 0, nv);
    same(want, got, nv, "after refusals");
    free(got);

    /* Data made under other cache settings does not load. */
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.type_k = GGML_TYPE_F32;
    cp.flash_attn_type = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *f = llama_init_from_model(m, cp);
    CHECK(llama_state_set_data(f, state, size) == 0, "a K cache of another type is refused");
    CHECK(tu_log_contains("type_k/type_v must match"), "and said so");
    struct llama_context *g = new_ctx(m, 1, !flash_attn);
    CHECK(llama_state_set_data(g, state, size) == 0, "V laid out otherwise (flash attention) is refused");

    unlink(path);
    unlink(seq_path);
    free(want);
    free(state);
    free(seq_state);
    llama_free(g);
    llama_free(f);
    llama_free(e);
    llama_free(d);
    llama_free(c);
    llama_free(b);
    llama_free(a);
    llama_model_free(m);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_model(SMOLLM2_FILE, true);
    check_model(SMOLLM2_FILE, false);
    check_model(GEMMA3_FILE, true);

    /* A state belongs to its architecture. */
    struct llama_model *smol = tu_load(SMOLLM2_FILE, false);
    struct llama_model *gemma = tu_load(GEMMA3_FILE, false);
    struct llama_context *a = new_ctx(smol, 1, true);
    struct llama_context *b = new_ctx(gemma, 1, true);
    llama_token t[2] = {1, 2};
    CHECK(tu_decode(a, t, 2, 0, 0) == 0, "decode");
    size_t size = llama_state_get_size(a);
    unsigned char *state = malloc(size);
    CHECK(llama_state_get_data(a, state, size) == size, "state");
    CHECK(llama_state_set_data(b, state, size) == 0, "another architecture's state is refused");
    CHECK(tu_log_contains("is for architecture 'llama'"), "and said so");
    free(state);
    llama_free(b);
    llama_free(a);
    llama_model_free(gemma);
    llama_model_free(smol);
    llama_backend_free();
    return tu_finish("test_state");
}
