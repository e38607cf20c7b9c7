/* A context on a vocab-only model, the usual way to tokenize without loading weights
 * (llama-cpp-python's Llama(vocab_only=True), llama.cpp's tokenizer tests): it is created with the
 * sizes llama.cpp resolves, tokenizes and detokenizes exactly as the full model does, applies the
 * chat template, has no memory (NULL, as in llama.cpp), and refuses to decode with -1 and a reason
 * (llama.cpp aborts there). */
#include "testutil.h"

#include <string.h>

static void check_model(const char *file) {
    struct llama_model *full = tu_load(file, false);
    struct llama_model *vo = tu_load(file, true);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1000;
    cp.n_seq_max = 3;
    struct llama_context *ctx = llama_init_from_model(vo, cp);
    CHECK(ctx != NULL, "%s: a context on the vocab-only model: %s", file, llama_engine_last_error());
    if (!ctx) {
        llama_model_free(vo);
        llama_model_free(full);
        return;
    }
    /* llama.cpp 0.3.36 resolves these for n_ctx 1000, n_seq_max 3, a per-sequence cache. */
    CHECK(llama_n_ctx(ctx) == 1536 && llama_n_ctx_seq(ctx) == 512, "%s: n_ctx %u, n_ctx_seq %u", file,
          llama_n_ctx(ctx), llama_n_ctx_seq(ctx));
    CHECK(llama_n_batch(ctx) == 1000 && llama_n_ubatch(ctx) == 512 && llama_n_seq_max(ctx) == 3,
          "%s: n_batch %u, n_ubatch %u", file, llama_n_batch(ctx), llama_n_ubatch(ctx));
    CHECK(llama_get_model(ctx) == vo, "%s: the context's model", file);
    CHECK(llama_get_memory(ctx) == NULL, "%s: no memory", file);

    const struct llama_vocab *v = llama_model_get_vocab(llama_get_model(ctx));
    const struct llama_vocab *fv = llama_model_get_vocab(full);
    static const char text[] = "Hello world! <start_of_turn>user\n日本語 and émojis 🎉";
    llama_token a[128], b[128];
    int na = llama_tokenize(v, text, (int)strlen(text), a, 128, true, true);
    int nb = llama_tokenize(fv, text, (int)strlen(text), b, 128, true, true);
    CHECK(na > 0 && na == nb && memcmp(a, b, sizeof(llama_token) * (size_t)na) == 0,
          "%s: the same tokens as the full model (%d, %d)", file, na, nb);
    char out[512], out_full[512];
    int n = llama_detokenize(v, a, na, out, sizeof out, false, false);
    int n_full = llama_detokenize(fv, a, na, out_full, sizeof out_full, false, false);
    CHECK(n > 0 && n == n_full && memcmp(out, out_full, (size_t)n) == 0, "%s: the same text back (%d, %d)", file, n,
          n_full);

    struct llama_chat_message chat[] = {{"user", "Hi"}, {"assistant", "Hello."}};
    const char *tmpl = llama_model_chat_template(vo, NULL);
    const char *tmpl_full = llama_model_chat_template(full, NULL);
    CHECK((tmpl == NULL) == (tmpl_full == NULL) && (!tmpl || strcmp(tmpl, tmpl_full) == 0),
          "%s: the same chat template", file);
    if (tmpl) {
        int len = llama_chat_apply_template(tmpl, chat, 2, true, out, sizeof out);
        CHECK(len > 0 && len < (int)sizeof out, "%s: the chat template applies (%d)", file, len);
    }

    tu_log_clear();
    CHECK(llama_decode(ctx, llama_batch_get_one(a, na)) == -1, "%s: decode refused", file);
    CHECK(tu_log_contains("vocab-only"), "%s: the log says why", file);
    CHECK(llama_get_logits(ctx) == NULL && llama_get_logits_ith(ctx, -1) == NULL, "%s: no logits", file);

    /* No n_ctx and no training context to take it from: refused, as llama.cpp refuses it. */
    cp.n_ctx = 0;
    cp.n_seq_max = 1;
    struct llama_context *none = llama_init_from_model(vo, cp);
    CHECK(none == NULL, "%s: n_ctx 0 on a vocab-only model", file);

    llama_free(ctx);
    llama_model_free(vo);
    llama_model_free(full);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_model(SMOLLM2_FILE);
    check_model(GEMMA3_FILE);
    llama_backend_free();
    return tu_finish("test_vocab_only");
}
