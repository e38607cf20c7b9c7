# Sourced (from the repository root) by benches/compare.sh and c-tests/gen_adapters.sh: files keyed by
# their content, and test inputs that generators write (models, projectors, adapters) kept under
# ~/.cache/engine/generated, keyed by the generators' inputs, so that a warm run neither writes
# them again nor hashes them.

# Contents' sha256 by path, for files that many rows read (the test models, the generated ones, the
# bench program): hashed once, or known from where they were made (file_sums_add), not once a row.
declare -A file_sums
# file_sums_add SUMS DIR: sha256sum's lines SUMS, for files under DIR.
file_sums_add() {
    local sum name
    while read -r sum name; do
        file_sums[$2/${name#\*}]="$sum"
    done <"$1"
}
# file_sum FILE: FILE's sha256.
file_sum() {
    if [ -n "${file_sums[$1]:-}" ]; then
        echo "${file_sums[$1]}"
    else
        sha256sum "$1" | cut -d' ' -f1
    fi
}
# file_sums_remember FILE...: hash FILEs now, for the rows started after.
file_sums_remember() {
    local f
    for f in "$@"; do
        file_sums[$f]="$(sha256sum "$f" | cut -d' ' -f1)"
    done
}

# args_key ARGS...: one line per argument, a file by its content, a path under the repository
# relative to it, anything else as written.
args_key() {
    local a
    for a in "$@"; do
        if [ -f "$a" ]; then
            printf 'file '
            file_sum "$a"
        else
            echo "arg ${a#"$PWD"/}"
        fi
    done
}

# inputs_key INPUTS...: a hash of the generators' INPUTS (files by content) and Python packages.
inputs_key() {
    [ -n "${py_packages:-}" ] \
        || py_packages="$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"), m.version("numpy"))')"
    { echo "$py_packages"; args_key "$@"; } | sha256sum | cut -c1-32
}
# generate NAME DIR COMMAND... -- INPUTS...: COMMAND DIR writes files into DIR and prints lines
# naming them, a function of its INPUTS (files and words, with the gguf and numpy versions). Kept
# under ~/.cache/engine/generated/NAME (the latest inputs' only) with their sha256 sums, and linked
# from DIR (the rows only read them), with what it printed in DIR/printed.tsv: a warm run neither
# writes them again nor hashes them.
generate() {
    local name="$1" dir="$2" cache key
    shift 2
    local -a cmd=()
    while [ "$1" != -- ]; do
        cmd+=("$1")
        shift
    done
    shift
    key="$(inputs_key "$@")"
    cache="$(realpath -m "${ENGINE_GEN_CACHE_DIR:-$HOME/.cache/engine/generated}/$name")"
    if [ ! -f "$cache/$key/printed.tsv" ]; then
        rm -rf "$cache"
        mkdir -p "$cache/$key.part"
        "${cmd[@]}" "$cache/$key.part" | sed "s|$cache/$key.part|@DIR@|g; s|$PWD|@REPO@|g" \
            >"$cache/$key.part/printed.tsv"
        mv "$cache/$key.part" "$cache/$key"
    fi
    if [ ! -f "$cache/$key/SHA256SUMS" ]; then
        (cd "$cache/$key" && find . -type f ! -name printed.tsv ! -name 'SHA256SUMS*' -printf '%P\n' | sort \
            | xargs -r sha256sum >SHA256SUMS.part && mv SHA256SUMS.part SHA256SUMS)
    fi
    cp -rs "$cache/$key" "$dir"
    rm "$dir/printed.tsv" "$dir/SHA256SUMS"
    sed "s|@DIR@|$dir|g; s|@REPO@|$PWD|g" "$cache/$key/printed.tsv" >"$dir/printed.tsv"
    file_sums_add "$cache/$key/SHA256SUMS" "$dir"
}
