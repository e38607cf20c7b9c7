#!/usr/bin/env bash
# Fuzzes the engine's parsers of outside bytes (src/ffi/fuzz.rs: model and vocabulary files,
# context, sequence and session states, LoRA files, control vectors, GBNF grammars, chat
# templates, tokenizer input) under libFuzzer with cargo-fuzz, each target in turn for SECONDS
# (default an hour), and prints executions and crashes per target. Not a test: `cargo test` runs
# the same targets over their seeds and mutations for a moment
# (`every_fuzz_target_survives_its_seeds_and_their_mutations`).
#
#   benches/fuzz.sh [SECONDS] [TARGET...]
#
# Corpora grow in target/fuzz/corpus/TARGET (kept between runs), started from each target's seeds
# (and, for `model`, the smallest generated test models); crashes land in
# target/fuzz/artifacts/TARGET: each becomes a regression test. Needs the nightly toolchain and
# cargo-fuzz (installed when missing) and the test models (scripts/fetch-models.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-3600}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model vocab state seq_state session lora control_vector grammar chat_template tokenize)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
export ENGINE_GGML_CACHE=${ENGINE_GGML_CACHE:-$HOME/.cache/engine/ggml}

out=$root/target/fuzz
mkdir -p "$out/corpus" "$out/artifacts"
(cd fuzz && cargo +nightly fuzz build)
bin_dir=$root/fuzz/target/x86_64-unknown-linux-gnu/release
# The targets link ggml's shared libraries, which the build leaves in build/.
export LD_LIBRARY_PATH=$bin_dir/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

dict_of() {
    case "$1" in
        model|vocab|lora) echo "-dict=$root/fuzz/dict/gguf.dict" ;;
        grammar) echo "-dict=$root/fuzz/dict/grammar.dict" ;;
        chat_template) echo "-dict=$root/fuzz/dict/chat_template.dict" ;;
    esac
}

printf '%-16s %12s %10s %8s %s\n' target executions exec/s crashes corpus > "$out/summary.txt"
for t in "${targets[@]}"; do
    corpus=$out/corpus/$t
    if [ ! -d "$corpus" ]; then
        ENGINE_FUZZ_SEEDS_TO=$corpus "$bin_dir/$t" -runs=0 > "$out/$t.seeds.log" 2>&1
        if [ "$t" = model ]; then
            gen=$(mktemp -d)
            scripts/gen-test-models.sh "$gen" > /dev/null
            find -L "$gen" -name '*.gguf' -size -400k | head -40 | while read -r f; do cp -L "$f" "$corpus/"; done
            rm -rf "$gen"
        fi
    fi
    mkdir -p "$out/artifacts/$t"
    log=$out/$t.log
    # Crashes are counted, not fatal: libFuzzer stops at the first, so each target runs until its
    # time is spent, starting again after a crash.
    crashes=0 execs=0 start=$(date +%s)
    while [ $(( $(date +%s) - start )) -lt "$secs" ]; do
        left=$(( secs - ($(date +%s) - start) ))
        # shellcheck disable=SC2046
        if ! "$bin_dir/$t" "$corpus" $(dict_of "$t") -max_total_time="$left" -rss_limit_mb=4096 \
            -timeout=30 -max_len=1048576 -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 > "$log" 2>&1; then
            crashes=$((crashes + 1))
        fi
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        execs=$((execs + ${n:-0}))
    done
    corpus_n=$(find "$corpus" -type f | wc -l)
    printf '%-16s %12s %10s %8s %s\n' "$t" "$execs" $((execs / (secs > 0 ? secs : 1))) "$crashes" "$corpus_n" >> "$out/summary.txt"
done
cat "$out/summary.txt"
