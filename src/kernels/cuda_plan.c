// cuda_plan.c: the sizes of what the CUDA side allocates besides the graph's activations,
// in plain C so that `olmo info` and the memory plan (cuda_mem_plan) work in builds without
// CUDA: the model state of kernels/cuda/model.cu (cuda_state_sizes, which model.cu
// allocates from) and the op scratch of kernels/cuda/ops_cuda.cu (ops_cuda_scratch_bytes,
// which its reserve allocates from). Every buffer is one cudaMalloc of these bytes.
#include <string.h>

#include "kernels/cuda/cuda_backend.h"

void cuda_state_sizes(const ParamTable *t, int bf16, size_t opt_lo, size_t opt_hi, CudaStateSizes *s) {
    memset(s, 0, sizeof *s);
    // bf16 computes from the bf16 copy, so the fp32 master is needed only where this device
    // runs AdamW; fp32 computes from the master itself: all of it.
    const int shard_master = bf16 && opt_hi > opt_lo && (opt_lo > 0 || opt_hi < t->total);
    s->mlo = shard_master ? opt_lo : 0;
    s->mhi = shard_master ? opt_hi : t->total;
    s->master = s->mhi - s->mlo;
    s->adam = opt_hi - opt_lo;
    s->grad = t->total;
    s->weights = bf16 ? t->total : 0;   // fp32 mode computes from the master
    if (shard_master)
        for (int i = 0; i < t->n; i++)
            if (t->p[i].kind == PARAM_NORM) s->norms += t->p[i].numel;
    s->partials = (t->total + 65535) / 65536;   // sumsq chunks (kernels/cpu/optim.c)
}

static size_t one(size_t n) { return n ? n : 1; }

size_t cuda_state_bytes(const CudaStateSizes *s) {
    return 4 * one(s->master) + 2 * 4 * one(s->adam) + 4 * one(s->grad) + (s->weights ? 2 * s->weights : 0) +
           (s->norms ? 4 * s->norms : 0) + 8 * one(s->partials) + CUDA_WORKSPACE_BYTES;
}

size_t ops_cuda_scratch_slot(int slot, const OpsLimits *l, int act_bytes) {
    const size_t N = one((size_t)l->rows), chunk = N < CUDA_LM_CHUNK_MAX ? N : CUDA_LM_CHUNK_MAX;
    switch (slot) {
    case OPS_CUDA_S_NORM: return 8 * (size_t)CUDA_NORM_PARTS * l->width;
    case OPS_CUDA_S_DI: return 4 * N * l->heads;
    case OPS_CUDA_S_LOGITS: return 4 * chunk * l->vocab;
    case OPS_CUDA_S_DLOGITS: return (size_t)act_bytes * chunk * l->vocab;
    case OPS_CUDA_S_ROWS: return (8 + 8 + 4) * N;
    case OPS_CUDA_S_GROUPS: return 4 * (3 * N + 1);
    case OPS_CUDA_S_PART: return 8 * one((l->flat + 65535) / 65536);
    case OPS_CUDA_S_IDX: return 4 * N;
    }
    return 0;
}

size_t ops_cuda_scratch_bytes(const OpsLimits *l, int act_bytes) {
    size_t b = 0;
    for (int s = 0; s < OPS_CUDA_SLOTS; s++) b += ops_cuda_scratch_slot(s, l, act_bytes);
    return b;
}
