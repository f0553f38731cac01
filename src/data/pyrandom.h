// pyrandom.h: CPython's `random.Random(seed).shuffle`, reproduced bit for bit: OLMo-core
// permutes the source files of a dataset with it (NumpyDatasetConfig._resolve_paths_metadata,
// `random.Random(source_permutation_seed).shuffle(order)`), so olmo.c's packed instances
// (packing.h) come from the same file groups as OLMo-core's.
//
// The algorithm (CPython 3.11 Modules/_randommodule.c and Lib/random.py):
// 1. seed(int a): n = |a| as 32-bit words, least significant first ([0] for 0); MT19937
//    init_by_array(key = those words) (the reference's init_genrand(19650218) + mixing).
// 2. getrandbits(k), 0 < k <= 32: genrand_uint32() >> (32 - k). (k > 32: 32-bit words
//    least significant first, the last one shifted right by 32 - k % 32.)
// 3. _randbelow(n): k = bit_length(n); r = getrandbits(k) until r < n.
// 4. shuffle(x): for i = len-1 down to 1: j = _randbelow(i + 1); swap x[i], x[j].
#ifndef OLMO_PYRANDOM_H
#define OLMO_PYRANDOM_H

#include <stdint.h>

typedef struct {
    uint32_t mt[624];
    int mti;
} PyRandom;

// random.Random(seed) for a non-negative integer seed (OLMo-core's are ints).
void pyrandom_seed(PyRandom *r, uint64_t seed);
uint32_t pyrandom_genrand_uint32(PyRandom *r);
// random.getrandbits(k), 1 <= k <= 64.
uint64_t pyrandom_getrandbits(PyRandom *r, int k);
// random._randbelow(n), n >= 1.
uint64_t pyrandom_randbelow(PyRandom *r, uint64_t n);
// random.shuffle(x) of n items of x.
void pyrandom_shuffle_u32(PyRandom *r, uint32_t *x, uint64_t n);

#endif
