/* llama_log_set/get: the callback receives the library's lines with their level and user data,
 * llama_log_get returns what was set, and NULL restores a working default. */
#include "testutil.h"

#include <string.h>

static int n_lines = 0;
static int n_errors = 0;
static char last[1024];

static void cb(enum ggml_log_level level, const char *text, void *user_data) {
    CHECK(user_data == (void *)&n_lines, "user data passed through");
    n_lines++;
    if (level == GGML_LOG_LEVEL_ERROR) {
        n_errors++;
    }
    snprintf(last, sizeof last, "%s", text);
}

int main(void) {
    llama_log_set(cb, &n_lines);
    ggml_log_callback got = NULL;
    void *ud = NULL;
    llama_log_get(&got, &ud);
    CHECK(got == cb && ud == (void *)&n_lines, "llama_log_get returns what was set");

    struct llama_model *m = llama_model_load_from_file("/nonexistent.gguf", llama_model_default_params());
    CHECK(m == NULL, "load fails");
    CHECK(n_errors == 1, "one ERROR line, got %d", n_errors);
    CHECK(strstr(last, "cannot open model file") && last[strlen(last) - 1] == '\n', "line: %s", last);

    /* Successful loads log at INFO. */
    int before = n_lines;
    m = tu_load(SMOLLM2_FILE, true);
    CHECK(n_lines > before, "a load logs something");
    llama_model_free(m);

    llama_log_set(NULL, NULL);
    llama_log_get(&got, &ud);
    CHECK(got != NULL && got != cb && ud == NULL, "NULL restores the default");
    got(GGML_LOG_LEVEL_DEBUG, "the default callback can be called\n", NULL);
    int after = n_lines;
    llama_model_load_from_file("/nonexistent.gguf", llama_model_default_params());
    CHECK(n_lines == after, "the old callback is no longer called");
    return tu_finish("test_log");
}
