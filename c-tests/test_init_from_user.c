/* llama_model_init_from_user: a model made from a gguf_context of hyper-parameters and a callback
 * that fills each tensor. Filled from a model file's own tensors (and the optional tensors llama.cpp
 * creates besides: biases 0, scales 1), the model computes that file's logits bit for bit, saves to
 * a file that loads and computes them again; the callback is called once per tensor, in llama.cpp's
 * order; a tensor the metadata lists with another type gets that type; SmolLM2's 30 layers with
 * every optional bias and scale (933 tensors) decode; a vocabulary-only model calls nothing. And what
 * cannot work is refused with a log line and no model: NULL metadata or callback, per-layer copies
 * given different data, a table of ids made F32. That
 * the tensors, their order and the logits are llama.cpp's is checked against llama.cpp by
 * benches/compare.sh. */
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "gguf.h"

static char gen_path[600];

static const char *gen(const char *file) {
    const char *dir = getenv("ENGINE_GEN_DIR");
    snprintf(gen_path, sizeof gen_path, "%s/%s", dir ? dir : ".", file);
    return gen_path;
}

/* What the callback saw and where it takes data from. */
struct filler {
    struct ggml_context *data; /* a file's tensors with their data, or NULL: zeros */
    int calls;
    char names[1024][64];
    enum ggml_type types[1024];
    int rope_calls;
    bool vary_copies; /* give each copy of rope_freqs.weight other data */
};

static void fill(struct ggml_tensor *t, void *ud) {
    struct filler *f = ud;
    if (f->calls < 1024) {
        snprintf(f->names[f->calls], sizeof f->names[0], "%s", t->name);
        f->types[f->calls] = t->type;
    }
    f->calls++;
    const size_t n = ggml_nbytes(t);
    struct ggml_tensor *src = f->data ? ggml_get_tensor(f->data, t->name) : NULL;
    if (!src && f->data && strcmp(t->name, "output.weight") == 0) {
        src = ggml_get_tensor(f->data, "token_embd.weight"); /* a tied head */
    }
    if (src && src->type == t->type) {
        CHECK(ggml_nbytes(src) == n, "%s: %zu bytes in the file, %zu asked", t->name, ggml_nbytes(src), n);
        ggml_backend_tensor_set(t, src->data, 0, n);
        return;
    }
    if (src && src->type == GGML_TYPE_F32 && t->type == GGML_TYPE_F16) {
        ggml_fp16_t *h = malloc(n);
        ggml_fp32_to_fp16_row(src->data, h, ggml_nelements(t));
        ggml_backend_tensor_set(t, h, 0, n);
        free(h);
        return;
    }
    /* Not in the file: neutral values (a scale of 1, everything else 0). */
    uint8_t *bytes = calloc(1, n);
    if (strstr(t->name, "scale") && t->type == GGML_TYPE_F32) {
        for (int64_t i = 0; i < ggml_nelements(t); i++) {
            ((float *)bytes)[i] = 1.0f;
        }
    }
    if (strcmp(t->name, "rope_freqs.weight") == 0) {
        for (int64_t i = 0; i < ggml_nelements(t); i++) {
            ((float *)bytes)[i] = f->vary_copies ? 1.0f + (float)f->rope_calls : 1.0f;
        }
        f->rope_calls++;
    }
    ggml_backend_tensor_set(t, bytes, 0, n);
    free(bytes);
}

/* The pairs of the file at `path` in a new gguf_context; with `data`, its tensors (and their data)
 * in *data, and with `typed`, its tensor infos too (each naming its type). */
static struct gguf_context *metadata_of(const char *path, struct ggml_context **data, bool typed) {
    struct ggml_context *tensors = NULL;
    struct gguf_context *file = gguf_init_from_file(path, (struct gguf_init_params){false, &tensors});
    CHECK(file != NULL, "cannot read %s", path);
    struct gguf_context *meta = gguf_init_empty();
    gguf_set_kv(meta, file);
    if (typed) {
        for (struct ggml_tensor *t = ggml_get_first_tensor(tensors); t; t = ggml_get_next_tensor(tensors, t)) {
            gguf_add_tensor(meta, t);
        }
    }
    gguf_free(file);
    if (data) {
        *data = tensors;
    } else {
        ggml_free(tensors);
    }
    return meta;
}

static struct llama_context *context(struct llama_model *model) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    return ctx;
}

/* The last logits of a short prompt, copied into `out` (n_vocab values); false if decoding failed. */
static bool logits_of(struct llama_model *model, float *out) {
    struct llama_context *ctx = context(model);
    if (!ctx) {
        return false;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_token prompt[12];
    for (int i = 0; i < 12; i++) {
        prompt[i] = (3 + 17 * i) % n_vocab;
    }
    int rc = tu_decode(ctx, prompt, 12, 0, 0);
    CHECK(rc == 0, "decode: %d %s", rc, llama_engine_last_error());
    if (rc == 0) {
        memcpy(out, llama_get_logits_ith(ctx, -1), n_vocab * sizeof *out);
    }
    llama_free(ctx);
    return rc == 0;
}

static int index_of(const struct filler *f, const char *name) {
    for (int i = 0; i < f->calls && i < 1024; i++) {
        if (strcmp(f->names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

/* The generated Qwen3 made from its own tensors: the file's model, bit for bit. */
static void same_as_file(void) {
    const char *path = gen("qwen3-f32.gguf");
    struct llama_model *file_model = llama_model_load_from_file(path, llama_model_default_params());
    CHECK(file_model != NULL, "cannot load %s", path);
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(file_model));
    float *want = malloc(n_vocab * sizeof *want), *got = malloc(n_vocab * sizeof *got);
    logits_of(file_model, want);

    struct ggml_context *data = NULL;
    struct gguf_context *meta = metadata_of(path, &data, false);
    struct filler *f = calloc(1, sizeof *f);
    f->data = data;
    struct llama_model *model = llama_model_init_from_user(meta, fill, f, llama_model_default_params());
    CHECK(model != NULL, "init_from_user: %s", llama_engine_last_error());
    if (model) {
        /* llama.cpp's order for Qwen3: the head (with the reranker's classifier), each layer's
         * split projections with their biases, the query and key norms after the output
         * projection, then every layer's weight scales. */
        const char *order[] = {"token_embd.weight", "output_norm.weight", "output.weight", "cls.output.weight",
                               "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                               "blk.0.attn_v.weight", "blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias",
                               "blk.0.attn_output.weight", "blk.0.attn_k_norm.weight", "blk.0.attn_q_norm.weight",
                               "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_down.weight",
                               "blk.0.ffn_up.weight", "blk.1.attn_norm.weight"};
        for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
            CHECK(strcmp(f->names[i], order[i]) == 0, "call %zu: %s, want %s", i, f->names[i], order[i]);
        }
        CHECK(f->calls == 60, "%d calls, want 60 (2 layers)", f->calls);
        CHECK(strcmp(f->names[32], "blk.0.attn_q.scale") == 0, "call 32: %s", f->names[32]);
        CHECK(strcmp(f->names[59], "blk.1.ffn_up.input_scale") == 0, "last call: %s", f->names[59]);
        CHECK(index_of(f, "blk.0.ffn_down.scale") < index_of(f, "blk.0.ffn_up.scale"), "scales out of order");
        /* As llama.cpp: no file, so no parameters counted; the file type is general.file_type. */
        CHECK(llama_model_n_params(model) == 0, "n_params %llu", (unsigned long long)llama_model_n_params(model));
        char desc[128];
        llama_model_desc(model, desc, sizeof desc);
        char file_desc[128];
        llama_model_desc(file_model, file_desc, sizeof file_desc);
        CHECK(strcmp(desc, file_desc) == 0, "desc '%s', the file's '%s'", desc, file_desc);

        if (logits_of(model, got)) {
            CHECK(memcmp(want, got, n_vocab * sizeof *got) == 0, "logits differ from the file's model");
        }
        /* Saved, it loads as a file and computes the same. */
        char saved[] = "/tmp/engine-init-user-XXXXXX";
        int fd = mkstemp(saved);
        close(fd);
        llama_model_save_to_file(model, saved);
        struct llama_model *reloaded = llama_model_load_from_file(saved, llama_model_default_params());
        CHECK(reloaded != NULL, "reload: %s", llama_engine_last_error());
        if (reloaded && logits_of(reloaded, got)) {
            CHECK(memcmp(want, got, n_vocab * sizeof *got) == 0, "the saved model's logits differ");
        }
        llama_model_free(reloaded);
        unlink(saved);
        llama_model_free(model);
    }

    /* A tensor listed with another type gets it (F16 matrices, filled converted). */
    struct gguf_context *typed = metadata_of(path, NULL, true);
    gguf_set_tensor_type(typed, "blk.0.attn_q.weight", GGML_TYPE_F16);
    memset(f, 0, sizeof *f);
    f->data = data;
    model = llama_model_init_from_user(typed, fill, f, llama_model_default_params());
    CHECK(model != NULL, "init_from_user with types: %s", llama_engine_last_error());
    int q = index_of(f, "blk.0.attn_q.weight"), k = index_of(f, "blk.0.attn_k.weight");
    CHECK(q >= 0 && f->types[q] == GGML_TYPE_F16, "attn_q given as type %d", q >= 0 ? (int)f->types[q] : -1);
    CHECK(k >= 0 && f->types[k] == GGML_TYPE_F32, "attn_k given as type %d", k >= 0 ? (int)f->types[k] : -1);
    if (model && logits_of(model, got)) {
        CHECK(memcmp(want, got, n_vocab * sizeof *got) != 0, "F16 weights gave the F32 logits");
    }
    llama_model_free(model);

    /* Vocabulary only: no tensor is made. */
    memset(f, 0, sizeof *f);
    struct llama_model_params vp = llama_model_default_params();
    vp.vocab_only = true;
    model = llama_model_init_from_user(meta, fill, f, vp);
    CHECK(model != NULL, "vocab-only: %s", llama_engine_last_error());
    CHECK(f->calls == 0, "vocab-only model: %d calls", f->calls);
    if (model) {
        CHECK(llama_vocab_n_tokens(llama_model_get_vocab(model)) == n_vocab, "vocab-only: another vocabulary");
    }
    llama_model_free(model);

    gguf_free(typed);
    gguf_free(meta);
    ggml_free(data);
    free(f);
    free(want);
    free(got);
    llama_model_free(file_model);
}

/* SmolLM2 (Llama, 30 layers): every optional tensor llama.cpp creates, its rotary factors once per
 * layer. Copies with different data are refused; with the same, the model decodes. */
static void llama_copies(void) {
    struct gguf_context *meta = metadata_of(tu_model_path(SMOLLM2_FILE), NULL, true);
    struct filler *f = calloc(1, sizeof *f);
    f->vary_copies = true;
    tu_log_clear();
    struct llama_model *model = llama_model_init_from_user(meta, fill, f, llama_model_default_params());
    CHECK(model == NULL, "rotary factors differing per layer were accepted");
    CHECK(tu_log_contains("rope_freqs.weight"), "no log line names the copies: %s", tu_log_text());
    llama_model_free(model);

    memset(f, 0, sizeof *f);
    model = llama_model_init_from_user(meta, fill, f, llama_model_default_params());
    CHECK(model != NULL, "SmolLM2: %s", llama_engine_last_error());
    CHECK(f->calls == 933, "%d calls, want 933", f->calls);
    CHECK(f->rope_calls == 30, "rope_freqs.weight given %d times, want once per layer", f->rope_calls);
    int q = index_of(f, "blk.0.attn_q.weight");
    CHECK(q >= 0 && f->types[q] == GGML_TYPE_Q4_1, "attn_q given as type %d", q >= 0 ? (int)f->types[q] : -1);
    if (model) {
        float *logits = malloc(llama_vocab_n_tokens(llama_model_get_vocab(model)) * sizeof *logits);
        logits_of(model, logits);
        free(logits);
    }
    llama_model_free(model);
    gguf_free(meta);
    free(f);
}

static void refusals(void) {
    struct gguf_context *meta = metadata_of(gen("qwen3-f32.gguf"), NULL, false);
    struct filler *f = calloc(1, sizeof *f);
    struct llama_model_params mp = llama_model_default_params();

    tu_log_clear();
    CHECK(llama_model_init_from_user(NULL, fill, f, mp) == NULL, "NULL metadata accepted");
    CHECK(tu_log_contains("metadata is NULL"), "log: %s", tu_log_text());
    tu_log_clear();
    CHECK(llama_model_init_from_user(meta, NULL, f, mp) == NULL, "NULL callback accepted");
    CHECK(tu_log_contains("set_tensor_data is NULL"), "log: %s", tu_log_text());
    gguf_free(meta);

    /* DeepSeek-V4's token-to-expert tables are ids: made F32 (the default), the model is refused
     * (llama.cpp aborts in its first decode). */
    meta = metadata_of(gen("deepseek4-f32.gguf"), NULL, false);
    tu_log_clear();
    CHECK(llama_model_init_from_user(meta, fill, f, mp) == NULL, "DeepSeek-V4 with F32 tables accepted");
    CHECK(tu_log_contains("ffn_gate_tid2eid.weight' is a table of ids: it must be I32, not f32"), "log: %s",
          tu_log_text());
    gguf_free(meta);
    free(f);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    same_as_file();
    llama_copies();
    refusals();
    llama_backend_free();
    return tu_finish("test_init_from_user");
}
