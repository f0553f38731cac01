// cuda_backend.h: the CUDA backend as the rest of the program sees it: the interface table
// (backend_cuda, filled in backend_cuda.c, listed by the registry in train/backend.c) and
// the memory plan of its training state, which `olmo info --backend cuda` prints in any
// build (cuda_plan.c is plain C). The model lives on the device in the parameter table's
// flat layout (model/params.h): one fp32 gradient buffer (micro-batches accumulate into it
// in place), a bf16 copy of all weights for the GEMMs (bf16 mode; the fp32 mode computes
// everything in fp32), fp32 master weights and Adam m, v for the range this device
// optimizes (all of it on one GPU, its ZeRO-1 shard under NCCL; dist.shard grads/full
// shard the gradient and, full, the weights too: fsdp_cuda.cu), an fp32 residual stream
// and bf16 (or fp32) activations. The device calls themselves are private to the backend
// (cuda_model.h, implemented in model.cu, compiled only when nvcc is found: OLMO_CUDA).
#ifndef OLMO_CUDA_BACKEND_H
#define OLMO_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "model/config.h"
#include "model/params.h"

struct BackendIface;
extern const struct BackendIface backend_cuda;   // train/backend.h's interface

#include "kernels/cuda/sizes.h"   // sizes shared by model.cu and the memory plan below

// The model state's buffers (train/cuda/cuda_plan.c; model.cu allocates exactly these), in elements:
// master fp32 [mlo, mhi); Adam m and v (adam each); grad (whole table); weights (the bf16
// copy, bf16 mode); norms (fp32 norm weights, bf16 with a sharded master). The gradient
// norm's chunk sums use the op table's scratch. cuda_state_bytes adds the cuBLASLt workspace.
typedef struct {
    size_t mlo, mhi, master, adam, grad, weights, norms;
    size_t part;     // dist.shard grads/full: the largest model part (embedding, a block, the head), else 0
    size_t wshard;   // dist.shard full, bf16: the shard's bf16 compute copy (AdamW writes it, gathers read it)
    int wsize;       // bytes of a compute weight: 2 (bf16) or 4 (fp32; `weights` then counts fp32 part buffers)
} CudaStateSizes;
void cuda_state_sizes(const ParamTable *t, int bf16, size_t opt_lo, size_t opt_hi, CudaStateSizes *s);
// dist.shard on the device (shard 1 grads, 2 full; 0: cuda_state_sizes) with this rank's
// shard [lo, hi), what train/cuda/fsdp_cuda.cu allocates: the reduced gradient only for the
// shard plus one fp32 part gradient (each part's backward writes it, it is reduce-scattered
// into the shards as soon as the part is done); grads: the rest as ZeRO-1; full: master and
// Adam for the shard, two compute-type part buffers (the part computing and the next one's
// all-gather), the shard's bf16 copy (bf16), the norm weights replicated in fp32 (tiny,
// all-gathered after each step). The part sizes are the CPU's (train/fsdp.c: model order).
void cuda_state_sizes_shard(const ModelConfig *cfg, const ParamTable *t, int bf16, int shard, size_t lo, size_t hi,
                            CudaStateSizes *s);
// The largest part of the table (train/fsdp.c's parts) and part i's range (0 the embedding,
// 1..L the blocks, L+1 the final norm + head).
void cuda_part_range(const ModelConfig *cfg, const ParamTable *t, int i, size_t *lo, size_t *hi);
size_t cuda_state_bytes(const CudaStateSizes *s);

// What cuda_model_create allocates on the device, in bytes, by purpose: `olmo info
// --backend cuda` and a check of the allocator (cuda_model_create prints a note if the two
// ever differ). Plain C (src/train/backend.c), from the sizes the allocating code uses:
// available without CUDA.
typedef struct {
    double weights;      // bf16 compute copy of the whole table (bf16 mode; 0 in fp32 mode)
    double master;       // fp32 master weights: the whole table, or the shard (bf16 + NCCL)
    double grad;         // the one fp32 gradient buffer (whole table; dist.shard: the shard + one part)
    double adam;         // fp32 m + v of the optimizer range
    double norms;        // fp32 norm weights of the whole model (bf16 with a sharded master)
    double activations;  // the graph's buffers (graph_plan_bytes): saved activations, backward scratch, tables
    double scratch;      // op scratch (LM-head chunk, row statistics, norm partials, ...), cuBLASLt workspace
    double total;
} CudaMemPlan;
void cuda_mem_plan(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                   size_t opt_lo, size_t opt_hi, CudaMemPlan *plan);
// The same for dist.shard on the device (cuda_state_sizes_shard; shard 0: cuda_mem_plan).
void cuda_mem_plan_shard(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                         int shard, size_t lo, size_t hi, CudaMemPlan *plan);

#ifdef __cplusplus
}
#endif
#endif
