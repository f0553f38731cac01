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
// Both B layouts of src (R, K) row-major (row stride ld) in one pass over it: bt = B (K, R)
// = src^T (bt_kbt k-tiles per tile row; bf16_pack_b(bt, bt_kbt, 0, src, ld, 1, K, R)) and
// bn = B (R, K) = src (bf16_pack_b(bn, bn_kbt, 0, src, ld, 0, R, K)): the LM head's weight
// in its forward and backward layouts.
void bf16_pack_b_both(uint16_t *bt, int bt_kbt, uint16_t *bn, int bn_kbt, const float *src, int ld, int R, int K);
// P = A @ B (M, N); stored to C (row stride ldc) as C = P, or C^T = P when c_trans (C is
// then (N, M)); += instead of = when accumulate. K: the k extent to use (the first
// ceil(K/32) k-tiles of each packed row). Needs bf16_packed(); runs on the engine's
// instructions, the same sums for any work split (each element's k in index order).
// Bench hook (scripts/bench_bf16_parts.c): bf16_gemm's block order, 0 = its own choice,
// 1 = n-blocks fastest, 2 = m-blocks fastest. No order changes a result.
extern int bf16_gemm_order;
void bf16_gemm(float *C, int ldc, int c_trans, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int M,
               int N, int K, int accumulate);

// Softmax row passes of the packed paths (bf16_rows.c: AVX-512, an FMA exp of ~1 ulp; the
// fp32 path keeps vexp.h's vexpf). Need bf16_packed().
// Of x[0, n): the max and the sum of exp(x - max) (fixed order: no bit depends on threads).
void bf16_row_softmax_stats(const float *x, int n, float *max_out, double *sum_out);
// Attention's score rows (unscaled products; the valid columns [c_lo, c_hi], the rest
// masked): softmax_row writes the probabilities softmax(scale * row) as one row of a
// packed A (pa_row: the row's place in its first k-tile; zero past nk to the k-tile's end),
// leaving exps in row, and returns the log-sum-exp; prob_row writes exp(scale * row - lse)
// (0 where masked) in place.
float bf16_att_softmax_row(float *row, int nk, float scale, int c_lo, int c_hi, uint16_t *pa_row);
void bf16_att_prob_row(float *row, int nk, float scale, int c_lo, int c_hi, float lse);
// sum of a[i] b[i] over i < n (fp32 FMA lanes, a fixed order): attention's D_i
float bf16_row_dot(const float *a, const float *b, int n);
// Attention's backward for a block of nq queries against nk keys (P, dP at row stride nk):
// dS = P (dP - Di) scale, written as packed A (nq, nk) into ds_a (a_kbt k-tiles per tile
// row) and as packed A (nk, nq) = dS^T into ds_t, and P^T as packed A (nk, nq) into p_t
// (t_kbt per tile row), all zero-padded to whole tiles (32 queries, 32 keys).
void bf16_att_dsoftmax_pack(const float *P, const float *dP, int nq, int nk, const float *Di, float scale,
                            uint16_t *ds_a, int a_kbt, uint16_t *ds_t, uint16_t *p_t, int t_kbt);
// The LM head's dlogits of one (nc tokens, vn vocab) logits block L (row stride ldl):
// dl = exp(l - lse) * a, less inv_count at the target's column, 0 on masked rows, written
// as packed A (nc, vn) into dl_a (a_kbt k-tiles per tile row) and as packed A (vn, nc) =
// dl^T into dl_t (t_kbt per tile row), zero-padded to whole tiles (rows of 32 tokens, 32
// columns), and in fp32 to dl_out (row stride ld_out) when not NULL (tests).
#define BF16_DL_MASKED (-2)
typedef struct {
    float lse, a;   // the row's log-sum-exp, and (1 + 2 z lse) / count
    int tcol;       // the target's column in the block, -1 outside it, BF16_DL_MASKED: a row of zeros
} Bf16DlRow;
void bf16_lm_dlogits_pack(const float *L, int ldl, int nc, int vn, const Bf16DlRow *row, float inv_count,
                          uint16_t *dl_a, int a_kbt, uint16_t *dl_t, int t_kbt, float *dl_out, size_t ld_out);

// Slot `slot` of w (kernels.h's Bf16Work), at least `bytes`, 64-byte aligned. Slots: 0-1
// matmul operands, 2-14 the LM head (2-4 on the emulated path). Called outside parallel
// regions only; dies naming the caller's mistake when w is NULL (a bf16 matmul without one).
#define BF16_WORKSPACE_SLOTS 15
struct Bf16Work {
    void *buf[BF16_WORKSPACE_SLOTS];
    size_t cap[BF16_WORKSPACE_SLOTS];
};
void *bf16_workspace(Bf16Work *w, int slot, size_t bytes);

// LM head (lmhead.c), test hooks: the token chunk and vocab block of the AMX path (0 = 512
// and 512), and when set, an (N, V) array receiving the fp32 dlogits before rounding (on
// every engine: the emulated one's vocab-blocked path writes it too).
extern int bf16_lmhead_chunk, bf16_lmhead_vblock;
extern float *bf16_lmhead_dl_out;

#endif
