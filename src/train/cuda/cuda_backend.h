// cuda_backend.h: the CUDA backend as the rest of the program sees it: the interface table
// (backend_cuda, filled in backend_cuda.c, listed by the registry in train/backend.c) and
// the memory plan of its training state, which `olmo info --backend cuda` prints in any
// build (cuda_plan.c is plain C). The model lives on the device in the parameter table's
// flat layout (model/params.h): one fp32 gradient buffer (micro-batches accumulate into it
// in place), a bf16 copy of all weights for the GEMMs (bf16 mode; the fp32 mode computes
// everything in fp32), fp32 master weights and Adam m, v for the range this device
// optimizes (all of it on one GPU, its ZeRO-1 shard under NCCL), an fp32 residual stream
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
    size_t part;   // dist.shard: full: the largest model part (embedding, a block, the head), else 0
} CudaStateSizes;
void cuda_state_sizes(const ParamTable *t, int bf16, size_t opt_lo, size_t opt_hi, CudaStateSizes *s);
// dist.shard: full (ZeRO-3, bf16; the layout the NCCL full-shard state is to allocate, issue
// 32 item 4): master, Adam and the reduced gradient only for the shard [lo, hi); two bf16
// part buffers (the part computing and the next one's all-gather) and two fp32 part
// gradients (the part's backward and the previous part's reduce-scatter); the norm weights
// travel with their parts. The part sizes are the CPU's (train/fsdp.c: model order).
void cuda_state_sizes_full(const ModelConfig *cfg, const ParamTable *t, size_t lo, size_t hi, CudaStateSizes *s);
size_t cuda_state_bytes(const CudaStateSizes *s);

// What cuda_model_create allocates on the device, in bytes, by purpose: `olmo info
// --backend cuda` and a check of the allocator (cuda_model_create prints a note if the two
// ever differ). Plain C (src/train/backend.c), from the sizes the allocating code uses:
// available without CUDA.
typedef struct {
    double weights;      // bf16 compute copy of the whole table (bf16 mode; 0 in fp32 mode)
    double master;       // fp32 master weights: the whole table, or the shard (bf16 + NCCL)
    double grad;         // the one fp32 gradient buffer (whole table)
    double adam;         // fp32 m + v of the optimizer range
    double norms;        // fp32 norm weights of the whole model (bf16 with a sharded master)
    double activations;  // the graph's buffers (graph_plan_bytes): saved activations, backward scratch, tables
    double scratch;      // op scratch (LM-head chunk, row statistics, norm partials, ...), cuBLASLt workspace
    double total;
} CudaMemPlan;
void cuda_mem_plan(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                   size_t opt_lo, size_t opt_hi, CudaMemPlan *plan);
// The same for dist.shard: full in bf16 (cuda_state_sizes_full) with this rank's shard [lo, hi).
void cuda_mem_plan_full(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int recompute, size_t lo,
                        size_t hi, CudaMemPlan *plan);

#ifdef __cplusplus
}
#endif
#endif
