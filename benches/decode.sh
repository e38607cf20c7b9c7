#!/usr/bin/env bash
# Prompt (512 tokens) and generation (128 tokens) speed with 2 threads: libengine.so next to
# llama.cpp's libllama.so, same program, same run. Not a test: numbers depend on the machine.
#
#   benches/decode.sh [LIBLLAMA.so]     (default: $LIBLLAMA, else benches/llama-cpp.sh provides one)
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-$(benches/llama-cpp.sh)}}"
scripts/fetch-models.sh >/dev/null

. benches/common.sh
build_bench decode

for model in "${bench_models[@]}"; do
    out_e="$("$bin" "$PWD/target/release/libengine.so" "$models/$model" 512 128 2)"
    out_l="$("$bin" "$libllama" "$models/$model" 512 128 2)"
    printf '%s\n%s\n' "$out_e" "$out_l"
    paste <(echo "$out_e" | awk '{print $3, $(NF-1)}') <(echo "$out_l" | awk '{print $(NF-1)}') |
        awk -v m="$model" '{printf "%-34s %-10s engine/llama.cpp speed ratio: %.2f\n", m, $1, $2 / $3}'
    echo
done
