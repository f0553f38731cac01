// bf16_avx512.h: AVX-512 helpers shared by the files compiled with the AVX-512 BF16 flags
// (bf16_amx.c, bf16_rows.c; Makefile): the VNNI pair interleave and a 16x16 transpose of
// 32-bit elements. Include only from those files.
#ifndef OLMO_BF16_AVX512_H
#define OLMO_BF16_AVX512_H

#include <immintrin.h>
#include <stdint.h>

// Column-within-pair interleave: word 2j <- word j (first row), word 2j+1 <- word 16+j.
static const uint16_t PAIR_IDX[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

// In-register 16x16 transpose of 32-bit elements: r[k] becomes column k of the input.
static inline void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
    }
}

// Two rows as 16 (r0[j], r1[j]) bf16 pairs, one per 32-bit element j (VCVTNE2PS2BF16's rounding)
static inline __m512i bf16_pairs16(__m512 r0, __m512 r1) {
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(PAIR_IDX), (__m512i)_mm512_cvtne2ps_pbh(r1, r0));
}

#endif
