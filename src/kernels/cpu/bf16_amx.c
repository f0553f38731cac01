// bf16_amx.c: packing into AMX tile layouts and the bf16 GEMM on them (layouts in bf16.h),
// on AMX tiles or on AVX512_BF16 registers (bf16_engine()). Compiled with -mamx-tile
// -mamx-bf16 -mavx512bf16 (Makefile) and only entered after bf16_engine() chose a packed
// engine, so the rest of the binary still runs on any x86-64.
// The GEMM computes 32x32 output blocks (2x2 tiles of 16x16). AMX: 4 accumulator tiles, 2 A
// and 2 B tiles per 32-wide k step; one TDPBF16PS is a 16x16x32 multiply-accumulate in
// fp32. AVX512_BF16: one 16x16 tile at a time in 16 zmm accumulators (a row each); per k
// pair, one B row (16 columns x the pair) against each row's broadcast A pair, VDPBF16PS.
// Either way each output element sums its k in index order whatever the work split.
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/bf16_avx512.h"

// ---- packing ----------------------------------------------------------------------------

// 16 floats of r0 and of r1 -> 16 (r0[j], r1[j]) bf16 pairs, one per 32-bit element j
static inline __m512i cvt_pairs(const float *r0, const float *r1) {
    __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(r1), _mm512_loadu_ps(r0));
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(PAIR_IDX), v);
}
// 32 consecutive floats -> 32 bf16 in order
static inline __m512i cvt32(const float *p) {
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p));
}

// Edge tiles (partly outside the matrix) go element by element, zero-padded.
static void pack_a_tile_scalar(uint16_t *tile, const float *src, int ld, int trans, int M, int K, int i0, int k0) {
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 32; c++) {
            int i = i0 + r, k = k0 + c;
            float x = i < M && k < K ? (trans ? src[(size_t)k * ld + i] : src[(size_t)i * ld + k]) : 0.0f;
            tile[r * 32 + c] = bf16_round(x);
        }
}
static void pack_b_tile_scalar(uint16_t *tile, const float *src, int ld, int trans, int K, int N, int k0, int n0) {
    for (int p = 0; p < 16; p++)
        for (int c = 0; c < 16; c++)
            for (int h = 0; h < 2; h++) {
                int k = k0 + 2 * p + h, n = n0 + c;
                float x = k < K && n < N ? (trans ? src[(size_t)n * ld + k] : src[(size_t)k * ld + n]) : 0.0f;
                tile[(p * 16 + c) * 2 + h] = bf16_round(x);
            }
}

// One full tile from 16 vectors: rows of 32 consecutive floats (cvt32) or pairs of rows
// (cvt_pairs), optionally transposed. A row-major / B transposed read 32 along k per row;
// A transposed / B row-major read k pairs across 16 rows.
static inline void pack_tile_vec(uint16_t *tile, const float *src, size_t ld, int pairs, int transpose) {
    __m512i v[16];
    for (int j = 0; j < 16; j++) v[j] = pairs ? cvt_pairs(src + 2 * j * ld, src + (2 * j + 1) * ld) : cvt32(src + j * ld);
    if (transpose) transpose16(v);
    for (int r = 0; r < 16; r++) _mm512_storeu_si512(tile + r * 32, v[r]);
}

// Tile (rt, kt) of A (is_b = 0: R = M rows) or B (is_b = 1: R = N columns).
static inline void pack_one(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int R, int K,
                            int is_b, int rt, int kt) {
    const int r0 = rt * 16, k0 = kt * 32;
    uint16_t *tile = dst + ((size_t)rt * kbt + kb0 + kt) * BF16_TILE;
    if (r0 + 16 > R || k0 + 32 > K) {
        if (is_b) pack_b_tile_scalar(tile, src, ld, trans, K, R, k0, r0);
        else pack_a_tile_scalar(tile, src, ld, trans, R, K, r0, k0);
        return;
    }
    // src stored (R, K) row-major when A untransposed or B transposed, else (K, R)
    const int k_contiguous = is_b ? trans : !trans;
    const float *at = k_contiguous ? src + (size_t)r0 * ld + k0 : src + (size_t)k0 * ld + r0;
    pack_tile_vec(tile, at, (size_t)ld, !k_contiguous, trans);
}

// Tiles of A (is_b = 0: R = M rows) or B (is_b = 1: R = N columns) in parallel over tiles,
// in the order that walks src along its rows: a tile reads 16 rows x 32 floats where k is
// contiguous (then k-tiles vary fastest) and 32 rows x 16 floats where it is not (then the
// tiles along R do: walking k-tiles there read 64 bytes a row down all of src, one page
// per row, and measured 3x slower per float for the transposed A of dW = dout^T x).
static void pack(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int R, int K, int is_b) {
    const int RT = bf16_mtiles(R), KT = bf16_ktiles(K), k_fast = is_b ? trans : !trans;
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (long t = 0; t < (long)RT * KT; t++) {
        const int rt = (int)(k_fast ? t / KT : t % RT), kt = (int)(k_fast ? t % KT : t / RT);
        pack_one(dst, kbt, kb0, src, ld, trans, R, K, is_b, rt, kt);
    }
}

void bf16_pack_b_both(uint16_t *bt, int bt_kbt, uint16_t *bn, int bn_kbt, const float *src, int ld, int R, int K) {
    const int IB = bf16_ktiles(R), JB = bf16_ktiles(K), RT = bf16_mtiles(R), CT = bf16_mtiles(K);
    // per 32 x 32 block of src: its two tiles of each layout, the second read from L1
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (long t = 0; t < (long)IB * JB; t++) {
        const int i = (int)(t / JB), j = (int)(t % JB);
        for (int h = 0; h < 2; h++) {
            if (2 * i + h < RT) pack_one(bt, bt_kbt, 0, src, ld, 1, R, K, 1, 2 * i + h, j);   // B (K, R) = src^T
            if (2 * j + h < CT) pack_one(bn, bn_kbt, 0, src, ld, 0, K, R, 1, 2 * j + h, i);   // B (R, K) = src
        }
    }
}

void bf16_pack_a(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int M, int K) {
    pack(dst, kbt, kb0, src, ld, trans, M, K, 0);
}
void bf16_pack_b(uint16_t *dst, int kbt, int kb0, const float *src, int ld, int trans, int K, int N) {
    pack(dst, kbt, kb0, src, ld, trans, N, K, 1);
}

// ---- GEMM --------------------------------------------------------------------------------

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

static void tiles_configure(void) {
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}

typedef struct {
    float *C;
    int ldc, M, N, acc, trans;
} OutCtx;

// Element (i, j) of the product lives at C[i*ldc + j], or C[j*ldc + i] when trans.
static inline float *elem(const OutCtx *o, int i, int j) {
    return o->trans ? o->C + (size_t)j * o->ldc + i : o->C + (size_t)i * o->ldc + j;
}
// Edge and transposed output tiles go through a 16x16 buffer (zero outside the matrix);
// full transposed tiles move as 16 vectors through transpose16.
static float *edge_in(const OutCtx *o, float buf[256], int mt, int nt) {
    if (o->trans && mt * 16 + 16 <= o->M && nt * 16 + 16 <= o->N) {
        __m512i v[16];
        for (int c = 0; c < 16; c++) v[c] = _mm512_loadu_si512(elem(o, mt * 16, nt * 16 + c));
        transpose16(v);
        for (int r = 0; r < 16; r++) _mm512_store_si512(buf + r * 16, v[r]);
        return buf;
    }
    memset(buf, 0, sizeof(float) * 256);
    for (int r = 0; r < 16 && mt * 16 + r < o->M; r++)
        for (int c = 0; c < 16 && nt * 16 + c < o->N; c++) buf[r * 16 + c] = *elem(o, mt * 16 + r, nt * 16 + c);
    return buf;
}
static void edge_out(const OutCtx *o, const float buf[256], int mt, int nt) {
    if (o->trans && mt * 16 + 16 <= o->M && nt * 16 + 16 <= o->N) {
        __m512i v[16];
        for (int r = 0; r < 16; r++) v[r] = _mm512_load_si512(buf + r * 16);
        transpose16(v);
        for (int c = 0; c < 16; c++) _mm512_storeu_si512(elem(o, mt * 16, nt * 16 + c), v[c]);
        return;
    }
    for (int r = 0; r < 16 && mt * 16 + r < o->M; r++)
        for (int c = 0; c < 16 && nt * 16 + c < o->N; c++) *elem(o, mt * 16 + r, nt * 16 + c) = buf[r * 16 + c];
}
static inline int is_full(const OutCtx *o, int mt, int nt) {
    return !o->trans && mt * 16 + 16 <= o->M && nt * 16 + 16 <= o->N;
}
static inline float *cptr(const OutCtx *o, int mt, int nt) { return o->C + (size_t)mt * 16 * o->ldc + nt * 16; }

// Tile numbers must be immediates, so the load/store of one accumulator is a macro.
#define C_LOAD(T, mt, nt)                                                                     \
    do {                                                                                      \
        if (!o->acc) _tile_zero(T);                                                           \
        else if (is_full(o, mt, nt)) _tile_loadd(T, cptr(o, mt, nt), o->ldc * 4);            \
        else _tile_loadd(T, edge_in(o, buf, mt, nt), 64);                                    \
    } while (0)
#define C_STORE(T, mt, nt)                                                                    \
    do {                                                                                      \
        if (is_full(o, mt, nt)) _tile_stored(T, cptr(o, mt, nt), o->ldc * 4);                \
        else {                                                                                \
            _tile_stored(T, buf, 64);                                                         \
            edge_out(o, buf, mt, nt);                                                         \
        }                                                                                     \
    } while (0)

// One output tile at (mt, nt), k-tiles kt0..kt1-1: the edges of the 2x2 blocking.
static void tile_kernel(const OutCtx *o, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int mt, int nt,
                        int kt0, int kt1) {
    float buf[256] __attribute__((aligned(64)));
    const uint16_t *a0 = A + ((size_t)mt * a_kbt + kt0) * BF16_TILE, *b0 = B + ((size_t)nt * b_kbt + kt0) * BF16_TILE;
    C_LOAD(0, mt, nt);
    for (int k = 0; k < kt1 - kt0; k++) {
        _tile_loadd(4, a0 + (size_t)k * BF16_TILE, 64);
        _tile_loadd(6, b0 + (size_t)k * BF16_TILE, 64);
        _tile_dpbf16ps(0, 4, 6);
    }
    C_STORE(0, mt, nt);
}

// One block of 2x2 output tiles at tile (mt, nt), k-tiles kt0..kt1-1; a block on the last
// tile row or column with only one tile there goes tile by tile.
static void block_kernel(const OutCtx *o, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int mt, int nt,
                         int m2, int n2, int kt0, int kt1) {
    if (m2 < 2 || n2 < 2) {
        for (int i = 0; i < m2; i++)
            for (int j = 0; j < n2; j++) tile_kernel(o, A, a_kbt, B, b_kbt, mt + i, nt + j, kt0, kt1);
        return;
    }
    float buf[256] __attribute__((aligned(64)));
    const uint16_t *a0 = A + ((size_t)mt * a_kbt + kt0) * BF16_TILE, *a1 = a0 + (size_t)a_kbt * BF16_TILE;
    const uint16_t *b0 = B + ((size_t)nt * b_kbt + kt0) * BF16_TILE, *b1 = b0 + (size_t)b_kbt * BF16_TILE;
    C_LOAD(0, mt, nt); C_LOAD(1, mt, nt + 1); C_LOAD(2, mt + 1, nt); C_LOAD(3, mt + 1, nt + 1);
    for (int k = 0; k < kt1 - kt0; k++) {
        size_t off = (size_t)k * BF16_TILE;
        _tile_loadd(4, a0 + off, 64);
        _tile_loadd(6, b0 + off, 64);
        _tile_loadd(7, b1 + off, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a1 + off, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    C_STORE(0, mt, nt); C_STORE(1, mt, nt + 1); C_STORE(2, mt + 1, nt); C_STORE(3, mt + 1, nt + 1);
}

// ---- AVX512_BF16 ---------------------------------------------------------------------------

// One output tile at (mt, nt), k-tiles kt0..kt1-1: 16 rows of 16 fp32 accumulators; per k
// pair p, acc[r] += A[r][2p] B[2p][:] + A[r][2p+1] B[2p+1][:] (VDPBF16PS).
static void avx_tile_kernel(const OutCtx *o, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int mt,
                            int nt, int kt0, int kt1) {
    float buf[256] __attribute__((aligned(64)));
    __m512 acc[16];
    const int full = is_full(o, mt, nt);
    const float *cin = !o->acc ? NULL : full ? cptr(o, mt, nt) : edge_in(o, buf, mt, nt);
    const size_t ldin = full ? (size_t)o->ldc : 16;
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) acc[r] = cin ? _mm512_loadu_ps(cin + r * ldin) : _mm512_setzero_ps();
    const uint16_t *a0 = A + ((size_t)mt * a_kbt + kt0) * BF16_TILE, *b0 = B + ((size_t)nt * b_kbt + kt0) * BF16_TILE;
    for (int k = 0; k < kt1 - kt0; k++) {
        const uint16_t *at = a0 + (size_t)k * BF16_TILE, *bt = b0 + (size_t)k * BF16_TILE;
        for (int p = 0; p < 16; p++) {
            const __m512bh bv = (__m512bh)_mm512_loadu_si512(bt + p * 32);
#pragma GCC unroll 16
            for (int r = 0; r < 16; r++) {
                int32_t pair;
                memcpy(&pair, at + r * 32 + 2 * p, 4);
                acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32(pair), bv);
            }
        }
    }
    if (full) {
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) _mm512_storeu_ps(cptr(o, mt, nt) + (size_t)r * o->ldc, acc[r]);
    } else {
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) _mm512_store_ps(buf + r * 16, acc[r]);
        edge_out(o, buf, mt, nt);
    }
}

static void avx_block_kernel(const OutCtx *o, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int mt,
                             int nt, int m2, int n2, int kt0, int kt1) {
    for (int i = 0; i < m2; i++)
        for (int j = 0; j < n2; j++) avx_tile_kernel(o, A, a_kbt, B, b_kbt, mt + i, nt + j, kt0, kt1);
}

int bf16_gemm_order = 0;

void bf16_gemm(float *C, int ldc, int c_trans, const uint16_t *A, int a_kbt, const uint16_t *B, int b_kbt, int M,
               int N, int K, int accumulate) {
    const int MT = bf16_mtiles(M), NT = bf16_mtiles(N), KT = bf16_ktiles(K);
    const int MB = (MT + 1) / 2, NB = (NT + 1) / 2;
    // k blocks bound the A/B panels a block streams (2048 k = 128 KiB per 32-row panel); a
    // k block's partial sums round-trip through C exactly, so blocking changes no result.
    const int KC = KT <= 128 ? KT : 64;
    // Loop order: blocks along one dimension vary fastest, in groups whose panels fit ~512
    // KiB of L2, and within a group the other operand's panel (one block of the slow
    // dimension) stays in cache across the group; so one operand streams once per group pass
    // and the other from L2 -- not both from L3. Output blocks along n fastest (consecutive
    // blocks store into the same 32 rows of C, so the same pages) measured faster on the
    // model's shapes except where M > N with a long k (K >= 1024: dW = dout^T x, dinp of
    // the MLP's down projection); `scripts/bench_bf16_parts.sh` times both orders.
    const int n_fast = bf16_gemm_order ? bf16_gemm_order == 1 : !(M > N && K >= 1024);
    const int F = n_fast ? NB : MB, S = n_fast ? MB : NB;
    const int kc_bytes = (KC < KT ? KC : KT) * 32 * 2 * 32;   // one 32-row panel of a k block
    int FG = (512 << 10) / kc_bytes;
    FG = FG < 1 ? 1 : FG > F ? F : FG;
    // Groups of equal size (the last one short by less than the number of groups), and the
    // loop over the valid blocks only: with the short group padded to FG slots, the static
    // split gave one thread up to twice the other's blocks (F = 48, FG = 32: 32 + 16).
    const int ngroups = (F + FG - 1) / FG;
    FG = (F + ngroups - 1) / ngroups;
    const long full = F / FG, rem = F % FG, nblocks = (long)F * S;
    const int amx = bf16_engine() == BF16_AMX;
#pragma omp parallel if (!omp_in_parallel())
    {
        if (amx) tiles_configure();
        for (int kt0 = 0; kt0 < KT; kt0 += KC) {
            const int kt1 = kt0 + KC < KT ? kt0 + KC : KT;
            OutCtx oc = {C, ldc, M, N, accumulate || kt0 > 0, c_trans};
            const OutCtx *o = &oc;
#pragma omp for schedule(static)
            for (long b = 0; b < nblocks; b++) {
                // full groups of FG fast blocks, each over all S slow blocks; then the rest
                const long in_full = b < full * S * FG, g = in_full ? b / ((long)S * FG) : full;
                const long w = in_full ? b % ((long)S * FG) : b - full * S * FG, gs = in_full ? FG : rem;
                const int sl = (int)(w / gs), f = (int)(g * FG + w % gs);
                const int mb = n_fast ? sl : f, nb = n_fast ? f : sl;
                int mt = 2 * mb, nt = 2 * nb;
                const int m2 = MT - mt >= 2 ? 2 : 1, n2 = NT - nt >= 2 ? 2 : 1;
                if (amx) block_kernel(o, A, a_kbt, B, b_kbt, mt, nt, m2, n2, kt0, kt1);
                else avx_block_kernel(o, A, a_kbt, B, b_kbt, mt, nt, m2, n2, kt0, kt1);
            }
        }
        if (amx) _tile_release();
    }
}
