// ops.cuh: the CUDA ops, one family per file under the CPU kernels' names (embedding.cu,
// norm.cu, rope.cu, attention.cu, swiglu.cu, matmul.cu, lmhead.cu, optim.cu, convert.cu):
// host functions that launch the kernels on a stream, the buffers' types passed as DType
// (kernels/ops.h) and dispatched here to the float / bf16 instantiations. ops_cuda.cu's Ops
// table (what the model graph runs) and the device state's optimizer (train/cuda/model.cu)
// call these, so each launch is written once.
#pragma once
#include <cublasLt.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sizes.h"
extern "C" {
#include "kernels/ops.h"
}

#define NORM_PARTS CUDA_NORM_PARTS   // row chunks of a norm weight gradient (sizes.h)

// cublasLt has no status-string function of its own (cublasGetStatusString is libcublas's).
static inline const char *lt_status(cublasStatus_t st) {
    static char buf[32];
    snprintf(buf, sizeof buf, "status %d", (int)st);
    return buf;
}
#define LT_CHECK(x) OLMO_LIB_CHECK("cuBLASLt", cublasStatus_t, CUBLAS_STATUS_SUCCESS, lt_status, x)

static inline unsigned nblk(size_t n, int t = 256) { return (unsigned)((n + t - 1) / t); }

// Run `body` with TT the C++ type of DType dt (float or bf16).
#define DT_DISPATCH(dt, TT, ...)                           \
    do {                                                   \
        if ((dt) == DT_BF16) { typedef bf16 TT; __VA_ARGS__; } \
        else { typedef float TT; __VA_ARGS__; }            \
    } while (0)

// ---- ops_cuda.cu: the Ops table's stream, and its op scratch reserved for calls up to l
// (bytes held, or 0 when out of memory; ops.c's ops_cuda_scratch_bytes says the same).
struct OpsLimits;
cudaStream_t ops_cuda_stream(OpsBackend *be);
size_t ops_cuda_reserve(OpsBackend *be, const OpsLimits *l);

// ---- convert.cu ----------------------------------------------------------------------------
void cast_cuda(cudaStream_t st, void *dst, DType t, const float *src, size_t n);
void copy_cols_cuda(cudaStream_t st, void *dst, const void *src, DType t, int N, int width, int dstride, int dcol,
                    int sstride, int scol);
// dst (n, C) = rows idx[0..n) (device) of src.
void gather_rows_cuda(cudaStream_t st, void *dst, const void *src, DType t, const int32_t *idx, int n, int C);

// ---- embedding.cu --------------------------------------------------------------------------
void embedding_forward_cuda(cudaStream_t st, float *out, const int32_t *tokens, const void *E, DType et, int N, int C);
// The positions of tokens (N) grouped by token for the backward, into host (3M + 1 ints,
// M >= N: rows (M) | off (M + 1) | pos (M)): rows in ascending token order, each token's
// positions ascending. Returns U, the number of distinct tokens.
int embedding_group_tokens(const int32_t *tokens, int N, int M, int32_t *host);
// dE (V, C) += per distinct token the sum of its rows of dout (N, C) in position order;
// groups: the device copy of embedding_group_tokens' output for the same M.
void embedding_backward_cuda(cudaStream_t st, float *dE, const float *dout, const int32_t *groups, int M, int U, int C);

// ---- norm.cu -------------------------------------------------------------------------------
// kernels/ops.h's rmsnorm_forward; copy: bf16 or NULL.
void rmsnorm_forward_cuda(cudaStream_t st, void *out, DType out_t, bf16 *copy, float *rstd, const void *inp,
                          DType in_t, const float *w, const float *resid, int N, int C, int in_stride, int out_stride,
                          float eps);
// kernels/ops.h's rmsnorm_backward; part: NORM_PARTS * C doubles of scratch.
void rmsnorm_backward_cuda(cudaStream_t st, void *dinp, DType din_t, float *dw, int acc_dw, const void *dout,
                           DType dout_t, const void *inp, DType in_t, const float *w, const float *rstd, int N, int C,
                           int dout_stride, int in_stride, int din_stride, double *part);

// The weight gradient dw (=, or += with acc_dw) from NORM_PARTS partials (C each) summed in order.
void norm_dw_final_cuda(cudaStream_t st, float *dw, const double *part, int C, int acc_dw);
// Whether rmsnorm_bwd_parts_kernel's shared memory for rows of C (20 B a column:
// norm_rope.cuh) leaves two blocks an SM (110 KiB each); wider rows take the unfused kernels.
static inline bool norm_parts_fit(int C) { return (size_t)C * 20 + 256 <= 110 * 1024; }

// ---- qkv_split.cu --------------------------------------------------------------------------
// kernels/ops.h's qkv_split_forward / qkv_split_backward (part: NORM_PARTS * max(Q, KV)
// doubles of scratch); they need qkv_split_fwd_smem <= 48 KiB and norm_parts_fit(Q), KV
// (ops_cuda.cu runs the unfused ops otherwise).
// qkv_split_forward_cuda's shared memory (a q or k row as floats); the op needs it <= 48 KiB.
static inline size_t qkv_split_fwd_smem(int NH, int NKV, int D) { return 4 * (size_t)(NH > NKV ? NH : NKV) * D; }
void qkv_split_forward_cuda(cudaStream_t st, void *q, void *k, void *v, float *q_rstd, float *k_rstd, const void *qkv,
                            DType t, const float *q_norm, const float *k_norm, const float *cos_t, const float *sin_t,
                            int B, int T, int NH, int NKV, int D, float eps);
void qkv_split_backward_cuda(cudaStream_t st, void *dqkv, float *dq_norm, float *dk_norm, int acc_dw, const void *dq,
                             const void *dk, const void *dv, const void *qkv, DType t, const float *q_norm,
                             const float *k_norm, const float *q_rstd, const float *k_rstd, const float *cos_t,
                             const float *sin_t, int B, int T, int NH, int NKV, int D, double *part);

// ---- rope.cu -------------------------------------------------------------------------------
// x (B, T, H, D) rotated in place by cos/sin (T, D/2); sign -1: the backward.
void rope_cuda(cudaStream_t st, void *x, DType t, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
               float sign);

// ---- swiglu.cu -----------------------------------------------------------------------------
void swiglu_forward_cuda(cudaStream_t st, void *out, const void *gu, DType t, int N, int H);
void swiglu_backward_cuda(cudaStream_t st, void *dgu, const void *dout, const void *gu, DType t, int N, int H);

// ---- attention.cu (templates on T = float, bf16; see common.cuh) -----------------------------
void attention_forward_cuda_dt(cudaStream_t st, void *out, float *lse, const void *q, const void *k, const void *v,
                               DType t, int B, int T, int NH, int NKV, int D, int window, const int32_t *docs);
// Di: (B, NH, T) floats of scratch; ds: cuda_attn_ds_bytes(B, T, NH, NKV) bytes (sizes.h).
void attention_backward_cuda_dt(cudaStream_t st, void *dq, void *dk, void *dv, float *Di, void *ds, const void *dout,
                                const void *q, const void *k, const void *v, const void *out, const float *lse, DType t,
                                int B, int T, int NH, int NKV, int D, int window, const int32_t *docs);

// ---- attention_at.cu: context parallelism's chunk of queries at global positions (ops.h
// attention_forward_at / attention_backward_at); Di: (NH, T) floats of scratch.
void attention_forward_at_cuda_dt(cudaStream_t st, void *out, float *lse, const void *q, const void *k, const void *v,
                                  DType t, int T, int p0, int NH, int NKV, int D, int ldq, int ldk, int window,
                                  const int32_t *docs);
void attention_backward_at_cuda_dt(cudaStream_t st, void *dq, void *dk, void *dv, float *Di, const void *dout,
                                   const void *q, const void *k, const void *v, const float *lse, DType t, int T,
                                   int p0, int NH, int NKV, int D, int ldq, int ldk, int window, const int32_t *docs);

// ---- matmul.cu: cuBLASLt, fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32) ---------------------
struct CudaGemm {
    cublasLtHandle_t lt;
    void *workspace;   // CUDA_WORKSPACE_BYTES
    cudaStream_t st;
};
// Column-major C (m x n, ldc) = op(A) op(B) (+ beta C); A, B of in_t, C of out_t.
void gemm_cuda(const CudaGemm *g, bool ta, bool tb, int m, int n, int k, const void *A, int lda, const void *B,
               int ldb, void *C, int ldc, float beta, DType in_t, DType out_t);
// Row-major nn.Linear: out (N, OC) = inp (N, C) @ W^T, all of type t.
void matmul_forward_cuda(const CudaGemm *g, void *out, const void *inp, const void *W, DType t, int N, int C, int OC);
// dinp (N, C) of dinp_t (+)= dout @ W; dW (OC, C) fp32 (+)= dout^T @ inp. NULL skips one.
void matmul_backward_cuda(const CudaGemm *g, void *dinp, DType dinp_t, float *dW, const void *dout, const void *inp,
                          const void *W, DType t, int N, int C, int OC, int acc_dinp, int acc_dW);

// ---- lmhead.cu -----------------------------------------------------------------------------
// One block per row of a logits chunk (nrows, V) fp32: row_ce, row_z (double; row_z -1 marks
// a masked row), tok_ce (float, may be NULL); with want_grad dlogits (nrows, V) of type t =
// inv_count * (softmax * (1 + 2 z lse) - onehot), zeros on masked rows.
void lmhead_rows_cuda(cudaStream_t st, void *dlogits, DType t, const float *logits, const int32_t *targets, int nrows,
                      int V, float z_coef, float inv_count, int want_grad, double *row_ce, double *row_z,
                      float *tok_ce);

// ---- optim.cu ------------------------------------------------------------------------------
void scale_cuda(cudaStream_t st, float *x, float s, size_t n);
void add_cuda(cudaStream_t st, float *acc, const float *x, size_t n);
// partial[c] = sum of squares (double) of chunk c of SUMSQ_CHUNK floats, c < ceil(n / chunk).
void sumsq_chunks_cuda(cudaStream_t st, double *partial, const float *x, size_t n);
// adamw_update element for element (decay = 1 - lr wd, step_size = lr / bc1); wcopy: the
// updated p in type wt, or NULL.
void adamw_cuda(cudaStream_t st, float *p, float *m, float *v, const float *g, void *wcopy, DType wt, size_t n,
                float beta1, float beta2, float eps, float decay, float step_size, float bc2_sqrt);
// The same over many spans of the range in one launch (ops.h adamw_spans): span s takes the
// blocks [blk0, blk0 + ceil(n / 256)) of the nblocks, sorted by blk0; decay = 1 - lr wd per
// span on the device; the gradient times clip first when use_clip.
struct AdamWSpanDev {
    size_t at, n;
    unsigned long long blk0;
    float wd, pad;   // pad: 0, so that the host compares tables byte for byte
};
void adamw_spans_cuda(cudaStream_t st, float *p, float *m, float *v, const float *g, void *wcopy, DType wt,
                      const AdamWSpanDev *spans, int nspans, unsigned long long nblocks, float clip, int use_clip,
                      float lr, float beta1, float beta2, float eps, float step_size, float bc2_sqrt);
void poison_cuda(cudaStream_t st, float *x);   // x[0] = NaN (fault injection)

// The DType of a C++ element type (float or bf16).
template <typename X> constexpr DType dtype_of() { return sizeof(X) == 2 ? DT_BF16 : DT_F32; }

// ---- cp_nccl.cu: context parallelism's group collectives (dist/dist_cp.h's, on the device)
struct CpNccl;
// Join the group's communicator (id: from member 0, ncclGetUniqueId); max_bytes: the largest
// reduce-scatter's C partials (T * w elements). NULL + err on failure.
CpNccl *cp_nccl_create(const void *id, int member, int C, size_t max_bytes, char *err, size_t errlen);
void cp_nccl_destroy(CpNccl *c);
// dist_cp_allgather_rows / dist_cp_reduce_scatter_rows over device rows of type t.
void cp_nccl_allgather_rows(CpNccl *c, cudaStream_t st, const void *local, int ld, int w, int T, void *global, DType t);
void cp_nccl_reduce_scatter_rows(CpNccl *c, cudaStream_t st, const void *global, int T, int w, void *local, int ld,
                                 DType t);

// ---- nccl.cu: the collectives (one rank per GPU) -------------------------------------------
struct NcclComm;
// A piece of a device buffer in a grouped collective: count elements of type t at buf,
// reduced onto (or broadcast from) rank root.
struct NcclPiece {
    void *buf;
    size_t count;
    DType t;
    int root;
};
int nccl_built(void);
// Rank 0: the unique id (<= cap bytes; 128 for NCCL 2) to send over MPI; its size, or -1.
int nccl_unique_id(void *id, size_t cap);
// Join the communicator; NULL + err (NCCL refuses two ranks on one device).
NcclComm *nccl_comm_create(const void *id, int rank, int world, char *err, size_t errlen);
void nccl_comm_destroy(NcclComm *c);
// The pieces summed onto their roots (in place) / broadcast from them, as one NCCL group,
// then waited for: a peer that died or stalls for OLMO_NCCL_TIMEOUT seconds ends the job
// with a message naming `what` and this rank.
void nccl_reduce_pieces(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n, const char *what);
void nccl_broadcast_pieces(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n, const char *what);
// HSDP: count elements at buf summed over the communicator's ranks in place on every rank
// (ncclAllReduce), waited for with the same bound and messages.
void nccl_allreduce(NcclComm *c, cudaStream_t st, void *buf, size_t count, DType t, const char *what);
// dist.shard: the broadcasts queued on st and left in flight; nccl_stream_wait waits for
// everything queued on st with the same bound and messages as above.
void nccl_broadcast_pieces_async(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n);
void nccl_stream_wait(NcclComm *c, cudaStream_t st, const char *what);
