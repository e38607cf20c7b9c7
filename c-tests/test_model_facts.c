/* Both models load through the C API and every fact equals the reference vocab_facts.json; the
 * model getters and metadata accessors behave as llama.h documents. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void check_facts(const char *file, const char *ref) {
    char *facts = tu_read_reference(ref, "vocab_facts.json");
    struct llama_model *m = tu_load(file, false);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    long long want;
    bool wb;
#define FACT(key, actual)                                                                   \
    do {                                                                                    \
        CHECK(tu_json_int(facts, key, &want), "%s: fact %s missing", ref, key);              \
        CHECK((long long)(actual) == want, "%s: %s = %lld, expected %lld", ref, key, (long long)(actual), want); \
    } while (0)
#define FACT_BOOL(key, actual)                                                              \
    do {                                                                                    \
        CHECK(tu_json_bool(facts, key, &wb), "%s: fact %s missing", ref, key);               \
        CHECK((actual) == wb, "%s: %s = %d, expected %d", ref, key, (int)(actual), (int)wb); \
    } while (0)
    FACT("n_tokens", llama_vocab_n_tokens(v));
    FACT("bos", llama_vocab_bos(v));
    FACT("eos", llama_vocab_eos(v));
    FACT("eot", llama_vocab_eot(v));
    FACT("nl", llama_vocab_nl(v));
    FACT("pad", llama_vocab_pad(v));
    FACT_BOOL("add_bos", llama_vocab_get_add_bos(v));
    FACT_BOOL("add_eos", llama_vocab_get_add_eos(v));
    FACT("type", llama_vocab_type(v));
    FACT("n_embd", llama_model_n_embd(m));
    FACT("n_layer", llama_model_n_layer(m));
    FACT("n_head", llama_model_n_head(m));
    FACT("n_head_kv", llama_model_n_head_kv(m));
    FACT("n_ctx_train", llama_model_n_ctx_train(m));
    FACT("n_params", llama_model_n_params(m));
    FACT("size", llama_model_size(m));
#undef FACT
#undef FACT_BOOL

    /* Deprecated aliases agree with the new names. */
    CHECK(llama_n_embd(m) == llama_model_n_embd(m), "llama_n_embd");
    CHECK(llama_n_layer(m) == llama_model_n_layer(m), "llama_n_layer");
    CHECK(llama_n_ctx_train(m) == llama_model_n_ctx_train(m), "llama_n_ctx_train");
    CHECK(llama_n_head(m) == llama_model_n_head(m), "llama_n_head");
    CHECK(llama_n_vocab(v) == llama_vocab_n_tokens(v), "llama_n_vocab");

    /* Metadata: the count, each key by index, and the value by key equals the value by index. */
    int n = llama_model_meta_count(m);
    CHECK(n > 10, "%s: meta count %d", ref, n);
    char key[256], val[512], val2[512];
    bool saw_arch = false;
    for (int i = 0; i < n; i++) {
        int kl = llama_model_meta_key_by_index(m, i, key, sizeof key);
        int vl = llama_model_meta_val_str_by_index(m, i, val, sizeof val);
        CHECK(kl > 0 && (size_t)kl == strlen(key), "%s: key %d length %d", ref, i, kl);
        CHECK(vl >= 0, "%s: value %d", ref, i);
        int vl2 = llama_model_meta_val_str(m, key, val2, sizeof val2);
        CHECK(vl2 == vl && strcmp(val, val2) == 0, "%s: meta '%s' by key differs from by index", ref, key);
        if (strcmp(key, "general.architecture") == 0) {
            saw_arch = true;
        }
    }
    CHECK(saw_arch, "%s: general.architecture not listed", ref);
    CHECK(llama_model_meta_key_by_index(m, n, key, sizeof key) == -1 && key[0] == 0, "out-of-range index");
    CHECK(llama_model_meta_key_by_index(m, -1, key, sizeof key) == -1, "negative index");
    CHECK(llama_model_meta_val_str(m, "no.such.key", val, sizeof val) == -1 && val[0] == 0, "missing key");
    /* A short buffer truncates but reports the full length, like snprintf. */
    int full = llama_model_meta_val_str(m, "general.architecture", val, sizeof val);
    char small[3];
    CHECK(llama_model_meta_val_str(m, "general.architecture", small, sizeof small) == full && strlen(small) == 2,
          "truncation");
    CHECK(strcmp(llama_model_meta_key_str(LLAMA_MODEL_META_KEY_SAMPLING_TOP_K), "general.sampling.top_k") == 0,
          "meta key str");

    char desc[128];
    CHECK(llama_model_desc(m, desc, sizeof desc) > 0, "desc");
    CHECK(strncmp(desc, val, strlen(val)) == 0, "%s: desc '%s' starts with the architecture '%s'", ref, desc, val);
    CHECK(llama_model_ftype(m) != LLAMA_FTYPE_GUESSED, "%s: file type", ref);
    CHECK(llama_model_chat_template(m, "no-such-template") == NULL, "%s: named template", ref);
    CHECK(llama_model_has_decoder(m) && !llama_model_has_encoder(m), "decoder only");
    CHECK(!llama_model_is_recurrent(m) && !llama_model_is_hybrid(m) && !llama_model_is_diffusion(m), "flags");
    CHECK(llama_model_decoder_start_token(m) == LLAMA_TOKEN_NULL, "decoder start");
    /* Without labels, llama.cpp's one score per sequence. */
    CHECK(llama_model_n_cls_out(m) == 1 && llama_model_cls_label(m, 0) == NULL, "no classifier labels");
    CHECK(llama_model_rope_freq_scale_train(m) == 1.0f, "rope freq scale");
    CHECK(llama_model_n_embd_inp(m) == llama_model_n_embd(m) && llama_model_n_embd_out(m) == llama_model_n_embd(m),
          "embd in/out");
    llama_model_free(m);
    free(facts);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    check_facts(SMOLLM2_FILE, SMOLLM2_REF);
    check_facts(GEMMA3_FILE, GEMMA3_REF);

    /* Model-specific facts llama.cpp reports. */
    struct llama_model *s = tu_load(SMOLLM2_FILE, false);
    CHECK(llama_model_rope_type(s) == LLAMA_ROPE_TYPE_NORM, "smollm2 rope type");
    CHECK(llama_model_n_swa(s) == 0, "smollm2 n_swa");
    CHECK(llama_model_ftype(s) == LLAMA_FTYPE_MOSTLY_Q4_1, "smollm2 ftype %d", llama_model_ftype(s));
    const char *tmpl = llama_model_chat_template(s, NULL);
    CHECK(tmpl && strstr(tmpl, "<|im_start|>"), "smollm2 chat template");
    char desc[128];
    llama_model_desc(s, desc, sizeof desc);
    CHECK(strcmp(desc, "llama 256M Q4_1") == 0, "smollm2 desc '%s'", desc);
    llama_model_free(s);

    struct llama_model *g = tu_load(GEMMA3_FILE, false);
    CHECK(llama_model_rope_type(g) == LLAMA_ROPE_TYPE_NEOX, "gemma3 rope type");
    CHECK(llama_model_n_swa(g) == 512, "gemma3 n_swa %d", llama_model_n_swa(g));
    CHECK(llama_model_ftype(g) == LLAMA_FTYPE_MOSTLY_Q4_K_M, "gemma3 ftype %d", llama_model_ftype(g));
    CHECK(llama_model_chat_template(g, NULL) == NULL, "this gemma3 file has no chat template");
    llama_model_desc(g, desc, sizeof desc);
    CHECK(strcmp(desc, "gemma3 270M Q4_K - Medium") == 0, "gemma3 desc '%s'", desc);
    llama_model_free(g);

    /* A vocab-only load has the vocabulary but no hyper-parameters. */
    struct llama_model *vo = tu_load(SMOLLM2_FILE, true);
    CHECK(llama_vocab_n_tokens(llama_model_get_vocab(vo)) == 49152, "vocab-only vocab");
    CHECK(llama_model_n_embd(vo) == 0, "vocab-only n_embd %d", llama_model_n_embd(vo));
    llama_model_free(vo);

    llama_backend_free();
    return tu_finish("test_model_facts");
}
