// The only C++ in libengine.so: what only C++ can build or be called through. llama.cpp's staging
// API (llama-ext.h) returns its memory breakdown as a std::map by value, and llama.cpp's tokenizer
// tests link against a function returning a std::string: C++ standard containers can only be built
// by C++. The exported symbols themselves are defined in Rust (src/ffi/llama_ext.rs), which receive
// the caller's return slot and hand it here to construct the container in. And llama.cpp's own tests
// call a context's memory (`llama_get_memory`) through its C++ interface, `llama_memory_i`: a memory
// handle therefore starts with a pointer to a vtable laid out as that interface's, whose entries
// forward to the llama.h functions of the handle (src/ffi/memory_object.rs).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <map>
#include <new>
#include <string>
#include <vector>

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

extern "C" void engine_string_view(const void *str, const char **bytes, size_t *n) noexcept {
    const auto *s = static_cast<const std::string *>(str);
    *bytes = s->data();
    *n = s->size();
}

extern "C" int engine_u32_vector_construct(void *slot, const uint32_t *values, size_t n) noexcept {
    // As above: the slot holds a valid (empty) vector before anything can fail.
    auto *v = new (slot) std::vector<uint32_t>();
    try {
        v->assign(values, values + n);
    } catch (...) {
        return -1;
    }
    return 0;
}

// A named namespace, not an anonymous one: the compiler must not assume it sees every class deriving
// from these (it would call the pure virtuals of a client's writer directly).
namespace engine_abi {

using llama_pos = int32_t;
using llama_seq_id = int32_t;
using llama_state_seq_flags = uint32_t;

// llama.cpp's `llama_io_write_i` and `llama_io_read_i` (src/llama-io.h), virtual member for member:
// a client's implementation is called through this layout.
class io_write {
public:
    virtual ~io_write() = default;
    virtual void write(const void *src, size_t size) = 0;
    virtual void write_tensor(ggml_tensor *tensor, size_t offset, size_t size) = 0;
    virtual size_t n_bytes() = 0;
};

class io_read {
public:
    virtual ~io_read() = default;
    virtual void read(void *dst, size_t size) = 0;
    virtual void read_tensor(ggml_tensor *tensor, size_t offset, size_t size) = 0;
    virtual void discard() {}
    virtual size_t n_bytes() = 0;
};

// Stand-ins for the types llama.cpp's interface names but the engine never builds.
struct memory_context {
    virtual ~memory_context() = default;
};
struct batch_allocr;
struct context;

// llama.cpp's `llama_memory_i` (src/llama-memory.h), virtual member for member.
struct memory_iface {
    virtual ~memory_iface() = default;
    virtual std::unique_ptr<memory_context> init_batch(batch_allocr &balloc, uint32_t n_ubatch, bool embd_all) = 0;
    virtual std::unique_ptr<memory_context> init_full() = 0;
    virtual std::unique_ptr<memory_context> init_update(context *lctx, bool optimize) = 0;
    virtual bool get_can_shift() const = 0;
    virtual void clear(bool data) = 0;
    virtual bool seq_rm(llama_seq_id seq_id, llama_pos p0, llama_pos p1) = 0;
    virtual void seq_cp(llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1) = 0;
    virtual void seq_keep(llama_seq_id seq_id) = 0;
    virtual void seq_add(llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos shift) = 0;
    virtual void seq_div(llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d) = 0;
    virtual llama_pos seq_pos_min(llama_seq_id seq_id) const = 0;
    virtual llama_pos seq_pos_max(llama_seq_id seq_id) const = 0;
    virtual std::map<ggml_backend_buffer_type_t, size_t> memory_breakdown() const = 0;
    virtual void state_write(io_write &io, llama_seq_id seq_id, llama_state_seq_flags flags) const = 0;
    virtual void state_read(io_read &io, llama_seq_id seq_id, llama_state_seq_flags flags) = 0;
};

}  // namespace engine_abi

using namespace engine_abi;

// The memory-handle functions: llama.h's (taking the handle), and the engine's for what llama.h has
// no function for (src/ffi/memory_object.rs). The client's reader and writer reach Rust as an opaque
// pointer and these callbacks, which keep its exceptions on this side.
extern "C" {
void llama_memory_clear(const void *mem, bool data);
bool llama_memory_seq_rm(const void *mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
void llama_memory_seq_cp(const void *mem, llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
void llama_memory_seq_keep(const void *mem, llama_seq_id seq_id);
void llama_memory_seq_add(const void *mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, llama_pos delta);
void llama_memory_seq_div(const void *mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1, int d);
llama_pos llama_memory_seq_pos_min(const void *mem, llama_seq_id seq_id);
llama_pos llama_memory_seq_pos_max(const void *mem, llama_seq_id seq_id);
bool llama_memory_can_shift(const void *mem);

using write_fn = bool (*)(void *io, const void *src, size_t size);
using write_tensor_fn = bool (*)(void *io, ggml_tensor *tensor, size_t offset, size_t size);
using read_fn = bool (*)(void *io, void *dst, size_t size);

// What Rust hands over for what llama.h has no function for (MemoryCallbacks in
// memory_object.rs): function pointers, so that nothing beyond llama.h's names is exported.
struct engine_memory_callbacks {
    bool (*state_write)(const void *mem, llama_seq_id seq_id, llama_state_seq_flags flags, void *io, write_fn write,
                        write_tensor_fn write_tensor);
    bool (*state_read)(const void *mem, llama_seq_id seq_id, llama_state_seq_flags flags, void *io, read_fn read);
    size_t (*buffers)(const void *mem, size_t *bufts, size_t *sizes, size_t cap);
};
}

namespace {

// Set once, by the first call of engine_memory_vtable (every call passes the same functions).
const engine_memory_callbacks *callbacks = nullptr;

}  // namespace

namespace {

bool io_write_bytes(void *io, const void *src, size_t size) noexcept {
    try {
        static_cast<io_write *>(io)->write(src, size);
        return true;
    } catch (...) {
        return false;
    }
}

bool io_write_tensor(void *io, ggml_tensor *tensor, size_t offset, size_t size) noexcept {
    try {
        static_cast<io_write *>(io)->write_tensor(tensor, offset, size);
        return true;
    } catch (...) {
        return false;
    }
}

bool io_read_bytes(void *io, void *dst, size_t size) noexcept {
    try {
        static_cast<io_read *>(io)->read(dst, size);
        return true;
    } catch (...) {
        return false;
    }
}

// The handle's own address is all a call needs: it is what the llama.h functions look up. No data
// members, so the object is exactly the vtable pointer Rust stores at the handle's address; it is
// never deleted through this interface (the handle belongs to its context).
struct memory_handle final : memory_iface {
    static void operator delete(void *) noexcept {}

    const void *self() const { return this; }

    std::unique_ptr<memory_context> init_batch(batch_allocr &, uint32_t, bool) override { return nullptr; }
    std::unique_ptr<memory_context> init_full() override { return nullptr; }
    std::unique_ptr<memory_context> init_update(context *, bool) override { return nullptr; }
    bool get_can_shift() const override { return llama_memory_can_shift(self()); }
    void clear(bool data) override { llama_memory_clear(self(), data); }
    bool seq_rm(llama_seq_id s, llama_pos p0, llama_pos p1) override { return llama_memory_seq_rm(self(), s, p0, p1); }
    void seq_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) override {
        llama_memory_seq_cp(self(), src, dst, p0, p1);
    }
    void seq_keep(llama_seq_id s) override { llama_memory_seq_keep(self(), s); }
    void seq_add(llama_seq_id s, llama_pos p0, llama_pos p1, llama_pos d) override {
        llama_memory_seq_add(self(), s, p0, p1, d);
    }
    void seq_div(llama_seq_id s, llama_pos p0, llama_pos p1, int d) override {
        llama_memory_seq_div(self(), s, p0, p1, d);
    }
    llama_pos seq_pos_min(llama_seq_id s) const override { return llama_memory_seq_pos_min(self(), s); }
    llama_pos seq_pos_max(llama_seq_id s) const override { return llama_memory_seq_pos_max(self(), s); }

    std::map<ggml_backend_buffer_type_t, size_t> memory_breakdown() const override {
        size_t bufts[16], sizes[16];
        const size_t n = callbacks->buffers(self(), bufts, sizes, 16);
        std::map<ggml_backend_buffer_type_t, size_t> out;
        for (size_t i = 0; i < n && i < 16; i++) {
            out[reinterpret_cast<ggml_backend_buffer_type_t>(bufts[i])] += sizes[i];
        }
        return out;
    }

    void state_write(io_write &io, llama_seq_id s, llama_state_seq_flags flags) const override {
        if (!callbacks->state_write(self(), s, flags, &io, io_write_bytes, io_write_tensor)) {
            throw std::runtime_error("failed to write the memory state (see the log)");
        }
    }

    void state_read(io_read &io, llama_seq_id s, llama_state_seq_flags flags) override {
        if (!callbacks->state_read(self(), s, flags, &io, io_read_bytes)) {
            throw std::runtime_error("failed to restore the memory state (see the log)");
        }
    }
};

}  // namespace

// The vtable pointer a `memory_handle` object starts with; `cb` what its entries call.
extern "C" const void *engine_memory_vtable(const engine_memory_callbacks *cb) noexcept {
    static const engine_memory_callbacks saved = *cb;
    callbacks = &saved;
    static const memory_handle prototype;
    return *reinterpret_cast<const void *const *>(&prototype);
}

// llama.cpp's testing constructor of the DRY sampler (src/llama-sampler.cpp), which its
// test-sampling links against by its C++ name, takes its breakers as a
// `const std::vector<std::vector<llama_token>> &`; the constructor itself is defined in Rust
// (src/ffi/llama_ext.rs), which reads the vectors through this: up to `cap` of their data pointers
// and lengths into `data` and `lens`; returns how many vectors there are.
extern "C" size_t engine_token_vectors(const void *vectors, const int32_t **data, size_t *lens, size_t cap) noexcept {
    const auto &v = *static_cast<const std::vector<std::vector<int32_t>> *>(vectors);
    for (size_t i = 0; i < v.size() && i < cap; i++) {
        data[i] = v[i].data();
        lens[i] = v[i].size();
    }
    return v.size();
}
