// rope.c: rotary position embedding, rotate-half form (HF/OLMo), in place over heads.
// out[j] = x[j] cos - x[j+D/2] sin; out[j+D/2] = x[j+D/2] cos + x[j] sin, j < D/2.
#include <math.h>

#include "kernels/kernels.h"

void rope_tables(float *cos_t, float *sin_t, int T, int D, double theta) {
    int half = D / 2;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < half; j++) {
            double inv_freq = pow(theta, -2.0 * j / D);
            double a = t * inv_freq;
            cos_t[t * half + j] = (float)cos(a);
            sin_t[t * half + j] = (float)sin(a);
        }
}

static void rotate(float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D, float sign) {
    int half = D / 2;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *c = cos_t + (size_t)t * half, *s = sin_t + (size_t)t * half;
            for (int h = 0; h < H; h++) {
                float *v = x + (((size_t)b * T + t) * H + h) * D;
                for (int j = 0; j < half; j++) {
                    float x1 = v[j], x2 = v[j + half], sn = sign * s[j];
                    v[j] = x1 * c[j] - x2 * sn;
                    v[j + half] = x2 * c[j] + x1 * sn;
                }
            }
        }
}

void rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D) {
    rotate(x, cos_t, sin_t, B, T, H, D, 1.0f);
}

// The backward of a rotation is the rotation by the opposite angle.
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T, int H, int D) {
    rotate(dx, cos_t, sin_t, B, T, H, D, -1.0f);
}
