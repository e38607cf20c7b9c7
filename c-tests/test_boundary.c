/* What a client may do at the C boundary that once broke the engine (issue "Sound at the C
 * boundary", section 2), each a check that crashed or misbehaved before its fix:
 * - a client sampler whose name() returns NULL (legal; llama.cpp prints "(null)");
 * - writing into the buffer llama_get_logits returns (biases applied in place before sampling):
 *   llama_get_logits_ith and the samplers see the write, as in llama.cpp;
 * - the size-less state setter given corrupt data that ends at an unmapped page: refused from the
 *   counts in it, never read past;
 * - llama_supports_gpu_offload says what the engine does (it runs every layer on the CPU);
 * - callbacks that call back into the context they run for (abort, eval, a sampler's apply, the
 *   log): the getters llama.cpp's callbacks use answer, calls that would change or read the
 *   context mid-computation get their failure value, and nothing crashes.
 * Ownership mistakes (section 4) are in test_ownership.c. */
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
    CHECK(tu_argmax(all, n_vocab) != worst, "the worst token is not the best");
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

/* What a callback saw when it called back into the context. */
static struct reentry {
    struct llama_context *ctx;
    const struct llama_model *model;
    int calls, n_ctx_ok, model_ok, decode_refused, logits_refused;
} seen;

static void call_back_in(void) {
    seen.calls++;
    seen.n_ctx_ok += llama_n_ctx(seen.ctx) == 256;
    seen.model_ok += llama_get_model(seen.ctx) == seen.model;
    llama_token t = 1;
    seen.decode_refused += llama_decode(seen.ctx, llama_batch_get_one(&t, 1)) < 0;
    seen.logits_refused += llama_get_logits_ith(seen.ctx, -1) == NULL;
    llama_memory_clear(llama_get_memory(seen.ctx), true); /* refused: checked after the decode */
}

static bool abort_calling_back(void *data) {
    (void)data;
    if (seen.calls == 0) {
        call_back_in();
    }
    return false;
}

static bool eval_calling_back(struct ggml_tensor *t, bool ask, void *data) {
    (void)t;
    (void)data;
    if (ask && seen.calls == 0) {
        call_back_in();
    }
    return true;
}

static void log_calling_back(enum ggml_log_level level, const char *text, void *data) {
    (void)level;
    (void)data;
    if (seen.ctx && seen.calls == 0 && strstr(text, "embeddings")) {
        call_back_in();
    }
}

static int apply_reads = 0;

static void apply_reading_logits(struct llama_sampler *smpl, llama_token_data_array *cur_p) {
    (void)smpl;
    (void)cur_p;
    apply_reads += llama_get_logits_ith(seen.ctx, -1) != NULL && llama_n_ctx(seen.ctx) == 256;
}

static struct llama_sampler_i READING = {.apply = apply_reading_logits};

static void expect_refusals(const char *what, llama_pos pos_max) {
    CHECK(seen.calls == 1, "%s: called back once (%d)", what, seen.calls);
    CHECK(seen.n_ctx_ok == 1 && seen.model_ok == 1, "%s: llama_n_ctx and llama_get_model answer", what);
    CHECK(seen.decode_refused == 1, "%s: a nested decode is refused", what);
    CHECK(seen.logits_refused == 1, "%s: reading logits mid-computation is refused", what);
    CHECK(llama_memory_seq_pos_max(llama_get_memory(seen.ctx), 0) == pos_max,
          "%s: clearing the memory mid-computation was refused", what);
    struct reentry fresh = {.ctx = seen.ctx, .model = seen.model};
    seen = fresh;
}

static void callbacks_calling_back(struct llama_model *model) {
    llama_token prompt[] = {504, 3575, 282, 4649, 314};
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.cb_eval = eval_calling_back;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    struct reentry fresh = {.ctx = ctx, .model = model};
    seen = fresh;
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) == 0, "decode with an eval callback calling back");
    expect_refusals("eval callback", 4);

    llama_set_abort_callback(ctx, abort_calling_back, NULL);
    CHECK(tu_decode(ctx, prompt, 1, 5, 0) == 0, "decode with an abort callback calling back");
    expect_refusals("abort callback", 5);
    llama_set_abort_callback(ctx, NULL, NULL);

    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init(&READING, NULL));
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    CHECK(llama_sampler_sample(chain, ctx, -1) >= 0, "sampling with an apply that reads the context");
    CHECK(apply_reads == 1, "the sampler read the logits and n_ctx");
    llama_sampler_free(chain);
    llama_free(ctx);

    /* A log line emitted while decoding (embeddings asked with only the last output marked). */
    cp.cb_eval = NULL;
    cp.embeddings = true;
    cp.pooling_type = LLAMA_POOLING_TYPE_MEAN;
    ctx = llama_init_from_model(model, cp);
    struct reentry for_log = {.ctx = ctx, .model = model};
    seen = for_log;
    llama_log_set(log_calling_back, NULL);
    CHECK(tu_decode(ctx, prompt, 5, 0, 0) == 0, "decode with a log callback calling back");
    tu_capture_log();
    expect_refusals("log callback", 4);
    seen.ctx = NULL;
    llama_free(ctx);
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
    CHECK(llama_supports_gpu_offload(), "layers can be offloaded (RPC is built in), as llama.cpp answers");

    CHECK(tu_decode(ctx, prompt, 1, 5, 0) == 0, "the context still decodes");
    llama_free(ctx);
    callbacks_calling_back(model);

    llama_model_free(model);
    return tu_finish("test_boundary");
}
