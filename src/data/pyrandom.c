// pyrandom.c: CPython's Mersenne Twister, getrandbits, _randbelow and shuffle (pyrandom.h).
// MT19937 as Matsumoto and Nishimura's mt19937ar.c, which CPython's _randommodule.c copies.
#include "data/pyrandom.h"

#define MT_N 624
#define MT_M 397
#define MATRIX_A 0x9908b0dfu
#define UPPER_MASK 0x80000000u
#define LOWER_MASK 0x7fffffffu

static void init_genrand(PyRandom *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < MT_N; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = MT_N;
}

static void init_by_array(PyRandom *r, const uint32_t *key, int len) {
    init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = MT_N > len ? MT_N : len; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_N) { r->mt[0] = r->mt[MT_N - 1]; i = 1; }
        if (j >= len) j = 0;
    }
    for (int k = MT_N - 1; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) { r->mt[0] = r->mt[MT_N - 1]; i = 1; }
    }
    r->mt[0] = 0x80000000u;   // MSB 1: a non-zero initial array
}

void pyrandom_seed(PyRandom *r, uint64_t seed) {
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    init_by_array(r, key, key[1] ? 2 : 1);   // CPython: as many words as the value needs, at least one
}

uint32_t pyrandom_genrand_uint32(PyRandom *r) {
    static const uint32_t mag01[2] = {0u, MATRIX_A};
    uint32_t y;
    if (r->mti >= MT_N) {
        int kk;
        for (kk = 0; kk < MT_N - MT_M; kk++) {
            y = (r->mt[kk] & UPPER_MASK) | (r->mt[kk + 1] & LOWER_MASK);
            r->mt[kk] = r->mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < MT_N - 1; kk++) {
            y = (r->mt[kk] & UPPER_MASK) | (r->mt[kk + 1] & LOWER_MASK);
            r->mt[kk] = r->mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (r->mt[MT_N - 1] & UPPER_MASK) | (r->mt[0] & LOWER_MASK);
        r->mt[MT_N - 1] = r->mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 1u];
        r->mti = 0;
    }
    y = r->mt[r->mti++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t pyrandom_getrandbits(PyRandom *r, int k) {
    if (k <= 32) return pyrandom_genrand_uint32(r) >> (32 - k);
    uint64_t lo = pyrandom_genrand_uint32(r);   // least significant word first
    uint64_t hi = pyrandom_genrand_uint32(r) >> (64 - k);
    return lo | hi << 32;
}

uint64_t pyrandom_randbelow(PyRandom *r, uint64_t n) {
    int k = 64 - __builtin_clzll(n);   // n.bit_length(): not of n - 1, so n = 1 draws one bit
    uint64_t v = pyrandom_getrandbits(r, k);
    while (v >= n) v = pyrandom_getrandbits(r, k);
    return v;
}

void pyrandom_shuffle_u32(PyRandom *r, uint32_t *x, uint64_t n) {
    for (uint64_t i = n; i-- > 1;) {
        uint64_t j = pyrandom_randbelow(r, i + 1);
        uint32_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}
