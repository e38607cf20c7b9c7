#!/usr/bin/env bash
# The ggml that llama.cpp 0.3.36 ships (ggml 0.25.3, the one the pinned llama.h includes), taken
# from the llama-cpp-python 0.3.36 sdist on PyPI: downloaded once into a cache, sha256-checked, and
# its ggml directory extracted into .ggml/ggml, which .cargo/config.toml hands to qts_ggml_sys as
# GGML_SRC. The pinned llama.h itself goes to .ggml/pinned/llama.h: the ABI check holds our header
# against it. llama.cpp's tokenizer test vocabularies (models/ggml-vocab-*.gguf with their .inp/.out
# cases) go to .ggml/vocab for the vocabulary tests. Nothing of it is committed (.ggml is ignored by
# git). See vendor/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
dest=.ggml
name="llama_cpp_python-$version"

if [ "$(cat "$dest/SOURCE" 2>/dev/null)" = "$sha256" ] && [ -f "$dest/ggml/include/ggml.h" ] \
    && [ -f "$dest/pinned/llama.h" ] && [ -f "$dest/vocab/ggml-vocab-bert-bge.gguf.out" ]; then
    exit 0
fi

cache="${ENGINE_DOWNLOAD_DIR:-$HOME/.cache/engine/downloads}"
sdist="$cache/$name.tar.gz"
if ! echo "$sha256  $sdist" | sha256sum --check --status 2>/dev/null; then
    echo "downloading the llama-cpp-python $version sdist from PyPI (for its ggml)" >&2
    mkdir -p "$cache"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$tmp" >&2
    if ! echo "$sha256  $tmp/$name.tar.gz" | sha256sum --check --status; then
        echo "fetch-ggml: $name.tar.gz does not have the expected sha256 $sha256" >&2
        exit 1
    fi
    mv "$tmp/$name.tar.gz" "$sdist"
fi

rm -rf "$dest"
mkdir -p "$dest"
tar -xzf "$sdist" -C "$dest" --strip-components=3 "$name/vendor/llama.cpp/ggml"
mkdir -p "$dest/pinned" "$dest/vocab"
tar -xzf "$sdist" -C "$dest/vocab" --strip-components=4 --wildcards "$name/vendor/llama.cpp/models/ggml-vocab-*"
tar -xzf "$sdist" -O "$name/vendor/llama.cpp/include/llama.h" >"$dest/pinned/llama.h"
# The sdist leaves out ggml's pkg-config template, which ggml's CMakeLists configures when it is the
# top-level project (as under qts_ggml_sys); we do not use the result.
printf 'Name: ggml\nDescription: ggml from llama-cpp-python %s\nVersion: @GGML_VERSION@\n' "$version" >"$dest/ggml/ggml.pc.in"
echo "$sha256" >"$dest/SOURCE"
