#!/usr/bin/env bash
# Miri over the pure-Rust parts that do not call into ggml: the handle registry and the C string
# conversions of the boundary, the entry's panic catching, the GGUF reader, KV and recurrent cells,
# the quantized cache's rotation matrix, batch splitting, the samplers and grammar, the log. Part
# of the test suite (scripts/test.sh).
# Installs the nightly toolchain's Miri when missing. Left out, being too slow under Miri or
# needing what Miri isolates: the tests that read model files, call ggml, scan the source tree,
# draw a seed from the OS, print NaN's sign (Miri makes NaN signs nondeterministic, as the
# language allows) or truncate a file at every length (every other malformed input is run).
# Each filter must name at least one test (a renamed module would otherwise run none).
set -euo pipefail
cd "$(dirname "$0")/.."

filters=(
    ffi::registry ffi::strings ffi::entry ffi::sampler kv::cells kv::state::tests kv::tests kv::kpool
    kv::compressed::tests model::placement::tests model::saver::tests recurrent::cells context::batch
    vocab::stl_order graph::rotation model::tests::sliding_windows model::tests::attention_temperature
    arch::minimax_01::lightning::tests::decays arch::minimax_m3::msa::tests arch::qwen4exp::qsa::tests
    arch::qwen4exp::ple::tests graph::lora::tests
    model::quantize::tests gguf::reader gguf::writer gguf::tests::malformed gguf::tests::valid
    gguf::tests::meta_string sampling:: log::tests
)
skips=(
    every_exported_function_is_one_entry sampling::backend:: ggml::graph::sampling::
    truncation_at_every_length_is_an_error random_seed_is_drawn_for_the_default_seed
    floats_print_like_printf_percent_f
    # The slowest under Miri (5 to 40 s each, safe code over large inputs or compiled regular
    # expressions); cargo test runs them, and their modules' other tests run here.
    model::saver::tests::tensors_follow_llama_cpp_members
    model::saver::tests::a_name_architectures_give_different_members_goes_where_the_architecture_puts_it
    model::saver::tests::tensors_llama_cpp_does_not_save_are_left_out
    model::saver::tests::a_layer_running_another_block_holds_its_weights_and_its_own_scales
    model::quantize::tests::pure_and_overrides model::quantize::tests::pruned_layers_renumber_the_rest
    model::quantize::tests::q4_k_m_gives_more_bits_to_some_layers
    sampling::cxx_sort::tests::partial_sort_puts_the_smallest_first_in_order
    sampling::grammar::regex::tests::empty_loops_terminate_and_unsupported_syntax_is_refused
    sampling::grammar::tests::json_masks_step_by_step
    sampling::grammar::tests::a_few_candidates_and_the_whole_vocabulary_agree
    sampling::grammar::parser::tests::errors_carry_llama_cpp_messages
    gguf::tests::malformed::truncation_messages_name_what_was_being_read
    model::saver::tests::every_architecture_names_keys_and_members_the_saver_writes
    model::quantize::tests::tied_embeddings_are_treated_as_the_output_head
    sampling::top_p::tests::large_arrays_take_the_adaptive_path
    sampling::mirostat::tests::mirostat_draws_and_adapts
    sampling::candidates::tests::bucketed_sort_equals_a_full_sort_on_distinct_logits
    kv::kpool::tests::new_pools_are_the_touched_and_the_stale
    context::batch::split_tests::equal_split_takes_the_same_count_from_consecutive_sequences
)

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "installing: the nightly toolchain's miri (rustup)" >&2
    rustup toolchain install nightly --profile minimal --component miri,rust-src >&2
fi

# The dependencies at opt-level 0 (Cargo.toml asks 2 of dev builds): Miri interprets them the same
# either way, but the build scripts' dependencies (bindgen, cbindgen, syn) are compiled natively,
# and at 2 they took three quarters of this script's build.
miri=(cargo +nightly miri test --config 'profile.dev.package."*".opt-level=0' --lib)
tests="$("${miri[@]}" -q -- --list 2>/dev/null | sed -n 's/: test$//p')"
for f in "${filters[@]}" "${skips[@]}"; do
    if ! grep -qF -- "$f" <<<"$tests"; then
        echo "miri.sh: no test matches '$f' (renamed?): update the list" >&2
        exit 1
    fi
done

skip_args=()
for s in "${skips[@]}"; do skip_args+=(--skip "$s"); done
"${miri[@]}" -- "${filters[@]}" "${skip_args[@]}"
