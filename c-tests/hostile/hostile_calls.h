/* The hostile-call test (issue #16 §3): the table of calls is generated from the pinned llama.h
 * by scripts/hostile_calls.py; the driver (hostile_calls.c) prepares the live objects they get. */
#ifndef ENGINE_HOSTILE_CALLS_H
#define ENGINE_HOSTILE_CALLS_H

#include "llama.h"

/* What the calls of sets 1 and 2 get for handles and prepared structs (index = set). */
struct hostile {
    const char *model_path;
    struct llama_model *model;
    struct llama_context *ctx;
    const struct llama_vocab *vocab;
    struct llama_sampler *smpl;
    llama_memory_t mem;
    struct llama_batch_ext *bext;
    struct llama_batch batch[3];
    struct llama_context_params cparams[3];
    struct llama_model_params mparams[3];
};

struct hostile_call {
    const char *function;
    int set;
    void (*call)(struct hostile *h);
};

extern const struct hostile_call hostile_calls[];
extern const int hostile_n_calls;

#endif
