// bf16_rows.c: the softmax row passes of the packed bf16 paths (bf16.h: the LM head and
// attention on AMX or AVX512_BF16), in AVX-512 with an FMA exp. Compiled with -mavx512f
// -mavx512bw -mavx512dq -mavx512bf16 (Makefile) and entered only where bf16_packed()
// holds, like bf16_amx.c. The fp32 path keeps vexp.h's vexpf (its bits are the reference
// of the whole-run checks). This exp is 16 vector instructions per 16 lanes against
// vexpf's 37 (Cephes's polynomial on FMAs, VSCALEFPS for 2^n, ~1 ulp), and the passes
// write the next products' operands (the LM head's dlogits, attention's P, dS, dS^T, P^T)
// as bf16 straight into their tile layouts, instead of storing fp32 for the packers to
// read back. Every sum has a fixed order (16 fp32 lanes per run of 256 elements, the runs'
// lanes in double, the lanes in a fixed tree), so no result depends on threads or on how
// the work is split.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/bf16_avx512.h"

// exp(x) for 16 lanes: x = n ln2 + r (n = round(x / ln2), ln2 in two parts), Cephes's
// degree-6 polynomial for exp(r) in Horner form on FMAs, times 2^n (VSCALEFPS, which also
// underflows gracefully to subnormals and 0). Inputs are clamped to [-104, 89]: below, 0
// (-inf, a masked score, included); above, inf (exp overflows past 88.7228 anyway; without
// the clamp the range reduction of a huge x loses all its bits). NaN stays NaN. Within
// 1.0103 ulp of exp in double wherever exp(x) is a normal float, one subnormal step where
// it is subnormal: all 2^32 floats, `build/tests/test_bf16 exp-all`.
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));   // NaN passes through
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 tail_mask(int left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) of 8 double lanes, written out
static inline double total8(__m512d d) {
    double l[8];
    _mm512_storeu_pd(l, d);
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// Columns [c_lo, c_hi] of 16 from c: the rest of a score row is masked
static inline __mmask16 band_mask(int c, int c_lo, int c_hi) {
    const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(c), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    return _mm512_cmp_epi32_mask(col, _mm512_set1_epi32(c_lo), _MM_CMPINT_NLT) &
           _mm512_cmp_epi32_mask(col, _mm512_set1_epi32(c_hi), _MM_CMPINT_LE);
}

// max of scale * x[c] over the columns c in [c_lo, c_hi] of x[0, n) (band = 0: of x[0, n),
// unscaled; a constant, so the stats' loop has no masking): four chains, so the max's
// latency overlaps (a max is exact in any order; NaN aside, which the loss reports
// whichever lane has it)
static inline float band_max(const float *x, int n, int band, float scale, int c_lo, int c_hi) {
    const __m512 sc = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 mv[4] = {ninf, ninf, ninf, ninf};
    for (int c0 = 0; c0 < n; c0 += 64)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const int c = c0 + 16 * j;
            const __mmask16 k = c >= n ? 0 : band ? band_mask(c, c_lo, c_hi) & tail_mask(n - c) : tail_mask(n - c);
            const __m512 v = band ? _mm512_mask_mul_ps(ninf, k, _mm512_maskz_loadu_ps(k, x + c), sc) : _mm512_mask_loadu_ps(ninf, k, x + c);
            mv[j] = _mm512_max_ps(mv[j], v);
        }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(mv[0], mv[1]), _mm512_max_ps(mv[2], mv[3])));
}

// sum of e[c] = exp(scale * x[c] - mx) over the columns in [c_lo, c_hi] (0 elsewhere; band
// = 0: exp(x[c] - mx) over all), the e written over x when store: 16 fp32 lanes per run of
// 256 (a lane sums at most 16 terms), the runs' lanes in double, the lanes in total8's order
static inline double band_exp_sum(float *x, int n, int band, float scale, float mx, int c_lo, int c_hi, int store) {
    const __m512 sc = _mm512_set1_ps(scale), m = _mm512_set1_ps(mx);
    __m512d dl = _mm512_setzero_pd(), dh = _mm512_setzero_pd();
    for (int c0 = 0; c0 < n; c0 += 256) {
        __m512 acc = _mm512_setzero_ps();
        const int c1 = c0 + 256 < n ? c0 + 256 : n;
        for (int c = c0; c < c1; c += 16) {
            const __mmask16 t = tail_mask(c1 - c), k = band ? band_mask(c, c_lo, c_hi) & t : t;
            const __m512 xv = band ? _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + c), sc) : _mm512_maskz_loadu_ps(k, x + c);
            const __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(xv, m)));
            if (store) _mm512_mask_storeu_ps(x + c, t, e);
            acc = _mm512_add_ps(acc, e);
        }
        dl = _mm512_add_pd(dl, _mm512_cvtps_pd(_mm512_castps512_ps256(acc)));
        dh = _mm512_add_pd(dh, _mm512_cvtps_pd(_mm512_extractf32x8_ps(acc, 1)));
    }
    return total8(_mm512_add_pd(dl, dh));
}

void bf16_row_softmax_stats(const float *x, int n, float *max_out, double *sum_out) {
    const float mx = band_max(x, n, 0, 1.0f, 0, n - 1);
    *max_out = mx;
    *sum_out = band_exp_sum((float *)x, n, 0, 1.0f, mx, 0, n - 1, 0);
}

float bf16_att_softmax_row(float *row, int nk, float scale, int c_lo, int c_hi, uint16_t *pa_row) {
    const float mx = band_max(row, nk, 1, scale, c_lo, c_hi);
    const double sum = band_exp_sum(row, nk, 1, scale, mx, c_lo, c_hi, 1);
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    const int kpad = (nk + 31) / 32 * 32;
    for (int c = 0; c < kpad; c += 16) {   // P = e / sum, to bf16 in the A tiles (zero past nk)
        const __mmask16 t = c < nk ? tail_mask(nk - c) : 0;
        const __m512 pv = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, row + c), inv);
        _mm256_storeu_si256((__m256i *)(pa_row + (size_t)(c / 32) * BF16_TILE + c % 32), (__m256i)_mm512_cvtneps_pbh(pv));
    }
    return mx + (float)log(sum);
}

void bf16_att_prob_row(float *row, int nk, float scale, int c_lo, int c_hi, float lse) {
    const __m512 sc = _mm512_set1_ps(scale), l = _mm512_set1_ps(lse);
    for (int c = 0; c < nk; c += 16) {
        const __mmask16 t = tail_mask(nk - c), k = band_mask(c, c_lo, c_hi) & t;
        const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + c), sc);
        _mm512_mask_storeu_ps(row + c, t, _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(x, l))));
    }
}

float bf16_row_dot(const float *a, const float *b, int n) {
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};   // two FMA chains
    for (int c = 0; c < n; c += 16) {
        const __mmask16 t = tail_mask(n - c);
        acc[(c >> 4) & 1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(t, a + c), _mm512_maskz_loadu_ps(t, b + c), acc[(c >> 4) & 1]);
    }
    const __m512 s = _mm512_add_ps(acc[0], acc[1]);
    return (float)total8(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(s)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(s, 1))));
}

// The two layouts the strip kernels below write, for a strip of 32 rows (from s0) and 16
// columns (from c0) of an fp32 block: row r's 16 values as bf16 into packed A (rows, cols)
// (tile (r / 16, c0 / 32), row r % 16, k from c0 % 32), and the 16 row pairs (pr[p]: rows
// s0 + 2p, s0 + 2p + 1 of each column, bf16_pairs16) transposed into tile (c0 / 16, s0 / 32)
// of packed A (cols, rows).
static inline void put_a_row16(uint16_t *a, int a_kbt, int r, int c0, __m512 v) {
    uint16_t *dst = a + ((size_t)(r / 16) * a_kbt + c0 / 32) * BF16_TILE + (r % 16) * 32 + c0 % 32;
    _mm256_storeu_si256((__m256i *)dst, (__m256i)_mm512_cvtneps_pbh(v));
}
static inline void put_t_tile(uint16_t *t, int t_kbt, int s0, int c0, __m512i pr[16]) {
    transpose16(pr);   // pr[j]: column c0 + j's 16 row pairs = a row of the tile
    uint16_t *tile = t + ((size_t)(c0 / 16) * t_kbt + s0 / 32) * BF16_TILE;
    for (int j = 0; j < 16; j++) _mm512_storeu_si512(tile + j * 32, pr[j]);
}

// 16 dlogits of row r at columns c0.. (cm: the columns inside the block), fp32
static inline __m512 dl_row16(const float *L, int ldl, int r, int c0, __mmask16 cm, const Bf16DlRow *row, float inv_count,
                              float *dl_out, size_t ld_out) {
    if (row[r].tcol == BF16_DL_MASKED) {
        if (dl_out) _mm512_mask_storeu_ps(dl_out + (size_t)r * ld_out + c0, cm, _mm512_setzero_ps());
        return _mm512_setzero_ps();
    }
    const __m512 l = _mm512_maskz_loadu_ps(cm, L + (size_t)r * ldl + c0);
    __m512 d = _mm512_maskz_mul_ps(cm, exp16(_mm512_sub_ps(l, _mm512_set1_ps(row[r].lse))), _mm512_set1_ps(row[r].a));
    const int t = row[r].tcol - c0;
    if (t >= 0 && t < 16) d = _mm512_mask_sub_ps(d, (__mmask16)(1u << t), d, _mm512_set1_ps(inv_count));
    if (dl_out) _mm512_mask_storeu_ps(dl_out + (size_t)r * ld_out + c0, cm, d);
    return d;
}

void bf16_lm_dlogits_pack(const float *L, int ldl, int nc, int vn, const Bf16DlRow *row, float inv_count,
                          uint16_t *dl_a, int a_kbt, uint16_t *dl_t, int t_kbt, float *dl_out, size_t ld_out) {
    const int vpad = (vn + 31) / 32 * 32;
    for (int s0 = 0; s0 < nc; s0 += 32)   // a strip of 32 tokens: one k-tile of dl_t
        for (int c0 = 0; c0 < vpad; c0 += 16) {
            const __mmask16 cm = c0 < vn ? tail_mask(vn - c0) : 0;
            __m512i pr[16];
            for (int p = 0; p < 16; p++) {
                __m512 v[2];
                for (int h = 0; h < 2; h++) {
                    const int r = s0 + 2 * p + h;
                    v[h] = r < nc && cm ? dl_row16(L, ldl, r, c0, cm, row, inv_count, dl_out, ld_out) : _mm512_setzero_ps();
                    put_a_row16(dl_a, a_kbt, r, c0, v[h]);
                }
                pr[p] = bf16_pairs16(v[0], v[1]);
            }
            put_t_tile(dl_t, t_kbt, s0, c0, pr);
        }
}

void bf16_att_dsoftmax_pack(const float *P, const float *dP, int nq, int nk, const float *Di, float scale,
                            uint16_t *ds_a, int a_kbt, uint16_t *ds_t, uint16_t *p_t, int t_kbt) {
    const int kpad = (nk + 31) / 32 * 32;
    const __m512 sc = _mm512_set1_ps(scale);
    for (int s0 = 0; s0 < nq; s0 += 32)   // a strip of 32 queries: one k-tile of ds_t and p_t
        for (int c0 = 0; c0 < kpad; c0 += 16) {
            const __mmask16 cm = c0 < nk ? tail_mask(nk - c0) : 0;
            __m512i pd[16], pp[16];
            for (int q = 0; q < 16; q++) {
                __m512 d[2], p[2];
                for (int h = 0; h < 2; h++) {
                    const int r = s0 + 2 * q + h;
                    if (r < nq && cm) {
                        p[h] = _mm512_maskz_loadu_ps(cm, P + (size_t)r * nk + c0);
                        const __m512 dp = _mm512_maskz_loadu_ps(cm, dP + (size_t)r * nk + c0);
                        d[h] = _mm512_mul_ps(_mm512_mul_ps(p[h], _mm512_sub_ps(dp, _mm512_set1_ps(Di[r]))), sc);
                    } else {
                        p[h] = d[h] = _mm512_setzero_ps();
                    }
                    put_a_row16(ds_a, a_kbt, r, c0, d[h]);
                }
                pd[q] = bf16_pairs16(d[0], d[1]);
                pp[q] = bf16_pairs16(p[0], p[1]);
            }
            put_t_tile(ds_t, t_kbt, s0, c0, pd);
            put_t_tile(p_t, t_kbt, s0, c0, pp);
        }
}
