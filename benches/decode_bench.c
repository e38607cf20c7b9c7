/* Prompt processing and generation speed of a llama.h library, loaded with dlopen so the same binary
 * times libengine.so and llama.cpp's libllama.so. Not a test: numbers depend on the machine.
 *
 * Usage: decode_bench LIB.so MODEL.gguf [N_PROMPT] [N_GEN] [THREADS] [REPS]
 * Prints one line per measurement: library, model, phase, tokens, best time, tokens per second. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl.h"

#define FN(name) static __typeof__(name) *p_##name
FN(llama_model_default_params);
FN(llama_model_get_vocab);
FN(llama_vocab_n_tokens);
FN(llama_context_default_params);
FN(llama_init_from_model);
FN(llama_batch_init);
FN(llama_batch_free);
FN(llama_decode);
FN(llama_get_logits_ith);
FN(llama_get_memory);
FN(llama_memory_clear);
FN(llama_time_us);
FN(llama_free);
FN(llama_model_free);

#define LOAD(name) p_##name = (__typeof__(p_##name))dl_sym(#name)

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)level;
    (void)text;
    (void)ud;
}

/* Decode tokens [0, n) at positions pos0.. in one batch; logits for the last one. */
static void decode(struct llama_context *ctx, const llama_token *t, int n, int pos0) {
    struct llama_batch b = p_llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    if (p_llama_decode(ctx, b) != 0) {
        fprintf(stderr, "decode failed\n");
        exit(1);
    }
    p_llama_batch_free(b);
}

static int argmax(const float *l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = i;
        }
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIB.so MODEL.gguf [N_PROMPT] [N_GEN] [THREADS] [REPS]\n", argv[0]);
        return 2;
    }
    const int n_prompt = argc > 3 ? atoi(argv[3]) : 512;
    const int n_gen = argc > 4 ? atoi(argv[4]) : 128;
    const int threads = argc > 5 ? atoi(argv[5]) : 2;
    const int reps = argc > 6 ? atoi(argv[6]) : 3;
    dl_open(argv[1]);
    LOAD(llama_model_default_params);
    LOAD(llama_model_get_vocab);
    LOAD(llama_vocab_n_tokens);
    LOAD(llama_context_default_params);
    LOAD(llama_init_from_model);
    LOAD(llama_batch_init);
    LOAD(llama_batch_free);
    LOAD(llama_decode);
    LOAD(llama_get_logits_ith);
    LOAD(llama_get_memory);
    LOAD(llama_memory_clear);
    LOAD(llama_time_us);
    LOAD(llama_free);
    LOAD(llama_model_free);

    dl_init(quiet);
    struct llama_model *model = dl_load_model(argv[2], p_llama_model_default_params());
    const int n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    struct llama_context_params cp = p_llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + 16);
    cp.n_batch = (uint32_t)n_prompt;
    cp.n_ubatch = (uint32_t)n_prompt;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    struct llama_context *ctx = p_llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    llama_memory_t mem = p_llama_get_memory(ctx);

    /* A deterministic prompt of ordinary tokens (the tokenizer is not what is measured). */
    llama_token *prompt = malloc(sizeof(llama_token) * (size_t)n_prompt);
    for (int i = 0; i < n_prompt; i++) {
        prompt[i] = 100 + (i * 37) % (n_vocab / 4);
    }
    const char *libname = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
    const char *modelname = strrchr(argv[2], '/') ? strrchr(argv[2], '/') + 1 : argv[2];

    /* Warm up: page in the weights, let both libraries build and allocate what they need. */
    decode(ctx, prompt, n_prompt < 16 ? n_prompt : 16, 0);
    p_llama_memory_clear(mem, true);

    double best_pp = 1e30, best_tg = 1e30;
    for (int r = 0; r < reps; r++) {
        p_llama_memory_clear(mem, true);
        int64_t t0 = p_llama_time_us();
        decode(ctx, prompt, n_prompt, 0);
        double pp = (double)(p_llama_time_us() - t0) / 1e6;
        best_pp = pp < best_pp ? pp : best_pp;

        llama_token tok = argmax(p_llama_get_logits_ith(ctx, -1), n_vocab);
        t0 = p_llama_time_us();
        for (int i = 0; i < n_gen; i++) {
            decode(ctx, &tok, 1, n_prompt + i);
            tok = argmax(p_llama_get_logits_ith(ctx, -1), n_vocab);
        }
        double tg = (double)(p_llama_time_us() - t0) / 1e6;
        best_tg = tg < best_tg ? tg : best_tg;
    }
    printf("%-16s %-34s prompt     %4d tokens %8.3f s %9.2f t/s\n", libname, modelname, n_prompt, best_pp,
           n_prompt / best_pp);
    printf("%-16s %-34s generation %4d tokens %8.3f s %9.2f t/s\n", libname, modelname, n_gen, best_tg,
           n_gen / best_tg);

    p_llama_free(ctx);
    p_llama_model_free(model);
    free(prompt);
    return 0;
}
