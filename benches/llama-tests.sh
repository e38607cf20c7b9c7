#!/usr/bin/env bash
# llama.cpp's own tests (the sdist's tests/, built from the same sdist as our ggml into the cache
# outside the repository) that go through llama.h, each run on libllama.so and then, unchanged, with
# libengine.so put in its place. Models llama.cpp's CMake downloads are replaced by SmolLM2; the
# `--models` tests run over the dummy model of every architecture llama.cpp can write
# (`test-llama-archs -o`, written by llama.cpp). Prints one table: per test its result on each
# library (for the `--models` tests, how many models passed). Not part of the test suite (building
# the tests takes a while); see the README. Logs: target/llama-tests/.
# Usage: benches/llama-tests.sh [TEST...]   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

all=(test-tokenizer-0 test-tokenizer-1-spm test-sampling test-chat-template test-thread-safety
    test-model-load-cancel test-autorelease test-state-restore-fragmented test-backend-sampler
    test-save-load-state test-recurrent-state-rollback)
selected=("${@:-${all[@]}}")
scripts/fetch-models.sh
bin="$(scripts/llama-cpp.sh "${all[@]}" test-llama-archs)" || exit 1
cargo build --release --lib || exit 1

src="$bin/../../src"
model="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
out="$PWD/target/llama-tests"
swap="$out/swap"
zoo="$out/zoo"
rm -rf "$out"
mkdir -p "$swap" "$zoo"
swap_in "$swap" "$bin"
"$bin/test-llama-archs" -o "$zoo" >"$out/test-llama-archs.log" 2>&1 || echo "test-llama-archs failed" >&2

# run NAME TEST ARGS...: the test on each library; one row: "PASS" or "FAIL (rc N)" per library.
# For the --models tests, also how many models passed every check on each library, and the models
# that pass on llama.cpp but not on the engine.
run() {
    local name="$1" test="$2"
    shift 2
    local row lib rc
    row="$(printf '%-54s' "$name")"
    for lib in llama engine; do
        if [ "$lib" = engine ]; then
            LD_LIBRARY_PATH="$swap" timeout 1800 "$bin/$test" "$@" >"$out/$name.$lib.log" 2>&1
        else
            timeout 1800 "$bin/$test" "$@" >"$out/$name.$lib.log" 2>&1
        fi
        rc=$?
        local result="PASS"
        [ "$rc" -eq 0 ] || result="FAIL (rc $rc)"
        if [ "${1:-}" = --models ]; then
            # One line per model: its name, then its checks' results.
            grep -a '\.gguf ' "$out/$name.$lib.log" | sed 's/\x1b\[[0-9;]*m//g' | tr -s ' ' | sort >"$out/$name.$lib.models"
            result+=", $(grep -vc 'FAIL\|SKIP' "$out/$name.$lib.models") models passed"
        fi
        row+="$(printf '%-30s' "$result")"
    done
    if [ "${1:-}" = --models ]; then
        # The models whose results differ (the list in $out/$name.differ).
        comm -23 "$out/$name.llama.models" "$out/$name.engine.models" | cut -d' ' -f1 >"$out/$name.differ"
        row+="$(wc -l <"$out/$name.differ") of $(find "$zoo" -name '*.gguf' | wc -l) models differ"
    fi
    echo "$row"
}

printf '%-54s%-30s%-30s\n' test llama.cpp engine
for t in "${selected[@]}"; do
    case "$t" in
    test-tokenizer-0)
        for v in "$src"/models/ggml-vocab-*.gguf; do
            [ -f "$v.inp" ] && run "test-tokenizer-0-$(basename "$v" .gguf | sed 's/ggml-vocab-//')" "$t" "$v"
        done
        ;;
    test-tokenizer-1-spm) run "$t-llama-spm" "$t" "$src/models/ggml-vocab-llama-spm.gguf" ;;
    test-chat-template) (cd "$src" && run "$t" "$t") ;;
    test-thread-safety) run "$t" "$t" -m "$model" -ngl 99 -p "The meaning of life is" -n 128 -c 256 -ub 32 -np 4 -t 2 ;;
    test-state-restore-fragmented) run "$t" "$t" -m "$model" ;;
    test-model-load-cancel | test-autorelease) run "$t" "$t" "$model" ;;
    test-backend-sampler)
        # One run per case: a failing case aborts the program.
        for c in $(sed -n 's/^ *{ *"\([a-z_]*\)", *test_backend.*/\1/p' "$src/tests/$t.cpp"); do
            run "$t-$c" "$t" --model "$model" --test "$c"
        done
        ;;
    test-save-load-state | test-recurrent-state-rollback) run "$t" "$t" --models "$zoo" ;;
    *) run "$t" "$t" ;;
    esac
done
