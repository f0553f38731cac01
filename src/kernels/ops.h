// ops.h: the op-level backend interface. A backend (the CPU: kernels/cpu/ops_cpu.c; CUDA:
// kernels/cuda/ops_cuda.cu) is an Ops table of memory functions and the ops of the OLMo 3
// block, head and optimizer, each forward with its backward, over buffers the backend
// allocated. tests/test_backend_ops.c runs every op of every built backend against the CPU
// fp32 op (the model of ggml's test-backend-ops in llama.cpp).
//
// Types. Every buffer argument is a device pointer of the backend (host pointers only where
// the name says `_host`). Float buffers are fp32 unless a DType argument says otherwise:
// the activations of a bf16 backend are bf16, the residual stream, norm weights, row
// statistics and gradients stay fp32. The CPU backend takes only DT_F32 (its bf16 mode
// rounds the matmul operands inside the matmul: OpsBackend.prec). A backend refuses a type
// combination it does not implement with an error naming the op (exit 1).
//
// Determinism: each op's result is a function of its inputs only (no float atomics, fixed
// reduction orders), so a backend is bitwise reproducible; two backends agree to the
// tolerances test_backend_ops states, not bitwise.
#ifndef OLMO_OPS_H
#define OLMO_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

typedef enum { DT_F32 = 0, DT_BF16 = 1 } DType;
static inline size_t dtype_size(DType t) { return t == DT_BF16 ? 2 : 4; }
const char *dtype_name(DType t);

typedef struct OpsBackend OpsBackend;

// A span of a flat optimizer range for adamw_spans: elements [at, at + n) of the range,
// one tensor's part, with that tensor's weight decay.
typedef struct {
    size_t at, n;
    float wd;
} AdamWSpan;

typedef struct {
    // ---- memory ------------------------------------------------------------------------
    void *(*alloc)(OpsBackend *be, size_t bytes);   // NULL when out of memory
    void (*free)(OpsBackend *be, void *p);
    void (*upload)(OpsBackend *be, void *dst, const void *src_host, size_t bytes);
    void (*download)(OpsBackend *be, void *dst_host, const void *src, size_t bytes);
    void (*zero)(OpsBackend *be, void *p, size_t bytes);
    void (*sync)(OpsBackend *be);   // wait for the queued work (a no-op on the CPU)
    void (*destroy)(OpsBackend *be);   // release the backend's own state and be itself

    // ---- layout ------------------------------------------------------------------------
    // dst (n) of type t = src (fp32), rounded to nearest even for bf16.
    void (*cast)(OpsBackend *be, void *dst, DType t, const float *src, size_t n);
    // dst[n, dcol + i] = src[n, scol + i] for i < width, n < N (row strides in elements).
    void (*copy_cols)(OpsBackend *be, void *dst, const void *src, DType t, int N, int width, int dstride, int dcol,
                      int sstride, int scol);

    // dst (n, C) = rows idx_host[0..n) of src (rows of C), type t (evaluation gathers the
    // positions that have a target before the LM head).
    void (*gather_rows)(OpsBackend *be, void *dst, const void *src, DType t, const int32_t *idx_host, int n, int C);

    // ---- the ops of the block and the head ---------------------------------------------
    // out (N, C) fp32 = E[tokens]; E (V, C) of type et; tokens (N) on the device.
    void (*embedding_forward)(OpsBackend *be, float *out, const int32_t *tokens, const void *E, DType et, int N,
                              int C);
    // dE (V, C) += the rows of dout (N, C) summed per token; tokens_host (N) on the host (the
    // CUDA op groups positions by token there). From dE = 0 both backends give each row
    // the sum of its positions in position order.
    void (*embedding_backward)(OpsBackend *be, float *dE, const float *dout, const int32_t *tokens_host, int N, int C);
    // out (N, OC) = inp (N, C) @ W^T (OC, C), all of type t.
    void (*matmul_forward)(OpsBackend *be, void *out, const void *inp, const void *W, DType t, int N, int C, int OC);
    // dinp (N, C) of type dinp_t = dout @ W (or += with acc_dinp); dW (OC, C) fp32 = dout^T
    // @ inp (or += with acc_dW). NULL skips either.
    void (*matmul_backward)(OpsBackend *be, void *dinp, DType dinp_t, float *dW, const void *dout, const void *inp,
                            const void *W, DType t, int N, int C, int OC, int acc_dinp, int acc_dW);
    // RMSNorm of rows of length C (row strides in_stride, out_stride): rstd (N) fp32;
    // out = resid + w * x * rstd (resid (N, out_stride) fp32 or NULL; with resid, out_t is
    // fp32); copy (bf16, NULL = none): a second, bf16 copy of out (the GEMM operand of a
    // fp32 row). QK-norm normalizes the whole q (or k) projection: C = NH * D.
    void (*rmsnorm_forward)(OpsBackend *be, void *out, DType out_t, void *copy, float *rstd, const void *inp,
                            DType in_t, const float *w, const float *resid, int N, int C, int in_stride,
                            int out_stride, float eps);
    // dinp (N, C) overwritten; dw (C) = (or += with acc_dw) sum over rows of dout * xhat.
    void (*rmsnorm_backward)(OpsBackend *be, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout,
                             DType dout_t, const void *inp, DType in_t, const float *w, const float *rstd, int N,
                             int C, int dout_stride, int in_stride, int din_stride);
    // RoPE rotate-half in place, x (B, T, H, D) of type t, tables cos, sin (T, D/2) fp32 on
    // the device (rope_tables: plain or YaRN); backward = the inverse rotation.
    void (*rope_forward)(OpsBackend *be, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T, int H,
                         int D);
    void (*rope_backward)(OpsBackend *be, void *dx, DType t, const float *cos_t, const float *sin_t, int B, int T,
                          int H, int D);
    // The qkv projection's QK-norm + RoPE + V split in one pass. From qkv (N, Q + 2 KV) of
    // type t, N = B T, Q = NH D, KV = NKV D: q (N, Q) = rope(rmsnorm(qkv[:, :Q], q_norm)), k
    // (N, KV) = rope(rmsnorm(qkv[:, Q:Q+KV], k_norm)), v (N, KV) = qkv[:, Q+KV:], q_rstd and
    // k_rstd (N); tables as rope_forward's. Bitwise rmsnorm_forward twice, copy_cols and
    // rope_forward twice. NULL (the CPU): the graph runs that chain instead.
    void (*qkv_split_forward)(OpsBackend *be, void *q, void *k, void *v, float *q_rstd, float *k_rstd,
                              const void *qkv, DType t, const float *q_norm, const float *k_norm, const float *cos_t,
                              const float *sin_t, int B, int T, int NH, int NKV, int D, float eps);
    // Its backward: dqkv (N, Q + 2 KV) overwritten from dq (N, Q), dk, dv (N, KV), the
    // gradients of the rotated q, k and of v; dq_norm (Q), dk_norm (KV) = (or += with
    // acc_dw) the norm weights' gradients. Bitwise rope_backward twice, rmsnorm_backward
    // twice and copy_cols. NULL (the CPU): the graph runs that chain instead.
    void (*qkv_split_backward)(OpsBackend *be, void *dqkv, float *dq_norm, float *dk_norm, int acc_dw,
                               const void *dq, const void *dk, const void *dv, const void *qkv, DType t,
                               const float *q_norm, const float *k_norm, const float *q_rstd, const float *k_rstd,
                               const float *cos_t, const float *sin_t, int B, int T, int NH, int NKV, int D);
    // attention_forward/backward of kernels.h on the backend: q (B, T, NH, D), k, v (B, T,
    // NKV, D), out (B, T, NH, D) of type t, lse (B, NH, T) fp32, doc_start (B, T) or NULL.
    void (*attention_forward)(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                              DType t, int B, int T, int NH, int NKV, int D, int window, const int32_t *doc_start);
    void (*attention_backward)(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                               const void *k, const void *v, const void *out, const float *lse, DType t, int B, int T,
                               int NH, int NKV, int D, int window, const int32_t *doc_start);
    // The KV-cache form (kernels.h attention_forward_kv): T new queries per row at positions
    // p0..p0+T-1 against keys k, v (B, p0+T, NKV, D); doc_start (B, p0+T) or NULL. NULL in
    // a backend without it (CUDA: generation runs on the CPU).
    void (*attention_forward_kv)(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                                 DType t, int B, int T, int p0, int NH, int NKV, int D, int window,
                                 const int32_t *doc_start);
    // Context parallelism (kernels.h attention_forward_at / attention_backward_at): a chunk
    // of queries at positions p0.. of one sequence against its all-gathered keys, with row
    // strides; the backward adds into dk, dv. NULL in a backend without it (CPU: kernels.h;
    // CUDA: the SIMT kernels of cuda/attention_at.cu).
    void (*attention_forward_at)(OpsBackend *be, void *out, float *lse, const void *q, const void *k, const void *v,
                                 DType t, int T, int p0, int NH, int NKV, int D, int ldq, int ldk, int window,
                                 const int32_t *doc_start);
    void (*attention_backward_at)(OpsBackend *be, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                  const void *k, const void *v, const float *lse, DType t, int T, int p0, int NH,
                                  int NKV, int D, int ldq, int ldk, int window, const int32_t *doc_start);
    // out (N, H) = silu(gate) * up, gu (N, 2H) = [gate | up]; backward dgu (N, 2H).
    void (*swiglu_forward)(OpsBackend *be, void *out, const void *gu, DType t, int N, int H);
    void (*swiglu_backward)(OpsBackend *be, void *dgu, const void *dout, const void *gu, DType t, int N, int H);
    // Fused LM head + cross-entropy + z-loss over x (N, C) and W (V, C) of type t; targets
    // (N) on the device, -100 = masked. Returns the sums of lmhead_loss_forward_backward; with
    // dx != NULL also the backward of (ce + z_coef z) * inv_count: dx (N, C) of type t
    // overwritten, dW (V, C) fp32 = (or += with acc_dW). logits_host (N, V) and tok_ce_host
    // (N) optional host outputs.
    LossSums (*lmhead_loss)(OpsBackend *be, void *dx, float *dW, int acc_dW, const void *x, const void *W, DType t,
                            const int32_t *targets, int N, int C, int V, float z_coef, float inv_count,
                            float *logits_host, float *tok_ce_host);

    // ---- the optimizer, over flat fp32 ranges ------------------------------------------
    // sum of squares per SUMSQ_CHUNK-float chunk in double (chunk c into part_host[c]), and their
    // sum in chunk order: sumsq()'s number on every backend.
    double (*sumsq)(OpsBackend *be, const float *x, size_t n, double *part_host);
    void (*scale)(OpsBackend *be, float *x, float s, size_t n);
    void (*add)(OpsBackend *be, float *acc, const float *x, size_t n);   // acc += x
    // adamw_update; wcopy (NULL = none): the updated p rounded to type wt.
    void (*adamw)(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n,
                  float lr, float beta1, float beta2, float eps, float wd, int step);
    // adamw over the spans of one flat range at once (CUDA: one launch for all the tensors),
    // each span's gradient read times clip when clip < 1: bit for bit scale(g, clip) then
    // adamw span by span, without the pass that writes g back (g keeps its unclipped
    // values). NULL: the caller does exactly that instead (devstate.c).
    void (*adamw_spans)(OpsBackend *be, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                        const AdamWSpan *spans, int nspans, float clip, float lr, float beta1, float beta2, float eps,
                        int step);
} Ops;

struct OpsBackend {
    const Ops *ops;
    const char *name;        // "cpu", "cuda"
    DType act;               // the activation type of the backend's model
    Precision prec;    // CPU: the matmul rounding (bf16 operands in PRECISION_BF16)
    void *impl;              // the backend's own state
};

// The backends of this binary. ops_cpu_create never fails; ops_cuda_create returns NULL
// with a reason in err when the binary has no CUDA backend or there is no device.
OpsBackend *ops_cpu_create(Precision prec);   // be->prec may be changed between calls
OpsBackend *ops_cuda_create(DType act, char *err, size_t errlen);
void ops_destroy(OpsBackend *be);

#endif
