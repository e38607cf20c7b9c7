#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, lints, Rust tests, Miri, the C tests via
# CMake/ctest, then the live comparison with llama.cpp. Ends with the time each stage took.
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   lints, Rust tests and C tests: no Miri, no llama.cpp, no slow C tests
# Miri (one thread), llama.cpp's build and the slow C tests (a second build of the library) run in
# the background at the lowest priority, on what the other stages leave of the cores.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
case "${1:-}" in
    --quick) quick=true ;;
    "") ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

# ggml's libraries, kept by everything their build reads (build.rs), as llama.cpp's oracle is: a
# fresh clone links those an earlier run built for this CPU rather than compiling ggml again.
export ENGINE_GGML_CACHE="${ENGINE_GGML_CACHE:-$HOME/.cache/engine/ggml}"

stages=()
started=$SECONDS
mkdir -p build/cpu
report() {
    local line name wall cpu total_cpu=0
    echo
    printf '%-44s %7s %7s\n' stage seconds "cpu s"
    for line in "${stages[@]}"; do
        IFS='|' read -r name wall cpu <<<"$line"
        printf '%-44s %7s %7s\n' "$name" "$wall" "$cpu"
        total_cpu=$((total_cpu + cpu))
    done
    printf '%-44s %7s %7s\n' "total (wall clock; cpu of all stages)" "$((SECONDS - started))" "$total_cpu"
}
trap report EXIT
# timed NAME COMMAND...: run COMMAND in a subshell that leaves the CPU seconds it and its children
# used in build/cpu/NAME (the cores, not the clock, are what a 2-core run runs out of).
timed() {
    local name="$1"
    shift
    (
        "$@"
        # `times` unpiped: a pipeline would run it in a fork, whose children's times are zero.
        times >"build/cpu/$name.times"
        awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/);
            printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] + 0.5 }' \
            "build/cpu/$name.times" >"build/cpu/$name"
    )
}
cpu_of() { cat "build/cpu/$1" 2>/dev/null || echo 0; }
# stage NAME COMMAND...: run COMMAND and record how long it took.
stage() {
    local name="$1" t0=$SECONDS
    shift
    timed "$name" "$@"
    stages+=("$name|$((SECONDS - t0))|$(cpu_of "$name")")
}
# background NAME COMMAND...: start COMMAND at the lowest priority, its output kept for finish.
declare -A bg_pid bg_start
background() {
    local name="$1"
    shift
    bg_start[$name]=$SECONDS
    timed "$name" nice -n 19 "$@" >"build/$name.log" 2>&1 &
    bg_pid[$name]=$!
}
# finish NAME: wait for a background stage, show its output's end, fail if it failed.
finish() {
    local name="$1" rc=0 t0=$SECONDS
    wait "${bg_pid[$name]}" || rc=$?
    tail -n 25 "build/$name.log"
    stages+=("$name (background, $((SECONDS - t0)) s waited)|$((SECONDS - ${bg_start[$name]}))|$(cpu_of "$name")")
    [ "$rc" -eq 0 ] || { echo "$name failed (rc $rc): build/$name.log" >&2; exit "$rc"; }
}

stage "set-up" scripts/setup.sh
stage "test models" scripts/fetch-models.sh
if ! $quick; then
    # Miri over the pure-Rust parts (installs the nightly toolchain's Miri when missing), and
    # llama.cpp 0.3.36 itself, built for this CPU from the sdist our ggml comes from (once, then
    # cached), the oracle the live comparison runs against.
    background miri scripts/miri.sh
    background llama.cpp-oracle benches/llama-cpp.sh
fi

stage "cargo fmt" cargo fmt --check
# The architecture modules are declared inside the registry's macro, where cargo fmt does not
# look: their files are checked by name.
stage "rustfmt arch" rustfmt --edition 2021 --check src/arch/*.rs
stage "api coverage" python3 scripts/api_coverage.py --check
stage "clippy" cargo clippy --release --all-targets -- -D warnings
stage "cargo test" cargo test --release

stage "cmake configure" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
stage "cmake build" cmake --build build -j"$(nproc)"
stage "ctest" ctest --test-dir build --output-on-failure --no-tests=error -LE slow
$quick && exit 0
background ctest-slow ctest --test-dir build --output-on-failure --no-tests=error -L slow

# Bit-identity with llama.cpp itself: both libraries run on the same inputs, any differing bit
# fails.
finish llama.cpp-oracle
stage "compare.sh" benches/compare.sh
finish ctest-slow
finish miri
