/* Every function of the pinned llama.h, called with NULL pointers, zeroed and hostile numbers and
 * structs (the table is generated: scripts/hostile_calls.py), each call in a child process. A call
 * passes when it returns (no signal, no abort, no hang) and the live context still decodes
 * afterwards (except after llama_free of that context). Nothing here has run a graph before the
 * children are forked: ggml's CPU threads do not survive a fork. */
#include "hostile_calls.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

enum { N_CTX = 256, N_BATCH = 64, OVERSIZE = 2 * N_CTX };

/* The library's log is kept quiet (hundreds of refusals are expected); a failing child prints
 * its last line. */
static char last_log[512];

static void quiet_log(enum ggml_log_level level, const char *text, void *user_data) {
    (void)level;
    (void)user_data;
    if (text[0] && strcmp(text, "\n") != 0) {
        snprintf(last_log, sizeof last_log, "%s", text);
    }
}

static void prepare(struct hostile *h) {
    h->model_path = tu_model_path(SMOLLM2_FILE);
    h->model = llama_model_load_from_file(h->model_path, llama_model_default_params());
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_ubatch = N_BATCH;
    /* One thread: each child's decode then never waits on a thread the rest of a busy machine
     * keeps off its core (ggml's threads spin while they wait). */
    cp.n_threads = cp.n_threads_batch = 1;
    h->ctx = h->model ? llama_init_from_model(h->model, cp) : NULL;
    h->vocab = h->model ? llama_model_get_vocab(h->model) : NULL;
    h->smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(h->smpl, llama_sampler_init_greedy());
    h->mem = h->ctx ? llama_get_memory(h->ctx) : NULL;
    h->bext = h->ctx ? llama_batch_ext_init(h->ctx) : NULL;

    /* Batches: empty; a negative token count; more tokens than n_batch and n_ctx (the arrays do
     * hold them: a count larger than its arrays is what C cannot check). */
    memset(&h->batch[0], 0, sizeof h->batch[0]);
    memset(&h->batch[1], 0, sizeof h->batch[1]);
    h->batch[1].n_tokens = -1;
    h->batch[2] = llama_batch_init(OVERSIZE, 0, 1);
    for (int i = 0; i < OVERSIZE; i++) {
        h->batch[2].token[i] = 504;
        h->batch[2].pos[i] = i;
        h->batch[2].n_seq_id[i] = 1;
        h->batch[2].seq_id[i][0] = 0;
        h->batch[2].logits[i] = i == OVERSIZE - 1;
    }
    h->batch[2].n_tokens = OVERSIZE;

    memset(&h->cparams[0], 0, sizeof h->cparams[0]);
    h->cparams[1] = llama_context_default_params();
    h->cparams[1].n_ctx = UINT32_MAX;
    h->cparams[1].n_seq_max = 1u << 20;
    h->cparams[2] = llama_context_default_params();
    h->cparams[2].n_batch = h->cparams[2].n_ubatch = UINT32_MAX;
    h->cparams[2].n_threads = -1;
    h->cparams[2].n_threads_batch = INT32_MAX;
    h->cparams[2].flash_attn_type = (enum llama_flash_attn_type)INT32_MAX;
    h->cparams[2].pooling_type = (enum llama_pooling_type)INT32_MAX;
    h->cparams[2].type_k = (enum ggml_type)-1;
    h->cparams[2].rope_freq_base = NAN;
    h->cparams[2].n_samplers = SIZE_MAX;

    memset(&h->mparams[0], 0, sizeof h->mparams[0]);
    h->mparams[1] = llama_model_default_params();
    h->mparams[1].n_gpu_layers = -1;
    h->mparams[1].main_gpu = -1;
    h->mparams[1].split_mode = (enum llama_split_mode)-1;
    h->mparams[1].load_mode = (enum llama_load_mode)-1;
    h->mparams[2] = llama_model_default_params();
    h->mparams[2].n_gpu_layers = INT32_MAX;
    h->mparams[2].main_gpu = INT32_MAX;
    h->mparams[2].split_mode = (enum llama_split_mode)INT32_MAX;
    h->mparams[2].lazy_mode = (enum llama_lazy_mode)INT32_MAX;
}

/* 0: the context answers and decodes; 3: it does not. */
static int context_still_works(struct hostile *h, const struct hostile_call *c) {
    if (c->set > 0 && strcmp(c->function, "llama_free") == 0) {
        return 0;
    }
    if (llama_n_ctx(h->ctx) != N_CTX) {
        fprintf(stderr, "llama_n_ctx changed\n");
        return 3;
    }
    llama_memory_clear(h->mem, true);
    llama_token t = 504;
    int rc = llama_decode(h->ctx, llama_batch_get_one(&t, 1));
    if (rc != 0) {
        fprintf(stderr, "llama_decode returned %d afterwards (%s)\n", rc, last_log);
        return 3;
    }
    return 0;
}

/* Context parameters one hostile field at a time (the generated sets change many at once, so the
 * first refusal would hide the rest). */
static void one_field(struct hostile *h, int field) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    switch (field) {
    case 0: cp.n_ctx = UINT32_MAX; break;
    case 1: cp.n_seq_max = 1u << 20; break;
    case 2: cp.n_batch = UINT32_MAX; break;
    case 3: cp.n_ubatch = UINT32_MAX; break;
    case 4: cp.n_threads = INT32_MAX; break;
    case 5: cp.n_threads_batch = -1; break;
    case 6: cp.type_k = (enum ggml_type)-1; break;
    case 7: cp.type_v = GGML_TYPE_Q4_0; cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; break;
    case 8: cp.flash_attn_type = (enum llama_flash_attn_type)INT32_MAX; break;
    case 9: cp.rope_freq_base = NAN; break;
    case 10: cp.rope_freq_scale = INFINITY; break;
    case 11: cp.n_samplers = SIZE_MAX; break;
    case 12: cp.pooling_type = (enum llama_pooling_type)INT32_MAX; cp.embeddings = true; break;
    case 13: cp.rope_scaling_type = (enum llama_rope_scaling_type)INT32_MAX; break;
    case 14: cp.attention_type = (enum llama_attention_type)INT32_MAX; break;
    case 15: cp.yarn_orig_ctx = UINT32_MAX; cp.yarn_ext_factor = NAN; break;
    case 16: cp.n_seq_max = 0; break;
    default: cp.n_ubatch = 0; break;
    }
    struct llama_context *ctx = llama_init_from_model(h->model, cp);
    if (ctx) {
        llama_token t = 504;
        (void)llama_decode(ctx, llama_batch_get_one(&t, 1));
        llama_free(ctx);
    }
}
enum { N_FIELDS = 18 };

/* Generated call `i` in a child process, or (i >= hostile_n_calls) hostile context field
 * i - hostile_n_calls. The child's wait status. */
static int in_child(struct hostile *h, int i) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        if (i < hostile_n_calls) {
            hostile_calls[i].call(h);
            _exit(context_still_works(h, &hostile_calls[i]));
        }
        one_field(h, i - hostile_n_calls);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

/* What became of a child: "returned", "returned, but the context no longer works", or how it died. */
static const char *outcome(int status) {
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status) == 0 ? "returned" : "returned, but the context no longer works";
    }
    if (WIFSIGNALED(status)) {
        return WTERMSIG(status) == SIGALRM ? "hung" : strsignal(WTERMSIG(status));
    }
    return "stopped";
}

int main(void) {
    llama_backend_init();
    llama_log_set(quiet_log, NULL);
    struct hostile h;
    prepare(&h);
    CHECK(h.model && h.ctx && h.bext, "the live objects exist");
    if (tu_failures) {
        return tu_finish("hostile_calls");
    }
    int returned = 0, usable = 0;
    for (int i = 0; i < hostile_n_calls; i++) {
        int status = in_child(&h, i);
        returned += WIFEXITED(status);
        usable += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (set %d): %s", hostile_calls[i].function,
              hostile_calls[i].set, outcome(status));
    }
    printf("hostile calls: %d of %d returned, the context worked after %d\n", returned, hostile_n_calls, usable);
    int fields = 0;
    for (int f = 0; f < N_FIELDS; f++) {
        int status = in_child(&h, hostile_n_calls + f);
        fields += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "context parameters, hostile field %d: %s", f,
              outcome(status));
    }
    printf("hostile context parameters: %d of %d created or refused\n", fields, N_FIELDS);
    llama_batch_free(h.batch[2]);
    llama_batch_ext_free(h.bext);
    llama_sampler_free(h.smpl);
    llama_free(h.ctx);
    llama_model_free(h.model);
    return tu_finish("hostile_calls");
}
