#!/usr/bin/env bash
# The portable build (docs/building.md): builds libengine.so with `--features portable` into
# target/portable, with three of ggml's CPU variants (x64: SSE2, haswell: AVX2, skylakex: AVX-512;
# ENGINE_CPU_VARIANTS, to keep the suite fast), then checks that
# - the x64 and haswell variants hold no AVX-512 instruction (EVEX-encoded), and skylakex does
#   (which shows the check can see them), and no library holds AMX (no_amx.sh);
# - a program decodes with it, and the engine reports loading the best of the three for this CPU;
# - its greedy text equals the native build's.
# Usage: portable_test.sh SOURCE_DIR SIMPLE_EXAMPLE MODEL
set -euo pipefail
src="$1" simple="$2" model="$3"
cd "$src"
variants="x64 haswell skylakex"
# Without debug information: it changes no instruction, and doubles the Rust build's time.
CARGO_PROFILE_RELEASE_DEBUG=0 ENGINE_CPU_VARIANTS="$variants" cargo build --release --lib --no-default-features --features portable \
    --target-dir target/portable 2>&1 | tail -n 1
lib="$PWD/target/portable/release"
ln -sf libengine.so "$lib/libengine.so.0"

status=0
for v in $variants; do
    [ -f "$lib/libggml-cpu-$v.so" ] || { echo "missing: libggml-cpu-$v.so"; status=1; }
done
[ ! -e "$lib/libggml-cpu.so" ] || { echo "a portable build has a single CPU backend (libggml-cpu.so)"; status=1; }
[ ! -e "$lib/libggml-cpu-sapphirerapids.so" ] || { echo "the AMX variant was built"; status=1; }

# EVEX-encoded instructions (AVX-512): in 64-bit mode an instruction whose first byte after its
# prefixes is 0x62.
evex() {
    objdump -d "$1" 2>/dev/null | python3 -c '
import sys
prefixes = {"66", "67", "f2", "f3", "f0", "2e", "3e", "26", "36", "64", "65"}
n = 0
for line in sys.stdin:
    parts = line.rstrip("\n").split("\t")
    if len(parts) < 3 or not parts[0].strip().endswith(":"):
        continue  # not an instruction line, or the bytes of a long one continued
    code = [b for b in parts[1].split() if b not in prefixes]
    n += bool(code) and code[0] == "62"
print(n)'
}
for v in x64 haswell; do
    n="$(evex "$lib/libggml-cpu-$v.so")"
    echo "libggml-cpu-$v.so: $n AVX-512 instructions"
    [ "$n" -eq 0 ] || status=1
done
n="$(evex "$lib/libggml-cpu-skylakex.so")"
echo "libggml-cpu-skylakex.so: $n AVX-512 instructions"
[ "$n" -gt 0 ] || { echo "the AVX-512 check sees no AVX-512 even in the AVX-512 variant"; status=1; }
"$(dirname "$0")/no_amx.sh" "$lib" >/dev/null || { echo "an AMX instruction in the portable build"; status=1; }

# The best variant for this CPU, by the features ggml's x86 score asks of each.
has() { for f in "$@"; do grep -m1 '^flags' /proc/cpuinfo | grep -qw "$f" || return 1; done; }
expected=x64
has sse4_2 avx f16c fma avx2 bmi2 && expected=haswell
[ "$expected" = haswell ] && has avx512f avx512cd avx512vl avx512dq avx512bw && expected=skylakex

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
LD_LIBRARY_PATH="$lib" ENGINE_LOG_LEVEL=info "$simple" -m "$model" -p "The capital of France is" -n 16 \
    >"$out/portable" 2>"$out/portable.log" || { echo "the portable build failed to decode:"; tail "$out/portable.log"; exit 1; }
chosen="$(grep -o "ggml's CPU backend for this CPU: .*" "$out/portable.log" || true)"
echo "${chosen:-no CPU variant reported}"
case "$chosen" in
    */libggml-cpu-"$expected".so) ;;
    *) echo "expected libggml-cpu-$expected.so"; status=1 ;;
esac
ENGINE_LOG_LEVEL=warn "$simple" -m "$model" -p "The capital of France is" -n 16 >"$out/native" 2>/dev/null
if cmp -s "$out/portable" "$out/native"; then
    echo "greedy text identical to the native build's: $(tr '\n' ' ' <"$out/portable" | cut -c1-100)"
else
    echo "the portable build's text differs from the native build's:"
    diff "$out/native" "$out/portable" | head -n 6
    status=1
fi
exit "$status"
