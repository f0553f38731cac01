// vexp.h: an expf that vectorizes. glibc's vector expf is only used under -ffast-math,
// which we do not allow (it reorders reductions), so softmax loops would call the scalar
// expf once per element. This is the classic Cephes scheme: x = n ln2 + r with |r| <= ln2/2,
// exp(r) by a degree-6 polynomial, scaled by 2^n through the exponent bits. Max relative
// error about 2 ulp over the range softmax uses (x <= 0), checked against expf in
// tests/test_kernels.c. Inputs below -87.3 flush to 0 (as softmax wants).
#ifndef OLMO_VEXP_H
#define OLMO_VEXP_H

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

#endif
