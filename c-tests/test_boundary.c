/* What a client may do at the C boundary that once broke the engine (issue "Sound at the C
 * boundary", section 2), each a check that crashed or misbehaved before its fix:
 * - a client sampler whose name() returns NULL (legal; llama.cpp prints "(null)");
 * - writing into the buffer llama_get_logits returns (biases applied in place before sampling):
 *   llama_get_logits_ith and the samplers see the write, as in llama.cpp;
 * - the size-less state setter given corrupt data that ends at an unmapped page: refused from the
 *   counts in it, never read past;
 * - llama_supports_gpu_offload says what the engine does (it runs every layer on the CPU). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *null_name(const struct llama_sampler *smpl) {
    (void)smpl;
    return NULL;
}

static void keep_all(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    (void)smpl;
    (void)cur_p;
}

static struct llama_sampler_i NULL_NAMED = {.name = null_name, .apply = keep_all};

static void client_sampler_named_null(struct llama_context *ctx) {
    struct llama_sampler *s = llama_sampler_init(&NULL_NAMED, NULL);
    CHECK(s != NULL, "a client sampler");
    CHECK(strcmp(llama_sampler_name(s), "(null)") == 0, "name %s", llama_sampler_name(s));
    CHECK(!llama_set_sampler(ctx, 0, s), "no backend sampling for it, and no crash");
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, s);
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    CHECK(llama_sampler_sample(chain, ctx, -1) >= 0, "a chain holding it samples");
    llama_sampler_free(chain);
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

static void logits_written_in_place(struct llama_context *ctx, int n_vocab) {
    float *all = llama_get_logits(ctx);
    CHECK(all != NULL, "logits");
    if (!all) {
        return;
    }
    int worst = 0;
    for (int i = 1; i < n_vocab; i++) {
        if (all[i] < all[worst]) {
            worst = i;
        }
    }
    CHECK(argmax(all, n_vocab) != worst, "the worst token is not the best");
    all[worst] = 1e9f; /* a logit bias applied in place */
    CHECK(llama_get_logits_ith(ctx, -1)[worst] == 1e9f, "llama_get_logits_ith sees the write");
    struct llama_sampler *greedy = llama_sampler_init_greedy();
    CHECK(llama_sampler_sample(greedy, ctx, -1) == worst, "the greedy sampler picks the biased token");
    llama_sampler_free(greedy);
}

/* `bytes` placed so that they end exactly where an unreadable page begins. */
static void set_state_at_page_end(struct llama_context *ctx, const unsigned char *bytes, size_t n,
                                  const char *what) {
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED, "mmap");
    if (map == MAP_FAILED) {
        return;
    }
    CHECK(mprotect(map + page, (size_t)page, PROT_NONE) == 0, "mprotect");
    unsigned char *at = map + page - n;
    memcpy(at, bytes, n);
    tu_log_clear();
    CHECK(llama_set_state_data(ctx, at) == 0, "%s: refused", what);
    CHECK(tu_log_contains("state data"), "%s: the log says why", what);
    munmap(map, (size_t)page * 2);
}

static void put_u32(unsigned char *p, uint32_t v) {
    memcpy(p, &v, 4);
}

static void corrupt_states_are_refused(struct llama_context *ctx) {
    unsigned char b[64];
    /* An architecture name of 2^31 bytes. */
    put_u32(b, 0x80000000u);
    set_state_at_page_end(ctx, b, 4, "huge string");
    /* "llama", one stream, then 2^32 - 1 cells. */
    put_u32(b, 5);
    memcpy(b + 4, "llama", 5);
    put_u32(b + 9, 1);
    put_u32(b + 13, 0xffffffffu);
    set_state_at_page_end(ctx, b, 17, "huge cell count");
    /* One cell at position 0 that lists 2^31 sequences. */
    put_u32(b + 13, 1);
    put_u32(b + 17, 0);
    put_u32(b + 21, 0x80000000u);
    set_state_at_page_end(ctx, b, 25, "huge sequence count");
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    struct llama_model *model = tu_load(SMOLLM2_FILE, false);
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    llama_token prompt[] = {504, 3575, 282, 4649, 314};
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) == 0, "decode");

    client_sampler_named_null(ctx);
    logits_written_in_place(ctx, n_vocab);
    corrupt_states_are_refused(ctx);
    CHECK(!llama_supports_gpu_offload(), "every layer runs on the CPU");

    CHECK(tu_decode(ctx, prompt, 1, 5, 0) == 0, "the context still decodes");
    llama_free(ctx);
    llama_model_free(model);
    return tu_finish("test_boundary");
}
