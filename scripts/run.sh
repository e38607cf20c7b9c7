#!/usr/bin/env bash
# The main job: build the library and the examples, fetch the default model if needed, and run it.
# Usage: scripts/run.sh [model_info arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/fetch-models.sh smollm2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target model_info >/dev/null
model="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
exec build/examples/c/model_info "${@:-$model}"
