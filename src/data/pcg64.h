// pcg64.h: numpy's PCG64 bit generator, its SeedSequence seeding and Generator.shuffle,
// reproduced bit for bit, so that olmo.c builds the same global instance order as
// OLMo-core:
//     indices = np.arange(N, dtype=np.uint32)
//     np.random.Generator(np.random.PCG64(seed)).shuffle(indices)
// (OLMo-core passes seed + epoch as the seed.)
//
// The algorithm, enough to reproduce it elsewhere (checked against numpy 1.24):
//
// 1. SeedSequence(entropy = integer s >= 0), pool size 4, 32-bit words throughout:
//    - entropy words: s split into 32-bit words, least significant first ([0] for 0).
//    - hashmix(v): v ^= h; h *= MULT_A; v *= h; v ^= v >> 16   (h starts at INIT_A and
//      is shared by all hashmix calls of one mix_entropy run).
//    - mix(x, y) = r ^ (r >> 16) with r = MIX_MULT_L * x - MIX_MULT_R * y.
//    - pool[i] = hashmix(entropy[i] or 0), i = 0..3; then for every ordered pair
//      src != dst: pool[dst] = mix(pool[dst], hashmix(pool[src])); then for each
//      entropy word beyond the 4th, for every dst: pool[dst] = mix(pool[dst], hashmix(w)).
//    - generate_state(4, uint64): 8 words, w_k = pool[k % 4]; w ^= h; h *= MULT_B;
//      w *= h; w ^= w >> 16 (h starts at INIT_B); pairs of words form little-endian
//      uint64s: seed[j] = w[2j] | w[2j+1] << 32, j = 0..3.
// 2. PCG64 seeding (pcg64_set_seed): initstate = seed[0] << 64 | seed[1],
//    initseq = seed[2] << 64 | seed[3]; inc = initseq << 1 | 1; state = 0; step;
//    state += initstate; step. step: state = state * PCG_MULT + inc (mod 2^128).
// 3. next64: step, then output XSL-RR of the new state:
//    rotr64(hi(state) ^ lo(state), state >> 122).
//    next32: if a buffered half is held, return it; else x = next64, buffer x >> 32,
//    return the low 32 bits. (A fresh generator holds no buffered half.)
// 4. shuffle (Fisher-Yates, _shuffle_raw): for i = n-1 down to 1: j = interval(i);
//    swap a[i], a[j]. interval(max): mask = all ones up to max's top bit; draw
//    v = next32() & mask (next64() when max > 0xffffffff) until v <= max.
#ifndef OLMO_PCG64_H
#define OLMO_PCG64_H

#include <stdint.h>

// gcc/clang's 128-bit integer (__extension__ keeps -Wpedantic quiet under -std=c11).
__extension__ typedef unsigned __int128 pcg128_t;

typedef struct {
    pcg128_t state;
    pcg128_t inc;
    int has_uint32;      // next32 holds the upper half of the last 64-bit draw
    uint32_t uinteger;   // that upper half
} Pcg64;

// numpy's SeedSequence(entropy=seed).generate_state(4, np.uint64) into out[4].
void seed_sequence_state(uint64_t seed, uint64_t out[4]);
// Seed from the 4 words of seed_sequence_state (numpy's pcg64_set_seed + state reset).
void pcg64_set_seed(Pcg64 *rng, const uint64_t words[4]);
// Equivalent of np.random.PCG64(seed): SeedSequence + pcg64_set_seed.
void pcg64_seed(Pcg64 *rng, uint64_t seed);
uint64_t pcg64_next64(Pcg64 *rng);
uint32_t pcg64_next32(Pcg64 *rng);
// numpy's random_interval: uniform in [0, max] by masked rejection.
uint64_t pcg64_interval(Pcg64 *rng, uint64_t max);
// Generator.shuffle of a 1-D uint32 array with this generator (advances rng).
void pcg64_shuffle_u32(Pcg64 *rng, uint32_t *a, uint64_t n);

// indices[i] = the result of Generator(PCG64(seed)).shuffle(np.arange(n, dtype=np.uint32)).
// n must be < 2^32 (the values are uint32, as in OLMo-core).
void olmo_global_order(uint64_t seed, uint32_t *indices, uint64_t n);

#endif
