// sizes.h: the fixed sizes of the CUDA kernels' scratch, shared by the kernels (ops.cuh),
// the model's allocator (model.cu) and its memory plan (cuda_mem_plan, plain C).
#ifndef OLMO_CUDA_SIZES_H
#define OLMO_CUDA_SIZES_H

#define CUDA_NORM_PARTS 64                  // row chunks of a norm weight gradient
#define CUDA_LM_CHUNK_MAX 1024              // tokens per LM-head chunk
#define CUDA_WORKSPACE_BYTES (32u << 20)    // cuBLASLt workspace

#endif
