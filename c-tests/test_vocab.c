/* The vocabulary through the public C API: every line of the reference tokenize.jsonl and
 * pieces.jsonl of both models, the buffer conventions of llama_tokenize / llama_token_to_piece /
 * llama_detokenize (count-only calls, never writing past the stated size), the deprecated aliases,
 * and the failure values for NULL handles and out-of-range token ids. */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CANARY 0x5a

/* Next line of a file held in memory (the newline replaced by NUL), or NULL at the end. */
static char *next_line(char **cursor) {
    char *line = *cursor;
    if (!*line) {
        return NULL;
    }
    char *nl = strchr(line, '\n');
    if (nl) {
        *nl = 0;
        *cursor = nl + 1;
    } else {
        *cursor = line + strlen(line);
    }
    return line;
}

/* Hex string `key` of a JSON line, decoded into a fresh buffer; its length in *len. */
static unsigned char *hex_field(const char *line, const char *key, int *len) {
    size_t cap = strlen(line) + 1;
    char *hex = malloc(cap);
    unsigned char *bytes = malloc(cap);
    int n = tu_json_str(line, key, hex, cap);
    *len = n < 0 ? -1 : tu_hex_decode(hex, bytes, cap);
    free(hex);
    return bytes;
}

/* llama_detokenize of `ids` compared with the hex field `key`, with the size conventions. */
static void check_detok(const struct llama_vocab *v, const llama_token *ids, int n, bool unparse, const char *line,
                        const char *key, int lineno) {
    int want_len;
    unsigned char *want = hex_field(line, key, &want_len);
    CHECK(want_len >= 0, "line %d: %s missing", lineno, key);
    int need = llama_detokenize(v, ids, n, NULL, 0, false, unparse);
    CHECK(want_len == 0 ? need == 0 : need < 0, "line %d: size query gave %d", lineno, need);
    int cap = need < 0 ? -need : 0;
    char *buf = malloc((size_t)cap + 1);
    buf[cap] = CANARY;
    int got = llama_detokenize(v, ids, n, buf, cap, false, unparse);
    CHECK(got == want_len && memcmp(buf, want, (size_t)want_len) == 0, "line %d: %s: %d bytes, want %d", lineno, key,
          got, want_len);
    CHECK(buf[cap] == CANARY, "line %d: llama_detokenize wrote past its buffer", lineno);
    free(buf);
    free(want);
}

static void check_tokenize(const struct llama_vocab *v, const char *ref) {
    char *file = tu_read_reference(ref, "tokenize.jsonl");
    char *cursor = file, *line;
    long long *want = malloc(sizeof(long long) * 65536);
    int lineno = 0;
    while ((line = next_line(&cursor)) != NULL) {
        lineno++;
        int text_len;
        unsigned char *text = hex_field(line, "text_hex", &text_len);
        bool add = false, parse = false;
        CHECK(text_len >= 0 && tu_json_bool(line, "add_special", &add) && tu_json_bool(line, "parse_special", &parse),
              "%s line %d: malformed", ref, lineno);
        int n_want = tu_json_int_array(line, "ids", want, 65536);

        /* Count first, as callers do: minus the number of tokens. */
        int n = llama_tokenize(v, (const char *)text, text_len, NULL, 0, add, parse);
        CHECK(n == -n_want || (n_want == 0 && n == 0), "%s line %d: count query gave %d, want -%d", ref, lineno, n,
              n_want);
        llama_token *ids = malloc(sizeof(llama_token) * (size_t)(n_want + 1));
        /* One slot short: nothing may be written past n_tokens_max. */
        if (n_want > 0) {
            for (int i = 0; i <= n_want; i++) {
                ids[i] = -7;
            }
            CHECK(llama_tokenize(v, (const char *)text, text_len, ids, n_want - 1, add, parse) == -n_want,
                  "%s line %d: short buffer", ref, lineno);
            CHECK(ids[n_want - 1] == -7, "%s line %d: wrote past n_tokens_max", ref, lineno);
        }
        ids[n_want] = -7;
        int got = llama_tokenize(v, (const char *)text, text_len, ids, n_want, add, parse);
        bool same = got == n_want;
        for (int i = 0; same && i < n_want; i++) {
            same = ids[i] == want[i];
        }
        CHECK(same, "%s line %d: tokens differ (got %d, want %d)", ref, lineno, got, n_want);
        CHECK(ids[n_want] == -7, "%s line %d: wrote past the tokens", ref, lineno);
        if (same) {
            check_detok(v, ids, n_want, false, line, "detok_hex", lineno);
            check_detok(v, ids, n_want, true, line, "detok_unparse_hex", lineno);
        }
        free(ids);
        free(text);
    }
    CHECK(lineno > 100, "%s: only %d lines", ref, lineno);
    free(want);
    free(file);
}

static void check_piece(const struct llama_vocab *v, llama_token id, bool special, const char *line,
                        const char *key) {
    int want_len;
    unsigned char *want = hex_field(line, key, &want_len);
    char buf[512];
    memset(buf, CANARY, sizeof buf);
    int got = llama_token_to_piece(v, id, buf, sizeof buf - 1, 0, special);
    CHECK(got == want_len && memcmp(buf, want, (size_t)want_len) == 0, "token %d %s: %d bytes, want %d", id, key,
          got, want_len);
    CHECK(buf[got > 0 ? got : 0] == CANARY, "token %d: wrote a terminator or more", id);
    if (want_len > 0) {
        memset(buf, CANARY, sizeof buf);
        CHECK(llama_token_to_piece(v, id, buf, want_len - 1, 0, special) == -want_len, "token %d: short buffer", id);
        CHECK(buf[want_len - 1] == CANARY, "token %d: wrote past a short buffer", id);
    }
    free(want);
}

static void check_pieces(const struct llama_vocab *v, const char *ref) {
    char *file = tu_read_reference(ref, "pieces.jsonl");
    char *cursor = file, *line;
    int n = 0;
    while ((line = next_line(&cursor)) != NULL) {
        long long id = -1, attr = -1;
        bool eog = false, control = false;
        CHECK(tu_json_int(line, "id", &id) && tu_json_int(line, "attr", &attr) && tu_json_bool(line, "is_eog", &eog) &&
                  tu_json_bool(line, "is_control", &control),
              "%s: malformed line %d", ref, n + 1);
        llama_token t = (llama_token)id;
        check_piece(v, t, false, line, "piece_hex");
        check_piece(v, t, true, line, "piece_special_hex");
        CHECK(llama_vocab_get_attr(v, t) == attr, "token %d: attr %d, want %lld", t, llama_vocab_get_attr(v, t), attr);
        CHECK(llama_vocab_is_eog(v, t) == eog, "token %d: is_eog", t);
        CHECK(llama_vocab_is_control(v, t) == control, "token %d: is_control", t);
        /* The deprecated names agree. */
        CHECK(llama_token_get_attr(v, t) == llama_vocab_get_attr(v, t) && llama_token_is_eog(v, t) == eog &&
                  llama_token_is_control(v, t) == control && llama_token_get_text(v, t) == llama_vocab_get_text(v, t) &&
                  llama_token_get_score(v, t) == llama_vocab_get_score(v, t),
              "token %d: deprecated aliases differ", t);
        n++;
    }
    CHECK(n > 1000, "%s: only %d pieces", ref, n);
    free(file);
}

static void check_getters(const struct llama_vocab *v, const char *ref) {
    char *facts = tu_read_reference(ref, "vocab_facts.json");
    long long want;
    CHECK(tu_json_int(facts, "n_tokens", &want) && llama_vocab_n_tokens(v) == want && llama_n_vocab(v) == want,
          "%s: n_tokens", ref);
    CHECK(tu_json_int(facts, "eot", &want) && llama_vocab_eot(v) == want && llama_token_eot(v) == want, "%s: eot",
          ref);
    CHECK(tu_json_int(facts, "nl", &want) && llama_vocab_nl(v) == want && llama_token_nl(v) == want, "%s: nl", ref);
    CHECK(llama_token_bos(v) == llama_vocab_bos(v) && llama_vocab_cls(v) == llama_vocab_bos(v) &&
              llama_token_cls(v) == llama_vocab_bos(v) && llama_token_eos(v) == llama_vocab_eos(v) &&
              llama_token_sep(v) == llama_vocab_sep(v) && llama_token_pad(v) == llama_vocab_pad(v) &&
              llama_add_bos_token(v) == llama_vocab_get_add_bos(v) &&
              llama_add_eos_token(v) == llama_vocab_get_add_eos(v) &&
              llama_token_fim_pre(v) == llama_vocab_fim_pre(v) && llama_token_fim_suf(v) == llama_vocab_fim_suf(v) &&
              llama_token_fim_mid(v) == llama_vocab_fim_mid(v) && llama_token_fim_pad(v) == llama_vocab_fim_pad(v) &&
              llama_token_fim_rep(v) == llama_vocab_fim_rep(v) && llama_token_fim_sep(v) == llama_vocab_fim_sep(v),
          "%s: deprecated aliases", ref);
    CHECK(!llama_vocab_get_add_sep(v) && llama_vocab_sep(v) == LLAMA_TOKEN_NULL && llama_vocab_mask(v) == LLAMA_TOKEN_NULL,
          "%s: no separator or mask token", ref);
    int n_suppress = -1;
    const llama_token *suppress = llama_vocab_get_suppress_tokens(v, &n_suppress);
    /* None, as an empty std::vector's data() gives them. */
    CHECK(n_suppress == 0 && suppress == NULL, "%s: suppress tokens %d", ref, n_suppress);
    CHECK(strcmp(llama_vocab_get_text(v, llama_vocab_eos(v)), llama_vocab_type(v) == LLAMA_VOCAB_TYPE_SPM ? "<eos>" : "<|im_end|>") == 0,
          "%s: EOS text", ref);
    free(facts);
}

static void check_failures(const struct llama_vocab *v) {
    int n = llama_vocab_n_tokens(v);
    char buf[16];
    llama_token ids[4] = {1, n, 2, 3};
    tu_log_clear();
    CHECK(llama_vocab_get_text(v, n) == NULL, "text of an out-of-range id");
    CHECK(tu_log_contains("out of range") && tu_log_contains("49152"), "the log names the vocabulary size");
    CHECK(llama_vocab_get_attr(v, -5) == LLAMA_TOKEN_ATTR_UNDEFINED, "attr of -5");
    CHECK(llama_vocab_get_score(v, n) == 0.0f, "score of an out-of-range id");
    CHECK(!llama_vocab_is_control(v, n) && !llama_vocab_is_eog(v, n) && !llama_vocab_is_eog(v, LLAMA_TOKEN_NULL),
          "predicates of out-of-range ids");
    CHECK(llama_token_to_piece(v, n, buf, sizeof buf, 0, true) == 0, "piece of an out-of-range id");
    CHECK(llama_detokenize(v, ids, 4, buf, sizeof buf, false, false) == INT32_MIN, "detokenize with a bad id");
    CHECK(llama_tokenize(v, "abc", -1, NULL, 0, false, false) == INT32_MIN, "negative text length");
    CHECK(llama_tokenize(v, NULL, 3, NULL, 0, false, false) == INT32_MIN, "NULL text");
    CHECK(llama_tokenize(v, NULL, 0, NULL, 0, false, false) == 0, "empty text");
    CHECK(llama_detokenize(v, NULL, 0, NULL, 0, false, false) == 0, "no tokens");
    /* A NULL token buffer only counts, whatever n_tokens_max says. */
    CHECK(llama_tokenize(v, "Hello world", 11, NULL, 8, false, false) == -2, "NULL token buffer");

    tu_log_clear();
    CHECK(llama_vocab_n_tokens(NULL) == -1 && llama_vocab_bos(NULL) == LLAMA_TOKEN_NULL &&
              llama_vocab_get_text(NULL, 0) == NULL && llama_tokenize(NULL, "a", 1, NULL, 0, false, false) == INT32_MIN &&
              llama_detokenize(NULL, ids, 1, buf, sizeof buf, false, false) == INT32_MIN &&
              llama_token_to_piece(NULL, 0, buf, sizeof buf, 0, false) == 0 && !llama_vocab_get_add_bos(NULL),
          "NULL vocabulary");
    CHECK(tu_log_contains("vocab is NULL"), "NULL vocabulary is logged");
}

int main(void) {
    tu_capture_log();
    struct llama_model *smollm = tu_load(SMOLLM2_FILE, true);
    struct llama_model *gemma = tu_load(GEMMA3_FILE, true);
    const struct llama_vocab *vs = llama_model_get_vocab(smollm), *vg = llama_model_get_vocab(gemma);
    check_getters(vs, SMOLLM2_REF);
    check_getters(vg, GEMMA3_REF);
    check_tokenize(vs, SMOLLM2_REF);
    check_tokenize(vg, GEMMA3_REF);
    check_pieces(vs, SMOLLM2_REF);
    check_pieces(vg, GEMMA3_REF);
    check_failures(vs);
    llama_model_free(smollm);
    llama_model_free(gemma);
    return tu_finish("test_vocab");
}
