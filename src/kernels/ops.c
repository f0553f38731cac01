// ops.c: what kernels/ops.h defines for every build: type names, ops_destroy, and the CUDA
// ops' scratch sizes (kernels/cuda/sizes.h; plain arithmetic, so the memory plan works
// without CUDA). ops_cuda_create is in kernels/cuda/ops_cuda.cu, or ops_nocuda.c.
#include "kernels/ops.h"

#include <stdio.h>

#include "kernels/cuda/sizes.h"

const char *dtype_name(DType t) { return t == DT_BF16 ? "bf16" : "fp32"; }

void ops_destroy(OpsBackend *be) {
    if (be) be->ops->destroy(be);
}

static size_t one(size_t n) { return n ? n : 1; }

size_t ops_cuda_scratch_slot(int slot, const OpsLimits *l, int act_bytes) {
    const size_t N = one((size_t)l->rows), chunk = N < CUDA_LM_CHUNK_MAX ? N : CUDA_LM_CHUNK_MAX;
    switch (slot) {
    case OPS_CUDA_S_NORM: return 8 * (size_t)CUDA_NORM_PARTS * l->width;
    case OPS_CUDA_S_DI: return 4 * N * l->heads;
    case OPS_CUDA_S_LOGITS: return 4 * chunk * l->vocab;
    case OPS_CUDA_S_DLOGITS: return (size_t)act_bytes * chunk * l->vocab;
    case OPS_CUDA_S_ROWS: return (8 + 8 + 4) * N;
    case OPS_CUDA_S_GROUPS: return 4 * (3 * N + 1);
    case OPS_CUDA_S_PART: return 8 * one((l->flat + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK);
    case OPS_CUDA_S_IDX: return 4 * N;
    case OPS_CUDA_S_DS: return act_bytes == 2 && l->seq > 0 ? cuda_attn_ds_bytes((int)(N / one((size_t)l->seq)), l->seq, l->heads, l->kv_heads) : 0;
    }
    return 0;
}

size_t ops_cuda_scratch_bytes(const OpsLimits *l, int act_bytes) {
    size_t b = 0;
    for (int s = 0; s < OPS_CUDA_SLOTS; s++) b += ops_cuda_scratch_slot(s, l, act_bytes);
    return b;
}
