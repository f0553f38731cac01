// attention.c: causal (optionally sliding-window) grouped-query attention.
// Memory is linear in T: the forward handles one query row at a time (its window of
// scores lives in a per-thread row buffer) and saves only the output and the row's
// log-sum-exp; the backward recomputes the probabilities from q, k and the lse.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/common.h"

static inline float dotf(const float *a, const float *b, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int D, int window) {
    const float scale = 1.0f / sqrtf((float)D);
    const int group = NH / NKV;
    const int wlen = window < T ? window : T;
#pragma omp parallel
    {
        float *s = xmalloc_aligned(sizeof(float) * (size_t)wlen);
#pragma omp for collapse(3) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < T; i++) {
                    const int g = h / group;
                    const float *qi = q + (((size_t)b * T + i) * NH + h) * D;
                    const int lo = i - wlen + 1 > 0 ? i - wlen + 1 : 0;
                    float mx = -INFINITY;
                    for (int j = lo; j <= i; j++) {
                        float sc = dotf(qi, k + (((size_t)b * T + j) * NKV + g) * D, D) * scale;
                        s[j - lo] = sc;
                        if (sc > mx) mx = sc;
                    }
                    float sum = 0.0f;
                    for (int j = lo; j <= i; j++) {
                        float e = expf(s[j - lo] - mx);
                        s[j - lo] = e;
                        sum += e;
                    }
                    float *o = out + (((size_t)b * T + i) * NH + h) * D;
                    memset(o, 0, sizeof(float) * D);
                    float inv = 1.0f / sum;
                    for (int j = lo; j <= i; j++) {
                        const float *vj = v + (((size_t)b * T + j) * NKV + g) * D;
                        float p = s[j - lo] * inv;
                        for (int d = 0; d < D; d++) o[d] += p * vj[d];
                    }
                    lse[((size_t)b * NH + h) * T + i] = mx + logf(sum);
                }
        free(s);
    }
}

// One task per (batch, kv head): it walks its query heads and queries in a fixed order,
// so dk/dv accumulate identically at any thread count, and no two tasks share an output.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int D, int window) {
    const float scale = 1.0f / sqrtf((float)D);
    const int group = NH / NKV;
    const int wlen = window < T ? window : T;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++)
            for (int g = 0; g < NKV; g++) {
                for (int j = 0; j < T; j++) {
                    memset(dk + (((size_t)b * T + j) * NKV + g) * D, 0, sizeof(float) * D);
                    memset(dv + (((size_t)b * T + j) * NKV + g) * D, 0, sizeof(float) * D);
                }
                for (int h = g * group; h < (g + 1) * group; h++)
                    for (int i = 0; i < T; i++) {
                        const size_t qoff = (((size_t)b * T + i) * NH + h) * D;
                        const float *qi = q + qoff, *doi = dout + qoff, *oi = out + qoff;
                        float *dqi = dq + qoff;
                        const int lo = i - wlen + 1 > 0 ? i - wlen + 1 : 0;
                        const float l = lse[((size_t)b * NH + h) * T + i];
                        const float Di = dotf(doi, oi, D);
                        memset(dqi, 0, sizeof(float) * D);
                        for (int j = lo; j <= i; j++) {
                            const size_t koff = (((size_t)b * T + j) * NKV + g) * D;
                            const float *kj = k + koff, *vj = v + koff;
                            float pj = expf(dotf(qi, kj, D) * scale - l);
                            float dp = dotf(doi, vj, D);
                            float ds = pj * (dp - Di) * scale;
                            float *dkj = dk + koff, *dvj = dv + koff;
                            for (int d = 0; d < D; d++) {
                                dqi[d] += ds * kj[d];
                                dkj[d] += ds * qi[d];
                                dvj[d] += pj * doi[d];
                            }
                        }
                    }
            }
}
