// embedding.c: token embedding lookup and its scatter-add backward.
#include <string.h>

#include <omp.h>

#include "kernels/kernels.h"

void embedding_forward(float *out, const int32_t *tokens, const float *E, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, E + (size_t)tokens[n] * C, sizeof(float) * C);
}

// Threads split the columns; every thread walks the tokens in order, so repeated tokens
// are summed in the same order at any thread count.
void embedding_backward(float *dE, const float *dout, const int32_t *tokens, int N, int C) {
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        for (int n = 0; n < N; n++) {
            float *d = dE + (size_t)tokens[n] * C;
            const float *g = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) d[c] += g[c];
        }
    }
}
