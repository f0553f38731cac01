// lmhead.c: the LM head, cross-entropy and z-loss fused and chunked over tokens, so the
// (N, V) logits never exist: only `chunk` rows of logits at a time.
// loss = (sum_t CE_t + z_coef * sum_t lse_t^2) * inv_count over non-masked tokens t;
// d loss / d logit_tv = inv_count * (softmax_tv * (1 + 2 z_coef lse_t) - [v == target_t]).
#include <math.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
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
int bf16_lmhead_group = 0;

static LossSums lmhead_bf16_amx(float *dx, float *dW, const float *x, const float *W, const int32_t *targets, int N,
                                int C, int V, float z_coef, float inv_count, float *scratch, int chunk,
                                float *logits_out, float *tok_ce) {
    LossSums sums = {0.0, 0.0, 0};
    double row_ce[chunk], row_z[chunk];
    chunk = chunk / 32 * 32;  // chunks start on a k-tile of the group buffer (caller: chunk >= 32)
    const int kbC = bf16_ktiles(C), kbV = bf16_ktiles(V);
    long group = bf16_lmhead_group > 0 ? bf16_lmhead_group : (256L << 20) / (2L * V);
    group = group / chunk * chunk;
    if (group < chunk) group = chunk;
    if (group > N) group = N;
    const int kbG = bf16_ktiles((int)group);
    uint16_t *w_fwd = bf16_workspace(2, 2 * bf16_packed_b_size(V, kbC));   // B (C, V): logits = x W^T
    uint16_t *x_a = bf16_workspace(3, 2 * bf16_packed_a_size(chunk, kbC)); // A (chunk, C)
    bf16_pack_b(w_fwd, kbC, 0, W, C, 1, C, V);
    uint16_t *w_bwd = NULL, *dl_a = NULL, *dl_b = NULL, *xt_a = NULL;
    if (dx) {
        w_bwd = bf16_workspace(4, 2 * bf16_packed_b_size(C, kbV));        // B (V, C): dx = dl W
        dl_a = bf16_workspace(5, 2 * bf16_packed_a_size(chunk, kbV));     // A (chunk, V)
        dl_b = bf16_workspace(6, 2 * bf16_packed_b_size(V, kbG));         // B (group, V)
        xt_a = bf16_workspace(7, 2 * bf16_packed_a_size(C, kbG));         // A (C, group) = x^T
        bf16_pack_b(w_bwd, kbV, 0, W, C, 0, V, C);
    }
    for (int g0 = 0; g0 < N; g0 += (int)group) {
        const int ng = N - g0 < group ? N - g0 : (int)group;
        for (int n0 = g0; n0 < g0 + ng; n0 += chunk) {
            const int nc = g0 + ng - n0 < chunk ? g0 + ng - n0 : chunk;
            float *logits = scratch;  // (nc, V)
            bf16_pack_a(x_a, kbC, 0, x + (size_t)n0 * C, C, 0, nc, C);
            bf16_gemm(logits, V, 0, x_a, kbC, w_fwd, kbC, nc, V, C, 0);
            if (logits_out) memcpy(logits_out + (size_t)n0 * V, logits, sizeof(float) * (size_t)nc * V);
            loss_rows(logits, nc, V, targets + n0, dx != NULL, z_coef, inv_count, row_ce, row_z,
                      tok_ce ? tok_ce + n0 : NULL);
            add_rows(&sums, targets + n0, nc, row_ce, row_z);
            if (!dx) continue;
            bf16_pack_a(dl_a, kbV, 0, logits, V, 0, nc, V);
            bf16_gemm(dx + (size_t)n0 * C, C, 0, dl_a, kbV, w_bwd, kbV, nc, C, V, 0);  // dx (nc, C) = dl W
            bf16_pack_b(dl_b, kbG, (n0 - g0) / 32, logits, V, 0, nc, V);
        }
        if (!dx) continue;
        // dW (V, C) (+)= (x^T (C, ng) @ dl (ng, V))^T
        bf16_pack_a(xt_a, kbG, 0, x + (size_t)g0 * C, C, 1, C, ng);
        bf16_gemm(dW, C, 1, xt_a, kbG, dl_b, kbG, C, V, ng, g0 > 0);
    }
    return sums;
}

LossSums lmhead_loss_forward_backward(float *dx, float *dW, const float *x, const float *W,
                                      const int32_t *targets, int N, int C, int V,
                                      float z_coef, float inv_count, float *scratch, int chunk,
                                      float *logits_out, float *tok_ce) {
    if (matmul_get_precision() == MATMUL_BF16 && bf16_amx_available() && chunk >= 32)
        return lmhead_bf16_amx(dx, dW, x, W, targets, N, C, V, z_coef, inv_count, scratch, chunk, logits_out, tok_ce);
    // fp32, and bf16 emulated (matmul_* round their operands)
    LossSums sums = {0.0, 0.0, 0};
    double row_ce[chunk], row_z[chunk];
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nc = N - n0 < chunk ? N - n0 : chunk;
        float *logits = scratch;                        // (nc, V)
        matmul_forward(logits, x + (size_t)n0 * C, W, nc, C, V);
        if (logits_out) memcpy(logits_out + (size_t)n0 * V, logits, sizeof(float) * (size_t)nc * V);
        loss_rows(logits, nc, V, targets + n0, dx != NULL, z_coef, inv_count, row_ce, row_z,
                  tok_ce ? tok_ce + n0 : NULL);
        add_rows(&sums, targets + n0, nc, row_ce, row_z);
        if (dx) {
            // dx chunk (nc, C) = dlogits @ W; dW (V, C) (+)= dlogits^T @ x chunk, chunks in order
            matmul_backward(dx + (size_t)n0 * C, dW, logits, x + (size_t)n0 * C, W, nc, C, V, 0, n0 > 0);
        }
    }
    return sums;
}
