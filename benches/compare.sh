#!/usr/bin/env bash
# Do libengine.so and llama.cpp's libllama.so compute the same? One program (benches/compare_bench.c)
# prints tokenizations, logits and saved states (hashes of their bits), multi-sequence batches,
# embeddings and seeded generations for each test model, and for the tiny models of the other
# architectures (scripts/gen-models.py, written here), through each library, and llama.cpp's
# tokenizer test vocabularies through benches/vocab_bench.c, and LoRA adapters through
# benches/adapter_bench.c; this reports where the outputs first differ.
# Part of the test suite (scripts/test.sh runs it last); exits 1 if anything differs.
#
#   benches/compare.sh [LIBLLAMA.so]     (default: $LIBLLAMA, else benches/llama-cpp.sh provides one)
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-$(benches/llama-cpp.sh)}}"
scripts/fetch-models.sh >/dev/null

. benches/common.sh
build_bench compare

generated="$PWD/target/gen-models"
rm -rf "$generated"
python3 scripts/gen-models.py "$models/${bench_models[0]}" "$generated" >/dev/null
status=0
for path in "${bench_models[@]/#/$models/}" "$generated"/*.gguf; do
    model="$(basename "$path")"
    # The generated models share the first test model's vocabulary: their samplers run once each.
    scope=()
    [[ "$path" == "$generated"/* ]] && scope=(arch)
    out="$(mktemp -d)"
    "$bin" "$PWD/target/release/libengine.so" "$path" "${scope[@]}" >"$out/engine"
    "$bin" "$libllama" "$path" "${scope[@]}" >"$out/llama"
    lines=$(wc -l <"$out/llama")
    if cmp -s "$out/engine" "$out/llama"; then
        echo "$model: identical ($lines lines: tokenization, logits and state bits, multi-sequence, embeddings, sampling)"
    else
        status=1
        echo "$model: $(diff "$out/engine" "$out/llama" | grep -c '^<') of $lines lines differ; first difference:"
        diff "$out/engine" "$out/llama" | head -n 4 | cut -c1-200
    fi
    rm -rf "$out"
done
# llama.cpp's tokenizer test vocabularies (scripts/fetch-ggml.sh extracts them): pieces, tokens and
# detokenization of every test case (the Qwen3.5 cases, multilingual, for the four without cases).
compare_bin="$bin"
build_bench vocab
for path in .ggml/vocab/*.gguf; do
    model="$(basename "$path")"
    cases="$path.inp"
    [ -f "$cases" ] || cases=".ggml/vocab/ggml-vocab-qwen35.gguf.inp"
    if cmp -s <("$bin" "$PWD/target/release/libengine.so" "$path" "$cases") <("$bin" "$libllama" "$path" "$cases"); then
        echo "$model: identical (pieces, tokens and detokenization of $(basename "$cases")'s cases)"
    else
        status=1
        echo "$model: differs; first difference:"
        diff <("$bin" "$PWD/target/release/libengine.so" "$path" "$cases") <("$bin" "$libllama" "$path" "$cases") | head -n 4
    fi
done
# LoRA adapters (scripts/gen-adapters.py, written here) through benches/adapter_bench.c: two per
# model adapting different weights (attention and the output head and token embeddings; the FFN,
# experts, shared experts and router), in F32, F16 and Q8_0, and one that does not fit.
build_bench adapter
adapters="$generated/adapters"
mkdir -p "$adapters"
lora() { python3 scripts/gen-adapters.py lora "$@"; }
smollm2="$models/${bench_models[0]}"
gemma3="$models/${bench_models[1]}"
lora "$smollm2" "$adapters/smollm2-a.gguf" --type f16 --targets 'attn_(q|k|v|output)\.weight' --alora 5,6,7
lora "$smollm2" "$adapters/smollm2-b.gguf" --type q8_0 --rank 32 --alpha 0 --targets 'ffn_(gate|up|down)\.weight'
lora "$gemma3" "$adapters/gemma3-a.gguf" --rank 16 --targets 'attn_(q|k|v|output)\.weight'
lora "$gemma3" "$adapters/gemma3-b.gguf" --type q8_0 --rank 32 --alpha 16 --targets 'ffn_(gate|up|down)\.weight'
lora "$generated/qwen2moe-f16.gguf" "$adapters/qwen2moe-a.gguf" \
    --targets 'attn_(q|k|v|output)\.weight|^output\.weight|token_embd'
lora "$generated/qwen2moe-f16.gguf" "$adapters/qwen2moe-b.gguf" --type f16 --seed 5 \
    --targets 'ffn_.*(exps|shexp)\.weight|ffn_gate_inp\.weight'
lora "$generated/qwen3moe-q8_0.gguf" "$adapters/qwen3moe-a.gguf" --targets 'attn_(q|v)\.weight'
lora "$generated/qwen3moe-q8_0.gguf" "$adapters/qwen3moe-b.gguf" --type q8_0 --rank 32 --targets 'ffn_.*_exps'
for case in "smollm2 $smollm2 gemma3" "gemma3 $gemma3 smollm2" "qwen2moe $generated/qwen2moe-f16.gguf smollm2" \
    "qwen3moe $generated/qwen3moe-q8_0.gguf gemma3"; do
    read -r name path wrong <<<"$case"
    args=("$path" "$adapters/$name-a.gguf" "$adapters/$name-b.gguf" "$adapters/$wrong-a.gguf")
    engine_out="$("$bin" "$PWD/target/release/libengine.so" "${args[@]}")"
    llama_out="$("$bin" "$libllama" "${args[@]}")"
    if [ "$engine_out" = "$llama_out" ]; then
        echo "$(basename "$path") with LoRA adapters: identical ($(wc -l <<<"$llama_out") lines: metadata, logits at several scales, generation)"
    else
        status=1
        echo "$(basename "$path") with LoRA adapters: differs; first difference:"
        diff <(echo "$engine_out") <(echo "$llama_out") | head -n 4 | cut -c1-200
    fi
done
# Adapters on every layer (even blocks, odd blocks and the output head) of the architectures whose
# graphs leave some products without adapters, or reuse blocks.
for name in deepseek2 deepseek4 glm5-next kimi-linear kimi-k3 nemotron-h-moe qwen4exp hrm_text mimo2 bailingmoe3; do
    path="$generated/$name-f32.gguf"
    lora "$path" "$adapters/$name-even.gguf" --targets 'blk\.[02468]\.' >/dev/null
    lora "$path" "$adapters/$name-odd.gguf" --targets 'blk\.[13579]\.|^output\.weight' --seed 9 >/dev/null
    args=("$path" "$adapters/$name-even.gguf" "$adapters/$name-odd.gguf" "$adapters/smollm2-a.gguf")
    engine_out="$("$bin" "$PWD/target/release/libengine.so" "${args[@]}")"
    llama_out="$("$bin" "$libllama" "${args[@]}")"
    if [ "$engine_out" = "$llama_out" ]; then
        echo "$name-f32.gguf with LoRA adapters on every layer: identical ($(wc -l <<<"$llama_out") lines)"
    else
        status=1
        echo "$name-f32.gguf with LoRA adapters on every layer: differs; first difference:"
        diff <(echo "$engine_out") <(echo "$llama_out") | head -n 4 | cut -c1-200
    fi
done
bin="$compare_bin"
# Generated models llama.cpp cannot run: the engine runs the same program to its end, and no decode
# fails.
for path in "$generated"/no-oracle/*.gguf; do
    model="$(basename "$path")"
    if "$bin" "$PWD/target/release/libengine.so" "$path" arch >"$generated/no-oracle/$model.out" \
        && ! grep -q ' rc -' "$generated/no-oracle/$model.out"; then
        echo "$model: runs to the end (llama.cpp 0.3.36 cannot run it: no comparison)"
    else
        status=1
        echo "$model: FAILED on the engine ($generated/no-oracle/$model.out)"
    fi
done
exit "$status"
