/* llama_model_save_to_file: SmolLM2 and Gemma 3 (sliding-window layers) saved and loaded again give
 * the same logits, bit for bit, and the same vocabulary; a saved file is written whole or not at all
 * (an unwritable path, a vocabulary-only model, NULL arguments:
 * a log line, no file, no crash). That the bytes are llama.cpp's is checked against llama.cpp by
 * benches/compare.sh. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";

/* The last logits of PROMPT through a fresh context of `model` (n_vocab floats, malloc'd). */
static float *prompt_logits(struct llama_model *model) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    llama_token tokens[64];
    int n = llama_tokenize(vocab, PROMPT, (int)strlen(PROMPT), tokens, 64, true, true);
    CHECK(n > 0, "tokenize: %d", n);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "context");
    CHECK(tu_decode(ctx, tokens, n, 0, 0) == 0, "decode");
    int n_vocab = llama_vocab_n_tokens(vocab);
    float *out = malloc(sizeof(float) * (size_t)n_vocab);
    memcpy(out, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)n_vocab);
    llama_free(ctx);
    return out;
}

static bool exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* Saves `model` (read from `file`) to `path`, loads the saved file and compares it with the
 * original; frees `model`. */
static void roundtrip_model(struct llama_model *model, const char *file, const char *path) {
    float *before = prompt_logits(model);
    tu_log_clear();
    llama_model_save_to_file(model, path);
    CHECK(exists(path), "%s: no file saved: %s", file, tu_log_text());
    struct llama_model *again = llama_model_load_from_file(path, llama_model_default_params());
    CHECK(again != NULL, "%s: the saved file does not load: %s", file, llama_engine_last_error());
    if (again) {
        const struct llama_vocab *v1 = llama_model_get_vocab(model), *v2 = llama_model_get_vocab(again);
        int n_vocab = llama_vocab_n_tokens(v1);
        CHECK(n_vocab == llama_vocab_n_tokens(v2), "%s: vocabulary size", file);
        CHECK(llama_vocab_eos(v1) == llama_vocab_eos(v2) && llama_vocab_bos(v1) == llama_vocab_bos(v2),
              "%s: special tokens", file);
        CHECK(llama_model_n_params(model) == llama_model_n_params(again), "%s: parameter count", file);
        float *after = prompt_logits(again);
        CHECK(memcmp(before, after, sizeof(float) * (size_t)n_vocab) == 0, "%s: the saved model's logits differ", file);
        free(after);
        llama_model_free(again);
    }
    free(before);
    llama_model_free(model);
    remove(path);
}

static void roundtrip(const char *file, const char *path) {
    roundtrip_model(tu_load(file, false), file, path);
}

int main(void) {
    tu_capture_log();
    char dir[] = "/tmp/engine-test-save-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[512];
    snprintf(path, sizeof path, "%s/saved.gguf", dir);
    roundtrip("SmolLM2-135M-Instruct.Q4_1.gguf", path);
    roundtrip("gemma-3-270m-q4_k_m.gguf", path);

    struct llama_model *model = tu_load("SmolLM2-135M-Instruct.Q4_1.gguf", false);
    /* A directory that does not exist: logged, nothing written. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/saved.gguf", dir);
    tu_log_clear();
    llama_model_save_to_file(model, bad);
    CHECK(tu_log_contains("cannot save the model"), "no log line for an unwritable path");
    CHECK(!exists(bad), "a file appeared at an unwritable path");

    tu_log_clear();
    llama_model_save_to_file(model, NULL);
    CHECK(tu_log_contains("path_model"), "no log line for a NULL path");
    tu_log_clear();
    llama_model_save_to_file(NULL, path);
    CHECK(!exists(path), "saved a NULL model");
    llama_model_free(model);

    /* Generated models: GLM-4.5, whose expert gating llama.cpp's loader sets itself (sigmoid when
     * the file says none), and HRM-Text, whose cycles run the same blocks again, save and load
     * again. */
    const char *gen = getenv("ENGINE_GEN_DIR");
    const char *generated[] = {"glm4moe-f32.gguf", "hrm_text-f32.gguf"};
    for (size_t i = 0; i < sizeof generated / sizeof *generated; i++) {
        char file[600];
        snprintf(file, sizeof file, "%s/%s", gen ? gen : ".", generated[i]);
        struct llama_model *m = llama_model_load_from_file(file, llama_model_default_params());
        CHECK(m != NULL, "cannot load %s", file);
        if (m) {
            roundtrip_model(m, file, path);
        }
    }

    struct llama_model *vocab_only = tu_load("SmolLM2-135M-Instruct.Q4_1.gguf", true);
    tu_log_clear();
    llama_model_save_to_file(vocab_only, path);
    CHECK(tu_log_contains("vocabulary-only"), "no refusal logged for a vocabulary-only model");
    CHECK(!exists(path), "a vocabulary-only model was saved");
    llama_model_free(vocab_only);

    rmdir(dir);
    return tu_finish("test_save");
}
