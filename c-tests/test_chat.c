/* Chat templates through the public API: the builtin list, a model's own template (SmolLM2's is
 * chatml), builtin names (Gemma 3's GGUF carries no template; "gemma" is its format), strncpy-like
 * buffer filling, and refusals that do not crash: an unknown template, NULL messages. Every format
 * is compared with llama.cpp's own output in src/chat/tests.rs. */
#include "testutil.h"

#include <string.h>

static const struct llama_chat_message CHAT[] = {
    {"system", "You are terse."},
    {"user", "Hi"},
    {"assistant", " Hello. "},
    {"user", "Capital of France?"},
};
#define N_CHAT (sizeof CHAT / sizeof *CHAT)

static void check_text(const char *tmpl, bool add_ass, const char *want) {
    char buf[1024];
    memset(buf, 'x', sizeof buf);
    int n = llama_chat_apply_template(tmpl, CHAT, N_CHAT, add_ass, buf, sizeof buf);
    CHECK(n == (int)strlen(want), "%s: length %d, want %zu", tmpl ? tmpl : "NULL", n, strlen(want));
    CHECK(n > 0 && memcmp(buf, want, (size_t)n) == 0 && buf[n] == 0, "%s: got \"%.*s\"", tmpl ? tmpl : "NULL",
          n > 0 ? n : 0, buf);
}

int main(void) {
    tu_capture_log();

    const char *names[64];
    int n = llama_chat_builtin_templates(NULL, 0);
    CHECK(n == 54, "%d builtin templates", n);
    CHECK(llama_chat_builtin_templates(names, 64) == n, "count");
    bool chatml = false, gemma = false;
    for (int i = 0; i < n; i++) {
        chatml = chatml || strcmp(names[i], "chatml") == 0;
        gemma = gemma || strcmp(names[i], "gemma") == 0;
        CHECK(i == 0 || strcmp(names[i - 1], names[i]) < 0, "names sorted");
    }
    CHECK(chatml && gemma, "chatml and gemma listed");

    const char *chatml_text = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                              "<|im_start|>assistant\n Hello. <|im_end|>\n<|im_start|>user\nCapital of France?"
                              "<|im_end|>\n<|im_start|>assistant\n";
    struct llama_model *smol = tu_load(SMOLLM2_FILE, true);
    const char *tmpl = llama_model_chat_template(smol, NULL);
    CHECK(tmpl != NULL, "SmolLM2 has a chat template");
    if (tmpl) {
        check_text(tmpl, true, chatml_text);
    }
    check_text(NULL, true, chatml_text);
    check_text("gemma", true,
               "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
               "<start_of_turn>user\nCapital of France?<end_of_turn>\n<start_of_turn>model\n");
    check_text("llama3", false,
               "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user"
               "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nCapital of France?<|eot_id|>");

    struct llama_model *gemma3 = tu_load(GEMMA3_FILE, true);
    CHECK(llama_model_chat_template(gemma3, NULL) == NULL, "Gemma 3's GGUF has no chat template");

    /* A short buffer gets the first bytes (no terminator, as strncpy) and the full length back. */
    char small[8];
    memset(small, 'x', sizeof small);
    int full = llama_chat_apply_template("chatml", CHAT, N_CHAT, true, small, sizeof small);
    CHECK(full == (int)strlen(chatml_text), "length with a short buffer: %d", full);
    CHECK(memcmp(small, chatml_text, sizeof small) == 0, "prefix copied");
    CHECK(llama_chat_apply_template("chatml", CHAT, N_CHAT, true, NULL, 0) == full, "count only");

    CHECK(llama_chat_apply_template("{{ messages }}", CHAT, N_CHAT, true, small, sizeof small) == -1,
          "an unknown template is refused");
    CHECK(tu_log_contains("none of the known chat formats"), "and the log says why");
    struct llama_chat_message bad[] = {{"user", NULL}};
    CHECK(llama_chat_apply_template("chatml", bad, 1, true, small, sizeof small) == -1, "NULL content refused");
    CHECK(llama_chat_apply_template("chatml", NULL, 3, true, small, sizeof small) == -1, "NULL chat refused");
    CHECK(llama_chat_apply_template("chatml", NULL, 0, true, NULL, 0) == (int)strlen("<|im_start|>assistant\n"),
          "no messages");

    llama_model_free(gemma3);
    llama_model_free(smol);
    return tu_finish("test_chat");
}
