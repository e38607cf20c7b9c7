// llama.cpp's staging API (its src/llama-ext.h), which llama.cpp's `common` library and
// llama-cpp-python's llama_cpp_ext.py call by their C++ (mangled) names: declared here as that
// header declares them, linked against libengine.so, and answering as llama.cpp does on the CPU
// (benches/compare.sh compares them with llama.cpp's live: benches/llama_ext_bench.c).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>
#include <vector>

#include "llama.h"

struct llama_memory_breakdown_data {
    size_t model = 0;
    size_t context = 0;
    size_t compute = 0;
    size_t total() const { return model + context + compute; }
};
using llama_memory_breakdown = std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>;

int32_t llama_model_n_expert(const struct llama_model *model);
int32_t llama_model_n_devices(const struct llama_model *model);
ggml_backend_dev_t llama_model_get_device(const struct llama_model *model, int i);
llama_memory_breakdown llama_get_memory_breakdown(const struct llama_context *ctx);
void llama_set_embeddings_nextn(struct llama_context *ctx, bool value, bool masked);
void llama_set_nextn_layer_offset(struct llama_context *ctx, int32_t offset);
float *llama_get_embeddings_nextn(struct llama_context *ctx);
float *llama_get_embeddings_nextn_ith(struct llama_context *ctx, int32_t i);
void llama_set_embeddings_layer_inp(struct llama_context *ctx, uint32_t lid, bool value);
float *llama_get_embeddings_layer_inp(struct llama_context *ctx, uint32_t lid);
llama_context *llama_get_ctx_other(struct llama_context *ctx);
int32_t llama_model_dflash_selector_top_k(const struct llama_model *model);
const int32_t *llama_model_target_layer_ids(const struct llama_model *model);
uint32_t llama_model_target_layer_ids_n(const struct llama_model *model);
struct ggml_cgraph *llama_graph_reserve(struct llama_context *ctx, uint32_t n_tokens, uint32_t n_seqs,
                                        uint32_t n_outputs);
ggml_type llama_ftype_get_default_type(llama_ftype ftype);
struct quantize_state_impl;
quantize_state_impl *llama_quant_init(const llama_model *model, const llama_model_quantize_params *params);
void llama_quant_free(quantize_state_impl *qs);
struct llama_quant_model_desc {
    const char *architecture;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v;
};
llama_model *llama_quant_model_from_metadata(const llama_quant_model_desc *desc);
bool llama_quant_tensor_allows_quantization(const quantize_state_impl *qs, const ggml_tensor *tensor);
void llama_quant_compute_types(quantize_state_impl *qs, llama_ftype ftype, ggml_tensor **tensors,
                               ggml_type *result_types, size_t n_tensors);
uint32_t llama_model_get_tok_embd(const struct llama_model *model, float *out);
// llama.cpp's internal unicode.h, which its tokenizer tests call.
std::string unicode_cpt_to_utf8(uint32_t cpt);

static int failures = 0;
#define CHECK(cond, what)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            std::fprintf(stderr, "check failed: %s (%s)\n", what, #cond); \
            failures++;                                                    \
        }                                                                  \
    } while (0)

int main() {
    CHECK(unicode_cpt_to_utf8(0x41) == "A", "one byte");
    CHECK(unicode_cpt_to_utf8(0x20ac) == "\xe2\x82\xac", "three bytes");
    CHECK(unicode_cpt_to_utf8(0x1f600) == "\xf0\x9f\x98\x80", "four bytes");
    CHECK(unicode_cpt_to_utf8(0x110000).empty(), "out of range: empty, where llama.cpp throws");
    const char *dir = std::getenv("ENGINE_MODEL_DIR");
    std::string path = std::string(dir ? dir : std::string(std::getenv("HOME")) + "/.cache/engine/models") +
                       "/SmolLM2-135M-Instruct.Q4_1.gguf";
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(path.c_str(), llama_model_default_params());
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", path.c_str());
        return 2;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != nullptr, "context");

    CHECK(llama_model_n_expert(model) == 0, "no experts");
    CHECK(llama_model_n_devices(model) == 0, "no offload devices on the CPU backend");
    CHECK(llama_model_get_device(model, 0) == nullptr && llama_model_get_device(model, -1) == nullptr,
          "no device at any index");
    CHECK(llama_model_dflash_selector_top_k(model) == 0, "no DFlash head");
    CHECK(llama_model_target_layer_ids(model) == nullptr && llama_model_target_layer_ids_n(model) == 0,
          "no target layers");
    CHECK(llama_get_ctx_other(ctx) == nullptr, "no paired context");

    llama_set_embeddings_nextn(ctx, false, false);
    llama_set_nextn_layer_offset(ctx, 0);
    CHECK(llama_get_embeddings_nextn(ctx) == nullptr, "no nextn embeddings");
    CHECK(llama_get_embeddings_nextn_ith(ctx, 0) == nullptr, "no nextn row");
    llama_set_embeddings_layer_inp(ctx, 0, false);
    CHECK(llama_get_embeddings_layer_inp(ctx, 0) == nullptr, "no layer input");

    // Bytes per buffer type, built by the library, read and freed here.
    for (int round = 0; round < 2; round++) {
        llama_memory_breakdown mb = llama_get_memory_breakdown(ctx);
        size_t model_bytes = 0, context_bytes = 0, compute_bytes = 0;
        for (const auto &[buft, d] : mb) {
            CHECK(buft != nullptr, "a buffer type");
            model_bytes += d.model;
            context_bytes += d.context;
            compute_bytes += d.compute;
        }
        CHECK(!mb.empty() && mb.size() <= 4, "a few buffer types");
        // The weights: the file's tensor data (mapped) and the repacked copies.
        CHECK(model_bytes >= llama_model_size(model) / 2 && model_bytes <= 2 * llama_model_size(model),
              "model bytes near the model size");
        // F16 K and V: 2 bytes * 1024 cells * 30 layers * (192 + 192) values.
        CHECK(context_bytes == 2ull * 1024 * 30 * 384, "the KV cache");
        CHECK(compute_bytes > 0, "compute buffers");
    }
    llama_memory_breakdown none = llama_get_memory_breakdown(nullptr);
    CHECK(none.empty(), "NULL context: an empty map");

    // The token embeddings, dequantized from Q4_1: 576 values for each of 49152 tokens.
    uint32_t n_embd_values = llama_model_get_tok_embd(model, nullptr);
    CHECK(n_embd_values == 576u * 49152u, "the token embeddings' size");
    std::vector<float> embd(n_embd_values);
    CHECK(llama_model_get_tok_embd(model, embd.data()) == n_embd_values, "the token embeddings written");
    CHECK(std::isfinite(embd[0]) && std::isfinite(embd.back()) && embd[0] != embd[1], "dequantized values");
    CHECK(llama_model_get_tok_embd(nullptr, nullptr) == 0, "no model: 0");

    // Graphs of a ubatch's shape, kept until the next call; a shape the context cannot run: NULL.
    ggml_cgraph *prompt = llama_graph_reserve(ctx, 64, 1, 64);
    CHECK(prompt != nullptr && ggml_graph_n_nodes(prompt) > 30 * 10, "a prompt's graph");
    ggml_cgraph *token = llama_graph_reserve(ctx, 1, 1, 1);
    CHECK(token != nullptr && ggml_graph_n_nodes(token) > 30 * 10, "a token's graph");
    CHECK(llama_graph_reserve(ctx, 0, 1, 0) == nullptr, "no tokens: no graph");
    CHECK(llama_graph_reserve(ctx, 4, 1, 5) == nullptr, "more outputs than tokens: no graph");
    CHECK(llama_graph_reserve(ctx, 1, 2, 1) == nullptr, "more sequences than the context's: no graph");

    // The quantizer's type rules, on a model of facts only.
    CHECK(llama_ftype_get_default_type(LLAMA_FTYPE_MOSTLY_Q4_K_M) == GGML_TYPE_Q4_K, "Q4_K_M's default type");
    CHECK(llama_ftype_get_default_type((llama_ftype)4) == GGML_TYPE_COUNT, "a removed file type");
    llama_quant_model_desc desc = {"llama", 4096, 14336, 32, 32, 8, 0, 128, 128};
    llama_model *mock = llama_quant_model_from_metadata(&desc);
    CHECK(mock != nullptr && llama_model_n_layer(mock) == 32 && llama_model_n_head_kv(mock) == 8, "a model of facts");
    llama_quant_model_desc unknown = {"no-such-architecture", 64, 64, 1, 1, 1, 0, 64, 64};
    CHECK(llama_quant_model_from_metadata(&unknown) == nullptr, "an unknown architecture: no model");
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    quantize_state_impl *qs = llama_quant_init(mock, &qp);
    CHECK(qs != nullptr, "a quantization state");
    CHECK(llama_quant_init(mock, nullptr) == nullptr, "no parameters: no state");
    ggml_tensor tensors[3] = {};
    const char *names[3] = {"blk.0.attn_v.weight", "blk.0.attn_norm.weight", "blk.1.attn_v.weight"};
    for (int i = 0; i < 3; i++) {
        std::snprintf(tensors[i].name, sizeof tensors[i].name, "%s", names[i]);
        tensors[i].type = GGML_TYPE_F16;
        tensors[i].ne[0] = 4096;
        tensors[i].ne[1] = i == 1 ? 1 : 1024;
        tensors[i].ne[2] = tensors[i].ne[3] = 1;
    }
    CHECK(llama_quant_tensor_allows_quantization(qs, &tensors[0]), "a matrix is quantized");
    CHECK(!llama_quant_tensor_allows_quantization(qs, &tensors[1]), "a norm is not");
    ggml_tensor *quantizable[2] = {&tensors[0], &tensors[2]};
    ggml_type types[2] = {};
    llama_quant_compute_types(qs, LLAMA_FTYPE_MOSTLY_Q4_K_M, quantizable, types, 2);
    // Q4_K_M gives some value projections more bits: of two, the last (llama.cpp's choice too).
    CHECK(types[0] == GGML_TYPE_Q4_K && types[1] == GGML_TYPE_Q6_K, "Q4_K_M's value projections");
    llama_quant_compute_types(qs, LLAMA_FTYPE_MOSTLY_Q8_0, quantizable, types, 2);
    CHECK(types[0] == GGML_TYPE_Q8_0 && types[1] == GGML_TYPE_Q8_0, "Q8_0 everywhere");
    llama_quant_free(qs);
    llama_quant_free(nullptr);
    llama_model_free(mock);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    if (failures) {
        std::fprintf(stderr, "test_llama_ext: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("test_llama_ext: all checks passed\n");
    return 0;
}
