#!/usr/bin/env bash
# The whole speed matrix of libengine.so against llama.cpp's libllama.so, in one table. Each
# measurement runs the same program on both libraries (llama.cpp's own llama-bench,
# llama-batched-bench, llama-simple and llama-quantize with libengine.so put in libllama.so's
# place; our sampling and tokenizer benches), alternating which library goes first, ROUNDS times.
# The table gives per row the median of each library and the engine/llama.cpp ratio (median, and
# lowest and highest over the rounds): above 1 the engine is faster. Not a test: the numbers
# depend on the machine; run it on a quiet one.
#
#   benches/all.sh [LIBLLAMA.so] [--rounds N] [--quick]
#
# LIBLLAMA.so: llama.cpp's library, its programs beside it (default: benches/llama-cpp.sh's
# build). --rounds: 3 by default. --quick: one round at small sizes, to check that every row
# runs. Rows: llama-bench pp/tg at depth 0, 1024 and 4096 with flash attention on and off, on
# both test models and on generated MoE, recurrent and hybrid models (tiny: their rows weigh the
# per-step overhead, not the arithmetic); llama-batched-bench with 1, 2, 4 and 8 sequences; start
# up to the first token (llama-simple); quantizing (llama-quantize); samplers and tokenizers.
# Raw values: target/all/values.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

libllama="" rounds=3 quick=0
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --quick) quick=1 rounds=1; shift ;;
        *) libllama="$1"; shift ;;
    esac
done
programs=(llama-bench llama-batched-bench llama-simple llama-quantize)
if [ -z "$libllama" ]; then
    llama_bin="$(scripts/llama-cpp.sh "${programs[@]}")"
else
    llama_bin="$(dirname "$(readlink -f "$libllama")")"
fi
for p in "${programs[@]}"; do
    [ -x "$llama_bin/$p" ] || { echo "all.sh: no $p beside $llama_bin/libllama.so" >&2; exit 1; }
done
scripts/fetch-models.sh >/dev/null
build_bench sampling
build_bench tokenize

out="$PWD/target/all"
rm -rf "$out"
mkdir -p "$out"
swap_in "$out/swap" "$llama_bin"
values="$out/values.tsv"
: >"$values"
scripts/gen-test-models.sh "$out/generated" >/dev/null
# A MoE, a recurrent and a hybrid model among the generated ones.
generated=(qwen3moe-f32 mamba2-f32 jamba-f32)

if [ "$quick" = 1 ]; then
    pp=64 tg=16 depths=0,256 npl=1,2 npp=32 ntg=8 iters=20
else
    pp=512 tg=128 depths=0,1024,4096 npl=1,2,4,8 npp=128 ntg=32 iters=200
fi

# on LIB CMD...: CMD with LIB ("engine" or "llama") as its libllama.so.0.
on() {
    local lib="$1"
    shift
    case "$lib" in
        engine) LD_LIBRARY_PATH="$out/swap" "$@" ;;
        llama) "$@" ;;
    esac
}

# record ROW LIB KIND VALUE: one measurement; KIND is speed (higher is better) or time.
record() {
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$values"
}

# wall_ms CMD...: the milliseconds CMD takes (its output to $out/last.log).
wall_ms() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >"$out/last.log" 2>&1
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}

# measure LIB: every row once on LIB.
measure() {
    local lib="$1" m name
    for m in "$models/${bench_models[0]}" "$models/${bench_models[1]}" "${generated[@]/#/$out/generated/}"; do
        m="${m%.gguf}.gguf"
        name="$(basename "$m" .gguf)"
        on "$lib" "$llama_bin/llama-bench" -m "$m" -p "$pp" -n "$tg" -d "$depths" -fa 0,1 -t 2 -r 1 -o jsonl 2>/dev/null |
            python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    n_prompt, n_gen, depth, fa, ts = (r[k] for k in ("n_prompt", "n_gen", "n_depth", "flash_attn", "avg_ts"))
    test = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
    print(f"llama-bench {sys.argv[1]} {test} depth {depth} fa {int(bool(fa))}\t{ts}")
' "$name" | while IFS=$'\t' read -r row v; do record "$row" "$lib" speed "$v"; done
    done
    on "$lib" "$llama_bin/llama-batched-bench" -m "$models/${bench_models[0]}" -c 4096 -npp "$npp" -ntg "$ntg" \
        -npl "$npl" -t 2 2>/dev/null | awk -F'|' 'NF > 10 && $4 ~ /[0-9]/ {gsub(/ /, ""); print $4, $11}' |
        while read -r b s; do record "llama-batched-bench ${bench_models[0]%.gguf} $b sequences (t/s)" "$lib" speed "$s"; done
    for m in "${bench_models[@]}"; do
        record "llama-simple ${m%.gguf} to the first token (ms)" "$lib" time \
            "$(wall_ms on "$lib" "$llama_bin/llama-simple" -m "$models/$m" -n 1 "Hello")"
    done
    record "llama-quantize ${bench_models[1]%.gguf} to q8_0 (ms)" "$lib" time \
        "$(wall_ms on "$lib" "$llama_bin/llama-quantize" --allow-requantize "$models/${bench_models[1]}" "$out/q8.gguf" q8_0 2)"
    local path="$PWD/target/release/libengine.so"
    [ "$lib" = llama ] && path="$llama_bin/libllama.so"
    for m in "${bench_models[@]}"; do
        target/sampling_bench "$path" "$models/$m" "$iters" 2>/dev/null |
            sed -nE 's/^  (.*[^ ]) +median +([0-9.]+) us.*/\1\t\2/p' |
            while IFS=$'\t' read -r what v; do record "sampler ${m%.gguf}: $what (us)" "$lib" time "$v"; done
        target/tokenize_bench "$path" "$models/$m" - 2>/dev/null |
            sed -nE 's/^tokenize best [0-9.]+ ms, median ([0-9.]+) ms.*/\1/p' |
            while read -r v; do record "tokenize ${m%.gguf} 2 MB (ms)" "$lib" time "$v"; done
    done
}

for round in $(seq 1 "$rounds"); do
    echo "round $round of $rounds" >&2
    if [ $((round % 2)) = 1 ]; then order=(engine llama); else order=(llama engine); fi
    for lib in "${order[@]}"; do
        measure "$lib"
    done
done

python3 - "$values" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    row, lib, kind, v = line.rstrip("\n").split("\t")
    r = rows.setdefault(row, {"kind": kind, "engine": [], "llama": []})
    r[lib].append(float(v))
print(f"{'row':<66} {'engine':>10} {'llama.cpp':>10} {'ratio':>6}  {'lowest':>6} {'highest':>7}")
for row, r in rows.items():
    e, l = r["engine"], r["llama"]
    if not e or not l or min(e + l) <= 0:
        print(f"{row:<66} {'missing' if not e or not l else 'zero'}")
        continue
    ratios = [a / b if r["kind"] == "speed" else b / a for a, b in zip(e, l)]
    print(f"{row:<66} {statistics.median(e):>10.2f} {statistics.median(l):>10.2f} "
          f"{statistics.median(ratios):>6.2f}  {min(ratios):>6.2f} {max(ratios):>7.2f}")
EOF
