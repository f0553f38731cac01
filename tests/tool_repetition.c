// tool_repetition.c: repetition_max_times (data/repetition.h) over sequences read from a file
// of little-endian int32: n, then n tokens, repeated; prints one line per sequence, the
// largest run count (0: none). tests/test_instance_filter.py compares it with a numpy port
// of OLMo-core's find_periodic_sequences.
//   tool_repetition FILE MIN_PERIOD MAX_PERIOD
#include <stdio.h>
#include <stdlib.h>

#include "data/repetition.h"
#include "util/blas_core.h"
#include "util/common.h"

int main(int argc, char **argv) {
    blas_core_init(argv);
    if (argc != 4) die_input("usage: tool_repetition FILE MIN_PERIOD MAX_PERIOD");
    FILE *f = fopen(argv[1], "rb");
    if (!f) die_input("%s: cannot open", argv[1]);
    const int lo = atoi(argv[2]), hi = atoi(argv[3]);
    int32_t n;
    while (fread(&n, sizeof n, 1, f) == 1) {
        int32_t *t = xmalloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
        if (fread(t, sizeof(int32_t), (size_t)n, f) != (size_t)n) die_input("%s: truncated", argv[1]);
        printf("%d\n", repetition_max_times(t, n, lo, hi));
        free(t);
    }
    fclose(f);
    return 0;
}
