/* A model made by llama_model_init_from_user through the library under test: the hyper-parameters
 * of MODEL (its metadata, copied into a fresh gguf_context), its tensors F32 unless TYPES is
 * "file" (then each tensor of MODEL names its own type, as llama.h lets a caller override the
 * default), their data from a callback that fills each tensor from a hash of its name. Prints the
 * callback's calls (name, type, shape) in order, the model's description, parameter count and
 * size, then the last logits of a decoded prompt as exact floats (an encoder-decoder's prompt
 * encoded, then its decoder start token decoded). Both libraries print the same
 * lines when they create the same tensors in the same order and compute the same model. With OUT,
 * the model is saved there.
 *
 *   init_user_bench LIB MODEL f32|file [OUT] */
#include "dl.h"

#include <stdint.h>
#include <string.h>

#include "gguf.h"

static __typeof__(&ggml_backend_tensor_set) p_tensor_set;
static __typeof__(&ggml_fp32_to_fp16) p_to_fp16;
static __typeof__(&ggml_nelements) p_nelements;
static __typeof__(&ggml_nbytes) p_nbytes;
static __typeof__(&ggml_type_name) p_type_name;

/* Values in [-0.1, 0.1) from a generator seeded by the tensor's name: the same tensor gets the
 * same data whatever order the library asks in. Decay rates (ssm_a) are negative, as a state
 * space model needs. */
static void fill(struct ggml_tensor *t, void *ud) {
    int *calls = ud;
    ++*calls;
    printf("tensor %s %s [%lld, %lld, %lld, %lld]\n", t->name, p_type_name(t->type), (long long)t->ne[0],
           (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    uint64_t s = 1469598103934665603ull;
    for (const char *c = t->name; *c; c++) {
        s = (s ^ (uint8_t)*c) * 1099511628211ull;
    }
    const int64_t n = p_nelements(t);
    const int negative = strstr(t->name, "ssm_a") != NULL;
    float *f32 = malloc(n * sizeof *f32);
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float v = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 0.2f;
        f32[i] = negative && v > 0 ? -v : v;
    }
    if (t->type == GGML_TYPE_F32) {
        p_tensor_set(t, f32, 0, p_nbytes(t));
    } else if (t->type == GGML_TYPE_F16) {
        ggml_fp16_t *f16 = malloc(n * sizeof *f16);
        for (int64_t i = 0; i < n; i++) {
            f16[i] = p_to_fp16(f32[i]);
        }
        p_tensor_set(t, f16, 0, p_nbytes(t));
        free(f16);
    } else {
        printf("  (left as allocated: the bench fills only F32 and F16)\n");
    }
    free(f32);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s LIB MODEL f32|file [OUT]\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_init_from_user);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_model_desc);
    DL_LOAD(llama_model_n_params);
    DL_LOAD(llama_model_size);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_free);
    DL_LOAD(llama_model_free);
    DL_LOAD(llama_model_save_to_file);
    DL_LOAD(gguf_init_from_file);
    DL_LOAD(gguf_init_empty);
    DL_LOAD(gguf_set_kv);
    DL_LOAD(gguf_add_tensor);
    DL_LOAD(gguf_free);
    DL_LOAD(ggml_get_first_tensor);
    DL_LOAD(ggml_get_next_tensor);
    DL_LOAD(ggml_free);
    p_tensor_set = (__typeof__(p_tensor_set))dl_sym("ggml_backend_tensor_set");
    p_to_fp16 = (__typeof__(p_to_fp16))dl_sym("ggml_fp32_to_fp16");
    p_nelements = (__typeof__(p_nelements))dl_sym("ggml_nelements");
    p_nbytes = (__typeof__(p_nbytes))dl_sym("ggml_nbytes");
    p_type_name = (__typeof__(p_type_name))dl_sym("ggml_type_name");

    struct ggml_context *tensors = NULL;
    struct gguf_context *file = p_gguf_init_from_file(argv[2], (struct gguf_init_params){true, &tensors});
    if (!file) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    struct gguf_context *meta = p_gguf_init_empty();
    p_gguf_set_kv(meta, file);
    if (strcmp(argv[3], "file") == 0) {
        for (struct ggml_tensor *t = p_ggml_get_first_tensor(tensors); t; t = p_ggml_get_next_tensor(tensors, t)) {
            p_gguf_add_tensor(meta, t);
        }
    }

    int calls = 0;
    struct llama_model_params mp = p_llama_model_default_params();
    struct llama_model *model = p_llama_model_init_from_user(meta, fill, &calls, mp);
    p_gguf_free(meta);
    p_gguf_free(file);
    p_ggml_free(tensors);
    if (!model) {
        printf("error: no model (%d calls)\n", calls);
        return 0;
    }
    char desc[128];
    p_llama_model_desc(model, desc, sizeof desc);
    printf("model %s, %llu parameters, %llu bytes, %d calls\n", desc, (unsigned long long)p_llama_model_n_params(model),
           (unsigned long long)p_llama_model_size(model), calls);

    if (argc == 5) {
        p_llama_model_save_to_file(model, argv[4]);
    }

    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 256;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = dl_new_context(model, cp);
    if (!ctx) {
        p_llama_model_free(model);
        return 0;
    }
    const int32_t n_vocab = p_llama_vocab_n_tokens(p_llama_model_get_vocab(model));
    int32_t prompt[12];
    for (int i = 0; i < 12; i++) {
        prompt[i] = (3 + 7 * i) % n_vocab;
    }
    DL_LOAD(llama_model_has_encoder);
    DL_LOAD(llama_model_has_decoder);
    DL_LOAD(llama_model_decoder_start_token);
    int rc;
    if (p_llama_model_has_encoder(model) && p_llama_model_has_decoder(model)) {
        rc = dl_encode(ctx, p_llama_batch_get_one(prompt, 12));
        llama_token start = p_llama_model_decoder_start_token(model);
        if (rc == 0) rc = dl_decode(ctx, p_llama_batch_get_one(&start, 1));
    } else {
        rc = dl_decode(ctx, p_llama_batch_get_one(prompt, 12));
    }
    printf("decode rc %d\n", rc);
    const float *logits = rc == 0 ? p_llama_get_logits_ith(ctx, -1) : NULL;
    for (int32_t i = 0; logits && i < n_vocab; i++) {
        printf("%a%c", logits[i], i % 8 == 7 || i == n_vocab - 1 ? '\n' : ' ');
    }
    p_llama_free(ctx);
    p_llama_model_free(model);
    return 0;
}
