// lmhead.c: the LM head, cross-entropy and z-loss fused and chunked over tokens, so the
// (N, V) logits never exist: only `chunk` rows of logits at a time.
// loss = (sum_t CE_t + z_coef * sum_t lse_t^2) * inv_count over non-masked tokens t;
// d loss / d logit_tv = inv_count * (softmax_tv * (1 + 2 z_coef lse_t) - [v == target_t]).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/lanes.h"
#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"
#include "util/common.h"

// ---- fp32 (and bf16 emulated): vocab-blocked within each token chunk ----------------------
// Per chunk of nc tokens the (nc, V) logits live in `scratch`, but every pass over them
// works one (nc, VB) vocab block at a time while the block sits in L2:
//   pass 1, threads take vocab blocks: the block's logits (one single-threaded sgemm), then
//           per token the block's max m_b, e_v = exp(logit_v - m_b) in place and their sum
//           s_b; the blocks' (m_b, s_b) are merged per token in block order into lse;
//   pass 2 (gradient), threads take fixed groups of vocab blocks: per block, dlogits in
//           place (e_v * exp(m_b - lse) * (1 + 2 z lse) / count, minus 1/count at the
//           target), then dW block (+)= dl^T @ x chunk and the group's dx partial (+)=
//           dl @ W block; dx = the groups' partials summed in group order.
// So the logits are written once and read once per chunk (the loop over whole rows
// streamed them through memory three times more), and dx is one pass over the chunk's
// dlogits instead of one per output column block. Every sum has a fixed order: a block's
// products are one sgemm, stats merge in block order, dx partials belong to LM_GROUPS
// groups whatever the thread count, dW sums chunks in order.
#define LM_VBLOCK 1024   // vocab block: (512 tokens, 1024) fp32 logits = 2 MiB, about L2
#define LM_GROUPS 6      // dx partials: divides evenly over 1, 2, 3 and 6 threads

// One row of a logits block: its max, the exps exp(logit - max) in place of the logits, and
// their sum in 8 fp32 lanes over runs of 256 (lanes.h's sum_lanes8: a lane sums at most 32
// terms), double across runs. The max and the exps run in 512-bit vectors where the CPU has
// them (vexp.h); the sum's order is written out.
static inline void block_row_stats(float *lg, int vn, float *max_out, double *sum_out) {
    const float mx = row_max(lg, vn);
    double sum = 0.0;
    for (int c0 = 0; c0 < vn; c0 += 256) {
        const int n = vn - c0 < 256 ? vn - c0 : 256;
        vexpf_shifted(lg + c0, lg + c0, n, mx);
        sum += sum_lanes8(lg + c0, n);
    }
    *max_out = mx;
    *sum_out = sum;
}

// A token's log-sum-exp from its nvb vocab blocks' (max, sum of exp(logit - max)) pairs,
// found at max[b * stride], sum[b * stride], merged in block order.
static double merged_lse(const float *max, const double *sum, size_t stride, int nvb) {
    float m = -INFINITY;
    for (int b = 0; b < nvb; b++) m = max[(size_t)b * stride] > m ? max[(size_t)b * stride] : m;
    double s = 0.0;
    for (int b = 0; b < nvb; b++) s += sum[(size_t)b * stride] * exp((double)max[(size_t)b * stride] - m);
    return m + log(s);
}

static LossSums lmhead_blocked(float *dx, float *dW, const float *xm, const float *Wm, const int32_t *targets,
                               int N, int C, int V, float z_coef, float inv_count, float *scratch, int chunk,
                               float *logits_out, float *tok_ce, int bf16) {
    const int VB = LM_VBLOCK, nvb = (V + VB - 1) / VB, G = nvb < LM_GROUPS ? nvb : LM_GROUPS;
    float *blk_max = xmalloc(sizeof(float) * (size_t)nvb * chunk), *target_logit = xmalloc(sizeof(float) * chunk);
    double *blk_sum = xmalloc(sizeof(double) * (size_t)nvb * chunk), *row_lse = xmalloc(sizeof(double) * chunk);
    float *dx_part = dx ? xmalloc_aligned(sizeof(float) * (size_t)G * chunk * C) : NULL;
    LossSums sums = {0.0, 0.0, 0};
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int nc = N - n0 < chunk ? N - n0 : chunk;
        const float *xc = xm + (size_t)n0 * C;
        const int32_t *tg = targets + n0;
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < nvb; b++) {
            const int v0 = b * VB, vn = V - v0 < VB ? V - v0 : VB;
            float *L = scratch + v0;   // (nc, vn) at row stride V
            // logits block (nc, vn) = x chunk (nc, C) @ W[v0 : v0+vn]^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nc, vn, C, 1.0f, xc, C, Wm + (size_t)v0 * C, C,
                        0.0f, L, V);
            for (int r = 0; r < nc; r++) {
                float *lg = L + (size_t)r * V;
                const int t = tg[r];
                if (logits_out) memcpy(logits_out + (size_t)(n0 + r) * V + v0, lg, sizeof(float) * vn);
                if (t >= v0 && t < v0 + vn) target_logit[r] = lg[t - v0];
                block_row_stats(lg, vn, &blk_max[(size_t)b * chunk + r], &blk_sum[(size_t)b * chunk + r]);
            }
        }
        for (int r = 0; r < nc; r++) {
            row_lse[r] = merged_lse(blk_max + r, blk_sum + r, chunk, nvb);
            const double ce = tg[r] >= 0 ? row_lse[r] - target_logit[r] : 0.0;
            if (tok_ce) tok_ce[n0 + r] = (float)ce;
            if (tg[r] < 0) continue;
            sums.ce_sum += ce;
            sums.z_sum += row_lse[r] * row_lse[r];
            sums.n_valid++;
        }
        if (!dx) continue;
#pragma omp parallel for schedule(dynamic, 1)
        for (int g = 0; g < G; g++) {
            float *dxg = dx_part + (size_t)g * chunk * C;
            const int bg0 = g * nvb / G, bg1 = (g + 1) * nvb / G;
            for (int b = bg0; b < bg1; b++) {
                const int v0 = b * VB, vn = V - v0 < VB ? V - v0 : VB;
                float *L = scratch + v0;
                for (int r = 0; r < nc; r++) {
                    float *lg = L + (size_t)r * V;
                    const int t = tg[r];
                    if (t < 0) {
                        memset(lg, 0, sizeof(float) * vn);
                        if (bf16_lmhead_dl_out) memset(bf16_lmhead_dl_out + (size_t)(n0 + r) * V + v0, 0, sizeof(float) * vn);
                        continue;
                    }
                    // softmax * (1 + 2 z lse) - onehot, scaled by 1/count
                    const float a = (float)(exp((double)blk_max[(size_t)b * chunk + r] - row_lse[r]) *
                                            (1.0 + 2.0 * z_coef * row_lse[r]) * inv_count);
                    row_scale(lg, vn, a);
                    if (t >= v0 && t < v0 + vn) lg[t - v0] -= inv_count;
                    if (bf16_lmhead_dl_out) memcpy(bf16_lmhead_dl_out + (size_t)(n0 + r) * V + v0, lg, sizeof(float) * vn);
                    // bf16 emulated: dlogits are a matmul operand, rounded as matmul_* would
                    if (bf16)
                        for (int v = 0; v < vn; v++) lg[v] = bf16_to_float(bf16_round(lg[v]));
                }
                // dx partial (nc, C) (+)= dl (nc, vn) @ W[v0 : v0+vn]; dW[v0 : v0+vn] (+)= dl^T @ x chunk
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nc, C, vn, 1.0f, L, V, Wm + (size_t)v0 * C, C,
                            b > bg0 ? 1.0f : 0.0f, dxg, C);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vn, C, nc, 1.0f, L, V, xc, C,
                            n0 > 0 ? 1.0f : 0.0f, dW + (size_t)v0 * C, C);
            }
        }
        float *dxc = dx + (size_t)n0 * C;
        const size_t nC = (size_t)nc * C, stride = (size_t)chunk * C;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nC; i++) {
            float acc = dx_part[i];
            for (int g = 1; g < G; g++) acc += dx_part[(size_t)g * stride + i];
            dxc[i] = acc;
        }
    }
    free(blk_max), free(target_logit), free(blk_sum), free(row_lse), free(dx_part);
    return sums;
}

// ---- bf16 on AMX: vocab-blocked, logits never leave the cache -----------------------------
// (Its own token chunk and scratch: `chunk`/`scratch` size the fp32 path.) At bf16 speed the
// fp32 path's (chunk, V) logits round trip through memory costs more than the matmuls.
// Here logits exist one (chunk, VB) block at a time per thread (1 MiB, in L2):
//   pass 1, threads take vocab blocks: per chunk, the logits block, then per token the
//           block's max, sum of exp(logit - max) and (in the target's block) the target
//           logit; the blocks' (max, sum) pairs are merged per token in block order;
//   pass 2 (gradient), threads take fixed groups of vocab blocks: per block, per chunk, the
//           logits block again (recomputed: AMX FLOPs are cheaper than the traffic), the
//           dlogits written straight into the packed A tiles of dl and of dl^T (one row
//           pass, bf16_rows.c), then dx partial of the group += dl @ W block and
//           dW block += dl^T @ x chunk; dx = the groups' partials summed in group order.
// W and x are packed once per call in both layouts they are used in. The exps of both
// passes are bf16_rows.c's FMA exp (the fp32 path above keeps vexpf).
// Threads own whole blocks (a few parallel regions per call, not thousands), each dW
// block stays in cache across all chunks, and no sum depends on which thread ran what:
// block stats merge in block order, dx partials belong to a fixed number of groups, and
// chunk boundaries fall on k-tiles, so neither the chunk size nor the thread count changes
// a bit (tests/test_bf16.c).
int bf16_lmhead_chunk = 0, bf16_lmhead_vblock = 0;
float *bf16_lmhead_dl_out = NULL;

#define DX_GROUPS 6   // dx partials: divides evenly over 1, 2, 3 and 6 threads

static LossSums lmhead_bf16_packed(float *dx, float *dW, const float *x, const float *W, const int32_t *targets, int N,
                                int C, int V, float z_coef, float inv_count, float *scratch, int chunk,
                                float *logits_out, float *tok_ce, Bf16Work *ws) {
    // Token chunks of 512 and vocab blocks of 512 measured fastest here, at d 256 and 512
    // (6-7% over 256 x 1024; tests/test_bf16.c sets others); chunks start on a k-tile of
    // the packed x.
    (void)scratch;
    chunk = bf16_lmhead_chunk >= 32 ? bf16_lmhead_chunk / 32 * 32 : 512;
    int VB = bf16_lmhead_vblock > 0 ? bf16_lmhead_vblock : 512;
    VB = VB / 32 * 32 < 32 ? 32 : VB / 32 * 32;
    if (VB > (V + 31) / 32 * 32) VB = (V + 31) / 32 * 32;
    const int nvb = (V + VB - 1) / VB, nth = omp_get_max_threads();
    const int kbC = bf16_ktiles(C), kbV = bf16_ktiles(V), kbN = bf16_ktiles(N), kbB = VB / 32, kbK = chunk / 32;
    uint16_t *w_fwd = bf16_workspace(ws, 2, 2 * bf16_packed_b_size(V, kbC));  // B (C, V): logits = x W^T
    uint16_t *x_a = bf16_workspace(ws, 3, 2 * bf16_packed_a_size(N, kbC));    // A (N, C)
    float *blk_max = bf16_workspace(ws, 4, sizeof(float) * nvb * N), *target_logit = bf16_workspace(ws, 5, sizeof(float) * N);
    double *blk_sum = bf16_workspace(ws, 6, sizeof(double) * nvb * N), *row_lse = bf16_workspace(ws, 7, sizeof(double) * N);
    float *L_all = bf16_workspace(ws, 12, sizeof(float) * nth * chunk * VB);  // per thread: (chunk, VB) logits
    // W in both layouts at once when the gradient needs the second (one read of W)
    uint16_t *w_bwd = dx ? bf16_workspace(ws, 8, 2 * bf16_packed_b_size(C, kbV)) : NULL;   // B (V, C): dx = dl W
    if (dx) bf16_pack_b_both(w_fwd, kbC, w_bwd, kbV, W, C, V, C);
    else bf16_pack_b(w_fwd, kbC, 0, W, C, 1, C, V);
    bf16_pack_a(x_a, kbC, 0, x, C, 0, N, C);
    // logits block (nc, vn) of tokens n0.. and vocab v0.. (a serial gemm: inside a region)
#define LOGITS_BLOCK() \
    bf16_gemm(L, VB, 0, x_a + (size_t)(n0 / 16) * kbC * BF16_TILE, kbC, w_fwd + (size_t)(v0 / 16) * kbC * BF16_TILE, \
              kbC, nc, vn, C, 0)
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < nvb; b++) {
        float *L = L_all + (size_t)omp_get_thread_num() * chunk * VB;
        const int v0 = b * VB, vn = V - v0 < VB ? V - v0 : VB;
        for (int n0 = 0; n0 < N; n0 += chunk) {
            const int nc = N - n0 < chunk ? N - n0 : chunk;
            LOGITS_BLOCK();
            for (int r = 0; r < nc; r++) {
                float *lg = L + (size_t)r * VB;
                const int n = n0 + r, t = targets[n];
                if (logits_out) memcpy(logits_out + (size_t)n * V + v0, lg, sizeof(float) * vn);
                bf16_row_softmax_stats(lg, vn, &blk_max[(size_t)b * N + n], &blk_sum[(size_t)b * N + n]);
                if (t >= v0 && t < v0 + vn) target_logit[n] = lg[t - v0];
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        row_lse[n] = merged_lse(blk_max + n, blk_sum + n, N, nvb);
    }
    LossSums sums = {0.0, 0.0, 0};
    for (int n = 0; n < N; n++) {
        double ce = targets[n] >= 0 ? row_lse[n] - target_logit[n] : 0.0;
        if (tok_ce) tok_ce[n] = (float)ce;
        if (targets[n] < 0) continue;
        sums.ce_sum += ce;
        sums.z_sum += row_lse[n] * row_lse[n];
        sums.n_valid++;
    }
    if (!dx) return sums;

    const int G = nvb < DX_GROUPS ? nvb : DX_GROUPS;
    const size_t dla_n = bf16_packed_a_size(chunk, kbB), dlt_n = bf16_packed_a_size(VB, kbK);
    uint16_t *x_b = bf16_workspace(ws, 9, 2 * bf16_packed_b_size(C, kbN));     // B (N, C): dW = dl^T x
    uint16_t *dla_all = bf16_workspace(ws, 10, 2 * dla_n * nth);              // per thread: A (nc, VB)
    uint16_t *dlt_all = bf16_workspace(ws, 11, 2 * dlt_n * nth);              // per thread: A (VB, nc) = dl^T
    float *dx_part = bf16_workspace(ws, 13, sizeof(float) * G * N * C);       // per group: (N, C)
    Bf16DlRow *row_all = bf16_workspace(ws, 14, sizeof(Bf16DlRow) * chunk * nth);   // per thread: the chunk's rows
    bf16_pack_b(x_b, kbN, 0, x, C, 0, N, C);
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < G; g++) {
        const int tid = omp_get_thread_num();
        float *L = L_all + (size_t)tid * chunk * VB, *dxg = dx_part + (size_t)g * N * C;
        uint16_t *dl_a = dla_all + dla_n * tid, *dl_t = dlt_all + dlt_n * tid;
        Bf16DlRow *rows = row_all + (size_t)chunk * tid;
        const int bg0 = g * nvb / G, bg1 = (g + 1) * nvb / G;
        for (int b = bg0; b < bg1; b++) {
            const int v0 = b * VB, vn = V - v0 < VB ? V - v0 : VB;
            for (int n0 = 0; n0 < N; n0 += chunk) {
                const int nc = N - n0 < chunk ? N - n0 : chunk;
                LOGITS_BLOCK();
                // dl = softmax * (1 + 2 z lse) - onehot, scaled by 1/count; 0 on masked rows,
                // straight into the two packed layouts
                for (int r = 0; r < nc; r++) {
                    const int n = n0 + r, t = targets[n];
                    rows[r].lse = (float)row_lse[n];
                    rows[r].a = (float)((1.0 + 2.0 * z_coef * row_lse[n]) * inv_count);
                    rows[r].tcol = t < 0 ? BF16_DL_MASKED : t >= v0 && t < v0 + vn ? t - v0 : -1;
                }
                bf16_lm_dlogits_pack(L, VB, nc, vn, rows, inv_count, dl_a, kbB, dl_t, kbK,
                                     bf16_lmhead_dl_out ? bf16_lmhead_dl_out + (size_t)n0 * V + v0 : NULL, (size_t)V);
                // dx partial (nc, C) (+)= dl (nc, vn) @ W[v0 : v0+vn]; dW[v0 : v0+vn] (+)= dl^T @ x chunk
                bf16_gemm(dxg + (size_t)n0 * C, C, 0, dl_a, kbB, w_bwd + (size_t)(v0 / 32) * BF16_TILE, kbV, nc, C,
                          vn, b > bg0);
                bf16_gemm(dW + (size_t)v0 * C, C, 0, dl_t, kbK, x_b + (size_t)(n0 / 32) * BF16_TILE, kbN, vn, C, nc,
                          n0 > 0);
            }
        }
    }
#undef LOGITS_BLOCK
    const size_t NC = (size_t)N * C;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < NC; i++) {
        float acc = dx_part[i];
        for (int g = 1; g < G; g++) acc += dx_part[(size_t)g * NC + i];
        dx[i] = acc;
    }
    return sums;
}

LossSums lmhead_loss_forward_backward(float *dx, float *dW, const float *x, const float *W,
                                      const int32_t *targets, int N, int C, int V,
                                      float z_coef, float inv_count, float *scratch, int chunk,
                                      float *logits_out, float *tok_ce, Precision p, Bf16Work *ws) {
    const int bf16 = p == PRECISION_BF16;
    if (bf16 && bf16_packed())
        return lmhead_bf16_packed(dx, dW, x, W, targets, N, C, V, z_coef, inv_count, scratch, chunk, logits_out, tok_ce, ws);
    // fp32, and bf16 emulated: x and W are rounded once here (not once per chunk and
    // matmul), each chunk's dlogits before its backward matmuls, and the matmuls run in
    // fp32 on the rounded values -- the products matmul_* would form under PRECISION_BF16.
    const float *xm = x, *Wm = W;
    if (bf16) {
        xm = bf16_rounded_copy(ws, 2, x, (size_t)N * C);
        Wm = bf16_rounded_copy(ws, 3, W, (size_t)V * C);
    }
    return lmhead_blocked(dx, dW, xm, Wm, targets, N, C, V, z_coef, inv_count, scratch, chunk, logits_out, tok_ce, bf16);
}
