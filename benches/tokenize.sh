#!/usr/bin/env bash
# Tokenizer throughput of libengine.so against llama.cpp's libllama.so, same program, same text.
# Not a test: numbers depend on the machine.
#
#   benches/tokenize.sh [LIBLLAMA.so] [TEXT_FILE]
#
# LIBLLAMA.so defaults to $LIBLLAMA; without one only libengine.so is measured. llama.cpp's library
# comes from benches/llama-cpp.sh.
# Without TEXT_FILE the benchmark generates a 2 MB text (prose, code, numbers, several scripts).
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-}}"
text="${2:--}"

. benches/common.sh
build_bench tokenize
run_bench "$libllama" "$text"
