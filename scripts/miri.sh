#!/usr/bin/env bash
# Miri over the pure-Rust parts that do not call into ggml: the handle registry and the C string
# conversions of the boundary, the entry's panic catching, the GGUF reader, KV and recurrent cells,
# the quantized cache's rotation matrix, batch splitting, the samplers and grammar, the log. Part
# of the test suite (scripts/test.sh).
# Installs the nightly toolchain's Miri when missing. Left out, being too slow under Miri or
# needing what Miri isolates: the tests that read model files, call ggml, scan the source tree,
# draw a seed from the OS, print NaN's sign (Miri makes NaN signs nondeterministic, as the
# language allows) or truncate a file at every length (every other malformed input is run).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "installing: the nightly toolchain's miri (rustup)" >&2
    rustup toolchain install nightly --profile minimal --component miri,rust-src >&2
fi

cargo +nightly miri test --lib -- \
    ffi::registry ffi::strings ffi::entry ffi::sampler kv::cells kv::state::tests kv::tests kv::kpool kv::compressed::tests model::placement::tests model::saver::tests recurrent::cells context::batch vocab::stl_order graph::rotation \
    model::tests::sliding_windows model::tests::attention_temperature graph::lightning::tests::decays graph::msa::tests graph::qsa::tests graph::ple::tests graph::lora::tests model::quantize::tests \
    gguf::reader gguf::writer gguf::tests::malformed gguf::tests::valid gguf::tests::meta_string sampling:: log::tests \
    --skip every_exported_function_is_one_entry \
    --skip sampling::backend:: \
    --skip ggml::graph::sampling:: \
    --skip truncation_at_every_length_is_an_error \
    --skip random_seed_is_drawn_for_the_default_seed \
    --skip floats_print_like_printf_percent_f
