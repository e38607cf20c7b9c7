#!/usr/bin/env bash
# Do libengine.so and llama.cpp's libllama.so compute the same? One program (benches/compare_bench.c)
# prints tokenizations, logits and saved states (hashes of their bits), multi-sequence batches,
# embeddings and seeded generations for each test model, and for the tiny models of the other
# architectures (scripts/gen-models.py, written here), through each library, and llama.cpp's
# tokenizer test vocabularies through benches/vocab_bench.c, and LoRA adapters through
# benches/adapter_bench.c, and the files the quantizer writes through benches/quantize_bench.c, and
# saved models through benches/save_bench.c; this reports where the outputs first differ.
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
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# check LABEL WHAT ARGS...: the bench program ($bin) on ARGS through both libraries at once (a small
# model keeps one core busy at most), then one line: identical (with WHAT the lines hold), or how
# many lines differ and the first difference.
check() {
    local label="$1" what="$2"
    shift 2
    "$bin" "$PWD/target/release/libengine.so" "$@" >"$out/engine" &
    local engine=$!
    "$bin" "$libllama" "$@" >"$out/llama"
    wait "$engine"
    local lines
    lines=$(wc -l <"$out/llama")
    if cmp -s "$out/engine" "$out/llama"; then
        echo "$label: identical ($lines lines${what:+: $what})"
    else
        status=1
        echo "$label: $(diff "$out/engine" "$out/llama" | grep -c '^<') of $lines lines differ; first difference:"
        diff "$out/engine" "$out/llama" | head -n 4 | cut -c1-200
    fi
}
for path in "${bench_models[@]/#/$models/}" "$generated"/*.gguf; do
    # The generated models share the first test model's vocabulary: their samplers run once each.
    scope=()
    [[ "$path" == "$generated"/* ]] && scope=(arch)
    check "$(basename "$path")" "tokenization, logits and state bits, multi-sequence, embeddings, sampling" \
        "$path" "${scope[@]}"
done
# llama.cpp's tokenizer test vocabularies (scripts/fetch-ggml.sh extracts them): pieces, tokens and
# detokenization of every test case (the Qwen3.5 cases, multilingual, for the four without cases).
compare_bin="$bin"
build_bench vocab
for path in .ggml/vocab/*.gguf; do
    cases="$path.inp"
    [ -f "$cases" ] || cases=".ggml/vocab/ggml-vocab-qwen35.gguf.inp"
    check "$(basename "$path")" "pieces, tokens and detokenization of $(basename "$cases")'s cases" "$path" "$cases"
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
    check "$(basename "$path") with LoRA adapters" "metadata, logits at several scales, generation" \
        "$path" "$adapters/$name-a.gguf" "$adapters/$name-b.gguf" "$adapters/$wrong-a.gguf"
done
# Adapters on every layer (even blocks, odd blocks and the output head) of the architectures whose
# graphs leave some products without adapters, or reuse blocks.
for name in deepseek2 deepseek4 glm5-next kimi-linear kimi-k3 nemotron-h-moe qwen4exp hrm_text mimo2 bailingmoe3; do
    path="$generated/$name-f32.gguf"
    lora "$path" "$adapters/$name-even.gguf" --targets 'blk\.[02468]\.' >/dev/null
    lora "$path" "$adapters/$name-odd.gguf" --targets 'blk\.[13579]\.|^output\.weight' --seed 9 >/dev/null
    check "$name-f32.gguf with LoRA adapters on every layer" "" \
        "$path" "$adapters/$name-even.gguf" "$adapters/$name-odd.gguf" "$adapters/smollm2-a.gguf"
done
# The quantizer (benches/quantize_bench.c): every file type, each llama_model_quantize parameter,
# importance matrices (made up for every weight, listed by the gguf package) for the IQ types that
# need one; the input a generated F16 model with rows of 256 over eight layers.
build_bench quantize
python3 scripts/gen-models.py "$smollm2" "$generated" llama-quant >/dev/null
qmodel="$generated/llama-quant-f16.gguf"
python3 - "$qmodel" >"$generated/imatrix.txt" <<'PY'
import sys
import gguf
for t in gguf.GGUFReader(sys.argv[1]).tensors:
    ne = [int(n) for n in t.shape]
    if len(ne) >= 2:
        print(t.name, ne[0] * (ne[2] if len(ne) > 2 else 1))
PY
check "$(basename "$qmodel") quantized" "return codes, sizes and hashes of the files written" \
    "$qmodel" "$generated" "$generated/imatrix.txt"
# llama_model_save_to_file (benches/save_bench.c): where the engine saves a model (the test models,
# each generated architecture in F32 and a quantized one), its file is llama.cpp's byte for byte.
build_bench save
saved=0
for path in "${bench_models[@]/#/$models/}" "$generated"/*-f32.gguf "$generated/qwen3moe-q8_0.gguf"; do
    rm -f "$out/engine.gguf" "$out/llama.gguf"
    "$bin" "$PWD/target/release/libengine.so" "$path" "$out/engine.gguf" 2>"$out/engine.log"
    if [ ! -f "$out/engine.gguf" ]; then
        status=1
        echo "$(basename "$path"): not saved:"
        cat "$out/engine.log"
        continue
    fi
    "$bin" "$libllama" "$path" "$out/llama.gguf" 2>/dev/null
    if cmp -s "$out/engine.gguf" "$out/llama.gguf"; then
        saved=$((saved + 1))
    else
        status=1
        echo "$(basename "$path") saved: the file differs from llama.cpp's ($(cmp "$out/engine.gguf" "$out/llama.gguf" | head -n 1))"
    fi
done
echo "llama_model_save_to_file: $saved models saved byte for byte as llama.cpp saves them"
rm -f "$out/engine.gguf" "$out/llama.gguf"
# Training (benches/train_bench.c): two epochs through llama_opt_init and llama_opt_epoch give the
# losses and accuracies llama.cpp gives, ubatch by ubatch, bit for bit, and the trained model saves
# to llama.cpp's file: a ubatch as the whole context (attention over its own keys and values) and
# smaller ones, AdamW and SGD, quantized weights (only the F32 norms train), a sliding-window model
# (losses only: the engine does not save its architecture yet). A mixture of experts, which ggml
# cannot train (llama.cpp aborts), is refused with a log line.
build_bench train
for run in "qwen3-f32 256 0 save" "qwen3-f32 128 1 save" "qwen2-f32 256 0 save" "qwen3-q4_1 256 0 save" \
    "olmo2-swa-f32 256 1 -"; do
    read -r model ub opt save <<<"$run"
    rm -f "$out/engine.gguf" "$out/llama.gguf"
    [ "$save" = save ] && saved=("$out/engine.gguf" "$out/llama.gguf") || saved=()
    "$bin" "$PWD/target/release/libengine.so" "$generated/$model.gguf" "$ub" "$opt" ${saved[0]+"${saved[0]}"} \
        >"$out/engine" 2>"$out/engine.log" &
    "$bin" "$libllama" "$generated/$model.gguf" "$ub" "$opt" ${saved[1]+"${saved[1]}"} >"$out/llama" 2>/dev/null
    wait $! || { status=1; echo "$model training (n_ubatch $ub): the engine failed:"; cat "$out/engine.log"; }
    name="$model trained (n_ubatch $ub, optimizer $opt)"
    if ! cmp -s "$out/engine" "$out/llama"; then
        status=1
        echo "$name: losses differ:"
        diff "$out/llama" "$out/engine" | head -n 6
    elif [ "$save" = save ] && ! cmp -s "$out/engine.gguf" "$out/llama.gguf"; then
        status=1
        echo "$name: the saved file differs from llama.cpp's"
    else
        echo "$name: identical ($(grep -c . "$out/engine") lines of losses${saved[0]+", the saved model byte for byte"})"
    fi
done
"$bin" "$PWD/target/release/libengine.so" "$generated/llama-moe-f32.gguf" 256 0 >"$out/engine" 2>"$out/engine.log" \
    && grep -q "no backward pass for MUL_MAT_ID" "$out/engine.log" \
    || { status=1; echo "llama-moe training: not refused as expected:"; cat "$out/engine.log"; }
rm -f "$out/engine.gguf" "$out/llama.gguf"
# llama_model_init_from_user (benches/init_user_bench.c): a model made from a generated model's
# metadata, each tensor filled from a hash of its name: the same tensors asked for in the same
# order, the same logits and the same saved file as
# llama.cpp's; tensors F32 by default, or with the types the metadata lists ("file").
build_bench init_user
runs=("$generated/qwen3-f16.gguf:file" "$generated/smollm3-f16.gguf:file" "$generated/llama-moe-q4_0.gguf:file"
    "$models/${bench_models[0]}:file" "$models/${bench_models[1]}:file")
# DeepSeek-V4's token-to-expert tables are ids: made F32, llama.cpp aborts in its first decode and
# the engine refuses the model (checked in c-tests/test_init_from_user.c); they keep their type.
for path in "$generated"/*-f32.gguf; do
    [[ "$path" == */deepseek4-f32.gguf ]] && runs+=("$path:file") || runs+=("$path:f32")
done
for run in "${runs[@]}"; do
    path="${run%:*}" mode="${run##*:}"
    name="$(basename "$path" .gguf) made by llama_model_init_from_user ($mode)"
    rm -f "$out/engine.gguf" "$out/llama.gguf"
    "$bin" "$PWD/target/release/libengine.so" "$path" "$mode" "$out/engine.gguf" >"$out/engine" 2>"$out/engine.log" \
        || { status=1; echo "$name: the engine failed:"; cat "$out/engine.log"; continue; }
    if grep -q '^no model' "$out/engine"; then
        status=1
        echo "$name: no model:"
        cat "$out/engine.log"
        continue
    fi
    "$bin" "$libllama" "$path" "$mode" "$out/llama.gguf" >"$out/llama" 2>/dev/null
    if ! cmp -s "$out/engine" "$out/llama"; then
        status=1
        echo "$name: differs:"
        diff "$out/llama" "$out/engine" | head -n 6
    elif [ -e "$out/engine.gguf" ] && ! cmp -s "$out/engine.gguf" "$out/llama.gguf"; then
        status=1
        echo "$name: the saved file differs from llama.cpp's"
    else
        echo "$name: identical ($(grep -c '^tensor' "$out/engine") tensors in order, logits, the saved model byte for byte)"
    fi
done
rm -f "$out/engine.gguf" "$out/llama.gguf"
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
