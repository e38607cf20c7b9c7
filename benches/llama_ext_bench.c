// What a library's llama-ext.h functions answer (llama.cpp's staging header, C++ names), printed so
// that two libraries can be compared line by line: the token embeddings, each file type's default
// tensor type, the tensor types the quantizer's rules choose for a model's tensors in every file
// type (on the model llama_quant_model_from_metadata makes of its facts, as llama.cpp's
// test-quant-type-selection does), and what the graphs llama_graph_reserve makes compute.
//
//   llama_ext_bench LIBRARY MODEL TENSORS
//
// TENSORS lists MODEL's tensors, one per line: name, ggml type, then ne[0..3]
// (benches/compare.sh writes it with the gguf package).
#include "dl.h"
#include "rows.h"

#include <stdint.h>
#include <string.h>

/* llama-ext.h's llama_quant_model_desc. */
struct quant_model_desc {
    const char *architecture;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v;
};

typedef uint32_t (*get_tok_embd_t)(const struct llama_model *, float *);
typedef enum ggml_type (*default_type_t)(enum llama_ftype);
typedef struct llama_model *(*model_from_metadata_t)(const struct quant_model_desc *);
typedef void *(*quant_init_t)(const struct llama_model *, const struct llama_model_quantize_params *);
typedef void (*quant_free_t)(void *);
typedef bool (*allows_t)(const void *, const struct ggml_tensor *);
typedef void (*compute_types_t)(void *, enum llama_ftype, struct ggml_tensor **, enum ggml_type *, size_t);
typedef struct ggml_cgraph *(*graph_reserve_t)(struct llama_context *, uint32_t, uint32_t, uint32_t);

/* A u32 metadata value of the model's architecture ("<arch>.<key>"), or `fallback`. */
static uint32_t arch_u32(const struct llama_model *model, const char *arch, const char *key, uint32_t fallback) {
    DL_LOAD(llama_model_meta_val_str);
    char name[160], val[64];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    return p_llama_model_meta_val_str(model, name, val, sizeof val) >= 0 ? (uint32_t)strtoul(val, NULL, 10) : fallback;
}

/* What a reserved graph computes: how many nodes of each op that does the work (matrix products,
 * attention, rotation, norms, state-space scans). Not node for node: llama.cpp keeps the last
 * layer's row selection when every token is an output (two GET_ROWS the engine leaves out) and
 * splits a reserved ubatch over the per-sequence streams, whose shapes the engine's reservation
 * does not follow. */
static void print_graph(struct ggml_cgraph *gf, const char *what) {
    if (!gf) {
        printf("%s: no graph\n", what);
        return;
    }
    /* ggml's graph accessors, from the library's ggml (loaded with it, globally). */
    int (*n_nodes)(struct ggml_cgraph *) = (int (*)(struct ggml_cgraph *))dlsym(RTLD_DEFAULT, "ggml_graph_n_nodes");
    struct ggml_tensor *(*node)(struct ggml_cgraph *, int) =
        (struct ggml_tensor * (*)(struct ggml_cgraph *, int)) dlsym(RTLD_DEFAULT, "ggml_graph_node");
    if (!n_nodes || !node) {
        printf("%s: ggml's graph accessors not found\n", what);
        return;
    }
    static const enum ggml_op ops[] = {GGML_OP_MUL_MAT, GGML_OP_MUL_MAT_ID, GGML_OP_FLASH_ATTN_EXT, GGML_OP_SOFT_MAX,
                                       GGML_OP_ROPE,    GGML_OP_RMS_NORM,   GGML_OP_NORM,           GGML_OP_SSM_CONV,
                                       GGML_OP_SSM_SCAN};
    int count[sizeof ops / sizeof *ops] = {0};
    for (int i = 0; i < n_nodes(gf); i++) {
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) count[k] += node(gf, i)->op == ops[k];
    }
    printf("%s:", what);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) printf(" %d", count[k]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIBRARY MODEL TENSORS\n", argv[0]);
        return 2;
    }
    /* The library's symbols (and its ggml's) visible to dlsym(RTLD_DEFAULT): ggml's graph
     * accessors are looked up there. */
    dl_lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!dl_lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    dl_path = argv[1];
    dl_init(dl_log_errors);
    get_tok_embd_t get_tok_embd = (get_tok_embd_t)dl_sym("_Z24llama_model_get_tok_embdPK11llama_modelPf");
    default_type_t default_type = (default_type_t)dl_sym("_Z28llama_ftype_get_default_type11llama_ftype");
    model_from_metadata_t from_metadata =
        (model_from_metadata_t)dl_sym("_Z31llama_quant_model_from_metadataPK22llama_quant_model_desc");
    quant_init_t quant_init = (quant_init_t)dl_sym("_Z16llama_quant_initPK11llama_modelPK27llama_model_quantize_params");
    quant_free_t quant_free = (quant_free_t)dl_sym("_Z16llama_quant_freeP19quantize_state_impl");
    allows_t allows = (allows_t)dl_sym("_Z38llama_quant_tensor_allows_quantizationPK19quantize_state_implPK11ggml_tensor");
    compute_types_t compute_types =
        (compute_types_t)dl_sym("_Z25llama_quant_compute_typesP19quantize_state_impl11llama_ftypePP11ggml_tensorP9ggml_typem");
    graph_reserve_t graph_reserve = (graph_reserve_t)dl_sym("_Z19llama_graph_reserveP13llama_contextjjj");
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_meta_val_str);
    DL_LOAD(llama_model_n_embd);
    DL_LOAD(llama_model_n_layer);
    DL_LOAD(llama_model_n_head);
    DL_LOAD(llama_model_n_head_kv);
    DL_LOAD(llama_model_free);
    DL_LOAD(llama_model_quantize_default_params);
    DL_LOAD(llama_free);
    DL_LOAD(llama_n_ubatch);
    DL_LOAD(llama_n_seq_max);

    struct llama_model *model = dl_load_model(argv[2], p_llama_model_default_params());

    /* The token embeddings, dequantized. */
    uint32_t n = get_tok_embd(model, NULL);
    float *embd = malloc(sizeof(float) * (n ? n : 1));
    uint32_t got = get_tok_embd(model, embd);
    printf("tok_embd: %u values, wrote %u, %016llx\n", n, got, (unsigned long long)hash_bits(embd, (int)got));
    free(embd);

    printf("default types:");
    for (int f = 0; f <= 45; f++) printf(" %d", (int)default_type((enum llama_ftype)f));
    printf("\n");

    /* The graphs test-export-graph-ops takes: a prompt's and a token's. */
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    cp.n_ubatch = 64;
    cp.n_seq_max = 2;
    struct llama_context *ctx = dl_new_context(model, cp);
    if (ctx) {
        uint32_t n_tokens = p_llama_n_ubatch(ctx), n_seqs = p_llama_n_seq_max(ctx);
        print_graph(graph_reserve(ctx, n_tokens, n_seqs, n_tokens), "prompt graph");
        print_graph(graph_reserve(ctx, n_seqs, n_seqs, n_seqs), "token graph");
        p_llama_free(ctx);
    }

    /* The quantizer's rules on the model of the facts, for the model's tensors. */
    char arch[64];
    p_llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
    int32_t n_head = p_llama_model_n_head(model), n_embd = p_llama_model_n_embd(model);
    uint32_t head = n_head > 0 ? (uint32_t)(n_embd / n_head) : 0;
    struct quant_model_desc desc = {
        arch,
        (uint32_t)n_embd,
        arch_u32(model, arch, "feed_forward_length", 0),
        (uint32_t)p_llama_model_n_layer(model),
        (uint32_t)n_head,
        (uint32_t)p_llama_model_n_head_kv(model),
        arch_u32(model, arch, "expert_count", 0),
        arch_u32(model, arch, "attention.key_length", head),
        arch_u32(model, arch, "attention.value_length", head),
    };
    struct llama_model *mock = from_metadata(&desc);
    printf("model from metadata: %s\n", mock ? "made" : "none");
    struct llama_model_quantize_params qp = p_llama_model_quantize_default_params();
    void *qs = mock ? quant_init(mock, &qp) : NULL;
    FILE *f = fopen(argv[3], "r");
    if (!qs || !f) {
        printf("no quantization state or tensor list\n");
        return 0;
    }
    static struct ggml_tensor tensors[4096];
    struct ggml_tensor *quantizable[4096];
    int n_tensors = 0, n_quantizable = 0;
    char name[GGML_MAX_NAME];
    int type;
    long long ne[4];
    while (n_tensors < 4096 &&
           fscanf(f, "%63s %d %lld %lld %lld %lld", name, &type, &ne[0], &ne[1], &ne[2], &ne[3]) == 6) {
        struct ggml_tensor *t = &tensors[n_tensors++];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->type = (enum ggml_type)type;
        for (int d = 0; d < 4; d++) t->ne[d] = ne[d];
        bool q = allows(qs, t);
        printf("allows %s %d\n", t->name, q);
        if (q) quantizable[n_quantizable++] = t;
    }
    fclose(f);
    enum ggml_type *types = malloc(sizeof(enum ggml_type) * (n_quantizable ? n_quantizable : 1));
    /* The file types up to BF16 (32); llama.cpp 0.3.36's llama_quant_compute_types throws on the
     * later ones (TQ1_0, TQ2_0, MXFP4, Q1_0, Q2_0: a target type it cannot name), ending the
     * process. */
    for (int ft = 0; ft <= LLAMA_FTYPE_MOSTLY_BF16; ft++) {
        if (default_type((enum llama_ftype)ft) == GGML_TYPE_COUNT) continue;
        compute_types(qs, (enum llama_ftype)ft, quantizable, types, (size_t)n_quantizable);
        printf("types for file type %d:", ft);
        for (int i = 0; i < n_quantizable; i++) printf(" %d", (int)types[i]);
        printf("\n");
    }
    free(types);
    quant_free(qs);
    p_llama_model_free(mock);
    p_llama_model_free(model);
    return 0;
}
