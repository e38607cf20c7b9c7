// The only C++ in libengine.so. llama.cpp's staging API (llama-ext.h) returns its memory breakdown
// as a std::map by value, and llama.cpp's tokenizer tests link against a function returning a
// std::string: C++ standard containers can only be built by C++. The exported symbols themselves are
// defined in Rust (src/ffi/llama_ext.rs), which receive the caller's return slot and hand it here to
// construct the container in.
#include <cstddef>
#include <map>
#include <new>
#include <string>

#include "ggml-backend.h"

// The value type of the map, member for member as llama-ext.h declares it (so the map's nodes have
// the layout the caller's code reads and frees).
struct llama_memory_breakdown_data {
    size_t model = 0;
    size_t context = 0;
    size_t compute = 0;

    size_t total() const { return model + context + compute; }
};

namespace {

using breakdown_map = std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data>;

// Mirrors BreakdownEntry in llama_ext.rs.
struct entry {
    size_t buft;
    size_t model;
    size_t context;
    size_t compute;
};

}  // namespace

extern "C" int engine_memory_breakdown_construct(void *slot, const entry *entries, size_t n) noexcept {
    // Constructing an empty map allocates nothing and cannot throw; the slot then holds a valid map
    // whatever happens next, which the caller destroys.
    auto *map = new (slot) breakdown_map();
    try {
        for (size_t i = 0; i < n; i++) {
            auto &d = (*map)[reinterpret_cast<ggml_backend_buffer_type_t>(entries[i].buft)];
            d.model += entries[i].model;
            d.context += entries[i].context;
            d.compute += entries[i].compute;
        }
    } catch (...) {
        return -1;
    }
    return 0;
}

extern "C" int engine_string_construct(void *slot, const char *bytes, size_t n) noexcept {
    // As above: the slot holds a valid (empty) string before anything can fail.
    auto *str = new (slot) std::string();
    try {
        str->assign(bytes, n);
    } catch (...) {
        return -1;
    }
    return 0;
}
