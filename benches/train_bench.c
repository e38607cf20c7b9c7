/* Training through the library under test (llama_opt_init, llama_opt_epoch), as llama.cpp's
 * llama-finetune drives it: MODEL loaded into memory (load_mode none), an F32 cache, datapoints of
 * n_ctx tokens (a repeating token pattern, so the loss falls), two epochs of three training
 * datapoints and one evaluated. Prints, per ubatch, the running loss and accuracy as exact floats,
 * then the model's training context and the last logits of a decode with the trained weights;
 * with OUT, saves the trained model there. Both libraries print the same lines when they train
 * alike.
 *
 *   train_bench LIB MODEL N_UBATCH OPTIMIZER(0 adamw, 1 sgd) [OUT] */
#include "dl.h"

#include <stdint.h>
#include <string.h>

#include "ggml-opt.h"

static __typeof__(&ggml_opt_result_loss) p_result_loss;
static __typeof__(&ggml_opt_result_accuracy) p_result_accuracy;
static __typeof__(&ggml_opt_result_ndata) p_result_ndata;

static void report(bool train, ggml_opt_context_t opt, ggml_opt_dataset_t dataset, ggml_opt_result_t result,
                   int64_t ibatch, int64_t ibatch_max, int64_t t_start_us) {
    (void)opt, (void)dataset, (void)t_start_us;
    double loss, unc, acc, acc_unc;
    int64_t ndata;
    p_result_loss(result, &loss, &unc);
    p_result_accuracy(result, &acc, &acc_unc);
    p_result_ndata(result, &ndata);
    printf("%s %lld/%lld ndata %lld loss %a acc %a\n", train ? "train" : "eval", (long long)ibatch,
           (long long)ibatch_max, (long long)ndata, loss, acc);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s LIB MODEL N_UBATCH OPTIMIZER [OUT]\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_n_ctx);
    DL_LOAD(llama_model_n_ctx_train);
    DL_LOAD(llama_opt_param_filter_all);
    DL_LOAD(llama_opt_init);
    DL_LOAD(llama_opt_epoch);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_clear);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_model_save_to_file);
    DL_LOAD(llama_free);
    DL_LOAD(llama_model_free);
    DL_LOAD(ggml_opt_dataset_init);
    DL_LOAD(ggml_opt_dataset_data);
    DL_LOAD(ggml_opt_dataset_labels);
    DL_LOAD(ggml_opt_dataset_free);
    DL_LOAD(ggml_opt_result_init);
    DL_LOAD(ggml_opt_result_reset);
    DL_LOAD(ggml_opt_result_free);
    DL_LOAD(ggml_opt_get_constant_optimizer_params);
    p_result_loss = (__typeof__(p_result_loss))dl_sym("ggml_opt_result_loss");
    p_result_accuracy = (__typeof__(p_result_accuracy))dl_sym("ggml_opt_result_accuracy");
    p_result_ndata = (__typeof__(p_result_ndata))dl_sym("ggml_opt_result_ndata");

    struct llama_model_params mp = p_llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_NONE;
    /* llama.cpp saves a tensor repacked for the CPU in the repacked layout: off, as in save_bench. */
    mp.use_extra_bufts = false;
    struct llama_model *model = dl_load_model(argv[2], mp);
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = (uint32_t)atoi(argv[3]);
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    struct llama_context *ctx = dl_new_context(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot make a context\n");
        return 1;
    }
    const int32_t n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    const int64_t n_ctx = p_llama_n_ctx(ctx), ndata = 4, stride = 37;

    /* A pattern of 11 tokens with an occasional change: learnable, not trivial. */
    const int64_t n_tokens = (ndata - 1) * stride + n_ctx + 1;
    int32_t *tokens = malloc(n_tokens * sizeof *tokens);
    for (int64_t i = 0; i < n_tokens; i++) {
        tokens[i] = (int32_t)((100 + 7 * (i % 11) + (i % 29 == 0 ? 3 : 0)) % n_vocab);
    }
    ggml_opt_dataset_t dataset = p_ggml_opt_dataset_init(GGML_TYPE_I32, GGML_TYPE_I32, n_ctx, n_ctx, ndata, 1);
    int32_t *data = p_ggml_opt_dataset_data(dataset)->data;
    int32_t *labels = p_ggml_opt_dataset_labels(dataset)->data;
    for (int64_t d = 0; d < ndata; d++) {
        memcpy(data + d * n_ctx, tokens + d * stride, n_ctx * sizeof *tokens);
        memcpy(labels + d * n_ctx, tokens + d * stride + 1, n_ctx * sizeof *tokens);
    }

    struct ggml_opt_optimizer_params op;
    memset(&op, 0, sizeof op);
    op.adamw.alpha = 1e-3f;
    op.adamw.beta1 = 0.9f;
    op.adamw.beta2 = 0.999f;
    op.adamw.eps = 1e-8f;
    op.adamw.wd = 0.01f;
    op.sgd.alpha = 1e-2f;
    op.sgd.wd = 0.0f;
    struct llama_opt_params lp = {
        .n_ctx_train = 0,
        .param_filter = p_llama_opt_param_filter_all,
        .param_filter_ud = NULL,
        .get_opt_pars = p_ggml_opt_get_constant_optimizer_params,
        .get_opt_pars_ud = &op,
        .optimizer_type = (enum ggml_opt_optimizer_type)atoi(argv[4]),
    };
    p_llama_opt_init(ctx, model, lp);
    ggml_opt_result_t train = p_ggml_opt_result_init(), eval = p_ggml_opt_result_init();
    for (int epoch = 0; epoch < 2; epoch++) {
        p_llama_opt_epoch(ctx, dataset, train, eval, ndata - 1, report, report);
        p_ggml_opt_result_reset(train);
        p_ggml_opt_result_reset(eval);
    }
    printf("n_ctx_train %d\n", p_llama_model_n_ctx_train(model));

    /* Inference with the trained weights (training leaves its last datapoint in the cache).
     * Not where a ubatch is the whole context: llama.cpp's decodes then keep reading the ubatch's
     * own keys and values and abort (the engine decodes as usual). */
    if (cp.n_ubatch < n_ctx) {
        p_llama_memory_clear(p_llama_get_memory(ctx), true);
        int32_t prompt[16];
        memcpy(prompt, tokens, sizeof prompt);
        int rc = dl_decode(ctx, p_llama_batch_get_one(prompt, 16));
        const float *logits = p_llama_get_logits_ith(ctx, -1);
        uint64_t h = 1469598103934665603ull;
        for (int32_t i = 0; logits && i < n_vocab; i++) {
            uint32_t bits;
            memcpy(&bits, &logits[i], sizeof bits);
            h = (h ^ bits) * 1099511628211ull;
        }
        printf("decode rc %d logits %016llx\n", rc, (unsigned long long)h);
    }
    if (argc == 6) {
        p_llama_model_save_to_file(model, argv[5]);
    }
    p_ggml_opt_result_free(train);
    p_ggml_opt_result_free(eval);
    p_ggml_opt_dataset_free(dataset);
    free(tokens);
    p_llama_free(ctx);
    p_llama_model_free(model);
    return 0;
}
