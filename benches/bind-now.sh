#!/usr/bin/env bash
# No unresolved symbol anywhere: every program and library llama.cpp 0.3.36 builds that links
# libllama (directly, or through libmtmd or its other libraries) is bound with libengine.so in
# libllama.so.0's place, every symbol at once, as LD_BIND_NOW or ctypes' dlopen(RTLD_NOW) binds them
# (`ldd -r` relocates without running anything). Builds llama.cpp's TARGETs (default: all of them,
# which takes a while) into its cache outside the repository (scripts/llama-cpp.sh) and checks every
# binary there, built now or before. benches/compare.sh runs it on what the suite builds (libmtmd).
# Exits 1 if a symbol is left unresolved, or a binary does not get libengine.so.
# Usage: benches/bind-now.sh [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/common.sh

bin="$(scripts/llama-cpp.sh "${@:-all}")" || exit 1
cargo build --release --lib || exit 1
swap="$PWD/target/bind-now"
rm -rf "$swap"
swap_in "$swap" "$bin"

# llama.cpp's unit tests of its own internals: they call llama.cpp's private C++ classes and
# functions (the grammar's parser and stacks, the batch allocator, the model saver, the
# vocabulary's class, the architecture table, the pre-tokenizer's regex splitter, the tensor map),
# whose layouts their inlined code reads. Only those symbols may be left unresolved in them.
internal='llama_grammar|llama_batch_allocr::|llama_batch_compat::|llama_batch_ext::|llama_model_saver|llama_vocab::|llm_arch_|llama_internal_get_tensor_map|unicode_regex_split|unicode_cpt_from_utf8|llama_batch_ext_select_n_embd_inp'
status=0 checked=0 internal_only=()
for f in "$bin"/*; do
    [ -f "$f" ] && [ ! -L "$f" ] && head -c 4 "$f" | grep -q ELF || continue
    # Only what reaches libllama: the ggml libraries and programs that do not are llama.cpp's own.
    deps="$(LD_LIBRARY_PATH="$swap" ldd "$f" 2>/dev/null)"
    grep -q 'libllama\.so' <<<"$deps" || continue
    checked=$((checked + 1))
    if ! grep -q "libllama.so.0 => $swap/libllama.so.0" <<<"$deps"; then
        status=1
        echo "$(basename "$f"): does not load libengine.so as libllama.so.0"
        continue
    fi
    missing="$(LD_LIBRARY_PATH="$swap" ldd -r "$f" 2>&1 | grep 'undefined symbol' | sed 's/^\s*undefined symbol: \([^[:space:]]*\).*/\1/' \
        | sort -u | c++filt)"
    if [ -n "$missing" ] && [[ "$(basename "$f")" == test-* ]] && ! grep -qvE "$internal" <<<"$missing"; then
        internal_only+=("$(basename "$f")")
    elif [ -n "$missing" ]; then
        status=1
        echo "$(basename "$f"): $(wc -l <<<"$missing") unresolved:"
        sed 's/^/    /' <<<"$missing" | head -n 10
    fi
done
echo "bind-now: $checked programs and libraries of llama.cpp 0.3.36 bound on libengine.so," \
    "$([ $status = 0 ] && echo "every symbol resolved" || echo "FAILED")"
if [ ${#internal_only[@]} -gt 0 ]; then
    echo "  but for llama.cpp's internals in its unit tests ${internal_only[*]}"
fi
exit "$status"
