/* Seeded generation equals llama.cpp's: every sequence of tests/reference/<model>/sampling.jsonl
 * (a sampler chain and a seed, 32 tokens after a prompt, recorded from llama.cpp on this machine
 * kind) is reproduced token for token through llama_sampler_sample, for both test models. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define N_GEN 32

/* The chain named "penalties(n_vocab,64,1.1,0,0) top_k(40) top_p(0.95,1) min_p(0.05,1) temp(0.8) dist(seed)". */
static struct llama_sampler *reference_chain(const struct llama_vocab *vocab, uint32_t seed) {
    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(c, llama_sampler_init_penalties(llama_vocab_n_tokens(vocab), 64, 1.1f, 0.0f, 0.0f));
    llama_sampler_chain_add(c, llama_sampler_init_top_k(40));
    llama_sampler_chain_add(c, llama_sampler_init_top_p(0.95f, 1));
    llama_sampler_chain_add(c, llama_sampler_init_min_p(0.05f, 1));
    llama_sampler_chain_add(c, llama_sampler_init_temp(0.8f));
    llama_sampler_chain_add(c, llama_sampler_init_dist(seed));
    return c;
}

static void check_model(const char *file, const char *ref) {
    struct llama_model *model = tu_load(file, false);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "%s: no context: %s", file, llama_engine_last_error());
    if (!ctx) {
        llama_model_free(model);
        return;
    }
    char *data = tu_read_reference(ref, "sampling.jsonl");
    int n_lines = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        long long seed = 0, prompt_no = 0, ids[1024], expected[N_GEN];
        CHECK(tu_json_int(line, "seed", &seed) && tu_json_int(line, "prompt", &prompt_no), "%s: bad line", ref);
        int n_prompt = tu_json_int_array(line, "prompt_ids", ids, 1024);
        int n_exp = tu_json_int_array(line, "generated", expected, N_GEN);
        CHECK(n_prompt > 0 && n_exp == N_GEN, "%s: bad arrays", ref);
        if (n_prompt <= 0 || n_exp != N_GEN) {
            continue;
        }
        llama_memory_clear(llama_get_memory(ctx), true);
        llama_token prompt[1024];
        for (int i = 0; i < n_prompt; i++) {
            prompt[i] = (llama_token)ids[i];
        }
        struct llama_sampler *chain = reference_chain(vocab, (uint32_t)seed);
        CHECK(llama_sampler_get_seed(chain) == (uint32_t)seed, "seed");
        int rc = tu_decode(ctx, prompt, n_prompt, 0, 0);
        CHECK(rc == 0, "%s prompt %lld: decode returned %d", ref, prompt_no, rc);
        int first_diff = -1;
        for (int i = 0; i < N_GEN && rc == 0; i++) {
            llama_token t = llama_sampler_sample(chain, ctx, -1);
            if (t != expected[i] && first_diff < 0) {
                first_diff = i;
                fprintf(stderr, "%s prompt %lld seed %lld: token %d is %d, llama.cpp sampled %lld\n", ref, prompt_no,
                        seed, i, t, expected[i]);
            }
            if (first_diff >= 0) {
                break; /* the sequences diverge from here */
            }
            rc = tu_decode(ctx, &t, 1, n_prompt + i, 0);
        }
        CHECK(first_diff < 0, "%s prompt %lld seed %lld differs from token %d on", ref, prompt_no, seed, first_diff);
        struct llama_perf_sampler_data perf = llama_perf_sampler(chain);
        CHECK(perf.n_sample == N_GEN || first_diff >= 0, "n_sample %d", perf.n_sample);
        llama_sampler_free(chain);
        n_lines++;
    }
    CHECK(n_lines == 8, "%s: %d sequences checked", ref, n_lines);
    free(data);
    llama_free(ctx);
    llama_model_free(model);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_model(SMOLLM2_FILE, SMOLLM2_REF);
    check_model(GEMMA3_FILE, GEMMA3_REF);
    llama_backend_free();
    return tu_finish("test_sampling_reference");
}
