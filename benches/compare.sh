#!/usr/bin/env bash
# Do libengine.so and llama.cpp's libllama.so compute the same? The main correctness test of the
# suite (scripts/test.sh runs it last); exits 1 if anything differs or fails. One program
# (benches/compare_bench.c) prints tokenizations, logits and saved states (hashes of their bits),
# multi-sequence batches, embeddings and seeded generations for each test model, and for the tiny
# models of the other architectures (scripts/gen-models.py, by scripts/gen-test-models.sh), through
# each library; llama.cpp's tokenizer test vocabularies go through benches/vocab_bench.c, LoRA
# adapters through benches/adapter_bench.c, the quantizer's files through benches/quantize_bench.c,
# saved models through benches/save_bench.c, training through benches/train_bench.c and models made
# by the caller through benches/init_user_bench.c. Each row reports what it compared, or where the
# outputs first differ; a row also fails when either side prints an "error:" line (a decode, encode
# or context that failed where it should not), even if both failed alike.
#
# llama.cpp's outputs are cached (benches/oracle.sh): a warm run computes the engine's side and
# re-checks a few rows live. Rows run side by side, each side one process at one thread
# (ENGINE_BENCH_THREADS); the sections whose results depend on the thread count (attention split
# over the threads) run again at two threads, one side after the other.
#
#   benches/compare.sh [LIBLLAMA.so]     (default: $LIBLLAMA, else benches/llama-cpp.sh provides one)
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-$(benches/llama-cpp.sh)}}"
scripts/fetch-models.sh >/dev/null

. benches/common.sh
status=0
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
. scripts/generated.sh
. scripts/gen-test-models.sh
. benches/oracle.sh
oracle_init
file_sums_remember "${bench_models[@]/#/$models/}"

times=()
section_start=$SECONDS
# timed NAME: close the previous part of the run under NAME in the time table.
timed() {
    times+=("$1|$((SECONDS - section_start))")
    section_start=$SECONDS
}

# compare_row ROW LABEL WHAT WRITES ARGS...: the bench program $bin on ARGS through both libraries
# (benches/oracle.sh), then one line: identical, with what was compared (WHAT, or the sections a
# compare_bench run printed, those it left out and why, and the refusals llama.cpp makes too), or
# how the outputs differ. WRITES: see run_side.
compare_row() {
    local row="$1" label="$2" what="$3" writes="$4"
    shift 4
    both_sides "$row" "$writes" "$@"
    local e="$out/rows/$row.engine" l="$out/rows/$row.llama" lines errors
    lines=$(wc -l <"$l")
    errors="$(grep -h -e '^error' -e '^exit status' -e '^wrote no file' "$e" "$l" | sort -u | head -n 3 || true)"
    if cmp -s "$e" "$l" && [ -z "$errors" ]; then
        echo "$label: identical ($lines lines: $(described "$l" "$what"))"
        return
    fi
    : >"$out/rows/$row.failed"
    if cmp -s "$e" "$l"; then
        echo "$label: identical, but failed on both sides:"
        echo "$errors" | sed 's/^/    /'
    else
        echo "$label: $(diff "$e" "$l" | grep -c '^<' || true) of $lines lines differ; first difference:"
        diff "$e" "$l" | head -n 4 | cut -c1-200
        [ -z "$errors" ] || echo "$errors" | sed 's/^/    /'
        tail -n 3 "$e.log" | sed 's/^/    engine: /'
    fi
}

# described OUTPUT WHAT: WHAT, or what a compare_bench output holds.
described() {
    if [ -n "$2" ]; then
        echo "$2"
        return
    fi
    local ran skipped refused
    ran="$(sed -n 's/^section //p' "$1" | paste -sd' ')"
    skipped="$(sed -n 's/^skipped //p' "$1" | paste -sd';' | sed 's/;/; /g')"
    refused="$(sed -n 's/^refused: //p' "$1" | paste -sd';' | sed 's/;/; /g')"
    echo "sections ${ran:-none}${skipped:+; not run: $skipped}${refused:+; refused by both, as llama.cpp refuses: $refused}"
}

# engine_row ROW LABEL ARGS...: the engine alone (what llama.cpp 0.3.36 cannot run): the program
# runs to its end with no "error:" line.
engine_row() {
    local row="$1" label="$2"
    shift 2
    local e="$out/rows/$row.engine"
    run_side "$PWD/target/release/libengine.so" "$e" - "$@"
    if grep -q -e '^error' -e '^exit status' "$e"; then
        : >"$out/rows/$row.failed"
        echo "$label: FAILED on the engine:"
        grep -e '^error' -e '^exit status' "$e" | head -n 3 | sed 's/^/    /'
    else
        echo "$label: runs to the end on the engine ($(wc -l <"$e") lines; llama.cpp 0.3.36 cannot run it: no comparison)"
    fi
}

export ENGINE_BENCH_THREADS=1
build_bench compare
generated="$PWD/target/gen-models"
rm -rf "$generated"
gen_test_models "$generated"
declare -A vocab_of
while IFS=$'\t' read -r path vocab; do
    vocab_of[$path]="$vocab"
done <"$generated/printed.tsv"
timed "build, generate models"

# The test models: every section, samplers on three prompts, each prompt with its own seed. The
# generated models: every section, samplers once, on the model's first file; its other weight types
# only the sections whose matrix products they change. Tokenization is compared once per
# vocabulary: a generated model with a test model's vocabulary leaves it to that model's row. The
# long prompt, whose attention splits over the threads, runs at two threads only, in the rows after
# these.
threaded=long_prompt
weights_sections="sections=logits,plain_weights,multiseq,encdec"
firsts=()
echo "(models: $threaded compared at two threads, after the others; tokenization once per vocabulary," \
    "in the row of the test model it comes from)"
for path in "${bench_models[@]/#/$models/}"; do
    rows_submit compare_row "$(basename "$path")" "" - "$path" "skip=$threaded"
done
for path in "$generated"/*.gguf; do
    name="$(basename "$path" .gguf)"
    if [ "${#firsts[@]}" -eq 0 ] || [ "${name%-*}" != "$(basename "${firsts[-1]}" | sed 's/-[^-]*$//')" ]; then
        firsts+=("$path")
        skip="$threaded"
        [ "$(readlink -f "${vocab_of[$path]}")" != "$(readlink -f "$models/${bench_models[0]}")" ] || skip+=,tokenize
        # llama.cpp 0.3.36 stops the process on Granite Switch's embedding inputs (its graph asserts
        # token ids); the engine refuses them.
        [[ "$name" != graniteswitch-* ]] || skip+=,embd_inputs
        rows_submit compare_row "$name.gguf" "" - "$path" arch "skip=$skip"
    else
        rows_submit compare_row "$name.gguf (${weights_sections#sections=})" "" - "$path" arch "$weights_sections"
    fi
done
rows_finish
timed "models"

# Attention split over the threads (single-token attention over 512 cells and more, sliding layers
# among them): the long prompt, at two threads; every section again for DeepSeek-V4, whose results
# change with the thread count almost everywhere. (The other sections whose results depend on the
# thread count, the sliding cache's, compare at one.)
ENGINE_BENCH_THREADS=2
for path in "${bench_models[@]/#/$models/}"; do
    rows_submit compare_row "$(basename "$path") at 2 threads" "" - "$path" "sections=$threaded"
done
for path in "${firsts[@]}"; do
    sections="sections=$threaded"
    [[ "$(basename "$path")" != deepseek4-* ]] || sections=skip=tokenize
    rows_submit compare_row "$(basename "$path") at 2 threads" "" - "$path" arch "$sections"
done
rows_finish
ENGINE_BENCH_THREADS=1
timed "models at 2 threads"

# llama.cpp's tokenizer test vocabularies (scripts/fetch-ggml.sh extracts them), and RWKV's and
# PLaMo-2's, which it has none of (scripts/gen-vocabs.py, written here with their cases): pieces,
# tokens and detokenization of every test case (the Qwen3.5 cases, multilingual, for the four
# without cases).
build_bench vocab
generate vocabs "$generated/vocab" python3 scripts/gen-vocabs.py -- scripts/gen-vocabs.py
for path in .ggml/vocab/*.gguf "$generated"/vocab/*.gguf; do
    cases="$path.inp"
    [ -f "$cases" ] || cases=".ggml/vocab/ggml-vocab-qwen35.gguf.inp"
    rows_submit compare_row "$(basename "$path")" "pieces, tokens and detokenization of $(basename "$cases")'s cases" \
        - "$path" "$cases"
done
rows_finish
timed "vocabularies"

# LoRA adapters (scripts/gen-adapters.py, written here) through benches/adapter_bench.c: two per
# model adapting different weights (attention and the output head and token embeddings; the FFN,
# experts, shared experts and router), in F32, F16 and Q8_0, and one that does not fit.
build_bench adapter
adapters="$generated/adapters"
mkdir -p "$adapters"
# lora SOURCE OUT ARGS...: the adapter scripts/gen-adapters.py writes to OUT, copied from
# ~/.cache/engine/generated/adapters when written before from the same inputs (a minute of CPU
# for them all), else written in the background (as many at once as there are cores) and kept.
adapter_cache="${ENGINE_GEN_CACHE_DIR:-$HOME/.cache/engine/generated}/adapters"
mkdir -p "$adapter_cache"
lora() {
    local cached
    cached="$adapter_cache/$(inputs_key scripts/gen-adapters.py "$@").gguf"
    if [ -f "$cached" ]; then
        cp "$cached" "$2"
        return
    fi
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do
        wait -n || { status=1; echo "writing a LoRA adapter failed"; }
    done
    {
        python3 scripts/gen-adapters.py lora "$@" >/dev/null
        cp "$2" "$cached.$BASHPID" && mv "$cached.$BASHPID" "$cached"
    } &
}
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
wait
for case in "smollm2 $smollm2 gemma3" "gemma3 $gemma3 smollm2" "qwen2moe $generated/qwen2moe-f16.gguf smollm2" \
    "qwen3moe $generated/qwen3moe-q8_0.gguf gemma3"; do
    read -r name path wrong <<<"$case"
    rows_submit compare_row "$(basename "$path") with LoRA adapters" "metadata, logits at several scales, generation" \
        - "$path" "$adapters/$name-a.gguf" "$adapters/$name-b.gguf" "$adapters/$wrong-a.gguf"
done
# Adapters on every layer (even blocks, odd blocks and the output head) of the architectures whose
# graphs leave some products without adapters, or reuse blocks.
every_layer=(deepseek2 deepseek4 glm5-next kimi-linear kimi-k3 nemotron-h-moe qwen4exp hrm_text mimo2 bailingmoe3 rwkv6
    rwkv7 gemma3n gemma4-moe)
# The RWKVs' two-dimensional matrices only: llama.cpp takes an adapter of a weight of more dimensions
# (their token-shift mixes, RWKV-6's time_mix_w2) by its first two, which the engine refuses.
rwkv_matrices='(time_mix_(key|value|receptance|gate|output|w1|decay_w1|decay_w2|a1|a2|v1|v2|g1|g2)|channel_mix_(key|value|receptance))\.weight'
for name in "${every_layer[@]}"; do
    path="$generated/$name-f32.gguf"
    only=''
    [[ "$name" != rwkv* ]] || only="$rwkv_matrices"
    lora "$path" "$adapters/$name-even.gguf" --targets "blk\.[02468]\.$only"
    lora "$path" "$adapters/$name-odd.gguf" --targets "blk\.[13579]\.$only|^output\.weight" --seed 9
done
wait
for name in "${every_layer[@]}"; do
    path="$generated/$name-f32.gguf"
    rows_submit compare_row "$name-f32.gguf with LoRA adapters on every layer" \
        "metadata, logits at several scales, generation" \
        - "$path" "$adapters/$name-even.gguf" "$adapters/$name-odd.gguf" "$adapters/smollm2-a.gguf"
done
rows_finish
timed "LoRA adapters"

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
mkdir -p "$generated/quantized"
rows_submit compare_row "$(basename "$qmodel") quantized" "return codes, sizes and hashes of the files written" \
    - "$qmodel" "$generated/quantized" "$generated/imatrix.txt"
rows_finish
timed "quantizer"

# llama_model_save_to_file (benches/save_bench.c): the engine saves each model (the test models,
# each generated architecture in F32 and a quantized one) to llama.cpp's file, byte for byte.
build_bench save
# Architectures llama.cpp 0.3.36's saver refuses (llama_model_saver_supports_arch; it aborts, the
# engine refuses with a log line): their models are not saved here.
unsaved='^(apertus|bitnet|step35|gemma3n|t5)-'
for path in "${bench_models[@]/#/$models/}" "$generated"/*-f32.gguf "$generated/qwen3moe-q8_0.gguf"; do
    [[ ! "$(basename "$path")" =~ $unsaved ]] || continue
    rows_submit compare_row "$(basename "$path") saved" "the saved model byte for byte" OUT "$path" OUT
done
rows_finish
timed "saved models"

# Training (benches/train_bench.c): two epochs through llama_opt_init and llama_opt_epoch give the
# losses and accuracies llama.cpp gives, ubatch by ubatch, bit for bit, and the trained model saves
# to llama.cpp's file: a ubatch as the whole context (attention over its own keys and values) and
# smaller ones, AdamW and SGD, quantized weights (only the F32 norms train), a sliding-window model
# (losses only). A mixture of experts, which ggml cannot train (llama.cpp aborts), is refused with a
# log line.
build_bench train
for run in "qwen3-f32 256 0 save" "qwen3-f32 128 1 save" "qwen2-f32 256 0 save" "qwen3-q4_1 256 0 save" \
    "olmo2-swa-f32 256 1 -"; do
    read -r model ub opt save <<<"$run"
    if [ "$save" = save ]; then
        rows_submit compare_row "$model trained (n_ubatch $ub, optimizer $opt)" \
            "losses ubatch by ubatch, the saved model byte for byte" OUT "$generated/$model.gguf" "$ub" "$opt" OUT
    else
        rows_submit compare_row "$model trained (n_ubatch $ub, optimizer $opt)" "losses ubatch by ubatch" \
            - "$generated/$model.gguf" "$ub" "$opt"
    fi
done
rows_finish
"$bin" "$PWD/target/release/libengine.so" "$generated/llama-moe-f32.gguf" 256 0 >"$out/moe" 2>"$out/moe.log" \
    && grep -q "no backward pass for MUL_MAT_ID" "$out/moe.log" \
    && echo "llama-moe training: refused with a log line, as expected (llama.cpp aborts)" \
    || { status=1; echo "llama-moe training: not refused as expected:"; cat "$out/moe.log"; }
timed "training"

# llama_model_init_from_user (benches/init_user_bench.c): a model made from a generated model's
# metadata, each tensor filled from a hash of its name: the same tensors asked for in the same
# order, the same logits and the same saved file as llama.cpp's; tensors F32 by default, or with
# the types the metadata lists ("file").
build_bench init_user
runs=("$generated/qwen3-f16.gguf:file" "$generated/smollm3-f16.gguf:file" "$generated/llama-moe-q4_0.gguf:file"
    "$models/${bench_models[0]}:file" "$models/${bench_models[1]}:file")
# DeepSeek-V4's token-to-expert tables are ids: made F32, llama.cpp aborts in its first decode and
# the engine refuses the model (checked in c-tests/test_init_from_user.c); they keep their type.
# RWKV6-Qwen2 and ARWKV-7 made so are not run: llama.cpp 0.3.36's loader makes their optional tensors
# (RWKV6-Qwen2's bonus, ARWKV-7's empty gate beside a mix of six), so its graph takes the path of
# their kin and crashes (a null group norm; a mix that does not broadcast), where the engine refuses
# the context with a log line. The tensors asked for are llama.cpp's (checked by hand).
for path in "$generated"/*-f32.gguf; do
    [[ "$path" =~ /(rwkv6qwen2|arwkv7)-f32\.gguf$ ]] && continue
    [[ "$path" == */deepseek4-f32.gguf ]] && runs+=("$path:file") || runs+=("$path:f32")
done
for run in "${runs[@]}"; do
    path="${run%:*}" mode="${run##*:}"
    if [[ "$(basename "$path")" =~ $unsaved ]]; then
        rows_submit compare_row "$(basename "$path" .gguf) made by llama_model_init_from_user ($mode)" \
            "the tensors asked for in order, logits (not saved: llama.cpp's saver refuses it)" - "$path" "$mode"
        continue
    fi
    rows_submit compare_row "$(basename "$path" .gguf) made by llama_model_init_from_user ($mode)" \
        "the tensors asked for in order, logits, the saved model byte for byte" OUT "$path" "$mode" OUT
done
rows_finish
timed "models made by the caller"

# llama-ext.h (benches/llama_ext_bench.c): the token embeddings, file types' default tensor types,
# the quantizer's type rules on a model made of another's facts, and the graphs of
# llama_graph_reserve, for the test models and generated ones of every kind of memory.
build_bench llama_ext
for path in "${bench_models[@]/#/$models/}" "$generated"/{qwen3moe-q8_0,deepseek2-f16,mamba2-f32,granitehybrid-f16,bert-f16,gpt-oss-f16}.gguf; do
    list="$out/$(basename "$path").tensors"
    python3 - "$path" >"$list" <<'PY'
import sys
import gguf
for t in gguf.GGUFReader(sys.argv[1]).tensors:
    ne = [int(n) for n in t.shape] + [1] * (4 - len(t.shape))
    print(t.name, int(t.tensor_type), *ne)
PY
    rows_submit compare_row "$(basename "$path") through llama-ext.h" \
        "token embeddings, default types, type rules for every file type, reserved graphs' ops" - "$path" "$list"
done
rows_finish
timed "llama-ext.h"

# Pictures and sounds through llama.cpp's libmtmd (benches/mtmd_bench.c, linked against llama.cpp's
# build of it; benches/swap-run.sh makes each library libllama.so.0 in turn): every generated
# projector pair (scripts/gen-mmproj.py) in a chat of two turns, a picture (llama.cpp's test JPEG,
# a generated PNG) or a sound (its test MP3) in each, the embeddings decoded at a ubatch of 512 and
# of 16 (an image then spans several ubatches).
# Every program and library of llama.cpp's build that links libllama (libmtmd, at least) binds
# every symbol on the engine, as ctypes and LD_BIND_NOW bind them.
benches/bind-now.sh llama mtmd || status=1
llama_dir="$(dirname "$(readlink -f "$libllama")")"
mtmd_src="$llama_dir/../../src/tools/mtmd"
cc -O2 -Wall -Wextra -Werror -I include -I "${GGML_SRC:-.ggml/ggml}/include" -I "$mtmd_src" -o target/mtmd_bench \
    benches/mtmd_bench.c -L"$llama_dir" -lmtmd -lllama -lggml-base -Wl,-rpath,"$llama_dir"
bin="$PWD/benches/swap-run.sh"
generate mmproj "$generated/mmproj" python3 scripts/gen-mmproj.py \
    -- scripts/gen-mmproj.py scripts/gen-models.py "${bench_models[@]/#/$models/}"
# libmtmd's Pixtral graph (llama.cpp 0.3.36, tools/mtmd/models/pixtral.cpp) "clears" an unset
# tensor for its [IMG_BREAK] rows by scaling it by 0, so a NaN left in the heap chunk its
# compute buffer reuses comes out as NaN embeddings: about 1 run in 100 on the engine, whose
# freed allocations differ from libllama's. glibc then fills new chunks with 0x3c bytes (finite,
# non-zero), the same on both sides, so the comparison sees the libraries, not the heap.
export MALLOC_PERTURB_=195
while IFS=$'\t' read -r pair text mmproj kind; do
    media=("$mtmd_src/test-1.jpeg" "$generated/mmproj/picture.png")
    [ "$kind" != audio ] || media=("$mtmd_src/test-2.mp3")
    for m in "${media[@]}"; do
        for n_batch in 512 16; do
            rows_submit compare_row "$pair with $(basename "$m") through libmtmd (n_batch $n_batch)" \
                "chunks, logits of every step, greedy text and the sequence's state, over two turns" \
                - target/mtmd_bench "$text" "$mmproj" "$m" "$n_batch"
        done
    done
done <"$generated/mmproj/printed.tsv"
rows_finish
unset MALLOC_PERTURB_
timed "multimodal"

# Generated models llama.cpp cannot run: the engine runs the same program to its end.
bin=target/compare_bench
for path in "$generated"/no-oracle/*.gguf; do
    rows_submit engine_row "$(basename "$path")" "$path" arch
done
rows_finish
timed "engine only"

oracle_report
echo
costliest_rows 8
echo
echo "compare.sh part                     seconds"
for line in "${times[@]}"; do
    printf '%-36s %7s\n' "${line%|*}" "${line##*|}"
done
exit "$status"
