// What a llama.h library computes with LoRA adapters, printed so that two libraries can be compared
// line by line (benches/compare.sh): the adapters' metadata (sorted by key: llama.cpp keeps it in a
// hash map), the logits of every position of prompts longer than a ubatch with adapters at several
// scales, alone and together, and greedy generation whose adapters and scales change between
// steps; an adapter that does not fit the model is refused; control vectors over layer ranges.
//
//   adapter_bench LIBRARY MODEL ADAPTER_A ADAPTER_B WRONG_ADAPTER
//
// A and B adapt different weights: llama.cpp applies several adapters in the order of a hash map
// of their addresses, which only gives the same bits whatever that order when they add to
// different products.
#include "dl.h"
#include "rows.h"

#include <stdlib.h>

static const char *PROMPT =
    "<|im_start|>user\nSummarise the history of the Roman republic in three sentences, then name "
    "two of its consuls.<|im_end|>\n<|im_start|>assistant\nThe Roman republic began in 509 BC";

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void metadata(const char *what, struct llama_adapter_lora *a) {
    DL_LOAD(llama_adapter_meta_count);
    DL_LOAD(llama_adapter_meta_key_by_index);
    DL_LOAD(llama_adapter_meta_val_str_by_index);
    DL_LOAD(llama_adapter_meta_val_str);
    DL_LOAD(llama_adapter_get_alora_n_invocation_tokens);
    DL_LOAD(llama_adapter_get_alora_invocation_tokens);
    int n = p_llama_adapter_meta_count(a);
    char **lines = calloc((size_t)(n > 0 ? n : 1), sizeof *lines);
    for (int i = 0; i < n; i++) {
        char key[256], val[256];
        int kl = p_llama_adapter_meta_key_by_index(a, i, key, sizeof key);
        int vl = p_llama_adapter_meta_val_str_by_index(a, i, val, sizeof val);
        lines[i] = malloc(600);
        snprintf(lines[i], 600, "%s (%d) = %s (%d)", key, kl, val, vl);
    }
    qsort(lines, (size_t)n, sizeof *lines, cmp_str);
    printf("%s: %d keys\n", what, n);
    for (int i = 0; i < n; i++) {
        printf("%s: %s\n", what, lines[i]);
        free(lines[i]);
    }
    free(lines);
    char buf[64];
    int r = p_llama_adapter_meta_val_str(a, "adapter.lora.alpha", buf, sizeof buf);
    printf("%s: alpha %d '%s'\n", what, r, buf);
    r = p_llama_adapter_meta_val_str(a, "no.such.key", buf, sizeof buf);
    printf("%s: missing key %d '%s'\n", what, r, buf);
    uint64_t na = p_llama_adapter_get_alora_n_invocation_tokens(a);
    printf("%s: %llu aLoRA tokens:", what, (unsigned long long)na);
    const llama_token *t = na ? p_llama_adapter_get_alora_invocation_tokens(a) : NULL;
    for (uint64_t i = 0; i < na; i++) printf(" %d", t[i]);
    printf("\n");
}

/* Control vectors: directions for every layer from a fixed stream, set over layer ranges, with
 * data for only the first layers (the others keep theirs), with the wrong width (refused, the
 * vector kept), cleared; the prompt's last logits after each. */
static void control_vectors(struct llama_model *model, const llama_token *ids, int n, int n_vocab) {
    DL_LOAD(llama_set_adapter_cvec);
    DL_LOAD(llama_model_n_embd);
    DL_LOAD(llama_model_n_layer);
    DL_LOAD(llama_free);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_clear);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    int n_embd = p_llama_model_n_embd(model), n_layer = p_llama_model_n_layer(model);
    size_t len = (size_t)n_embd * (size_t)(n_layer > 1 ? n_layer - 1 : 0);
    /* Room for a step that starts a layer in. */
    float *dir = malloc(sizeof(float) * (len + (size_t)n_embd));
    uint64_t r = 42;
    for (size_t i = 0; i < len + (size_t)n_embd; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        dir[i] = (float)((int)(r >> 33) % 2001 - 1000) / 4000.0f;
    }
    struct {
        const char *name;
        const float *data;
        size_t len;
        int n_embd, start, end;
    } steps[] = {
        {"all layers", dir, len, n_embd, 1, n_layer - 1},
        {"layers 2..3", dir, len, n_embd, 2, 3},
        {"range from 0", dir, len, n_embd, 0, n_layer},
        {"wrong width", dir, len, n_embd + 1, 1, n_layer - 1},
        {"first layer's data", dir + n_embd, (size_t)n_embd, n_embd, 1, n_layer - 1},
        {"cleared", NULL, 0, n_embd, -1, -1},
        {"set again", dir, len, n_embd, 1, 1},
    };
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    struct llama_context *ctx = dl_new_context(model, cp);
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        int rc = p_llama_set_adapter_cvec(ctx, steps[i].data, steps[i].len, steps[i].n_embd, steps[i].start,
                                          steps[i].end);
        p_llama_memory_clear(p_llama_get_memory(ctx), true);
        int drc = dl_decode(ctx, p_llama_batch_get_one((llama_token *)ids, n));
        printf("control vector %s: set %d decode %d:", steps[i].name, rc, drc);
        print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
    }
    p_llama_free(ctx);
    free(dir);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s LIBRARY MODEL ADAPTER_A ADAPTER_B WRONG_ADAPTER\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_adapter_lora_init);
    DL_LOAD(llama_adapter_lora_free);
    DL_LOAD(llama_set_adapters_lora);
    DL_LOAD(llama_model_free);
    struct llama_model *model = dl_load_model(argv[2], p_llama_model_default_params());
    int n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    struct llama_adapter_lora *a = p_llama_adapter_lora_init(model, argv[3]);
    struct llama_adapter_lora *b = p_llama_adapter_lora_init(model, argv[4]);
    if (!a || !b) {
        fprintf(stderr, "cannot load the adapters\n");
        return 1;
    }
    metadata("A", a);
    metadata("B", b);
    printf("wrong adapter %s\n", p_llama_adapter_lora_init(model, argv[5]) ? "accepted" : "refused");

    static llama_token ids[1024];
    int n = p_llama_tokenize(p_llama_model_get_vocab(model), PROMPT, (int)strlen(PROMPT), ids, 1024, true, true);
    struct {
        const char *name;
        int n;
        struct llama_adapter_lora *list[2];
        float scales[2];
    } sets[] = {
        {"none", 0, {NULL, NULL}, {0, 0}},
        {"A 1", 1, {a, NULL}, {1.0f, 0}},
        {"A 0.5", 1, {a, NULL}, {0.5f, 0}},
        {"A -1.25", 1, {a, NULL}, {-1.25f, 0}},
        {"A 0", 1, {a, NULL}, {0.0f, 0}},
        {"B 1", 1, {b, NULL}, {1.0f, 0}},
        {"A 1 B 0.7", 2, {a, b}, {1.0f, 0.7f}},
        {"B 2 A 0.3", 2, {b, a}, {2.0f, 0.3f}},
    };
    /* An encoder takes a batch in one ubatch (llama.cpp aborts otherwise). */
    DL_LOAD(llama_get_memory);
    struct llama_context *probe = dl_new_context(model, dl_context_params());
    bool encoder = probe && !p_llama_get_memory(probe);
    p_llama_free(probe);
    for (int ub = 0; ub < (encoder ? 1 : 2); ub++) {
        for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
            struct llama_context_params cp = dl_context_params();
            cp.n_ctx = 512;
            cp.n_ubatch = ub ? 7 : 512;
            struct llama_context *ctx = dl_new_context(model, cp);
            int rc = p_llama_set_adapters_lora(ctx, sets[s].list, (size_t)sets[s].n, sets[s].scales);
            struct llama_batch batch = p_llama_batch_init(n, 0, 1);
            batch.n_tokens = 0;
            append_seq(&batch, ids, n, 0, true);
            int drc = dl_decode(ctx, batch);
            printf("ub %u %s: set %d decode %d\n", cp.n_ubatch, sets[s].name, rc, drc);
            for (int i = 0; i < n && drc == 0; i++) {
                printf("ub %u %s pos %d:", cp.n_ubatch, sets[s].name, i);
                print_row(p_llama_get_logits_ith(ctx, i), n_vocab);
            }
            p_llama_batch_free(batch);
            p_llama_free(ctx);
        }
    }

    /* Generation while the adapters change: A at 1, A at 0.25 with B, none, B alone. */
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    struct llama_context *ctx = dl_new_context(model, cp);
    int drc = dl_decode(ctx, p_llama_batch_get_one(ids, n));
    for (int phase = 0; phase < 4 && drc == 0; phase++) {
        size_t set = phase == 0 ? 1 : phase == 1 ? 6 : phase == 2 ? 0 : 5;
        float scales[2] = {phase == 1 ? 0.25f : sets[set].scales[0], sets[set].scales[1]};
        p_llama_set_adapters_lora(ctx, sets[set].list, (size_t)sets[set].n, scales);
        for (int step = 0; step < 5 && drc == 0; step++) {
            llama_token t = greedy(p_llama_get_logits_ith(ctx, -1), n_vocab, 0);
            drc = dl_decode(ctx, p_llama_batch_get_one(&t, 1));
            printf("generate phase %d step %d token %d decode %d:", phase, step, t, drc);
            print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
        }
    }
    p_llama_free(ctx);
    control_vectors(model, ids, n, n_vocab);
    p_llama_adapter_lora_free(a);
    p_llama_model_free(model);
    return 0;
}
