#!/usr/bin/env bash
# llama-cpp-python 0.3.36's own test suite (the sdist's tests/, unmodified) run with llama.cpp's
# libllama.so and then with libengine.so in its place, through the package's Python sources from
# the same sdist (LLAMA_CPP_LIB_PATH picks the library). The models the tests fetch from the
# Hugging Face hub are replaced, by a conftest.py beside the tests, with local ones of the same
# architecture: SmolLM2 for stories15M, llama.cpp's dummy models (`test-llama-archs -o`) for
# Qwen3.5-0.8B, Mamba-130m and Falcon-H1-Tiny, a generated BERT with bge's vocabulary for
# bge-small. Prints one table: per test its result on each library. Not part of the test suite;
# see the README. Logs: target/python-tests/.
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

scripts/fetch-models.sh
bin="$(scripts/llama-cpp.sh llama test-llama-archs)" || exit 1
cargo build --release --lib || exit 1
python3 -m pip install -q pytest scipy huggingface_hub diskcache jinja2 numpy typing-extensions gguf || exit 1

sdist="${ENGINE_DOWNLOAD_DIR:-$HOME/.cache/engine/downloads}/llama_cpp_python-0.3.36.tar.gz"
out="$PWD/target/python-tests"
rm -rf "$out"
mkdir -p "$out/swap" "$out/zoo"
tar -xzf "$sdist" -C "$out" --strip-components=1 llama_cpp_python-0.3.36/tests llama_cpp_python-0.3.36/llama_cpp \
    llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf || exit 1
# The package loads ggml's library from its own lib/ directory; llama.cpp's build serves both runs.
mkdir -p "$out/llama_cpp/lib"
ln -s "$bin/libggml.so" "$out/llama_cpp/lib/libggml.so"
swap_in "$out/swap" "$bin"
"$bin/test-llama-archs" -o "$out/zoo" >"$out/test-llama-archs.log" 2>&1
python3 scripts/gen-models.py "$models/SmolLM2-135M-Instruct.Q4_1.gguf" "$out/gen" bert >/dev/null || exit 1

cat >"$out/tests/conftest.py" <<EOF
# Written by benches/python-tests.sh: the hub's models replaced with local ones of the same
# architecture (the tests themselves are llama-cpp-python's, unchanged).
import huggingface_hub

LOCAL = {
    "Qwen3.5-0.8B-Q8_0.gguf": "$out/zoo/qwen35-dense.gguf",
    "tinyllamas/stories15M-q4_0.gguf": "$models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "bge-small-en-v1.5-q4_k_m.gguf": "$out/gen/bert-f32.gguf",
    "mamba-130m-hf.Q2_K.gguf": "$out/zoo/mamba-dense.gguf",
    "Falcon-H1-Tiny-90M-Instruct-Q2_K.gguf": "$out/zoo/falcon-h1-dense.gguf",
}


def local_download(repo_id, filename, *args, **kwargs):
    return LOCAL[filename]


huggingface_hub.hf_hub_download = local_download
EOF

for lib in llama engine; do
    dir="$bin"
    [ "$lib" = engine ] && dir="$out/swap"
    (cd "$out" && LLAMA_CPP_LIB_PATH="$dir" PYTHONPATH="$out" timeout 3600 \
        python3 -m pytest -q -rA -p no:cacheprovider tests >"$out/$lib.log" 2>&1)
    grep -E '^(PASSED|FAILED|ERROR|SKIPPED) ' "$out/$lib.log" | sed -E 's/ - .*//' | awk '{print $2, $1}' |
        sort >"$out/$lib.results"
done

printf '%-70s%-10s%-10s\n' test llama.cpp engine
join -a 1 -a 2 -e missing -o 0,1.2,2.2 "$out/llama.results" "$out/engine.results" |
    awk '{printf "%-70s%-10s%-10s\n", $1, $2, $3}'
echo "$(join -a 1 -a 2 -e missing -o 0,1.2,2.2 "$out/llama.results" "$out/engine.results" | awk '$2 != $3' | wc -l) tests differ"
