/* Models split across the CPU and two ggml RPC servers on loopback (issue #11): both test models
 * give the logits of the CPU-only run to the bit, through the servers named by LLAMA_ARG_RPC (how
 * a client with only llama.h reaches them) and through a device list of the process's ggml (the
 * CPU run without repacked weights, which the servers do not repack); the
 * model reports its devices; weights overridden to the CPU (tensor_buft_overrides) give the same
 * logits; an unreachable server fails the load cleanly, and a device or buffer type that is none
 * of our ggml's, or a broken pattern, is refused. The servers are c-tests/rpc_server.c (ggml's own
 * server, built from the same ggml), path in ENGINE_RPC_SERVER. */
#include "testutil.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *PROMPT =
    "The history of Rome begins with a small village on the Tiber, which grew over centuries into the "
    "capital of an empire that reached from Britain to Mesopotamia. Its roads, laws and language";

#define N_STEPS 3

/* llama-ext.h's device queries are C++ functions; C calls them by their mangled names. */
int32_t llama_model_n_devices(const struct llama_model *model) __asm__("_Z21llama_model_n_devicesPK11llama_model");
ggml_backend_dev_t llama_model_get_device(const struct llama_model *model, int i)
    __asm__("_Z22llama_model_get_devicePK11llama_modeli");

static pid_t servers[2];
static char endpoints[2][32];

static bool reachable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static void start_servers(void) {
    const char *bin = getenv("ENGINE_RPC_SERVER");
    if (!bin) {
        fprintf(stderr, "ENGINE_RPC_SERVER is not set (run through ctest)\n");
        exit(2);
    }
    int base = 40000 + (int)(getpid() % 10000) * 2;
    for (int i = 0; i < 2; i++) {
        snprintf(endpoints[i], sizeof endpoints[i], "127.0.0.1:%d", base + i);
        servers[i] = fork();
        if (servers[i] == 0) {
            execl(bin, bin, endpoints[i], "1", (char *)NULL);
            _exit(127);
        }
    }
    for (int i = 0; i < 2; i++) {
        int tries = 0;
        while (!reachable(base + i) && tries++ < 200) {
            usleep(50000);
        }
        if (tries > 200) {
            fprintf(stderr, "RPC server %s did not start\n", endpoints[i]);
            exit(2);
        }
    }
}

static void stop_server(int i) {
    if (servers[i] > 0) {
        kill(servers[i], SIGKILL);
        waitpid(servers[i], NULL, 0);
        servers[i] = 0;
    }
}

static void stop_servers(void) {
    stop_server(0);
    stop_server(1);
}

/* The last token's logits after the prompt (in ubatches of 16) and after each of N_STEPS greedy
 * tokens: (N_STEPS + 1) * n_vocab floats, which the caller frees. */
static float *run(struct llama_model *m) {
    const struct llama_vocab *v = llama_model_get_vocab(m);
    int nv = llama_vocab_n_tokens(v);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 16;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    float *out = calloc((size_t)(N_STEPS + 1) * (size_t)nv, sizeof(float));
    if (!ctx) {
        return out;
    }
    llama_token toks[128];
    int n = llama_tokenize(v, PROMPT, (int)strlen(PROMPT), toks, 128, true, false);
    int rc = tu_decode(ctx, toks, n, 0, 0);
    CHECK(rc == 0, "prompt decode returned %d", rc);
    for (int s = 0; s <= N_STEPS && rc == 0; s++) {
        const float *l = llama_get_logits_ith(ctx, -1);
        CHECK(l != NULL, "logits");
        if (!l) {
            break;
        }
        memcpy(out + (size_t)s * (size_t)nv, l, sizeof(float) * (size_t)nv);
        if (s < N_STEPS) {
            llama_token next = tu_argmax(l, nv);
            rc = tu_decode(ctx, &next, 1, n + s, 0);
            CHECK(rc == 0, "step %d decode returned %d", s, rc);
        }
    }
    llama_free(ctx);
    return out;
}

/* Weight tensors the last load copied to buffer types whose name contains `where` (an endpoint,
 * or "RPC" for every server): the sum over the library's "model: N weight tensors (...) copied to
 * BUFFER" lines since the log was cleared. */
static int copied_to(const char *where) {
    int total = 0;
    for (const char *line = tu_log_text(); (line = strstr(line, "model: ")) != NULL; line++) {
        const char *end = strchr(line, '\n');
        const char *to = strstr(line, " copied to ");
        const char *at = to ? strstr(to, where) : NULL;
        if (to && at && (!end || at < end)) {
            total += atoi(line + strlen("model: "));
        }
    }
    return total;
}

static struct llama_model *load_with(const char *file, int n_gpu_layers, ggml_backend_dev_t *devices,
                                     const struct llama_model_tensor_buft_override *overrides) {
    tu_log_clear();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = n_gpu_layers;
    mp.tensor_buft_overrides = overrides;
    /* The servers keep weights in ggml's plain layout; the CPU's repacked layouts (Gemma 3's Q4_K)
     * run other kernels, with other roundings. */
    mp.use_extra_bufts = false;
    mp.devices = devices;
    struct llama_model *m = llama_model_load_from_file(tu_model_path(file), mp);
    CHECK(m != NULL, "%s: %s", file, llama_engine_last_error());
    return m;
}

static struct llama_model *load(const char *file, int n_gpu_layers, ggml_backend_dev_t *devices) {
    return load_with(file, n_gpu_layers, devices, NULL);
}

static void check_model(const char *file) {
    struct llama_model *cpu = load(file, 0, NULL);
    if (!cpu) {
        return;
    }
    CHECK(copied_to("RPC") == 0, "%s: n_gpu_layers 0 keeps every weight on the CPU", file);
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(cpu));
    size_t bytes = sizeof(float) * (size_t)(N_STEPS + 1) * (size_t)nv;
    int n_layer = llama_model_n_layer(cpu);
    float *want = run(cpu);
    llama_model_free(cpu);
    int all_offloaded = 0; /* weight tensors on the servers with every layer offloaded */

    /* Layer 0 on the CPU, the others and the output split over both servers by their memory. */
    struct llama_model *split = load(file, n_layer, NULL);
    int on_first = copied_to(endpoints[0]), on_second = copied_to(endpoints[1]);
    if (split) {
        CHECK(llama_model_n_devices(split) == 2, "%s: two devices, got %d", file, llama_model_n_devices(split));
        CHECK(on_first > 0 && on_second > 0, "%s: weights on both servers (%d, %d)", file, on_first, on_second);
        float *got = run(split);
        CHECK(memcmp(got, want, bytes) == 0, "%s: CPU + two RPC servers give the CPU's logits", file);
        free(got);

        /* The second server alone, named by a device of the process's ggml. */
        ggml_backend_dev_t second[2] = {llama_model_get_device(split, 1), NULL};
        CHECK(second[0] != NULL && llama_model_get_device(split, 2) == NULL, "device 1 exists, device 2 not");
        struct llama_model *one = load(file, 99, second);
        all_offloaded = copied_to("RPC");
        if (one) {
            CHECK(llama_model_n_devices(one) == 1 && llama_model_get_device(one, 0) == second[0],
                  "%s: the device given is the one used", file);
            CHECK(copied_to(endpoints[1]) > 0 && copied_to(endpoints[0]) == 0,
                  "%s: weights on the second server only", file);
            got = run(one);
            CHECK(memcmp(got, want, bytes) == 0, "%s: everything on one RPC server gives the CPU's logits", file);
            free(got);
            llama_model_free(one);
        }
        llama_model_free(split);
    }

    /* Every layer on the servers but the FFN weights on the CPU (llama.cpp's -ot "ffn_.*=CPU"). */
    ggml_backend_buffer_type_t cpu_buft = ggml_backend_dev_buffer_type(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    struct llama_model_tensor_buft_override ffn_on_cpu[] = {{"ffn_.*", cpu_buft}, {NULL, NULL}};
    struct llama_model *ot = load_with(file, 99, NULL, ffn_on_cpu);
    int kept_off = copied_to("RPC");
    CHECK(kept_off > 0 && kept_off < all_offloaded,
          "%s: the FFN weights stay on the CPU (%d of %d weight tensors on the servers)", file, kept_off,
          all_offloaded);
    if (ot) {
        float *got = run(ot);
        CHECK(memcmp(got, want, bytes) == 0, "%s: FFN weights overridden to the CPU give the CPU's logits", file);
        free(got);
        llama_model_free(ot);
    }
    free(want);
}

/* A server stopped between two decodes: the next decode fails with a message and leaves the cache
 * as it was, the context and model are freed without a crash (nothing more is sent to the dead
 * server), and a model placed on it is refused. (A server dying while a graph computes still takes
 * the process down inside ggml's RPC client; see the README.) */
static void server_dies_between_decodes(const char *list) {
    setenv("LLAMA_ARG_RPC", list, 1);
    struct llama_model *m = load(SMOLLM2_FILE, 99, NULL);
    if (!m) {
        return;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    CHECK(ctx != NULL, "context: %s", llama_engine_last_error());
    if (ctx) {
        llama_token toks[64];
        const struct llama_vocab *v = llama_model_get_vocab(m);
        int n = llama_tokenize(v, PROMPT, (int)strlen(PROMPT), toks, 64, true, false);
        CHECK(tu_decode(ctx, toks, n, 0, 0) == 0, "prompt");
        stop_server(1);
        usleep(200000);
        tu_log_clear();
        llama_token next = toks[1];
        int rc = tu_decode(ctx, &next, 1, n, 0);
        CHECK(rc < 0 && tu_log_contains("has closed its connection"), "a decode after the server died fails: %d", rc);
        CHECK(llama_memory_seq_pos_max(llama_get_memory(ctx), 0) == n - 1, "the cache is as it was");
        llama_free(ctx);
    }
    llama_model_free(m);
    tu_log_clear();
    m = llama_model_load_from_file(tu_model_path(SMOLLM2_FILE), llama_model_default_params());
    CHECK(m == NULL && (tu_log_contains("has closed its connection") || tu_log_contains("unreachable")),
          "a model is not placed on a dead server");
    llama_model_free(m);
    unsetenv("LLAMA_ARG_RPC");
}

int main(void) {
    tu_capture_log();
    start_servers();
    char list[80];
    snprintf(list, sizeof list, "%s,%s", endpoints[0], endpoints[1]);
    setenv("LLAMA_ARG_RPC", list, 1);
    CHECK(llama_supports_rpc() && llama_supports_gpu_offload(), "RPC is built in, so layers can be offloaded");

    check_model(SMOLLM2_FILE);
    check_model(GEMMA3_FILE);

    /* A device pointer that is no device of the process's ggml. */
    int not_a_device = 0;
    ggml_backend_dev_t bogus[2] = {(ggml_backend_dev_t)&not_a_device, NULL};
    struct llama_model_params mp = llama_model_default_params();
    mp.devices = bogus;
    tu_log_clear();
    struct llama_model *m = llama_model_load_from_file(tu_model_path(SMOLLM2_FILE), mp);
    CHECK(m == NULL && tu_log_contains("is not a device of the ggml"), "a foreign device is refused");
    llama_model_free(m);

    /* An override to a buffer type that is none of the process's ggml, and a pattern that is no
     * regular expression. */
    int not_a_buft = 0;
    struct llama_model_tensor_buft_override bad_buft[] = {{"ffn_.*", (ggml_backend_buffer_type_t)&not_a_buft},
                                                          {NULL, NULL}};
    mp = llama_model_default_params();
    mp.tensor_buft_overrides = bad_buft;
    tu_log_clear();
    m = llama_model_load_from_file(tu_model_path(SMOLLM2_FILE), mp);
    CHECK(m == NULL && tu_log_contains("is not one of the ggml"), "a foreign buffer type is refused");
    llama_model_free(m);
    ggml_backend_buffer_type_t cpu_buft = ggml_backend_dev_buffer_type(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    struct llama_model_tensor_buft_override bad_pattern[] = {{"ffn_(", cpu_buft}, {NULL, NULL}};
    mp.tensor_buft_overrides = bad_pattern;
    tu_log_clear();
    m = llama_model_load_from_file(tu_model_path(SMOLLM2_FILE), mp);
    CHECK(m == NULL && tu_log_contains("tensor override pattern 'ffn_('"), "a broken pattern is refused");
    llama_model_free(m);

    /* Nothing listens on port 1. */
    setenv("LLAMA_ARG_RPC", "127.0.0.1:1", 1);
    tu_log_clear();
    m = llama_model_load_from_file(tu_model_path(SMOLLM2_FILE), llama_model_default_params());
    CHECK(m == NULL && tu_log_contains("unreachable"), "an unreachable RPC server fails the load");
    llama_model_free(m);
    unsetenv("LLAMA_ARG_RPC");

    server_dies_between_decodes(list);

    stop_servers();
    return tu_finish("test_rpc");
}
