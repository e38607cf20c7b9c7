#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int tu_failures = 0;

int tu_finish(const char *name) {
    if (tu_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tu_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

static char path_buf[4][4096];
static int path_next = 0;

static char *next_path(void) {
    char *p = path_buf[path_next];
    path_next = (path_next + 1) % 4;
    return p;
}

const char *tu_model_path(const char *file) {
    const char *dir = getenv("ENGINE_MODEL_DIR");
    char *p = next_path();
    if (dir && *dir) {
        snprintf(p, sizeof path_buf[0], "%s/%s", dir, file);
    } else {
        snprintf(p, sizeof path_buf[0], "%s/.cache/engine/models/%s", getenv("HOME") ? getenv("HOME") : ".", file);
    }
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "model file missing: %s (run scripts/fetch-models.sh)\n", p);
        exit(2);
    }
    fclose(f);
    return p;
}

const char *tu_ref_path(const char *model_ref, const char *file) {
    const char *dir = getenv("ENGINE_REFERENCE_DIR");
    char *p = next_path();
    snprintf(p, sizeof path_buf[0], "%s/%s/%s", dir && *dir ? dir : "tests/reference", model_ref, file);
    return p;
}

char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    buf[n] = 0;
    fclose(f);
    if (len) {
        *len = (size_t)n;
    }
    return buf;
}

char *tu_read_reference(const char *model_ref, const char *file) {
    char *text = tu_read_file(tu_ref_path(model_ref, file), NULL);
    static const char header[] = "{\"recorded\":";
    if (strncmp(text, header, sizeof header - 1) == 0) {
        char *rest = strchr(text, '\n');
        rest = rest ? rest + 1 : text + strlen(text);
        memmove(text, rest, strlen(rest) + 1);
    }
    return text;
}

/* Pointer just past `"key":` (and spaces), or NULL. */
static const char *value_of(const char *json, const char *key) {
    char pat[256];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) {
        return NULL;
    }
    p += strlen(pat);
    while (*p == ' ') {
        p++;
    }
    return p;
}

bool tu_json_int(const char *json, const char *key, long long *out) {
    const char *p = value_of(json, key);
    char *end;
    if (!p) {
        return false;
    }
    *out = strtoll(p, &end, 10);
    return end != p;
}

bool tu_json_bool(const char *json, const char *key, bool *out) {
    const char *p = value_of(json, key);
    if (p && strncmp(p, "true", 4) == 0) {
        *out = true;
        return true;
    }
    if (p && strncmp(p, "false", 5) == 0) {
        *out = false;
        return true;
    }
    return false;
}

int tu_json_str(const char *json, const char *key, char *out, size_t cap) {
    const char *p = value_of(json, key);
    if (!p || *p != '"') {
        return -1;
    }
    p++;
    const char *q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= cap) {
        return -1;
    }
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = 0;
    return (int)(q - p);
}

int tu_json_double_array(const char *json, const char *key, double *out, int cap) {
    const char *p = value_of(json, key);
    int n = 0;
    if (!p || *p != '[') {
        return -1;
    }
    p++;
    while (*p && *p != ']') {
        char *end;
        double v = strtod(p, &end);
        if (end == p) {
            return -1;
        }
        if (n < cap) {
            out[n] = v;
        }
        n++;
        p = end;
        while (*p == ',' || *p == ' ') {
            p++;
        }
    }
    return n < cap ? n : cap;
}

int tu_json_int_array(const char *json, const char *key, long long *out, int cap) {
    double *d = malloc(sizeof(double) * (size_t)(cap > 0 ? cap : 1));
    int n = tu_json_double_array(json, key, d, cap);
    for (int i = 0; i < n; i++) {
        out[i] = (long long)d[i];
    }
    free(d);
    return n;
}

int tu_hex_decode(const char *hex, unsigned char *out, size_t cap) {
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > cap) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        out[i] = (unsigned char)v;
    }
    return (int)(n / 2);
}

static char log_buf[1 << 16];
static size_t log_len = 0;

static void capture(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    size_t n = strlen(text);
    if (log_len + n < sizeof log_buf) {
        memcpy(log_buf + log_len, text, n + 1);
        log_len += n;
    }
    if (level >= GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_CONT) {
        fputs(text, stderr);
    }
}

void tu_capture_log(void) {
    llama_log_set(capture, NULL);
}

void tu_log_clear(void) {
    log_len = 0;
    log_buf[0] = 0;
}

bool tu_log_contains(const char *needle) {
    return strstr(log_buf, needle) != NULL;
}

const char *tu_log_text(void) {
    return log_buf;
}

struct llama_model *tu_load(const char *file, bool vocab_only) {
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = vocab_only;
    struct llama_model *m = llama_model_load_from_file(tu_model_path(file), mp);
    if (!m) {
        fprintf(stderr, "failed to load %s: %s\n", file, llama_engine_last_error());
        exit(2);
    }
    return m;
}

int tu_decode(struct llama_context *ctx, const llama_token *t, int n, llama_pos pos0, llama_seq_id seq) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        b.token[i] = t[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = i == n - 1;
    }
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

int tu_argmax(const float *l, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (l[i] > l[best]) {
            best = i;
        }
    }
    return best;
}

bool tu_survives(void (*fn)(void), unsigned timeout_s) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(timeout_s);
        fn();
        _exit(tu_failures ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
