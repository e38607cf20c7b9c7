# Sourced by benches/compare.sh: running a bench program through both libraries, with llama.cpp's
# side taken from a cache when the very same run was made before, and rows run side by side.
#
# A run is keyed by everything its output can depend on: the oracle's libraries (libllama.so and
# ggml's, by content), the bench program (by content), each argument (a file by its content, a path
# under the repository relative to it, anything else as written), the thread count, and the CPU
# (scripts/cpu-key.sh). A warm cache leaves only the engine's side to compute. One row in
# ENGINE_ORACLE_LIVE_EVERY (20), from an offset drawn per run, is still computed live and must
# equal the cache, so a stale or corrupted cache cannot pass unnoticed for long.
# ENGINE_ORACLE_CACHE=off computes every row live.
#
# Expects: $libllama (the oracle), $bin (the bench program), $out (a scratch directory), and
# scripts/generated.sh sourced (args_key).

oracle_cache="${ENGINE_ORACLE_CACHE_DIR:-$HOME/.cache/engine/oracle}"
oracle_live_every="${ENGINE_ORACLE_LIVE_EVERY:-20}"
oracle_offset=$((RANDOM % oracle_live_every))

# oracle_init: the oracle's identity (its libraries' contents and this CPU). Refuses a libengine.so
# in llama.cpp's place: every row would compare the engine with itself.
oracle_init() {
    if nm -D --defined-only "$libllama" 2>/dev/null | grep -qw llama_engine_last_error; then
        echo "compare.sh: $libllama is libengine.so, not llama.cpp: nothing would be compared" >&2
        exit 1
    fi
    local lib
    lib="$(readlink -f "$libllama")"
    oracle_id="$({ sha256sum "$lib" "$(dirname "$lib")"/libggml*.so* | cut -d' ' -f1
        scripts/cpu-key.sh; } | sha256sum | cut -c1-32)"
    mkdir -p "$oracle_cache" "$out/rows"
}

# run_key ARGS...: the cache key of the bench program on ARGS.
run_key() {
    {
        echo "$oracle_id"
        file_sum "$bin"
        echo "threads ${ENGINE_BENCH_THREADS:-default}"
        args_key "$@"
    } | sha256sum | cut -c1-40
}

# run_side LIB OUT WRITES ARGS...: the bench program on ARGS through LIB, its output in OUT (its
# log in OUT.log). WRITES, unless "-", is an argument naming a file the run writes: the run writes
# OUT.gguf in its place, and that file's sha256 (or "no file") ends OUT, so the file is compared too.
run_side() {
    local lib="$1" dest="$2" writes="$3" a
    shift 3
    local -a args=()
    for a in "$@"; do
        [ "$a" = "$writes" ] && a="$dest.gguf"
        args+=("$a")
    done
    rm -f "$dest.gguf"
    (
        "$bin" "$lib" "${args[@]}" >"$dest" 2>"$dest.log" || echo "exit status $?" >>"$dest"
        times >"$dest.times"
    )
    if [ "$writes" != - ]; then
        if [ -f "$dest.gguf" ]; then
            echo "wrote $(sha256sum "$dest.gguf" | cut -d' ' -f1)" >>"$dest"
        else
            echo "wrote no file" >>"$dest"
        fi
        rm -f "$dest.gguf"
    fi
}

# both_sides ROW WRITES ARGS...: the engine's side into $out/rows/ROW.engine and the oracle's into
# $out/rows/ROW.llama, side by side, or the oracle's from the cache ($out/rows/ROW.cached then
# exists). ROW numbers the row in the run.
both_sides() {
    local row="$1" writes="$2"
    shift 2
    local base="$out/rows/$row" key
    key="$(run_key "$@")"
    if [ "${ENGINE_ORACLE_CACHE:-on}" != off ] && [ -f "$oracle_cache/$key" ] \
        && [ $(((row + oracle_offset) % oracle_live_every)) != 0 ]; then
        : >"$base.cached"
        run_side "$PWD/target/release/libengine.so" "$base.engine" "$writes" "$@"
        cp "$oracle_cache/$key" "$base.llama"
        return
    fi
    if [ "${ENGINE_BENCH_THREADS:-1}" = 1 ]; then
        run_side "$PWD/target/release/libengine.so" "$base.engine" "$writes" "$@" &
        local engine=$!
        run_side "$libllama" "$base.llama" "$writes" "$@"
        wait "$engine"
    else
        # More threads than cores stall ggml's spinning threads: one side after the other.
        run_side "$PWD/target/release/libengine.so" "$base.engine" "$writes" "$@"
        run_side "$libllama" "$base.llama" "$writes" "$@"
    fi
    if [ -f "$oracle_cache/$key" ] && ! cmp -s "$oracle_cache/$key" "$base.llama"; then
        echo "error: llama.cpp's cached output for this row differs from its live one (cache entry removed)" \
            >>"$base.llama"
        rm -f "$oracle_cache/$key"
    elif ! grep -q '^exit status' "$base.llama"; then
        cp "$base.llama" "$oracle_cache/$key.$row.part" && mv "$oracle_cache/$key.$row.part" "$oracle_cache/$key"
    fi
}

# Rows run in the background, as many at once as there are cores (each side of a row is one
# process at ENGINE_BENCH_THREADS threads); their reports are printed in order by rows_finish.
rows_started=0
rows_printed=0
# rows_submit FUNCTION ARGS...: FUNCTION ROW ARGS... in the background, its report kept for later.
# Rows at more than one thread each run alone.
rows_submit() {
    rows_started=$((rows_started + 1))
    # The bench program, hashed once (a program is built once a run).
    [ -n "${file_sums[$bin]:-}" ] || file_sums_remember "$bin"
    local slots
    slots=$(nproc)
    [ "${ENGINE_BENCH_THREADS:-1}" = 1 ] || slots=1
    while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do
        wait -n || true
    done
    # A row that stops part way (set -e) leaves no .done and fails.
    { "$1" "$rows_started" "${@:2}" && : >"$out/rows/$rows_started.done"; } >"$out/rows/$rows_started.report" 2>&1 &
}
# rows_finish: wait for the submitted rows and print their reports; sets status=1 if one failed.
rows_finish() {
    wait || true
    local i
    for ((i = rows_printed + 1; i <= rows_started; i++)); do
        cat "$out/rows/$i.report"
        if [ ! -e "$out/rows/$i.done" ]; then
            echo "row $i did not run to its end"
            status=1
        fi
        [ ! -e "$out/rows/$i.failed" ] || status=1
    done
    rows_printed=$rows_started
}
# costliest_rows N: the N rows whose engine side took the most CPU time (the suite's budget, row
# by row), from the `times` each side leaves beside its output.
costliest_rows() {
    local cpu file row
    echo "the engine's side of the $1 costliest rows, CPU seconds:"
    awk 'FNR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
            printf "%.1f %s\n", u[1] * 60 + u[2] + s[1] * 60 + s[2], FILENAME }' "$out"/rows/*.engine.times \
        | sort -nr | sed -n "1,$1p" | while read -r cpu file; do
        row="$(basename "$file" .engine.times)"
        printf '%7s  %s\n' "$cpu" "$(head -n 1 "$out/rows/$row.report" | sed 's/: .*//')"
    done
}
# oracle_report: how many rows took llama.cpp's side from the cache.
oracle_report() {
    local cached
    cached=$(find "$out/rows" -name '*.cached' | wc -l)
    echo "llama.cpp's side: $((rows_started - cached)) rows computed live, $cached from the cache ($oracle_cache)"
}
