#!/usr/bin/env bash
# Records what llama.cpp 0.3.36 computes for the test models into tests/reference/<model>/, for the
# tests that run without llama.cpp. The oracle is built from the pinned sdist (scripts/llama-cpp.sh)
# on this machine; every file says which CPU recorded it, since llama.cpp's numbers depend on it.
# Usage: scripts/record-reference.sh   (then review and commit tests/reference/)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch-models.sh
bin="$(scripts/llama-cpp.sh llama)"
models="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}"
recorder="$(mktemp -d)/record"
trap 'rm -rf "$(dirname "$recorder")"' EXIT
cc -O2 -std=c11 -Wall -Wextra -Werror -I .ggml/pinned -I .ggml/ggml/include -o "$recorder" \
    scripts/record-reference/record.c -L"$bin" -lllama -Wl,-rpath,"$bin" -lm

cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
by="llama.cpp 0.3.36 (llama-cpp-python sdist $(cut -c1-12 .ggml/SOURCE)), GGML_NATIVE, 2 threads, CPU: $cpu ($(nproc) cores)"
for pair in SmolLM2-135M-Instruct.Q4_1.gguf:smollm2-135m-instruct-q4_1 gemma-3-270m-q4_k_m.gguf:gemma3-270m-q4_k_m; do
    dir="tests/reference/${pair#*:}"
    mkdir -p "$dir"
    echo "recording $dir" >&2
    "$recorder" "$models/${pair%%:*}" "$dir" "$by"
done
