// llama.cpp's staging API (its src/llama-ext.h), which llama.cpp's `common` library and
// llama-cpp-python's llama_cpp_ext.py call by their C++ (mangled) names: declared here as that
// header declares them, linked against libengine.so, and answering as llama.cpp does on the CPU.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>

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
