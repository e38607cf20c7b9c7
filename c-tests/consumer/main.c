/* Builds against the installed llama.h and links the installed library. */
#include "llama.h"

#include <stdio.h>

int main(void) {
    struct llama_model_params mp = llama_model_default_params();
    printf("installed engine %s: n_gpu_layers %d\n", llama_version(), mp.n_gpu_layers);
    return mp.n_gpu_layers == -1 ? 0 : 1;
}
