#!/usr/bin/env bash
# Install what building needs on a fresh Debian machine, only when missing:
# cmake and a C/C++ compiler (ggml is built with CMake), libclang (for the ggml bindings), python3 and
# pkg-config (the tests use them).
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(build-essential)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)

if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# libclang for Python (a PyPI wheel with its own libclang.so): the ABI check reads llama.h with it.
if ! python3 -c 'import clang.cindex' >/dev/null 2>&1; then
    echo "installing: libclang (Python, from PyPI)" >&2
    # A Debian-managed python3 refuses plain installs (PEP 668); this package touches nothing of it.
    python3 -m pip install --quiet libclang==18.1.1 >&2 \
        || python3 -m pip install --quiet --break-system-packages libclang==18.1.1 >&2
fi

# gguf and numpy (PyPI): scripts/gen-models.py writes the tiny models of the architectures no small
# real model exists for.
if ! python3 -c 'import gguf, numpy' >/dev/null 2>&1; then
    echo "installing: gguf, numpy (Python, from PyPI)" >&2
    python3 -m pip install --quiet gguf==0.17.1 numpy >&2 \
        || python3 -m pip install --quiet --break-system-packages gguf==0.17.1 numpy >&2
fi

# ggml's source (llama.cpp 0.3.36's), which the build needs before cargo runs.
"$(dirname "$0")/fetch-ggml.sh"
