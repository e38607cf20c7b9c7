// What a llama.h library makes of a vocabulary, printed so that two libraries can be compared: a
// hash of every token's piece (with and without special tokens rendered), and for each test case
// of llama.cpp's tokenizer data (VOCAB.inp), the tokens with and without special tokens added and
// parsed, and their detokenization with every flag.
//
//   vocab_bench LIBRARY VOCAB.gguf [CASES]
//
// CASES is a file of test cases in the .inp format (default: VOCAB.gguf.inp).
// VOCAB is loaded vocab-only (llama.cpp's models/ggml-vocab-*.gguf have no weights).
// benches/compare.sh runs it against both libraries for every vocabulary of the pinned sdist and the
// RWKV and PLaMo-2 ones scripts/gen-vocabs.py writes.
// Build: cc -O2 -I include -I <ggml include> -o vocab_bench benches/vocab_bench.c -ldl
#include "dl.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash = 1469598103934665603ull;

static void mix(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        hash = (hash ^ b[i]) * 1099511628211ull;
    }
}

static char *read_file(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0 || (*len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    char *text = malloc((size_t)*len + 1);
    if (!text || fread(text, 1, (size_t)*len, f) != (size_t)*len) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    text[*len] = 0;
    fclose(f);
    return text;
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s LIBRARY VOCAB.gguf [CASES]\n", argv[0]);
        return 1;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_vocab_n_tokens);
    DL_LOAD(llama_token_to_piece);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_detokenize);
    DL_LOAD(llama_model_free);

    struct llama_model_params mp = p_llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = dl_load_model(argv[2], mp);
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);
    const int n_vocab = p_llama_vocab_n_tokens(vocab);
    char piece[1024];
    for (int special = 0; special < 2; special++) {
        for (llama_token t = 0; t < n_vocab; t++) {
            int n = p_llama_token_to_piece(vocab, t, piece, sizeof piece, 0, special);
            mix(&n, sizeof n);
            if (n > 0) {
                mix(piece, (size_t)n);
            }
        }
    }
    printf("pieces of %d tokens: %016llx\n", n_vocab, (unsigned long long)hash);

    char path[4096];
    snprintf(path, sizeof path, "%s", argc == 4 ? argv[3] : "");
    if (argc == 3) {
        snprintf(path, sizeof path, "%s.inp", argv[2]);
    }
    long len;
    char *text = read_file(path, &len);
    static const char SEP[] = "\n__ggml_vocab_test__\n";
    static llama_token tokens[1 << 16];
    static char out[1 << 20];
    int n_cases = 0;
    for (char *p = text; p;) {
        char *end = strstr(p, SEP);
        int n_text = end ? (int)(end - p) : (int)strlen(p);
        hash = 1469598103934665603ull;
        for (int flags = 0; flags < 4; flags++) {
            const bool add_special = flags & 1, parse_special = flags >> 1;
            int n = p_llama_tokenize(vocab, p, n_text, tokens, 1 << 16, add_special, parse_special);
            mix(&n, sizeof n);
            if (n > 0) {
                mix(tokens, sizeof *tokens * (size_t)n);
            }
            for (int detok = 0; detok < 4; detok++) {
                int d = p_llama_detokenize(vocab, tokens, n > 0 ? n : 0, out, sizeof out, detok & 1, detok >> 1);
                mix(&d, sizeof d);
                if (d > 0) {
                    mix(out, (size_t)d);
                }
            }
        }
        printf("case %d (%d bytes): %016llx\n", n_cases++, n_text, (unsigned long long)hash);
        p = end ? end + sizeof SEP - 1 : NULL;
    }
    free(text);
    p_llama_model_free(model);
    return 0;
}
