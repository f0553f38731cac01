// cuda_bf16.h (emulation): __nv_bfloat16 as 16 bits with CUDA's conversions (round to
// nearest even; NaN -> 0x7fff as the device returns it).
#pragma once
#include "cuemu.h"

static inline unsigned short cuemu_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
static inline float cuemu_bf2f(unsigned short h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(cuemu_f2bf(f)) {}
    operator float() const { return cuemu_bf2f(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;
static inline __nv_bfloat16 __float2bfloat16(float f) {
    __nv_bfloat16 r;
    r.__x = cuemu_f2bf(f);
    return r;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return cuemu_bf2f(h.__x); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
// a pair (one 32-bit register on the device)
struct __align__(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162{__float2bfloat16(a), __float2bfloat16(b)}; }
