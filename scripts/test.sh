#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, lints, Rust tests, Miri, the C tests via
# CMake/ctest, then the live comparison with llama.cpp.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/fetch-models.sh

cargo fmt --check
python3 scripts/api_coverage.py --check
cargo clippy --release --all-targets -- -D warnings
cargo test --release
# Miri over the pure-Rust parts (installs the nightly toolchain's Miri when missing).
scripts/miri.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure

# Bit-identity with llama.cpp itself: its libllama.so built for this CPU from the sdist our ggml
# comes from (once, then cached), both libraries run on the same inputs, any differing bit fails.
benches/compare.sh
