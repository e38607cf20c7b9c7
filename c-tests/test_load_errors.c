/* Loading fails cleanly (NULL, a logged reason, last error set, no crash) on missing and malformed
 * files, honours load modes, kv overrides, vocab_only and the progress callback. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[256];

/* Write `len` bytes of `data` (optionally after a 4-byte magic) to a temp file; returns its path. */
static const char *write_tmp(const char *name, const void *data, size_t len) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/engine_test_%d_%s.gguf", (int)getpid(), name);
    FILE *f = fopen(tmp_path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "cannot write %s\n", tmp_path);
        exit(2);
    }
    fclose(f);
    return tmp_path;
}

static void expect_fail(const char *path, struct llama_model_params mp, const char *needle, const char *what) {
    tu_log_clear();
    struct llama_model *m = llama_model_load_from_file(path, mp);
    CHECK(m == NULL, "%s: load should fail", what);
    if (m) {
        llama_model_free(m);
    }
    CHECK(strstr(llama_engine_last_error(), needle) != NULL, "%s: last error '%s' lacks '%s'", what,
          llama_engine_last_error(), needle);
    CHECK(tu_log_contains(needle), "%s: log lacks '%s'", what, needle);
}

static int n_progress = 0;
static float last_progress = -1;
static bool monotonic = true;

static bool progress(float p, void *ud) {
    int stop_after = *(int *)ud;
    if (p < last_progress) {
        monotonic = false;
    }
    last_progress = p;
    n_progress++;
    return stop_after < 0 || n_progress < stop_after;
}

int main(void) {
    tu_capture_log();
    struct llama_model_params mp = llama_model_default_params();
    const char *model = tu_model_path(SMOLLM2_FILE);
    size_t len;
    char *bytes = tu_read_file(model, &len);

    expect_fail(NULL, mp, "path_model is NULL", "NULL path");
    expect_fail("/nonexistent/model.gguf", mp, "cannot open model file", "missing file");
    expect_fail(write_tmp("empty", "", 0), mp, "empty", "empty file");
    expect_fail(write_tmp("ggjt", "tjgg\x03\0\0\0", 8), mp, "GGJT", "legacy GGJT file");
    expect_fail(write_tmp("text", "hello world, not a model", 24), mp, "not a GGUF file", "text file");
    expect_fail(write_tmp("truncated_header", bytes, 100000), mp, "malformed GGUF", "truncated metadata");
    expect_fail(write_tmp("truncated_data", bytes, len - 4096), mp, "extends past the end of the file", "truncated data");
    unsigned char *v9 = malloc(len);
    memcpy(v9, bytes, len);
    v9[4] = 9;
    expect_fail(write_tmp("version9", v9, len), mp, "version 9", "unsupported version");
    free(v9);

    /* Override: a value of the right kind changes what the model reports; a wrong kind is refused. */
    struct llama_model_kv_override ov[2];
    memset(ov, 0, sizeof ov);
    strcpy(ov[0].key, "llama.context_length");
    ov[0].tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    ov[0].val_i64 = 4096;
    mp.kv_overrides = ov;
    struct llama_model *m = llama_model_load_from_file(model, mp);
    CHECK(m && llama_model_n_ctx_train(m) == 4096, "int override");
    char val[64];
    llama_model_meta_val_str(m, "llama.context_length", val, sizeof val);
    CHECK(strcmp(val, "8192") == 0, "metadata shows the file's value, as llama.cpp: %s", val);
    llama_model_free(m);
    ov[0].tag = LLAMA_KV_OVERRIDE_TYPE_STR;
    strcpy(ov[0].val_str, "4096");
    expect_fail(model, mp, "wrong type", "string override of an integer key");
    strcpy(ov[0].key, "general.architecture");
    strcpy(ov[0].val_str, "no-such-arch");
    expect_fail(model, mp, "unknown or unsupported architecture 'no-such-arch'", "unknown architecture");
    mp.kv_overrides = NULL;

    /* Load modes: reading into memory gives the same model as mapping; unknown modes are refused. */
    mp.load_mode = LLAMA_LOAD_MODE_NONE;
    m = llama_model_load_from_file(model, mp);
    CHECK(m && llama_model_n_params(m) == 134515008, "read mode");
    llama_model_free(m);
    mp.load_mode = LLAMA_LOAD_MODE_MMAP_MLOCK;
    m = llama_model_load_from_file(model, mp);
    CHECK(m != NULL, "mmap+mlock mode");
    llama_model_free(m);
    mp.load_mode = (enum llama_load_mode)99;
    expect_fail(model, mp, "unknown load_mode 99", "bad load mode");
    mp.load_mode = LLAMA_LOAD_MODE_AUTO;

    /* check_tensors validates the data and still loads a good file. */
    mp.check_tensors = true;
    m = llama_model_load_from_file(model, mp);
    CHECK(m != NULL, "check_tensors");
    llama_model_free(m);
    mp.check_tensors = false;

    /* Progress: called, increasing, ending at 1; returning false cancels. */
    int never = -1;
    mp.progress_callback = progress;
    mp.progress_callback_user_data = &never;
    m = llama_model_load_from_file(model, mp);
    CHECK(m && n_progress > 1 && last_progress == 1.0f && monotonic, "progress: %d calls, last %f", n_progress,
          last_progress);
    llama_model_free(m);
    int stop = 3;
    n_progress = 0;
    last_progress = -1;
    mp.progress_callback_user_data = &stop;
    expect_fail(model, mp, "cancelled", "cancel by progress callback");
    CHECK(n_progress == 3, "progress stopped after %d calls", n_progress);
    for (int mode = 0; mode < 2; mode++) {
        mp.load_mode = mode ? LLAMA_LOAD_MODE_NONE : LLAMA_LOAD_MODE_MMAP;
        n_progress = 0;
        stop = 1;
        expect_fail(model, mp, "cancelled", "cancel at the first report");
    }
    mp = llama_model_default_params();

    /* NULL handles get failure values and a message, never a crash. */
    tu_log_clear();
    CHECK(llama_model_n_embd(NULL) == -1, "n_embd(NULL)");
    CHECK(tu_log_contains("llama_model_n_embd: invalid argument: model is NULL"), "NULL model logged");
    CHECK(llama_model_get_vocab(NULL) == NULL, "get_vocab(NULL)");
    CHECK(llama_model_meta_count(NULL) == -1, "meta_count(NULL)");
    CHECK(llama_model_desc(NULL, val, sizeof val) == -1, "desc(NULL)");
    llama_model_free(NULL);

    /* Splits that are not the first one, or a bad list, are refused with a reason. */
    const char *one[] = {model, model};
    m = llama_model_load_from_splits(one, 2, mp);
    CHECK(m == NULL && strstr(llama_engine_last_error(), "split") != NULL, "two copies are not splits: %s",
          llama_engine_last_error());
    m = llama_model_load_from_splits(one, 1, mp);
    CHECK(m != NULL, "a single file through load_from_splits");
    llama_model_free(m);

    free(bytes);
    char cleanup[300];
    snprintf(cleanup, sizeof cleanup, "rm -f /tmp/engine_test_%d_*.gguf", (int)getpid());
    CHECK(system(cleanup) == 0, "cleanup");
    return tu_finish("test_load_errors");
}
