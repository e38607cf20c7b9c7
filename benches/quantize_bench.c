// What a llama.h library's quantizer writes, printed so that two libraries can be compared line by
// line (benches/compare.sh): for every file type, and for each of llama_model_quantize's
// parameters, the return code, the size and a hash of every byte of each file written, and whether
// anything else was left in the output folder.
//
//   quantize_bench LIBRARY MODEL DIR [IMATRIX_LIST]
//
// The files are written in a new folder in DIR (so that two runs can share DIR), removed after.
// IMATRIX_LIST names tensors and their widths ("name columns" lines, columns times experts); the
// importance matrices are made up from a fixed stream (llama.cpp's quantizer only needs them
// positive and finite), so the IQ types that require one take part.
#define _POSIX_C_SOURCE 200809L
#include "dl.h"

#include <dirent.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_file(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    *size = -1;
    if (!f) return 0;
    uint64_t h = 1469598103934665603ull;
    long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        h = (h ^ (uint64_t)(unsigned char)c) * 1099511628211ull;
        n++;
    }
    fclose(f);
    *size = n;
    return h;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file in `dir` (sorted): size and hash, printed after a success (llama.cpp leaves part of
 * a file behind after some failures, the engine nothing: not compared); then removed. */
static void report_and_clear(const char *dir, uint32_t rc) {
    char *names[64];
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.' && n < 64) names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    if (n == 0 && rc == 0) printf("  (no file)\n");
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        long size;
        uint64_t h = hash_file(path, &size);
        if (rc == 0) printf("  %s: %ld bytes %016llx\n", names[i], size, (unsigned long long)h);
        remove(path);
        free(names[i]);
    }
}

struct imatrix {
    struct llama_model_imatrix_data *entries;
    int n;
};

static struct imatrix read_imatrix(const char *list) {
    struct imatrix im = {calloc(4096, sizeof(struct llama_model_imatrix_data)), 0};
    FILE *f = fopen(list, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", list);
        exit(1);
    }
    char name[512];
    long cols;
    uint64_t r = 7;
    while (im.n < 4095 && fscanf(f, "%511s %ld", name, &cols) == 2) {
        float *v = malloc(sizeof(float) * (size_t)cols);
        for (long i = 0; i < cols; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = 0.05f + (float)(r >> 40) / (float)(1 << 24);
        }
        im.entries[im.n].name = strdup(name);
        im.entries[im.n].data = v;
        im.entries[im.n].size = (size_t)cols;
        im.n++;
    }
    fclose(f);
    return im;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s LIBRARY MODEL DIR [IMATRIX_LIST]\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_quantize_default_params);
    DL_LOAD(llama_model_quantize);
    const char *model = argv[2];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/quantize.XXXXXX", argv[3]);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "cannot make a folder in %s\n", argv[3]);
        return 1;
    }
    struct imatrix im = {NULL, 0};
    if (argc == 5) im = read_imatrix(argv[4]);
    char out[4200];
    snprintf(out, sizeof out, "%s/out.gguf", dir);

    static const struct {
        const char *name;
        enum llama_ftype ftype;
        bool imatrix;
    } types[] = {
        {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0, false},       {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1, false},
        {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0, false},       {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1, false},
        {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0, false},       {"F16", LLAMA_FTYPE_MOSTLY_F16, false},
        {"BF16", LLAMA_FTYPE_MOSTLY_BF16, false},       {"F32", LLAMA_FTYPE_ALL_F32, false},
        {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K, false},       {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S, true},
        {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S, false},   {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M, false},
        {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L, false},   {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S, false},
        {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M, false},   {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S, false},
        {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M, false},   {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K, false},
        {"IQ3_XS", LLAMA_FTYPE_MOSTLY_IQ3_XS, true},   {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S, false},
        {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M, false},     {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL, false},
        {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS, false},   {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0, false},
        {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0, false},     {"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE, false},
        {"Q1_0", LLAMA_FTYPE_MOSTLY_Q1_0, false},       {"Q2_0", LLAMA_FTYPE_MOSTLY_Q2_0, false},
        {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS, true},  {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS, true},
        {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S, true},      {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M, true},
        {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S, true},      {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M, true},
        {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS, true},  {"NVFP4 (not a quantizer file type)", LLAMA_FTYPE_MOSTLY_NVFP4, false},
        {"ftype 99", (enum llama_ftype)99, false},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        struct llama_model_quantize_params p = p_llama_model_quantize_default_params();
        p.ftype = types[i].ftype;
        p.allow_requantize = true;
        p.nthread = (int)(i % 3);
        for (int with = 0; with <= (types[i].imatrix && im.n > 0); with++) {
            p.imatrix = with ? im.entries : NULL;
            uint32_t rc = p_llama_model_quantize(model, out, &p);
            printf("%s%s: rc %u\n", types[i].name, with ? " with imatrix" : "", rc);
            report_and_clear(dir, rc);
        }
    }

    /* Each parameter on its own, on Q4_K_M (or Q8_0 where that shows more). */
    static const int32_t prune[] = {1, 5, -1};
    static const struct llama_model_tensor_override tt[] = {
        {"attn_v", GGML_TYPE_Q8_0}, {"ffn_down", GGML_TYPE_F16}, {"blk\\.[0-3]\\.ffn_up", GGML_TYPE_IQ4_NL}, {NULL, 0}};
    struct llama_model_kv_override kv[5];
    memset(kv, 0, sizeof kv);
    snprintf(kv[0].key, sizeof kv[0].key, "general.name");
    kv[0].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
    snprintf(kv[0].val_str, sizeof kv[0].val_str, "renamed by the quantizer");
    snprintf(kv[1].key, sizeof kv[1].key, "llama.context_length");
    kv[1].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    kv[1].val_i64 = 8192;
    snprintf(kv[2].key, sizeof kv[2].key, "llama.rope.freq_base");
    kv[2].tag = LLAMA_KV_OVERRIDE_TYPE_FLOAT;
    kv[2].val_f64 = 50000.5;
    snprintf(kv[3].key, sizeof kv[3].key, "quantizer.flag");
    kv[3].tag = LLAMA_KV_OVERRIDE_TYPE_BOOL;
    kv[3].val_bool = true;
    /* A quantized input for the requantizing cases, beside the output folder. */
    char stage[4200];
    snprintf(stage, sizeof stage, "%s.q4_0.gguf", dir);
    struct llama_model_quantize_params sp = p_llama_model_quantize_default_params();
    sp.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
    printf("a Q4_0 file to requantize: rc %u\n", p_llama_model_quantize(model, stage, &sp));
    for (int c = 0; c < 15; c++) {
        struct llama_model_quantize_params p = p_llama_model_quantize_default_params();
        p.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
        p.allow_requantize = true;
        p.nthread = 2;
        const char *what = "";
        switch (c) {
            case 0: what = "pure"; p.pure = true; break;
            case 1: what = "output_tensor_type q8_0"; p.output_tensor_type = GGML_TYPE_Q8_0; break;
            case 2: what = "token_embedding_type q5_k"; p.token_embedding_type = GGML_TYPE_Q5_K; break;
            case 3: what = "quantize_output_tensor false"; p.quantize_output_tensor = false; break;
            case 4: what = "only_copy"; p.only_copy = true; break;
            case 5: what = "tensor types"; p.tt_overrides = tt; break;
            case 6: what = "kv_overrides"; p.kv_overrides = kv; break;
            case 7: what = "prune_layers 1 5"; p.prune_layers = prune; break;
            case 8: what = "keep_split"; p.keep_split = true; break;
            case 9: what = "dry_run"; p.dry_run = true; break;
            case 10: what = "requantizing a Q4_0 file, not allowed"; p.allow_requantize = false; break;
            case 11: what = "one thread, rows in slabs of 64 KiB"; p.nthread = 1; p.max_buf_size = 64 << 10; break;
            case 12: what = "Q8_0, prune_layers 1 5 with an imatrix"; p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
                p.prune_layers = prune; p.imatrix = im.n ? im.entries : NULL; break;
            case 13: what = "Q4_0 with an imatrix"; p.ftype = LLAMA_FTYPE_MOSTLY_Q4_0; p.imatrix = im.n ? im.entries : NULL; break;
            case 14: what = "a missing input"; break;
        }
        const char *input = c == 14 ? "/nonexistent/model.gguf" : c == 10 ? stage : model;
        uint32_t rc = p_llama_model_quantize(input, out, &p);
        printf("%s: rc %u\n", what, rc);
        report_and_clear(dir, rc);
        if (c == 10) {
            p.allow_requantize = true;
            rc = p_llama_model_quantize(stage, out, &p);
            printf("requantizing a Q4_0 file, allowed: rc %u\n", rc);
            report_and_clear(dir, rc);
        }
    }
    remove(stage);
    rmdir(dir);
    return 0;
}
