/* Grammar-constrained generation with both test models: a JSON grammar in force at every step (each
 * sampled token is checked against a second grammar sampler kept in lockstep) produces JSON that
 * parses; malformed grammars return NULL with the parse error in the log; a grammar that allows
 * nothing makes llama_sampler_sample return LLAMA_TOKEN_NULL instead of aborting. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* JSON, bounded so that every generation ends: an object of up to six members whose values are
 * strings (up to 24 characters), numbers, literals or arrays of up to four of those. Once the object
 * is closed only whitespace (bounded) and the end of generation remain. */
static const char *JSON_GRAMMAR =
    "root   ::= \"{\" ws member (\",\" ws member){0,5} \"}\" ws\n"
    "member ::= key \":\" ws value\n"
    "key    ::= \"\\\"\" [a-zA-Z_] [a-zA-Z0-9_ ]{0,15} \"\\\"\" ws\n"
    "value  ::= scalar | \"[\" ws ( scalar (\",\" ws scalar){0,3} )? \"]\" ws\n"
    "scalar ::= string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) ){0,24} \"\\\"\" ws\n"
    "number ::= \"-\"? ([0-9] | [1-9] [0-9]{0,8}) (\".\" [0-9]{1,6})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,8}\n";

/* A small JSON validator (RFC 8259 grammar, no semantic checks). */
static const char *js_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}
static const char *js_value(const char *p, int depth);
static const char *js_string(const char *p) {
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++) {
                    char c = p[i];
                    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return NULL;
                }
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
        p++;
    }
    return *p == '"' ? p + 1 : NULL;
}
static const char *js_number(const char *p) {
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p;
}
static const char *js_value(const char *p, int depth) {
    if (depth > 64) return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = js_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = js_string(js_ws(p)))) return NULL;
                p = js_ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = js_value(p, depth + 1))) return NULL;
            p = js_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return js_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return js_number(p);
}
static bool json_parses(const char *text) {
    const char *end = js_value(text, 0);
    return end && *js_ws(end) == 0;
}

static int decode(struct llama_context *ctx, llama_token *t, int n) {
    return llama_decode(ctx, llama_batch_get_one(t, n));
}

/* Generate under the JSON grammar; every token is checked against a lockstep copy of the grammar. */
static void generate_json(struct llama_model *model, const char *prompt, uint32_t seed) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    if (!ctx) return;

    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_grammar(vocab, JSON_GRAMMAR, "root"));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(40));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(0.7f));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    struct llama_sampler *check = llama_sampler_init_grammar(vocab, JSON_GRAMMAR, "root");
    CHECK(llama_sampler_chain_get(chain, 0) && check, "grammar samplers");

    llama_token toks[256];
    int n = llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, 256, true, true);
    CHECK(n > 0 && decode(ctx, toks, n) == 0, "prompt");
    llama_token_data *cur = malloc(sizeof(*cur) * n_vocab);
    char text[4096] = "";
    size_t len = 0;
    bool ended = false;
    for (int step = 0; step < 800 && !ended; step++) {
        const float *logits = llama_get_logits_ith(ctx, -1);
        for (int i = 0; i < n_vocab; i++) {
            cur[i] = (llama_token_data){i, logits[i], 0.0f};
        }
        llama_token_data_array arr = {cur, (size_t)n_vocab, -1, false};
        llama_sampler_apply(check, &arr);
        llama_token t = llama_sampler_sample(chain, ctx, -1);
        CHECK(t >= 0 && t < n_vocab, "step %d: sampled %d (%s)", step, t, llama_engine_last_error());
        if (t < 0 || t >= n_vocab) break;
        CHECK(isfinite(cur[t].logit), "step %d: token %d is not allowed by the grammar", step, t);
        llama_sampler_accept(check, t);
        if (llama_vocab_is_eog(vocab, t)) {
            ended = true;
            break;
        }
        char piece[256];
        int k = llama_token_to_piece(vocab, t, piece, sizeof piece, 0, true);
        if (k > 0 && len + (size_t)k < sizeof text - 1) {
            memcpy(text + len, piece, (size_t)k);
            len += (size_t)k;
            text[len] = 0;
        }
        CHECK(decode(ctx, &t, 1) == 0, "decode at step %d", step);
    }
    CHECK(ended, "seed %u: no end of generation within 800 tokens: %s", seed, text);
    CHECK(json_parses(text), "seed %u: the output is not JSON: %s", seed, text);
    fprintf(stderr, "seed %u: %s\n", seed, text);
    free(cur);
    llama_sampler_free(check);
    llama_sampler_free(chain);
    llama_free(ctx);
}

static void grammar_errors(struct llama_model *model) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    static const char *bad[] = {"root ::= \"abc", "root ::= foo", "root ::= [a-", "root ::= \"a\"{3,1}",
                                "root ::= root \"x\"", "root ::= (\"a\"", "root := \"a\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tu_log_clear();
        struct llama_sampler *s = llama_sampler_init_grammar(vocab, bad[i], "root");
        CHECK(s == NULL, "malformed grammar %zu accepted", i);
        CHECK(tu_log_contains("grammar"), "no parse error logged for %zu", i);
        llama_sampler_free(s);
    }
    tu_log_clear();
    CHECK(llama_sampler_init_grammar(vocab, "root ::= \"a\"", "start") == NULL, "missing root");
    CHECK(tu_log_contains("does not contain a 'start' symbol"), "missing root logged");
    const char *bad_pattern = "(unclosed";
    CHECK(llama_sampler_init_grammar_lazy_patterns(vocab, "root ::= \"a\"", "root", &bad_pattern, 1, NULL, 0) == NULL,
          "bad trigger pattern");
}

/* A grammar no token can start (a token id outside the vocabulary): every candidate is masked, and
 * sampling reports it instead of aborting. */
static void grammar_allows_nothing(struct llama_model *model) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    llama_token t = llama_vocab_bos(vocab) >= 0 ? llama_vocab_bos(vocab) : 0;
    CHECK(ctx && decode(ctx, &t, 1) == 0, "decode");
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(chain, llama_sampler_init_grammar(vocab, "root ::= <[99999999]>", "root"));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(3));
    tu_log_clear();
    CHECK(llama_sampler_sample(chain, ctx, -1) == LLAMA_TOKEN_NULL, "a token despite an impossible grammar");
    CHECK(tu_log_contains("every candidate was masked"), "the reason is logged");
    llama_sampler_free(chain);
    llama_free(ctx);
}

/* A lazy grammar is inactive until its trigger, then constrains from the trigger on. */
static void lazy_grammar(struct llama_model *model) {
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    const char *pattern = "[\\s\\S]*?(<tool>)[\\s\\S]*";
    struct llama_sampler *g = llama_sampler_init_grammar_lazy_patterns(
        vocab, "root ::= \"<tool>\" [0-9]+ \"</tool>\"", "root", &pattern, 1, NULL, 0);
    CHECK(g != NULL, "lazy grammar");
    if (!g) return;
    llama_token_data *cur = malloc(sizeof(*cur) * n_vocab);
    const char *texts[] = {"Let me call it: <tool>", "12"};
    for (int phase = 0; phase < 3; phase++) {
        for (int i = 0; i < n_vocab; i++) {
            cur[i] = (llama_token_data){i, 0.0f, 0.0f};
        }
        llama_token_data_array arr = {cur, (size_t)n_vocab, -1, false};
        llama_sampler_apply(g, &arr);
        int allowed = 0;
        for (int i = 0; i < n_vocab; i++) allowed += isfinite(cur[i].logit);
        if (phase == 0) {
            CHECK(allowed == n_vocab, "inactive before the trigger: %d allowed", allowed);
        } else {
            CHECK(allowed > 0 && allowed < n_vocab / 10, "active after the trigger: %d allowed", allowed);
        }
        if (phase < 2) {
            llama_token toks[64];
            int n = llama_tokenize(vocab, texts[phase], (int)strlen(texts[phase]), toks, 64, false, false);
            for (int k = 0; k < n; k++) llama_sampler_accept(g, toks[k]);
        }
    }
    free(cur);
    llama_sampler_free(g);
}

int main(void) {
    tu_capture_log();
    llama_backend_init();
    struct llama_model *smol = tu_load(SMOLLM2_FILE, false);
    const char *chat = "<|im_start|>user\nDescribe a cat as a JSON object.<|im_end|>\n<|im_start|>assistant\n";
    for (uint32_t seed = 1; seed <= 3; seed++) generate_json(smol, chat, seed);
    grammar_errors(smol);
    grammar_allows_nothing(smol);
    lazy_grammar(smol);
    llama_model_free(smol);

    struct llama_model *gemma = tu_load(GEMMA3_FILE, false);
    const char *gchat = "<start_of_turn>user\nDescribe a cat as a JSON object.<end_of_turn>\n<start_of_turn>model\n";
    for (uint32_t seed = 1; seed <= 2; seed++) generate_json(gemma, gchat, seed);
    lazy_grammar(gemma);
    llama_model_free(gemma);
    llama_backend_free();
    return tu_finish("test_sampling_grammar");
}
