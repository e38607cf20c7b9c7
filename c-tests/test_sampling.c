/* The sampler API without a model: names and seeds as llama.cpp reports them, the chain operations,
 * samplers written in C beside ours, copy/clone/reset, the perf counters, seeded streams equal to
 * llama.cpp's (expected values recorded from libllama.so), and hostile inputs that must not crash. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *name_of(struct llama_sampler *s) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s", s ? llama_sampler_name(s) : "NULL");
    llama_sampler_free(s);
    return buf;
}

static void test_names(void) {
    static const struct {
        const char *expect;
        int which;
    } cases[] = {
        {"greedy", 0}, {"dist", 1}, {"?top-k", 2}, {"top-k", 3}, {"?top-p", 4}, {"top-p", 5}, {"?min-p", 6},
        {"min-p", 7}, {"?typical", 8}, {"typical", 9}, {"?temp", 10}, {"temp", 11}, {"?temp-ext", 12},
        {"temp-ext", 13}, {"?xtc", 14}, {"xtc", 15}, {"?top-n-sigma", 16}, {"top-n-sigma", 17}, {"mirostat", 18},
        {"mirostat-v2", 19}, {"?penalties", 20}, {"penalties", 21}, {"?dry", 22}, {"dry", 23}, {"adaptive-p", 24},
        {"?logit-bias", 25}, {"logit-bias", 26}, {"grammar", 27},
    };
    llama_logit_bias lb = {1, 1.0f};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct llama_sampler *s = NULL;
        switch (cases[i].which) {
        case 0: s = llama_sampler_init_greedy(); break;
        case 1: s = llama_sampler_init_dist(5); break;
        case 2: s = llama_sampler_init_top_k(0); break;
        case 3: s = llama_sampler_init_top_k(3); break;
        case 4: s = llama_sampler_init_top_p(1.0f, 1); break;
        case 5: s = llama_sampler_init_top_p(0.5f, 1); break;
        case 6: s = llama_sampler_init_min_p(0.0f, 1); break;
        case 7: s = llama_sampler_init_min_p(0.1f, 1); break;
        case 8: s = llama_sampler_init_typical(1.0f, 1); break;
        case 9: s = llama_sampler_init_typical(0.5f, 1); break;
        case 10: s = llama_sampler_init_temp(1.0f); break;
        case 11: s = llama_sampler_init_temp(0.5f); break;
        case 12: s = llama_sampler_init_temp_ext(1.0f, 0.0f, 1.0f); break;
        case 13: s = llama_sampler_init_temp_ext(1.0f, 0.5f, 1.0f); break;
        case 14: s = llama_sampler_init_xtc(0.0f, 0.1f, 1, 3); break;
        case 15: s = llama_sampler_init_xtc(0.5f, 0.1f, 1, 3); break;
        case 16: s = llama_sampler_init_top_n_sigma(0.0f); break;
        case 17: s = llama_sampler_init_top_n_sigma(1.0f); break;
        case 18: s = llama_sampler_init_mirostat(100, 7, 5.0f, 0.1f, 100); break;
        case 19: s = llama_sampler_init_mirostat_v2(8, 5.0f, 0.1f); break;
        case 20: s = llama_sampler_init_penalties(100, 0, 1.1f, 0.0f, 0.0f); break;
        case 21: s = llama_sampler_init_penalties(100, 64, 1.1f, 0.0f, 0.0f); break;
        case 22: s = llama_sampler_init_dry(NULL, 0.0f, 1.75f, 2, 64, NULL, 0); break;
        case 23: s = llama_sampler_init_dry(NULL, 0.8f, 1.75f, 2, 64, NULL, 0); break;
        case 24: s = llama_sampler_init_adaptive_p(0.5f, 0.9f, 4); break;
        case 25: s = llama_sampler_init_logit_bias(100, 0, NULL); break;
        case 26: s = llama_sampler_init_logit_bias(100, 1, &lb); break;
        case 27: s = llama_sampler_init_grammar(NULL, "", "root"); break;
        }
        const char *got = name_of(s);
        CHECK(strcmp(got, cases[i].expect) == 0, "sampler %d is named '%s', llama.cpp says '%s'", cases[i].which, got,
              cases[i].expect);
    }
}

static void test_seeds(void) {
    struct llama_sampler *s = llama_sampler_init_dist(5);
    CHECK(llama_sampler_get_seed(s) == 5, "dist seed");
    llama_sampler_free(s);
    s = llama_sampler_init_xtc(0.5f, 0.1f, 1, 9);
    CHECK(llama_sampler_get_seed(s) == LLAMA_DEFAULT_SEED, "xtc reports no seed, as in llama.cpp");
    llama_sampler_free(s);
    s = llama_sampler_init_dist(LLAMA_DEFAULT_SEED);
    uint32_t a = llama_sampler_get_seed(s);
    llama_sampler_reset(s);
    uint32_t b = llama_sampler_get_seed(s);
    CHECK(a != LLAMA_DEFAULT_SEED && b != LLAMA_DEFAULT_SEED && a != b, "random seeds %u %u", a, b);
    llama_sampler_free(s);

    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    CHECK(llama_sampler_get_seed(c) == LLAMA_DEFAULT_SEED, "empty chain seed");
    llama_sampler_chain_add(c, llama_sampler_init_dist(11));
    llama_sampler_chain_add(c, llama_sampler_init_mirostat_v2(22, 5.0f, 0.1f));
    llama_sampler_chain_add(c, llama_sampler_init_top_k(5));
    CHECK(llama_sampler_get_seed(c) == 22, "a chain reports its last seeded sampler's seed");
    llama_sampler_free(c);
}

static void test_chain_operations(void) {
    struct llama_sampler *c = llama_sampler_chain_init(llama_sampler_chain_default_params());
    CHECK(strcmp(llama_sampler_name(c), "chain") == 0, "chain name");
    CHECK(llama_sampler_chain_n(c) == 0, "empty chain");
    struct llama_sampler *k = llama_sampler_init_top_k(5);
    llama_sampler_chain_add(c, llama_sampler_init_dist(11));
    llama_sampler_chain_add(c, k);
    CHECK(llama_sampler_chain_n(c) == 2, "two samplers");
    CHECK(llama_sampler_chain_get(c, -1) == c, "get(-1) is the chain itself");
    CHECK(llama_sampler_chain_get(c, 1) == k, "get(1)");
    CHECK(llama_sampler_chain_get(c, 2) == NULL && llama_sampler_chain_get(c, -2) == NULL, "out of range");
    CHECK(llama_sampler_chain_get(k, -1) == NULL && llama_sampler_chain_get(NULL, 0) == NULL, "not a chain");
    CHECK(llama_sampler_chain_remove(c, 7) == NULL, "remove out of range");
    CHECK(llama_sampler_chain_remove(c, 1) == k && llama_sampler_chain_n(c) == 1, "remove gives the sampler back");
    llama_sampler_free(k); /* ours again after remove */

    tu_log_clear();
    CHECK(llama_sampler_chain_n(k = llama_sampler_init_greedy()) == -1, "chain_n of a non-chain");
    CHECK(tu_log_contains("not a chain"), "the misuse is logged");
    llama_sampler_free(k);

    struct llama_sampler *cl = llama_sampler_clone(c);
    CHECK(cl && llama_sampler_chain_n(cl) == 1 && strcmp(llama_sampler_name(llama_sampler_chain_get(cl, 0)), "dist") == 0,
          "a clone has the same samplers");
    CHECK(llama_sampler_get_seed(cl) == 11, "and seeds");
    llama_sampler_free(cl);
    llama_sampler_free(c);
    llama_sampler_free(NULL);
}

/* dist(42) then dist(7) on fixed logits; dist(7) takes dist(42)'s state after ten draws (copy), and
 * dist(42) is replaced by its clone. Recorded from llama.cpp. */
static void test_seeded_streams(void) {
    static const float logits[8] = {0, 0.5f, 1, 1.5f, 2, 0.2f, -1, 0.7f};
    static const int expected[30] = {4, 2, 4, 4, 3, 1, 3, 3, 2, 4, 1, 4, 7, 0, 7,
                                     1, 4, 7, 0, 7, 4, 4, 0, 0, 4, 3, 0, 7, 2, 1};
    struct llama_sampler *d = llama_sampler_init_dist(42), *e = llama_sampler_init_dist(7);
    llama_token_data td[8];
    for (int k = 0; k < 30; k++) {
        for (int i = 0; i < 8; i++) {
            td[i] = (llama_token_data){i, logits[i], 0.0f};
        }
        llama_token_data_array a = {td, 8, -1, false};
        llama_sampler_apply(k < 15 ? d : e, &a);
        CHECK(a.selected == expected[k], "draw %d: %lld, llama.cpp drew %d", k, (long long)a.selected, expected[k]);
        if (k == 9) {
            llama_sampler_copy(d, e);
            struct llama_sampler *cl = llama_sampler_clone(d);
            llama_sampler_free(d);
            d = cl;
        }
    }
    CHECK(llama_sampler_get_seed(e) == 42, "copy takes the seed too");
    llama_sampler_reset(d);
    for (int i = 0; i < 8; i++) {
        td[i] = (llama_token_data){i, logits[i], 0.0f};
    }
    llama_token_data_array a = {td, 8, -1, false};
    llama_sampler_apply(d, &a);
    CHECK(a.selected == 4, "reset restarts the stream");
    CHECK(td[0].p == 0x1.89135p-5f && td[4].p == 0x1.6b0e9cp-2f, "probabilities bit-equal to llama.cpp's");

    tu_log_clear();
    struct llama_sampler *g = llama_sampler_init_greedy();
    llama_sampler_copy(d, g);
    CHECK(tu_log_contains("cannot copy"), "copy between types is refused");
    llama_sampler_free(g);
    llama_sampler_free(d);
    llama_sampler_free(e);
}

/* A sampler written in C: keeps the even token ids only and counts its calls. */
struct even_state {
    int applied, accepted, resets, frees;
    llama_token last;
};

static const char *even_name(const struct llama_sampler *s) {
    (void)s;
    return "even";
}
static void even_accept(struct llama_sampler *s, llama_token t) {
    struct even_state *st = s->ctx;
    st->accepted++;
    st->last = t;
}
static void even_apply(struct llama_sampler *s, llama_token_data_array *cur) {
    struct even_state *st = s->ctx;
    st->applied++;
    size_t n = 0;
    for (size_t i = 0; i < cur->size; i++) {
        if (cur->data[i].id % 2 == 0) {
            cur->data[n++] = cur->data[i];
        }
    }
    cur->size = n;
    cur->sorted = false;
}
static void even_reset(struct llama_sampler *s) {
    ((struct even_state *)s->ctx)->resets++;
}
static void even_free(struct llama_sampler *s) {
    ((struct even_state *)s->ctx)->frees++;
}
static struct llama_sampler_i even_iface;

static struct llama_sampler *even_clone(const struct llama_sampler *s) {
    return llama_sampler_init(&even_iface, s->ctx); /* shares the counters */
}

static void test_user_sampler(void) {
    struct even_state st = {0, 0, 0, 0, -1};
    memset(&even_iface, 0, sizeof even_iface);
    even_iface.name = even_name;
    even_iface.accept = even_accept;
    even_iface.apply = even_apply;
    even_iface.reset = even_reset;
    even_iface.clone = even_clone;
    even_iface.free = even_free;

    struct llama_sampler_chain_params p = llama_sampler_chain_default_params();
    p.no_perf = false;
    struct llama_sampler *c = llama_sampler_chain_init(p);
    llama_sampler_chain_add(c, llama_sampler_init_top_k(6));
    llama_sampler_chain_add(c, llama_sampler_init(&even_iface, &st));
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
    CHECK(strcmp(llama_sampler_name(llama_sampler_chain_get(c, 1)), "even") == 0, "user sampler name");

    llama_token_data td[10];
    for (int i = 0; i < 10; i++) {
        td[i] = (llama_token_data){i, (float)((i * 7) % 10), 0.0f}; /* best: id 7 (logit 9), then 4 (8) */
    }
    llama_token_data_array a = {td, 10, -1, false};
    llama_sampler_apply(c, &a);
    CHECK(st.applied == 1, "user apply called once");
    CHECK(a.selected >= 0 && a.data[a.selected].id == 4, "top-k, then even ids, then greedy: 4, got %d",
          a.selected >= 0 ? a.data[a.selected].id : -1);
    llama_sampler_accept(c, 4);
    CHECK(st.accepted == 1 && st.last == 4, "user accept called");
    CHECK(llama_perf_sampler(c).n_sample == 1, "one accept counted");
    llama_sampler_reset(c);
    CHECK(st.resets == 1, "user reset called");

    struct llama_sampler *cl = llama_sampler_clone(c);
    CHECK(cl && llama_sampler_chain_n(cl) == 3, "chain clone with a user sampler");
    llama_sampler_free(cl);
    CHECK(st.frees == 1, "the clone's user sampler freed");
    llama_sampler_free(c);
    CHECK(st.frees == 2, "the chain frees its user sampler");

    /* A stateless user sampler with only apply: name, clone and free still work. */
    struct llama_sampler_i bare;
    memset(&bare, 0, sizeof bare);
    bare.apply = even_apply;
    struct llama_sampler *b = llama_sampler_init(&bare, NULL);
    CHECK(strcmp(llama_sampler_name(b), "(null)") == 0, "no name");
    struct llama_sampler *b2 = llama_sampler_clone(b);
    CHECK(b2 != NULL && b2->iface == &bare, "clone of a context-free sampler");
    llama_sampler_accept(b, 1);
    llama_sampler_reset(b);
    llama_sampler_free(b2);
    llama_sampler_free(b);
}

static void test_perf(void) {
    struct llama_sampler_chain_params p = llama_sampler_chain_default_params();
    CHECK(p.no_perf, "default no_perf");
    p.no_perf = false;
    struct llama_sampler *c = llama_sampler_chain_init(p);
    llama_sampler_chain_add(c, llama_sampler_init_greedy());
    for (int k = 0; k < 5; k++) {
        llama_sampler_accept(c, 1);
    }
    CHECK(llama_perf_sampler(c).n_sample == 5, "n_sample");
    tu_log_clear();
    llama_perf_sampler_print(c);
    CHECK(tu_log_contains("samplers time =") && tu_log_contains("/     5 runs"), "print");
    llama_perf_sampler_reset(c);
    CHECK(llama_perf_sampler(c).n_sample == 0 && llama_perf_sampler(c).t_sample_ms == 0.0, "reset");
    struct llama_sampler *g = llama_sampler_chain_get(c, 0);
    tu_log_clear();
    CHECK(llama_perf_sampler(g).n_sample == 0, "perf of a non-chain is zero");
    CHECK(tu_log_contains("not a chain"), "and logged, where llama.cpp aborts");
    llama_sampler_free(c);
}

static struct llama_sampler *make_sampler(int which) {
    llama_logit_bias lb[2] = {{0, 1.0f}, {3, -INFINITY}};
    switch (which) {
    case 0: return llama_sampler_init_greedy();
    case 1: return llama_sampler_init_dist(1);
    case 2: return llama_sampler_init_top_k(100000);
    case 3: return llama_sampler_init_top_p(-3.0f, 0);
    case 4: return llama_sampler_init_top_p(0.5f, 100);
    case 5: return llama_sampler_init_min_p(7.0f, 1);
    case 6: return llama_sampler_init_typical(-1.0f, 1);
    case 7: return llama_sampler_init_temp(-2.0f);
    case 8: return llama_sampler_init_temp_ext(0.7f, 0.5f, -1.0f);
    case 9: return llama_sampler_init_xtc(2.0f, 0.0f, 0, 1);
    case 10: return llama_sampler_init_top_n_sigma(2.0f);
    case 11: return llama_sampler_init_mirostat(0, 1, 5.0f, 0.1f, -4);
    case 12: return llama_sampler_init_mirostat_v2(1, -5.0f, 2.0f);
    case 13: return llama_sampler_init_penalties(0, 3, 0.0f, NAN, INFINITY);
    case 14: return llama_sampler_init_dry(NULL, 1.0f, 1.5f, -3, 4, NULL, 0);
    case 15: return llama_sampler_init_adaptive_p(2.0f, 5.0f, 1);
    case 16: return llama_sampler_init_logit_bias(-1, 2, lb);
    default: return NULL;
    }
}

/* Every sampler on empty, NaN, all -inf, single and huge-logit arrays, after a few accepts: no crash,
 * and a selection, when there is one, inside the array. */
static void test_hostile_inputs(void) {
    static const float patterns[][5] = {
        {NAN, NAN, NAN, NAN, NAN},
        {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
        {1.0f, NAN, INFINITY, -INFINITY, 0.0f},
        {3e38f, -3e38f, 3e38f, 0.0f, 1e-45f},
        {0.5f, 0.5f, 0.5f, 0.5f, 0.5f},
    };
    for (int which = 0; which <= 16; which++) {
        struct llama_sampler *s = make_sampler(which);
        CHECK(s != NULL, "sampler %d", which);
        if (!s) {
            continue;
        }
        for (int t = 0; t < 6; t++) {
            llama_sampler_accept(s, t % 3);
        }
        llama_token_data_array empty = {NULL, 0, -1, false};
        llama_sampler_apply(s, &empty);
        CHECK(empty.size == 0 && empty.selected < 1, "%s on an empty array", llama_sampler_name(s));
        for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
            for (size_t n = 1; n <= 5; n += 4) {
                llama_token_data td[5];
                for (size_t i = 0; i < n; i++) {
                    td[i] = (llama_token_data){(llama_token)i, patterns[p][i], 0.0f};
                }
                llama_token_data_array a = {td, n, -1, false};
                llama_sampler_apply(s, &a);
                CHECK(a.size <= n && a.data >= td && a.data + a.size <= td + n, "%s pattern %zu: array bounds",
                      llama_sampler_name(s), p);
                CHECK(a.selected < (int64_t)a.size, "%s pattern %zu: selected %lld of %zu", llama_sampler_name(s), p,
                      (long long)a.selected, a.size);
            }
        }
        llama_sampler_free(s);
    }
    /* NULL arguments are refused, not dereferenced. */
    llama_sampler_apply(NULL, NULL);
    struct llama_sampler *g = llama_sampler_init_greedy();
    tu_log_clear();
    llama_sampler_apply(g, NULL);
    CHECK(tu_log_contains("cur_p is NULL"), "NULL array logged");
    llama_token_data_array bad = {NULL, 3, -1, false};
    llama_sampler_apply(g, &bad);
    CHECK(tu_log_contains("cur_p->data is NULL"), "NULL data logged");
    llama_sampler_accept(NULL, 0);
    llama_sampler_reset(NULL);
    CHECK(llama_sampler_clone(NULL) == NULL, "clone NULL");
    CHECK(llama_sampler_sample(g, NULL, 0) == LLAMA_TOKEN_NULL, "sample without a context");
    CHECK(llama_sampler_init_logit_bias(10, 3, NULL) == NULL, "biases missing");
    CHECK(llama_sampler_init_grammar(NULL, "root ::= \"a\"", "root") == NULL, "a grammar needs a vocabulary");
    llama_sampler_free(g);
}

int main(void) {
    tu_capture_log();
    test_names();
    test_seeds();
    test_chain_operations();
    test_seeded_streams();
    test_user_sampler();
    test_perf();
    test_hostile_inputs();
    return tu_finish("test_sampling");
}
