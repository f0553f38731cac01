// backend.c: see backend.h. The CUDA backend's step is step.c's train_step_on over the
// device's StepDevice (below); its model is model/graph.c on the CUDA ops.
#include "train/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "kernels/kernels.h"
#include "model/graph.h"
#include "util/common.h"
#include "train/cuda/cuda_backend.h"   // declarations only; the device calls need OLMO_CUDA

struct Backend {
    BackendKind kind;
    Precision prec;
#ifdef OLMO_CUDA
    CudaModel *cm;
    // world > 1: NCCL (device ZeRO-1 shards) when built with it and not
    // disabled by OLMO_CUDA_NCCL=0, else the host-MPI fallback (Adam on the host).
    int nccl, hostmpi;
    float *host_grad;   // host-MPI: this rank's summed gradient, downloaded (table.total)
    float *stage;       // NCCL checkpoints: this rank's part of one tensor (largest tensor)
    size_t lo, hi;      // the device's optimizer range
    int recompute;      // activation recompute on
    char recompute_why[160];
#endif
};

// From the code that allocates: the model state (cuda_state_sizes, model.cu allocates
// exactly those buffers), the graph's activations (graph_plan_bytes: graph_init's walk with
// a counter) and the op scratch (ops_cuda_scratch_bytes, ops_cuda_reserve's sizes).
void cuda_mem_plan(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16, int recompute,
                   size_t opt_lo, size_t opt_hi, CudaMemPlan *p) {
    memset(p, 0, sizeof *p);
    CudaStateSizes s;
    cuda_state_sizes(t, bf16, opt_lo, opt_hi, &s);
#define ONE(n) ((double)((n) ? (n) : 1))
    p->master = 4 * ONE(s.master);
    p->adam = 2 * 4 * ONE(s.adam);
    p->grad = 4 * ONE(s.grad);
    p->weights = 2.0 * s.weights;
    p->norms = 4.0 * s.norms;
#undef ONE
    p->activations = (double)graph_plan_bytes(cfg, max_B, max_T, bf16 ? DT_BF16 : DT_F32, recompute);
    const int N = max_B * max_T, Q = cfg->n_heads * cfg->head_dim;
    OpsLimits lim = {N, cfg->d_model > Q ? cfg->d_model : Q, cfg->n_heads, cfg->padded_vocab, t->total};
    p->scratch = (double)(cuda_state_bytes(&s) - (size_t)(p->master + p->adam + p->grad + p->weights + p->norms)) +
                 (double)ops_cuda_scratch_bytes(&lim, bf16 ? 2 : 4);
    p->total = p->weights + p->master + p->grad + p->adam + p->norms + p->activations + p->scratch;
}

int backend_cuda_built(void) {
#ifdef OLMO_CUDA
    return 1;
#else
    return 0;
#endif
}

int backend_resolve(const char *backend, const char *precision, BackendKind *kind, Precision *prec, char *err,
                    size_t errlen) {
    if (!backend || !backend[0] || !strcmp(backend, "cpu")) *kind = BACKEND_CPU;
    else if (!strcmp(backend, "cuda")) *kind = BACKEND_CUDA;
    else {
        snprintf(err, errlen, "train.backend: unknown backend '%s' (cpu | cuda)", backend);
        return -1;
    }
    if (!precision || !precision[0]) *prec = *kind == BACKEND_CUDA ? PRECISION_BF16 : PRECISION_FP32;
    else if (!strcmp(precision, "fp32")) *prec = PRECISION_FP32;
    else if (!strcmp(precision, "bf16")) *prec = PRECISION_BF16;
    else {
        snprintf(err, errlen, "train.precision: unknown precision '%s' (fp32 | bf16)", precision);
        return -1;
    }
    if (*kind == BACKEND_CUDA) {
#ifndef OLMO_CUDA
        snprintf(err, errlen, "train.backend=cuda: this binary was built without CUDA (nvcc was not found at build "
                              "time; see docs/cuda.md)");
        return -1;
#else
        char why[256];
        if (!cuda_device_count(why, sizeof why)) {
            snprintf(err, errlen, "train.backend=cuda: %s", why);
            return -1;
        }
#endif
    }
    return 0;
}

Backend *backend_create(BackendKind kind, Precision prec, TrainCore *tc, int max_B, int max_T, char *err,
                        size_t errlen) {
    Backend *be = xcalloc(1, sizeof *be);
    be->kind = kind;
    be->prec = prec;
    if (kind == BACKEND_CPU) return be;
#ifdef OLMO_CUDA
    Model *m = tc->model;
    const size_t total = m->table.total;
    be->lo = 0;
    be->hi = total;
    if (tc->world > 1) {
        // One GPU per rank: the node-local rank (Open MPI's variable, else the world rank)
        // modulo the devices this process sees.
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        cuda_select_device(lr ? atoi(lr) : tc->rank);
        const char *nc = getenv("OLMO_CUDA_NCCL");
        be->nccl = cuda_nccl_built() && !(nc && !strcmp(nc, "0"));
        be->hostmpi = !be->nccl;
        if (be->nccl) {
            be->lo = tc->bounds[tc->rank];
            be->hi = tc->bounds[tc->rank + 1];
            size_t big = 1;
            for (int i = 0; i < m->table.n; i++)
                if (m->table.p[i].numel > big) big = m->table.p[i].numel;
            be->stage = xmalloc_aligned(sizeof(float) * big);
        } else {
            be->lo = be->hi = 0;   // Adam stays on the host
            be->host_grad = xmalloc_aligned(sizeof(float) * total);
        }
    }
    // Per-block activation recompute (docs/cuda.md): OLMO_CUDA_RECOMPUTE=1 or 0 decides;
    // unset, it is turned on when the plan without it does not fit the device's free
    // memory (less 5% for the CUDA context, cuBLASLt and fragmentation): the 7B on one GPU.
    const char *rc = getenv("OLMO_CUDA_RECOMPUTE");
    if (rc && *rc) {
        be->recompute = atoi(rc) > 0;
        snprintf(be->recompute_why, sizeof be->recompute_why, "OLMO_CUDA_RECOMPUTE=%s", rc);
    } else {
        CudaMemPlan plan;
        cuda_mem_plan(&m->cfg, &m->table, max_B, max_T, prec == PRECISION_BF16, 0, be->lo, be->hi, &plan);
        double fr = (double)cuda_device_free_bytes();
        be->recompute = fr > 0 && plan.total > 0.95 * fr;
        snprintf(be->recompute_why, sizeof be->recompute_why, "auto: %.1f GiB planned without it, %.1f GiB free",
                 plan.total / 1073741824.0, fr / 1073741824.0);
    }
    be->cm = cuda_model_create(&m->cfg, &m->table, max_B, max_T, prec == PRECISION_BF16, be->recompute, be->lo,
                               be->hi, err, errlen);
    // All ranks fail together (a rank out of memory must not leave the others waiting in
    // the NCCL set-up below).
    const int failed = be->cm == NULL;
    if (tc->world > 1 ? dist_any(failed) : failed) {
        if (!failed) snprintf(err, errlen, "train.backend=cuda: another rank could not create its CUDA model");
        backend_free(be);
        return NULL;
    }
    if (be->nccl) {
        // The NCCL unique id travels over MPI from rank 0.
        unsigned char id[128];
        memset(id, 0, sizeof id);
        if (tc->rank == 0 && cuda_nccl_unique_id(id, sizeof id) < 0) die("NCCL: ncclGetUniqueId failed");
        dist_bcast(id, sizeof id, 0);
        if (cuda_nccl_init(be->cm, id, tc->rank, tc->world, tc->bounds, err, errlen) != 0) {
            backend_free(be);
            return NULL;
        }
    }
    return be;
#else
    (void)tc; (void)max_B; (void)max_T;
    snprintf(err, errlen, "train.backend=cuda: this binary was built without CUDA");
    free(be);
    return NULL;
#endif
}

void backend_free(Backend *be) {
    if (!be) return;
#ifdef OLMO_CUDA
    if (be->cm) cuda_model_destroy(be->cm);
    free(be->host_grad);
    free(be->stage);
#endif
    free(be);
}

BackendKind backend_kind(const Backend *be) { return be ? be->kind : BACKEND_CPU; }

void backend_describe(const Backend *be, char *out, size_t outlen) {
    out[0] = 0;
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    char dev[256];
    cuda_device_describe(dev, sizeof dev);
    snprintf(out, outlen, "backend: cuda, %s, %s%s | activation recompute %s (%s) | %.2f GiB on the device", dev,
             be->prec == PRECISION_BF16 ? "bf16 weights/activations, fp32 master/grads/Adam/residual stream"
                                        : "fp32 throughout",
             be->nccl ? ", NCCL ZeRO-1 (master + Adam sharded on the devices)"
                      : be->hostmpi ? ", host-MPI data parallel (Adam on the host)" : "",
             be->recompute ? "on" : "off", be->recompute_why, cuda_model_bytes(be->cm) / 1073741824.0);
#else
    (void)outlen;
#endif
}

#ifdef OLMO_CUDA
// The CUDA backend's StepDevice (step.h): the micro-batches accumulate into the device
// gradient in order; one GPU updates in place; with NCCL (ZeRO-1 on the devices) ncclReduce
// per shard sums the ranks' gradients into their owners (NCCL's reduction order: fixed for
// a given world size, topology and NCCL version, not the same across world sizes), the norm
// comes from fixed SUMSQ_CHUNK chunks all-gathered over MPI, each rank clips and runs AdamW
// on its shard (fp32 master, m, v only for the shard: its DevState, cuda_devstate), then
// broadcasts its shard of the bf16 weights (and norm weights). Nothing crosses PCIe but the
// loss sums. Without NCCL (not built, or OLMO_CUDA_NCCL=0) the host-MPI fallback: the
// summed local gradient is downloaded and everything after it runs on the host exactly as
// the CPU does (host_reduce, the host's DevState, host_allgather), then the parameters are
// uploaded. Correct, slow (the full gradient
// down and the parameters up over PCIe every step); it also serves several ranks on one
// GPU, which NCCL refuses.
static CudaModel *dev_cm(StepDevice *d) { return ((Backend *)d->ctx)->cm; }
static void cu_grad_begin(StepDevice *d) { cuda_grad_reset(dev_cm(d)); }
static LossSums cu_micro_batch(StepDevice *d, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count) {
    LossSums s = cuda_forward_backward(dev_cm(d), inputs, targets, B, T, z_coef, inv_count, 1, NULL, NULL);
    cuda_grad_push(dev_cm(d));
    return s;
}
static void cu_grad_end(StepDevice *d) { cuda_grad_finish(dev_cm(d)); }
static void cu_poison(StepDevice *d) { cuda_grad_poison(dev_cm(d)); }
static void cu_grad_download(StepDevice *d, float *host) { cuda_grad_download(dev_cm(d), host); }
static void cu_reduce(StepDevice *d) {
    if (((Backend *)d->ctx)->nccl) cuda_grad_reduce(dev_cm(d));
}
static void cu_allgather(StepDevice *d) {
    if (((Backend *)d->ctx)->nccl) cuda_params_allgather(dev_cm(d));
}

// host-MPI: the device's gradient, then the host's sharded step
static void hm_reduce(StepDevice *d) {
    Backend *be = d->ctx;
    cuda_grad_download(be->cm, be->host_grad);
    host_reduce(d->tc, be->host_grad, &d->state);
}
static void hm_allgather(StepDevice *d) {
    host_allgather(d->tc);
    cuda_upload_params(dev_cm(d), d->tc->model->params);
}

static void cuda_step_device(StepDevice *d, Backend *be, TrainCore *tc) {
    memset(d, 0, sizeof *d);
    d->ctx = be;
    d->tc = tc;
    d->grad_begin = cu_grad_begin;
    d->micro_batch = cu_micro_batch;
    d->grad_end = cu_grad_end;
    d->poison = cu_poison;
    d->grad_download = cu_grad_download;
    d->reduce = be->hostmpi ? hm_reduce : cu_reduce;
    d->params_allgather = be->hostmpi ? hm_allgather : cu_allgather;
    if (be->hostmpi) host_devstate(&d->state, tc);
    else cuda_devstate(be->cm, &d->state);
}
#endif

StepResult backend_train_step(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets,
                              int global_batch, int micro_batch, int T, long step, float *grads_out) {
    if (!be || be->kind == BACKEND_CPU)
        return train_step(tc, inputs, targets, global_batch, micro_batch, T, step, grads_out);
#ifdef OLMO_CUDA
    StepDevice d;
    cuda_step_device(&d, be, tc);
    return train_step_on(&d, inputs, targets, global_batch, micro_batch, T, step, grads_out);
#else
    (void)tc; (void)inputs; (void)targets; (void)global_batch; (void)micro_batch; (void)T; (void)step; (void)grads_out;
    die("backend_train_step: built without CUDA");
#endif
}

#ifdef OLMO_CUDA
// [off, off + n) of buffer `which` (0 master, 1 m, 2 v) to rank 0's dst (NULL elsewhere).
// One device: a direct download. NCCL: every rank downloads its part of the range (its
// shard's intersection) and MPI gathers them to rank 0; collective.
static void fetch_range(Backend *be, const TrainCore *tc, int which, size_t off, size_t n, float *dst) {
    if (!be->nccl) {
        cuda_download_range(be->cm, which, off, off + n, dst);
        return;
    }
    size_t a = be->lo > off ? be->lo : off, e = be->hi < off + n ? be->hi : off + n;
    // No overlap (a tensor wholly before or after this shard): an empty download at the
    // shard's start; [a, a) itself can lie past the shard, which cuda_download_range refuses.
    if (e <= a) a = e = be->lo;
    cuda_download_range(be->cm, which, a, e, be->stage);
    dist_gather_range(be->stage, dst, off, off + n, tc->bounds);
}

typedef struct {
    Backend *be;
    const TrainCore *tc;
} FetchCtx;

static void ckpt_fetch(void *ctx, int which, size_t offset, size_t n, float *dst) {
    FetchCtx *f = ctx;
    fetch_range(f->be, f->tc, which, offset, n, dst);
}
#endif

int backend_streams_checkpoint(const Backend *be) {
#ifdef OLMO_CUDA
    return be && be->kind == BACKEND_CUDA && !be->hostmpi;
#else
    (void)be;
    return 0;
#endif
}

void backend_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st) {
#ifdef OLMO_CUDA
    FetchCtx ctx = {be, tc};
    if (tc->rank == 0) {
        ckpt_commit_fetch(w, st, ckpt_fetch, &ctx);
        return;
    }
    // The other ranks take part in the same gathers in the writer's order: every
    // parameter, every exp_avg, every exp_avg_sq (ckpt_commit_fetch's contract).
    const ParamTable *t = &tc->model->table;
    for (int which = 0; which < 3; which++)
        for (int i = 0; i < t->n; i++) ckpt_fetch(&ctx, which, t->p[i].offset, t->p[i].numel, NULL);
#else
    (void)be, (void)tc, (void)w, (void)st;
    die("backend_save_checkpoint: built without CUDA");
#endif
}

void backend_sync_to_host(Backend *be, TrainCore *tc, int optim) {
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    if (be->hostmpi) return;   // host params and Adam shards are the authoritative copies
    // Parameters tensor by tensor (NCCL: gathered to rank 0; MPI counts stay < 2^31).
    const ParamTable *t = &tc->model->table;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        fetch_range(be, tc, 0, p->offset, p->numel, tc->rank == 0 ? tc->model->params + p->offset : NULL);
    }
    if (optim) {   // tests: the device's Adam range into host arrays (allocated again if released)
        size_t n = be->hi - be->lo;
        if (!tc->opt.m) tc->opt.m = xmalloc_aligned(sizeof(float) * (n ? n : 1));
        if (!tc->opt.v) tc->opt.v = xmalloc_aligned(sizeof(float) * (n ? n : 1));
        cuda_download_adam(be->cm, tc->opt.m, tc->opt.v);
    }
#else
    (void)tc; (void)optim;
#endif
}

void backend_sync_from_host(Backend *be, TrainCore *tc) {
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    cuda_upload_params(be->cm, tc->model->params);
    if (be->hostmpi) return;   // Adam stays on the host
    cuda_upload_adam(be->cm, tc->opt.m, tc->opt.v);
    // The device holds Adam from now on: release the host copies (8 bytes per parameter
    // of the range; checkpoints stream from the device, backend_save_checkpoint).
    free(tc->opt.m);
    free(tc->opt.v);
    tc->opt.m = tc->opt.v = NULL;
#else
    (void)tc;
#endif
}

LossSums backend_forward_backward(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                  int T, float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce) {
    if (!be || be->kind == BACKEND_CPU)
        return model_forward_backward(tc->model, inputs, targets, B, T, z_coef, inv_count, grads, logits_out, tok_ce);
#ifdef OLMO_CUDA
    if (grads) cuda_grad_reset(be->cm);
    LossSums s = cuda_forward_backward(be->cm, inputs, targets, B, T, z_coef, inv_count, grads != NULL, logits_out, tok_ce);
    if (grads) {
        cuda_grad_push(be->cm);
        cuda_grad_finish(be->cm);
        cuda_grad_download(be->cm, grads);
    }
    return s;
#else
    die("backend_forward_backward: built without CUDA");
#endif
}
