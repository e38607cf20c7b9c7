#!/usr/bin/env bash
# llama.cpp 0.3.36 itself, the oracle the engine is compared with: built with CMake from the same
# sha256-checked sdist our ggml comes from (scripts/fetch-ggml.sh), for this CPU, into a cache outside
# the repository keyed by the sdist's hash and by this CPU (scripts/cpu-key.sh: a build for one CPU
# is never used on another). Only the requested targets are built (default: the `llama` library);
# tests, tools, the server and RPC are configured so that any of their targets can be asked for
# later without reconfiguring.
# Usage: scripts/llama-cpp.sh [TARGET...]   Prints the directory holding libllama.so and the programs.
# Cache: $ENGINE_LLAMA_CPP_DIR, default ~/.cache/engine/llama.cpp-<sdist sha256, 12 digits>-<CPU key>.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-ggml.sh
sha="$(cat .ggml/SOURCE)"
cache="${ENGINE_LLAMA_CPP_DIR:-$HOME/.cache/engine/llama.cpp-${sha:0:12}-$(scripts/cpu-key.sh)}"
# ggml's AMX kernels are left out, as in our own build (build.rs, NO_AMX): they fault on the Xeons
# that have AMX, and the two must compute the same thing.
no_amx=""
[ "$(uname -m)" = x86_64 ] && no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
sdist="${ENGINE_DOWNLOAD_DIR:-$HOME/.cache/engine/downloads}/llama_cpp_python-0.3.36.tar.gz"

if [ ! -f "$cache/src/CMakeLists.txt" ]; then
    rm -rf "$cache/src.part"
    mkdir -p "$cache/src.part"
    tar -xzf "$sdist" -C "$cache/src.part" --strip-components=3 llama_cpp_python-0.3.36/vendor/llama.cpp
    rm -rf "$cache/src"
    mv "$cache/src.part" "$cache/src"
fi

if [ ! -f "$cache/build/CMakeCache.txt" ]; then
    # No network at build time (no prebuilt web UI, no TLS client); otherwise llama.cpp's defaults,
    # so the numbers are the ones its users get on this machine.
    cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" -DGGML_RPC=ON -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$cache/configure.log" 2>&1 \
        || { echo "llama-cpp.sh: configuring llama.cpp failed, see $cache/configure.log" >&2; exit 1; }
fi

if [ $# -eq 0 ]; then set -- llama; fi
echo "building llama.cpp 0.3.36 ($*) in $cache/build" >&2
cmake --build "$cache/build" -j"$(nproc)" --target "$@" >"$cache/build.log" 2>&1 \
    || { tail -n 30 "$cache/build.log" >&2; echo "llama-cpp.sh: build failed, see $cache/build.log" >&2; exit 1; }
echo "$cache/build/bin"
