/* Print what a GGUF model is: its architecture, size, hyper-parameters, vocabulary and metadata.
 * Usage: model_info MODEL.gguf */
#include <stdio.h>
#include <string.h>

#include "llama.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], llama_engine_last_error());
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    char desc[256];
    llama_model_desc(model, desc, sizeof desc);
    printf("model        %s\n", desc);
    printf("parameters   %llu\n", (unsigned long long)llama_model_n_params(model));
    printf("size         %.2f MiB\n", llama_model_size(model) / (1024.0 * 1024.0));
    printf("n_ctx_train  %d\n", llama_model_n_ctx_train(model));
    printf("n_embd       %d\n", llama_model_n_embd(model));
    printf("n_layer      %d\n", llama_model_n_layer(model));
    printf("n_head       %d (kv %d)\n", llama_model_n_head(model), llama_model_n_head_kv(model));
    printf("n_swa        %d\n", llama_model_n_swa(model));
    printf("vocab        %d tokens, type %d, bos %d, eos %d\n", llama_vocab_n_tokens(vocab), llama_vocab_type(vocab),
           llama_vocab_bos(vocab), llama_vocab_eos(vocab));
    printf("metadata:\n");
    for (int i = 0; i < llama_model_meta_count(model); i++) {
        char key[256], val[96];
        llama_model_meta_key_by_index(model, i, key, sizeof key);
        int n = llama_model_meta_val_str_by_index(model, i, val, sizeof val);
        for (char *p = val; *p; p++) {
            if (*p == '\n') {
                *p = ' ';
            }
        }
        printf("  %-40s %s%s\n", key, val, n >= (int)sizeof val ? "..." : "");
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
