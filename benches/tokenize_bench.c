// Tokenizer throughput benchmark over the llama.h API, for any library that implements it.
//
//   tokenize_bench LIBRARY MODEL [TEXT_FILE] [REPEATS]
//
// LIBRARY is loaded with dlopen (libengine.so, or llama.cpp's libllama.so), MODEL is loaded with
// vocab_only, and the text (TEXT_FILE, or a generated 2 MB text mixing prose, code, numbers and
// non-Latin scripts) is tokenized REPEATS times (default 5) with add_special and parse_special.
// Prints the token count, the best and median time and the throughput in MB/s.
// Build: cc -O2 -I include -o tokenize_bench benches/tokenize_bench.c -ldl
#include "dl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Deterministic mixed text of at least `size` bytes.
static char *generate(size_t size, size_t *len) {
    static const char *words[] = {
        "the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
        "as", "with", "his", "they", "I", "at", "be", "this", "have", "from", "or", "one", "had", "by",
        "word", "but", "not", "what", "all", "were", "we", "when", "your", "can", "said", "there",
        "tokenizer", "international", "don't", "we'll", "It's", "THE", "Hello,", "world!", "(see",
        "below).", "\"quoted\"", "naïve", "café", "Straße", "привет", "мир", "日本語の", "文章", "中文",
        "한국어", "العربية", "हिन्दी", "😀", "👍🏽", "3.14159", "2024-01-01", "1,234,567", "$42",
        "x += 1;", "if (a != b) {", "return 0;", "}", "fn main() {", "    ", "\t", "#include", "<stdio.h>",
    };
    const size_t n_words = sizeof(words) / sizeof(words[0]);
    char *buf = malloc(size + 256);
    size_t at = 0;
    uint64_t state = 0x9E3779B97F4A7C15ull;
    while (at < size) {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17;
        const char *w = words[state % n_words];
        size_t wl = strlen(w);
        memcpy(buf + at, w, wl);
        at += wl;
        buf[at++] = (state >> 32) % 11 == 0 ? '\n' : ' ';
    }
    *len = at;
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s LIBRARY MODEL [TEXT_FILE] [REPEATS]\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_get_vocab);
    DL_LOAD(llama_tokenize);
    DL_LOAD(llama_model_free);

    dl_init(dl_log_errors);
    struct llama_model_params mp = p_llama_model_default_params();
    mp.vocab_only = true;
    double t0 = now();
    struct llama_model *model = dl_load_model(argv[2], mp);
    double t_load = now() - t0;
    const struct llama_vocab *vocab = p_llama_model_get_vocab(model);

    size_t len = 0;
    char *text = NULL;
    if (argc > 3 && strcmp(argv[3], "-") != 0) {
        FILE *f = fopen(argv[3], "rb");
        if (!f) { perror(argv[3]); return 1; }
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        text = malloc(len + 1);
        if (fread(text, 1, len, f) != len) { perror("read"); return 1; }
        fclose(f);
    } else {
        text = generate(2u << 20, &len);
    }
    int repeats = argc > 4 ? atoi(argv[4]) : 5;
    if (repeats < 1) repeats = 1;

    // Size query first (NULL buffer), as callers do.
    int32_t n = -p_llama_tokenize(vocab, text, (int32_t)len, NULL, 0, true, true);
    llama_token *tokens = malloc(sizeof(llama_token) * (size_t)(n > 0 ? n : 1));
    double *times = malloc(sizeof(double) * (size_t)repeats);
    for (int r = 0; r < repeats; r++) {
        double t = now();
        int32_t got = p_llama_tokenize(vocab, text, (int32_t)len, tokens, n, true, true);
        times[r] = now() - t;
        if (got != n) { fprintf(stderr, "token count changed: %d vs %d\n", got, n); return 1; }
    }
    qsort(times, (size_t)repeats, sizeof(double), cmp_double);
    uint64_t checksum = 0;
    for (int32_t i = 0; i < n; i++) checksum = checksum * 31 + (uint32_t)tokens[i];
    printf("library  %s\nmodel    %s (vocab load %.1f ms)\ntext     %zu bytes -> %d tokens (checksum %016llx)\n",
           argv[1], argv[2], t_load * 1e3, len, n, (unsigned long long)checksum);
    printf("tokenize best %.1f ms, median %.1f ms over %d runs: %.2f MB/s\n", times[0] * 1e3,
           times[repeats / 2] * 1e3, repeats, len / times[0] / 1e6);
    p_llama_model_free(model);
    return 0;
}
