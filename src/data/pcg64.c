// pcg64.c: numpy's SeedSequence -> PCG64 -> Generator.shuffle, bit for bit.
// See pcg64.h for the algorithm; the comments here only say why things are as they are.
#include "data/pcg64.h"

#include <stddef.h>

typedef pcg128_t u128;

// SeedSequence constants (numpy/random/bit_generator.pyx).
#define SS_INIT_A 0x43b0d7e5u
#define SS_MULT_A 0x931e8875u
#define SS_INIT_B 0x8b51f9ddu
#define SS_MULT_B 0x58f38dedu
#define SS_MIX_MULT_L 0xca01f9ddu
#define SS_MIX_MULT_R 0x4973f715u
#define SS_XSHIFT 16
#define SS_POOL 4

// PCG_DEFAULT_MULTIPLIER_128 (numpy/random/src/pcg64/pcg64.h).
#define PCG_MULT (((u128)2549297995355413924ULL << 64) | 4865540595714422341ULL)

static uint32_t hashmix(uint32_t v, uint32_t *h) {
    v ^= *h;
    *h *= SS_MULT_A;
    v *= *h;
    v ^= v >> SS_XSHIFT;
    return v;
}

static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t r = SS_MIX_MULT_L * x - SS_MIX_MULT_R * y;
    return r ^ (r >> SS_XSHIFT);
}

void seed_sequence_state(uint64_t seed, uint64_t out[4]) {
    // numpy's _int_to_uint32_array: little-endian 32-bit words, [0] for zero. A uint64
    // gives one or two words; numpy drops zero high words, so 5 is [5], not [5, 0].
    uint32_t ent[2];
    int n_ent = 0;
    do { ent[n_ent++] = (uint32_t)seed; seed >>= 32; } while (seed);

    // mix_entropy with an empty spawn key (so no padding of the entropy to the pool size).
    uint32_t pool[SS_POOL], h = SS_INIT_A;
    for (int i = 0; i < SS_POOL; i++) pool[i] = hashmix(i < n_ent ? ent[i] : 0, &h);
    for (int src = 0; src < SS_POOL; src++)
        for (int dst = 0; dst < SS_POOL; dst++)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &h));
    // (Entropy words beyond the pool size cannot occur for a uint64 seed.)

    // generate_state(4, np.uint64): 8 uint32 words viewed as little-endian uint64s.
    uint32_t hb = SS_INIT_B, w[8];
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % SS_POOL];
        v ^= hb;
        hb *= SS_MULT_B;
        v *= hb;
        v ^= v >> SS_XSHIFT;
        w[i] = v;
    }
    for (int j = 0; j < 4; j++) out[j] = (uint64_t)w[2 * j] | (uint64_t)w[2 * j + 1] << 32;
}

static inline void pcg_step(Pcg64 *rng) { rng->state = rng->state * PCG_MULT + rng->inc; }

void pcg64_set_seed(Pcg64 *rng, const uint64_t words[4]) {
    // PCG_128BIT_CONSTANT(high, low): the first word of each pair is the high half.
    u128 initstate = ((u128)words[0] << 64) | words[1];
    u128 initseq = ((u128)words[2] << 64) | words[3];
    // pcg_setseq_128_srandom_r, including its two steps.
    rng->state = 0;
    rng->inc = (initseq << 1) | 1;
    pcg_step(rng);
    rng->state += initstate;
    pcg_step(rng);
    rng->has_uint32 = 0; // PCG64._reset_state_variables
    rng->uinteger = 0;
}

void pcg64_seed(Pcg64 *rng, uint64_t seed) {
    uint64_t words[4];
    seed_sequence_state(seed, words);
    pcg64_set_seed(rng, words);
}

uint64_t pcg64_next64(Pcg64 *rng) {
    // XSL-RR output of the state *after* the step (pcg_setseq_128_xsl_rr_64_random_r).
    pcg_step(rng);
    uint64_t x = (uint64_t)(rng->state >> 64) ^ (uint64_t)rng->state;
    unsigned rot = (unsigned)(rng->state >> 122);
    return (x >> rot) | (x << ((-rot) & 63));
}

uint32_t pcg64_next32(Pcg64 *rng) {
    // numpy's pcg64_next32 spends each 64-bit draw on two 32-bit results, low half first.
    if (rng->has_uint32) {
        rng->has_uint32 = 0;
        return rng->uinteger;
    }
    uint64_t x = pcg64_next64(rng);
    rng->has_uint32 = 1;
    rng->uinteger = (uint32_t)(x >> 32);
    return (uint32_t)x;
}

static inline uint64_t mask_for(uint64_t max) { return UINT64_MAX >> __builtin_clzll(max); }

uint64_t pcg64_interval(Pcg64 *rng, uint64_t max) {
    if (max == 0) return 0; // numpy draws nothing here
    uint64_t mask = mask_for(max), v;
    if (max <= 0xffffffffu) {
        while ((v = (pcg64_next32(rng) & mask)) > max) {}
    } else {
        while ((v = (pcg64_next64(rng) & mask)) > max) {}
    }
    return v;
}

void pcg64_shuffle_u32(Pcg64 *rng, uint32_t *a, uint64_t n) {
    // Fisher-Yates from the top, j = interval(i), exactly numpy's _shuffle_raw. The j's
    // depend only on the generator, never on the data, so they are drawn a block ahead
    // and their cache lines prefetched: for large n the swaps are random memory
    // accesses, and this hides part of their latency (about 1.2x faster for 1e8 elements
    // on a 2-core box; the generator itself is the other half of the time).
    enum { BLOCK = 128 };
    uint64_t js[BLOCK];
    uint64_t i = n ? n - 1 : 0;
    while (i >= 1) {
        uint64_t cnt = i < BLOCK ? i : BLOCK; // indices i, i-1, ..., i-cnt+1 (all >= 1)
        for (uint64_t k = 0; k < cnt; k++) {
            js[k] = pcg64_interval(rng, i - k);
            __builtin_prefetch(&a[js[k]], 1, 0);
        }
        for (uint64_t k = 0; k < cnt; k++) {
            uint32_t t = a[i - k];
            a[i - k] = a[js[k]];
            a[js[k]] = t;
        }
        i -= cnt;
    }
}

void olmo_global_order(uint64_t seed, uint32_t *indices, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) indices[i] = (uint32_t)i;
    Pcg64 rng;
    pcg64_seed(&rng, seed);
    pcg64_shuffle_u32(&rng, indices, n);
}
