/* Ownership mistakes a client makes (issue "Sound at the C boundary", section 4): Python's
 * garbage collector frees in any order, C programs free twice. Each is a log line and a no-op (or,
 * for a model, kept alive until its last context is gone), never a crash. Each case runs in a
 * child process, so a regression fails its check instead of ending the test. What the engine
 * cannot catch: a freed handle whose address came back for a new object after 4096 later frees of
 * its kind (README, "Guarantees"). */
#include "testutil.h"

#include <string.h>

static const llama_token prompt[] = {504, 3575, 282, 4649, 314};

static struct llama_context *new_context(struct llama_model *m) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 2;
    return llama_init_from_model(m, cp);
}

static void free_get_one_batch(void) {
    llama_token t[3] = {1, 2, 3};
    tu_log_clear();
    llama_batch_free(llama_batch_get_one(t, 3));
    CHECK(tu_log_contains("not a batch from llama_batch_init"), "the log says why");
}

static void free_batch_twice(void) {
    struct llama_batch b = llama_batch_init(8, 0, 1);
    llama_batch_free(b);
    tu_log_clear();
    llama_batch_free(b);
    CHECK(tu_log_contains("freed already"), "the log says why");
}

static void free_batch_ext_twice_and_use_it(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_context *ctx = new_context(m);
    struct llama_batch_ext *b = llama_batch_ext_init(ctx);
    CHECK(llama_batch_ext_add_token(b, 0, 504) == 0, "a token added");
    llama_batch_ext_free(b);
    tu_log_clear();
    llama_batch_ext_free(b);
    CHECK(tu_log_contains("was freed already"), "a second llama_batch_ext_free is refused");
    CHECK(llama_batch_ext_add_token(b, 0, 504) < 0, "a freed batch takes no token");
    CHECK(llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, b) != 0, "nor is decoded");
    llama_free(ctx);
    llama_model_free(m);
}

static void free_model_twice(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    llama_model_free(m);
    tu_log_clear();
    llama_model_free(m);
    CHECK(tu_log_contains("was freed already"), "the log says why");
    tu_log_clear();
    CHECK(llama_model_n_embd(m) == -1, "a freed model answers nothing");
    CHECK(tu_log_contains("was freed already"), "the log says why");
}

static void free_model_before_its_context(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_context *ctx = new_context(m);
    llama_model_free(m);
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) == 0, "the context decodes after its model's handle is freed");
    const struct llama_vocab *v = llama_model_get_vocab(llama_get_model(ctx));
    CHECK(llama_vocab_n_tokens(v) == 49152, "its model answers through llama_get_model");
    tu_log_clear();
    llama_model_free(m);
    CHECK(tu_log_contains("freed already"), "a second llama_model_free is refused while the context lives");
    llama_free(ctx);
    tu_log_clear();
    CHECK(llama_vocab_n_tokens(v) == -1, "the vocab went with the model");
    CHECK(tu_log_contains("freed already"), "the log says why");
}

static void free_context_twice_and_use_it(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_context *ctx = new_context(m);
    llama_memory_t mem = llama_get_memory(ctx);
    llama_free(ctx);
    tu_log_clear();
    llama_free(ctx);
    CHECK(tu_log_contains("was freed already"), "a second llama_free is refused");
    CHECK(llama_n_ctx(ctx) == 0, "a freed context answers nothing");
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) < 0, "a freed context does not decode");
    CHECK(llama_get_logits(ctx) == NULL, "nor hands out logits");
    tu_log_clear();
    llama_memory_clear(mem, true);
    CHECK(tu_log_contains("mem 0x") && tu_log_contains("was freed already"), "its memory handle went with it");
    CHECK(llama_memory_seq_pos_max(mem, 0) == -1, "and answers nothing");
    llama_model_free(m);
}

static void free_sampler_twice(void) {
    struct llama_sampler *s = llama_sampler_init_top_k(40);
    llama_sampler_free(s);
    tu_log_clear();
    llama_sampler_free(s);
    CHECK(tu_log_contains("was freed already"), "a second llama_sampler_free is refused");
    tu_log_clear();
    llama_sampler_reset(s);
    CHECK(tu_log_contains("llama_sampler_reset: invalid argument: sampler"), "reset is refused");
    tu_log_clear();
    llama_sampler_accept(s, 1);
    CHECK(tu_log_contains("llama_sampler_accept: invalid argument: sampler"), "accept is refused");
    tu_log_clear();
    CHECK(strcmp(llama_sampler_name(s), "(null)") == 0, "a freed sampler has no name");
    CHECK(tu_log_contains("llama_sampler_name: invalid argument: sampler"), "naming it is refused");
}

static void free_a_sampler_its_chain_owns(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_context *ctx = new_context(m);
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    struct llama_sampler *greedy = llama_sampler_init_greedy();
    llama_sampler_chain_add(chain, greedy);
    tu_log_clear();
    llama_sampler_free(greedy);
    CHECK(tu_log_contains("belongs to chain"), "freeing a chain's sampler is refused");
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) == 0, "decode");
    llama_token t = llama_sampler_sample(chain, ctx, -1);
    CHECK(t >= 0, "the chain still samples with it");
    struct llama_sampler *removed = llama_sampler_chain_remove(chain, 0);
    CHECK(removed == greedy, "removed from the chain");
    llama_sampler_free(removed);
    llama_sampler_free(chain);
    llama_free(ctx);
    llama_model_free(m);
}

static void add_a_sampler_to_two_chains(void) {
    struct llama_sampler *a = llama_sampler_chain_init(llama_sampler_chain_default_params());
    struct llama_sampler *b = llama_sampler_chain_init(llama_sampler_chain_default_params());
    struct llama_sampler *dist = llama_sampler_init_dist(1);
    llama_sampler_chain_add(a, dist);
    tu_log_clear();
    llama_sampler_chain_add(b, dist);
    CHECK(tu_log_contains("in chain") && tu_log_contains("already"), "a second chain is refused");
    CHECK(llama_sampler_chain_n(b) == 0, "and does not get it");
    tu_log_clear();
    llama_sampler_chain_add(a, a);
    llama_sampler_chain_add(b, a);
    llama_sampler_chain_add(a, b);
    CHECK(tu_log_contains("cannot be added to itself"), "a chain inside itself is refused");
    CHECK(llama_sampler_chain_n(a) == 1, "a holds dist only");
    llama_sampler_free(b); /* frees a, which b owns, and dist */
    tu_log_clear();
    llama_sampler_free(a);
    CHECK(tu_log_contains("freed already"), "a went with b");
}

/* A sampler the client builds itself, as llama.h's struct allows: used through its vtable. */
static int client_frees;

static const char *client_name(const struct llama_sampler *smpl) {
    (void)smpl;
    return "client";
}

static void client_apply(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    (void)smpl;
    cur_p->selected = 0;
}

static void client_free(struct llama_sampler *smpl) {
    (void)smpl;
    client_frees++;
}

static void client_built_sampler_keeps_working(void) {
    static struct llama_sampler_i iface = {.name = client_name, .apply = client_apply, .free = client_free};
    struct llama_sampler mine = {.iface = &iface, .ctx = NULL};
    CHECK(strcmp(llama_sampler_name(&mine), "client") == 0, "its name");
    llama_token_data d[2] = {{7, 1.0f, 0.0f}, {8, 2.0f, 0.0f}};
    llama_token_data_array arr = {d, 2, -1, false};
    llama_sampler_apply(&mine, &arr);
    CHECK(arr.selected == 0, "its apply ran");
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, &mine);
    CHECK(llama_sampler_chain_n(chain) == 1, "a chain takes it");
    llama_sampler_free(chain);
    CHECK(client_frees == 1, "freeing the chain calls its free, and leaves its struct to the client");
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    CHECK(tu_survives(free_get_one_batch, 60), "llama_batch_free of a llama_batch_get_one batch");
    CHECK(tu_survives(free_batch_twice, 60), "llama_batch_free twice");
    CHECK(tu_survives(free_batch_ext_twice_and_use_it, 60), "llama_batch_ext_free twice, and use after it");
    CHECK(tu_survives(free_model_twice, 60), "llama_model_free twice, and use after it");
    CHECK(tu_survives(free_model_before_its_context, 60), "llama_model_free before llama_free");
    CHECK(tu_survives(free_context_twice_and_use_it, 60), "llama_free twice, and use after it");
    CHECK(tu_survives(free_sampler_twice, 60), "llama_sampler_free twice, and use after it");
    CHECK(tu_survives(free_a_sampler_its_chain_owns, 60), "llama_sampler_free of a chain's sampler");
    CHECK(tu_survives(add_a_sampler_to_two_chains, 60), "one sampler in two chains, a chain in itself");
    CHECK(tu_survives(client_built_sampler_keeps_working, 60), "a client-built sampler");
    return tu_finish("test_ownership");
}
