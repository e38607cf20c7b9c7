// The only C++ in libengine.so. llama.cpp's staging API (llama-ext.h) returns its memory breakdown
// as a std::map by value, and a std::map can only be built by C++. The exported symbol itself is
// defined in Rust (src/ffi/llama_ext.rs), which receives the caller's return slot and hands it here
// to construct the map in.
#include <cstddef>
#include <map>
#include <new>

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
