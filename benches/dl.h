/* Loading the llama.h library under test with dlopen, and the start every benchmark makes with it
 * (log, backend, model), shared by the benchmark programs so that one binary times libengine.so and
 * llama.cpp's libllama.so alike. A library that cannot be loaded, lacks a symbol or cannot load the
 * model ends the program with status 1. */
#ifndef ENGINE_BENCH_DL_H
#define ENGINE_BENCH_DL_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void *dl_lib;
static const char *dl_path;

static void dl_open(const char *path) {
    dl_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl_lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(1);
    }
    dl_path = path;
}

static void *dl_sym(const char *name) {
    void *p = dlsym(dl_lib, name);
    if (!p) {
        fprintf(stderr, "%s: missing symbol %s\n", dl_path, name);
        exit(1);
    }
    return p;
}

/* Declares p_NAME with the type of llama.h's NAME and resolves it in the library. */
#define DL_LOAD(name) __typeof__(&name) p_##name = (__typeof__(&name))dl_sym(#name)

/* The start every benchmark makes: the library's log through `log`, then its backend. */
static void dl_init(ggml_log_callback log) {
    DL_LOAD(llama_log_set);
    DL_LOAD(llama_backend_init);
    p_llama_log_set(log, NULL);
    p_llama_backend_init();
}

/* The model at `path`, loaded with `mp`; exits if it cannot be loaded. */
static inline struct llama_model *dl_load_model(const char *path, struct llama_model_params mp) {
    DL_LOAD(llama_model_load_from_file);
    struct llama_model *model = p_llama_model_load_from_file(path, mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(1);
    }
    return model;
}

/* llama.h's default context parameters, with ENGINE_BENCH_THREADS threads when that is set.
 * benches/compare.sh runs the two libraries side by side at one thread each: ggml's threads wait for
 * each other spinning, so more threads than cores (two libraries at llama.h's default of four, on
 * two cores) make a small model's decode several times slower in both libraries. */
static inline struct llama_context_params dl_context_params(void) {
    DL_LOAD(llama_context_default_params);
    struct llama_context_params cp = p_llama_context_default_params();
    const char *n = getenv("ENGINE_BENCH_THREADS");
    if (n && atoi(n) > 0) {
        cp.n_threads = cp.n_threads_batch = atoi(n);
    }
    return cp;
}

/* Every decode, encode and context a bench needs that should succeed goes through these: a
 * failure prints an "error:" line (naming dl_error_context, the part of the bench running), which
 * fails the row in benches/compare.sh even where both libraries fail alike. Calls whose refusal is
 * what is being checked use the *_may_refuse forms, and print their result. */
static const char *dl_error_context = "";
static inline int dl_decode_may_refuse(struct llama_context *ctx, struct llama_batch b) {
    DL_LOAD(llama_decode);
    return p_llama_decode(ctx, b);
}
static inline int dl_decode(struct llama_context *ctx, struct llama_batch b) {
    int rc = dl_decode_may_refuse(ctx, b);
    if (rc != 0) printf("error: %s: llama_decode returned %d\n", dl_error_context, rc);
    return rc;
}
static inline int dl_encode(struct llama_context *ctx, struct llama_batch b) {
    DL_LOAD(llama_encode);
    int rc = p_llama_encode(ctx, b);
    if (rc != 0) printf("error: %s: llama_encode returned %d\n", dl_error_context, rc);
    return rc;
}
static inline struct llama_context *dl_new_context_may_refuse(struct llama_model *model,
                                                              struct llama_context_params cp) {
    DL_LOAD(llama_init_from_model);
    return p_llama_init_from_model(model, cp);
}
static inline struct llama_context *dl_new_context(struct llama_model *model, struct llama_context_params cp) {
    struct llama_context *ctx = dl_new_context_may_refuse(model, cp);
    if (!ctx) printf("error: %s: no context\n", dl_error_context);
    return ctx;
}

/* A log callback that shows only errors, so a benchmark's output stays readable. */
static inline void dl_log_errors(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

#endif
