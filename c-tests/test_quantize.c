/* llama_model_quantize (issue #12): a tiny F32 Qwen3 model quantized to Q8_0 loads, says it is
 * Q8_0, and computes what the F32 model computes up to Q8_0's rounding; a failure (an importance
 * matrix that does not fit, an unknown file type, a missing input, NULL arguments) returns 1,
 * says why in the log, and leaves no file behind and an existing output untouched; dry_run writes
 * nothing; metadata overrides land in the file; pruned layers leave a shallower model; keep_split
 * names its file as a split. Byte identity with llama.cpp's quantizer is checked by
 * benches/compare.sh (benches/quantize_bench.c). The model is written by c-tests/gen_adapters.sh
 * into ENGINE_GEN_DIR. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char input[1024], out[1100];
static const char *dir;

static bool exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* Files in the test's folder other than the input and its kin from the fixture. */
static int stray_files(void) {
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        n += strstr(e->d_name, "quantized") != NULL;
    }
    if (d) closedir(d);
    return n;
}

static struct llama_model *load(const char *path) {
    struct llama_model_params mp = llama_model_default_params();
    return llama_model_load_from_file(path, mp);
}

/* The last logits of a short prompt. */
static float *logits(struct llama_model *m, int *n_vocab) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    *n_vocab = llama_vocab_n_tokens(v);
    llama_token t[64];
    int n = llama_tokenize(v, "The quantizer keeps what matters.", 33, t, 64, true, false);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    CHECK(ctx && llama_decode(ctx, llama_batch_get_one(t, n)) == 0, "decode");
    float *row = malloc(sizeof(float) * (size_t)*n_vocab);
    memcpy(row, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)*n_vocab);
    llama_free(ctx);
    return row;
}

static void q8_0_computes_what_f32_computes(void) {
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    CHECK(llama_model_quantize(input, out, &p) == 0, "Q8_0");
    struct llama_model *f32 = load(input), *q8 = load(out);
    CHECK(f32 && q8, "both load");
    if (!f32 || !q8) return;
    char desc[128];
    llama_model_desc(q8, desc, sizeof desc);
    CHECK(strstr(desc, "Q8_0") != NULL, "desc '%s'", desc);
    CHECK(llama_model_size(q8) < llama_model_size(f32) / 3, "Q8_0 is smaller");
    int n;
    float *a = logits(f32, &n), *b = logits(q8, &n);
    double diff = 0, spread = 0;
    for (int i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        spread = fmax(spread, fabs((double)a[i]));
    }
    CHECK(diff > 0 && diff < 0.05 * spread, "|f32 - q8_0| %g of %g", diff, spread);
    free(a);
    free(b);
    llama_model_free(f32);
    llama_model_free(q8);
    remove(out);
}

static void failures_leave_nothing(void) {
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    /* Found wrong only after other tensors were written. */
    float weights[3] = {1, 1, 1};
    struct llama_model_imatrix_data im[] = {{"blk.0.attn_q.weight", weights, 3}, {NULL, NULL, 0}};
    tu_log_clear();
    p.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
    p.imatrix = im;
    CHECK(llama_model_quantize(input, out, &p) == 1, "an importance matrix of the wrong size");
    CHECK(tu_log_contains("imatrix size 3 is different from tensor size"), "log: %s", tu_log_text());
    CHECK(!exists(out) && stray_files() == 0, "nothing written");
    p.imatrix = NULL;

    /* An output that exists stays as it was when quantizing fails. */
    FILE *f = fopen(out, "w");
    fputs("old", f);
    fclose(f);
    p.ftype = (enum llama_ftype)99;
    tu_log_clear();
    CHECK(llama_model_quantize(input, out, &p) == 1, "unknown file type");
    CHECK(tu_log_contains("invalid output file type 99"), "log: %s", tu_log_text());
    size_t len = 0;
    char *kept = tu_read_file(out, &len);
    CHECK(kept && len == 3 && memcmp(kept, "old", 3) == 0, "old output kept");
    free(kept);
    remove(out);

    p = llama_model_quantize_default_params();
    CHECK(llama_model_quantize("/nonexistent/model.gguf", out, &p) == 1, "missing input");
    CHECK(llama_model_quantize(NULL, out, &p) == 1, "NULL input");
    CHECK(llama_model_quantize(input, NULL, &p) == 1, "NULL output");
    CHECK(llama_model_quantize(input, out, NULL) == 1, "NULL params");
    p.dry_run = true;
    CHECK(llama_model_quantize(input, out, &p) == 0, "dry run");
    CHECK(!exists(out) && stray_files() == 0, "a dry run writes nothing");
}

static void parameters(void) {
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    struct llama_model_kv_override kv[2];
    memset(kv, 0, sizeof kv);
    snprintf(kv[0].key, sizeof kv[0].key, "general.name");
    kv[0].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
    snprintf(kv[0].val_str, sizeof kv[0].val_str, "quantized by the test");
    const int32_t prune[] = {1, -1};
    p.kv_overrides = kv;
    p.prune_layers = prune;
    CHECK(llama_model_quantize(input, out, &p) == 0, "overrides and pruning");
    struct llama_model *in = load(input), *m = load(out);
    CHECK(in && m, "both load");
    if (in && m) {
        char name[64] = "";
        llama_model_meta_val_str(m, "general.name", name, sizeof name);
        CHECK(strcmp(name, "quantized by the test") == 0, "name '%s'", name);
        CHECK(llama_model_n_layer(m) == llama_model_n_layer(in) - 1, "layers %d of %d", llama_model_n_layer(m),
              llama_model_n_layer(in));
        int n;
        free(logits(m, &n));
    }
    llama_model_free(in);
    llama_model_free(m);
    remove(out);

    p = llama_model_quantize_default_params();
    p.keep_split = true;
    CHECK(llama_model_quantize(input, out, &p) == 0, "keep_split");
    char split[1200];
    snprintf(split, sizeof split, "%s-00001-of-00001.gguf", out);
    CHECK(exists(split) && !exists(out), "written as split 1 of 1");
    remove(split);
}

int main(void) {
    dir = getenv("ENGINE_GEN_DIR");
    if (!dir) {
        fprintf(stderr, "ENGINE_GEN_DIR is not set (run through ctest)\n");
        return 1;
    }
    snprintf(input, sizeof input, "%s/qwen3-f32.gguf", dir);
    snprintf(out, sizeof out, "%s/qwen3-quantized.gguf", dir);
    llama_backend_init();
    tu_capture_log();
    q8_0_computes_what_f32_computes();
    failures_leave_nothing();
    parameters();
    llama_backend_free();
    return tu_finish("test_quantize");
}
