// bf16.h: the CPU backend's bf16 matmul engines (internal to src/kernels/cpu).
// Operands are packed once into AMX tile layouts (used by the AVX512_BF16 engine too),
// then multiplied with fp32 accumulation:
//   packed A (M, K): tiles [M/16][KBT][16 rows][32 k]         (row i holds 32 consecutive k)
//   packed B (K, N): tiles [N/16][KBT][16 k-pairs][16 n][2]   (VNNI: k pairs side by side)
// M, N are padded to 16 and K to 32 with zeros; KBT (k-tiles per row of tiles) may exceed
// ceil(K/32) so that several packs can fill disjoint k ranges of one buffer (kb0).
// Every tile is 512 bf16 (1 KiB). Rounding: fp32 -> bf16 round to nearest even, with
// zero/denormal inputs giving a signed zero (what VCVTNE2PS2BF16 does; bf16_round matches).
// Called inside a parallel region, the packers and the GEMM run serially on the calling
// thread (the LM head gives threads whole blocks).
// Determinism: each output element sums its k-tiles in index order; the work split over
// threads is by output block and never changes a sum.
#ifndef OLMO_BF16_H
#define OLMO_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"   // Bf16Work

#define BF16_TILE 512   // bf16 elements per tile

static inline int bf16_mtiles(int M) { return (M + 15) / 16; }
static inline int bf16_ktiles(int K) { return (K + 31) / 32; }
// bf16 elements of a packed A (M, K) or B (K, N) with kbt k-tiles per tile row
static inline size_t bf16_packed_a_size(int M, int kbt) { return (size_t)bf16_mtiles(M) * kbt * BF16_TILE; }
static inline size_t bf16_packed_b_size(int N, int kbt) { return (size_t)bf16_mtiles(N) * kbt * BF16_TILE; }

uint16_t bf16_round(float f);
static inline float bf16_to_float(uint16_t h) {
    union { uint32_t u; float f; } c = {(uint32_t)h << 16};
    return c.f;
}

// The engine of the bf16 matmuls, chosen once per process (first call outside parallel
// regions): BF16_AMX (TDPBF16PS on tiles), BF16_AVX512 (VDPBF16PS on zmm registers: AMD
// CPUs with AVX512_BF16, e.g. Zen 4) -- both on the packed layouts above and
// bf16_gemm -- or BF16_EMULATED (bf16-rounded fp32 operands through sgemm; matmul.c).
// Which one a CPU gets, and the OLMO_BF16_ENGINE / OLMO_NO_AMX switches: bf16.c.
typedef enum { BF16_EMULATED = 0, BF16_AVX512 = 1, BF16_AMX = 2 } Bf16Engine;
Bf16Engine bf16_engine(void);
int bf16_engine_on_cpu(Bf16Engine e);   // the CPU has its instructions (AMX: the OS may still refuse)
const char *bf16_engine_name(Bf16Engine e);
static inline int bf16_packed(void) { return bf16_engine() != BF16_EMULATED; }

// The packers need AVX512_BF16 (bf16_packed()).
// Pack A (M, K) from fp32: trans=0: A[i][k] = src[i*ld + k]; trans=1: A[i][k] = src[k*ld + i].
// Writes k-tiles kb0 .. kb0+ceil(K/32)-1 of each tile row (kbt per row in dst).
void bf16_pack_a(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int M, int K);
// Pack B (K, N) from fp32: trans=0: B[k][n] = src[k*ld + n]; trans=1: B[k][n] = src[n*ld + k].
void bf16_pack_b(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int K, int N);
// P = A @ B (M, N); stored to C (row stride ldc) as C = P, or C^T = P when c_trans (C is
// then (N, M)); += instead of = when accumulate. K: the k extent to use (the first
// ceil(K/32) k-tiles of each packed row). Needs bf16_packed(); runs on the engine's
// instructions, the same sums for any work split (each element's k in index order).
void bf16_gemm(float *C, int ldc, int c_trans, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int M,
               int N, int K, int accumulate);

// Slot `slot` of w (kernels.h's Bf16Work), at least `bytes`, 64-byte aligned. Slots: 0-1
// matmul operands, 2-13 the LM head (2-4 on the emulated path). Called outside parallel
// regions only; dies naming the caller's mistake when w is NULL (a bf16 matmul without one).
#define BF16_WORKSPACE_SLOTS 14
struct Bf16Work {
    void *buf[BF16_WORKSPACE_SLOTS];
    size_t cap[BF16_WORKSPACE_SLOTS];
};
void *bf16_workspace(Bf16Work *w, int slot, size_t bytes);

// LM head (lmhead.c), test hooks: the token chunk and vocab block of the AMX path (0 = 256
// and 1024), and when set, an (N, V) array receiving the fp32 dlogits before rounding (on
// every engine: the emulated one's vocab-blocked path writes it too).
extern int bf16_lmhead_chunk, bf16_lmhead_vblock;
extern float *bf16_lmhead_dl_out;

#endif
