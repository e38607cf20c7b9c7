// Sampling time per token over the llama.h API, for any library that implements it, next to the time
// of the decode step it follows.
//
//   sampling_bench LIBRARY MODEL [ITERATIONS]
//
// LIBRARY is loaded with dlopen (libengine.so, or llama.cpp's libllama.so). MODEL is loaded, a short
// prompt decoded, and then for each sampler chain: ITERATIONS (default 200) times llama_sampler_sample
// on the last logits (which builds the candidate array over the whole vocabulary, applies the chain
// and accepts the token). One-token decode steps are timed the same way, for scale.
// Prints the median and mean time per token in microseconds.
// Build: cc -O2 -I include -I <ggml include> -o sampling_bench benches/sampling_bench.c -ldl
#include "dl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *t, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += t[i];
    qsort(t, n, sizeof(double), cmp_double);
    printf("  %-44s median %9.1f us   mean %9.1f us\n", what, t[n / 2], sum / n);
}

static const char *JSON_GRAMMAR =
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIBRARY MODEL [ITERATIONS]\n", argv[0]);
        return 2;
    }
    int iters = argc > 3 ? atoi(argv[3]) : 200;
    if (iters < 1) iters = 1;
    dl_open(argv[1]);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_context_default_params);
    DL_LOAD(llama_init_from_model);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_decode);
    DL_LOAD(llama_sampler_chain_default_params);
    DL_LOAD(llama_sampler_chain_init);
    DL_LOAD(llama_sampler_chain_add);
    DL_LOAD(llama_sampler_init_penalties);
    DL_LOAD(llama_sampler_init_top_k);
    DL_LOAD(llama_sampler_init_top_p);
    DL_LOAD(llama_sampler_init_min_p);
    DL_LOAD(llama_sampler_init_temp);
    DL_LOAD(llama_sampler_init_dist);
    DL_LOAD(llama_sampler_init_greedy);
    DL_LOAD(llama_sampler_init_typical);
    DL_LOAD(llama_sampler_init_mirostat_v2);
    DL_LOAD(llama_sampler_init_grammar);
    DL_LOAD(llama_sampler_sample);
    DL_LOAD(llama_sampler_reset);
    DL_LOAD(llama_sampler_free);
    DL_LOAD(llama_free);
    DL_LOAD(llama_model_free);

    dl_init(dl_log_errors);
    struct llama_model *model = dl_load_model(argv[2], p_llama_model_default_params());
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    int n_vocab = p_llama_vocab_n_tokens(vocab);
    struct llama_context_params cp = p_llama_context_default_params();
    cp.n_ctx = 1024;
    struct llama_context *ctx = p_llama_init_from_model(model, cp);
    const char *prompt = "The quick brown fox jumps over the lazy dog. Once upon a time";
    llama_token toks[64];
    int n = p_llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, 64, true, false);
    if (!ctx || n <= 0 || p_llama_decode(ctx, p_llama_batch_get_one(toks, n)) != 0) {
        fprintf(stderr, "cannot decode the prompt\n");
        return 1;
    }
    printf("%s\n  %s, %d tokens in the vocabulary, %d iterations\n", argv[1], argv[2], n_vocab, iters);

    double *t = malloc(sizeof(double) * iters);
    struct {
        const char *name;
        int kind;
    } chains[] = {
        {"penalties+top_k+top_p+min_p+temp+dist", 0},
        {"top_k(40)+temp+dist", 1},
        {"greedy", 2},
        {"dist (full vocabulary softmax)", 3},
        {"top_p(0.95)+dist", 4},
        {"min_p(0.05)+temp+dist", 5},
        {"typical(0.95)+dist", 6},
        {"mirostat_v2", 7},
        {"grammar(json, state seen before)+top_k+dist", 8},
    };
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        struct llama_sampler *s = p_llama_sampler_chain_init(p_llama_sampler_chain_default_params());
        switch (chains[c].kind) {
        case 0:
            p_llama_sampler_chain_add(s, p_llama_sampler_init_penalties(n_vocab, 64, 1.1f, 0.0f, 0.0f));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(40));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_top_p(0.95f, 1));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_min_p(0.05f, 1));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.8f));
            break;
        case 1:
            p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(40));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.8f));
            break;
        case 2: p_llama_sampler_chain_add(s, p_llama_sampler_init_greedy()); break;
        case 4: p_llama_sampler_chain_add(s, p_llama_sampler_init_top_p(0.95f, 1)); break;
        case 5:
            p_llama_sampler_chain_add(s, p_llama_sampler_init_min_p(0.05f, 1));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.8f));
            break;
        case 6: p_llama_sampler_chain_add(s, p_llama_sampler_init_typical(0.95f, 1)); break;
        case 7: p_llama_sampler_chain_add(s, p_llama_sampler_init_mirostat_v2(1, 5.0f, 0.1f)); break;
        case 8:
            p_llama_sampler_chain_add(s, p_llama_sampler_init_grammar(vocab, JSON_GRAMMAR, "root"));
            p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(40));
            break;
        }
        if (chains[c].kind != 2 && chains[c].kind != 7) p_llama_sampler_chain_add(s, p_llama_sampler_init_dist(1));
        for (int i = 0; i < iters; i++) {
            // The grammar advances with every accepted token; restart it so each step sees the same state
            // (a state met before: its mask of the vocabulary is reused, as inside a string or number).
            if (chains[c].kind == 8) p_llama_sampler_reset(s);
            double t0 = now_us();
            p_llama_sampler_sample(s, ctx, -1);
            t[i] = now_us() - t0;
        }
        report(chains[c].name, t, iters);
        p_llama_sampler_free(s);
    }

    // One-token decode steps, for scale.
    int n_dec = iters < 64 ? iters : 64;
    llama_token tok = toks[n - 1];
    for (int i = 0; i < n_dec; i++) {
        double t0 = now_us();
        p_llama_decode(ctx, p_llama_batch_get_one(&tok, 1));
        t[i] = now_us() - t0;
    }
    report("llama_decode (1 token)", t, n_dec);

    free(t);
    p_llama_free(ctx);
    p_llama_model_free(model);
    return 0;
}
