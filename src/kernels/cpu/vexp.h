// vexp.h: expf that vectorizes, two ways: vexpf (fast, ~2 ulp, softmax) and vexpf_glibc
// (libm's expf bit for bit, below). glibc's vector expf is only used under -ffast-math,
// which we do not allow (it reorders reductions), so softmax loops would call the scalar
// expf once per element. This is the classic Cephes scheme: x = n ln2 + r with |r| <= ln2/2,
// exp(r) by a degree-6 polynomial, scaled by 2^n through the exponent bits. Max relative
// error about 2 ulp over the range softmax uses (x <= 0), checked against expf in
// tests/test_kernels.c. Inputs below -87.3 flush to 0 (as softmax wants).
#ifndef OLMO_VEXP_H
#define OLMO_VEXP_H

#include <math.h>
#include <stdint.h>

static inline float vexpf(float x) {
    x = x < -87.33654f ? -87.33654f : (x > 88.3762626647949f ? 88.3762626647949f : x);
    float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
    // r = x - n ln2, with ln2 split in two so the product is exact enough
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float r2 = r * r;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r2 + r + 1.0f;
    // 2^n through the exponent bits; a union (not memcpy) keeps the loop vectorizable
    union { int32_t i; float f; } scale = {((int32_t)n + 127) << 23};
    float y = p * scale.f;
    return x <= -87.33654f ? 0.0f : y;
}

// expf exactly as glibc computes it on x86-64 with FMA (__expf_fma, glibc >= 2.27: ARM's
// table-driven algorithm in double), written so that it inlines and vectorizes: for
// ops whose results must not move a bit from libm's expf (SwiGLU). With k = round(x 32 /
// ln 2) and r the remainder, exp(x) = 2^(k/32) 2^(r/32): the first from a table of
// 2^(i/32) (each entry the double nearest 2^(i/32), less i << 47 so that adding k << 47
// puts k's integer part in the exponent), the second a cubic. Equal to libm's expf on all
// 2^32 floats, NaNs aside (`build/tests/test_kernels expf-all`; the suite samples every 97th).
static const uint64_t VEXPF_GLIBC_T[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

static inline float vexpf_glibc(float x) {
    const double inv_ln2_n = 0x1.71547652b82fep+0 * 32, shift = 0x1.8p+52;
    const double c0 = 0x1.c6af84b912394p-5 / (32.0 * 32 * 32), c1 = 0x1.ebfce50fac4f3p-3 / (32.0 * 32),
                 c2 = 0x1.62e42ff0c52d6p-1 / 32;
    const double xd = (double)x, z = inv_ln2_n * xd;
    union { double f; uint64_t i; } kd = {z + shift}, s;   // k in kd's low bits
    const double k = kd.f - shift;
    const double r = __builtin_fma(inv_ln2_n, xd, -k);     // as the FMA build contracts z - k
    s.i = VEXPF_GLIBC_T[kd.i % 32] + (kd.i << 47);
    const double y = __builtin_fma(__builtin_fma(c0, r, c1), r * r, __builtin_fma(c2, r, 1.0)) * s.f;
    float res = (float)y;
    res = x > 0x1.62e42ep6f ? __builtin_inff() : res;      // overflow
    res = x < -0x1.9fe368p6f ? 0.0f : res;                 // below the smallest subnormal
    return x != x ? x : res;
}

// A softmax's row passes in 512-bit vectors where the CPU has them (GCC's default on these
// CPUs is 256 bits; elementwise or a max, so no bit depends on the width):
// e[v] = vexpf(x[v] - m) for v < n (e may be x).
#define VEXP_WIDE __attribute__((target("prefer-vector-width=512"), noinline, unused))
VEXP_WIDE static void vexpf_shifted(float *e, const float *x, int n, float m) {
#pragma omp simd
    for (int v = 0; v < n; v++) e[v] = vexpf(x[v] - m);
}
// max of x[0, n) (exact in any order); x[v] *= a
VEXP_WIDE static float row_max(const float *x, int n) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < n; v++) mx = x[v] > mx ? x[v] : mx;
    return mx;
}
VEXP_WIDE static void row_scale(float *x, int n, float a) {
#pragma omp simd
    for (int v = 0; v < n; v++) x[v] *= a;
}
#endif
