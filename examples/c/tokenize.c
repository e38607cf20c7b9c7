/* Show how a model's tokenizer splits a text: each token's id, its piece and its attributes.
 *
 * Usage: tokenize [--raw] [--no-add-special] MODEL.gguf [TEXT]
 *   TEXT           the text to tokenize (default: standard input)
 *   --raw          treat special-token texts such as "<|im_start|>" as plain text
 *   --no-add-special  do not add the BOS/EOS tokens the model asks for
 * Only the vocabulary is loaded, so this is quick even for large models. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    *len = n;
    return buf;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0. */
static int utf8_len(const unsigned char *s, int n) {
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n) {
        return 0;
    }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return len;
}

/* The piece with control characters and incomplete UTF-8 (a token may hold part of a character)
 * escaped. */
static void print_escaped(const char *s, int n) {
    const unsigned char *u = (const unsigned char *)s;
    for (int i = 0; i < n;) {
        int len = utf8_len(u + i, n - i);
        if (len > 1) {
            fwrite(u + i, 1, (size_t)len, stdout);
            i += len;
            continue;
        }
        unsigned char c = u[i++];
        if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c == '\\' || c == '\'') {
            printf("\\%c", c);
        } else if (len == 0 || c < 0x20 || c == 0x7f) {
            printf("\\x%02x", c);
        } else {
            putchar(c);
        }
    }
}

static void print_attrs(enum llama_token_attr a) {
    static const struct {
        int bit;
        const char *name;
    } names[] = {
        {LLAMA_TOKEN_ATTR_UNKNOWN, "unknown"},     {LLAMA_TOKEN_ATTR_UNUSED, "unused"},
        {LLAMA_TOKEN_ATTR_NORMAL, "normal"},       {LLAMA_TOKEN_ATTR_CONTROL, "control"},
        {LLAMA_TOKEN_ATTR_USER_DEFINED, "user"},   {LLAMA_TOKEN_ATTR_BYTE, "byte"},
        {LLAMA_TOKEN_ATTR_NORMALIZED, "normalized"}, {LLAMA_TOKEN_ATTR_LSTRIP, "lstrip"},
        {LLAMA_TOKEN_ATTR_RSTRIP, "rstrip"},       {LLAMA_TOKEN_ATTR_SINGLE_WORD, "single-word"},
    };
    const char *sep = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (a & names[i].bit) {
            printf("%s%s", sep, names[i].name);
            sep = ",";
        }
    }
    if (!*sep) {
        fputs("undefined", stdout);
    }
}

int main(int argc, char **argv) {
    bool parse_special = true, add_special = true;
    int arg = 1;
    for (; arg < argc && strncmp(argv[arg], "--", 2) == 0; arg++) {
        if (strcmp(argv[arg], "--raw") == 0) {
            parse_special = false;
        } else if (strcmp(argv[arg], "--no-add-special") == 0) {
            add_special = false;
        } else {
            fprintf(stderr, "unknown option %s\n", argv[arg]);
            return 2;
        }
    }
    if (arg >= argc || argc - arg > 2) {
        fprintf(stderr, "usage: %s [--raw] [--no-add-special] MODEL.gguf [TEXT]\n", argv[0]);
        return 2;
    }

    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(argv[arg], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[arg]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);

    size_t len;
    char *text;
    if (argc - arg == 2) {
        text = strdup(argv[arg + 1]);
        len = strlen(text);
    } else {
        text = read_stdin(&len);
    }
    if (!text || len > INT32_MAX) {
        fprintf(stderr, "cannot read the text\n");
        return 1;
    }

    /* First ask how many tokens there are, then tokenize into a buffer of that size. */
    int n = -llama_tokenize(vocab, text, (int32_t)len, NULL, 0, add_special, parse_special);
    llama_token *tokens = malloc(sizeof(llama_token) * (size_t)(n > 0 ? n : 1));
    if (n < 0 || llama_tokenize(vocab, text, (int32_t)len, tokens, n, add_special, parse_special) != n) {
        fprintf(stderr, "tokenization failed\n");
        return 1;
    }

    printf("%zu bytes -> %d tokens (vocabulary: %d tokens, %s)\n", len, n, llama_vocab_n_tokens(vocab),
           llama_vocab_type(vocab) == LLAMA_VOCAB_TYPE_SPM ? "SentencePiece" : "BPE");
    for (int i = 0; i < n; i++) {
        char piece[256];
        int k = llama_token_to_piece(vocab, tokens[i], piece, sizeof piece, 0, true);
        printf("%6d %7d  '", i, tokens[i]);
        print_escaped(piece, k < 0 ? 0 : k);
        printf("'%s  ", k < 0 ? "..." : "");
        print_attrs(llama_vocab_get_attr(vocab, tokens[i]));
        printf("%s\n", llama_vocab_is_eog(vocab, tokens[i]) ? " eog" : "");
    }

    /* And back: the tokens render to the text again (special tokens included). */
    int m = -llama_detokenize(vocab, tokens, n, NULL, 0, false, true);
    char *back = malloc((size_t)(m > 0 ? m : 1));
    m = llama_detokenize(vocab, tokens, n, back, m > 0 ? m : 0, false, true);
    printf("detokenized (%d bytes): '", m);
    print_escaped(back, m < 0 ? 0 : m);
    printf("'\n");

    free(back);
    free(tokens);
    free(text);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
