#!/bin/sh
# No AMX instruction in the ggml libraries beside libengine.so (build.rs leaves AMX out: ggml
# 0.25.3's AMX kernels crash on the CPUs that have it, issue #45). A probe compiled with AMX first
# shows that this objdump names AMX instructions, so a count of 0 means none.
# Usage: no_amx.sh DIR
set -eu
dir="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
amx='tilezero|tileloadd|tileloaddt1|tilestored|tilerelease|ldtilecfg|sttilecfg|tdpbssd|tdpbsud|tdpbusd|tdpbuud|tdpbf16ps|tdpfp16ps'
printf '#include <immintrin.h>\nvoid probe(void) { _tile_zero(0); _tile_release(); }\n' >"$tmp/probe.c"
cc -O2 -mamx-tile -c "$tmp/probe.c" -o "$tmp/probe.o"
if ! objdump -d "$tmp/probe.o" | grep -qwE "$amx"; then
    echo "objdump does not name AMX instructions: the check would prove nothing"
    exit 1
fi
status=0 libs=0
for lib in "$dir"/libggml*.so; do
    libs=$((libs + 1))
    n="$(objdump -d "$lib" | grep -cwE "$amx" || true)"
    echo "$(basename "$lib"): $n AMX instructions"
    [ "$n" -eq 0 ] || status=1
done
[ "$libs" -gt 0 ] || { echo "no ggml library in $dir"; exit 1; }
exit "$status"
