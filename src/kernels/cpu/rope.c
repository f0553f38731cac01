// rope.c: rotary position embedding, rotate-half form (HF/OLMo), in place over heads.
// out[j] = x[j] cos - x[j+D/2] sin; out[j+D/2] = x[j+D/2] cos + x[j] sin, j < D/2.
// With YaRN the tables carry the scaled frequencies and the attention factor (cos and sin
// both multiplied by it, as OLMo-core and HF do), so the rotation code is the same; the
// backward is then the transpose (rotation by -angle, same magnitude), which equals
// rotate(.., -sin) since the scaled table is m*(cos, sin).
#include <math.h>

#include "kernels/kernels.h"

double rope_attention_factor(const RopeScaling *s) {
    if (!s || s->type != ROPE_SCALING_YARN) return 1.0;
    return 0.1 * log(s->factor) + 1.0;
}

// YaRN (OLMo-core's YaRNRoPEScalingConfig.compute_scaled_inv_freq): the dimension index at
// which a frequency completes n_rot rotations over the original context.
static double yarn_dim_from_rot(double n_rot, int D, double theta, int original_context) {
    return D * log(original_context / (n_rot * 2.0 * M_PI)) / (2.0 * log(theta));
}

void rope_tables(float *cos_t, float *sin_t, int T, int D, double theta, const RopeScaling *scaling) {
    int half = D / 2;
    int yarn = scaling && scaling->type == ROPE_SCALING_YARN;
    double lo = 0, span = 1, mscale = rope_attention_factor(scaling);
    if (yarn) {
        // OLMo-core clips the ramp's end to half - 1 (HF: D - 1); the ramp runs over j < half.
        double l = floor(yarn_dim_from_rot(scaling->beta_fast, D, theta, scaling->original_context));
        double h = ceil(yarn_dim_from_rot(scaling->beta_slow, D, theta, scaling->original_context));
        lo = l > 0 ? l : 0;
        h = h < half - 1 ? h : half - 1;
        span = h - lo > 1e-3 ? h - lo : 1e-3;
    }
    for (int j = 0; j < half; j++) {
        double inv_freq = pow(theta, -2.0 * j / D);
        if (yarn) {
            double ramp = (j - lo) / span;   // 0: keep the frequency (extrapolate), 1: divide by factor
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            inv_freq = inv_freq / scaling->factor * ramp + inv_freq * (1.0 - ramp);
        }
        for (int t = 0; t < T; t++) {
            double a = t * inv_freq;
            cos_t[(size_t)t * half + j] = (float)(cos(a) * mscale);
            sin_t[(size_t)t * half + j] = (float)(sin(a) * mscale);
        }
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
