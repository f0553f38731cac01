// kernels.h: the backend interface. Every op the model needs, as a *_forward/*_backward
// pair over flat fp32 arrays with shapes in the comments. The model and trainer call only
// these; src/kernels/cpu implements them with OpenMP + OpenBLAS (a CUDA backend would
// implement the same list). Determinism: no kernel's result depends on the thread count:
// every reduction is split into fixed-size chunks whose partials are summed in index order.
#ifndef OLMO_KERNELS_H
#define OLMO_KERNELS_H

#include <stddef.h>
#include <stdint.h>

// ---- matmul precision (process-wide) ---------------------------------------------------
// MATMUL_FP32: fp32 operands. MATMUL_BF16: both operands of every matmul (linear layers and
// the LM head, forward and backward) are rounded to bf16 (round to nearest even), products
// are accumulated in fp32 and the output stays fp32 -- autocast semantics with fp32
// outputs. Everything else (norms, RoPE, attention, softmax/loss, optimizer, master
// weights) stays fp32. On CPUs with AMX-BF16 the bf16 matmuls run on AMX tiles
// (bf16_amx.c); elsewhere they are emulated (operands rounded, fp32 sgemm): same
// rounding, different summation order, so bitwise results are per machine kind.
typedef enum { MATMUL_FP32 = 0, MATMUL_BF16 = 1 } MatmulPrecision;
void matmul_set_precision(MatmulPrecision p);
MatmulPrecision matmul_get_precision(void);
// "amx" when bf16 matmuls run on AMX tiles, else "emulated".
const char *matmul_bf16_engine(void);

// ---- matmul (nn.Linear without bias): out = inp @ W^T -------------------------------
// out (N, OC), inp (N, C), W (OC, C)
void matmul_forward(float *out, const float *inp, const float *W, int N, int C, int OC);
// dinp (N, C) = dout @ W (overwritten, or added when accumulate_dinp);
// dW (OC, C) = dout^T @ inp (overwritten, or added when accumulate_dW). NULL skips one.
void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int C, int OC, int accumulate_dinp, int accumulate_dW);

// ---- RMSNorm: out = w * x / sqrt(mean(x^2) + eps), rows of length C ---------------------
// out (N, C) (may not alias inp), rstd (N) saved for backward. in_stride/out_stride: row
// strides in floats (C for contiguous rows; larger to norm a slice of wider rows).
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C,
                     int in_stride, int out_stride, float eps);
// dinp (N, C) overwritten (row stride din_stride); dw (C) overwritten.
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                      const float *rstd, int N, int C, int dout_stride, int in_stride, int din_stride);

// ---- RoPE, rotate-half, in place over heads: x (B, T, H, D) with row stride ----------
// cos_t, sin_t (T, D/2): angle pos * theta^(-2j/D).
void rope_tables(float *cos_t, float *sin_t, int T, int D, double theta);
void rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D);
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T, int H, int D);

// ---- causal attention with optional sliding window, GQA ---------------------------------
// q (B, T, NH, D), k, v (B, T, NKV, D); out (B, T, NH, D); lse (B, NH, T) log-sum-exp of
// each query's scaled scores. Query i sees keys max(0, i-window+1) .. i. Never forms a
// (T, T) matrix: each query row is computed from its window alone.
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int D, int window);
// dq (B, T, NH, D), dk, dv (B, T, NKV, D), all overwritten. Recomputes probabilities from lse.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int D, int window);

// ---- SwiGLU: out = silu(gate) * up; gu (N, 2H) holds [gate | up] per row -------------
void swiglu_forward(float *out, const float *gu, int N, int H);
void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int H);

// ---- embedding ---------------------------------------------------------------------------
// out (N, C) = E[tokens]; E (V, C)
void embedding_forward(float *out, const int32_t *tokens, const float *E, int N, int C);
// dE (V, C): rows of the tokens get dout added, in token order (caller zeroes dE first).
void embedding_backward(float *dE, const float *dout, const int32_t *tokens, int N, int C);

// ---- residual: out = a + b ------------------------------------------------------------------
void residual_forward(float *out, const float *a, const float *b, size_t n);

// ---- fused LM head + cross-entropy + z-loss, chunked over tokens ---------------------------
// x (N, C) final hidden states, W (V, C) LM head, targets (N) with -100 = masked.
// Processes `chunk` tokens at a time, so only (chunk, V) logits exist at once (scratch
// holds chunk*V floats). Sums over non-masked tokens: ce_sum = sum(lse - logit[t]),
// z_sum = sum(lse^2), n_valid. When dx != NULL also the backward of
// loss = (ce_sum + z_coef * z_sum) * inv_count: dx (N, C) overwritten, dW (V, C) overwritten.
// Optional outputs: logits_out (N, V) (tests), tok_ce (N) per-token CE (0 where masked).
typedef struct { double ce_sum, z_sum; long n_valid; } LossSums;
LossSums lmhead_loss_forward_backward(float *dx, float *dW, const float *x, const float *W,
                                      const int32_t *targets, int N, int C, int V,
                                      float z_coef, float inv_count, float *scratch, int chunk,
                                      float *logits_out, float *tok_ce);

// ---- optimizer helpers over flat ranges -------------------------------------------------------
// sum of squares in double, deterministic (fixed chunking)
double sumsq(const float *x, size_t n);
void scale_inplace(float *x, float s, size_t n);
void add_inplace(float *acc, const float *x, size_t n);   // acc += x
// AdamW (torch.optim.AdamW): p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), bc = 1 - beta^step. g already clipped.
void adamw_update(float *p, float *m, float *v, const float *g, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int step);

#endif
