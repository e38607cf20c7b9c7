/* A ggml RPC server for the tests: ggml's own server (ggml_backend_rpc_start_server) over this
 * machine's CPU device, from the ggml libraries built beside libengine.so.
 * Usage: rpc_server HOST:PORT [THREADS] */
#include "ggml-backend.h"
#include "ggml-rpc.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s HOST:PORT [THREADS]\n", argv[0]);
        return 2;
    }
    size_t n_threads = argc > 2 ? (size_t)atoi(argv[2]) : 1;
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) {
        fprintf(stderr, "no CPU device\n");
        return 1;
    }
    ggml_backend_rpc_start_server(argv[1], NULL, n_threads, 1, &cpu);
    return 1;
}
