#!/usr/bin/env bash
# Print the path of llama.cpp's libllama.so for the benchmarks: llama.cpp 0.3.36 built from the
# pinned sdist for this CPU by scripts/llama-cpp.sh, in a cache outside the repository, with its
# multimodal library libmtmd beside it (benches/compare.sh runs libmtmd on both libraries).
set -euo pipefail
echo "$("$(dirname "$0")/../scripts/llama-cpp.sh" llama mtmd)/libllama.so"
