// tool_pcg64.c: command-line driver for src/data/pcg64 and src/data/order, used by
// tests/test_pcg64_order.py to compare against numpy, and to time the permutation.
//   tool_pcg64 words SEED          SeedSequence(SEED).generate_state(4, uint64), in hex
//   tool_pcg64 raw SEED K          K values of PCG64(SEED).random_raw() then K of next32
//   tool_pcg64 perm SEED N OUT     the global order as raw little-endian uint32 to OUT
//   tool_pcg64 slice SEED N IPB BP W R OUT
//                                  rank R's instances of every global batch after BP,
//                                  concatenated, as raw uint32 to OUT
//   tool_pcg64 time SEED N         seconds to build the order of N instances
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/blas_core.h"
#include "data/order.h"
#include "data/pcg64.h"

static uint64_t arg_u64(const char *s) { return strtoull(s, NULL, 0); }

static uint32_t *order_or_die(uint64_t seed, uint64_t n) {
    uint32_t *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) { fprintf(stderr, "tool_pcg64: out of memory for %llu\n", (unsigned long long)n); exit(2); }
    olmo_global_order(seed, p, n);
    return p;
}

static void write_or_die(const char *path, const uint32_t *a, uint64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, sizeof *a, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "tool_pcg64: cannot write %s\n", path);
        exit(2);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "words") && argc == 3) {
        uint64_t w[4];
        seed_sequence_state(arg_u64(argv[2]), w);
        for (int i = 0; i < 4; i++) printf("%016llx\n", (unsigned long long)w[i]);
    } else if (!strcmp(mode, "raw") && argc == 4) {
        uint64_t k = arg_u64(argv[3]);
        Pcg64 rng;
        pcg64_seed(&rng, arg_u64(argv[2]));
        for (uint64_t i = 0; i < k; i++) printf("%llu\n", (unsigned long long)pcg64_next64(&rng));
        for (uint64_t i = 0; i < k; i++) printf("%u\n", pcg64_next32(&rng));
    } else if (!strcmp(mode, "perm") && argc == 5) {
        uint64_t n = arg_u64(argv[3]);
        uint32_t *p = order_or_die(arg_u64(argv[2]), n);
        write_or_die(argv[4], p, n);
        free(p);
    } else if (!strcmp(mode, "slice") && argc == 9) {
        uint64_t n = arg_u64(argv[3]), ipb = arg_u64(argv[4]), bp = arg_u64(argv[5]);
        int W = atoi(argv[6]), r = atoi(argv[7]);
        uint32_t *p = order_or_die(arg_u64(argv[2]), n);
        uint64_t per = order_rank_count(ipb, W, r), total = 0;
        uint32_t *out = malloc((n + 1) * sizeof *out);
        if (!out) { fprintf(stderr, "tool_pcg64: out of memory\n"); return 2; }
        for (uint64_t b = 0;; b++) {
            uint64_t got = global_batch_rank_instances(p, n, ipb, bp, b, W, r, out + total);
            if (got == 0) break;
            if (got != per) { fprintf(stderr, "tool_pcg64: batch %llu gave %llu, want %llu\n",
                                      (unsigned long long)b, (unsigned long long)got,
                                      (unsigned long long)per); return 1; }
            total += got;
        }
        write_or_die(argv[8], out, total);
        free(out);
        free(p);
    } else if (!strcmp(mode, "time") && argc == 4) {
        uint64_t n = arg_u64(argv[3]);
        uint32_t *p = malloc(n * sizeof *p);
        if (!p) { fprintf(stderr, "tool_pcg64: out of memory\n"); return 2; }
        memset(p, 0, n * sizeof *p); // fault the pages in outside the timed region
        double t0 = now();
        olmo_global_order(arg_u64(argv[2]), p, n);
        double t1 = now();
        printf("n=%llu seconds=%.3f first=%u last=%u\n", (unsigned long long)n, t1 - t0, p[0],
               p[n - 1]);
        free(p);
    } else {
        fprintf(stderr, "usage: tool_pcg64 words SEED | raw SEED K | perm SEED N OUT |\n"
                        "       slice SEED N IPB BP W R OUT | time SEED N\n");
        return 2;
    }
    return 0;
}
