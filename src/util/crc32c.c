// crc32c.c: see crc32c.h. The hardware path follows Mark Adler's crc32c.c (zlib license
// ideas, rewritten): the buffer is cut into three equal blocks whose CRCs run in parallel
// (the crc32 instruction has a 3-cycle latency and 1-cycle throughput), then are combined
// by "appending zeros" operators precomputed once as 4 x 256 tables.
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

#ifndef __SSE4_2__
uint32_t crc32c(uint32_t crc, const void *buf, size_t len) { return crc32c_sw(crc, buf, len); }
#else
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

uint32_t crc32c(uint32_t crc, const void *buf, size_t len) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_hw);
    const uint8_t *p = buf;
    uint64_t c0 = ~crc & 0xffffffffu;
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
