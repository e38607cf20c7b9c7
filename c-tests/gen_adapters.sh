#!/usr/bin/env bash
# The models and adapters test_lora uses, written at test time into OUT_DIR (never committed):
# tiny Qwen3 and Qwen3-MoE models in F32 (scripts/gen-models.py) with LoRA adapters and the models
# those adapters merged into (scripts/gen-adapters.py), and adapters for the first test model; a
# GLM-4.5 model without M-RoPE sections (test_embd_input: it takes no embeddings; test_save); a
# DeepSeek-V4 model (test_init_from_user: an architecture it refuses); an HRM-Text model (test_save:
# an architecture it does not save).
#
# Written once for the content of their inputs, then linked from ~/.cache/engine/generated/c-tests
# (scripts/generated.sh).
#
#   c-tests/gen_adapters.sh OUT_DIR MODEL_DIR
set -euo pipefail
out="$(realpath -m "$1")"
smollm2="$(realpath "$2")/SmolLM2-135M-Instruct.Q4_1.gguf"
cd "$(dirname "$0")/.."
. scripts/generated.sh

lora() { python3 scripts/gen-adapters.py lora "$@"; }
# write DIR: the files, into DIR.
write() {
    local out="$1"
    python3 scripts/gen-models.py "$smollm2" "$out" qwen3 qwen3moe glm4moe deepseek4 hrm_text >/dev/null
    # Attention and FFN, F16, with aLoRA invocation tokens; a second one on the FFN only, Q8_0, without
    # alpha.
    lora "$smollm2" "$out/smollm2-lora.gguf" --type f16 --alora 1,2,3
    lora "$smollm2" "$out/smollm2-lora-ffn.gguf" --type q8_0 --targets 'ffn_(up|down)\.weight' --rank 32 --alpha 0 --seed 2
    # Adapters whose effect is known: the same model with the adapter merged at scale 0.75.
    lora "$out/qwen3-f32.gguf" "$out/qwen3-lora.gguf" --merged "$out/qwen3-merged.gguf" --scale 0.75
    lora "$out/qwen3moe-f32.gguf" "$out/qwen3moe-lora.gguf" --seed 3 --rank 32 \
        --targets 'ffn_(up|down|gate)_exps|attn_q\.|token_embd' \
        --merged "$out/qwen3moe-merged.gguf" --scale 0.75
    # Of a type ggml has no matrix product for.
    lora "$smollm2" "$out/smollm2-lora-f64.gguf" --type f64 --targets 'blk\.0\.attn_q\.weight'
    # An adapter that claims SmolLM2's architecture but has Qwen3's shapes.
    lora "$out/qwen3-f32.gguf" "$out/qwen3-as-llama.gguf" --arch llama
}

rm -rf "$out"
generate c-tests "$out" write -- c-tests/gen_adapters.sh scripts/gen-models.py scripts/gen-adapters.py "$smollm2"
