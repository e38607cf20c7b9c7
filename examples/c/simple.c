/* Generate text from a prompt: the llama.cpp program flow (load, tokenize, llama_batch_ext +
 * llama_process, a sampler chain, token_to_piece), through libengine.
 *
 * Usage: simple -m MODEL.gguf [-p PROMPT] [-n N_PREDICT] [-t THREADS] [--temp T] [--seed S]
 * With --temp > 0 the chain is top_k(40) top_p(0.95) min_p(0.05) temp(T) dist(seed); else greedy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

/* Fill the batch with tokens at consecutive positions from pos_0; logits for the last one only. */
static void batch_set_tokens(struct llama_batch_ext *batch, const llama_token *tokens, int32_t n, llama_pos pos_0) {
    llama_batch_ext_clear(batch);
    for (int32_t i = 0; i < n; i++) {
        const int32_t idx = llama_batch_ext_add_token(batch, 0, tokens[i]);
        const llama_pos pos = pos_0 + i;
        llama_batch_ext_set_pos(batch, idx, &pos);
    }
    llama_batch_ext_set_output_logits(batch, n - 1, true);
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s -m MODEL.gguf [-p PROMPT] [-n N_PREDICT] [-t THREADS] [--temp T] [--seed S]\n", argv0);
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    const char *prompt = "Hello my name is";
    int n_predict = 32;
    int n_threads = 0;
    float temp = 0.0f;
    uint32_t seed = LLAMA_DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage(argv[0]);
            return 2;
        }
        if (!strcmp(a, "-m")) {
            model_path = v;
        } else if (!strcmp(a, "-p")) {
            prompt = v;
        } else if (!strcmp(a, "-n")) {
            n_predict = atoi(v);
        } else if (!strcmp(a, "-t")) {
            n_threads = atoi(v);
        } else if (!strcmp(a, "--temp")) {
            temp = (float)atof(v);
        } else if (!strcmp(a, "--seed")) {
            seed = (uint32_t)strtoul(v, NULL, 10);
        } else {
            usage(argv[0]);
            return 2;
        }
        i++;
    }
    if (!model_path || n_predict < 1) {
        usage(argv[0]);
        return 2;
    }

    llama_backend_init();
    struct llama_model_params model_params = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(model_path, model_params);
    if (!model) {
        fprintf(stderr, "error: unable to load model %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);

    const int n_prompt = -llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), NULL, 0, true, true);
    if (n_prompt <= 0) {
        fprintf(stderr, "error: failed to tokenize the prompt\n");
        return 1;
    }
    llama_token *prompt_tokens = malloc(sizeof(llama_token) * (size_t)n_prompt);
    if (llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), prompt_tokens, n_prompt, true, true) < 0) {
        fprintf(stderr, "error: failed to tokenize the prompt\n");
        return 1;
    }

    struct llama_context_params ctx_params = llama_context_default_params();
    ctx_params.n_ctx = (uint32_t)(n_prompt + n_predict);
    ctx_params.n_batch = (uint32_t)n_prompt;
    ctx_params.no_perf = false;
    if (n_threads > 0) {
        ctx_params.n_threads = n_threads;
        ctx_params.n_threads_batch = n_threads;
    }
    struct llama_context *ctx = llama_init_from_model(model, ctx_params);
    if (!ctx) {
        fprintf(stderr, "error: failed to create the context\n");
        return 1;
    }

    struct llama_sampler_chain_params sparams = llama_sampler_chain_default_params();
    sparams.no_perf = false;
    struct llama_sampler *smpl = llama_sampler_chain_init(sparams);
    if (temp > 0.0f) {
        llama_sampler_chain_add(smpl, llama_sampler_init_top_k(40));
        llama_sampler_chain_add(smpl, llama_sampler_init_top_p(0.95f, 1));
        llama_sampler_chain_add(smpl, llama_sampler_init_min_p(0.05f, 1));
        llama_sampler_chain_add(smpl, llama_sampler_init_temp(temp));
        llama_sampler_chain_add(smpl, llama_sampler_init_dist(seed));
    } else {
        llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
    }

    char buf[256];
    for (int i = 0; i < n_prompt; i++) {
        int n = llama_token_to_piece(vocab, prompt_tokens[i], buf, sizeof(buf), 0, true);
        if (n < 0) {
            fprintf(stderr, "error: failed to convert a token to a piece\n");
            return 1;
        }
        fwrite(buf, 1, (size_t)n, stdout);
    }
    fflush(stdout);

    struct llama_batch_ext *batch = llama_batch_ext_init(ctx);
    batch_set_tokens(batch, prompt_tokens, n_prompt, 0);
    int n_pos = n_prompt;
    const int64_t t_start = llama_time_us();
    int n_decode = 0;
    for (; n_pos < n_prompt + n_predict;) {
        int rc = llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, batch);
        if (rc != 0) {
            fprintf(stderr, "\nerror: llama_process returned %d\n", rc);
            return 1;
        }
        llama_token id = llama_sampler_sample(smpl, ctx, -1);
        if (llama_vocab_is_eog(vocab, id)) {
            break;
        }
        int n = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, true);
        if (n < 0) {
            fprintf(stderr, "\nerror: failed to convert a token to a piece\n");
            return 1;
        }
        fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
        batch_set_tokens(batch, &id, 1, n_pos);
        n_pos++;
        n_decode++;
    }
    const double secs = (double)(llama_time_us() - t_start) / 1e6;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "decoded %d tokens in %.2f s, speed: %.2f t/s\n", n_decode, secs, secs > 0 ? n_decode / secs : 0.0);
    llama_perf_sampler_print(smpl);
    llama_perf_context_print(ctx);

    llama_batch_ext_free(batch);
    llama_sampler_free(smpl);
    llama_free(ctx);
    llama_model_free(model);
    free(prompt_tokens);
    llama_backend_free();
    return 0;
}
