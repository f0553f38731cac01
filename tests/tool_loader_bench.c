// tool_loader_bench.c: the loader's own production rate on a real-sized token file.
//   tool_loader_bench FILE SEQ_LEN GLOBAL_BATCH STEPS [WORLD]
// FILE is created (random ids < 100278, 2^26 tokens) when missing. Prints the time to
// open (incl. the ids < vocab scan), loader_instances_per_s (background thread's rate)
// and the trainer-side wait per step when it consumes batches as fast as it can.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/blas_core.h"
#include "data/loader.h"
#include "util/common.h"

int main(int argc, char **argv) {
    blas_core_init(argv);
    if (argc < 5) { fprintf(stderr, "usage: %s FILE SEQ_LEN GLOBAL_BATCH STEPS [WORLD]\n", argv[0]); return 2; }
    const char *path = argv[1];
    int T = atoi(argv[2]), gb = atoi(argv[3]), steps = atoi(argv[4]), W = argc > 5 ? atoi(argv[5]) : 1;
    if (access(path, R_OK)) {
        FILE *f = fopen(path, "wb");
        uint64_t x = 88172645463325252ull;
        for (uint64_t i = 0; i < (1ull << 26); i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            uint32_t v = (uint32_t)(x % 100278);
            fwrite(&v, 4, 1, f);
        }
        fclose(f);
    }
    char *files[1] = {(char *)path};
    LoaderConfig c = {0};
    c.n_sources = 1;
    snprintf(c.sources[0].name, sizeof c.sources[0].name, "bench");
    c.sources[0].files = files;
    c.sources[0].n_files = 1;
    c.seq_len = T; c.global_batch = gb; c.micro_batch = 1; c.vocab_size = 100278;
    c.seed = 34521; c.shuffle = 1; c.world_size = W; c.rank = 0; c.prefetch = 1;
    double t0 = now_seconds();
    Loader *L = loader_create(&c);
    double t_open = now_seconds() - t0;
    size_t n = (size_t)(gb / W) * (size_t)T;
    int32_t *in = xmalloc(n * 4), *tg = xmalloc(n * 4);
    t0 = now_seconds();
    for (int s = 0; s < steps; s++) loader_next_batch(L, in, tg);
    double t_all = now_seconds() - t0;
    cJSON *m = cJSON_CreateObject();
    loader_metrics(L, m);
    printf("open %.3fs  N %" PRIu64 "  loader_instances_per_s %.0f (%.2f Mtok/s)  consumer %.0f instances/s\n", t_open,
           loader_num_instances(L), cJSON_GetObjectItem(m, "loader_instances_per_s")->valuedouble,
           cJSON_GetObjectItem(m, "loader_instances_per_s")->valuedouble * T / 1e6, steps * (double)(gb / W) / t_all);
    cJSON_Delete(m);
    loader_free(L);
    return 0;
}
