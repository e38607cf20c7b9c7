#!/usr/bin/env bash
# Multimodal models through llama.cpp's programs and llama-cpp-python, on libllama.so and with
# libengine.so in its place: each generated projector pair (scripts/gen-mmproj.py) with a JPEG and
# a PNG picture, or a sound, through llama-mtmd-cli, llama-server (--mmproj, the picture sent in
# an OpenAI-style chat request) and llama-cpp-python's chat handler (MTMDChatHandler), greedy. One
# line per pair and program: identical, or the two texts. (llama.cpp's programs print through
# common's log, whose last lines can be lost when the program ends while its log thread lags
# behind, on either library: a truncated text on a loaded machine is that.) (benches/compare.sh compares the logits
# of every step through libmtmd bit for bit; this checks the programs people run.) Not part of the
# test suite: building llama-server and llama-mtmd-cli takes a while. Exits 1 if anything differs.
# Usage: benches/mtmd.sh [PAIR...]   (default: every pair)     Outputs: target/mtmd/
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

bin="$(scripts/llama-cpp.sh llama mtmd llama-mtmd-cli llama-server)" || exit 1
cargo build --release --lib || exit 1
python3 -m pip install -q jinja2 numpy typing-extensions diskcache || exit 1

out="$PWD/target/mtmd"
swap="$out/swap"
rm -rf "$out"
mkdir -p "$out/python"
# libmtmd and the programs find libllama.so.0 through LD_LIBRARY_PATH before their run path.
swap_in "$swap" "$bin"
tar -xzf "${ENGINE_DOWNLOAD_DIR:-$HOME/.cache/engine/downloads}/llama_cpp_python-0.3.36.tar.gz" -C "$out/python" \
    --strip-components=1 llama_cpp_python-0.3.36/llama_cpp || exit 1
python3 scripts/gen-mmproj.py "$out/models" "$@" >"$out/pairs.tsv" || exit 1
jpeg="$(dirname "$bin")/../src/tools/mtmd/test-1.jpeg"
sound="$(dirname "$bin")/../src/tools/mtmd/test-2.mp3"
png="$out/models/picture.png"
# The chat request both the server and llama-cpp-python get: the picture or sound, then the question.
cat >"$out/python/chat_request.py" <<'EOF'
import base64


def messages(kind, path):
    data = base64.b64encode(open(path, "rb").read()).decode()
    if kind == "audio":
        part = {"type": "input_audio", "input_audio": {"data": data, "format": path.rsplit(".", 1)[1]}}
    else:
        mime = "image/png" if path.endswith(".png") else "image/jpeg"
        part = {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    return [{"role": "user", "content": [part, {"type": "text", "text": "Describe it."}]}]
EOF

status=0
# same NAME FILE_A FILE_B: one line, identical or the two outputs.
same() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then
        echo "$1: identical: $(head -c 120 "$2" | tr '\n' ' ')"
    else
        status=1
        echo "$1: DIFFERENT (or empty)"
        echo "    llama.cpp: $(head -c 300 "$2" | tr '\n' ' ')"
        echo "    engine:    $(head -c 300 "$3" | tr '\n' ' ')"
    fi
}

# cli LIBDIR OUT MODEL MMPROJ KIND MEDIA: llama-mtmd-cli's generated text.
cli() {
    LD_LIBRARY_PATH="$1" "$bin/llama-mtmd-cli" -m "$3" --mmproj "$4" "--$5" "$6" -p "Describe it." -n 24 \
        --temp 0 --seed 1 -t 2 -c 4096 --no-warmup >"$2" 2>"$2.log" || echo "exit status $?" >>"$2"
}

# server LIBDIR OUT MODEL MMPROJ KIND MEDIA: llama-server's answer to a chat request carrying MEDIA.
server() {
    local port=$((20000 + RANDOM % 20000))
    LD_LIBRARY_PATH="$1" "$bin/llama-server" -m "$3" --mmproj "$4" --port "$port" -t 2 -c 4096 -np 1 \
        --no-warmup >"$2.log" 2>&1 &
    local pid=$!
    PYTHONPATH="$out/python" python3 - "$port" "$5" "$6" >"$2" <<'EOF'
import json, sys, time, urllib.request
from chat_request import messages
port, kind, path = sys.argv[1:]
body = {"messages": messages(kind, path), "temperature": 0, "max_tokens": 24, "seed": 1}
for _ in range(600):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        break
    except Exception:
        time.sleep(0.2)
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=600))["choices"][0]["message"]["content"])
EOF
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# handler LIBDIR OUT MODEL MMPROJ KIND MEDIA: llama-cpp-python's MTMDChatHandler's answer. The
# package loads libllama.so from LLAMA_CPP_LIB_PATH and libmtmd.so from MTMD_CPP_LIB; libmtmd finds
# libllama.so.0 through LD_LIBRARY_PATH.
handler() {
    LLAMA_CPP_LIB_PATH="$1" MTMD_CPP_LIB="$bin" LD_LIBRARY_PATH="$1" PYTHONPATH="$out/python" \
        python3 - "$3" "$4" "$5" "$6" >"$2" 2>"$2.log" <<'EOF' || echo "exit status $?" >>"$2"
import sys
from llama_cpp import Llama
from llama_cpp.llama_chat_format import MTMDChatHandler
from chat_request import messages
model, mmproj, kind, path = sys.argv[1:]
llm = Llama(model_path=model, chat_handler=MTMDChatHandler(clip_model_path=mmproj, verbose=False, use_gpu=False),
            n_ctx=4096, n_threads=2, verbose=False, seed=1)
answer = llm.create_chat_completion(messages=messages(kind, path), temperature=0, max_tokens=24, seed=1)
print(answer["choices"][0]["message"]["content"])
EOF
}

while IFS=$'\t' read -r pair text mmproj kind; do
    media=("$jpeg" "$png")
    programs=(cli server handler)
    if [ "$kind" = audio ]; then
        media=("$sound")
        programs=(cli server)
        echo "$pair: llama-cpp-python not run (its MTMDChatHandler refuses a model without vision)"
    fi
    for m in "${media[@]}"; do
        for program in "${programs[@]}"; do
            o="$out/$pair-$(basename "$m")-$program"
            "$program" "$bin" "$o.llama" "$text" "$mmproj" "$kind" "$m"
            "$program" "$swap" "$o.engine" "$text" "$mmproj" "$kind" "$m"
            same "$pair, $(basename "$m"), $program" "$o.llama" "$o.engine"
        done
    done
done <"$out/pairs.tsv"
exit "$status"
