// optim.c: flat-range helpers for the optimizer: deterministic sum of squares, scaling,
// accumulation, and the AdamW update exactly as torch.optim.AdamW computes it.
#include <math.h>

#include "kernels/cpu/lanes.h"
#include "kernels/kernels.h"


double sumsq(const float *x, size_t n) {
    size_t nchunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double total = 0.0;
    // Partials per fixed chunk, then summed in chunk order: independent of thread count.
    double partial[256];
    for (size_t base = 0; base < nchunks; base += 256) {
        size_t cnt = nchunks - base < 256 ? nchunks - base : 256;
#pragma omp parallel for schedule(static)
        for (size_t c = 0; c < cnt; c++) {
            size_t lo = (base + c) * SUMSQ_CHUNK, hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n;
            partial[c] = dot8(x + lo, NULL, hi - lo);   // lanes.h: vectorizes, fixed order
        }
        for (size_t c = 0; c < cnt; c++) total += partial[c];
    }
    return total;
}

void scale_inplace(float *x, float s, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void add_inplace(float *acc, const float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

// g scaled by clip (the float product scale_inplace would store) when clipping, else g.
static inline void adamw_body(float *p, float *m, float *v, const float *g, size_t n, float clip, int clipping,
                              float lr, float beta1, float beta2, float eps, float wd, int step) {
    // Same operation order as torch.optim.AdamW (single-tensor path, torch 1.13).
    double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    float step_size = (float)(lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float decay = 1.0f - lr * wd;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = clipping ? g[i] * clip : g[i];
        p[i] *= decay;
        m[i] = m[i] * beta1 + gi * (1.0f - beta1);
        v[i] = v[i] * beta2 + (1.0f - beta2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] - step_size * (m[i] / denom);
    }
}

void adamw_update(float *p, float *m, float *v, const float *g, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int step) {
    adamw_body(p, m, v, g, n, 1.0f, 0, lr, beta1, beta2, eps, wd, step);
}

void adamw_update_clipped(float *p, float *m, float *v, const float *g, size_t n, float clip, float lr, float beta1,
                          float beta2, float eps, float wd, int step) {
    if (clip < 1.0f) adamw_body(p, m, v, g, n, clip, 1, lr, beta1, beta2, eps, wd, step);
    else adamw_body(p, m, v, g, n, 1.0f, 0, lr, beta1, beta2, eps, wd, step);
}
