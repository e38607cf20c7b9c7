/* LoRA adapters (issue #12): an adapter at scale s computes what its weights merged into the model
 * compute (tiny Qwen3 and Qwen3-MoE models in F32, the MoE adapter on the experts, a projection and
 * the token embeddings, prompts longer than a ubatch); scale 0 is the model itself, to the bit;
 * a new scale reuses the built graph and gives what a rebuilt graph gives; two adapters add up;
 * the metadata and aLoRA getters answer; adapters for another architecture, of other shapes, of a
 * type ggml cannot multiply, or not adapters at all are refused; an adapter freed while a context applies it keeps working
 * there, and a model's adapters go with the model; control vectors apply to the layers they
 * name and clear to the bit. The files are written by c-tests/gen_adapters.sh
 * into ENGINE_GEN_DIR. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *PROMPT =
    "The history of Rome begins with a small village on the Tiber, which grew over centuries into the "
    "capital of an empire that reached from Britain to Mesopotamia. Its roads, laws and language";

static char gen_path_buf[4][1024];
static int gen_path_next;

static const char *gen_path(const char *file) {
    const char *dir = getenv("ENGINE_GEN_DIR");
    if (!dir) {
        fprintf(stderr, "ENGINE_GEN_DIR is not set (run through ctest)\n");
        exit(2);
    }
    char *p = gen_path_buf[gen_path_next++ % 4];
    snprintf(p, sizeof gen_path_buf[0], "%s/%s", dir, file);
    return p;
}

static struct llama_model *load(const char *path) {
    struct llama_model *m = llama_model_load_from_file(path, llama_model_default_params());
    if (!m) {
        fprintf(stderr, "failed to load %s: %s\n", path, llama_engine_last_error());
        exit(2);
    }
    return m;
}

static struct llama_adapter_lora *adapter(struct llama_model *m, const char *path) {
    struct llama_adapter_lora *a = llama_adapter_lora_init(m, path);
    if (!a) {
        fprintf(stderr, "failed to load the adapter %s: %s\n", path, llama_engine_last_error());
        exit(2);
    }
    return a;
}

static int tokenize(struct llama_model *m, llama_token *out, int cap) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    return llama_tokenize(v, PROMPT, (int32_t)strlen(PROMPT), out, cap, true, false);
}

static struct llama_context *context(struct llama_model *m, int n_ubatch) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = (uint32_t)n_ubatch;
    cp.no_perf = false;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) {
        fprintf(stderr, "no context: %s\n", llama_engine_last_error());
        exit(2);
    }
    return ctx;
}

/* The last logits of the prompt (in ubatches of n_ubatch) with `n` adapters at `scales`. */
static float *run(struct llama_model *m, struct llama_adapter_lora **a, float *s, int n, int n_ubatch) {
    llama_token t[256];
    int nt = tokenize(m, t, 256);
    struct llama_context *ctx = context(m, n_ubatch);
    CHECK(llama_set_adapters_lora(ctx, a, (size_t)n, s) == 0, "set_adapters: %s", llama_engine_last_error());
    CHECK(tu_decode(ctx, t, nt, 0, 0) == 0, "decode: %s", llama_engine_last_error());
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    float *out = malloc(sizeof(float) * (size_t)nv);
    memcpy(out, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)nv);
    llama_free(ctx);
    return out;
}

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    }
    return d;
}

/* The adapter at 0.75 against the model it was merged into at 0.75: equal up to rounding, while
 * the model without the adapter is far from both. */
static void matches_merged(const char *model_file, const char *lora_file, const char *merged_file) {
    struct llama_model *m = load(gen_path(model_file));
    struct llama_model *merged = load(gen_path(merged_file));
    struct llama_adapter_lora *a = adapter(m, gen_path(lora_file));
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    float s = 0.75f;
    float *with = run(m, &a, &s, 1, 7);
    float *base = run(m, NULL, NULL, 0, 7);
    float *ref = run(merged, NULL, NULL, 0, 7);
    double d_lora = max_diff(with, ref, nv), d_base = max_diff(base, ref, nv);
    fprintf(stderr, "%s: |lora - merged| = %g, |base - merged| = %g\n", model_file, d_lora, d_base);
    CHECK(d_lora < 5e-3, "%s with %s differs from the merged model by %g", model_file, lora_file, d_lora);
    CHECK(d_base > 100 * d_lora && d_base > 0.05, "%s: the adapter changes too little (%g)", model_file, d_base);
    free(with);
    free(base);
    free(ref);
    llama_model_free(merged);
    llama_model_free(m);
}

static bool same_bits(const float *a, const float *b, int n) {
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

static void scales_and_sets(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    struct llama_adapter_lora *a = adapter(m, gen_path("smollm2-lora.gguf"));
    struct llama_adapter_lora *b = adapter(m, gen_path("smollm2-lora-ffn.gguf"));
    float *base = run(m, NULL, NULL, 0, 16);
    float zero = 0.0f, one = 1.0f;
    float *at0 = run(m, &a, &zero, 1, 16);
    CHECK(same_bits(base, at0, nv), "an adapter at scale 0 changed the logits");
    float *at1 = run(m, &a, &one, 1, 16);
    CHECK(max_diff(base, at1, nv) > 0.05, "the adapter at scale 1 changed nothing");
    float *ffn = run(m, &b, &one, 1, 16);
    struct llama_adapter_lora *both[2] = {a, b};
    float scales[2] = {1.0f, 1.0f};
    float *ab = run(m, both, scales, 2, 16);
    CHECK(max_diff(ab, at1, nv) > 0.05 && max_diff(ab, ffn, nv) > 0.05, "two adapters did not both apply");
    /* The same adapter twice counts once, at its first scale (as in llama.cpp). */
    struct llama_adapter_lora *twice[2] = {a, a};
    float twice_scales[2] = {1.0f, 3.0f};
    float *tw = run(m, twice, twice_scales, 2, 16);
    CHECK(same_bits(tw, at1, nv), "an adapter given twice did not count once");
    free(tw);
    free(base);
    free(at0);
    free(at1);
    free(ffn);
    free(ab);

    /* A new scale between two decodes: the graph is reused, and the logits are those of a graph
     * built for the new scale. */
    llama_token t[256];
    int nt = tokenize(m, t, 256);
    float half = 0.5f;
    float *logits[2];
    int reused[2];
    for (int k = 0; k < 2; k++) {
        struct llama_context *ctx = context(m, 512);
        llama_set_adapters_lora(ctx, &a, 1, &one);
        CHECK(tu_decode(ctx, t, nt, 0, 0) == 0, "decode");
        CHECK(tu_decode(ctx, &t[1], 1, nt, 0) == 0, "decode");
        int before = llama_perf_context(ctx).n_reused;
        if (k == 1) {
            /* Taking the adapter away and back builds the graph anew. */
            llama_set_adapters_lora(ctx, NULL, 0, NULL);
        }
        CHECK(llama_set_adapters_lora(ctx, &a, 1, &half) == 0, "set");
        CHECK(tu_decode(ctx, &t[2], 1, nt + 1, 0) == 0, "decode");
        reused[k] = llama_perf_context(ctx).n_reused - before;
        logits[k] = malloc(sizeof(float) * (size_t)nv);
        memcpy(logits[k], llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)nv);
        llama_free(ctx);
    }
    CHECK(reused[0] == 1, "a new scale rebuilt the graph (%d reused)", reused[0]);
    CHECK(reused[1] == 0, "a new set of adapters reused the graph");
    CHECK(same_bits(logits[0], logits[1], nv), "a scale set into a reused graph gave other logits");
    free(logits[0]);
    free(logits[1]);

    /* Freed while a context applies it: it stays applied there. */
    struct llama_context *ctx = context(m, 512);
    llama_set_adapters_lora(ctx, &a, 1, &one);
    llama_adapter_lora_free(a);
    CHECK(tu_decode(ctx, t, nt, 0, 0) == 0, "decode after freeing the adapter: %s", llama_engine_last_error());
    tu_log_clear();
    llama_adapter_lora_free(a);
    CHECK(tu_log_contains("freed already"), "a second free went unnoticed");
    CHECK(llama_set_adapters_lora(ctx, &a, 1, &one) == -1, "a freed adapter was accepted");
    llama_free(ctx);

    /* The model's adapters go with it. */
    llama_model_free(m);
    CHECK(llama_adapter_meta_count(b) == -1, "an adapter outlived its model's handle");
}

static void metadata(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_adapter_lora *a = adapter(m, gen_path("smollm2-lora.gguf"));
    char buf[128];
    CHECK(llama_adapter_meta_val_str(a, "adapter.type", buf, sizeof buf) == 4 && strcmp(buf, "lora") == 0,
          "adapter.type: '%s'", buf);
    CHECK(llama_adapter_meta_val_str(a, "adapter.lora.alpha", buf, sizeof buf) > 0 && strcmp(buf, "8.000000") == 0,
          "alpha: '%s'", buf);
    CHECK(llama_adapter_meta_val_str(a, "no.such.key", buf, sizeof buf) == -1 && buf[0] == 0, "a missing key");
    int n = llama_adapter_meta_count(a);
    /* general.architecture, general.type, adapter.type, adapter.lora.alpha (the array of aLoRA
     * tokens is not metadata text). */
    CHECK(n == 4, "%d metadata keys", n);
    bool found = false;
    for (int i = 0; i < n; i++) {
        char key[128], val[128];
        CHECK(llama_adapter_meta_key_by_index(a, i, key, sizeof key) > 0, "key %d", i);
        CHECK(llama_adapter_meta_val_str_by_index(a, i, val, sizeof val) >= 0, "value %d", i);
        found |= strcmp(key, "general.architecture") == 0 && strcmp(val, "llama") == 0;
    }
    CHECK(found, "general.architecture not listed");
    CHECK(llama_adapter_meta_key_by_index(a, n, buf, sizeof buf) == -1 && buf[0] == 0, "index past the end");
    CHECK(llama_adapter_get_alora_n_invocation_tokens(a) == 3, "aLoRA tokens");
    const llama_token *inv = llama_adapter_get_alora_invocation_tokens(a);
    CHECK(inv && inv[0] == 1 && inv[1] == 2 && inv[2] == 3, "aLoRA token values");
    struct llama_adapter_lora *b = adapter(m, gen_path("smollm2-lora-ffn.gguf"));
    CHECK(llama_adapter_get_alora_n_invocation_tokens(b) == 0, "aLoRA tokens of a plain adapter");
    CHECK(llama_adapter_get_alora_n_invocation_tokens(NULL) == 0, "aLoRA tokens of NULL");
    llama_adapter_lora_free(b);
    /* Through an open FILE*. */
    FILE *f = fopen(gen_path("smollm2-lora-ffn.gguf"), "rb");
    struct llama_adapter_lora *c = llama_adapter_lora_init_from_file_ptr(m, f);
    fclose(f);
    CHECK(c != NULL && llama_adapter_meta_count(c) == 4, "loaded through FILE*: %s", llama_engine_last_error());
    llama_model_free(m);
}

static void refusals(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    struct llama_model *q = load(gen_path("qwen3-f32.gguf"));
    struct {
        const char *file, *says;
    } bad[] = {
        {"qwen3-lora.gguf", "architecture"},
        {"qwen3-as-llama.gguf", "made for another model"},
        {"qwen3-f32.gguf", "general.type"},
        {"smollm2-lora-f64.gguf", "cannot multiply"},
        {"no-such-file.gguf", "no-such-file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tu_log_clear();
        CHECK(llama_adapter_lora_init(m, gen_path(bad[i].file)) == NULL, "%s was accepted", bad[i].file);
        CHECK(tu_log_contains(bad[i].says), "%s: the log does not say '%s': %s", bad[i].file, bad[i].says,
              tu_log_text());
    }
    CHECK(llama_adapter_lora_init(NULL, gen_path("smollm2-lora.gguf")) == NULL, "no model");
    CHECK(llama_adapter_lora_init_from_file_ptr(m, NULL) == NULL, "NULL FILE*");
    /* An adapter of one model on the context of another. */
    struct llama_adapter_lora *qa = adapter(q, gen_path("qwen3-lora.gguf"));
    struct llama_context *ctx = context(m, 512);
    float one = 1.0f;
    tu_log_clear();
    CHECK(llama_set_adapters_lora(ctx, &qa, 1, &one) == -1, "another model's adapter was accepted");
    CHECK(tu_log_contains("another model"), "the log does not say why");
    CHECK(llama_set_adapters_lora(ctx, NULL, 1, &one) == -1, "NULL adapters with a count");
    llama_free(ctx);
    llama_model_free(q);
    llama_model_free(m);
}

/* Control vectors: a direction changes the logits, one for layers past the model's end (or only
 * layer 0, which never has one) changes nothing, clearing gives the model's logits back to the bit,
 * and a vector of the wrong width is refused. */
static void control_vectors(void) {
    struct llama_model *m = tu_load(SMOLLM2_FILE, false);
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    int n_embd = llama_model_n_embd(m), n_layer = llama_model_n_layer(m);
    size_t len = (size_t)n_embd * (size_t)(n_layer - 1);
    float *dir = malloc(sizeof(float) * len);
    for (size_t i = 0; i < len; i++) {
        dir[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / 2000.0f;
    }
    llama_token t[256];
    int nt = tokenize(m, t, 256);
    struct llama_context *ctx = context(m, 16);
    float *rows[5];
    struct {
        const float *data;
        int n_embd, start, end;
    } steps[5] = {
        {NULL, n_embd, -1, -1},
        {dir, n_embd, 1, n_layer - 1},
        {dir, n_embd, n_layer, n_layer + 4},
        {dir, n_embd, 0, 0},
        {NULL, n_embd, -1, -1},
    };
    for (int i = 0; i < 5; i++) {
        CHECK(llama_set_adapter_cvec(ctx, steps[i].data, len, steps[i].n_embd, steps[i].start, steps[i].end) == 0,
              "step %d: %s", i, llama_engine_last_error());
        llama_memory_clear(llama_get_memory(ctx), true);
        CHECK(tu_decode(ctx, t, nt, 0, 0) == 0, "decode");
        rows[i] = malloc(sizeof(float) * (size_t)nv);
        memcpy(rows[i], llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)nv);
    }
    CHECK(max_diff(rows[0], rows[1], nv) > 0.05, "the control vector changed nothing");
    CHECK(same_bits(rows[0], rows[2], nv), "a vector for layers past the end changed the logits");
    CHECK(same_bits(rows[0], rows[3], nv), "a vector for layer 0 changed the logits");
    CHECK(same_bits(rows[0], rows[4], nv), "clearing did not give the model's logits back");
    tu_log_clear();
    CHECK(llama_set_adapter_cvec(ctx, dir, len, n_embd + 1, 1, n_layer - 1) == -1, "a wrong width was accepted");
    CHECK(tu_log_contains("n_embd"), "the log does not say why");
    for (int i = 0; i < 5; i++) free(rows[i]);
    free(dir);
    llama_free(ctx);
    llama_model_free(m);
}

int main(void) {
    tu_capture_log();
    matches_merged("qwen3-f32.gguf", "qwen3-lora.gguf", "qwen3-merged.gguf");
    matches_merged("qwen3moe-f32.gguf", "qwen3moe-lora.gguf", "qwen3moe-merged.gguf");
    scales_and_sets();
    metadata();
    refusals();
    control_vectors();
    return tu_finish("test_lora");
}
