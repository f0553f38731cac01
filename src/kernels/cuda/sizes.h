// sizes.h: the fixed sizes of the CUDA kernels' scratch, shared by the kernels (ops.cuh),
// the backend's allocator (train/cuda/model.cu) and its memory plan (cuda_mem_plan, plain
// C): the op scratch of ops_cuda.cu is computed here (kernels/ops.c) without CUDA.
#ifndef OLMO_CUDA_SIZES_H
#define OLMO_CUDA_SIZES_H

#define CUDA_NORM_PARTS 64                  // row chunks of a norm weight gradient
#define CUDA_LM_CHUNK_MAX 1024              // tokens per LM-head chunk
#define CUDA_WORKSPACE_BYTES (32u << 20)    // cuBLASLt workspace

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The op scratch of the CUDA ops backend (ops_cuda.cu), reserved once for calls up to these
// sizes: a slot per need (norm weight-gradient partials, attention Di, LM-head logits and
// dlogits, loss rows, embedding groups, sum-of-squares partials, gathered row indices).
typedef struct OpsLimits {
    int rows;      // N = B * T
    int width;     // widest normed row (max(d_model, Q))
    int heads;     // n_heads
    int vocab;     // padded vocabulary
    size_t flat;   // longest flat range of a sum of squares (the table)
} OpsLimits;
enum { OPS_CUDA_S_NORM, OPS_CUDA_S_DI, OPS_CUDA_S_LOGITS, OPS_CUDA_S_DLOGITS, OPS_CUDA_S_ROWS, OPS_CUDA_S_GROUPS,
       OPS_CUDA_S_PART, OPS_CUDA_S_IDX, OPS_CUDA_SLOTS };
size_t ops_cuda_scratch_slot(int slot, const OpsLimits *l, int act_bytes);
size_t ops_cuda_scratch_bytes(const OpsLimits *l, int act_bytes);

#ifdef __cplusplus
}
#endif
#endif
