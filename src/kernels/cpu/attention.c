// attention.c: causal (optionally sliding-window) grouped-query attention, tiled; the
// forward also in its KV-cache form (queries at positions p0.. against cached keys 0..).
// Queries are processed in blocks of QB rows; a block's scores against the keys its rows
// can see (at most QB + window - 1 keys) come from one small sgemm, then a row softmax,
// then one sgemm with V. With a document mask (doc_start != NULL) a row's first key is
// also raised to its document's start; since that bound is non-decreasing along t, the
// block's key range starts at its first row's bound, so keys of earlier documents are
// skipped (never multiplied), not just masked. Memory is linear in T: only the output and
// each row's log-sum-exp are saved; the backward recomputes the probabilities from q, k
// and lse.
// Precision (the backend's): fp32, or bf16, where the block's products (S = Q K^T, O = P V;
// in the backward also dP = dO V^T, dQ = dS K, dK += dS^T Q, dV += P^T dO) take bf16
// operands with fp32 accumulation on the matmuls' bf16 engine (AMX or AVX512_BF16 tiles,
// bf16.h; emulated: bf16-rounded copies through sgemm), as the CUDA kernels do; the scale,
// mask, softmax, log-sum-exp, D_i and dS stay fp32 (P and dS are rounded to bf16 only as
// operands). The fp32 path is the sgemm calls as they always were.
// Determinism: each forward output row is produced by one task; in the backward one task
// per (batch, kv head) walks its query heads and blocks in a fixed order, so dk/dv sums
// are ordered identically at any thread count. sgemm, sgemv and the bf16 packers and GEMM
// run single-threaded inside our OpenMP regions (the bf16 GEMM sums each element's k-tiles
// in index order, whatever the call's shape).
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"
#include "util/common.h"

#define QB_FP32 64   // fp32 (and bf16 emulated): the blocks every result of this path was measured with
#define QB_BF16 128  // packed bf16: twice the k of the dK, dV products, half the accumulator round trips

// A thread's bf16 operand scratch for blocks of at most QB queries against at most nk
// keys, head dim D: on the packed engines the A tiles of one block operand (Q or dO for
// S and dP, P for O = P V; the B operands are prepacked, the backward's other operands
// written by bf16_att_dsoftmax_pack); emulated, rounded fp32 copies of both operands.
typedef struct {
    uint16_t *pa;
    float *ra, *rb;
} AttBf16;

static void att_bf16_alloc(AttBf16 *w, Precision p, int QB, int nk, int D) {
    memset(w, 0, sizeof *w);
    if (p != PRECISION_BF16) return;
    if (bf16_packed()) {   // A: Q or dO (QB, D), P (QB, nk)
        const size_t a = bf16_packed_a_size(QB, bf16_ktiles(D)), b = bf16_packed_a_size(QB, bf16_ktiles(nk));
        w->pa = xmalloc_aligned(sizeof(uint16_t) * (a > b ? a : b));
    } else {
        const size_t a = (size_t)QB * (nk > D ? nk : D), b = (size_t)nk * (D > QB ? D : QB);
        w->ra = xmalloc_aligned(sizeof(float) * a);
        w->rb = xmalloc_aligned(sizeof(float) * b);
    }
}

static void att_bf16_free(AttBf16 *w) {
    free(w->pa);
    free(w->ra);
    free(w->rb);
}

// rows x cols of src (row stride ld) rounded to bf16 values, contiguous in dst
static void round_rows(float *dst, const float *src, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)r * cols + c] = bf16_to_float(bf16_round(src[(size_t)r * ld + c]));
}

// bf16 on the emulated engine: C (M, N) = op(A) (M, K) @ op(B) (K, N) (+= with acc) from
// bf16-rounded copies through sgemm; ta: A stored (K, M), tb: B stored (N, K), lda/ldb
// their row strides. (The packed engines take gemm_prepacked and the fused row passes.)
static void gemm_att_bf16(AttBf16 *w, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                          int ldb, int acc, float *C, int ldc) {
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    round_rows(w->ra, A, ar, ac, lda);
    round_rows(w->rb, B, br, bc, ldb);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, w->ra,
                ac, w->rb, bc, acc ? 1.0f : 0.0f, C, ldc);
}

// bf16 on a packed engine: every (batch row, KV head)'s keys and values packed once per call
// as the B operands of the block products (instead of once per query head and block):
//   kt  K^T (k = D, n = keys)  for S = Q K^T        v   V (k = keys, n = D)  for O = P V
//   vt  V^T (k = D, n = keys)  for dP = dO V^T      k   K (k = keys, n = D)  for dQ = dS K
// A block then reads the slice of its keys from lo rounded down to 32 (a whole n-tile of
// kt/vt, a whole k-tile of v/k: slicing is a pointer offset); the keys below lo are masked
// to P = 0, dS = 0, and products with them add exact zeros.
typedef struct {
    uint16_t *kt, *v, *vt, *k;
    int kbt_d, kbt_t;    // k-tiles per tile row: of D (kt, vt), of the keys (v, k)
    size_t nkt, nv;      // bf16 elements per (row, KV head) of kt/vt and of v/k
} AttPacked;

static void att_prepack(AttPacked *pk, const float *k, const float *v, int B, int Tk, int NKV, int D, int ldk,
                        int backward) {
    pk->kbt_d = bf16_ktiles(D), pk->kbt_t = bf16_ktiles(Tk);
    pk->nkt = bf16_packed_b_size(Tk, pk->kbt_d), pk->nv = bf16_packed_b_size(D, pk->kbt_t);
    const size_t n = (size_t)B * NKV;
    pk->kt = xmalloc_aligned(sizeof(uint16_t) * n * pk->nkt);
    pk->v = xmalloc_aligned(sizeof(uint16_t) * n * pk->nv);
    pk->vt = backward ? xmalloc_aligned(sizeof(uint16_t) * n * pk->nkt) : NULL;
    pk->k = backward ? xmalloc_aligned(sizeof(uint16_t) * n * pk->nv) : NULL;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < NKV; g++) {
            const size_t i = (size_t)b * NKV + g, off = (size_t)b * Tk * ldk + (size_t)g * D;
            bf16_pack_b(pk->kt + i * pk->nkt, pk->kbt_d, 0, k + off, ldk, 1, D, Tk);
            bf16_pack_b(pk->v + i * pk->nv, pk->kbt_t, 0, v + off, ldk, 0, Tk, D);
            if (backward) {
                bf16_pack_b(pk->vt + i * pk->nkt, pk->kbt_d, 0, v + off, ldk, 1, D, Tk);
                bf16_pack_b(pk->k + i * pk->nv, pk->kbt_t, 0, k + off, ldk, 0, Tk, D);
            }
        }
}

static void att_prepack_free(AttPacked *pk) {
    free(pk->kt);
    free(pk->v);
    free(pk->vt);
    free(pk->k);
}

// The slices of (row, KV head) i from key lo (a multiple of 32): of kt/vt (n-tiles of 16
// keys) and of v/k (k-tiles of 32 keys).
static const uint16_t *slice_t(const AttPacked *pk, const uint16_t *base, size_t i, int lo) {
    return base + i * pk->nkt + (size_t)(lo / 16) * pk->kbt_d * BF16_TILE;
}
static const uint16_t *slice_k(const AttPacked *pk, const uint16_t *base, size_t i, int lo) {
    return base + i * pk->nv + (size_t)(lo / 32) * BF16_TILE;
}

// C (M, N) (+)= A (M, K; stored (K, M) when ta) @ the prepacked B slice (b_kbt k-tiles per row).
static void gemm_prepacked(AttBf16 *w, int ta, int M, int N, int K, const float *A, int lda, const uint16_t *Bp,
                           int b_kbt, int acc, float *C, int ldc) {
    const int kbt = bf16_ktiles(K);
    bf16_pack_a(w->pa, kbt, 0, A, lda, ta, M, K);
    bf16_gemm(C, ldc, 0, w->pa, kbt, Bp, b_kbt, M, N, K, acc);
}

// C (M, N) = op(A) op(B) (+ C with acc) at the precision: w NULL or unallocated is fp32.
static void gemm_att(AttBf16 *w, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                     int acc, float *C, int ldc) {
    if (w && w->ra) gemm_att_bf16(w, ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc);
    else cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                     lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
}

// First key query i sees: the window's start, raised to its document's start (ds: this
// batch row's doc_start, or NULL).
static inline int first_key(int i, int wlen, const int32_t *ds) {
    int lo = i - wlen + 1 > 0 ? i - wlen + 1 : 0;
    if (ds && ds[i] > lo) lo = ds[i];
    return lo;
}

// Key range [lo, hi) that queries i0..i1-1 can see (first_key is non-decreasing in i).
static inline void key_range(int i0, int i1, int wlen, const int32_t *ds, int *lo, int *hi) {
    *lo = first_key(i0, wlen, ds);
    *hi = i1;
}

// Entries of S (nq, nk) outside each row's causal window / document set to -inf.
static void mask_scores(float *S, int nq, int nk, int i0, int lo, int wlen, const int32_t *ds) {
    for (int r = 0; r < nq; r++) {
        int i = i0 + r;
        int jlo = first_key(i, wlen, ds);
        float *row = S + (size_t)r * nk;
        for (int c = 0; c < jlo - lo; c++) row[c] = -INFINITY;
        for (int c = i - lo + 1; c < nk; c++) row[c] = -INFINITY;
    }
}

// S (nq, nk) = scale * Q K^T, masked (bf16 emulated: the product, then the scale in fp32;
// the packed engines do this in bf16_att_softmax_row / bf16_att_prob_row).
static void scores(AttBf16 *w, float *S, const float *Qb, int ldq, const float *Kb, int ldk, int nq, int nk, int D,
                   float scale, int i0, int lo, int wlen, const int32_t *ds) {
    if (w->ra) {
        gemm_att_bf16(w, 0, 1, nq, nk, D, Qb, ldq, Kb, ldk, 0, S, nk);
        for (size_t e = 0; e < (size_t)nq * nk; e++) S[e] *= scale;
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, D, scale, Qb, ldq, Kb, ldk, 0.0f, S, nk);
    }
    mask_scores(S, nq, nk, i0, lo, wlen, ds);
}

// Di[i] = sum over c of p[i][c] * dp[i][c] for nr <= 8 rows of length n: each row's sum
// in its serial order (bitwise a one-row loop), the rows' chains side by side so that they
// overlap instead of waiting on one another's adds.
static void rowsums_serial(float Di[8], const float *p, const float *dp, int nr, int n) {
    if (nr < 8) {
        for (int i = 0; i < nr; i++) {
            float s = 0.0f;
            for (int c = 0; c < n; c++) s += p[(size_t)i * n + c] * dp[(size_t)i * n + c];
            Di[i] = s;
        }
        return;
    }
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int c = 0; c < n; c++)
        for (int i = 0; i < 8; i++) s[i] += p[(size_t)i * n + c] * dp[(size_t)i * n + c];
    for (int i = 0; i < 8; i++) Di[i] = s[i];
}
// dS = P * (dP - Di) * scale, in place of dP
VEXP_WIDE static void row_dsoftmax(float *dp, const float *p, int n, float Di, float scale) {
#pragma omp simd
    for (int c = 0; c < n; c++) dp[c] = p[c] * (dp[c] - Di) * scale;
}

// The training forward is the KV forward with no cached positions before the queries.
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start, Precision p) {
    attention_forward_kv(out, lse, q, k, v, B, T, 0, NH, NKV, D, window, doc_start, p);
}

// Query blocks are cut at p0, p0+QB, ..., and positions below (query index i0, key index lo)
// are absolute; only q, out and lse are indexed relative to p0. At p0 = 0 every index,
// block and sgemm is the one the training forward always had, so its results are bitwise
// those of before the KV path was added. ldq, ldk: the row strides of q/out and k/v (the
// public forms pass NH*D and NKV*D; context parallelism passes a head group's). gemv: a
// single query row against cached keys may use sgemv (the KV path; not context
// parallelism, whose query blocks must be the sgemm blocks of the whole sequence; nor bf16).
static void attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int p0,
                     int NH, int NKV, int D, int ldq, int ldk, int window, const int32_t *doc_start, int gemv_ok,
                     Precision p) {
    const float scale = 1.0f / sqrtf((float)D);
    const int group = NH / NKV;
    const int Tk = p0 + T;   // keys per batch row
    const int wlen = window < Tk ? window : Tk;
    const int pre = p == PRECISION_BF16 && bf16_packed(), QB = pre ? QB_BF16 : QB_FP32;
    const int nqb = (T + QB - 1) / QB;
    const int qrows = T < QB ? T : QB;   // a decode step (T = 1) needs one score row, not QB
    AttPacked pk = {0};
    if (pre) att_prepack(&pk, k, v, B, Tk, NKV, D, ldk, 0);
#pragma omp parallel
    {
        float *S = xmalloc_aligned(sizeof(float) * qrows * (size_t)(qrows + wlen + 31));
        AttBf16 w;
        att_bf16_alloc(&w, p, QB, qrows + wlen + 31, D);
#pragma omp for collapse(3) schedule(dynamic, 1)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int qb = 0; qb < nqb; qb++) {
                    const int g = h / group;
                    const int i0 = p0 + qb * QB, i1 = i0 + QB < Tk ? i0 + QB : Tk, nq = i1 - i0;
                    const int32_t *ds = doc_start ? doc_start + (size_t)b * Tk : NULL;
                    int lo, hi;
                    key_range(i0, i1, wlen, ds, &lo, &hi);
                    if (pre) lo &= ~31;   // the prepacked slices start at a multiple of 32 keys
                    const int nk = hi - lo;
                    const size_t kvi = (size_t)b * NKV + g;
                    const float *Qb = q + ((size_t)b * T + i0 - p0) * ldq + (size_t)h * D;
                    const float *Kb = k + ((size_t)b * Tk + lo) * ldk + (size_t)g * D;
                    const float *Vb = v + ((size_t)b * Tk + lo) * ldk + (size_t)g * D;
                    float *lse_b = lse + ((size_t)b * NH + h) * T + i0 - p0;
                    float *Ob = out + ((size_t)b * T + i0 - p0) * ldq + (size_t)h * D;
                    // One query row against cached keys (a decode step): sgemv reads K and V
                    // once, where sgemm would first pack them. The training forward (p0 = 0)
                    // keeps its sgemm, so its results stay bitwise what they were.
                    const int gemv = gemv_ok && nq == 1 && p0 > 0 && p != PRECISION_BF16;
                    if (gemv) {
                        cblas_sgemv(CblasRowMajor, CblasNoTrans, nk, D, scale, Kb, ldk, Qb, 1, 0.0f, S, 1);
                        mask_scores(S, nq, nk, i0, lo, wlen, ds);
                    } else if (pre) {   // the scale, mask and softmax in one AVX-512 row pass (bf16.h)
                        gemm_prepacked(&w, 0, nq, nk, D, Qb, ldq, slice_t(&pk, pk.kt, kvi, lo), pk.kbt_d, 0, S, nk);
                        const int kk = bf16_ktiles(nk);   // P straight into the A tiles of O = P V
                        for (int r = 0; r < nq; r++)
                            lse_b[r] = bf16_att_softmax_row(S + (size_t)r * nk, nk, scale, first_key(i0 + r, wlen, ds) - lo,
                                                            i0 + r - lo, w.pa + ((size_t)(r / 16) * kk) * BF16_TILE + (r % 16) * 32);
                        if (nq % 16)   // the last tile row's rows past nq
                            for (int t = 0; t < kk; t++)
                                memset(w.pa + ((size_t)(nq / 16) * kk + t) * BF16_TILE + (nq % 16) * 32, 0,
                                       sizeof(uint16_t) * 32 * (16 - nq % 16));
                    } else {
                        scores(&w, S, Qb, ldq, Kb, ldk, nq, nk, D, scale, i0, lo, wlen, ds);
                    }
                    for (int r = 0; r < nq && !pre; r++) {
                        float *row = S + (size_t)r * nk;
                        // the max, the exps of the backward, dS and the normalization run
                        // in 512-bit vectors (vexp.h's VEXP_WIDE: elementwise or a max, no bit
                        // depends on the width); this sum keeps its omp simd reduction, whose
                        // order the default width fixes
                        const float mx = row_max(row, nk);
                        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                        for (int c = 0; c < nk; c++) {
                            float e = vexpf(row[c] - mx);
                            row[c] = e;
                            sum += e;
                        }
                        row_scale(row, nk, 1.0f / sum);
                        lse_b[r] = mx + logf(sum);
                    }
                    if (gemv) cblas_sgemv(CblasRowMajor, CblasTrans, nk, D, 1.0f, Vb, ldk, S, 1, 0.0f, Ob, 1);
                    else if (pre) bf16_gemm(Ob, ldq, 0, w.pa, bf16_ktiles(nk), slice_k(&pk, pk.v, kvi, lo), pk.kbt_t, nq, D, nk, 0);
                    else gemm_att(&w, 0, 0, nq, D, nk, S, nk, Vb, ldk, 0, Ob, ldq);
                }
        free(S);
        att_bf16_free(&w);
    }
    att_prepack_free(&pk);
}

void attention_forward_kv(float *out, float *lse, const float *q, const float *k, const float *v,
                          int B, int T, int p0, int NH, int NKV, int D, int window, const int32_t *doc_start, Precision p) {
    attn_fwd(out, lse, q, k, v, B, T, p0, NH, NKV, D, NH * D, NKV * D, window, doc_start, 1, p);
}

void attention_forward_at(float *out, float *lse, const float *q, const float *k, const float *v, int T, int p0,
                          int NH, int NKV, int D, int ldq, int ldk, int window, const int32_t *doc_start, Precision p) {
    attn_fwd(out, lse, q, k, v, 1, T, p0, NH, NKV, D, ldq, ldk, window, doc_start, 0, p);
}

// The backward of attn_fwd (no gemv case): queries at p0..p0+T-1 of keys 0..p0+T-1; with
// zero, dk and dv (keys 0..p0+T-1) are overwritten, else added to. At p0 = 0, zero = 1 and
// the public strides it is the training backward as it always was, bitwise.
static void attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                     const float *v, const float *lse, int B, int T, int p0, int NH, int NKV, int D, int ldq, int ldk,
                     int window, const int32_t *doc_start, int zero, Precision p) {
    const float scale = 1.0f / sqrtf((float)D);
    const int group = NH / NKV;
    const int Tk = p0 + T;
    const int wlen = window < Tk ? window : Tk;
    const int pre = p == PRECISION_BF16 && bf16_packed(), QB = pre ? QB_BF16 : QB_FP32;
    const int nqb = (T + QB - 1) / QB;
    AttPacked pk = {0};
    if (pre) att_prepack(&pk, k, v, B, Tk, NKV, D, ldk, 1);
#pragma omp parallel
    {
        float *P = xmalloc_aligned(sizeof(float) * QB * (size_t)(QB + wlen + 31));
        float *dP = xmalloc_aligned(sizeof(float) * QB * (size_t)(QB + wlen + 31));
        AttBf16 w;
        att_bf16_alloc(&w, p, QB, QB + wlen + 31, D);
        // pre: the block's packed operands of dQ, dK and dV (bf16_att_dsoftmax_pack writes
        // dS, dS^T and P^T straight from its row pass), Q and dO as the B of dK and dV
        const int nkmax = QB + wlen + 31, kq = bf16_ktiles(QB);
        uint16_t *ds_a = NULL, *ds_t = NULL, *p_t = NULL, *q_b = NULL, *do_b = NULL;
        if (pre) {
            ds_a = xmalloc_aligned(sizeof(uint16_t) * bf16_packed_a_size(QB, bf16_ktiles(nkmax)));
            ds_t = xmalloc_aligned(sizeof(uint16_t) * bf16_packed_a_size(nkmax + 31, kq));
            p_t = xmalloc_aligned(sizeof(uint16_t) * bf16_packed_a_size(nkmax + 31, kq));
            q_b = xmalloc_aligned(sizeof(uint16_t) * bf16_packed_b_size(D, kq));
            do_b = xmalloc_aligned(sizeof(uint16_t) * bf16_packed_b_size(D, kq));
        }
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++)
            for (int g = 0; g < NKV; g++) {
                for (int j = 0; zero && j < Tk; j++) {
                    memset(dk + ((size_t)b * Tk + j) * ldk + (size_t)g * D, 0, sizeof(float) * D);
                    memset(dv + ((size_t)b * Tk + j) * ldk + (size_t)g * D, 0, sizeof(float) * D);
                }
                for (int h = g * group; h < (g + 1) * group; h++)
                    for (int qb = 0; qb < nqb; qb++) {
                        const int i0 = p0 + qb * QB, i1 = i0 + QB < Tk ? i0 + QB : Tk, nq = i1 - i0;
                        const int32_t *ds = doc_start ? doc_start + (size_t)b * Tk : NULL;
                        int lo, hi;
                        key_range(i0, i1, wlen, ds, &lo, &hi);
                        if (pre) lo &= ~31;   // the prepacked slices start at a multiple of 32 keys
                        const int nk = hi - lo;
                        const size_t kvi = (size_t)b * NKV + g;
                        const size_t qoff = ((size_t)b * T + i0 - p0) * ldq + (size_t)h * D;
                        const size_t koff = ((size_t)b * Tk + lo) * ldk + (size_t)g * D;
                        const float *Qb = q + qoff, *dOb = dout + qoff;
                        const float *Kb = k + koff, *Vb = v + koff;
                        const float *lse_b = lse + ((size_t)b * NH + h) * T + i0 - p0;
                        if (pre) {   // P = exp(scale S - lse), masked, in one AVX-512 row pass
                            gemm_prepacked(&w, 0, nq, nk, D, Qb, ldq, slice_t(&pk, pk.kt, kvi, lo), pk.kbt_d, 0, P, nk);
                            for (int r = 0; r < nq; r++)
                                bf16_att_prob_row(P + (size_t)r * nk, nk, scale, first_key(i0 + r, wlen, ds) - lo,
                                                  i0 + r - lo, lse_b[r]);
                        } else {
                            scores(&w, P, Qb, ldq, Kb, ldk, nq, nk, D, scale, i0, lo, wlen, ds);
                            for (int r = 0; r < nq; r++)   // P = exp(S - lse)
                                vexpf_shifted(P + (size_t)r * nk, P + (size_t)r * nk, nk, lse_b[r]);
                        }
                        // dP (nq, nk) = dO V^T
                        if (pre) gemm_prepacked(&w, 0, nq, nk, D, dOb, ldq, slice_t(&pk, pk.vt, kvi, lo), pk.kbt_d, 0, dP, nk);
                        else gemm_att(&w, 0, 1, nq, nk, D, dOb, ldq, Vb, ldk, 0, dP, nk);
                        // dS = P * (dP - rowsum(P * dP)) * scale. rowsum(P * dP) equals
                        // rowsum(dO * O) (O = P V); taken from the same dP values it makes
                        // each row of dS sum to zero up to the rounding of sum(P), so a row
                        // that sees one key (P = 1: a window of 1, a one-token document)
                        // gets dS = 0 exactly, whatever order the BLAS summed dP in.
                        float Di[QB_BF16 > QB_FP32 ? QB_BF16 : QB_FP32];
                        for (int r = 0; pre && r < nq; r++) Di[r] = bf16_row_dot(P + (size_t)r * nk, dP + (size_t)r * nk, nk);
                        for (int r = 0; !pre && r < nq; r += 8) {
                            const int nr = nq - r < 8 ? nq - r : 8;
                            rowsums_serial(Di + r, P + (size_t)r * nk, dP + (size_t)r * nk, nr, nk);
                            for (int i = 0; i < nr; i++)
                                row_dsoftmax(dP + (size_t)(r + i) * nk, P + (size_t)(r + i) * nk, nk, Di[r + i], scale);
                        }
                        if (pre) {
                            const int kk = bf16_ktiles(nk);
                            bf16_att_dsoftmax_pack(P, dP, nq, nk, Di, scale, ds_a, kk, ds_t, p_t, kq);
                            bf16_pack_b(q_b, kq, 0, Qb, ldq, 0, nq, D);
                            bf16_pack_b(do_b, kq, 0, dOb, ldq, 0, nq, D);
                            bf16_gemm(dq + qoff, ldq, 0, ds_a, kk, slice_k(&pk, pk.k, kvi, lo), pk.kbt_t, nq, D, nk, 0);
                            bf16_gemm(dk + koff, ldk, 0, ds_t, kq, q_b, kq, nk, D, nq, 1);
                            bf16_gemm(dv + koff, ldk, 0, p_t, kq, do_b, kq, nk, D, nq, 1);
                            continue;
                        }
                        // dQ = dS K; dK += dS^T Q; dV += P^T dO
                        gemm_att(&w, 0, 0, nq, D, nk, dP, nk, Kb, ldk, 0, dq + qoff, ldq);
                        gemm_att(&w, 1, 0, nk, D, nq, dP, nk, Qb, ldq, 1, dk + koff, ldk);
                        gemm_att(&w, 1, 0, nk, D, nq, P, nk, dOb, ldq, 1, dv + koff, ldk);
                    }
            }
        free(P);
        free(dP);
        free(ds_a), free(ds_t), free(p_t), free(q_b), free(do_b);
        att_bf16_free(&w);
    }
    att_prepack_free(&pk);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start, Precision p) {
    (void)out;   // D_i comes from P and dP (attn_bwd); the interface keeps O for the CUDA kernel
    attn_bwd(dq, dk, dv, dout, q, k, v, lse, B, T, 0, NH, NKV, D, NH * D, NKV * D, window, doc_start, 1, p);
}

void attention_backward_at(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *lse, int T, int p0, int NH, int NKV, int D, int ldq, int ldk,
                           int window, const int32_t *doc_start, Precision p) {
    attn_bwd(dq, dk, dv, dout, q, k, v, lse, 1, T, p0, NH, NKV, D, ldq, ldk, window, doc_start, 0, p);
}
