#!/usr/bin/env bash
# llama.cpp's own programs on libllama.so and, unchanged, with libengine.so put in its place: each
# runs twice with the same arguments, the outputs are compared with timings, addresses and other
# run-to-run noise taken out, and one line per program says whether they are identical. Not part
# of the test suite (building the programs takes a while); see the README.
# Usage: benches/clients.sh [PROGRAM...]   (default: all)     Output and diffs: target/clients/
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

targets=(llama-simple llama-completion llama-cli llama-perplexity llama-embedding llama-parallel
    llama-lookup llama-speculative-simple llama-retrieval llama-eval-callback llama-imatrix
    llama-batched llama-bench llama-server test-save-load-state ggml-rpc-server llama-quantize llama-finetune)
scripts/fetch-models.sh
bin="$(scripts/llama-cpp.sh "${targets[@]}")" || exit 1
cargo build --release --lib || exit 1

smollm2="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
gemma3="$models/gemma-3-270m-q4_k_m.gguf"
out="$PWD/target/clients"
swap="$out/swap"
rm -rf "$out"
# The programs find libllama.so.0 through LD_LIBRARY_PATH before their own run path.
swap_in "$swap" "$bin"

# A text for perplexity, retrieval and lookups: prose, reproducible.
text="$out/text.txt"
python3 - "$text" <<'EOF'
import sys
words = ("the river carried small boats past the old mill while children counted them from the bridge "
         "and their grandmother told of winters when the water froze solid and carts crossed where boats "
         "now sail").split()
lines = [" ".join(words[(i * 7) % len(words):] + words[:(i * 7) % len(words)]).capitalize() + "." for i in range(120)]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF

# Take out what differs between any two runs: timestamps, timings, speeds, memory addresses,
# thread ids, and the library's own log lines (not the program's output). A timestamp inside a
# line starts a new one: common's log sometimes glues an entry to one left without its newline.
normalize() {
    sed -E -e 's/^[0-9]+\.[0-9]{2}\.[0-9]{3}\.[0-9]{3} [IWED] //' \
        -e 's/[0-9]\.[0-9]{2}\.[0-9]{3}\.[0-9]{3} [IWED] /\n/g' "$1" | sed -E \
        -e 's/\x08//g' \
        -e 's/[0-9.]+ minutes/<t> minutes/g' \
        -e 's/as of [0-9-]+ [0-9:]+/as of <date>/' \
        -e 's/[0-9.]+ seconds per pass - ETA.*$/<t> seconds per pass/' \
        -e 's/[0-9]+(\.[0-9]+)? (ms|us|s)( per|,|\)| \/)/<t> \2\3/g' \
        -e 's/ *[0-9]+(\.[0-9]+)? (tokens|t)\/s/ <speed>/g' \
        -e 's/0x[0-9a-f]{6,}/<addr>/g' \
        -e 's/(time|took|elapsed)[^|]*$/\1 <t>/' \
        -e 's/"(t_[a-z_]+|[a-z_]+_ms|[a-z_]+_per_second|[a-z_]+_per_token_ms)": ?[0-9.e+-]+/"\1": <t>/g' \
        -e 's/"(created|id_slot|id_task|id)": ?[0-9]+/"\1": <n>/g' \
        -e 's/"id": ?"[A-Za-z0-9-]+"/"id": <id>/g' \
        -e 's/ in +[0-9.]+ seconds/ in <t> seconds/g' \
        -e 's/(t_[a-z_]+) = [0-9.]+ ms/\1 = <t> ms/g' \
        -e 's/~?(llama_context|load|split_equal|state_read_data|state_seq_set_data|opt_init): .*$//' \
        -e 's/ t=[0-9:]+ ETA=[0-9:]+//g' \
        -e 's/\.*repack: .*$//' \
        -e 's/Loading model\.\.\. [-|\\/ ]*/Loading model... /' \
        -e 's/[0-9.]+ tokens per second/<speed>/g' \
        -e 's/control-looking token.*$//' |
        # llama_version() names the library; each library words its reports of metadata overrides
        # (llama.cpp names only the keys its loader reads).
        grep -vE '^version: [0-9.]+-[a-z]+ \(build|^validate_override: Using metadata override|^model: overriding ' |
        grep -vE '^(llama_|load|print_info|llm_load|graph_|sched_|common_perf|init:|main: (build|llama threadpool)|system_info|create_tensor|init_tokenizer|done_getting_tensors|set_abort_callback|resolve_fused_ops|decode:)|^\s*$|^\.+$|load time|sample time|eval time|total time|graphs reused|\| +memory breakdown|MiB' || true
}

printf '%-32s %s\n' "program" "result"
# run NAME TIMEOUT ARGS...: the program with ARGS on both libraries. Its input is $feed followed by
# an input that stays open until the timeout ends the program (for programs that ask for more
# input until killed), or none.
run() {
    local name="$1" secs="$2" prog="$3"
    shift 3
    local dir="$out/$name"
    mkdir -p "$dir"
    # The input stays open past the timeout: a program that saw its end first would race the kill.
    feed_input() { if [ -n "${feed:-}" ]; then printf '%s\n' "$feed"; sleep "$((secs + 5))"; fi; }
    local rc_ref rc_eng try
    for try in 1 2 3; do
        (cd "$dir" && feed_input | timeout "$secs" "$bin/$prog" "$@" >ref.out 2>ref.err)
        rc_ref=$?
        (cd "$dir" && feed_input | LD_LIBRARY_PATH="$swap" timeout "$secs" "$bin/$prog" "$@" >eng.out 2>eng.err)
        rc_eng=$?
        # With `retry_lost` set: common's asynchronous log can lose a fast program's output at exit,
        # on either library; run both again while exactly one of them printed nothing.
        local printed_ref=0 printed_eng=0
        [ -s "$dir/ref.out" ] && printed_ref=1
        [ -s "$dir/eng.out" ] && printed_eng=1
        [ -n "${retry_lost:-}" ] && [ "$printed_ref" != "$printed_eng" ] || break
    done
    compare "$name" "$dir" "$rc_ref" "$rc_eng"
}

# compare NAME DIR RC_REF RC_ENG: one result line.
compare() {
    local name="$1" dir="$2" rc_ref="$3" rc_eng="$4" verdict
    for side in ref eng; do
        cat "$dir/$side.out" "$dir/$side.err" >"$dir/$side.all" 2>/dev/null
        normalize "$dir/$side.all" >"$dir/$side.norm"
    done
    if ! diff -q "$dir/ref.norm" "$dir/eng.norm" >/dev/null; then
        diff "$dir/ref.norm" "$dir/eng.norm" >"$dir/diff.txt"
        verdict="DIFFERS ($(grep -c '^[<>]' "$dir/diff.txt") lines; $dir/diff.txt)"
    elif [ "$rc_ref" != "$rc_eng" ]; then
        verdict="DIFFERS (exit $rc_eng, llama.cpp $rc_ref)"
    else
        verdict="identical (exit $rc_ref)"
    fi
    if grep -qiE 'not implemented|panicked' "$dir/eng.err" 2>/dev/null; then
        verdict="$verdict; engine logged: $(grep -iE -m1 'not implemented|panicked' "$dir/eng.err")"
    fi
    printf '%-32s %s\n' "$name" "$verdict"
}

want() { # want NAME: whether NAME was asked for (all when none were)
    [ ${#selected[@]} -eq 0 ] && return 0
    local s
    for s in "${selected[@]}"; do [[ "$1" == "$s"* ]] && return 0; done
    return 1
}
selected=("$@")

long_prompt="$(head -c 5000 "$text" | tr '\n' ' ')"
for m in smollm2 gemma3; do
    model="${!m}"
    common=(-m "$model" -t 2 --seed 42)
    want llama-simple && run "llama-simple/$m" 300 llama-simple -m "$model" -n 32 "$long_prompt"
    want llama-completion && run "llama-completion/$m/greedy" 300 llama-completion "${common[@]}" \
        -p "The capital of France is" -n 48 --temp 0 -no-cnv
    want llama-completion && run "llama-completion/$m/seeded" 300 llama-completion "${common[@]}" \
        -p "Once upon a time" -n 48 -no-cnv
    # The whole text as the prompt (about 4,400 tokens) in ubatches of 128: Gemma 3's sliding layers
    # keep 768 cells here (common's swa_full false), taken again as the window passes them.
    want llama-completion && run "llama-completion/$m/long" 600 llama-completion "${common[@]}" \
        -f "$text" -c 8192 -ub 128 -n 32 --temp 0 -no-cnv
    want llama-cli && run "llama-cli/$m" 300 llama-cli "${common[@]}" -p "What is the capital of France?" \
        -n 32 --temp 0 -st
    want llama-perplexity && run "llama-perplexity/$m" 600 llama-perplexity "${common[@]}" -f "$text" -c 128 \
        --chunks 4 -b 128
    # KL divergence against llama.cpp's own logits (the base file is written by llama.cpp).
    if want llama-perplexity; then
        "$bin/llama-perplexity" "${common[@]}" -f "$text" -c 128 --chunks 4 -b 128 \
            --kl-divergence-base "$out/kld-base-$m.bin" >/dev/null 2>&1 </dev/null
        run "llama-perplexity/$m/kl-divergence" 600 llama-perplexity "${common[@]}" -c 128 --chunks 4 -b 128 \
            --kl-divergence-base "$out/kld-base-$m.bin" --kl-divergence
    fi
    want llama-embedding && run "llama-embedding/$m" 300 llama-embedding "${common[@]}" \
        -p "The capital of France is Paris." --pooling mean
    want llama-parallel && run "llama-parallel/$m" 600 llama-parallel "${common[@]}" -np 3 -ns 6 -n 32 --temp 0
    want llama-lookup && run "llama-lookup/$m" 300 llama-lookup "${common[@]}" -p "$long_prompt" -n 32 --temp 0 \
        -c 4096
    want llama-speculative-simple && run "llama-speculative-simple/$m" 300 llama-speculative-simple \
        "${common[@]}" -md "$model" --spec-type draft-simple -p "The capital of France is" -n 32 --temp 0
    # llama-retrieval asks for queries until killed (at end of input it loops): one query, then it
    # waits for the next until the timeout.
    want llama-retrieval && feed="Who counted the boats?" run "llama-retrieval/$m" 60 llama-retrieval \
        "${common[@]}" --context-file "$text" --chunk-size 200 -c 512 --pooling mean
    want llama-eval-callback && run "llama-eval-callback/$m" 300 llama-eval-callback "${common[@]}" \
        -p "The capital" -n 1
    want llama-imatrix && run "llama-imatrix/$m" 600 llama-imatrix "${common[@]}" -f "$text" -c 128 --chunks 2 \
        -o "$out/imatrix-$m.gguf"
    want llama-batched && run "llama-batched/$m" 300 llama-batched "${common[@]}" -p "Hello, my name is" -np 4 \
        -n 32 -kvu
    want llama-bench && run "llama-bench/$m" 600 llama-bench -m "$model" -t 2 -p 64 -n 16 -r 1 -o jsonl
    want test-save-load-state && run "test-save-load-state/$m" 300 test-save-load-state "${common[@]}" \
        -p "The capital of France is" -n 16
done

# Embedding models: no small real BERT-style encoder is on PyPI, so the generated ones
# (scripts/gen-models.py), with the sentence embeddings llama-embedding prints. These run so fast
# that common's asynchronous log, which prints the embeddings, sometimes loses them at exit, on
# either library: such runs are repeated (retry_lost).
if want llama-embedding; then
    python3 scripts/gen-models.py "$smollm2" "$out/gen" bert nomic-bert >/dev/null
    for g in bert-f16 bert-q8_0 nomic-bert-f16; do
        retry_lost=1 run "llama-embedding/$g" 300 llama-embedding -m "$out/gen/$g.gguf" -t 2 \
            -p "The capital of France is Paris." --embd-normalize 2
    done
fi

# llama-server: the same requests to a server on each library.
server_case() { # server_case LIB_DIR_OR_EMPTY OUTFILE MODEL [EXTRA ARGS...]
    local port=18080 pid lib="$1" outfile="$2" model="$3"
    shift 3
    if [ -n "$lib" ]; then
        LD_LIBRARY_PATH="$lib" "$bin/llama-server" -m "$model" -t 2 -np 2 -c 4096 --port $port --host 127.0.0.1 \
            --slot-save-path "$out/slots" "$@" >"$outfile.log" 2>&1 &
    else
        "$bin/llama-server" -m "$model" -t 2 -np 2 -c 4096 --port $port --host 127.0.0.1 \
            --slot-save-path "$out/slots" "$@" >"$outfile.log" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 1 120); do
        curl -s "http://127.0.0.1:$port/health" | grep -q ok && break
        sleep 0.5
    done
    local u="http://127.0.0.1:$port"
    {
        curl -s "$u/completion" -d '{"prompt":"The capital of France is","n_predict":24,"temperature":0,"n_probs":3}'
        echo
        curl -s "$u/completion" -d '{"prompt":"Once upon a time","n_predict":24,"seed":7,"n_probs":2}'
        echo
        curl -s "$u/v1/chat/completions" -d '{"messages":[{"role":"user","content":"Name a color."}],"max_tokens":16,"temperature":0,"logprobs":true,"top_logprobs":2}'
        echo
        curl -s "$u/tokenize" -d '{"content":"Hello world! <|im_start|>"}'
        echo
        curl -s "$u/detokenize" -d '{"tokens":[1,2,3,100,1000]}'
        echo
        curl -s "$u/apply-template" -d '{"messages":[{"role":"user","content":"Hi"}]}'
        echo
        curl -s "$u/v1/embeddings" -d '{"input":"The capital of France is Paris."}'
        echo
        curl -s "$u/completion" -d '{"prompt":"List three fruits:","n_predict":32,"temperature":0,"json_schema":{"type":"array","items":{"type":"string"},"maxItems":3}}'
        echo
        curl -s "$u/slots/0?action=save" -d '{"filename":"slot0.bin"}'
        echo
        curl -s "$u/slots/0?action=restore" -d '{"filename":"slot0.bin"}'
        echo
        # Two completions at once on the two slots, decoded in the same batches. One request with
        # two prompts posts both tasks together; two separate requests would race (which batch
        # each prompt lands in changes llama.cpp's own results from run to run).
        curl -s "$u/completion" -d '{"prompt":["One plus one is","The sky is"],"n_predict":16,"temperature":0}'
        echo
    } >"$outfile" 2>&1
    kill $pid 2>/dev/null
    wait $pid 2>/dev/null
}
server_compare() { # server_compare NAME MODEL [EXTRA ARGS...]
    local name="$1" model="$2" dir="$out/$1"
    shift 2
    mkdir -p "$dir" "$out/slots"
    server_case "" "$dir/ref.out" "$model" "$@"
    : >"$dir/ref.err"
    server_case "$swap" "$dir/eng.out" "$model" "$@"
    grep -iE 'not implemented|panicked|error' "$dir/eng.out.log" >"$dir/eng.err" || true
    compare "$name" "$dir" 0 0
}
if want llama-server && command -v curl >/dev/null; then
    for m in smollm2 gemma3; do
        server_compare "llama-server/$m" "${!m}"
    done
fi

# LoRA adapters and control vectors (scripts/gen-adapters.py): llama-completion with one adapter,
# two at their own scales, a control vector over all layers and one scaled over a layer range;
# llama-server with two adapters, listing them and changing their scales through /lora-adapters
# and per request; llama-cpp-python's Llama(lora_path=...) (the package's sources from the sdist).
if want adapters; then
    adapters="$out/adapters"
    mkdir -p "$adapters"
    for m in smollm2 gemma3; do
        python3 scripts/gen-adapters.py lora "${!m}" "$adapters/$m-attn.gguf" --type f16 \
            --targets 'attn_(q|k|v|output)\.weight' >/dev/null
        python3 scripts/gen-adapters.py lora "${!m}" "$adapters/$m-ffn.gguf" --type q8_0 --rank 32 \
            --targets 'ffn_(gate|up|down)\.weight' --seed 2 >/dev/null
        python3 scripts/gen-adapters.py cvec "${!m}" "$adapters/$m-cvec.gguf" >/dev/null
        common=(-m "${!m}" -t 2 --seed 42 -p "The capital of France is" -n 48 --temp 0 -no-cnv)
        run "adapters/llama-completion/$m/lora" 300 llama-completion "${common[@]}" --lora "$adapters/$m-attn.gguf"
        run "adapters/llama-completion/$m/two-loras" 300 llama-completion "${common[@]}" \
            --lora-scaled "$adapters/$m-attn.gguf:0.5,$adapters/$m-ffn.gguf:1.5"
        run "adapters/llama-completion/$m/control-vector" 300 llama-completion "${common[@]}" \
            --control-vector "$adapters/$m-cvec.gguf"
        run "adapters/llama-completion/$m/control-vector-range" 300 llama-completion "${common[@]}" \
            --control-vector-scaled "$adapters/$m-cvec.gguf:2.5" --control-vector-layer-range 3 9
    done
    if command -v curl >/dev/null; then
        lora_server() { # lora_server LIB_DIR_OR_EMPTY OUTFILE
            local port=18090 pid
            LD_LIBRARY_PATH="${1:-${LD_LIBRARY_PATH:-}}" "$bin/llama-server" -m "$smollm2" -t 2 -c 2048 \
                --port $port --host 127.0.0.1 --lora "$adapters/smollm2-attn.gguf" \
                --lora-scaled "$adapters/smollm2-ffn.gguf:0.5" >"$2.log" 2>&1 &
            pid=$!
            for _ in $(seq 1 120); do
                curl -s "http://127.0.0.1:$port/health" | grep -q ok && break
                sleep 0.5
            done
            local u="http://127.0.0.1:$port" req='"prompt":"The capital of France is","n_predict":24,"temperature":0'
            {
                curl -s "$u/lora-adapters"; echo
                curl -s "$u/completion" -d "{$req}"; echo
                curl -s "$u/lora-adapters" -d '[{"id":0,"scale":0.25},{"id":1,"scale":0}]'; echo
                curl -s "$u/lora-adapters"; echo
                curl -s "$u/completion" -d "{$req}"; echo
                curl -s "$u/completion" -d "{$req,\"lora\":[{\"id\":1,\"scale\":2.0}]}"; echo
            } >"$2" 2>&1
            kill $pid 2>/dev/null
            wait $pid 2>/dev/null
        }
        dir="$out/adapters/llama-server"
        mkdir -p "$dir"
        lora_server "" "$dir/ref.out"
        : >"$dir/ref.err"
        lora_server "$swap" "$dir/eng.out"
        grep -iE 'not implemented|panicked|error' "$dir/eng.out.log" >"$dir/eng.err" || true
        compare "adapters/llama-server" "$dir" 0 0
    fi
    python3 -m pip install -q diskcache jinja2 numpy typing-extensions >/dev/null 2>&1
    py="$out/py"
    mkdir -p "$py/llama_cpp/lib"
    tar -xzf "${ENGINE_DOWNLOAD_DIR:-$HOME/.cache/engine/downloads}/llama_cpp_python-0.3.36.tar.gz" -C "$py" \
        --strip-components=1 llama_cpp_python-0.3.36/llama_cpp
    ln -sf "$bin/libggml.so" "$py/llama_cpp/lib/libggml.so"
    cat >"$py/lora.py" <<EOF
from llama_cpp import Llama
llm = Llama(model_path="$smollm2", lora_path="$adapters/smollm2-attn.gguf", lora_scale=0.75, n_ctx=512,
            n_threads=2, seed=42, verbose=False)
print(llm("The capital of France is", max_tokens=32, temperature=0)["choices"][0]["text"])
chat = llm.create_chat_completion(messages=[{"role": "user", "content": "Name a river."}], max_tokens=24,
                                  temperature=0)
print(chat["choices"][0]["message"]["content"])
EOF
    dir="$out/adapters/llama-cpp-python"
    mkdir -p "$dir"
    (cd "$py" && LLAMA_CPP_LIB_PATH="$bin" PYTHONPATH="$py" timeout 300 python3 lora.py >"$dir/ref.out" 2>"$dir/ref.err")
    rc_ref=$?
    (cd "$py" && LLAMA_CPP_LIB_PATH="$swap" PYTHONPATH="$py" timeout 300 python3 lora.py >"$dir/eng.out" 2>"$dir/eng.err")
    compare "adapters/llama-cpp-python" "$dir" "$rc_ref" "$?"
fi

# run_writing NAME PROGRAM ARGS...: PROGRAM with ARGS on both libraries, each run in its own empty
# folder writing the same file names (the log names them); the result holds the log, the exit code
# and a hash of every file written.
run_writing() {
    local name="$1" prog="$2" side lib rc rc_ref rc_eng
    shift 2
    local dir="$out/$name"
    for side in ref eng; do
        rm -rf "${dir:?}/$side.run"
        mkdir -p "$dir/$side.run"
        lib=""
        [ "$side" = eng ] && lib="$swap"
        (cd "$dir/$side.run" && LD_LIBRARY_PATH="$lib" timeout 600 "$bin/$prog" "$@" >"../$side.out" 2>"../$side.err")
        rc=$?
        [ "$side" = ref ] && rc_ref=$rc || rc_eng=$rc
        # What was written (llama.cpp leaves part of a file after some failures: not compared).
        [ "$rc" = 0 ] && (cd "$dir/$side.run" && sha256sum -- * >>"../$side.out" 2>/dev/null)
        rm -rf "${dir:?}/$side.run"
    done
    compare "$name" "$dir" "$rc_ref" "$rc_eng"
}

# llama-quantize: the same arguments on both libraries, each run in its own folder writing the same
# file name (the log names it); the result holds the log, the exit code and a hash of every file
# written. Requantizing the test models (K, IQ types with an importance matrix from llama.cpp's
# llama-imatrix, the options), a generated MoE model's experts, and refusals.
if want llama-quantize; then
    qdir="$out/llama-quantize"
    mkdir -p "$qdir"
    "$bin/llama-imatrix" -m "$smollm2" -f "$text" -c 128 --chunks 4 -t 2 -o "$qdir/smollm2.imatrix.gguf" \
        >"$qdir/imatrix.log" 2>&1
    python3 scripts/gen-models.py "$smollm2" "$qdir" qwen3moe >/dev/null
    # quantize NAME ARGS...: llama-quantize ARGS with out.gguf for the output, on both libraries.
    quantize() {
        local name="$1"
        shift
        run_writing "llama-quantize/$name" llama-quantize "$@"
    }
    im="$qdir/smollm2.imatrix.gguf"
    quantize smollm2/q4_k_m --allow-requantize "$smollm2" out.gguf Q4_K_M 2
    quantize smollm2/iq2_xxs --allow-requantize --imatrix "$im" "$smollm2" out.gguf IQ2_XXS 2
    quantize smollm2/iq3_xxs --allow-requantize --imatrix "$im" "$smollm2" out.gguf IQ3_XXS 2
    quantize smollm2/iq1_m --allow-requantize --imatrix "$im" "$smollm2" out.gguf IQ1_M 2
    quantize smollm2/q2_k_s-no-imatrix --allow-requantize "$smollm2" out.gguf Q2_K_S 2
    quantize smollm2/pure-output-embd --allow-requantize --pure --output-tensor-type q8_0 \
        --token-embedding-type q5_0 "$smollm2" out.gguf Q3_K_S 2
    quantize smollm2/tensor-types --allow-requantize --tensor-type attn_v=q8_0 --tensor-type ffn_down=q6_k \
        "$smollm2" out.gguf Q5_K_M 2
    quantize smollm2/prune-override --allow-requantize --prune-layers 3,7 \
        --override-kv general.name=str:pruned "$smollm2" out.gguf Q4_0 2
    quantize smollm2/leave-output --allow-requantize --leave-output-tensor "$smollm2" out.gguf Q4_1 2
    quantize smollm2/dry-run --dry-run "$smollm2" out.gguf Q4_K_M 2
    quantize smollm2/copy "$smollm2" out.gguf COPY 2
    quantize gemma3/q6_k-keep-split --allow-requantize --keep-split "$gemma3" out Q6_K 2
    quantize gemma3/not-allowed "$gemma3" out.gguf Q4_K_M 2
    quantize qwen3moe/mxfp4 "$qdir/qwen3moe-f16.gguf" out.gguf MXFP4_MOE 2
    quantize qwen3moe/q3_k_m "$qdir/qwen3moe-f32.gguf" out.gguf Q3_K_M 1
fi

# llama-finetune: epochs over the text, the trained model saved; the progress lines (loss and
# accuracy per ubatch), the exit code and a hash of the saved file on both libraries. A generated
# Qwen3 in F32 (every weight but the token embeddings trained) and SmolLM2 (only its F32 norms).
if want llama-finetune; then
    fdir="$out/llama-finetune"
    mkdir -p "$fdir"
    python3 scripts/gen-models.py "$smollm2" "$fdir" qwen3 >/dev/null
    # A short text for SmolLM2, whose every datapoint takes tens of seconds.
    head -n 12 "$text" >"$fdir/short.txt"
    # finetune NAME TEXT ARGS...: llama-finetune ARGS on TEXT, saving out.gguf, on both libraries.
    finetune() {
        local name="$1" file="$2"
        shift 2
        run_writing "llama-finetune/$name" llama-finetune "$@" -f "$file" -o out.gguf -t 2
    }
    finetune qwen3 "$text" -m "$fdir/qwen3-f32.gguf" -c 256 -b 256 -ub 256 --epochs 2
    finetune qwen3-sgd "$text" -m "$fdir/qwen3-f32.gguf" -c 256 -b 256 -ub 128 --epochs 1 -opt sgd -lr 0.01
    finetune smollm2 "$fdir/short.txt" -m "$smollm2" -c 256 -b 256 -ub 256 --epochs 1
fi

# Across machines: the model split over two ggml RPC servers on loopback (llama.cpp's
# ggml-rpc-server, one thread each), every layer offloaded (-ngl 99); with the FFN weights kept on
# the CPU (-ot), on the second server only (--device), 10 layers split 3:1 (-ngl 10 -ts 3,1), and
# with an MoE model's experts kept on the CPU (--cpu-moe). The servers serve both
# libraries, one client at a time.
if want rpc; then
    rpc_ports=(18150 18151)
    rpc_pids=()
    for p in "${rpc_ports[@]}"; do
        "$bin/ggml-rpc-server" -H 127.0.0.1 -p "$p" -t 1 >"$out/rpc-server-$p.log" 2>&1 &
        rpc_pids+=($!)
    done
    for p in "${rpc_ports[@]}"; do
        for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.1; done
    done
    rpc="127.0.0.1:${rpc_ports[0]},127.0.0.1:${rpc_ports[1]}"
    python3 scripts/gen-models.py "$smollm2" "$out/gen" qwen3moe >/dev/null
    for m in smollm2 gemma3; do
        common=(-m "${!m}" -t 2 --seed 42 -p "The capital of France is" -n 48 --temp 0 -no-cnv)
        run "rpc/llama-completion/$m" 300 llama-completion "${common[@]}" --rpc "$rpc" -ngl 99
        run "rpc/llama-completion/$m/ot-ffn-cpu" 300 llama-completion "${common[@]}" --rpc "$rpc" -ngl 99 \
            -ot "ffn_.*=CPU"
        # A device list (the second server only), and 10 layers split 3:1 with the rest on the CPU.
        run "rpc/llama-completion/$m/device-RPC1" 300 llama-completion "${common[@]}" --rpc "$rpc" -ngl 99 \
            --device RPC1
        run "rpc/llama-completion/$m/ngl10-ts3,1" 300 llama-completion "${common[@]}" --rpc "$rpc" -ngl 10 -ts 3,1
        command -v curl >/dev/null &&
            server_compare "rpc/llama-server/$m" "${!m}" --rpc "$rpc" -ngl 99
    done
    run "rpc/llama-completion/qwen3moe/cpu-moe" 300 llama-completion -m "$out/gen/qwen3moe-f16.gguf" -t 2 \
        --seed 42 -p "The capital of France is" -n 48 --temp 0 -no-cnv --rpc "$rpc" -ngl 99 --cpu-moe
    kill "${rpc_pids[@]}" 2>/dev/null
    wait "${rpc_pids[@]}" 2>/dev/null
fi
