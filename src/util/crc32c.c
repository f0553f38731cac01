// crc32c.c: see crc32c.h. Two hardware paths: with AVX-512 + VPCLMULQDQ, 256-byte steps of
// carry-less-multiply folding (from 1 KiB on); then, for the rest or without them, Mark
// Adler's scheme (crc32c.c, rewritten): three equal blocks whose CRCs run in parallel (the
// crc32 instruction has a 3-cycle latency and 1-cycle throughput), combined by "appending
// zeros" operators precomputed once as 4 x 256 tables.
#include "util/crc32c.h"

#include <pthread.h>
#include <string.h>
#ifdef __SSE4_2__
#include <nmmintrin.h>
#endif

#define POLY 0x82f63b78u   // reflected 0x1EDC6F41

static uint32_t table[256];

static void init_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[n] = c;
    }
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_table);
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--) crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

// GF(2) 32x32 matrices as 32 column words: the operators that advance a CRC over zeros.
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}
static void gf2_square(uint32_t *sq, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) sq[n] = gf2_times(mat, mat[n]);
}
// zlib's crc32_combine for this polynomial: crc1 advanced over len2 zero bytes (squarings
// of the one-zero-bit operator, one per bit of len2), xored with crc2. The pre- and
// post-inversion of crc32c() cancel, so no correction term is needed.
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2) {
    if (len2 == 0) return crc1;
    uint32_t even[32], odd[32], row = 1;
    odd[0] = POLY;   // one zero bit
    for (int n = 1; n < 32; n++, row <<= 1) odd[n] = row;
    gf2_square(even, odd);   // two zero bits
    gf2_square(odd, even);   // four
    do {                     // eight (one byte), sixteen, ...: applied where len2 has a bit
        gf2_square(even, odd);
        if (len2 & 1) crc1 = gf2_times(even, crc1);
        len2 >>= 1;
        if (!len2) break;
        gf2_square(odd, even);
        if (len2 & 1) crc1 = gf2_times(odd, crc1);
        len2 >>= 1;
    } while (len2);
    return crc1 ^ crc2;
}

#ifndef __SSE4_2__
uint32_t crc32c(uint32_t crc, const void *buf, size_t len) { return crc32c_sw(crc, buf, len); }
#else
// The operator appending len zero bytes (len a power of two).
static void zeros_op(uint32_t *even, size_t len) {
    uint32_t odd[32], row = 1;
    odd[0] = POLY;   // one zero bit
    for (int n = 1; n < 32; n++, row <<= 1) odd[n] = row;
    gf2_square(even, odd);   // two zero bits
    gf2_square(odd, even);   // four
    do {                     // eight (one byte), sixteen, ... until len is used up
        gf2_square(even, odd);
        len >>= 1;
        if (len == 0) return;
        gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof odd);
}
static void zeros_tables(uint32_t z[4][256], size_t len) {
    uint32_t op[32];
    zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++) z[k][n] = gf2_times(op, n << (8 * k));
}
static uint32_t shift(uint32_t z[4][256], uint32_t crc) {
    return z[0][crc & 0xff] ^ z[1][(crc >> 8) & 0xff] ^ z[2][(crc >> 16) & 0xff] ^ z[3][crc >> 24];
}

#define LONG 8192
#define SHORT 256
static uint32_t long_z[4][256], short_z[4][256];
static void init_hw(void) {
    zeros_tables(long_z, LONG);
    zeros_tables(short_z, SHORT);
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

#if defined(__PCLMUL__) && defined(__AVX512F__) && defined(__VPCLMULQDQ__)
#include <immintrin.h>
// x^n mod P in the reflected representation of a CRC register (bit i: coefficient of x^(31-i)).
static uint32_t xpow_mod(unsigned n) {
    uint32_t v = 0x80000000u;   // x^0
    while (n--) v = v & 1 ? (v >> 1) ^ POLY : v >> 1;
    return v;
}
// Folding with carry-less multiplies (PCLMULQDQ): a 128-bit block A followed by D bits of
// message contributes A * x^D mod P; with A = Ah x^64 + Al (Ah: the low qword, reflected),
// A x^D = Ah x^(64+D) + Al x^D, and a 64x32 reflected product lands as that product times
// x^33, so the constants are x^(D+31) and x^(D-33) mod P. Only on 512-bit registers: with
// 128-bit ones (four accumulators) a test Xeon was no faster than the three crc32 streams.
static __m128i k2048, k512, k128;
static void init_fold(void) {
    k2048 = _mm_set_epi64x(xpow_mod(2048 - 33), xpow_mod(2048 + 31));
    k512 = _mm_set_epi64x(xpow_mod(512 - 33), xpow_mod(512 + 31));
    k128 = _mm_set_epi64x(xpow_mod(128 - 33), xpow_mod(128 + 31));
}
static inline __m128i fold(__m128i a, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}
// Folding on 512-bit registers (VPCLMULQDQ: four 128-bit lanes each): four accumulators
// take 256 bytes per step (D = 2048), then fold into one (D = 512), then its four lanes into
// one 128-bit block; that is 128 bits of message, which the crc32 instruction reduces from a
// zero register. ~4x the three crc32 streams on a Xeon with AVX-512 (tests/test_checkpoint.c
// checks it against the bytewise CRC).
static inline __m512i foldz(__m512i a, __m512i k) {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(a, k, 0x00), _mm512_clmulepi64_epi128(a, k, 0x11));
}
static uint32_t crc_fold512(uint32_t crc, const uint8_t *p, size_t n256) {
    const __m512i k2048z = _mm512_broadcast_i32x4(k2048), k512z = _mm512_broadcast_i32x4(k512);
    __m512i y0 = _mm512_loadu_si512(p), y1 = _mm512_loadu_si512(p + 64), y2 = _mm512_loadu_si512(p + 128),
            y3 = _mm512_loadu_si512(p + 192);
    y0 = _mm512_xor_si512(y0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));   // the register enters as the first 32 bits
    for (p += 256; --n256; p += 256) {
        y0 = _mm512_xor_si512(foldz(y0, k2048z), _mm512_loadu_si512(p));
        y1 = _mm512_xor_si512(foldz(y1, k2048z), _mm512_loadu_si512(p + 64));
        y2 = _mm512_xor_si512(foldz(y2, k2048z), _mm512_loadu_si512(p + 128));
        y3 = _mm512_xor_si512(foldz(y3, k2048z), _mm512_loadu_si512(p + 192));
    }
    y1 = _mm512_xor_si512(y1, foldz(y0, k512z));
    y2 = _mm512_xor_si512(y2, foldz(y1, k512z));
    y3 = _mm512_xor_si512(y3, foldz(y2, k512z));
    __m128i x = _mm512_extracti32x4_epi32(y3, 0);
    x = _mm_xor_si128(_mm512_extracti32x4_epi32(y3, 1), fold(x, k128));
    x = _mm_xor_si128(_mm512_extracti32x4_epi32(y3, 2), fold(x, k128));
    x = _mm_xor_si128(_mm512_extracti32x4_epi32(y3, 3), fold(x, k128));
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_hw);
    const uint8_t *p = buf;
    uint64_t c0 = ~crc & 0xffffffffu;
#if defined(__PCLMUL__) && defined(__AVX512F__) && defined(__VPCLMULQDQ__)
    static pthread_once_t once_fold = PTHREAD_ONCE_INIT;
    if (len >= 1024) {
        pthread_once(&once_fold, init_fold);
        c0 = crc_fold512((uint32_t)c0, p, len / 256);
        p += len / 256 * 256;
        len %= 256;
    }
#endif
    while (len && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        len--;
    }
    // Three streams over consecutive blocks of LONG (then SHORT) bytes; the first CRC is
    // advanced over the next block's length and xored with it, twice.
    for (int pass = 0; pass < 2; pass++) {
        const size_t blk = pass == 0 ? LONG : SHORT;
        uint32_t(*z)[256] = pass == 0 ? long_z : short_z;
        while (len >= 3 * blk) {
            uint64_t c1 = 0, c2 = 0;
            const uint8_t *end = p + blk;
            do {
                c0 = _mm_crc32_u64(c0, load64(p));
                c1 = _mm_crc32_u64(c1, load64(p + blk));
                c2 = _mm_crc32_u64(c2, load64(p + 2 * blk));
                p += 8;
            } while (p < end);
            c0 = shift(z, (uint32_t)c0) ^ (uint32_t)c1;
            c0 = shift(z, (uint32_t)c0) ^ (uint32_t)c2;
            p += 2 * blk;
            len -= 3 * blk;
        }
    }
    for (; len >= 8; len -= 8, p += 8) c0 = _mm_crc32_u64(c0, load64(p));
    while (len--) c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return ~(uint32_t)c0;
}
#endif
