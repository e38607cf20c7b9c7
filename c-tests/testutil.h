/* Helpers shared by the C tests: locating models and reference data, a minimal JSON reader for the
 * flat reference files, log capture, loading and decoding, and check macros that count failures
 * instead of aborting. */
#ifndef ENGINE_TESTUTIL_H
#define ENGINE_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "llama.h"

#define SMOLLM2_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"
#define SMOLLM2_REF "smollm2-135m-instruct-q4_1"
#define GEMMA3_FILE "gemma-3-270m-q4_k_m.gguf"
#define GEMMA3_REF "gemma3-270m-q4_k_m"

extern int tu_failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            tu_failures++;                                                 \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* Exit status for main: 0 when no check failed. Prints a summary. */
int tu_finish(const char *name);

/* Path of a model file in $ENGINE_MODEL_DIR (default ~/.cache/engine/models). Exits with a message
 * telling how to fetch it when the file is missing: tests never skip. */
const char *tu_model_path(const char *file);

/* Path of a reference file: $ENGINE_REFERENCE_DIR/<model_ref>/<file>. */
const char *tu_ref_path(const char *model_ref, const char *file);

/* Whole file, NUL-terminated; exits on failure. The caller frees it. */
char *tu_read_file(const char *path, size_t *len);

/* A reference file (recorded by scripts/record-reference.sh) without its first line, which says
 * which llama.cpp and CPU recorded it. The caller frees it. */
char *tu_read_reference(const char *model_ref, const char *file);

/* Minimal readers for one-line JSON objects (keys unique, no nesting beyond arrays). */
bool tu_json_int(const char *json, const char *key, long long *out);
bool tu_json_bool(const char *json, const char *key, bool *out);
/* A string value without escapes (hex strings); returns its length or -1. */
int tu_json_str(const char *json, const char *key, char *out, size_t cap);
/* A flat array of integers; returns the count (up to cap) or -1. */
int tu_json_int_array(const char *json, const char *key, long long *out, int cap);
/* A flat array of numbers; returns the count (up to cap) or -1. */
int tu_json_double_array(const char *json, const char *key, double *out, int cap);

/* Decode lowercase/uppercase hex into bytes; returns the byte count or -1. */
int tu_hex_decode(const char *hex, unsigned char *out, size_t cap);

/* Send the library's log to a buffer; tu_log_contains tells whether any line since the last
 * tu_log_clear contained `needle`. Lines at WARN and above are also echoed to stderr. */
void tu_capture_log(void);
void tu_log_clear(void);
bool tu_log_contains(const char *needle);
/* Everything captured since the last tu_log_clear. */
const char *tu_log_text(void);

/* Load a model with default parameters (optionally vocab only); exits on failure. */
struct llama_model *tu_load(const char *file, bool vocab_only);

/* Decode the `n` tokens `t` as one batch of sequence `seq` at positions pos0, pos0 + 1, ..., with
 * logits for the last one only. Returns llama_decode's result. */
int tu_decode(struct llama_context *ctx, const llama_token *t, int n, llama_pos pos0, llama_seq_id seq);

/* Runs `fn` in a child process: whether it returned with no failed check (rather than crashed,
 * aborted or hung for `timeout_s` seconds). Fork only before the process computes anything:
 * ggml's CPU threads do not survive a fork. */
bool tu_survives(void (*fn)(void), unsigned timeout_s);

/* The index of the largest of the n values at l (the first one on ties). */
int tu_argmax(const float *l, int n);

#endif
