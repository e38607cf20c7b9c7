/* Multimodal input through llama.cpp's libmtmd, which calls llama.h: a picture or a sound encoded
 * by libmtmd's projector, its embeddings decoded by the library under test (with M-RoPE positions
 * and non-causal attention where the model asks for them), in a chat of two turns. Prints the
 * chunks, the logits of every step (hashes of their bits), greedy text and the sequence's saved
 * state, so that benches/compare.sh compares the two libraries line by line.
 *
 * Linked against llama.cpp's libmtmd and libllama.so.0; benches/swap-run.sh chooses which library
 * is libllama.so.0.
 *   mtmd_bench MODEL MMPROJ MEDIA N_BATCH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "rows.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int n_threads(void) {
    const char *n = getenv("ENGINE_BENCH_THREADS");
    return n && atoi(n) > 0 ? atoi(n) : 1;
}

/* The user's message in the model's chat template (plain text if it has none), after `before`. */
static char *chat_prompt(const struct llama_model *model, const char *before, const char *user) {
    const char *tmpl = llama_model_chat_template(model, NULL);
    struct llama_chat_message msg = {"user", user};
    static char buf[8192];
    int n = tmpl ? llama_chat_apply_template(tmpl, &msg, 1, true, buf, sizeof buf) : -1;
    if (n < 0 || n >= (int)sizeof buf) n = snprintf(buf, sizeof buf, "%s\n", user);
    size_t len = strlen(before) + (size_t)n + 1;
    char *out = malloc(len);
    snprintf(out, len, "%s%s", before, buf);
    return out;
}

static void print_chunks(const mtmd_input_chunks *chunks) {
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk *c = mtmd_input_chunks_get(chunks, i);
        enum mtmd_input_chunk_type type = mtmd_input_chunk_get_type(c);
        printf("chunk %zu: %s, %zu tokens, %d positions", i,
               type == MTMD_INPUT_CHUNK_TYPE_TEXT ? "text" : type == MTMD_INPUT_CHUNK_TYPE_IMAGE ? "image" : "audio",
               mtmd_input_chunk_get_n_tokens(c), (int)mtmd_input_chunk_get_n_pos(c));
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token *ids = mtmd_input_chunk_get_tokens_text(c, &n);
            uint64_t h = 1469598103934665603ull;
            for (size_t j = 0; j < n; j++) h = (h ^ (uint32_t)ids[j]) * 1099511628211ull;
            printf(", ids %016llx", (unsigned long long)h);
        }
        printf("\n");
    }
}

/* Greedy tokens from the last logits, each decoded at the next position; prints each step's logits. */
static llama_pos generate(struct llama_context *ctx, const struct llama_vocab *vocab, llama_pos n_past, int n) {
    int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < n; i++) {
        const float *row = llama_get_logits_ith(ctx, -1);
        if (!row) {
            printf("error: no logits at step %d\n", i);
            return n_past;
        }
        printf("step %d:", i);
        print_row(row, n_vocab);
        llama_token t = greedy(row, n_vocab, 0);
        char piece[64];
        int len = llama_token_to_piece(vocab, t, piece, sizeof piece - 1, 0, true);
        piece[len > 0 ? len : 0] = 0;
        printf("token %d '%s'\n", t, piece);
        struct llama_batch b = llama_batch_get_one(&t, 1);
        if (llama_vocab_is_eog(vocab, t)) break;
        int rc = llama_decode(ctx, b);
        if (rc != 0) {
            printf("error: decode of the generated token %d: %d\n", i, rc);
            return n_past;
        }
        n_past++;
    }
    return n_past;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL MMPROJ MEDIA N_BATCH\n", argv[0]);
        return 2;
    }
    int n_batch = atoi(argv[4]);
    llama_log_set(quiet, NULL);
    mtmd_helper_log_set(quiet, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        printf("error: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 4096;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_batch;
    cp.n_threads = cp.n_threads_batch = n_threads();
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        printf("error: no context\n");
        return 1;
    }

    struct mtmd_context_params mparams = mtmd_context_params_default();
    mparams.use_gpu = false;
    mparams.print_timings = false;
    mparams.warmup = false;
    mparams.n_threads = n_threads();
    mtmd_context *mctx = mtmd_init_from_file(argv[2], model, mparams);
    if (!mctx) {
        printf("error: libmtmd cannot load %s\n", argv[2]);
        return 1;
    }
    printf("vision %d audio %d M-RoPE %d\n", mtmd_support_vision(mctx), mtmd_support_audio(mctx),
           mtmd_decode_use_mrope(mctx));

    /* Two turns, a picture (or sound) in each: the second turn's positions come after the first's. */
    const char *questions[2] = {"Describe this: %s", "And this one? %s What differs?"};
    llama_pos n_past = 0;
    for (int turn = 0; turn < 2; turn++) {
        struct mtmd_helper_bitmap_wrapper media =
            mtmd_helper_bitmap_init_from_file(mctx, argv[3], false, mtmd_helper_init_opt_default());
        if (!media.bitmap) {
            printf("error: cannot read %s\n", argv[3]);
            return 1;
        }
        char user[256];
        snprintf(user, sizeof user, questions[turn], mtmd_default_marker());
        char *prompt = chat_prompt(model, turn == 0 ? "" : "\n", user);
        struct mtmd_input_text text = {prompt, strlen(prompt), turn == 0, true};
        mtmd_input_chunks *chunks = mtmd_input_chunks_init();
        const mtmd_bitmap *bitmaps[1] = {media.bitmap};
        int rc = mtmd_tokenize(mctx, chunks, &text, bitmaps, 1);
        if (rc != 0) {
            printf("error: mtmd_tokenize: %d\n", rc);
            return 1;
        }
        printf("turn %d\n", turn);
        print_chunks(chunks);
        llama_pos new_past = n_past;
        rc = mtmd_helper_eval_chunks(mctx, ctx, chunks, n_past, 0, n_batch, true, &new_past);
        if (rc != 0) {
            printf("error: mtmd_helper_eval_chunks: %d\n", rc);
            return 1;
        }
        printf("evaluated to position %d\n", (int)new_past);
        n_past = generate(ctx, vocab, new_past, 8);

        size_t size = llama_state_seq_get_size(ctx, 0);
        uint8_t *state = malloc(size);
        size_t got = llama_state_seq_get_data(ctx, state, size, 0);
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < got; i++) h = (h ^ state[i]) * 1099511628211ull;
        printf("sequence state: %zu bytes, %016llx\n", got, (unsigned long long)h);
        free(state);
        mtmd_input_chunks_free(chunks);
        mtmd_bitmap_free(media.bitmap);
        free(prompt);
    }
    mtmd_free(mctx);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
