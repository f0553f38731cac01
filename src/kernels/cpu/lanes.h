// lanes.h: sums whose order the source writes out, in eight lanes (element i into lane
// i % 8, each lane in index order, the lanes then combined in a fixed order), so that they
// vectorize and still give the same bits on every CPU, vector width and compiler. Used by
// the gradient's sum of squares (optim.c), RMSNorm's row sums (norm.c) and the softmax sums
// of the LM head (lmhead.c).
#ifndef OLMO_LANES_H
#define OLMO_LANES_H

#include <stddef.h>

// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))
static inline double lanes8_total(const double l[8]) {
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// sum over i < n of (double)a[i] * b[i] in double lanes; b == NULL: the squares of a
static inline double dot8(const float *a, const float *b, size_t n) {
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += (double)a[i + j] * (b ? b[i + j] : a[i + j]);
    for (int j = 0; i < n; i++, j++) l[j] += (double)a[i] * (b ? b[i] : a[i]);
    return lanes8_total(l);
}

// sum of e[0, n) in fp32 lanes, the lanes then added in order: ((0 + l0) + l1) + ... + l7.
// For n a multiple of 8 this is the order GCC 12 gave `#pragma omp simd reduction(+ : s)`
// over floats at 256-bit vectors, which the LM head used before (so its bits stayed:
// scripts/bitwise_check.sh's large-vocabulary runs against a371d6e).
static inline float sum_lanes8(const float *e, int n) {
    float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) l[j] += e[i + j];
    for (int j = 0; i < n; i++, j++) l[j] += e[i];
    float s = 0.0f;
    for (int j = 0; j < 8; j++) s += l[j];
    return s;
}

#endif
