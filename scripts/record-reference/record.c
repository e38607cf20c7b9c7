/* Records what llama.cpp computes for one model into DIR, in the formats the engine's tests read
 * (tests/reference/README.md). Built against the pinned llama.h and linked to llama.cpp's own
 * libllama.so by scripts/record-reference.sh; never linked to the engine.
 * Usage: record MODEL.gguf DIR "RECORDED-BY TEXT" */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "llama.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CTX 4096
#define N_TOP 10
#define PIECE_STRIDE 29

static const char *recorded_by;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static FILE *open_out(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        die("cannot write %s", path);
    }
    if (strstr(name, ".jsonl")) {
        fprintf(f, "{\"recorded\":\"%s\"}\n", recorded_by);
    }
    return f;
}

static void put_hex(FILE *f, const char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%02x", (unsigned char)bytes[i]);
    }
}

static void put_ids(FILE *f, const llama_token *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, i ? ",%d" : "%d", ids[i]);
    }
    fputc(']', f);
}

/* ---- inputs: our own texts; raw bytes where lengths are explicit ---- */

struct text {
    const char *bytes;
    size_t len; /* 0: strlen */
};

static const struct text tokenizer_texts[] = {
    {"Hello world", 0},
    {"Hello, world!", 0},
    {" leading space", 0},
    {"  two leading spaces", 0},
    {"trailing space ", 0},
    {"\n", 0},
    {"\n\n\n", 0},
    {"\t\ttabs\tand spaces  mixed \t", 0},
    {"", 0},
    {" ", 0},
    {"a", 0},
    {"It's, we're, they've, I'd, you'll, she's, DON'T", 0},
    {"1 12 123 1234 12345 123456 3.14159 -42 1e10 0x1F", 0},
    {"int main(void) {\n    return printf(\"%d\\n\", 42) != 0;\n}\n", 0},
    {"def f(x):\n\treturn [i ** 2 for i in range(x) if i % 3]\n", 0},
    {"The quick brown fox jumps over the lazy dog.", 0},
    {"Ünïcödé çharacters: naïve café, façade, Zürich, São Paulo", 0},
    {"Русский текст с пробелами и знаками препинания.", 0},
    {"日本語のテキストと漢字、ひらがな、カタカナ。", 0},
    {"中文文本，没有空格。混合English单词。", 0},
    {"한국어 문장입니다.", 0},
    {"العربية من اليمين إلى اليسار", 0},
    {"हिन्दी पाठ", 0},
    {"Emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷 and ✓ ✗ ★", 0},
    {"Math: ∑_{i=1}^{n} x_i² ≤ ∞, α β γ δ ∂ ∇", 0},
    {"<|im_start|>user\nHi<|im_end|>\n", 0},
    {"<start_of_turn>user\nHi<end_of_turn>\n", 0},
    {"<s> </s> <unk> <pad> <bos> <eos>", 0},
    {"<|endoftext|>text after<|endoftext|>", 0},
    {"<|im_start|><|im_start|><|im_end|>", 0},
    {"<|im_start", 0},
    {"URL: https://example.com/path?query=1&x=y#frag", 0},
    {"email@example.org, @handle, #hashtag, $100.00, 50%", 0},
    {"CamelCaseIdentifier snake_case_name kebab-case-name SCREAMING_CASE", 0},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0},
    {"!!!???...,,,;;;:::---___***", 0},
    {"   \n  \n\t \r\n  ", 0},
    {"line one\r\nline two\rline three", 0},
    {"\xc3\x28 invalid two-byte", 0},
    {"\xe2\x82 truncated three-byte", 0},
    {"\xff\xfe\xfd bytes that are never UTF-8", 0},
    {"\xf0\x9f\x98", 0},
    {"a\0b embedded NUL", 16},
    {"Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬…æ", 0},
    {"ﬁ ﬂ ﬀ ligatures and full-width ＡＢＣ１２３", 0},
    {"Zero\xe2\x80\x8bwidth\xe2\x80\x8cjoiners\xe2\x80\x8d and NBSP\xc2\xa0here", 0},
    {"Once upon a time, in a land far, far away, there lived a dragon who loved poetry.", 0},
    {"    indented code\n        more indented\n", 0},
    {"{\"json\": [1, 2, {\"k\": null}], \"s\": \"v\"}", 0},
    {"| a | b |\n|---|---|\n| 1 | 2 |", 0},
};

static const char *prompts[] = {
    "The capital of France is",
    NULL, /* the model's chat template applied to a short conversation */
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, there was a little robot who wanted to learn how to paint. Every morning it",
    "Résumé: 東京 is the capital of Japan 🇯🇵; Москва — of Russia. Translate to French:",
};
#define N_PROMPTS (int)(sizeof prompts / sizeof prompts[0])

/* ---- helpers over the API ---- */

static int tokenize(const struct llama_vocab *v, const char *s, size_t len, bool add, bool parse, llama_token **out) {
    int n = llama_tokenize(v, s, (int32_t)len, NULL, 0, add, parse);
    if (n < 0) {
        n = -n;
    }
    *out = malloc(sizeof(llama_token) * (size_t)(n + 1));
    int m = llama_tokenize(v, s, (int32_t)len, *out, n, add, parse);
    if (m != n) {
        die("tokenize: %d then %d", n, m);
    }
    return n;
}

static int detokenize(const struct llama_vocab *v, const llama_token *ids, int n, bool unparse, char **out) {
    int len = llama_detokenize(v, ids, n, NULL, 0, false, unparse);
    if (len < 0) {
        len = -len;
    }
    *out = malloc((size_t)len + 1);
    int m = llama_detokenize(v, ids, n, *out, len, false, unparse);
    if (m != len) {
        die("detokenize: %d then %d", len, m);
    }
    return len;
}

static struct llama_context *new_context(struct llama_model *m, uint32_t n_ubatch, uint32_t n_seq_max) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = 2048;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = n_seq_max;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) {
        die("no context");
    }
    return ctx;
}

/* Decodes ids at positions from `pos0` in sequence `seq`; `all_logits` or only the last. */
static int decode(struct llama_context *ctx, const llama_token *ids, int n, int pos0, int seq, bool all_logits) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = (int8_t)(all_logits || i == n - 1);
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

static void put_top(FILE *f, const float *row, int n_vocab) {
    int best[N_TOP];
    int k = 0;
    for (int id = 0; id < n_vocab; id++) {
        int at = k < N_TOP ? k++ : N_TOP;
        while (at > 0 && row[best[at - 1]] < row[id]) {
            if (at < N_TOP) {
                best[at] = best[at - 1];
            }
            at--;
        }
        if (at < N_TOP) {
            best[at] = id;
        }
    }
    fputc('[', f);
    for (int i = 0; i < k; i++) {
        fprintf(f, "%s[%d,%.6f]", i ? "," : "", best[i], row[best[i]]);
    }
    fputc(']', f);
}

/* ---- the files ---- */

static void record_facts(const struct llama_model *m, const char *dir) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    FILE *f = open_out(dir, "vocab_facts.json");
    fprintf(f,
            "{\"n_tokens\":%d,\"bos\":%d,\"eos\":%d,\"eot\":%d,\"nl\":%d,\"pad\":%d,"
            "\"add_bos\":%s,\"add_eos\":%s,\"type\":%d,\"n_embd\":%d,\"n_layer\":%d,\"n_head\":%d,\"n_head_kv\":%d,"
            "\"n_ctx_train\":%d,\"n_params\":%llu,\"size\":%llu,\"recorded\":\"%s\"}\n",
            llama_vocab_n_tokens(v), llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v),
            llama_vocab_nl(v), llama_vocab_pad(v), llama_vocab_get_add_bos(v) ? "true" : "false",
            llama_vocab_get_add_eos(v) ? "true" : "false", (int)llama_vocab_type(v), llama_model_n_embd(m),
            llama_model_n_layer(m), llama_model_n_head(m), llama_model_n_head_kv(m), llama_model_n_ctx_train(m),
            (unsigned long long)llama_model_n_params(m), (unsigned long long)llama_model_size(m), recorded_by);
    fclose(f);
}

static void record_tokenize(const struct llama_model *m, const char *dir) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    FILE *f = open_out(dir, "tokenize.jsonl");
    for (size_t t = 0; t < sizeof tokenizer_texts / sizeof tokenizer_texts[0]; t++) {
        const char *s = tokenizer_texts[t].bytes;
        size_t len = tokenizer_texts[t].len ? tokenizer_texts[t].len : strlen(s);
        for (int mode = 0; mode < 4; mode++) {
            bool add = mode & 1, parse = mode & 2;
            llama_token *ids;
            int n = tokenize(v, s, len, add, parse, &ids);
            char *detok, *detok_unparse;
            int dl = detokenize(v, ids, n, false, &detok);
            int ul = detokenize(v, ids, n, true, &detok_unparse);
            fputs("{\"text_hex\":\"", f);
            put_hex(f, s, len);
            fprintf(f, "\",\"add_special\":%s,\"parse_special\":%s,\"ids\":", add ? "true" : "false",
                    parse ? "true" : "false");
            put_ids(f, ids, n);
            fputs(",\"detok_hex\":\"", f);
            put_hex(f, detok, (size_t)dl);
            fputs("\",\"detok_unparse_hex\":\"", f);
            put_hex(f, detok_unparse, (size_t)ul);
            fputs("\"}\n", f);
            free(ids);
            free(detok);
            free(detok_unparse);
        }
    }
    fclose(f);
}

/* The first 512 tokens (bytes and specials mostly live there), every control token in use (not
 * Gemma's thousands of unused placeholders), and every PIECE_STRIDE-th token. */
static void record_pieces(const struct llama_model *m, const char *dir) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    FILE *f = open_out(dir, "pieces.jsonl");
    char buf[2][1024];
    for (llama_token id = 0; id < llama_vocab_n_tokens(v); id++) {
        enum llama_token_attr attr = llama_vocab_get_attr(v, id);
        bool control = (attr & LLAMA_TOKEN_ATTR_CONTROL) && !(attr & LLAMA_TOKEN_ATTR_UNUSED);
        if (id >= 512 && !control && id % PIECE_STRIDE != 0) {
            continue;
        }
        int n0 = llama_token_to_piece(v, id, buf[0], sizeof buf[0], 0, false);
        int n1 = llama_token_to_piece(v, id, buf[1], sizeof buf[1], 0, true);
        if (n0 < 0 || n1 < 0) {
            die("piece of %d does not fit", id);
        }
        fprintf(f, "{\"id\":%d,\"piece_hex\":\"", id);
        put_hex(f, buf[0], (size_t)n0);
        fputs("\",\"piece_special_hex\":\"", f);
        put_hex(f, buf[1], (size_t)n1);
        fprintf(f, "\",\"attr\":%d,\"is_eog\":%s,\"is_control\":%s}\n", (int)attr,
                llama_vocab_is_eog(v, id) ? "true" : "false", llama_vocab_is_control(v, id) ? "true" : "false");
    }
    fclose(f);
}

struct prompt {
    char *text;
    llama_token *ids;
    int n;
};

static void make_prompts(const struct llama_model *m, struct prompt *out) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    for (int p = 0; p < N_PROMPTS; p++) {
        if (prompts[p]) {
            out[p].text = strdup(prompts[p]);
        } else {
            struct llama_chat_message chat[] = {
                {"system", "You are a helpful assistant."},
                {"user", "What is the capital of France?"},
                {"assistant", "Paris."},
                {"user", "And of Italy?"},
            };
            const char *tmpl = llama_model_chat_template(m, NULL);
            int n = llama_chat_apply_template(tmpl, chat, 4, true, NULL, 0);
            out[p].text = calloc((size_t)n + 1, 1);
            if (n < 0 || llama_chat_apply_template(tmpl, chat, 4, true, out[p].text, n) != n) {
                die("chat template");
            }
        }
        out[p].n = tokenize(v, out[p].text, strlen(out[p].text), true, true, &out[p].ids);
    }
}

static void record_logits(struct llama_model *m, const struct prompt *ps, const char *dir) {
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    FILE *f = open_out(dir, "logits.jsonl");
    const uint32_t ubatches[] = {512, 7};
    for (int u = 0; u < 2; u++) {
        for (int p = 0; p < N_PROMPTS; p++) {
            struct llama_context *ctx = new_context(m, ubatches[u], 1);
            int rc = decode(ctx, ps[p].ids, ps[p].n, 0, 0, true);
            fprintf(f, "{\"prompt\":%d,\"n_ubatch\":%u,\"prompt_hex\":\"", p, ubatches[u]);
            put_hex(f, ps[p].text, strlen(ps[p].text));
            fputs("\",\"ids\":", f);
            put_ids(f, ps[p].ids, ps[p].n);
            fprintf(f, ",\"rc\":%d,\"top10\":[", rc);
            for (int i = 0; i < ps[p].n && rc == 0; i++) {
                if (i) {
                    fputc(',', f);
                }
                put_top(f, llama_get_logits_ith(ctx, i), n_vocab);
            }
            fputs("]}\n", f);
            llama_free(ctx);
        }
    }
    fclose(f);
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        die("usage: record MODEL.gguf DIR RECORDED-BY");
    }
    recorded_by = argv[3];
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) {
        die("cannot load %s", argv[1]);
    }
    struct prompt ps[N_PROMPTS];
    make_prompts(m, ps);
    record_facts(m, argv[2]);
    record_tokenize(m, argv[2]);
    record_pieces(m, argv[2]);
    record_logits(m, ps, argv[2]);
    for (int p = 0; p < N_PROMPTS; p++) {
        free(ps[p].text);
        free(ps[p].ids);
    }
    llama_model_free(m);
    llama_backend_free();
    return 0;
}
