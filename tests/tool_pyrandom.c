// tool_pyrandom.c: command-line driver for src/data/pyrandom (Python's random.Random), used
// by tests/test_packing.py to compare against CPython itself:
//   tool_pyrandom shuffle SEED N     random.Random(SEED).shuffle(list(range(N))), one per line
//   tool_pyrandom bits SEED K COUNT  COUNT values of random.Random(SEED).getrandbits(K)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/pyrandom.h"
#include "util/blas_core.h"

int main(int argc, char **argv) {
    blas_core_init(argv);   // every program of the suite runs the one OpenBLAS core (test_blas_core)
    if (argc == 4 && !strcmp(argv[1], "shuffle")) {
        uint64_t n = strtoull(argv[3], NULL, 0);
        uint32_t *x = malloc((n ? n : 1) * sizeof *x);
        if (!x) return 2;
        for (uint64_t i = 0; i < n; i++) x[i] = (uint32_t)i;
        PyRandom r;
        pyrandom_seed(&r, strtoull(argv[2], NULL, 0));
        pyrandom_shuffle_u32(&r, x, n);
        for (uint64_t i = 0; i < n; i++) printf("%u\n", x[i]);
        free(x);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "bits")) {
        PyRandom r;
        pyrandom_seed(&r, strtoull(argv[2], NULL, 0));
        int k = atoi(argv[3]);
        long count = atol(argv[4]);
        if (k < 1 || k > 64) return 2;
        for (long i = 0; i < count; i++) printf("%llu\n", (unsigned long long)pyrandom_getrandbits(&r, k));
        return 0;
    }
    fprintf(stderr, "usage: tool_pyrandom shuffle SEED N | bits SEED K COUNT\n");
    return 2;
}
