// cuda_model.h: the CUDA backend's device calls (model.cu, over the CUDA ops of
// src/kernels/cuda), private to the backend: backend_cuda.c drives the training state
// through them, and the CUDA tests (tests/test_cuda*.c) reach them directly.
#ifndef OLMO_CUDA_MODEL_H
#define OLMO_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/kernels.h"
#include "model/config.h"
#include "model/params.h"
#include "train/cuda/cuda_backend.h"
#include "train/devstate.h"

typedef struct CudaModel CudaModel;

// Number of CUDA devices (0 when none or no driver); a reason in err when 0.
int cuda_device_count(char *err, size_t errlen);
// Use device (local_rank modulo the device count) in this process (one GPU per rank).
void cuda_select_device(int local_rank);
// Device name and memory for logs.
void cuda_device_describe(char *out, size_t outlen);
// Free bytes on the current device now (0 if unknown).
size_t cuda_device_free_bytes(void);

// Allocate everything for micro-batches up to (max_B, max_T). bf16: 1 = bf16 weights and
// activations (fp32 master, grads, Adam, residual stream), 0 = fp32 throughout. recompute:
// 1 = keep only each block's input (the residual stream) and, where they fit, each layer's
// attention output and lse, and recompute the block's forward before its backward, without
// attention when those are kept (one block's activations in memory instead of L; one extra
// forward of the block's other ops per step; graph.h GRAPH_RECOMPUTE_*). [opt_lo, opt_hi): the range of the flat table whose Adam m, v live on this
// device ([0, total) on one GPU; the rank's shard with NCCL; empty = the host keeps Adam).
// The fp32 master covers the same range in bf16 mode when it is a proper part of the
// table (sharded), else the whole table. NULL + err on failure (no device, out of memory,
// unsupported head_dim).
CudaModel *cuda_model_create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16,
                             int recompute, size_t opt_lo, size_t opt_hi, char *err, size_t errlen);
// The same with dist.shard on the device (cuda_model.cuh; shard 1 grads, 2 full: the
// range is the rank's shard, and cuda_nccl_init must follow before any step).
CudaModel *cuda_model_create_shard(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16,
                                   int recompute, int shard, size_t opt_lo, size_t opt_hi, char *err, size_t errlen);
// Context parallelism (dist.context_parallel: C; graph.h graph_init_cp): member `member`
// of its group of C ranks holds T / C rows of each max_T-token instance; K/V travel over
// the group's own NCCL communicator (id: its member 0's unique id; kernels/cuda/cp_nccl.cu).
// cuda_forward_backward then takes whole instances (T = max_T) and computes the member's
// rows; the weight gradient is the member's part of the sum.
typedef struct {
    int C, member, head_stride;
    const void *id;
} CudaCP;
CudaModel *cuda_model_create_cp(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16,
                                int recompute, size_t opt_lo, size_t opt_hi, const CudaCP *cp, char *err,
                                size_t errlen);
void cuda_model_destroy(CudaModel *cm);
// Wait for all queued device work.
void cuda_sync(CudaModel *cm);
// Device bytes allocated (for logs).
size_t cuda_model_bytes(const CudaModel *cm);

// The whole table's fp32 weights from the host: the master range, the compute copy and
// the norm weights are refreshed (the gradient buffer is the staging area).
void cuda_upload_params(CudaModel *cm, const float *host);
// Download [lo, hi) of buffer `which` (0 master weights, 1 Adam m, 2 Adam v) into host
// (hi - lo floats); the range must lie within the device's range for that buffer.
void cuda_download_range(CudaModel *cm, int which, size_t lo, size_t hi, float *host);
// Adam moments of the optimizer range [opt_lo, opt_hi) host <-> device (host arrays
// indexed from opt_lo).
void cuda_upload_adam(CudaModel *cm, const float *m, const float *v);
void cuda_download_adam(CudaModel *cm, float *m, float *v);

// One micro-batch, exactly model_forward_backward's contract: inputs, targets (B, T) on
// the host. want_grads: also the backward of (ce + z z_sum) * inv_count into the current
// gradient slot (see cuda_grad_*). logits_out (B*T, Vp) and tok_ce (B*T) are optional
// host outputs.
LossSums cuda_forward_backward(CudaModel *cm, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count, int want_grads, float *logits_out, float *tok_ce);

// The gradient of a step: micro-batches accumulate into one fp32 buffer in the order they
// run (the first backward after a reset writes it, later ones add). Deterministic (fixed
// order); it rounds differently from the CPU's pairwise GradAcc tree.
void cuda_grad_reset(CudaModel *cm);
void cuda_grad_push(CudaModel *cm);     // commit the micro-batch the last backward wrote
void cuda_grad_finish(CudaModel *cm);   // checks that one was pushed; grad is "the gradient"
void cuda_grad_download(CudaModel *cm, float *host);   // the whole local gradient
void cuda_grad_poison(CudaModel *cm);   // fault injection: gradient element 0 = NaN
// The optimizer range's device state (train/devstate.h): its master, m, v, gradient and
// (bf16) weight copy on this device, over the device's op table, which devstate_sumsq,
// devstate_scale and devstate_adamw run on, as for the CPU.
void cuda_devstate(CudaModel *cm, DevState *s);

// NCCL (built when nccl.h is found, OLMO_NCCL; docs/cuda.md "Multi-GPU"). One rank per GPU.
int cuda_nccl_built(void);
// Rank 0: write the NCCL unique id (<= cap bytes; 128 for NCCL 2) for MPI_Bcast; its size or -1.
int cuda_nccl_unique_id(void *id, size_t cap);
// Join the shard group's communicator (all ranks, or HSDP's group: rank and world are the
// group's); the model's optimizer range must be shard `rank` of bounds (world + 1 entries).
// 0, or -1 + err (NCCL refuses two ranks on one device).
int cuda_nccl_init(CudaModel *cm, const void *id, int rank, int world, const size_t *bounds, char *err, size_t errlen);
// HSDP (dist.shard_group): join the communicator of this shard's replicas (the ranks of the
// same index in every group; replica: this rank's group). The gradient reduce then sums the
// shard over them after the group's reduce. 0, or -1 + err.
int cuda_nccl_init_replicas(CudaModel *cm, const void *id, int replica, int replicas, char *err, size_t errlen);
// Sum the ranks' local gradients: shard r of the sum lands in rank r's gradient buffer.
void cuda_grad_reduce(CudaModel *cm);
// After AdamW on every shard: every rank receives the updated compute weights (and norm
// weights) of all shards.
void cuda_params_allgather(CudaModel *cm);

#ifdef __cplusplus
}
#endif
#endif
