/* llama_model_save_to_file through the library under test: loads MODEL and saves it to OUT.
 * Repacking buffer types are off: llama.cpp saves a repacked tensor's bytes in the repacked layout
 * (a file it cannot load again), and the comparison is of the files both libraries mean to write.
 * Errors (an engine refusal among them) go to stderr; the caller compares the files.
 *
 *   save_bench LIB MODEL OUT */
#include "dl.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIB MODEL OUT\n", argv[0]);
        return 2;
    }
    dl_open(argv[1]);
    dl_init(dl_log_errors);
    DL_LOAD(llama_model_default_params);
    DL_LOAD(llama_model_save_to_file);
    DL_LOAD(llama_model_free);
    struct llama_model_params mp = p_llama_model_default_params();
    mp.use_extra_bufts = false;
    struct llama_model *model = dl_load_model(argv[2], mp);
    p_llama_model_save_to_file(model, argv[3]);
    p_llama_model_free(model);
    return 0;
}
