/* Training (llama_opt_init, llama_opt_epoch) as llama-finetune does it, on a generated Qwen3 in
 * F32 read into memory: the loss of a repeating token pattern falls over two epochs, progress is
 * reported per ubatch, the trained weights decode and save (the training context recorded), with a
 * ubatch as the whole context and with smaller ubatches (whose keys and values pass the cache). And
 * what ggml would abort on is refused with a log line: a model mapped read-only, a second set-up,
 * no set-up, a dataset of the wrong shape, labels outside the vocabulary, a split outside the data,
 * out-of-range optimizer parameters, an architecture without a backward pass (mixture of experts),
 * another model than the context's. That the losses are llama.cpp's, bit for bit, is checked
 * against llama.cpp by benches/compare.sh. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml-opt.h"

#define N_CTX 256
#define NDATA 4

static char gen_path[600];

static const char *gen(const char *file) {
    const char *dir = getenv("ENGINE_GEN_DIR");
    snprintf(gen_path, sizeof gen_path, "%s/%s", dir ? dir : ".", file);
    return gen_path;
}

static struct llama_model *load(const char *path, enum llama_load_mode mode) {
    struct llama_model_params mp = llama_model_default_params();
    mp.load_mode = mode;
    struct llama_model *m = llama_model_load_from_file(path, mp);
    CHECK(m != NULL, "cannot load %s: %s", path, llama_engine_last_error());
    return m;
}

static struct llama_context *context(struct llama_model *model, uint32_t n_ubatch) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = N_CTX;
    cp.n_ubatch = n_ubatch;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    /* Training turns flash attention off; the saved model's logits are compared without it. */
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    return ctx;
}

/* NDATA datapoints of N_CTX tokens from a repeating pattern, each label the next token. */
static ggml_opt_dataset_t dataset(int32_t n_vocab, int64_t ne, int32_t bad_label) {
    ggml_opt_dataset_t d = ggml_opt_dataset_init(GGML_TYPE_I32, GGML_TYPE_I32, ne, ne, NDATA, 1);
    int32_t *data = ggml_opt_dataset_data(d)->data, *labels = ggml_opt_dataset_labels(d)->data;
    for (int64_t i = 0; i < NDATA * ne; i++) {
        int64_t t = (i % ne) + 13 * (i / ne);
        data[i] = (int32_t)((100 + 7 * (t % 11)) % n_vocab);
        labels[i] = (int32_t)((100 + 7 * ((t + 1) % 11)) % n_vocab);
    }
    if (bad_label) {
        labels[ne + 5] = bad_label;
    }
    return d;
}

static struct ggml_opt_optimizer_params opt_pars;

static struct llama_opt_params opt_params(void) {
    memset(&opt_pars, 0, sizeof opt_pars);
    opt_pars.adamw.alpha = 1e-3f;
    opt_pars.adamw.beta1 = 0.9f;
    opt_pars.adamw.beta2 = 0.999f;
    opt_pars.adamw.eps = 1e-8f;
    struct llama_opt_params p = {
        .n_ctx_train = 0,
        .param_filter = llama_opt_param_filter_all,
        .param_filter_ud = NULL,
        .get_opt_pars = ggml_opt_get_constant_optimizer_params,
        .get_opt_pars_ud = &opt_pars,
        .optimizer_type = GGML_OPT_OPTIMIZER_TYPE_ADAMW,
    };
    return p;
}

/* What the progress callback saw. */
static int64_t calls, last_ibatch, last_max;
static bool last_train;

static void progress(bool train, ggml_opt_context_t opt, ggml_opt_dataset_t d, ggml_opt_result_t result,
                     int64_t ibatch, int64_t ibatch_max, int64_t t_start_us) {
    (void)opt, (void)d, (void)result, (void)t_start_us;
    calls++;
    last_train = train;
    last_ibatch = ibatch;
    last_max = ibatch_max;
}

static double loss_of(ggml_opt_result_t r) {
    double loss, unc;
    ggml_opt_result_loss(r, &loss, &unc);
    return loss;
}

/* The last logits of 16 pattern tokens from an empty cache, hashed. */
static uint64_t decode_hash(struct llama_context *ctx, int32_t n_vocab) {
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_token t[16];
    for (int i = 0; i < 16; i++) {
        t[i] = (100 + 7 * (i % 11)) % n_vocab;
    }
    CHECK(tu_decode(ctx, t, 16, 0, 0) == 0, "decode: %s", llama_engine_last_error());
    const float *l = llama_get_logits_ith(ctx, -1);
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; l && i < n_vocab; i++) {
        uint32_t bits;
        memcpy(&bits, &l[i], sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
    }
    return h;
}

/* Two epochs of three training datapoints and one evaluated; the model trained is saved to `out`. */
static void trains(uint32_t n_ubatch, const char *out) {
    struct llama_model *model = load(gen("qwen3-f32.gguf"), LLAMA_LOAD_MODE_NONE);
    if (!model) {
        return;
    }
    struct llama_context *ctx = context(model, n_ubatch);
    int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    uint64_t before = decode_hash(ctx, n_vocab);
    ggml_opt_dataset_t d = dataset(n_vocab, N_CTX, 0);
    tu_log_clear();
    llama_opt_init(ctx, model, opt_params());
    CHECK(!tu_log_contains("llama_opt_init"), "n_ubatch %u: opt_init refused: %s", n_ubatch, tu_log_text());
    CHECK((n_ubatch < N_CTX) == tu_log_contains("will not receive gradients"),
          "n_ubatch %u: the warning for ubatches smaller than the context", n_ubatch);
    ggml_opt_result_t train = ggml_opt_result_init(), eval = ggml_opt_result_init();
    double losses[2][2];
    for (int epoch = 0; epoch < 2; epoch++) {
        calls = 0;
        llama_opt_epoch(ctx, d, train, eval, NDATA - 1, progress, progress);
        int64_t per_ctx = N_CTX / n_ubatch, ndata;
        CHECK(calls == NDATA * per_ctx, "n_ubatch %u: %lld progress calls", n_ubatch, (long long)calls);
        CHECK(!last_train && last_ibatch == per_ctx && last_max == per_ctx, "n_ubatch %u: last report %d %lld/%lld",
              n_ubatch, last_train, (long long)last_ibatch, (long long)last_max);
        ggml_opt_result_ndata(train, &ndata);
        CHECK(ndata == (NDATA - 1) * N_CTX, "n_ubatch %u: %lld training tokens counted", n_ubatch, (long long)ndata);
        losses[epoch][0] = loss_of(train);
        losses[epoch][1] = loss_of(eval);
        ggml_opt_result_reset(train);
        ggml_opt_result_reset(eval);
    }
    CHECK(isfinite(losses[0][0]) && losses[1][0] < losses[0][0], "n_ubatch %u: training loss %g then %g", n_ubatch,
          losses[0][0], losses[1][0]);
    CHECK(losses[1][1] < losses[0][1], "n_ubatch %u: evaluation loss %g then %g", n_ubatch, losses[0][1], losses[1][1]);
    /* Decoding goes on with the trained weights (in llama.cpp it aborts when a ubatch was the whole
     * context). */
    CHECK(decode_hash(ctx, n_vocab) != before, "n_ubatch %u: the trained model decodes as before", n_ubatch);
    CHECK(llama_model_n_ctx_train(model) == N_CTX, "n_ctx_train %d", llama_model_n_ctx_train(model));

    llama_model_save_to_file(model, out);
    struct llama_model *saved = load(out, LLAMA_LOAD_MODE_MMAP);
    if (saved) {
        CHECK(llama_model_n_ctx_train(saved) == N_CTX, "saved n_ctx_train %d", llama_model_n_ctx_train(saved));
        struct llama_context *c2 = context(saved, n_ubatch);
        uint64_t trained = decode_hash(ctx, n_vocab);
        CHECK(decode_hash(c2, n_vocab) == trained, "n_ubatch %u: the saved model decodes otherwise", n_ubatch);
        llama_free(c2);
        llama_model_free(saved);
    }
    remove(out);
    ggml_opt_result_free(train);
    ggml_opt_result_free(eval);
    ggml_opt_dataset_free(d);
    llama_free(ctx);
    llama_model_free(model);
}

static void refused_epoch(struct llama_context *ctx, ggml_opt_dataset_t d, int64_t split, const char *why) {
    ggml_opt_result_t r = ggml_opt_result_init();
    tu_log_clear();
    llama_opt_epoch(ctx, d, r, NULL, split, NULL, NULL);
    CHECK(tu_log_contains(why), "no refusal with '%s': %s", why, tu_log_text());
    int64_t ndata;
    ggml_opt_result_ndata(r, &ndata);
    CHECK(ndata == 0 || strstr(why, "vocabulary"), "a refused epoch recorded %lld datapoints", (long long)ndata);
    ggml_opt_result_free(r);
}

static void refusals(void) {
    /* Mapped read-only: training would write into the mapping. */
    struct llama_model *mapped = load(gen("qwen3-f32.gguf"), LLAMA_LOAD_MODE_MMAP);
    if (mapped) {
        struct llama_context *ctx = context(mapped, N_CTX);
        tu_log_clear();
        llama_opt_init(ctx, mapped, opt_params());
        CHECK(tu_log_contains("LLAMA_LOAD_MODE_NONE"), "no refusal for a mapped model: %s", tu_log_text());
        ggml_opt_dataset_t d = dataset(llama_vocab_n_tokens(llama_model_get_vocab(mapped)), N_CTX, 0);
        refused_epoch(ctx, d, NDATA - 1, "llama_opt_init has not set this context up");
        ggml_opt_dataset_free(d);
        llama_free(ctx);
        llama_model_free(mapped);
    }

    struct llama_model *model = load(gen("qwen3-f32.gguf"), LLAMA_LOAD_MODE_NONE);
    struct llama_model *other = load(gen("qwen3-f32.gguf"), LLAMA_LOAD_MODE_NONE);
    if (model && other) {
        struct llama_context *ctx = context(model, N_CTX);
        int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
        tu_log_clear();
        llama_opt_init(ctx, other, opt_params());
        CHECK(tu_log_contains("not the one the context was made with"), "another model: %s", tu_log_text());
        struct llama_opt_params no_pars = opt_params();
        no_pars.get_opt_pars = NULL;
        tu_log_clear();
        llama_opt_init(ctx, model, no_pars);
        CHECK(tu_log_contains("get_opt_pars is NULL"), "no optimizer parameters: %s", tu_log_text());
        struct llama_opt_params big = opt_params();
        big.n_ctx_train = 2 * N_CTX;
        tu_log_clear();
        llama_opt_init(ctx, model, big);
        CHECK(tu_log_contains("exceeds the context"), "n_ctx_train past n_ctx: %s", tu_log_text());

        llama_opt_init(ctx, model, opt_params());
        tu_log_clear();
        llama_opt_init(ctx, model, opt_params());
        CHECK(tu_log_contains("already set up"), "a second set-up: %s", tu_log_text());

        ggml_opt_dataset_t d = dataset(n_vocab, N_CTX, 0);
        refused_epoch(ctx, NULL, 0, "dataset is NULL");
        refused_epoch(ctx, d, NDATA + 1, "outside the dataset");
        refused_epoch(ctx, d, -1, "outside the dataset");
        ggml_opt_dataset_t half = dataset(n_vocab, N_CTX / 2, 0);
        refused_epoch(ctx, half, NDATA, "n_ctx = 256 per datapoint");
        ggml_opt_dataset_free(half);
        ggml_opt_dataset_t bad = dataset(n_vocab, N_CTX, n_vocab + 5);
        refused_epoch(ctx, bad, NDATA, "outside the vocabulary");
        ggml_opt_dataset_free(bad);
        /* ggml asserts on a zero learning rate; the step is refused before ggml sees it. */
        opt_pars.adamw.alpha = 0.0f;
        refused_epoch(ctx, d, NDATA, "out of range");
        opt_pars.adamw.alpha = 1e-3f;
        /* A control vector set after llama_opt_init needs larger graphs than its scheduler holds. */
        int32_t n_embd = llama_model_n_embd(model), n_layer = llama_model_n_layer(model);
        float *cv = calloc((size_t)(n_embd * n_layer), sizeof(float));
        CHECK(llama_set_adapter_cvec(ctx, cv, (size_t)(n_embd * n_layer), n_embd, 1, n_layer) == 0, "control vector");
        refused_epoch(ctx, d, NDATA, "need larger graphs");
        free(cv);
        /* The context still decodes after refusals. */
        decode_hash(ctx, n_vocab);
        ggml_opt_dataset_free(d);
        llama_free(ctx);
    }
    llama_model_free(model);
    llama_model_free(other);

    /* Mixture of experts: ggml has no backward pass for the experts' product (llama.cpp aborts). */
    struct llama_model *moe = load(gen("qwen3moe-f32.gguf"), LLAMA_LOAD_MODE_NONE);
    if (moe) {
        struct llama_context *ctx = context(moe, N_CTX);
        llama_opt_init(ctx, moe, opt_params());
        ggml_opt_dataset_t d = dataset(llama_vocab_n_tokens(llama_model_get_vocab(moe)), N_CTX, 0);
        refused_epoch(ctx, d, NDATA, "no backward pass for MUL_MAT_ID");
        ggml_opt_dataset_free(d);
        llama_free(ctx);
        llama_model_free(moe);
    }
}

int main(void) {
    tu_capture_log();
    char dir[] = "/tmp/engine-test-train-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char out[600];
    snprintf(out, sizeof out, "%s/trained.gguf", dir);
    trains(N_CTX, out);
    trains(N_CTX / 2, out);
    refusals();
    rmdir(dir);
    return tu_finish("test_train");
}
