#!/usr/bin/env bash
# Sampling time per token of libengine.so against llama.cpp's libllama.so, same program, same models,
# next to the time of one decode step. Not a test: numbers depend on the machine.
#
#   benches/sampling.sh [LIBLLAMA.so] [ITERATIONS]
#
# LIBLLAMA.so defaults to $LIBLLAMA; without one only libengine.so is measured. llama.cpp's library
# comes e.g. from `pip install llama-cpp-python==0.3.36` (site-packages/llama_cpp/lib/libllama.so).
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-}}"
iters="${2:-200}"
models="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}"

cargo build --release --lib
ggml_include="$(cargo metadata --format-version 1 | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "qts_ggml_sys":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "vendor/ggml/include"))')"
bin="target/sampling_bench"
cc -O2 -Wall -Wextra -I include -I "$ggml_include" -o "$bin" benches/sampling_bench.c -ldl

for model in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    for lib in "$PWD/target/release/libengine.so" ${libllama:+"$libllama"}; do
        "$bin" "$lib" "$models/$model" "$iters"
        echo
    done
done
