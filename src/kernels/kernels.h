// kernels.h: the CPU kernels (src/kernels/cpu, OpenMP + OpenBLAS): every op the model
// needs, as a *_forward/*_backward pair over flat fp32 arrays with shapes in the comments.
// The model graph does not call them directly: it calls the op table of kernels/ops.h,
// whose CPU entries (cpu/ops_cpu.c) are these and whose CUDA entries (cuda/ops_cuda.cu)
// are the same ops on the GPU, each tested against these (tests/test_backend_ops.c).
// Determinism: no kernel's result depends on the thread count: every reduction is split
// into fixed-size chunks whose partials are summed in index order.
#ifndef OLMO_KERNELS_H
#define OLMO_KERNELS_H

#include <stddef.h>
#include <stdint.h>

// ---- precision: an argument of the matmul and LM-head kernels --------------------------
// The one precision type of olmo.c (train.precision, the Model's and the CPU op table's
// precision, the kernels' argument). PRECISION_FP32: fp32 operands. PRECISION_BF16: both operands of every matmul (linear layers and
// the LM head, forward and backward) are rounded to bf16 (round to nearest even), products
// are accumulated in fp32 and the output stays fp32 -- autocast semantics with fp32
// outputs. Everything else (norms, RoPE, attention, softmax/loss, optimizer, master
// weights) stays fp32. On CPUs with AMX-BF16 the bf16 matmuls run on AMX tiles, on CPUs
// with AVX512_BF16 but no AMX on VDPBF16PS (bf16_amx.c); elsewhere they are emulated
// (operands rounded, fp32 sgemm): same rounding, different summation order per engine, so
// bitwise results are per engine.
typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } Precision;
// Probe the bf16 engine once, outside parallel regions (AMX asks the kernel for its tiles).
void matmul_bf16_init(void);
// "amx", "avx512bf16" or "emulated": the engine of the bf16 matmuls (bf16.h).
const char *matmul_bf16_engine(void);
// 1 when this CPU has the instructions of engine `name` (selectable by OLMO_BF16_ENGINE).
int matmul_bf16_engine_on_cpu(const char *name);

// Where bf16 matmuls pack or round their operands: grow-only buffers (no per-step allocation
// once warm), owned by the caller -- the CPU ops backend keeps one (ops_cpu.c), so two
// models in one process never share scratch. Used outside parallel regions only. The
// kernels below take one with PRECISION_BF16; with PRECISION_FP32 it may be NULL.
typedef struct Bf16Work Bf16Work;
Bf16Work *bf16_work_create(void);
void bf16_work_free(Bf16Work *w);

// ---- matmul (nn.Linear without bias): out = inp @ W^T -------------------------------
// out (N, OC), inp (N, C), W (OC, C). In fp32 one row (N = 1, a decode step) is an sgemv.
void matmul_forward(float *out, const float *inp, const float *W, int N, int C, int OC, Precision p, Bf16Work *ws);
// dinp (N, C) = dout @ W (overwritten, or added when accumulate_dinp);
// dW (OC, C) = dout^T @ inp (overwritten, or added when accumulate_dW). NULL skips one.
void matmul_backward(float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int C, int OC, int accumulate_dinp, int accumulate_dW, Precision p, Bf16Work *ws);

// ---- RMSNorm: out = w * x / sqrt(mean(x^2) + eps), rows of length C ---------------------
// out (N, C) (may not alias inp), rstd (N) saved for backward. in_stride/out_stride: row
// strides in floats (C for contiguous rows; larger to norm a slice of wider rows).
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C,
                     int in_stride, int out_stride, float eps);
// dinp (N, C) overwritten (row stride din_stride); dw (C) overwritten.
void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                      const float *rstd, int N, int C, int dout_stride, int in_stride, int din_stride);

// ---- RoPE, rotate-half, in place over heads: x (B, T, H, D) with row stride ----------
// RoPE frequency scaling. ROPE_YARN is OLMo-core's YaRNRoPEScalingConfig (docs/long-context.md):
// with d(n) = D ln(original_context / (2 pi n)) / (2 ln theta), lo = max(floor(d(beta_fast)), 0),
// hi = min(ceil(d(beta_slow)), D/2 - 1), ramp_j = clamp((j - lo) / max(hi - lo, 1e-3), 0, 1):
// inv_freq_j = theta^(-2j/D) * (ramp_j / factor + 1 - ramp_j), and cos, sin are multiplied by
// attention_factor = 0.1 ln(factor) + 1.
typedef enum { ROPE_SCALING_NONE = 0, ROPE_SCALING_YARN = 1 } RopeScalingType;
typedef struct {
    int type;               // RopeScalingType
    double factor;          // context expansion (OLMo 3: 8)
    double beta_fast;       // rotations that start the ramp (high frequencies kept): 32
    double beta_slow;       // rotations that end it (low frequencies fully interpolated): 1
    int original_context;   // sequence length the model was trained at before (OLMo 3: 8192)
} RopeScaling;
// attention_factor of a scaling (1 for none): 0.1 ln(factor) + 1.
double rope_attention_factor(const RopeScaling *s);
// cos_t, sin_t (T, D/2): angle pos * inv_freq_j, inv_freq_j = theta^(-2j/D) (scaling NULL or
// none) or YaRN's blend above; computed in double, rounded to float once.
void rope_tables(float *cos_t, float *sin_t, int T, int D, double theta, const RopeScaling *scaling);
void rope_forward(float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D);
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int B, int T, int H, int D);

// ---- causal attention with optional sliding window and document mask, GQA -------------
// q (B, T, NH, D), k, v (B, T, NKV, D); out (B, T, NH, D); lse (B, NH, T) log-sum-exp of
// each query's scaled scores. doc_start (B, T) or NULL (no document mask): the first
// position of the document holding position t (non-decreasing along t, <= t; see
// model/docmask.h). Query t of row b sees keys max(0, t-window+1, doc_start[b*T+t]) .. t.
// Never forms a (T, T) matrix: each query block is computed from the keys it can see.
// p: the products' precision (PRECISION_BF16: bf16 operands, fp32 accumulation, softmax and
// lse in fp32; attention.c), for every form below.
void attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                       int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start, Precision p);
// dq (B, T, NH, D), dk, dv (B, T, NKV, D), all overwritten. Recomputes probabilities from lse.
void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                        const float *k, const float *v, const float *out, const float *lse,
                        int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start, Precision p);
// KV-cache form: T new queries per row at absolute positions p0..p0+T-1 against the keys
// of positions 0..p0+T-1, under the same rules (query p sees keys max(0, p-window+1,
// doc_start[b*(p0+T)+p]) .. p). q, out (B, T, NH, D); k, v (B, p0+T, NKV, D); lse (B, NH, T);
// doc_start (B, p0+T) or NULL. attention_forward is the case p0 = 0, bitwise.
void attention_forward_kv(float *out, float *lse, const float *q, const float *k, const float *v,
                          int B, int T, int p0, int NH, int NKV, int D, int window, const int32_t *doc_start,
                          Precision p);
// Context-parallel form (one sequence, a query chunk of it): T queries at absolute
// positions p0..p0+T-1, rows ldq floats apart (q, out; a head group starts at its first
// head's column), against keys 0..p0+T-1, rows ldk apart, under the rules above; lse (NH, T);
// doc_start (p0+T) or NULL. Always sgemm blocks of QB queries cut at p0, so a chunk starting
// at a multiple of QB is computed in the blocks of the whole sequence.
void attention_forward_at(float *out, float *lse, const float *q, const float *k, const float *v, int T, int p0,
                          int NH, int NKV, int D, int ldq, int ldk, int window, const int32_t *doc_start, Precision p);
// Its backward: dq (T rows, ldq) overwritten; dk, dv (keys 0..p0+T-1, ldk) ADDED to, so the
// chunks of a rank (and the ranks of a group, by the caller) sum into one key gradient.
void attention_backward_at(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                           const float *v, const float *lse, int T, int p0, int NH, int NKV, int D, int ldq, int ldk,
                           int window, const int32_t *doc_start, Precision p);

// ---- SwiGLU: out = silu(gate) * up; gu (N, 2H) holds [gate | up] per row -------------
void swiglu_forward(float *out, const float *gu, int N, int H);
void swiglu_backward(float *dgu, const float *dout, const float *gu, int N, int H);

// ---- embedding ---------------------------------------------------------------------------
// out (N, C) = E[tokens]; E (V, C)
void embedding_forward(float *out, const int32_t *tokens, const float *E, int N, int C);
// dE (V, C): rows of the tokens get dout added, in token order (caller zeroes dE first).
void embedding_backward(float *dE, const float *dout, const int32_t *tokens, int N, int C);

// ---- residual: out = a + b ------------------------------------------------------------------
// out may alias a or b (elementwise).
void residual_forward(float *out, const float *a, const float *b, size_t n);

// ---- fused LM head + cross-entropy + z-loss, chunked over tokens ---------------------------
// x (N, C) final hidden states, W (V, C) LM head, targets (N) with -100 = masked.
// Processes `chunk` tokens at a time, so only (chunk, V) logits exist at once (scratch
// holds chunk*V floats). Sums over non-masked tokens: ce_sum = sum(lse - logit[t]),
// z_sum = sum(lse^2), n_valid. When dx != NULL also the backward of
// loss = (ce_sum + z_coef * z_sum) * inv_count: dx (N, C) overwritten, dW (V, C) overwritten.
// Optional outputs: logits_out (N, V) (tests), tok_ce (N) per-token CE (0 where masked).
typedef struct { double ce_sum, z_sum; long n_valid; } LossSums;
#define CPU_LM_CHUNK 512   // the CPU backend's chunk: (CPU_LM_CHUNK, V) logits at a time
LossSums lmhead_loss_forward_backward(float *dx, float *dW, const float *x, const float *W,
                                      const int32_t *targets, int N, int C, int V,
                                      float z_coef, float inv_count, float *scratch, int chunk,
                                      float *logits_out, float *tok_ce, Precision p, Bf16Work *ws);

// ---- optimizer helpers over flat ranges -------------------------------------------------------
// The chunk of the deterministic sum of squares, on every backend and in the ranks' shards
// (dist.h): partial sums of SUMSQ_CHUNK floats in double, added in chunk order.
#define SUMSQ_CHUNK 65536
// sum of squares in double, deterministic (fixed chunking)
double sumsq(const float *x, size_t n);
void scale_inplace(float *x, float s, size_t n);
void add_inplace(float *acc, const float *x, size_t n);   // acc += x
// AdamW (torch.optim.AdamW): p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), bc = 1 - beta^step. g already clipped.
void adamw_update(float *p, float *m, float *v, const float *g, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int step);
// adamw_update with the gradient clip folded in: g * clip in place of g when clip < 1, bit
// for bit scale_inplace(g, clip) then adamw_update, without the pass that writes g back
// (g keeps its values).
void adamw_update_clipped(float *p, float *m, float *v, const float *g, size_t n, float clip, float lr, float beta1,
                          float beta2, float eps, float wd, int step);

#endif
