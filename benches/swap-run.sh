#!/usr/bin/env bash
# swap-run.sh LIBLLAMA PROGRAM ARGS...: run PROGRAM, which loads libllama.so.0 (a program or library
# of llama.cpp's build, such as libmtmd), with LIBLLAMA as its libllama.so.0: llama.cpp's own, or
# libengine.so in its place. The other libraries come from PROGRAM's run path (llama.cpp's build),
# so both runs share them, as programs do in an install where libengine.so replaces libllama.so.
set -euo pipefail
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
ln -s "$(readlink -f "$1")" "$dir/libllama.so.0"
shift
LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
