#!/usr/bin/env bash
# Prompt (512 tokens) and generation (128 tokens) speed with 2 threads: libengine.so next to
# llama.cpp's libllama.so, same program, same run. Not a test: numbers depend on the machine.
#
#   benches/decode.sh [LIBLLAMA.so]     (default: $LIBLLAMA, else benches/llama-cpp.sh provides one)
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-$(benches/llama-cpp.sh)}}"
models="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}"
scripts/fetch-models.sh >/dev/null

cargo build --release --lib
ggml_include="$(cargo metadata --format-version 1 | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "qts_ggml_sys":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "vendor/ggml/include"))')"
bin="target/decode_bench"
cc -O2 -Wall -Wextra -I include -I "$ggml_include" -o "$bin" benches/decode_bench.c -ldl

for model in SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf; do
    out_e="$("$bin" "$PWD/target/release/libengine.so" "$models/$model" 512 128 2)"
    out_l="$("$bin" "$libllama" "$models/$model" 512 128 2)"
    printf '%s\n%s\n' "$out_e" "$out_l"
    paste <(echo "$out_e" | awk '{print $3, $(NF-1)}') <(echo "$out_l" | awk '{print $(NF-1)}') |
        awk -v m="$model" '{printf "%-34s %-10s engine/llama.cpp speed ratio: %.2f\n", m, $1, $2 / $3}'
    echo
done
