// cuda_plan.c: the sizes of the CUDA backend's training state (train/cuda/model.cu
// allocates exactly these), in plain C so that `olmo info` and the memory plan
// (cuda_mem_plan) work in builds without CUDA. Every buffer is one cudaMalloc.
#include <string.h>

#include "train/cuda/cuda_backend.h"

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
}

static size_t one(size_t n) { return n ? n : 1; }

size_t cuda_state_bytes(const CudaStateSizes *s) {
    return 4 * one(s->master) + 2 * 4 * one(s->adam) + 4 * one(s->grad) + (s->weights ? 2 * s->weights : 0) +
           (s->norms ? 4 * s->norms : 0) + CUDA_WORKSPACE_BYTES;
}
