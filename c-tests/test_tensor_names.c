/* A cb_eval callback sees the graph's tensors under the names llama.cpp gives them, which
 * llama-eval-callback prints, llama-imatrix keys on and llama-cvector-generator reads (`l_out-N`). */
#include "testutil.h"

#include <string.h>

#define MAX_NAMES 4096

static char seen[MAX_NAMES][64];
static int n_seen;

static bool collect(struct ggml_tensor *t, bool ask, void *data) {
    (void)data;
    if (ask && n_seen < MAX_NAMES) {
        /* The name field itself: ggml is private to the library, so ggml_get_name is not ours to call. */
        memcpy(seen[n_seen], t->name, sizeof seen[n_seen]);
        seen[n_seen][sizeof seen[n_seen] - 1] = 0;
        n_seen++;
    }
    return true; /* ask to observe every tensor, and go on after each */
}

static bool was_seen(const char *name) {
    for (int i = 0; i < n_seen; i++) {
        if (strcmp(seen[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static void check_model(const char *file, const char *const *names, int n_names) {
    struct llama_model *model = tu_load(file, false);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.cb_eval = collect;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "%s: context", file);
    llama_token prompt[16];
    int n = llama_tokenize(llama_model_get_vocab(model), "The capital of France is", 24, prompt, 16, true, false);
    n_seen = 0;
    CHECK(llama_decode(ctx, llama_batch_get_one(prompt, n)) == 0, "%s: decode", file);
    for (int i = 0; i < n_names; i++) {
        CHECK(was_seen(names[i]), "%s: no tensor named %s", file, names[i]);
    }
    char last[32];
    snprintf(last, sizeof last, "l_out-%d", llama_model_n_layer(model) - 1);
    CHECK(was_seen(last), "%s: no %s", file, last);
    llama_free(ctx);
    llama_model_free(model);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    /* The names llama.cpp's llama and gemma3 graphs give (src/models/llama.cpp, gemma3.cpp). */
    static const char *const llama_names[] = {"embd",       "norm-0",      "attn_norm-0",   "Qcur-0",
                                              "Kcur-0",     "Vcur-0",
                                              "kqv_out-0",  "attn_out-0",  "ffn_inp-0",     "ffn_norm-0",
                                              "ffn_gate-0", "ffn_up-0",    "ffn_swiglu-0",  "ffn_out-0",
                                              "l_out-0",    "norm",        "result_norm",   "result_output"};
    static const char *const gemma_names[] = {"embd",          "inp_scaled",    "attn_norm-0",    "Qcur-0",
                                              "Qcur_normed-0", "Kcur_normed-0", "Kcur-0",         "Vcur-0",
                                              "attn_post_norm-0", "sa_out-0",   "ffn_norm-0",     "ffn_geglu-0",
                                              "ffn_out-0",     "ffn_post_norm-0", "l_out-0",      "result_norm",
                                              "result_output"};
    check_model(SMOLLM2_FILE, llama_names, (int)(sizeof llama_names / sizeof llama_names[0]));
    check_model(GEMMA3_FILE, gemma_names, (int)(sizeof gemma_names / sizeof gemma_names[0]));
    llama_backend_free();
    return tu_finish("test_tensor_names");
}
