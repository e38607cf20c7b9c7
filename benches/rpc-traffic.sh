#!/usr/bin/env bash
# Bytes a model split over two ggml RPC servers sends over the network: each server behind a
# counting proxy on loopback, llama-completion (-ngl 99, no warmup, --fit off) on libengine.so and
# on llama.cpp's libllama.so. Three runs per library separate the costs: loading (weights
# uploaded), per prompt token (a 264-token prompt against an 8-token one) and per generated token
# (33 tokens against 1). Not a test; see docs/design-notes.md for the numbers and what they mean.
#   benches/rpc-traffic.sh [MODEL.gguf]   (default: SmolLM2)
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

bin="$(scripts/llama-cpp.sh llama llama-completion ggml-rpc-server)" || exit 1
cargo build --release --lib || exit 1
model="${1:-$models/SmolLM2-135M-Instruct.Q4_1.gguf}"
out="$PWD/target/rpc-traffic"
rm -rf "$out"
mkdir -p "$out"
swap_in "$out/swap" "$bin"

# A proxy per server: forwards 1815N to 1816N and writes the bytes it has carried so far (to the
# server, from it) to $out/bytes-N whenever a connection ends.
cat >"$out/proxy.py" <<'PY'
import asyncio, sys
listen, target, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
total = [0, 0]
async def pipe(r, w, way):
    try:
        while data := await r.read(1 << 16):
            total[way] += len(data)
            w.write(data)
            await w.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        w.close()
async def handle(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(cr, sw, 0), pipe(sr, cw, 1))
    open(path, "w").write(f"{total[0]} {total[1]}")
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY

pids=()
for i in 0 1; do
    "$bin/ggml-rpc-server" -H 127.0.0.1 -p "1816$i" -t 1 >"$out/server-$i.log" 2>&1 &
    pids+=($!)
    python3 "$out/proxy.py" "1815$i" "1816$i" "$out/bytes-$i" &
    pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
sleep 1

short="The capital of France is"
long="$(printf 'The river carried small boats past the old mill while children counted them. %.0s' $(seq 1 16))"
echo 0 0 >"$out/bytes-0"
echo 0 0 >"$out/bytes-1"
carried() { # bytes to and from both servers so far ("TO FROM")
    local a b c d
    read -r a b <"$out/bytes-0"
    read -r c d <"$out/bytes-1"
    echo "$((a + c)) $((b + d))"
}
# run LIBDIR PROMPT N: bytes sent to and received from both servers in one run ("TO FROM").
run() {
    local t0 f0 t1 f1
    read -r t0 f0 <<<"$(carried)"
    LD_LIBRARY_PATH="$1" "$bin/llama-completion" -m "$model" -t 2 -p "$2" -n "$3" --temp 0 -no-cnv \
        --rpc 127.0.0.1:18150,127.0.0.1:18151 -ngl 99 --no-warmup --fit off >/dev/null 2>&1
    sleep 0.5
    read -r t1 f1 <<<"$(carried)"
    echo "$((t1 - t0)) $((f1 - f0))"
}
printf '%-10s %-22s %-22s %-22s\n' library "one run (to, from)" "per generated token" "per prompt token"
for lib in engine llama.cpp; do
    dir="$out/swap"
    [ "$lib" = llama.cpp ] && dir="$bin"
    read -r t0 f0 <<<"$(run "$dir" "$short" 1)"
    read -r t1 f1 <<<"$(run "$dir" "$short" 33)"
    read -r t2 f2 <<<"$(run "$dir" "$long" 1)"
    # 32 more generated tokens; a prompt 256 tokens longer (~264 against ~8).
    printf '%-10s %-22s %-22s %-22s\n' "$lib" "$t0, $f0" "$(((t1 - t0) / 32)), $(((f1 - f0) / 32))" \
        "$(((t2 - t0) / 256)), $(((f2 - f0) / 256))"
done
