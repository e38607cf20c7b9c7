#!/usr/bin/env bash
# Print the path of llama.cpp's libllama.so for the benchmarks: llama.cpp 0.3.36 built from the
# pinned sdist for this CPU by scripts/llama-cpp.sh, in a cache outside the repository.
set -euo pipefail
echo "$("$(dirname "$0")/../scripts/llama-cpp.sh" llama)/libllama.so"
