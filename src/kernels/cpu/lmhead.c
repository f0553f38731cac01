// lmhead.c: the LM head, cross-entropy and z-loss fused and chunked over tokens, so the
// (N, V) logits never exist: only `chunk` rows of logits at a time.
// loss = (sum_t CE_t + z_coef * sum_t lse_t^2) * inv_count over non-masked tokens t;
// d loss / d logit_tv = inv_count * (softmax_tv * (1 + 2 z_coef lse_t) - [v == target_t]).
#include <math.h>
#include <string.h>

#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"

LossSums lmhead_loss_forward_backward(float *dx, float *dW, const float *x, const float *W,
                                      const int32_t *targets, int N, int C, int V,
                                      float z_coef, float inv_count, float *scratch, int chunk,
                                      float *logits_out, float *tok_ce) {
    LossSums sums = {0.0, 0.0, 0};
    double row_ce[chunk], row_z[chunk];
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nc = N - n0 < chunk ? N - n0 : chunk;
        float *logits = scratch;                        // (nc, V)
        matmul_forward(logits, x + (size_t)n0 * C, W, nc, C, V);
        if (logits_out) memcpy(logits_out + (size_t)n0 * V, logits, sizeof(float) * (size_t)nc * V);
#pragma omp parallel for schedule(static)
        for (int r = 0; r < nc; r++) {
            float *lg = logits + (size_t)r * V;
            int32_t t = targets[n0 + r];
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
                if (tok_ce) tok_ce[n0 + r] = 0.0f;
                if (dx) memset(lg, 0, sizeof(float) * V);
                continue;
            }
            row_ce[r] = lse - target_logit;
            row_z[r] = lse * lse;
            if (tok_ce) tok_ce[n0 + r] = (float)row_ce[r];
            if (dx) {
                // softmax * (1 + 2 z lse) - onehot, scaled by 1/count
                float a = (float)((1.0 + 2.0 * z_coef * lse) * inv_count / sum);
#pragma omp simd
                for (int v = 0; v < V; v++) lg[v] *= a;
                lg[t] -= inv_count;
            }
        }
        for (int r = 0; r < nc; r++) {
            if (targets[n0 + r] < 0) continue;
            sums.ce_sum += row_ce[r];
            sums.z_sum += row_z[r];
            sums.n_valid++;
        }
        if (dx) {
            // dx chunk (nc, C) = dlogits @ W; dW (V, C) (+)= dlogits^T @ x chunk, chunks in order
            matmul_backward(dx + (size_t)n0 * C, dW, logits, x + (size_t)n0 * C, W, nc, C, V, 0, n0 > 0);
        }
    }
    return sums;
}
