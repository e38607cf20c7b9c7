#!/usr/bin/env bash
# The tiny random-weight models of scripts/gen-models.py, every architecture's, in DIR (links into
# ~/.cache/engine/generated/models) with DIR/printed.tsv listing each file and the model its
# vocabulary comes from. One call with one set of inputs for benches/compare.sh and the arch tests
# of `cargo test`: whichever asks first on a machine writes them, the other finds them cached.
#
#   scripts/gen-test-models.sh DIR    (DIR: new, empty, or an earlier output, which is replaced)
#
# Sourced (from the repository root, after benches/common.sh and scripts/generated.sh), it only
# defines gen_test_models, so that compare.sh keeps the files' sums (file_sums) it learns here.
# Needs the first test model (scripts/fetch-models.sh), .ggml/vocab (scripts/fetch-ggml.sh) and
# python3 with gguf and numpy (scripts/setup.sh).

# gen_test_models DIR: the models in DIR, which must not exist.
gen_test_models() {
    generate models "$1" python3 scripts/gen-models.py "$models/${bench_models[0]}" \
        -- scripts/gen-models.py scripts/gen-vocabs.py "$models/${bench_models[0]}" .ggml/vocab/*.gguf
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    [ $# -eq 1 ] || { sed -n 's/^#   //p' "$0" >&2; exit 2; }
    dir="$(realpath -m "$1")"
    cd "$(dirname "$0")/.."
    # generate links into a new directory; only an earlier output is removed to make room.
    if [ -f "$dir/printed.tsv" ]; then
        rm -rf "$dir"
    elif [ -e "$dir" ] && ! rmdir "$dir" 2>/dev/null; then
        echo "$dir is neither empty nor an earlier output: not replaced" >&2
        exit 1
    fi
    . benches/common.sh
    . scripts/generated.sh
    [ -f "$models/${bench_models[0]}" ] || { echo "$models/${bench_models[0]} is missing: run scripts/fetch-models.sh" >&2; exit 1; }
    # Without them the inputs (and so the cache key) would silently differ from compare.sh's.
    [ -d .ggml/vocab ] || { echo ".ggml/vocab is missing: run scripts/fetch-ggml.sh" >&2; exit 1; }
    gen_test_models "$dir"
fi
