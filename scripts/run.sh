#!/usr/bin/env bash
# The main job: build the library and the examples, fetch the default model if needed, and generate
# text from a prompt with it (greedy unless --temp is given).
# Usage: scripts/run.sh [-p PROMPT] [-n N_PREDICT] [--temp T] [--seed S] [-m MODEL.gguf]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/fetch-models.sh smollm2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target simple >/dev/null
model="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ $# -eq 0 ]; then
    set -- -p "The capital of France is" -n 64
fi
ENGINE_LOG_LEVEL="${ENGINE_LOG_LEVEL:-warn}" exec build/examples/c/simple -m "$model" "$@"
