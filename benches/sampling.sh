#!/usr/bin/env bash
# Sampling time per token of libengine.so against llama.cpp's libllama.so, same program, same models,
# next to the time of one decode step. Not a test: numbers depend on the machine.
#
#   benches/sampling.sh [LIBLLAMA.so] [ITERATIONS]
#
# LIBLLAMA.so defaults to $LIBLLAMA; without one only libengine.so is measured. llama.cpp's library
# comes from benches/llama-cpp.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

libllama="${1:-${LIBLLAMA:-}}"
iters="${2:-200}"

. benches/common.sh
build_bench sampling
run_bench "$libllama" "$iters"
