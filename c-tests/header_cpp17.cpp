// llama.h compiles as C++17 with warnings as errors, and its declarations link against libengine.
#include "llama.h"

#include <cstdio>

int main() {
    llama_model_params mp = llama_model_default_params();
    llama_context_params cp = llama_context_default_params();
    llama_sampler_chain_params sp = llama_sampler_chain_default_params();
    llama_model_kv_override ov{};
    ov.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    ov.val_i64 = 1;
    std::printf("n_gpu_layers=%d n_ctx=%u no_perf=%d override=%lld\n", mp.n_gpu_layers, cp.n_ctx, sp.no_perf,
                static_cast<long long>(ov.val_i64));
    return (mp.n_gpu_layers == -1 && cp.n_ctx == 512 && sp.no_perf) ? 0 : 1;
}
