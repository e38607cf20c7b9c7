// What a llama.h library computes, printed so that two libraries can be compared line by line:
// tokenization and detokenization of generated texts, the logits of whole prompts (a hash of every
// row's bits, and its top 3) at n_ubatch 512 and 7 and the saved state's bytes, several sequences
// in one batch, embeddings with every pooling, embeddings given as input in place of token ids,
// seeded generation through sampler chains of every family, backend sampling (chains in the
// graph, alone and mixed with CPU samplers), and an encoder-decoder's encode, then decode.
//
//   compare_bench LIBRARY MODEL [arch] [sections=NAME,...] [skip=NAME,...]
//
// With `arch` (the generated models of other architectures, whose vocabulary and samplers are the
// test models'), each sampler chain runs once, on one prompt and seed: what differs between
// architectures is the model, which a chain's sixteen steps drive the same way whatever its seed.
// `sections=` runs only the sections named (small, encdec, rollback, embd_inputs, tokenize, logits,
// plain_weights, multiseq, shared, multiseq_long, long_prompt, partial_state, sliding,
// failed_restore, embeddings, backend_sampling, sampling); `skip=` leaves the sections named out.
// Each section that runs starts with "section NAME", one that cannot run here says "skipped NAME:
// why"; a decode, encode or context that fails where it should not prints an "error:" line (see
// dl.h), and a refusal llama.cpp also makes prints a "refused:" line.
// ENGINE_BENCH_THREADS sets the contexts' thread count.
//
// LIBRARY is loaded with dlopen (libengine.so, or llama.cpp's libllama.so). benches/compare.sh runs
// it against both and reports the first difference.
// Build: cc -O2 -I include -I <ggml include> -o compare_bench benches/compare_bench.c -ldl
#include "dl.h"
#include "rows.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *PROMPTS[] = {
    "The capital of France is",
    "<start_of_turn>user\nName three rivers.<end_of_turn>\n<start_of_turn>model\n",
    "<|im_start|>user\nWrite a haiku about rain.<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "In 1492, Columbus sailed across the Atlantic. The voyage",
    "Les mathématiques sont la reine des sciences, et l'arithmétique",
};
#define N_PROMPTS (int)(sizeof PROMPTS / sizeof *PROMPTS)

static const char *PIECES[] = {
    " ", "  ", "\n", "\n\n", "\t", "Hello", "world", "don't", "I'm", "'s", "123", "4567", "3.14", "x=y+z",
    "    return", "<start_of_turn>", "<end_of_turn>", "<bos>", "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "日本語", "中文", "Привет", "مرحبا", "😀", "👍🏽", "e\xcc\x81", "ß", "\xc2\xa0", "…", "CamelCase", "naïve",
};
#define N_PIECES (int)(sizeof PIECES / sizeof *PIECES)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static struct llama_sampler *make_chain(int c, uint32_t seed, const struct llama_vocab *vocab, int n_vocab) {
    DL_LOAD(llama_sampler_chain_init);
    DL_LOAD(llama_sampler_chain_default_params);
    DL_LOAD(llama_sampler_chain_add);
    DL_LOAD(llama_sampler_init_greedy);
    DL_LOAD(llama_sampler_init_dist);
    DL_LOAD(llama_sampler_init_top_k);
    DL_LOAD(llama_sampler_init_top_p);
    DL_LOAD(llama_sampler_init_min_p);
    DL_LOAD(llama_sampler_init_typical);
    DL_LOAD(llama_sampler_init_temp);
    DL_LOAD(llama_sampler_init_temp_ext);
    DL_LOAD(llama_sampler_init_xtc);
    DL_LOAD(llama_sampler_init_top_n_sigma);
    DL_LOAD(llama_sampler_init_mirostat);
    DL_LOAD(llama_sampler_init_mirostat_v2);
    DL_LOAD(llama_sampler_init_penalties);
    DL_LOAD(llama_sampler_init_dry);
    DL_LOAD(llama_sampler_init_logit_bias);
    DL_LOAD(llama_sampler_init_grammar);
    struct llama_sampler *s = p_llama_sampler_chain_init(p_llama_sampler_chain_default_params());
    static const char *breakers[] = {"\n", ":", "\"", "*"};
    llama_logit_bias bias[2] = {{13, -5.0f}, {11, 3.0f}};
    switch (c) {
    case 0:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_greedy());
        return s;
    case 1:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(40));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_p(0.9f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.8f));
        break;
    case 2:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_min_p(0.05f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(1.3f));
        break;
    case 3:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_penalties(n_vocab, 64, 1.3f, 0.2f, 0.1f));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_typical(0.7f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp_ext(0.9f, 0.3f, 1.5f));
        break;
    case 4:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(100));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_xtc(0.5f, 0.1f, 1, seed));
        break;
    case 5:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_n_sigma(1.5f));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(1.0f));
        break;
    case 6:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_mirostat(n_vocab, seed, 5.0f, 0.1f, 100));
        return s;
    case 7:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.7f));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_mirostat_v2(seed, 4.0f, 0.2f));
        return s;
    case 8:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_dry(vocab, 0.8f, 1.75f, 2, 128, breakers, 4));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(50));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.9f));
        break;
    case 9:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_logit_bias(n_vocab, 2, bias));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_p(0.95f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(1.1f));
        break;
    default:
        p_llama_sampler_chain_add(
            s, p_llama_sampler_init_grammar(vocab, "root ::= \"{\" ws \"\\\"n\\\"\" ws \":\" ws [0-9]+ ws \"}\"\nws ::= [ ]?",
                                            "root"));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(1.0f));
        break;
    }
    p_llama_sampler_chain_add(s, p_llama_sampler_init_dist(seed));
    return s;
}
#define N_CHAINS 11

static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The sections asked for with a "sections=a,b" argument (NULL: every one), and those left out
 * with "skip=a,b". */
static const char *only_sections, *skip_sections;

/* Whether `list` ("a,b,c") names `name`. */
static bool listed(const char *list, const char *name) {
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0) return true;
        p += n + (end != NULL);
    }
    return false;
}

/* Whether section `name` was asked for. */
static bool wanted(const char *name) {
    return (!only_sections || listed(only_sections, name)) && !(skip_sections && listed(skip_sections, name));
}

/* Whether to run section `name`: asked for and `runnable`; a section that runs starts with a line
 * naming it, one that cannot run says why (`why_not`: what keeps llama.cpp from running it), and
 * benches/compare.sh shows both in the row. */
/* Set for an encoder-decoder: the sections that decode without encoding first cannot run. */
static bool encoder_decoder_model = false;

static bool section_if(const char *name, bool runnable, const char *why_not) {
    if (!wanted(name)) return false;
    if (encoder_decoder_model && strcmp(name, "tokenize") && strcmp(name, "encdec")) {
        runnable = false;
        why_not = "an encoder-decoder decodes after llama_encode (section encdec)";
    }
    dl_error_context = name;
    printf(runnable ? "section %s\n" : "skipped %s: %s\n", name, why_not);
    return runnable;
}
static bool section(const char *name) { return section_if(name, true, ""); }

/* The width of the model's key heads as its metadata gives it (key_length, else n_embd / n_head),
 * or 0 where cached keys are not heads of one width (latent attention, key_length_mla). */
static int key_head_width(struct llama_model *model) {
    DL_LOAD(llama_model_meta_val_str);
    DL_LOAD(llama_model_n_embd);
    DL_LOAD(llama_model_n_head);
    char arch[64], key[160], val[64];
    if (p_llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch) < 0) return 0;
    snprintf(key, sizeof key, "%s.attention.key_length_mla", arch);
    if (p_llama_model_meta_val_str(model, key, val, sizeof val) >= 0) return 0;
    snprintf(key, sizeof key, "%s.attention.key_length", arch);
    if (p_llama_model_meta_val_str(model, key, val, sizeof val) >= 0) return atoi(val);
    int n_head = p_llama_model_n_head(model);
    return n_head > 0 ? p_llama_model_n_embd(model) / n_head : 0;
}

/* Decode `n` tokens of sequence 0 from position 0 (logits for the last) and print that row. */
static int decode_and_print(struct llama_context *ctx, const llama_token *ids, int n, int n_vocab, const char *what) {
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    struct llama_batch b = p_llama_batch_init(n, 0, 1);
    b.n_tokens = 0;
    append_seq(&b, ids, n, 0, false);
    int rc = dl_decode(ctx, b);
    printf("%s rc %d", what, rc);
    if (rc == 0) {
        print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
    } else {
        printf("\n");
    }
    p_llama_batch_free(b);
    return rc;
}

/* The smaller functions, each as it answers: names, defaults, setters as their getters and the
 * logits see them, the deprecated spellings, sequence division, state and session files, the
 * extended batch. */
/* Whether the model's `general.architecture` is `name`. */
static bool arch_is(struct llama_model *model, const char *name) {
    DL_LOAD(llama_model_meta_val_str);
    char arch[64] = "";
    p_llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
    return !strcmp(arch, name);
}

static void small_functions(const char *model_path, struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_print_system_info);
    DL_LOAD(llama_model_desc);
    DL_LOAD(llama_model_rope_type);
    DL_LOAD(llama_model_n_params);
    DL_LOAD(llama_model_size);
    DL_LOAD(llama_model_meta_count);
    DL_LOAD(llama_model_n_swa);
    DL_LOAD(llama_model_rope_freq_scale_train);
    DL_LOAD(llama_ftype_name);
    DL_LOAD(llama_flash_attn_type_name);
    DL_LOAD(llama_load_mode_name);
    DL_LOAD(llama_load_mode_from_str);
    DL_LOAD(llama_split_path);
    DL_LOAD(llama_split_prefix);
    DL_LOAD(llama_max_tensor_buft_overrides);
    DL_LOAD(llama_model_quantize_default_params);
    DL_LOAD(llama_model_n_layer_nextn);
    DL_LOAD(llama_model_n_embd);
    DL_LOAD(llama_model_n_embd_inp);
    DL_LOAD(llama_model_n_embd_out);
    DL_LOAD(llama_numa_init);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_free);
    DL_LOAD(llama_n_rs_seq);
    DL_LOAD(llama_set_n_threads);
    DL_LOAD(llama_n_threads);
    DL_LOAD(llama_n_threads_batch);
    DL_LOAD(llama_set_causal_attn);
    DL_LOAD(llama_get_causal_attn);
    DL_LOAD(llama_set_warmup);
    DL_LOAD(llama_synchronize);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_clear);
    DL_LOAD(llama_memory_seq_div);
    DL_LOAD(llama_memory_seq_pos_min);
    DL_LOAD(llama_memory_seq_pos_max);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_get_state_size);
    DL_LOAD(llama_copy_state_data);
    DL_LOAD(llama_save_session_file);
    DL_LOAD(llama_load_session_file);
    DL_LOAD(llama_load_model_from_file);
    DL_LOAD(llama_free_model);
    DL_LOAD(llama_new_context_with_model);
    DL_LOAD(llama_batch_ext_init);
    DL_LOAD(llama_batch_ext_free);
    DL_LOAD(llama_batch_ext_add);
    DL_LOAD(llama_batch_ext_add_token);
    DL_LOAD(llama_batch_ext_add_seq);
    DL_LOAD(llama_batch_ext_set_pos);
    DL_LOAD(llama_batch_ext_set_output_embd);
    DL_LOAD(llama_batch_ext_clear);
    DL_LOAD(llama_process);

    printf("system info: %s\n", p_llama_print_system_info());
    char desc[256];
    p_llama_model_desc(model, desc, sizeof desc);
    printf("model: %s, rope type %d, %llu parameters, %llu bytes, %d metadata keys, window %d, rope scale %g\n",
           desc, (int)p_llama_model_rope_type(model), (unsigned long long)p_llama_model_n_params(model),
           (unsigned long long)p_llama_model_size(model), p_llama_model_meta_count(model),
           p_llama_model_n_swa(model), p_llama_model_rope_freq_scale_train(model));
    printf("widths: n_embd %d, n_embd_inp %d, n_embd_out %d\n", p_llama_model_n_embd(model),
           p_llama_model_n_embd_inp(model), p_llama_model_n_embd_out(model));
    printf("ftype names:");
    for (int f = 0; f <= 41; f++) printf(" %d=%s", f, p_llama_ftype_name((enum llama_ftype)f));
    printf("\nflash attention names: %s %s %s\n", p_llama_flash_attn_type_name(LLAMA_FLASH_ATTN_TYPE_AUTO),
           p_llama_flash_attn_type_name(LLAMA_FLASH_ATTN_TYPE_DISABLED),
           p_llama_flash_attn_type_name(LLAMA_FLASH_ATTN_TYPE_ENABLED));
    printf("load modes:");
    for (int m = 0; m < 5; m++) {
        const char *name = p_llama_load_mode_name((enum llama_load_mode)m);
        printf(" %d=%s->%d", m, name, name ? (int)p_llama_load_mode_from_str(name) : -1);
    }
    char buf[256];
    int n = p_llama_split_path(buf, sizeof buf, "/models/ggml-model-q4_0", 2, 5);
    printf("\nsplit path %d %s", n, buf);
    n = p_llama_split_prefix(buf, sizeof buf, "/models/ggml-model-q4_0-00003-of-00005.gguf", 2, 5);
    printf(" prefix %d %s", n, n > 0 ? buf : "");
    n = p_llama_split_prefix(buf, sizeof buf, "/models/ggml-model-q4_0-00003-of-00005.gguf", 1, 5);
    printf(" wrong split %d", n);
    printf("\nmax tensor buft overrides %zu, nextn layers %d\n", p_llama_max_tensor_buft_overrides(),
           p_llama_model_n_layer_nextn(model));
    struct llama_model_quantize_params qp = p_llama_model_quantize_default_params();
    printf("quantize defaults: %d %d %d %d %d %d %d %d %d %d %zu\n", qp.nthread, (int)qp.ftype,
           (int)qp.output_tensor_type, (int)qp.token_embedding_type, qp.allow_requantize,
           qp.quantize_output_tensor, qp.only_copy, qp.pure, qp.keep_split, qp.dry_run, qp.max_buf_size);
    /* Every default parameter and global limit, as llama.cpp gives them (pointers as set or not). */
    DL_LOAD(llama_sampler_chain_default_params);
    DL_LOAD(llama_context_default_params);
    DL_LOAD(llama_max_devices);
    DL_LOAD(llama_max_parallel_sequences);
    DL_LOAD(llama_supports_mmap);
    DL_LOAD(llama_supports_mlock);
    struct llama_model_params mp = p_llama_model_default_params();
    printf("model defaults: %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n", mp.devices != NULL,
           mp.tensor_buft_overrides != NULL, mp.n_gpu_layers, (int)mp.split_mode, (int)mp.load_mode,
           (int)mp.lazy_mode, mp.main_gpu, mp.tensor_split != NULL, mp.progress_callback != NULL,
           mp.kv_overrides != NULL, mp.vocab_only, mp.check_tensors, mp.use_extra_bufts, mp.no_host, mp.no_alloc,
           mp.load_mtp, mp.progress_callback_user_data != NULL);
    struct llama_context_params dp = p_llama_context_default_params();
    printf("context defaults: %u %u %u %u %u %u %u %d %d %d %d %d %d %d %a %a %a %a %a %a %u %a %d %d %d %d %d %d "
           "%d %d %d %d %d %d %zu %d\n",
           dp.n_ctx, dp.n_batch, dp.n_ubatch, dp.n_seq_max, dp.n_rs_seq, dp.n_outputs_max, dp.n_outputs_max_per_seq,
           dp.n_threads, dp.n_threads_batch, (int)dp.ctx_type, (int)dp.rope_scaling_type, (int)dp.pooling_type,
           (int)dp.attention_type, (int)dp.flash_attn_type, dp.rope_freq_base, dp.rope_freq_scale,
           dp.yarn_ext_factor, dp.yarn_attn_factor, dp.yarn_beta_fast, dp.yarn_beta_slow, dp.yarn_orig_ctx,
           dp.defrag_thold, dp.cb_eval != NULL, dp.cb_eval_user_data != NULL, (int)dp.type_k, (int)dp.type_v,
           dp.abort_callback != NULL, dp.abort_callback_data != NULL, dp.embeddings, dp.offload_kqv, dp.no_perf,
           dp.op_offload, dp.swa_full, dp.kv_unified, dp.n_samplers, dp.samplers != NULL || dp.ctx_other != NULL);
    printf("sampler chain defaults: %d; max devices %zu, parallel sequences %zu, mmap %d, mlock %d\n",
           p_llama_sampler_chain_default_params().no_perf, p_llama_max_devices(), p_llama_max_parallel_sequences(),
           p_llama_supports_mmap(), p_llama_supports_mlock());
    p_llama_numa_init(GGML_NUMA_STRATEGY_DISABLED);

    static llama_token ids[4096];
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    n = p_llama_tokenize(vocab, PROMPTS[4], (int)strlen(PROMPTS[4]), ids, 4096, true, true);
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    struct llama_context *ctx = dl_new_context(model, cp);
    printf("recurrent sequences %u\n", p_llama_n_rs_seq(ctx));
    p_llama_set_n_threads(ctx, 3, 5);
    printf("threads %d %d\n", p_llama_n_threads(ctx), p_llama_n_threads_batch(ctx));
    p_llama_set_n_threads(ctx, cp.n_threads, cp.n_threads_batch);
    llama_memory_t mem = p_llama_get_memory(ctx);

    printf("causal %d", p_llama_get_causal_attn(ctx));
    p_llama_set_causal_attn(ctx, false);
    printf(" then %d\n", p_llama_get_causal_attn(ctx));
    decode_and_print(ctx, ids, n, n_vocab, "non-causal");
    p_llama_set_causal_attn(ctx, true);
    p_llama_memory_clear(mem, true);
    p_llama_set_warmup(ctx, true);
    decode_and_print(ctx, ids, n, n_vocab, "warmup");
    p_llama_set_warmup(ctx, false);
    p_llama_synchronize(ctx);

    /* Positions divided: what the cache then holds, and the logits of the next token after it
     * (not where keys cannot be shifted: llama.cpp aborts there). */
    DL_LOAD(llama_memory_can_shift);
    if (p_llama_memory_can_shift(mem)) {
        p_llama_memory_seq_div(mem, 0, 2, -1, 2);
        printf("divided: pos %d..%d", (int)p_llama_memory_seq_pos_min(mem, 0), (int)p_llama_memory_seq_pos_max(mem, 0));
        llama_token next = ids[n - 1];
        struct llama_batch one = p_llama_batch_get_one(&next, 1);
        int rc = dl_decode(ctx, one);
        printf(" next rc %d", rc);
        if (rc == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
        else printf("\n");
    } else {
        printf("divided: cannot shift\n");
    }

    /* Positions moved far ahead by a K-shift, then six more tokens one by one, across the start
     * of position 16384: past Llama 4's chunk boundaries (every 8192 positions) and its
     * attention temperature's steps (not where keys cannot be shifted, nor with M-RoPE, whose
     * shift llama.cpp aborts on, nor with a learned position table, which has no row there:
     * llama.cpp aborts, the engine refuses the batch). */
    int rope_type = p_llama_model_rope_type(model);
    bool mrope = rope_type == LLAMA_ROPE_TYPE_MROPE || rope_type == LLAMA_ROPE_TYPE_IMROPE ||
                 rope_type == LLAMA_ROPE_TYPE_VISION;
    bool learned_positions = arch_is(model, "gpt2") || arch_is(model, "starcoder") || arch_is(model, "mpt");
    if (p_llama_memory_can_shift(mem) && !mrope && !learned_positions) {
        DL_LOAD(llama_memory_seq_add);
        p_llama_memory_seq_add(mem, 0, -1, -1, 16370);
        for (int step = 0; step < 6; step++) {
            llama_token next = ids[step % n];
            int rc = dl_decode(ctx, p_llama_batch_get_one(&next, 1));
            printf("far: pos %d rc %d", (int)p_llama_memory_seq_pos_max(mem, 0), rc);
            if (rc == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
            else printf("\n");
        }
    }

    size_t size = p_llama_get_state_size(ctx);
    unsigned char *state = malloc(size);
    size_t got = p_llama_copy_state_data(ctx, state);
    printf("old state api %zu %zu %016llx\n", size, got, (unsigned long long)hash_bytes(state, got));
    free(state);

    char path[] = "/tmp/engine-compare-session-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    printf("session saved %d", p_llama_save_session_file(ctx, path, ids, (size_t)n));
    p_llama_free(ctx);
    ctx = dl_new_context(model, cp);
    static llama_token back[4096];
    size_t count = 0;
    bool loaded = p_llama_load_session_file(ctx, path, back, 4096, &count);
    printf(" loaded %d, %zu tokens, same %d\n", loaded, count, count == (size_t)n && !memcmp(back, ids, sizeof *ids * (size_t)n));
    unlink(path);

    /* The extended batch: the prompt in sequences 0 and 1, output for the last token. */
    p_llama_memory_clear(p_llama_get_memory(ctx), true);
    struct llama_batch_ext *be = p_llama_batch_ext_init(ctx);
    printf("batch ext: add without token %d", p_llama_batch_ext_add(be, 0));
    p_llama_batch_ext_clear(be);
    bool added = true;
    for (int i = 0; i < n; i++) {
        int idx = p_llama_batch_ext_add_token(be, 0, ids[i]);
        llama_pos pos = i;
        p_llama_batch_ext_set_pos(be, idx, &pos);
        added &= p_llama_batch_ext_add_seq(be, idx, 1);
    }
    added &= p_llama_batch_ext_set_output_embd(be, n - 1, true);
    int rc = p_llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be);
    printf(" added %d process rc %d", added, rc);
    if (rc == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
    else printf("\n");
    p_llama_batch_ext_free(be);
    p_llama_free(ctx);

    struct llama_model *old = p_llama_load_model_from_file(model_path, p_llama_model_default_params());
    ctx = p_llama_new_context_with_model(old, cp);
    decode_and_print(ctx, ids, n, n_vocab, "deprecated load");
    p_llama_free(ctx);
    p_llama_free_model(old);
}

/* Recurrent state rolled back (n_rs_seq snapshots; a model without them reports 0 and refuses):
 * a prompt, a rollback of its last three tokens (and a second one, refused while the first is
 * pending), the sequence's state then, and the three tokens decoded again one by one. */
static void rollback(struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_model_is_recurrent);
    DL_LOAD(llama_model_is_hybrid);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_n_rs_seq);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_seq_rm);
    DL_LOAD(llama_memory_seq_pos_max);
    DL_LOAD(llama_state_seq_get_size);
    DL_LOAD(llama_state_seq_get_data);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    if (!p_llama_model_is_recurrent(model) && !p_llama_model_is_hybrid(model)) {
        return;
    }
    static llama_token ids[64];
    int n = p_llama_tokenize(p_llama_model_get_vocab(model), PROMPTS[1], (int)strlen(PROMPTS[1]), ids, 64, true, true);
    if (n > 20) n = 20;
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    cp.n_batch = 64;
    cp.n_ubatch = 16;
    cp.n_rs_seq = 4;
    struct llama_context *ctx = dl_new_context(model, cp);
    printf("rollback n_rs_seq %u\n", p_llama_n_rs_seq(ctx));
    decode_and_print(ctx, ids, n, n_vocab, "rollback prompt");
    llama_memory_t mem = p_llama_get_memory(ctx);
    bool rm = p_llama_memory_seq_rm(mem, 0, n - 3, -1);
    bool again = p_llama_memory_seq_rm(mem, 0, n - 4, -1);
    printf("rollback rm %d again %d pos max %d\n", rm, again, p_llama_memory_seq_pos_max(mem, 0));
    static unsigned char state[1 << 22];
    size_t size = p_llama_state_seq_get_size(ctx, 0);
    size_t got = size <= sizeof state ? p_llama_state_seq_get_data(ctx, state, sizeof state, 0) : 0;
    printf("rollback state %zu %zu %016llx\n", size, got, (unsigned long long)hash_bytes(state, got));
    struct llama_batch b = p_llama_batch_init(1, 0, 1);
    for (int pos = n - 3; pos < n && rm; pos++) {
        b.n_tokens = 0;
        append_seq(&b, &ids[pos], 1, 0, true);
        b.pos[0] = pos;
        int rc = dl_decode(ctx, b);
        printf("rollback replay %d rc %d", pos, rc);
        if (rc == 0) {
            print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
        } else {
            printf("\n");
        }
    }
    p_llama_batch_free(b);
    p_llama_free(ctx);
}

/* A chain that runs in the graph (backend sampling), in full or its first samplers. */
static struct llama_sampler *make_backend_chain(int c, uint32_t seed, int n_vocab) {
    DL_LOAD(llama_sampler_chain_init);
    DL_LOAD(llama_sampler_chain_default_params);
    DL_LOAD(llama_sampler_chain_add);
    DL_LOAD(llama_sampler_init_greedy);
    DL_LOAD(llama_sampler_init_dist);
    DL_LOAD(llama_sampler_init_top_k);
    DL_LOAD(llama_sampler_init_top_p);
    DL_LOAD(llama_sampler_init_min_p);
    DL_LOAD(llama_sampler_init_typical);
    DL_LOAD(llama_sampler_init_temp);
    DL_LOAD(llama_sampler_init_temp_ext);
    DL_LOAD(llama_sampler_init_penalties);
    DL_LOAD(llama_sampler_init_logit_bias);
    struct llama_sampler *s = p_llama_sampler_chain_init(p_llama_sampler_chain_default_params());
    llama_logit_bias bias[2] = {{13, -5.0f}, {11, 3.0f}};
    switch (c) {
    case 0:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_greedy());
        return s;
    case 1:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(40));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_p(0.9f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.8f));
        break;
    case 2:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_logit_bias(n_vocab, 2, bias));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_min_p(0.05f, 1));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp_ext(0.9f, 0.3f, 1.5f));
        break;
    case 3:
        p_llama_sampler_chain_add(s, p_llama_sampler_init_penalties(n_vocab, 64, 1.3f, 0.2f, 0.1f));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(50));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_temp(0.0f));
        break;
    default:
        /* Typical sampling has no graph form: top-k runs in the graph, the rest on the CPU. */
        p_llama_sampler_chain_add(s, p_llama_sampler_init_top_k(30));
        p_llama_sampler_chain_add(s, p_llama_sampler_init_typical(0.7f, 1));
        break;
    }
    p_llama_sampler_chain_add(s, p_llama_sampler_init_dist(seed));
    return s;
}
#define N_BACKEND_CHAINS 5

/* What the backend samplers left for output i: the token and a hash of each buffer. */
static void print_sampled(struct llama_context *ctx, int i) {
    DL_LOAD(llama_get_sampled_token_ith);
    DL_LOAD(llama_get_sampled_probs_ith);
    DL_LOAD(llama_get_sampled_probs_count_ith);
    DL_LOAD(llama_get_sampled_logits_ith);
    DL_LOAD(llama_get_sampled_logits_count_ith);
    DL_LOAD(llama_get_sampled_candidates_ith);
    DL_LOAD(llama_get_sampled_candidates_count_ith);
    int n_p = (int)p_llama_get_sampled_probs_count_ith(ctx, i);
    int n_l = (int)p_llama_get_sampled_logits_count_ith(ctx, i);
    int n_c = (int)p_llama_get_sampled_candidates_count_ith(ctx, i);
    const float *probs = p_llama_get_sampled_probs_ith(ctx, i);
    const float *logits = p_llama_get_sampled_logits_ith(ctx, i);
    const llama_token *cand = p_llama_get_sampled_candidates_ith(ctx, i);
    printf(" [%d p%d %016llx l%d %016llx c%d %016llx]", p_llama_get_sampled_token_ith(ctx, i), n_p,
           (unsigned long long)(probs ? hash_bits(probs, n_p) : 0), n_l,
           (unsigned long long)(logits ? hash_bits(logits, n_l) : 0), n_c,
           (unsigned long long)(cand && n_c ? hash_bytes((const unsigned char *)cand, sizeof(llama_token) * (size_t)n_c) : 0));
}

/* Backend sampling as a client drives it: three sequences in each batch, two with chains in the
 * graph (given at creation, then swapped with llama_set_sampler), one sampled on the CPU; prompts
 * split into small ubatches; then two outputs per sequence in one batch. */
static void backend_sampling(struct llama_model *model, const llama_token *ids, int n_ids, int n_vocab) {
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_sampler_sample);
    DL_LOAD(llama_sampler_free);
    DL_LOAD(llama_set_sampler);
    DL_LOAD(llama_sampler_name);
    DL_LOAD(llama_sampler_chain_get);
    for (int c = 0; c < N_BACKEND_CHAINS; c++) {
        struct llama_sampler *chains[2] = {make_backend_chain(c, 11u + c, n_vocab),
                                           make_backend_chain((c + 2) % N_BACKEND_CHAINS, 23u + c, n_vocab)};
        struct llama_sampler *cpu = make_backend_chain(4, 37u, n_vocab);
        struct llama_sampler_seq_config configs[2] = {{0, chains[0]}, {1, chains[1]}};
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 512;
        cp.n_batch = 128;
        cp.n_ubatch = 7;
        cp.n_seq_max = 3;
        cp.samplers = configs;
        cp.n_samplers = 2;
        struct llama_context *ctx = dl_new_context(model, cp);
        printf("backend chain %d: %s %s\n", c, p_llama_sampler_name(p_llama_sampler_chain_get(chains[0], 0)),
               p_llama_sampler_name(p_llama_sampler_chain_get(chains[1], 0)));
        struct llama_batch b = p_llama_batch_init(128, 0, 1);
        int len[3] = {n_ids < 9 ? n_ids : 9, n_ids < 17 ? n_ids : 17, n_ids < 5 ? n_ids : 5};
        int out[3];
        for (int s = 0; s < 3; s++) {
            append_seq(&b, ids, len[s], s, false);
            out[s] = b.n_tokens - 1;
        }
        int pos[3] = {len[0], len[1], len[2]};
        for (int step = 0; step < 10; step++) {
            if (step == 5) {
                /* Swap: sequence 1 loses its chain, sequence 0 gets a fresh one. */
                struct llama_sampler *fresh = make_backend_chain((c + 1) % N_BACKEND_CHAINS, 51u, n_vocab);
                printf("set %d %d", p_llama_set_sampler(ctx, 1, NULL), p_llama_set_sampler(ctx, 0, fresh));
                p_llama_sampler_free(chains[0]);
                chains[0] = fresh;
                p_llama_sampler_free(chains[1]);
                chains[1] = NULL;
                printf("\n");
            }
            int rc = dl_decode(ctx, b);
            printf("backend chain %d step %d rc %d:", c, step, rc);
            if (rc != 0) {
                printf("\n");
                break;
            }
            llama_token next[3];
            for (int s = 0; s < 3; s++) {
                int i = out[s];
                print_sampled(ctx, i);
                next[s] = p_llama_sampler_sample(s < 2 && chains[s] ? chains[s] : cpu, ctx, i);
                printf(" %d", next[s]);
            }
            printf("\n");
            b.n_tokens = 0;
            for (int s = 0; s < 3; s++) {
                append_seq(&b, &next[s], 1, s, true);
                b.pos[b.n_tokens - 1] = pos[s]++;
                out[s] = s;
            }
        }
        p_llama_batch_free(b);
        p_llama_free(ctx);
        for (int s = 0; s < 2; s++) p_llama_sampler_free(chains[s]);
        p_llama_sampler_free(cpu);
    }
    /* Two outputs per sequence: the dist sampler draws on a side stream, committed as tokens
     * are accepted. */
    struct llama_sampler *chain = make_backend_chain(1, 5u, n_vocab);
    struct llama_sampler_seq_config config = {0, chain};
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 256;
    cp.n_outputs_max_per_seq = 2;
    cp.samplers = &config;
    cp.n_samplers = 1;
    struct llama_context *ctx = dl_new_context(model, cp);
    struct llama_batch b = p_llama_batch_init(64, 0, 1);
    for (int round = 0; round < 3; round++) {
        b.n_tokens = 0;
        append_seq(&b, ids, n_ids < 6 ? n_ids : 6, 0, false);
        b.logits[b.n_tokens - 2] = true;
        for (int j = 0; j < b.n_tokens; j++) b.pos[j] += round * b.n_tokens;
        int rc = dl_decode(ctx, b);
        printf("backend two outputs round %d rc %d:", round, rc);
        for (int k = 2; k >= 1 && rc == 0; k--) {
            print_sampled(ctx, b.n_tokens - k);
            if (round > 0) printf(" %d", p_llama_sampler_sample(chain, ctx, b.n_tokens - k));
        }
        printf("\n");
    }
    b.n_tokens = 0;
    append_seq(&b, ids, 3, 0, true);
    for (int j = 0; j < b.n_tokens; j++) b.pos[j] += 3 * (n_ids < 6 ? n_ids : 6);
    printf("backend three outputs rc %d\n", dl_decode_may_refuse(ctx, b) != 0);
    p_llama_batch_free(b);
    p_llama_free(ctx);
    p_llama_sampler_free(chain);
}
/* The sliding-window layers' cache sized for the window (swa_full false, as llama.cpp's programs
 * ask): its cells are taken again once the window has passed them, the sequence whose cells they
 * were lets its older ones go there, llama.cpp answers seq_pos_min from it, and can_shift is false.
 * Two sequences of 1100 tokens decoded 200 at a time (last logits only, ubatches of 64), then
 * greedy steps of both together, in a unified and a split cache; then the saved state, and one
 * sequence's sliding layers saved and restored on their own before decoding on. */
static void sliding_cache(struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_model_n_swa);
    if (p_llama_model_n_swa(model) <= 0) return;
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_can_shift);
    DL_LOAD(llama_memory_seq_pos_min);
    DL_LOAD(llama_memory_seq_pos_max);
    DL_LOAD(llama_state_get_size);
    DL_LOAD(llama_state_get_data);
    DL_LOAD(llama_state_seq_get_size_ext);
    DL_LOAD(llama_state_seq_get_data_ext);
    DL_LOAD(llama_state_seq_set_data_ext);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    static llama_token ids[4096];
    enum { N_DOC = 1100, CHUNK = 200 };
    int n = 0;
    for (int r = 0; n < N_DOC; r++) {
        const char *text = PROMPTS[r % N_PROMPTS];
        n += p_llama_tokenize(vocab, text, (int)strlen(text), ids + n, 4096 - n, n == 0, true);
    }
    for (int unified = 0; unified < 2; unified++) {
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 4096;
        cp.n_batch = 2 * CHUNK;
        cp.n_ubatch = 64;
        cp.n_seq_max = 2;
        cp.kv_unified = unified;
        cp.swa_full = false;
        struct llama_context *ctx = dl_new_context(model, cp);
        llama_memory_t mem = ctx ? p_llama_get_memory(ctx) : NULL;
        if (!mem) {
            printf("sliding cache unified %d: no context\n", unified);
            p_llama_free(ctx);
            continue;
        }
        printf("sliding cache unified %d can_shift %d\n", unified, p_llama_memory_can_shift(mem));
        struct llama_batch b = p_llama_batch_init(2 * CHUNK, 0, 1);
        int rc = 0, last[2] = {0, 0};
        for (int at = 0; at < N_DOC && rc == 0; at += CHUNK) {
            b.n_tokens = 0;
            for (int s = 0; s < 2; s++) {
                int len = N_DOC - at < CHUNK ? N_DOC - at : CHUNK;
                append_seq(&b, ids + at + s, len, s, false);
                for (int j = b.n_tokens - len; j < b.n_tokens; j++) b.pos[j] += at;
                last[s] = b.n_tokens - 1;
            }
            rc = dl_decode(ctx, b);
            for (int s = 0; s < 2 && rc == 0; s++) {
                printf("sliding cache unified %d at %d seq %d pos %d..%d:", unified, at, s,
                       (int)p_llama_memory_seq_pos_min(mem, s), (int)p_llama_memory_seq_pos_max(mem, s));
                print_row(p_llama_get_logits_ith(ctx, last[s]), n_vocab);
            }
        }
        for (int step = 0; step < 3 && rc == 0; step++) {
            llama_token tok[2];
            for (int s = 0; s < 2; s++) {
                const float *row = p_llama_get_logits_ith(ctx, last[s]);
                tok[s] = 0;
                for (int i = 1; i < n_vocab; i++) {
                    if (row[i] > row[tok[s]]) tok[s] = i;
                }
            }
            b.n_tokens = 0;
            for (int s = 0; s < 2; s++) {
                append_seq(&b, &tok[s], 1, s, true);
                b.pos[s] = N_DOC + step;
                last[s] = s;
            }
            rc = dl_decode(ctx, b);
            for (int s = 0; s < 2 && rc == 0; s++) {
                printf("sliding cache unified %d step %d seq %d pos %d..%d:", unified, step, s,
                       (int)p_llama_memory_seq_pos_min(mem, s), (int)p_llama_memory_seq_pos_max(mem, s));
                print_row(p_llama_get_logits_ith(ctx, s), n_vocab);
            }
        }
        if (rc == 0) {
            size_t size = p_llama_state_get_size(ctx);
            unsigned char *state = malloc(size);
            size_t got = p_llama_state_get_data(ctx, state, size);
            printf("sliding cache unified %d state %zu bytes %016llx\n", unified, got,
                   (unsigned long long)hash_bytes(state, got));
            free(state);
            const llama_state_seq_flags partial = LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY;
            size = p_llama_state_seq_get_size_ext(ctx, 1, partial);
            state = malloc(size);
            got = p_llama_state_seq_get_data_ext(ctx, state, size, 1, partial);
            size_t set = p_llama_state_seq_set_data_ext(ctx, state, got, 1, partial);
            printf("sliding cache unified %d seq 1 partial %zu bytes %016llx set %zu pos %d..%d\n", unified, got,
                   (unsigned long long)hash_bytes(state, got), set, (int)p_llama_memory_seq_pos_min(mem, 1),
                   (int)p_llama_memory_seq_pos_max(mem, 1));
            free(state);
            b.n_tokens = 0;
            append_seq(&b, ids, 1, 1, true);
            b.pos[0] = N_DOC + 3;
            rc = dl_decode(ctx, b);
            printf("sliding cache unified %d restored rc %d:", unified, rc);
            if (rc == 0) {
                print_row(p_llama_get_logits_ith(ctx, 0), n_vocab);
            } else {
                printf("\n");
            }
        }
        printf("sliding cache unified %d rc %d\n", unified, rc);
        p_llama_batch_free(b);
        p_llama_free(ctx);
    }
}

/* Sequences sharing cells, as parallel decoding makes them (one cache for all): a prompt over
 * several ubatches copied to two more sequences, each going its own way, a token of two sequences
 * at once (not in recurrent state, which refuses it), then edits that end the sharing (removing a
 * whole sequence, keeping one) or regroup a sequence's first positions (removing its head,
 * shifting it), each followed by a decode, and the saved state at the end. */
static void shared_cells(struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_state_get_size);
    DL_LOAD(llama_state_get_data);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_seq_cp);
    DL_LOAD(llama_memory_seq_rm);
    DL_LOAD(llama_memory_seq_keep);
    DL_LOAD(llama_memory_seq_add);
    DL_LOAD(llama_memory_seq_pos_min);
    DL_LOAD(llama_memory_seq_pos_max);
    DL_LOAD(llama_memory_can_shift);
    DL_LOAD(llama_model_is_recurrent);
    DL_LOAD(llama_model_is_hybrid);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    bool states = p_llama_model_is_recurrent(model) || p_llama_model_is_hybrid(model);
    llama_token ids[256];
    int n = p_llama_tokenize(vocab, PROMPTS[2], (int)strlen(PROMPTS[2]), ids, 256, true, true);
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    cp.n_ubatch = 16;
    cp.n_seq_max = 4;
    cp.kv_unified = true;
    struct llama_context *ctx = dl_new_context(model, cp);
    llama_memory_t mem = ctx ? p_llama_get_memory(ctx) : NULL;
    if (!mem || n < 2) {
        printf("shared cells: no context\n");
        p_llama_free(ctx);
        return;
    }
    struct llama_batch b = p_llama_batch_init(256, 0, 2);
    b.n_tokens = 0;
    append_seq(&b, ids, n, 0, false);
    int rc = dl_decode(ctx, b);
    printf("shared cells prompt %d rc %d:", n, rc);
    if (rc != 0) {
        printf("\n");
        p_llama_batch_free(b);
        p_llama_free(ctx);
        return;
    }
    const float *row = p_llama_get_logits_ith(ctx, -1);
    print_row(row, n_vocab);
    llama_token tok[3];
    for (int s = 0; s < 3; s++) tok[s] = greedy(row, n_vocab, s);
    p_llama_memory_seq_cp(mem, 0, 1, -1, -1);
    p_llama_memory_seq_cp(mem, 0, 2, -1, -1);
    int pos = n, last[3] = {0, 1, 2};
    /* Each step: the sequences in `live` take their next token (`pair`: sequences 1 and 2 take one
     * token together). */
    for (int step = 0; step < 6; step++) {
        bool live[3] = {step < 4, step < 2, true};
        bool pair = step == 1 && !states;
        const char *edit = "";
        bool ok = true;
        if (step == 2) {
            edit = "rm seq 1";
            ok = p_llama_memory_seq_rm(mem, 1, -1, -1);
        } else if (step == 3) {
            edit = "keep seq 2";
            p_llama_memory_seq_keep(mem, 2);
            live[0] = false;
        } else if (step == 4) {
            edit = "rm head of seq 2";
            ok = p_llama_memory_seq_rm(mem, 2, 0, 3);
        } else if (step == 5) {
            edit = "shift seq 2";
            ok = p_llama_memory_can_shift(mem);
            if (ok) p_llama_memory_seq_add(mem, 2, 5, -1, -2);
            pos -= ok ? 2 : 0;
        }
        b.n_tokens = 0;
        for (int s = 0; s < 3; s++) {
            if (!live[s] || (pair && s == 2)) continue;
            int j = b.n_tokens++;
            b.token[j] = tok[s];
            b.pos[j] = pos;
            b.n_seq_id[j] = pair && s == 1 ? 2 : 1;
            b.seq_id[j][0] = s;
            b.seq_id[j][1] = 2;
            b.logits[j] = 1;
            last[s] = j;
        }
        if (pair) last[2] = last[1];
        rc = dl_decode(ctx, b);
        printf("shared cells step %d (%s%s) ok %d rc %d\n", step, edit, pair ? "; one token of seqs 1 and 2" : "",
               ok, rc);
        if (rc != 0) break;
        for (int s = 0; s < 3; s++) {
            if (!live[s]) continue;
            row = p_llama_get_logits_ith(ctx, last[s]);
            printf("shared cells step %d seq %d pos %d..%d:", step, s, (int)p_llama_memory_seq_pos_min(mem, s),
                   (int)p_llama_memory_seq_pos_max(mem, s));
            print_row(row, n_vocab);
            tok[s] = greedy(row, n_vocab, 0);
        }
        pos++;
    }
    size_t size = p_llama_state_get_size(ctx);
    unsigned char *state = malloc(size);
    size_t got = p_llama_state_get_data(ctx, state, size);
    printf("shared cells state %zu bytes %016llx\n", got, (unsigned long long)hash_bytes(state, got));
    free(state);
    p_llama_batch_free(b);
    p_llama_free(ctx);
}

/* A prompt of three sequences in per-sequence caches (kv_unified off, as llama-batched runs it):
 * llama.cpp refuses tokens of several sequences there, except in DeepSeek-V4's caches, which
 * write each such token once per sequence (the prompt goes through several ubatches); then each
 * sequence takes two tokens of its own, and one sequence's state is saved. */
static void shared_prompt(struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_state_seq_get_size);
    DL_LOAD(llama_state_seq_get_data);
    llama_token ids[256];
    int n = p_llama_tokenize(p_llama_model_get_vocab(model), PROMPTS[3], (int)strlen(PROMPTS[3]), ids, 256, true,
                             true);
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 2048;
    cp.n_ubatch = 16;
    /* Four streams for three sequences: llama.cpp aborts making a Kimi-Linear context of three. */
    cp.n_seq_max = 4;
    cp.kv_unified = false;
    struct llama_context *ctx = dl_new_context(model, cp);
    if (!ctx || n < 2) {
        printf("shared prompt: no context\n");
        p_llama_free(ctx);
        return;
    }
    struct llama_batch b = p_llama_batch_init(256, 0, 3);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 3;
        for (int s = 0; s < 3; s++) b.seq_id[i][s] = s;
        b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    /* The refusal, where llama.cpp refuses, is what is compared. */
    int rc = dl_decode_may_refuse(ctx, b);
    printf("shared prompt %d rc %d", n, rc);
    if (rc != 0) {
        printf("\n");
        p_llama_batch_free(b);
        p_llama_free(ctx);
        return;
    }
    const float *row = p_llama_get_logits_ith(ctx, -1);
    print_row(row, n_vocab);
    llama_token tok[3];
    for (int s = 0; s < 3; s++) tok[s] = greedy(row, n_vocab, s);
    for (int step = 0; step < 2 && rc == 0; step++) {
        b.n_tokens = 3;
        for (int s = 0; s < 3; s++) {
            b.token[s] = tok[s];
            b.pos[s] = n + step;
            b.n_seq_id[s] = 1;
            b.seq_id[s][0] = s;
            b.logits[s] = 1;
        }
        rc = dl_decode(ctx, b);
        printf("shared prompt step %d rc %d\n", step, rc);
        for (int s = 0; s < 3 && rc == 0; s++) {
            row = p_llama_get_logits_ith(ctx, s);
            printf("shared prompt step %d seq %d:", step, s);
            print_row(row, n_vocab);
            tok[s] = greedy(row, n_vocab, 0);
        }
    }
    size_t size = p_llama_state_seq_get_size(ctx, 1);
    unsigned char *state = malloc(size);
    size_t got = p_llama_state_seq_get_data(ctx, state, size, 1);
    printf("shared prompt seq 1 state %zu bytes %016llx\n", got, (unsigned long long)hash_bytes(state, got));
    free(state);
    p_llama_batch_free(b);
    p_llama_free(ctx);
}

/* The "embd" tensor a cb_eval callback sees when the token path computes it (renamed by some
 * graphs, printed with the data): the prompt's token embeddings (the CPU backend keeps them in
 * host memory). */
static const char *const EMBD_NAMES[] = {"embd", "model.input_embed", "model.embed_tokens", "embedding_output",
                                         "inp_embd"};
static float *captured;
static size_t captured_n;
static char captured_name[64];

static bool capture_embd(struct ggml_tensor *t, bool ask, void *data) {
    (void)data;
    bool embd = false;
    for (size_t i = 0; i < sizeof EMBD_NAMES / sizeof *EMBD_NAMES; i++) embd |= !strcmp(t->name, EMBD_NAMES[i]);
    if (!embd || t->type != GGML_TYPE_F32) return !ask;
    if (ask) return true;
    size_t n = (size_t)(t->ne[0] * t->ne[1]);
    float *grown = realloc(captured, n * sizeof *captured);
    if (grown) {
        captured = grown;
        memcpy(captured, t->data, n * sizeof *captured);
        captured_n = n;
        snprintf(captured_name, sizeof captured_name, "%s", t->name);
    }
    return true;
}

/* Positions for `n` entries from `p0`, as a batch of embeddings takes them: one per entry, or
 * with M-RoPE four sections (the text layout: three copies, then zeros). */
static llama_pos *embd_positions(int n, int p0, int n_pos) {
    llama_pos *pos = calloc((size_t)(n * n_pos), sizeof *pos);
    for (int j = 0; j < n_pos && j < 3; j++) {
        for (int i = 0; i < n; i++) pos[j * n + i] = p0 + i;
    }
    return pos;
}

/* Inputs that are not token ids: the prompt's token embeddings decoded as embeddings (through a
 * llama_batch at n_ubatch 7, after a part given as tokens, through the extended batch), and the
 * extended batch's refusals. Each logits row is printed with whether it equals the tokens' own. */
static void embedding_inputs(struct llama_model *model, const llama_token *ids, int n, int n_vocab, bool encoder) {
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_get_memory);
    DL_LOAD(llama_memory_clear);
    DL_LOAD(llama_memory_seq_pos_max);
    DL_LOAD(llama_model_n_embd);
    DL_LOAD(llama_model_rope_type);
    DL_LOAD(llama_batch_ext_init);
    DL_LOAD(llama_batch_ext_free);
    DL_LOAD(llama_batch_ext_add_embd);
    DL_LOAD(llama_batch_ext_add_token);
    DL_LOAD(llama_batch_ext_set_embd_token);
    DL_LOAD(llama_batch_ext_set_embd_state);
    DL_LOAD(llama_batch_ext_set_pos);
    DL_LOAD(llama_batch_ext_set_output_logits);
    DL_LOAD(llama_process);
    int n_embd = p_llama_model_n_embd(model);
    enum llama_rope_type rope = p_llama_model_rope_type(model);
    int n_pos = rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE ? 4 : 1;
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    cp.cb_eval = capture_embd;
    struct llama_context *ctx = dl_new_context(model, cp);
    struct llama_batch b = p_llama_batch_init(n, 0, 1);
    b.n_tokens = 0;
    append_seq(&b, ids, n, 0, true);
    captured_n = 0;
    int rc = dl_decode(ctx, b);
    p_llama_batch_free(b);
    printf("embd inputs: tokens rc %d, %zu floats", rc, captured_n);
    if (rc != 0 || captured_n != (size_t)n * (size_t)n_embd) {
        printf("\n");
        p_llama_free(ctx);
        return;
    }
    printf(" '%s' %016llx\n", captured_name, (unsigned long long)hash_bits(captured, (int)captured_n));
    float *want = malloc(sizeof *want * (size_t)n * (size_t)n_vocab);
    for (int i = 0; i < n; i++) memcpy(want + (size_t)i * n_vocab, p_llama_get_logits_ith(ctx, i), sizeof *want * n_vocab);
    float *rows = malloc(sizeof *rows * captured_n);
    memcpy(rows, captured, sizeof *rows * captured_n);
    p_llama_free(ctx);
    const float *last = want + (size_t)(n - 1) * n_vocab;

    /* A llama_batch of embeddings, every output, over ubatches of 7 (one for an encoder). */
    cp = dl_context_params();
    cp.n_ctx = 512;
    cp.n_ubatch = encoder ? 512 : 7;
    ctx = dl_new_context(model, cp);
    struct llama_memory_i *mem = p_llama_get_memory(ctx);
    struct llama_batch eb = p_llama_batch_init(n, n_embd, 1);
    llama_pos *own_pos = eb.pos;
    eb.pos = embd_positions(n, 0, n_pos);
    eb.n_tokens = n;
    memcpy(eb.embd, rows, sizeof *rows * (size_t)n * n_embd);
    for (int i = 0; i < n; i++) {
        eb.n_seq_id[i] = 1;
        eb.seq_id[i][0] = 0;
        eb.logits[i] = 1;
    }
    rc = dl_decode(ctx, eb);
    int same = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        same += !memcmp(p_llama_get_logits_ith(ctx, i), want + (size_t)i * n_vocab, sizeof *want * n_vocab);
    }
    printf("embd batch rc %d, %d of %d rows as the tokens'", rc, same, n);
    if (rc == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
    else printf("\n");
    free(eb.pos);

    /* The first half as tokens, the rest as embeddings continuing the sequence. */
    int h = n / 2;
    if (mem && h > 0) {
        p_llama_memory_clear(mem, true);
        b = p_llama_batch_init(h, 0, 1);
        b.n_tokens = 0;
        append_seq(&b, ids, h, 0, false);
        rc = dl_decode(ctx, b);
        p_llama_batch_free(b);
        eb.pos = embd_positions(n - h, h, n_pos);
        eb.n_tokens = n - h;
        memcpy(eb.embd, rows + (size_t)h * n_embd, sizeof *rows * (size_t)(n - h) * n_embd);
        for (int i = 0; i < n - h; i++) eb.logits[i] = i == n - h - 1;
        int rc2 = dl_decode(ctx, eb);
        printf("embd after tokens rc %d %d, same %d", rc, rc2,
               rc2 == 0 && !memcmp(p_llama_get_logits_ith(ctx, -1), last, sizeof *last * n_vocab));
        if (rc2 == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
        else printf("\n");
        free(eb.pos);
    }
    eb.pos = own_pos;
    p_llama_batch_free(eb);

    /* The extended batch: each row added as an embedding, the last an output; then refusals. */
    if (mem) p_llama_memory_clear(mem, true);
    struct llama_batch_ext *be = p_llama_batch_ext_init(ctx);
    for (int i = 0; i < n; i++) {
        struct llama_embd e = {rows + (size_t)i * n_embd, 1, (size_t)n_embd};
        int idx = p_llama_batch_ext_add_embd(be, 0, e);
        llama_pos pos[4] = {i, i, i, 0};
        p_llama_batch_ext_set_pos(be, idx, pos);
    }
    p_llama_batch_ext_set_output_logits(be, n - 1, true);
    rc = p_llama_process(ctx, encoder ? LLAMA_PROCESS_TYPE_ENCODE : LLAMA_PROCESS_TYPE_DECODE, be);
    printf("embd ext rc %d, same %d", rc, rc == 0 && !memcmp(p_llama_get_logits_ith(ctx, -1), last, sizeof *last * n_vocab));
    if (rc == 0) print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
    else printf("\n");
    struct llama_embd short_row = {rows, 1, (size_t)n_embd - 1};
    struct llama_embd no_data = {NULL, 1, (size_t)n_embd};
    struct llama_embd split_row = {rows, 2, (size_t)n_embd / 2};
    printf("embd ext refusals: short %d, null %d, twice %d, state %d", p_llama_batch_ext_add_embd(be, 0, short_row),
           p_llama_batch_ext_add_embd(be, 0, no_data), p_llama_batch_ext_set_embd_token(be, 0, split_row),
           p_llama_batch_ext_set_embd_state(be, 0, split_row));
    p_llama_batch_ext_free(be);
    /* An entry of each kind in one batch: refused, nothing stored (printed without "rc": a
     * negative "rc" marks a failed decode for compare.sh). */
    if (mem) p_llama_memory_clear(mem, true);
    be = p_llama_batch_ext_init(ctx);
    llama_pos p0 = 0;
    int t = p_llama_batch_ext_add_token(be, 0, ids[0]);
    p_llama_batch_ext_set_pos(be, t, &p0);
    struct llama_embd row0 = {rows, 1, (size_t)n_embd};
    int e = p_llama_batch_ext_add_embd(be, 0, row0);
    p_llama_batch_ext_set_pos(be, e, (llama_pos[4]){1, 1, 1, 0});
    rc = p_llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, be);
    printf(", mixed %d %d refused with %d, pos max %d\n", t, e, rc, mem ? p_llama_memory_seq_pos_max(mem, 0) : -2);
    p_llama_batch_ext_free(be);
    p_llama_free(ctx);
    free(rows);
    free(want);
}

/* Each prompt decoded as one batch with logits at every position, at `n_ubatch`: every row, the
 * return code and the saved state (llama.cpp's layout), byte for byte. */
static void prompt_logits(struct llama_model *model, int n_vocab, uint32_t n_ubatch, const char *tag) {
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_state_get_size);
    DL_LOAD(llama_state_get_data);
    DL_LOAD(llama_free);
    static llama_token ids[4096];
    for (int p = 0; p < N_PROMPTS; p++) {
        int n = p_llama_tokenize(p_llama_model_get_vocab(model), PROMPTS[p], (int)strlen(PROMPTS[p]), ids, 4096,
                                 true, true);
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 1024;
        cp.n_ubatch = n_ubatch;
        struct llama_context *ctx = dl_new_context(model, cp);
        struct llama_batch b = p_llama_batch_init(n, 0, 1);
        b.n_tokens = 0;
        append_seq(&b, ids, n, 0, true);
        int rc = dl_decode(ctx, b);
        for (int i = 0; i < n && rc == 0; i++) {
            printf("logits%s ub%u p%d pos %d:", tag, n_ubatch, p, i);
            print_row(p_llama_get_logits_ith(ctx, i), n_vocab);
        }
        printf("decode%s ub%u p%d rc %d\n", tag, n_ubatch, p, rc);
        if (rc == 0) {
            size_t size = p_llama_state_get_size(ctx);
            unsigned char *state = malloc(size);
            size_t got = p_llama_state_get_data(ctx, state, size);
            printf("state%s ub%u p%d %zu bytes %016llx\n", tag, n_ubatch, p, got, (unsigned long long)hash_bytes(state, got));
            free(state);
        }
        p_llama_batch_free(b);
        p_llama_free(ctx);
    }
}

/* The greedy next token of a logits row. */
static llama_token greedy_of(const float *row, int n_vocab) {
    llama_token t = 0;
    for (int i = 1; i < n_vocab; i++) {
        if (row[i] > row[t]) t = i;
    }
    return t;
}

/* An encoder-decoder as llama-cli and llama-simple run it: llama_encode the prompt, then decode
 * from the decoder start token (the vocabulary's BOS where the model names none), greedy steps
 * printing every row; at n_ubatch 512 and at the prompt's length, which splits a decoder batch of
 * a whole other prompt (every row an output) into ubatches. Then the state after the steps, saved
 * and restored into a new context that encoded the same prompt (llama.cpp's state holds the
 * decoder's cache, not the encoder's outputs), and two sequences encoded and decoded together
 * in one unified cache (the decoder needs one stream). */
static void encoder_decoder(struct llama_model *model, int n_vocab) {
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_model_decoder_start_token);
    DL_LOAD(llama_vocab_bos);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_state_get_size);
    DL_LOAD(llama_state_get_data);
    DL_LOAD(llama_state_set_data);
    DL_LOAD(llama_free);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    llama_token start = p_llama_model_decoder_start_token(model);
    if (start == LLAMA_TOKEN_NULL) start = p_llama_vocab_bos(vocab);
    static llama_token ids[4096], dec[4096];
    for (int p = 0; p < 3; p++) {
        int n = p_llama_tokenize(vocab, PROMPTS[p], (int)strlen(PROMPTS[p]), ids, 4096, true, true);
        int n_dec = p_llama_tokenize(vocab, PROMPTS[p + 3], (int)strlen(PROMPTS[p + 3]), dec + 1, 4095, false, true) + 1;
        dec[0] = start;
        for (int variant = 0; variant < 2; variant++) {
            struct llama_context_params cp = dl_context_params();
            cp.n_ctx = 512;
            cp.n_ubatch = variant ? (uint32_t)n : 512;
            struct llama_context *ctx = dl_new_context(model, cp);
            int rc = dl_encode(ctx, p_llama_batch_get_one(ids, n));
            /* The other prompt after the start token, every row an output. */
            struct llama_batch b = p_llama_batch_init(n_dec, 0, 1);
            b.n_tokens = 0;
            append_seq(&b, dec, n_dec, 0, true);
            if (rc == 0) rc = dl_decode(ctx, b);
            for (int i = 0; i < n_dec && rc == 0; i++) {
                printf("encdec p%d ub%u forced %d:", p, cp.n_ubatch, i);
                print_row(p_llama_get_logits_ith(ctx, i), n_vocab);
            }
            p_llama_batch_free(b);
            p_llama_free(ctx);
        }
        /* From the start token, greedy steps; the state after them. */
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 512;
        struct llama_context *ctx = dl_new_context(model, cp);
        int rc = dl_encode(ctx, p_llama_batch_get_one(ids, n));
        llama_token tok = start;
        for (int step = 0; step < 8 && rc == 0; step++) {
            rc = dl_decode(ctx, p_llama_batch_get_one(&tok, 1));
            if (rc != 0) break;
            printf("encdec p%d step %d:", p, step);
            const float *row = p_llama_get_logits_ith(ctx, -1);
            print_row(row, n_vocab);
            tok = greedy_of(row, n_vocab);
        }
        size_t size = p_llama_state_get_size(ctx);
        unsigned char *state = malloc(size);
        size_t got = p_llama_state_get_data(ctx, state, size);
        printf("encdec p%d state %zu bytes %016llx\n", p, got, (unsigned long long)hash_bytes(state, got));
        struct llama_context *ctx2 = dl_new_context(model, cp);
        int rc2 = dl_encode(ctx2, p_llama_batch_get_one(ids, n));
        size_t set = p_llama_state_set_data(ctx2, state, got);
        for (int k = 0; k < 2 && rc == 0 && rc2 == 0; k++) {
            struct llama_context *c = k ? ctx2 : ctx;
            llama_token t = tok;
            int r = dl_decode(c, p_llama_batch_get_one(&t, 1));
            printf("encdec p%d %s rc %d set %zu:", p, k ? "restored" : "continued", r, set);
            if (r == 0) print_row(p_llama_get_logits_ith(c, -1), n_vocab);
            else printf("\n");
        }
        free(state);
        p_llama_free(ctx2);
        p_llama_free(ctx);
    }
    /* Two sequences encoded together, decoded side by side. */
    struct llama_context_params cp = dl_context_params();
    cp.n_ctx = 512;
    cp.n_seq_max = 2;
    cp.kv_unified = true;
    struct llama_context *ctx = dl_new_context(model, cp);
    struct llama_batch b = p_llama_batch_init(512, 0, 1);
    b.n_tokens = 0;
    for (int s = 0; s < 2; s++) {
        int n = p_llama_tokenize(vocab, PROMPTS[s + 1], (int)strlen(PROMPTS[s + 1]), ids, 4096, true, true);
        append_seq(&b, ids, n, s, true);
    }
    int rc = dl_encode(ctx, b);
    llama_token toks[2] = {start, start};
    for (int step = 0; step < 4 && rc == 0; step++) {
        b.n_tokens = 0;
        for (int s = 0; s < 2; s++) {
            b.token[s] = toks[s];
            b.pos[s] = step;
            b.n_seq_id[s] = 1;
            b.seq_id[s][0] = s;
            b.logits[s] = 1;
            b.n_tokens++;
        }
        rc = dl_decode(ctx, b);
        for (int s = 0; s < 2 && rc == 0; s++) {
            const float *row = p_llama_get_logits_ith(ctx, s);
            printf("encdec two sequences step %d seq %d:", step, s);
            print_row(row, n_vocab);
            toks[s] = greedy_of(row, n_vocab);
        }
    }
    p_llama_batch_free(b);
    p_llama_free(ctx);
}

int main(int argc, char **argv) {
    bool arch_only = false;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "arch") == 0) {
            arch_only = true;
        } else if (strncmp(argv[i], "sections=", 9) == 0) {
            only_sections = argv[i] + 9;
        } else if (strncmp(argv[i], "skip=", 5) == 0) {
            skip_sections = argv[i] + 5;
        } else {
            argc = 0;
        }
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIBRARY MODEL [arch] [sections=NAME,...] [skip=NAME,...]\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_vocab_is_eog);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_detokenize);
    DL_LOAD(llama_free);
    DL_LOAD(llama_batch_init);
    DL_LOAD(llama_batch_free);
    DL_LOAD(llama_batch_get_one);
    DL_LOAD(llama_get_logits_ith);
    DL_LOAD(llama_sampler_sample);
    DL_LOAD(llama_sampler_free);
    struct llama_model *model = dl_load_model(argv[2], p_llama_model_default_params());
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    int n_vocab = p_llama_vocab_n_tokens(vocab);
    DL_LOAD(llama_model_has_encoder);
    DL_LOAD(llama_model_has_decoder);
    encoder_decoder_model = p_llama_model_has_encoder(model) && p_llama_model_has_decoder(model);
    if (section("small")) small_functions(argv[2], model, n_vocab);
    /* An encoder (a context without memory) takes each batch in one ubatch (llama.cpp aborts
     * otherwise): the sections with batches longer than a ubatch are left out for it. */
    bool encoder;
    {
        DL_LOAD(llama_get_memory);
        struct llama_context *ctx = dl_new_context(model, dl_context_params());
        encoder = ctx && !p_llama_get_memory(ctx);
        p_llama_free(ctx);
        printf("encoder %d\n", encoder);
    }
    /* An encoder-decoder's (or its encoder's) facts: llama_encode runs it beside the memory. */
    DL_LOAD(llama_model_decoder_start_token);
    bool has_encoder = p_llama_model_has_encoder(model);
    if (has_encoder || !p_llama_model_has_decoder(model)) {
        printf("has encoder %d decoder %d, decoder start token %d\n", has_encoder, p_llama_model_has_decoder(model),
               p_llama_model_decoder_start_token(model));
    }
    if (encoder_decoder_model && section("encdec")) encoder_decoder(model, n_vocab);
    if (section("rollback")) rollback(model, n_vocab);
    static char text[4096], out[1 << 16];
    static llama_token ids[4096];
    /* Not GLM-4 or GLM-4.5 files without M-RoPE sections: llama.cpp aborts the process on an
     * embedding input there (the engine refuses the batch). */
    DL_LOAD(llama_model_rope_type);
    bool glm_text = arch_is(model, "glm4") || arch_is(model, "glm4moe");
    if (section_if("embd_inputs", !glm_text || p_llama_model_rope_type(model) == LLAMA_ROPE_TYPE_MROPE,
                   "llama.cpp aborts on an embedding input to GLM-4 without M-RoPE sections")) {
        int n = p_llama_tokenize(vocab, PROMPTS[1], (int)strlen(PROMPTS[1]), ids, 4096, true, true);
        embedding_inputs(model, ids, n, n_vocab, encoder);
    }

    if (section("tokenize")) {
        for (int t = 0; t < 300; t++) {
            int len = 0, n_pieces = 1 + (int)(next_u32() % 12);
            for (int p = 0; p < n_pieces && len < 3000; p++) {
                if (next_u32() % 8 == 0) {
                    text[len++] = (char)(next_u32() % 256 | 1); // a byte that may break UTF-8
                } else {
                    const char *s = PIECES[next_u32() % N_PIECES];
                    memcpy(text + len, s, strlen(s));
                    len += (int)strlen(s);
                }
            }
            for (int mode = 0; mode < 4; mode++) {
                int n = p_llama_tokenize(vocab, text, len, ids, 4096, mode & 1, mode >> 1);
                printf("tok %d.%d %d:", t, mode, n);
                for (int i = 0; i < n; i++) printf(" %d", ids[i]);
                for (int flags = 0; flags < 4 && n >= 0; flags++) {
                    int d = p_llama_detokenize(vocab, ids, n, out, sizeof out, flags & 1, flags >> 1);
                    printf(" |%d:", d);
                    for (int i = 0; i < d; i++) printf("%02x", (unsigned char)out[i]);
                }
                printf("\n");
            }
        }
    }

    if (section("logits")) {
        for (int ub = 0; ub < (encoder ? 1 : 2); ub++) prompt_logits(model, n_vocab, ub ? 7 : 512, "");
    }
    /* The same with every weight read from the file (llama.h's use_extra_bufts off): the CPU's
     * plain kernels where the repacked ones ran. */
    if (section("plain_weights")) {
        struct llama_model_params mp = p_llama_model_default_params();
        mp.use_extra_bufts = false;
        struct llama_model *plain = dl_load_model(argv[2], mp);
        prompt_logits(plain, n_vocab, 512, " plain");
        DL_LOAD(llama_model_free);
        p_llama_model_free(plain);
    }

    /* Several sequences in one batch. Not with PLaMo 2: llama.cpp 0.3.36 stores a
     * multi-sequence ubatch's recurrent states at cell head x n_seqs rather than at the head,
     * over other sequences' states (and aborts once that passes the cache's end). */
    bool multiseq = !arch_is(model, "plamo2");
    /* T5's encoder: llama.cpp 0.3.36 asserts filling its relative position buckets for a ubatch
     * split per sequence, which a cache of a stream per sequence makes (kv_unified off, several
     * sequences): only unified caches for it. */
    bool split_streams = !arch_is(model, "t5encoder");
    const char *t5_streams = "llama.cpp 0.3.36 asserts on T5's position buckets in a ubatch split per sequence";
    const char *plamo2_multiseq = "llama.cpp 0.3.36 stores a multi-sequence ubatch's PLaMo-2 states at the wrong cells";
    if (section_if("multiseq", multiseq, plamo2_multiseq)) {
        if (!split_streams) printf("skipped multiseq unified 0: %s\n", t5_streams);
        for (int unified = !split_streams; unified < 2; unified++) {
            struct llama_context_params cp = dl_context_params();
            cp.n_ctx = 2048;
            cp.n_seq_max = 4;
            cp.kv_unified = unified;
            struct llama_context *ctx = dl_new_context(model, cp);
            struct llama_batch b = p_llama_batch_init(512, 0, 1);
            int last[4];
            b.n_tokens = 0;
            for (int s = 0; s < 4; s++) {
                int n = p_llama_tokenize(vocab, PROMPTS[s + 2], (int)strlen(PROMPTS[s + 2]), ids, 4096, true, true);
                append_seq(&b, ids, n, s, false);
                last[s] = b.n_tokens - 1;
            }
            int rc = dl_decode(ctx, b);
            for (int s = 0; s < 4 && rc == 0; s++) {
                printf("multiseq unified %d seq %d:", unified, s);
                print_row(p_llama_get_logits_ith(ctx, last[s]), n_vocab);
            }
            printf("multiseq unified %d rc %d\n", unified, rc);
            p_llama_batch_free(b);
            p_llama_free(ctx);
        }
    }
    if (section_if("shared", !encoder && multiseq, encoder ? "an encoder" : plamo2_multiseq)) {
        shared_cells(model, n_vocab);
        shared_prompt(model, n_vocab);
    }

    /* Short chats beside a long document (longer than a ubatch), then greedy steps of all four
     * sequences together: where each sequence's keys land in the cache decides the bits. */
    if (section_if("multiseq_long", !encoder && multiseq, encoder ? "an encoder" : plamo2_multiseq)) {
        if (!split_streams) printf("skipped multiseq_long unified 0: %s\n", t5_streams);
        for (int unified = !split_streams; unified < 2; unified++) {
            struct llama_context_params cp = dl_context_params();
            cp.n_ctx = 4096;
            cp.n_batch = 2048;
            cp.n_seq_max = 4;
            cp.kv_unified = unified;
            struct llama_context *ctx = dl_new_context(model, cp);
            struct llama_batch b = p_llama_batch_init(2048, 0, 1);
            int last[4], next_pos[4];
            b.n_tokens = 0;
            for (int s = 0; s < 4; s++) {
                int n = 0;
                for (int r = 0; s == 3 ? n < 700 : r < 1; r++) {
                    const char *text = PROMPTS[(s + r) % N_PROMPTS];
                    n += p_llama_tokenize(vocab, text, (int)strlen(text), ids + n, 4096 - n, n == 0, true);
                }
                append_seq(&b, ids, n, s, false);
                last[s] = b.n_tokens - 1;
                next_pos[s] = n;
            }
            int rc = dl_decode(ctx, b);
            for (int step = 0; step < 4 && rc == 0; step++) {
                llama_token tok[4];
                for (int s = 0; s < 4; s++) {
                    const float *row = p_llama_get_logits_ith(ctx, last[s]);
                    printf("multiseq long unified %d step %d seq %d:", unified, step, s);
                    print_row(row, n_vocab);
                    tok[s] = 0;
                    for (int i = 1; i < n_vocab; i++) {
                        if (row[i] > row[tok[s]]) tok[s] = i;
                    }
                }
                b.n_tokens = 0;
                for (int s = 0; s < 4; s++) {
                    b.token[s] = tok[s];
                    b.pos[s] = next_pos[s]++;
                    b.n_seq_id[s] = 1;
                    b.seq_id[s][0] = s;
                    b.logits[s] = 1;
                    last[s] = s;
                    b.n_tokens++;
                }
                rc = dl_decode(ctx, b);
            }
            printf("multiseq long unified %d rc %d\n", unified, rc);
            p_llama_batch_free(b);
            p_llama_free(ctx);
        }
    }

    /* One prompt longer than a ubatch with logits for its last token only (how every chat starts),
     * then greedy steps (single-token attention over 512 cells and more splits the cells among the
     * threads); again with a small ubatch and without flash attention, and with quantized caches:
     * Q8_0 keys and values (which llama.cpp rotates by Walsh-Hadamard before quantizing, where
     * heads are a multiple of 64 wide), Q4_0 keys with the rotation turned off
     * (LLAMA_ATTN_ROT_DISABLE, read when a context is made). The rotated context then shifts the
     * sequence back over its first 100 cells (a K-shift through the rotation) and decodes on;
     * llama.cpp's K-shift of a quantized cache without the rotation dereferences a missing
     * matrix and crashes, so the Q4_0 context is not shifted, nor one whose heads are not a
     * multiple of 64 wide (or of unknown width: latent attention); nor is a cache that cannot
     * shift (llama.cpp's DeepSeek-V4 cache aborts on it). */
    if (section_if("long_prompt", !encoder, "an encoder")) {
        for (int variant = 0; variant < 4; variant++) {
            struct llama_context_params cp = dl_context_params();
            cp.n_ctx = 2048;
            cp.n_batch = 2048;
            cp.n_ubatch = variant ? 64 : 512;
            if (variant == 1) {
                cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            }
            if (variant == 2) {
                cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
                cp.type_k = GGML_TYPE_Q8_0;
                cp.type_v = GGML_TYPE_Q8_0;
            }
            if (variant == 3) {
                cp.type_k = GGML_TYPE_Q4_0;
                setenv("LLAMA_ATTN_ROT_DISABLE", "1", 1);
            }
            /* A quantized cache may be refused (blocks that do not divide the heads, a quantized V
             * cache without flash attention): the row then says so, and the comparison shows
             * llama.cpp refusing it too. Any other context must be made. */
            struct llama_context *ctx = variant >= 2 ? dl_new_context_may_refuse(model, cp) : dl_new_context(model, cp);
            if (!ctx) {
                printf("refused: long prompt variant %d: no context with a quantized cache for this model\n", variant);
                unsetenv("LLAMA_ATTN_ROT_DISABLE");
                continue;
            }
            int head_k = key_head_width(model);
            int n = 0;
            for (int r = 0; n < 1100; r++) {
                const char *text = PROMPTS[r % N_PROMPTS];
                n += p_llama_tokenize(vocab, text, (int)strlen(text), ids + n, 4096 - n, n == 0, true);
            }
            struct llama_batch b = p_llama_batch_init(n, 0, 1);
            b.n_tokens = 0;
            append_seq(&b, ids, n, 0, false);
            int rc = dl_decode(ctx, b);
            for (int step = 0; step < 4 && rc == 0; step++) {
                const float *row = p_llama_get_logits_ith(ctx, -1);
                printf("long prompt variant %d step %d:", variant, step);
                print_row(row, n_vocab);
                llama_token tok = 0;
                for (int i = 1; i < n_vocab; i++) {
                    if (row[i] > row[tok]) tok = i;
                }
                rc = dl_decode(ctx, p_llama_batch_get_one(&tok, 1));
            }
            printf("long prompt variant %d tokens %d rc %d\n", variant, n, rc);
            DL_LOAD(llama_get_memory);
            DL_LOAD(llama_memory_can_shift);
            if (variant == 2 && rc == 0 && head_k % 64 == 0 && p_llama_memory_can_shift(p_llama_get_memory(ctx))) {
                DL_LOAD(llama_memory_seq_rm);
                DL_LOAD(llama_memory_seq_add);
                llama_memory_t mem = p_llama_get_memory(ctx);
                bool rm = p_llama_memory_seq_rm(mem, 0, 1, 101);
                p_llama_memory_seq_add(mem, 0, 101, -1, -100);
                llama_token tok = ids[n / 2];
                rc = dl_decode(ctx, p_llama_batch_get_one(&tok, 1));
                printf("long prompt variant %d shifted rm %d rc %d:", variant, rm, rc);
                if (rc == 0) {
                    print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
                } else {
                    printf("\n");
                }
            }
            unsetenv("LLAMA_ATTN_ROT_DISABLE");
            p_llama_batch_free(b);
            p_llama_free(ctx);
        }
    }

    /* A sequence's sliding-window layers saved and restored on their own (llama-server's context
     * checkpoints; the whole state on models without such layers), then decoding goes on. */
    if (section("partial_state")) {
        DL_LOAD(llama_state_seq_get_size_ext);
        DL_LOAD(llama_state_seq_get_data_ext);
        DL_LOAD(llama_state_seq_set_data_ext);
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 1024;
        struct llama_context *ctx = dl_new_context(model, cp);
        int n = p_llama_tokenize(vocab, PROMPTS[1], (int)strlen(PROMPTS[1]), ids, 4096, true, true);
        int rc = dl_decode(ctx, p_llama_batch_get_one(ids, n));
        size_t size = p_llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        unsigned char *state = malloc(size);
        size_t got = p_llama_state_seq_get_data_ext(ctx, state, size, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < got; i++) h = (h ^ state[i]) * 1099511628211ull;
        size_t set = p_llama_state_seq_set_data_ext(ctx, state, got, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        printf("partial state %zu bytes %016llx set %zu rc %d\n", got, (unsigned long long)h, set, rc);
        llama_token tok = 0;
        const float *row = p_llama_get_logits_ith(ctx, -1);
        for (int i = 1; i < n_vocab; i++) {
            if (row[i] > row[tok]) tok = i;
        }
        rc = dl_decode(ctx, p_llama_batch_get_one(&tok, 1));
        printf("partial state next rc %d:", rc);
        print_row(p_llama_get_logits_ith(ctx, -1), n_vocab);
        free(state);
        p_llama_free(ctx);
    }
    if (section_if("sliding", !encoder, "an encoder")) sliding_cache(model, n_vocab);

    /* A restore that fails part way (a corrupted state of one sequence) must leave nothing that
     * another sequence's attention reads: without flash attention, rows left in free cells would
     * turn its logits to NaN (llama.cpp's test-save-load-state, test 9). */
    if (section_if("failed_restore", !encoder, "an encoder")) {
        DL_LOAD(llama_get_memory);
        DL_LOAD(llama_memory_clear);
        DL_LOAD(llama_memory_seq_rm);
        DL_LOAD(llama_memory_seq_pos_max);
        DL_LOAD(llama_state_seq_get_size);
        DL_LOAD(llama_state_seq_get_data);
        DL_LOAD(llama_state_seq_set_data);
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 256;
        cp.n_seq_max = 4;
        cp.kv_unified = true;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        struct llama_context *ctx = dl_new_context(model, cp);
        llama_memory_t mem = ctx ? p_llama_get_memory(ctx) : NULL;
        llama_token save[64], verify[64];
        int n_save = p_llama_tokenize(vocab, PROMPTS[4], (int)strlen(PROMPTS[4]), save, 64, true, true);
        int n_verify = p_llama_tokenize(vocab, PROMPTS[0], (int)strlen(PROMPTS[0]), verify, 64, true, true);
        struct llama_batch b = p_llama_batch_init(64, 0, 1);
        for (int round = 0; round < 2 && mem; round++) {
            p_llama_memory_clear(mem, true);
            if (round == 1) {
                b.n_tokens = 0;
                append_seq(&b, save, n_save, 0, false);
                int rc = dl_decode(ctx, b);
                size_t size = p_llama_state_seq_get_size(ctx, 0);
                unsigned char *state = malloc(size);
                size_t got = p_llama_state_seq_get_data(ctx, state, size, 0);
                p_llama_memory_seq_rm(mem, 0, -1, -1);
                /* From past the cells' positions (into the first layer's rows) to three
                 * quarters of the state: a hybrid's attention part may read back whole, its
                 * recurrent part not. */
                if (got > 1024) memset(state + 256, 0xff, got * 3 / 4 - 256);
                size_t set = p_llama_state_seq_set_data(ctx, state, got, 0);
                printf("failed restore: decode rc %d, %zu bytes, set %zu, seq 0 pos max %d\n", rc, got, set,
                       (int)p_llama_memory_seq_pos_max(mem, 0));
                free(state);
            }
            b.n_tokens = 0;
            append_seq(&b, verify, n_verify, 1, false);
            int rc = dl_decode(ctx, b);
            printf("failed restore round %d other sequence rc %d:", round, rc);
            if (rc == 0) {
                print_row(p_llama_get_logits_ith(ctx, b.n_tokens - 1), n_vocab);
            } else {
                printf("\n");
            }
        }
        p_llama_batch_free(b);
        p_llama_free(ctx);
    }

    /* llama.cpp 0.3.36 sizes Qwen4-exp's and DeepSeek 4's embeddings as hc_count times n_embd
     * (its n_embd_out) and reads that many values per row from an n_embd-wide output: it aborts. */
    bool embd_out_wide = arch_is(model, "qwen4exp") || arch_is(model, "deepseek4");
    bool embeddings = section_if("embeddings", !embd_out_wide, "llama.cpp 0.3.36 reads past its output here");
    DL_LOAD(llama_get_embeddings);
    DL_LOAD(llama_get_embeddings_seq);
    /* Embeddings are n_embd_out wide (LFM2-ColBERT's are projected to fewer). */
    DL_LOAD(llama_model_n_embd_out);
    int n_embd = p_llama_model_n_embd_out(model);
    DL_LOAD(llama_model_n_cls_out);
    for (int pooling = LLAMA_POOLING_TYPE_NONE; embeddings && pooling <= LLAMA_POOLING_TYPE_RANK; pooling++) {
        struct llama_context_params cp = dl_context_params();
        cp.n_ctx = 1024;
        cp.n_seq_max = 2;
        cp.kv_unified = true;
        cp.embeddings = true;
        cp.pooling_type = pooling;
        struct llama_context *ctx = dl_new_context(model, cp);
        struct llama_batch b = p_llama_batch_init(512, 0, 1);
        b.n_tokens = 0;
        for (int s = 0; s < 2; s++) {
            int n = p_llama_tokenize(vocab, PROMPTS[s], (int)strlen(PROMPTS[s]), ids, 4096, true, true);
            append_seq(&b, ids, n, s, true);
        }
        int rc = dl_decode(ctx, b);
        if (encoder && rc == 0) {
            /* llama_encode, what llama_decode does on an encoder. */
                    rc = dl_encode(ctx, b);
        }
        /* Then through llama_encode where a model with memory has an encoder (both ways). */
        for (int pass = 0; pass < (has_encoder && !encoder ? 2 : 1); pass++) {
            /* Positions continue the memory's (llama.cpp checks them): from 0 on a cleared one. */
            if (pass == 1) {
                DL_LOAD(llama_get_memory);
                DL_LOAD(llama_memory_clear);
                p_llama_memory_clear(p_llama_get_memory(ctx), true);
                rc = dl_encode(ctx, b);
            }
            printf("embeddings pooling %d%s rc %d:", pooling, pass ? " encoded" : "", rc);
            if (rc == 0 && pooling == LLAMA_POOLING_TYPE_NONE) {
                printf(" %016llx", (unsigned long long)hash_bits(p_llama_get_embeddings(ctx), b.n_tokens * n_embd));
            }
            /* Ranking gives n_cls_out scores per sequence; the other poolings an embedding. */
            int n_seq_out = pooling == LLAMA_POOLING_TYPE_RANK ? (int)p_llama_model_n_cls_out(model) : n_embd;
            for (int s = 0; s < 2 && rc == 0 && pooling != LLAMA_POOLING_TYPE_NONE; s++) {
                printf(" %016llx", (unsigned long long)hash_bits(p_llama_get_embeddings_seq(ctx, s), n_seq_out));
            }
            printf("\n");
        }
        p_llama_batch_free(b);
        p_llama_free(ctx);
    }

    /* Not with Kimi-Linear or MiniMax-01: llama.cpp 0.3.36 aborts in llama_init_from_model when
     * backend samplers are given (a ggml_add shape assert while their graph is reserved). */
    /* LLaMA as an embedding model computes no logits, which llama.cpp's backend samplers assert on. */
    bool embed_only = arch_is(model, "llama-embed");
    if (section_if("backend_sampling",
                   !encoder && split_streams && !embed_only && !arch_is(model, "kimi-linear") &&
                       !arch_is(model, "minimax-01"),
                   encoder          ? "an encoder"
                   : !split_streams ? t5_streams
                   : embed_only     ? "llama.cpp 0.3.36 asserts sampling in the graph of a model without logits"
                                    : "llama.cpp 0.3.36 aborts making a context with backend samplers here")) {
        int n = p_llama_tokenize(vocab, PROMPTS[1], (int)strlen(PROMPTS[1]), ids, 4096, true, true);
        backend_sampling(model, ids, n, n_vocab);
    }

    if (section("sampling")) {
        for (int p = 0; p < (arch_only ? 1 : 3); p++) {
            int n = p_llama_tokenize(vocab, PROMPTS[p], (int)strlen(PROMPTS[p]), ids, 4096, true, true);
            for (int c = 0; c < N_CHAINS; c++) {
                /* Qwen3-TTS's codec head gives -inf to every token the grammar allows: llama.cpp's
                 * grammar sampler then throws out of llama_sampler_sample and the process ends. */
                if (c == N_CHAINS - 1 && arch_is(model, "qwen3tts")) {
                    printf("sample p%d chain %d: not compared (llama.cpp aborts)\n", p, c);
                    continue;
                }
                /* One seed per prompt (the test models' three prompts draw seeds 1, 2 and 3): each
                 * seed's stream and each prompt's logits go through every chain. */
                uint32_t seed = (uint32_t)p + 1;
                struct llama_context_params cp = dl_context_params();
                cp.n_ctx = 1024;
                struct llama_context *ctx = dl_new_context(model, cp);
                struct llama_sampler *s = make_chain(c, seed * 7919u, vocab, n_vocab);
                llama_token toks[4096];
                memcpy(toks, ids, sizeof(llama_token) * (size_t)n);
                struct llama_batch b = p_llama_batch_get_one(toks, n);
                printf("sample p%d chain %d seed %u:", p, c, seed);
                for (int i = 0; i < 16; i++) {
                    if (dl_decode(ctx, b) != 0) {
                        printf(" decode-failed");
                        break;
                    }
                    llama_token t = p_llama_sampler_sample(s, ctx, -1);
                    printf(" %d", t);
                    if (p_llama_vocab_is_eog(vocab, t)) break;
                    toks[0] = t;
                    b = p_llama_batch_get_one(toks, 1);
                }
                printf("\n");
                p_llama_sampler_free(s);
                p_llama_free(ctx);
            }
        }
    }
    return 0;
}
