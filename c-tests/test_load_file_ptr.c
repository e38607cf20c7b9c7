/* llama_model_load_from_file_ptr: a model read from an open FILE*, from where the caller's reads
 * have got to (a GGUF embedded in a larger file, here after 100 bytes read through stdio), mapped
 * or read, computes what the same model loaded by path does; the caller's file position is left
 * alone; NULL is refused. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float *first_logits(struct llama_model *m) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    float *out = calloc((size_t)nv, sizeof(float));
    llama_token t[3] = {1, 504, 3458};
    if (ctx && tu_decode(ctx, t, 3, 0, 0) == 0) {
        memcpy(out, llama_get_logits_ith(ctx, -1), sizeof(float) * (size_t)nv);
    }
    llama_free(ctx);
    return out;
}

int main(void) {
    tu_capture_log();
    const char *path = tu_model_path(SMOLLM2_FILE);
    struct llama_model *by_path = llama_model_load_from_file(path, llama_model_default_params());
    CHECK(by_path != NULL, "load by path");
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(by_path));
    float *want = first_logits(by_path);

    /* The model embedded after 100 bytes of something else. */
    char embedded[256];
    snprintf(embedded, sizeof embedded, "/tmp/engine-test-embedded-%d.bin", (int)getpid());
    FILE *in = fopen(path, "rb"), *out = fopen(embedded, "wb");
    CHECK(in && out, "temp file");
    char head[100];
    memset(head, 'x', sizeof head);
    fwrite(head, 1, sizeof head, out);
    static char buf[1 << 20];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        fwrite(buf, 1, n, out);
    }
    fclose(in);
    fclose(out);

    enum llama_load_mode modes[2] = {LLAMA_LOAD_MODE_MMAP, LLAMA_LOAD_MODE_NONE};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(embedded, "rb");
        char skip[100];
        CHECK(fread(skip, 1, sizeof skip, f) == sizeof skip, "read the prefix through stdio");
        struct llama_model_params mp = llama_model_default_params();
        mp.load_mode = modes[k];
        struct llama_model *m = llama_model_load_from_file_ptr(f, mp);
        CHECK(m != NULL, "load mode %d: %s", modes[k], llama_engine_last_error());
        CHECK(ftell(f) == 100, "the caller's position stays at %ld", ftell(f));
        fclose(f);
        if (m) {
            CHECK(llama_model_n_params(m) == llama_model_n_params(by_path), "the same model");
            float *got = first_logits(m);
            CHECK(memcmp(got, want, sizeof(float) * (size_t)nv) == 0, "load mode %d computes the same", modes[k]);
            free(got);
            llama_model_free(m);
        }
    }

    /* From the start of a plain file, and a file positioned where no GGUF starts. */
    FILE *f = fopen(path, "rb");
    struct llama_model *m = llama_model_load_from_file_ptr(f, llama_model_default_params());
    CHECK(m != NULL, "from offset 0");
    llama_model_free(m);
    fseek(f, 7, SEEK_SET);
    CHECK(llama_model_load_from_file_ptr(f, llama_model_default_params()) == NULL, "no GGUF at byte 7");
    fclose(f);
    CHECK(llama_model_load_from_file_ptr(NULL, llama_model_default_params()) == NULL, "NULL is refused");
    CHECK(tu_log_contains("file is NULL"), "and said so");

    unlink(embedded);
    free(want);
    llama_model_free(by_path);
    return tu_finish("test_load_file_ptr");
}
