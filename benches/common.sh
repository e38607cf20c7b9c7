# Sourced by the benchmark scripts (from the repository root): the test models, building the library
# and one bench program, and running that program on each model.

models="${ENGINE_MODEL_DIR:-$HOME/.cache/engine/models}"
bench_models=(SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf)

# build_bench NAME: build libengine.so and compile benches/NAME_bench.c against our llama.h and the
# headers of the ggml we build (vendor/README.md) into target/NAME_bench, whose path it leaves in $bin.
build_bench() {
    scripts/fetch-ggml.sh
    cargo build --release --lib
    bin="target/$1_bench"
    cc -O2 -Wall -Wextra -Wno-deprecated-declarations -I include -I "${GGML_SRC:-.ggml/ggml}/include" -o "$bin" "benches/$1_bench.c" -ldl
}

# run_bench LIBLLAMA ARG: run $bin with each model and ARG, against libengine.so and then LIBLLAMA
# (skipped when empty), a blank line after each run.
run_bench() {
    local model lib
    for model in "${bench_models[@]}"; do
        for lib in "$PWD/target/release/libengine.so" ${1:+"$1"}; do
            "$bin" "$lib" "$models/$model" "$2"
            echo
        done
    done
}

# swap_in DIR GGML_DIR: make DIR a llama.cpp library directory with libengine.so in libllama.so's
# place: libllama.so(.0) link to libengine.so, and ggml's libraries to GGML_DIR's (llama.cpp's own
# build), which libengine.so then shares with the program, as in any llama.cpp install.
swap_in() {
    mkdir -p "$1"
    ln -sf "$PWD/target/release/libengine.so" "$1/libllama.so.0"
    ln -sf "$PWD/target/release/libengine.so" "$1/libllama.so"
    ln -sf "$2"/libggml*.so* "$1/"
}
