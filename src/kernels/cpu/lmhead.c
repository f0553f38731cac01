// lmhead.c: the LM head, cross-entropy and z-loss fused and chunked over tokens, so the
// (N, V) logits never exist: only `chunk` rows of logits at a time.
// loss = (sum_t CE_t + z_coef * sum_t lse_t^2) * inv_count over non-masked tokens t;
// d loss / d logit_tv = inv_count * (softmax_tv * (1 + 2 z_coef lse_t) - [v == target_t]).
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"

// Softmax, CE and z-loss of nc rows of logits (in place: e_v = exp(logit_v - max), then
// the gradient when `grad`). Per-row sums go to row_ce/row_z (0 where masked).
static void loss_rows(float *logits, int nc, int V, const int32_t *targets, int grad, float z_coef, float inv_count,
                      double *row_ce, double *row_z, float *tok_ce) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < nc; r++) {
        float *lg = logits + (size_t)r * V;
        int32_t t = targets[r];
        // One pass of exp: e_v = exp(logit_v - max) is kept in place and reused by the
        // gradient (softmax_v = e_v / sum). vexpf (vexp.h) vectorizes; the simd lane split
        // is fixed at compile time, so results do not depend on the thread count.
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int v = 0; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
        float target_logit = t >= 0 ? lg[t] : 0.0f;
        // Sum in fp32 vector lanes over blocks of 256, then in double across blocks: the
        // inner loop vectorizes (a double accumulator would not), and a lane sums at
        // most 16 terms, so the total keeps double-like accuracy.
        double sum = 0.0;
        for (int v0 = 0; v0 < V; v0 += 256) {
            const int v1 = v0 + 256 < V ? v0 + 256 : V;
            float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
            for (int v = v0; v < v1; v++) {
                float e = vexpf(lg[v] - mx);
                lg[v] = e;
                bs += e;
            }
            sum += bs;
        }
        double lse = mx + log(sum);
        if (t < 0) {
            row_ce[r] = row_z[r] = 0.0;
            if (tok_ce) tok_ce[r] = 0.0f;
            if (grad) memset(lg, 0, sizeof(float) * V);
            continue;
        }
        row_ce[r] = lse - target_logit;
        row_z[r] = lse * lse;
        if (tok_ce) tok_ce[r] = (float)row_ce[r];
        if (grad) {
            // softmax * (1 + 2 z lse) - onehot, scaled by 1/count
            float a = (float)((1.0 + 2.0 * z_coef * lse) * inv_count / sum);
#pragma omp simd
            for (int v = 0; v < V; v++) lg[v] *= a;
            lg[t] -= inv_count;
        }
    }
}

static void add_rows(LossSums *sums, const int32_t *targets, int nc, const double *row_ce, const double *row_z) {
    for (int r = 0; r < nc; r++) {
        if (targets[r] < 0) continue;
        sums->ce_sum += row_ce[r];
        sums->z_sum += row_z[r];
        sums->n_valid++;
    }
}

// The bf16 path on AMX. W is packed once per call in both layouts it is used in; each
// chunk's dlogits are packed as A (rows = tokens) for dx and into a group buffer as B
// (k = tokens) for dW, so dW = (x^T dl)^T runs once per group with k = the group's tokens
// instead of re-reading the (V, C) gradient once per chunk. Groups hold as many chunks as
// fit 256 MiB of bf16 dlogits (bf16_lmhead_group tokens when set: tests). Chunk and group
// boundaries fall on k-tiles, so neither changes any result (test_bf16.c).
// ---- bf16 on AMX: vocab-blocked, logits never leave the cache -----------------------------
// (Its own token chunk and scratch: `chunk`/`scratch` size the fp32 path.) At bf16 speed the
// fp32 path's (chunk, V) logits round trip through memory costs more than the matmuls.
// Here logits exist one (chunk, VB) block at a time per thread (1 MiB, in L2):
//   pass 1, threads take vocab blocks: per chunk, the logits block, then per token the
//           block's max, sum of exp(logit - max) and (in the target's block) the target
//           logit; the blocks' (max, sum) pairs are merged per token in block order;
//   pass 2 (gradient), threads take fixed groups of vocab blocks: per block, per chunk, the
//           logits block again (recomputed: AMX FLOPs are cheaper than the traffic),
//           dlogits in place, then dx partial of the group += dl @ W block and
//           dW block += dl^T @ x chunk; dx = the groups' partials summed in group order.
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
    // Token chunks of 256 and vocab blocks of 1024 measured fastest here (tests/test_bf16.c
    // sets others); chunks start on a k-tile of the packed x.
    (void)scratch;
    chunk = bf16_lmhead_chunk >= 32 ? bf16_lmhead_chunk / 32 * 32 : 256;
    int VB = bf16_lmhead_vblock > 0 ? bf16_lmhead_vblock : 1024;
    VB = VB / 32 * 32 < 32 ? 32 : VB / 32 * 32;
    if (VB > (V + 31) / 32 * 32) VB = (V + 31) / 32 * 32;
    const int nvb = (V + VB - 1) / VB, nth = omp_get_max_threads();
    const int kbC = bf16_ktiles(C), kbV = bf16_ktiles(V), kbN = bf16_ktiles(N), kbB = VB / 32, kbK = chunk / 32;
    uint16_t *w_fwd = bf16_workspace(ws, 2, 2 * bf16_packed_b_size(V, kbC));  // B (C, V): logits = x W^T
    uint16_t *x_a = bf16_workspace(ws, 3, 2 * bf16_packed_a_size(N, kbC));    // A (N, C)
    float *blk_max = bf16_workspace(ws, 4, sizeof(float) * nvb * N), *target_logit = bf16_workspace(ws, 5, sizeof(float) * N);
    double *blk_sum = bf16_workspace(ws, 6, sizeof(double) * nvb * N), *row_lse = bf16_workspace(ws, 7, sizeof(double) * N);
    float *L_all = bf16_workspace(ws, 12, sizeof(float) * nth * chunk * VB);  // per thread: (chunk, VB) logits
    bf16_pack_b(w_fwd, kbC, 0, W, C, 1, C, V);
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
                const float *lg = L + (size_t)r * VB;
                const int n = n0 + r, t = targets[n];
                if (logits_out) memcpy(logits_out + (size_t)n * V + v0, lg, sizeof(float) * vn);
                float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                for (int v = 0; v < vn; v++) mx = lg[v] > mx ? lg[v] : mx;
                double sum = 0.0;  // fp32 lanes over 256, double across (as loss_rows)
                for (int b0 = 0; b0 < vn; b0 += 256) {
                    const int b1 = b0 + 256 < vn ? b0 + 256 : vn;
                    float bs = 0.0f;
#pragma omp simd reduction(+ : bs)
                    for (int v = b0; v < b1; v++) bs += vexpf(lg[v] - mx);
                    sum += bs;
                }
                blk_max[(size_t)b * N + n] = mx;
                blk_sum[(size_t)b * N + n] = sum;
                if (t >= v0 && t < v0 + vn) target_logit[n] = lg[t - v0];
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float m = -INFINITY;
        for (int b = 0; b < nvb; b++) m = blk_max[(size_t)b * N + n] > m ? blk_max[(size_t)b * N + n] : m;
        double s = 0.0;
        for (int b = 0; b < nvb; b++) s += blk_sum[(size_t)b * N + n] * exp((double)blk_max[(size_t)b * N + n] - m);
        row_lse[n] = m + log(s);
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
    uint16_t *w_bwd = bf16_workspace(ws, 8, 2 * bf16_packed_b_size(C, kbV));   // B (V, C): dx = dl W
    uint16_t *x_b = bf16_workspace(ws, 9, 2 * bf16_packed_b_size(C, kbN));     // B (N, C): dW = dl^T x
    uint16_t *dla_all = bf16_workspace(ws, 10, 2 * dla_n * nth);              // per thread: A (nc, VB)
    uint16_t *dlt_all = bf16_workspace(ws, 11, 2 * dlt_n * nth);              // per thread: A (VB, nc) = dl^T
    float *dx_part = bf16_workspace(ws, 13, sizeof(float) * G * N * C);       // per group: (N, C)
    bf16_pack_b(w_bwd, kbV, 0, W, C, 0, V, C);
    bf16_pack_b(x_b, kbN, 0, x, C, 0, N, C);
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < G; g++) {
        const int tid = omp_get_thread_num();
        float *L = L_all + (size_t)tid * chunk * VB, *dxg = dx_part + (size_t)g * N * C;
        uint16_t *dl_a = dla_all + dla_n * tid, *dl_t = dlt_all + dlt_n * tid;
        const int bg0 = g * nvb / G, bg1 = (g + 1) * nvb / G;
        for (int b = bg0; b < bg1; b++) {
            const int v0 = b * VB, vn = V - v0 < VB ? V - v0 : VB;
            for (int n0 = 0; n0 < N; n0 += chunk) {
                const int nc = N - n0 < chunk ? N - n0 : chunk;
                LOGITS_BLOCK();
                // dl = softmax * (1 + 2 z lse) - onehot, scaled by 1/count; 0 on masked rows
                for (int r = 0; r < nc; r++) {
                    float *lg = L + (size_t)r * VB;
                    const int n = n0 + r, t = targets[n];
                    if (t < 0) {
                        memset(lg, 0, sizeof(float) * vn);
                    } else {
                        const float lse = (float)row_lse[n];
                        const float a = (float)((1.0 + 2.0 * z_coef * row_lse[n]) * inv_count);
#pragma omp simd
                        for (int v = 0; v < vn; v++) lg[v] = vexpf(lg[v] - lse) * a;
                        if (t >= v0 && t < v0 + vn) lg[t - v0] -= inv_count;
                    }
                    if (bf16_lmhead_dl_out) memcpy(bf16_lmhead_dl_out + (size_t)n * V + v0, lg, sizeof(float) * vn);
                }
                bf16_pack_a(dl_a, kbB, 0, L, VB, 0, nc, vn);
                bf16_pack_a(dl_t, kbK, 0, L, VB, 1, vn, nc);
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
    LossSums sums = {0.0, 0.0, 0};
    double row_ce[chunk], row_z[chunk];
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nc = N - n0 < chunk ? N - n0 : chunk;
        float *logits = scratch;                        // (nc, V)
        matmul_forward(logits, xm + (size_t)n0 * C, Wm, nc, C, V, PRECISION_FP32, NULL);
        if (logits_out) memcpy(logits_out + (size_t)n0 * V, logits, sizeof(float) * (size_t)nc * V);
        loss_rows(logits, nc, V, targets + n0, dx != NULL, z_coef, inv_count, row_ce, row_z,
                  tok_ce ? tok_ce + n0 : NULL);
        add_rows(&sums, targets + n0, nc, row_ce, row_z);
        if (dx) {
            // dx chunk (nc, C) = dlogits @ W; dW (V, C) (+)= dlogits^T @ x chunk, chunks in order
            const float *dl = bf16 ? bf16_rounded_copy(ws, 4, logits, (size_t)nc * V) : logits;
            matmul_backward(dx + (size_t)n0 * C, dW, dl, xm + (size_t)n0 * C, Wm, nc, C, V, 0, n0 > 0, PRECISION_FP32, NULL);
        }
    }
    return sums;
}
