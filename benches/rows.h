/* Printing logits rows so that two libraries' outputs compare line by line: a hash of every
 * value's bits and the top 3 ids; and filling a batch with one sequence's tokens. Shared by the
 * comparison programs. */
#ifndef ENGINE_BENCH_ROWS_H
#define ENGINE_BENCH_ROWS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "llama.h"

static inline uint64_t hash_bits(const float *v, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        h = (h ^ u) * 1099511628211ull;
    }
    return h;
}

/* Append `n` tokens as sequence `seq` at positions 0.., with an output at every token or only the
 * last. */
static inline void append_seq(struct llama_batch *b, const llama_token *ids, int n, llama_seq_id seq, bool all_outputs) {
    for (int i = 0; i < n; i++) {
        int j = b->n_tokens++;
        b->token[j] = ids[i];
        b->pos[j] = i;
        b->n_seq_id[j] = 1;
        b->seq_id[j][0] = seq;
        b->logits[j] = all_outputs || i == n - 1;
    }
}

static inline void print_row(const float *row, int n_vocab) {
    int top[3] = {-1, -1, -1};
    for (int i = 0; i < n_vocab; i++) {
        for (int k = 0; k < 3; k++) {
            if (top[k] < 0 || row[i] > row[top[k]]) {
                for (int j = 2; j > k; j--) top[j] = top[j - 1];
                top[k] = i;
                break;
            }
        }
    }
    printf(" %016llx top %d %d %d\n", (unsigned long long)hash_bits(row, n_vocab), top[0], top[1], top[2]);
}


/* The greedy token of logits row `row`, moved on by `shift` (so that sequences copied from one
 * another go different ways). */
static inline llama_token greedy(const float *row, int n_vocab, int shift) {
    int best = 0;
    for (int i = 1; i < n_vocab; i++) {
        if (row[i] > row[best]) best = i;
    }
    return (llama_token)((best + shift) % n_vocab);
}

#endif
