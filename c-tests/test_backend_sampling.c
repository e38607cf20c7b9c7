/* Backend sampling (sampler chains attached to a context, run in the decode graph), as a client
 * drives it: the greedy chain picks the argmax of the raw logits; what a partial chain leaves
 * (top-k) is what the CPU part continues from; sequences without a chain are sampled on the CPU
 * from the same batch; chains are swapped and detached between batches; the limits and the
 * refusals (a sampler that is no chain, an empty chain, a chain attached twice, a freed chain,
 * too many outputs per sequence) answer with a value and a log line, never a crash. The tokens
 * themselves are compared with llama.cpp's by benches/compare.sh. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static struct llama_sampler *chain_of(struct llama_sampler *a, struct llama_sampler *b) {
    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (a) llama_sampler_chain_add(c, a);
    if (b) llama_sampler_chain_add(c, b);
    return c;
}

/* A batch of one token per sequence 0..n-1 at position `pos`, each an output. */
static struct llama_batch step_batch(const llama_token *t, int n, llama_pos pos) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int s = 0; s < n; s++) {
        b.token[s] = t[s];
        b.pos[s] = pos;
        b.n_seq_id[s] = 1;
        b.seq_id[s][0] = s;
        b.logits[s] = 1;
    }
    b.n_tokens = n;
    return b;
}

static void greedy_and_mixed(struct llama_model *model, int n_vocab) {
    struct llama_sampler *greedy = chain_of(llama_sampler_init_greedy(), NULL);
    struct llama_sampler *top_k = chain_of(llama_sampler_init_top_k(8), llama_sampler_init_dist(3));
    struct llama_sampler_seq_config configs[2] = {{0, greedy}, {1, top_k}};
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq_max = 3;
    cp.samplers = configs;
    cp.n_samplers = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "a context with two backend chains");
    if (!ctx) return;
    CHECK(strcmp(llama_sampler_name(llama_sampler_chain_get(greedy, 0)), "+greedy") == 0, "%s",
          llama_sampler_name(llama_sampler_chain_get(greedy, 0)));

    struct llama_sampler *cpu = chain_of(llama_sampler_init_greedy(), NULL);
    llama_token t[3] = {1, 2, 3};
    for (int pos = 0; pos < 6; pos++) {
        struct llama_batch b = step_batch(t, 3, pos);
        CHECK(llama_decode(ctx, b) == 0, "decode at %d", pos);
        llama_batch_free(b);
        /* Sequence 0: greedy in the graph = the argmax of the logits it was given. */
        llama_token g = llama_get_sampled_token_ith(ctx, 0);
        const float *logits = llama_get_logits_ith(ctx, 0);
        CHECK(logits && g == tu_argmax(logits, n_vocab), "greedy %d vs argmax", g);
        CHECK(llama_get_sampled_logits_count_ith(ctx, 0) == (uint32_t)n_vocab, "its logits are the row");
        CHECK(llama_sampler_sample(greedy, ctx, 0) == g, "llama_sampler_sample takes the backend token");
        /* Sequence 1: top-k and dist in the graph: a token among the 8 candidates left. */
        llama_token d = llama_get_sampled_token_ith(ctx, 1);
        const llama_token *cand = llama_get_sampled_candidates_ith(ctx, 1);
        CHECK(llama_get_sampled_candidates_count_ith(ctx, 1) == 8 && llama_get_sampled_probs_count_ith(ctx, 1) == 8,
              "8 candidates and probabilities");
        bool among = false;
        float sum = 0;
        for (int i = 0; i < 8 && cand; i++) {
            among |= cand[i] == d;
            sum += llama_get_sampled_probs_ith(ctx, 1)[i];
        }
        CHECK(among && sum > 0.999f && sum < 1.001f, "dist picked %d among them, probabilities sum to %f", d, sum);
        /* Sequence 2 has no chain: nothing sampled, the CPU samples the raw logits. */
        CHECK(llama_get_sampled_token_ith(ctx, 2) == LLAMA_TOKEN_NULL, "no token for sequence 2");
        CHECK(llama_get_sampled_logits_ith(ctx, 2) == NULL && llama_get_sampled_logits_count_ith(ctx, 2) == 0,
              "no sampled logits for sequence 2");
        CHECK(llama_get_sampled_candidates_ith(ctx, 2)[5] == 5, "the identity as its candidates");
        llama_token c = llama_sampler_sample(cpu, ctx, 2);
        CHECK(c == tu_argmax(llama_get_logits_ith(ctx, 2), n_vocab), "CPU greedy on sequence 2");
        t[0] = g;
        t[1] = llama_sampler_sample(top_k, ctx, 1);
        CHECK(t[1] == d, "the chain returns its backend token %d (got %d)", d, t[1]);
        t[2] = c;
    }
    /* Swap: sequence 1 is detached, sequence 2 gets a chain whose CPU part continues from top-k. */
    struct llama_sampler *partial = chain_of(llama_sampler_init_top_k(4), llama_sampler_init_top_n_sigma(10.0f));
    llama_sampler_chain_add(partial, llama_sampler_init_greedy());
    CHECK(llama_set_sampler(ctx, 1, NULL), "detach");
    CHECK(llama_set_sampler(ctx, 2, partial), "attach a chain with a CPU part");
    CHECK(strcmp(llama_sampler_name(llama_sampler_chain_get(partial, 1)), "top-n-sigma") == 0,
          "top-n-sigma stays on the CPU");
    struct llama_batch b = step_batch(t, 3, 6);
    CHECK(llama_decode(ctx, b) == 0, "decode after the swap");
    llama_batch_free(b);
    CHECK(llama_get_sampled_token_ith(ctx, 1) == LLAMA_TOKEN_NULL, "sequence 1 is sampled on the CPU now");
    CHECK(llama_get_sampled_token_ith(ctx, 2) == LLAMA_TOKEN_NULL && llama_get_sampled_logits_count_ith(ctx, 2) == 4,
          "sequence 2: 4 logits left for the CPU");
    const llama_token *cand = llama_get_sampled_candidates_ith(ctx, 2);
    const float *kept = llama_get_sampled_logits_ith(ctx, 2);
    int best = 0;
    for (int i = 1; i < 4; i++) best = kept[i] > kept[best] ? i : best;
    llama_token p = llama_sampler_sample(partial, ctx, 2);
    CHECK(p == cand[best] && p == tu_argmax(llama_get_logits_ith(ctx, 2), n_vocab),
          "the CPU part chose the best of the 4 (%d)", p);

    llama_free(ctx);
    llama_sampler_free(greedy);
    llama_sampler_free(top_k);
    llama_sampler_free(partial);
    llama_sampler_free(cpu);
}

static void refusals(struct llama_model *model) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_seq_max = 2;
    cp.n_outputs_max_per_seq = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "a context");
    if (!ctx) return;
    struct llama_sampler *lone = llama_sampler_init_greedy();
    CHECK(!llama_set_sampler(ctx, 0, lone), "a sampler that is no chain stays on the CPU");
    struct llama_sampler *empty = chain_of(NULL, NULL);
    CHECK(!llama_set_sampler(ctx, 0, empty), "an empty chain is not attached");
    struct llama_sampler *chain = chain_of(llama_sampler_init_greedy(), NULL);
    tu_log_clear();
    CHECK(!llama_set_sampler(ctx, 5, chain), "seq_id 5 of 2 is refused");
    CHECK(tu_log_contains("out of range"), "and says why");
    CHECK(llama_set_sampler(ctx, 0, chain), "attached");
    CHECK(!llama_set_sampler(ctx, 1, chain), "the same chain twice is refused");
    CHECK(llama_set_sampler(ctx, 1, NULL), "detaching nothing");

    /* Two outputs of sequence 0 exceed n_outputs_max_per_seq = 1: refused, nothing kept. */
    llama_token t[2] = {1, 2};
    struct llama_batch b = llama_batch_init(2, 0, 1);
    for (int i = 0; i < 2; i++) {
        b.token[i] = t[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = 2;
    tu_log_clear();
    CHECK(llama_decode(ctx, b) < 0, "too many outputs for the backend sampler");
    CHECK(tu_log_contains("outputs per sequence"), "and says why");
    CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == -1, "nothing was decoded");
    b.logits[0] = 0;
    CHECK(llama_decode(ctx, b) == 0, "one output is fine");
    CHECK(llama_get_sampled_token_ith(ctx, 1) >= 0, "and sampled");
    CHECK(llama_get_sampled_token_ith(ctx, 0) == LLAMA_TOKEN_NULL, "an index without output: no token");

    /* The client frees the chain while it is attached: the next decode detaches it. */
    llama_sampler_free(chain);
    b.n_tokens = 1;
    b.pos[0] = 2;
    b.logits[0] = 1;
    tu_log_clear();
    CHECK(llama_decode(ctx, b) == 0, "decode after the chain was freed");
    CHECK(tu_log_contains("was freed"), "says the chain was detached");
    CHECK(llama_get_sampled_token_ith(ctx, 0) == LLAMA_TOKEN_NULL, "no backend sampling any more");
    llama_batch_free(b);
    llama_free(ctx);

    /* A sampler that is no chain in the context parameters: no context. */
    struct llama_sampler_seq_config config = {0, lone};
    cp.samplers = &config;
    cp.n_samplers = 1;
    CHECK(llama_init_from_model(model, cp) == NULL, "backend samplers must be chains");
    llama_sampler_free(lone);
    llama_sampler_free(empty);
}

int main(void) {
    tu_capture_log();
    struct llama_model *model = tu_load(SMOLLM2_FILE, false);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    greedy_and_mixed(model, n_vocab);
    refusals(model);
    llama_model_free(model);
    return tu_finish("test_backend_sampling");
}
