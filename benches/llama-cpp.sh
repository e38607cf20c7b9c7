#!/usr/bin/env bash
# Print the path of llama.cpp's libllama.so for the benchmarks, installing llama-cpp-python==0.3.36
# (which compiles it, for this CPU) into a cache outside the repository when needed. Not used by CI.
set -euo pipefail
dir="${ENGINE_LLAMA_CPP_DIR:-$HOME/.cache/engine/llama-cpp-python}"
lib="$(find "$dir" -name libllama.so 2>/dev/null | head -n 1)"
if [ -z "$lib" ]; then
    echo "building llama-cpp-python==0.3.36 into $dir (takes a while)" >&2
    CMAKE_ARGS="-DGGML_NATIVE=ON" python3 -m pip install --quiet --target "$dir" llama-cpp-python==0.3.36 >&2
    lib="$(find "$dir" -name libllama.so | head -n 1)"
fi
echo "$lib"
