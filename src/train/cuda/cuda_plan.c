// cuda_plan.c: the sizes of the CUDA backend's training state (train/cuda/model.cu
// allocates exactly these), in plain C so that `olmo info` and the memory plan
// (cuda_mem_plan) work in builds without CUDA. Every buffer is one cudaMalloc.
#include <string.h>

#include "kernels/ops.h"
#include "model/graph.h"
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
    s->wsize = bf16 ? 2 : 4;
    if (shard_master)
        for (int i = 0; i < t->n; i++)
            if (t->p[i].kind == PARAM_NORM) s->norms += t->p[i].numel;
}

void cuda_part_range(const ModelConfig *cfg, const ParamTable *t, int i, size_t *lo, size_t *hi) {
    ModelOffsets off;
    model_offsets(&off, t, cfg);
    // the parts of train/fsdp.c: [embed, block 0), each block, [final_norm, total)
    const int L = cfg->n_layers;
    *lo = i == 0 ? off.embed : i <= L ? off.layers[i - 1].wqkv : off.final_norm;
    *hi = i < L ? off.layers[i].wqkv : i == L ? off.final_norm : t->total;
}

void cuda_state_sizes_shard(const ModelConfig *cfg, const ParamTable *t, int bf16, int shard, size_t lo, size_t hi,
                            CudaStateSizes *s) {
    cuda_state_sizes(t, bf16, lo, hi, s);
    if (!shard) return;
    for (int i = 0; i <= cfg->n_layers + 1; i++) {
        size_t a, b;
        cuda_part_range(cfg, t, i, &a, &b);
        if (b - a > s->part) s->part = b - a;
    }
    s->grad = (hi - lo) + s->part;
    if (shard == 1) return;   // grads: weights (and, fp32, the master) whole as ZeRO-1
    s->mlo = lo, s->mhi = hi;
    s->master = s->adam = hi - lo;
    s->weights = 2 * s->part;
    s->wshard = bf16 ? hi - lo : 0;
    s->norms = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].kind == PARAM_NORM) s->norms += t->p[i].numel;
}

static size_t one(size_t n) { return n ? n : 1; }

size_t cuda_state_bytes(const CudaStateSizes *s) {
    return 4 * one(s->master) + 2 * 4 * one(s->adam) + 4 * one(s->grad) + (size_t)s->wsize * s->weights +
           2 * s->wshard + 4 * s->norms + CUDA_WORKSPACE_BYTES;
}

// From the code that allocates: the model state (cuda_state_sizes, model.cu allocates
// exactly those buffers), the graph's activations (graph_plan_bytes: graph_init's walk with
// a counter) and the op scratch (ops_cuda_scratch_bytes, ops_cuda_reserve's sizes).
static void plan_of(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                    const CudaStateSizes *s, CudaMemPlan *p) {
    memset(p, 0, sizeof *p);
#define ONE(n) ((double)((n) ? (n) : 1))
    p->master = 4 * ONE(s->master);
    p->adam = 2 * 4 * ONE(s->adam);
    p->grad = 4 * ONE(s->grad);
    p->weights = (double)s->wsize * s->weights + 2.0 * s->wshard;
    p->norms = 4.0 * s->norms;
#undef ONE
    p->activations = (double)graph_plan_bytes(cfg, max_B, max_T, bf16 ? DT_BF16 : DT_F32,
                                              recompute ? GRAPH_RECOMPUTE_KEEP_ATT : 0);   // model.cu's first choice
    const int N = max_B * max_T, Q = cfg->n_heads * cfg->head_dim;
    OpsLimits lim = {N, cfg->d_model > Q ? cfg->d_model : Q, cfg->n_heads, cfg->padded_vocab, t->total, max_T, cfg->n_kv_heads};
    p->scratch = (double)(cuda_state_bytes(s) - (size_t)(p->master + p->adam + p->grad + p->weights + p->norms)) +
                 (double)ops_cuda_scratch_bytes(&lim, bf16 ? 2 : 4);
    p->total = p->weights + p->master + p->grad + p->adam + p->norms + p->activations + p->scratch;
}

// From the code that allocates: the model state (cuda_state_sizes, model.cu allocates
// exactly those buffers), the graph's activations (graph_plan_bytes: graph_init's walk with
// a counter) and the op scratch (ops_cuda_scratch_bytes, ops_cuda_reserve's sizes).
void cuda_mem_plan(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                   size_t opt_lo, size_t opt_hi, CudaMemPlan *p) {
    CudaStateSizes s;
    cuda_state_sizes(t, bf16, opt_lo, opt_hi, &s);
    plan_of(cfg, t, max_B, max_T, bf16, recompute, &s, p);
}

void cuda_mem_plan_shard(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                         int shard, size_t lo, size_t hi, CudaMemPlan *p) {
    CudaStateSizes s;
    cuda_state_sizes_shard(cfg, t, bf16, shard, lo, hi, &s);
    plan_of(cfg, t, max_B, max_T, bf16, recompute, &s, p);
}
