#!/usr/bin/env bash
# The C tests (hostile calls included) built with AddressSanitizer and UBSan against the library,
# then run: any report fails its test. The library itself is Rust (its unsafe code is fuzzed
# under AddressSanitizer by benches/fuzz.sh); what this catches is a C caller's view of it:
# buffers it writes past, memory it frees twice or reads after freeing, undefined behaviour in
# what it hands back. test_rpc runs without the leak check: a scheduler over an RPC server that
# died is left unfreed on purpose (ggml aborts when it frees one), which LeakSanitizer reports.
# test_churn is left out: it measures the process's resident set, which AddressSanitizer's own
# allocator and its quarantine of freed memory decide there.
#
#   scripts/sanitize.sh [CTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
export ENGINE_GGML_CACHE=${ENGINE_GGML_CACHE:-$HOME/.cache/engine/ggml}
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B target/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENGINE_BUILD_EXAMPLES=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > /dev/null
cmake --build target/sanitize -j"$(nproc)"
export UBSAN_OPTIONS=print_stacktrace=1
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir target/sanitize --output-on-failure --no-tests=error -LE slow -E '^(test_rpc|test_churn)$' "$@"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir target/sanitize --output-on-failure --no-tests=error -R '^test_rpc$'

