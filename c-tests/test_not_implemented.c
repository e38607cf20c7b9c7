/* Functions not implemented yet return their documented failure value and say so in the log. */
#include "testutil.h"

#include <string.h>

#define EXPECT_NOT_IMPLEMENTED(name, call_is_failure)                                      \
    do {                                                                                  \
        tu_log_clear();                                                                   \
        CHECK(call_is_failure, "%s returned a success value", name);                      \
        CHECK(tu_log_contains("not implemented yet: " name), "%s: no log line", name);    \
        CHECK(strcmp(llama_engine_last_error(), "not implemented yet: " name) == 0,       \
              "%s: last error '%s'", name, llama_engine_last_error());                    \
    } while (0)

int main(void) {
    tu_capture_log();
    EXPECT_NOT_IMPLEMENTED("llama_model_init_from_user",
                           llama_model_init_from_user(NULL, NULL, NULL, llama_model_default_params()) == NULL);
    return tu_finish("test_not_implemented");
}
