// backend_cuda.c: the CUDA backend (train/backend.h's interface; cuda_backend.h): the model,
// its gradient and the optimizer state on NVIDIA GPUs (model.cu over src/kernels/cuda),
// one GPU per rank. Its StepDevice is one of two tables, chosen at create:
// - one GPU, or NCCL ZeRO-1 (world > 1 with NCCL): the micro-batches accumulate into the
//   device gradient in order; with NCCL ncclReduce per shard sums the ranks' gradients into
//   their owners (NCCL's reduction order: fixed for a given world size, topology and NCCL
//   version, not the same across world sizes), the norm comes from fixed SUMSQ_CHUNK chunks
//   all-gathered over MPI, each rank clips and runs AdamW on its shard (fp32 master, m, v
//   only for the shard: its DevState, cuda_devstate), then broadcasts its shard of the bf16
//   weights (and norm weights). Nothing crosses PCIe but the loss sums.
// - the host-MPI fallback (world > 1 without NCCL: not built, or OLMO_CUDA_NCCL=0): the
//   summed local gradient is downloaded and everything after it runs on the host exactly as
//   the CPU does (host_reduce, the host's DevState, host_allgather), then the parameters are
//   uploaded. Correct, slow (the full gradient down and the parameters up over PCIe every
//   step); it also serves several ranks on one GPU, which NCCL refuses.
// Compiled only in builds with CUDA (the Makefile's CUDA=1); docs/cuda.md.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "train/backend.h"
#include "train/cuda/cp_cuda.h"
#include "train/cuda/cuda_model.h"
#include "util/common.h"

typedef struct {
    Backend base;
    CudaModel *cm;
    int nccl, hostmpi;  // world > 1: NCCL (device ZeRO-1 shards), else the host-MPI fallback
    float *host_grad;   // host-MPI: this rank's summed gradient, downloaded (table.total)
    float *stage;       // NCCL checkpoints: this rank's part of one tensor (largest tensor)
    size_t lo, hi;      // the device's optimizer range
    int shard;          // dist.shard on the devices (fsdp_cuda.cu): 0 ZeRO-1, 1 grads, 2 full
    int recompute;      // activation recompute on
    char hsdp[128];     // describe: HSDP's groups, "" without
    char recompute_why[160];
} CudaBackend;

static CudaBackend *cb(Backend *be) { return (CudaBackend *)be; }
static CudaModel *dev_cm(StepDevice *d) { return ((CudaBackend *)d->ctx)->cm; }

// ---- StepDevice: one GPU, or NCCL ZeRO-1 ---------------------------------------------------
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
    if (((CudaBackend *)d->ctx)->nccl) cuda_grad_reduce(dev_cm(d));
}
static void cu_allgather(StepDevice *d) {
    const CudaBackend *c = d->ctx;
    if (c->nccl || c->shard) cuda_params_allgather(dev_cm(d));   // dist.shard, one GPU: the norm copy
}

static const StepDeviceOps cuda_step_ops = {
    .grad_begin = cu_grad_begin, .micro_batch = cu_micro_batch, .grad_end = cu_grad_end, .poison = cu_poison,
    .grad_download = cu_grad_download, .reduce = cu_reduce, .params_allgather = cu_allgather,
};

// ---- StepDevice: the host-MPI fallback (the device's gradient, then the host's sharded step)
static void hostmpi_reduce(StepDevice *d) {
    CudaBackend *c = d->ctx;
    cuda_grad_download(c->cm, c->host_grad);
    host_reduce(d->tc, c->host_grad, &d->state);
}
static void hostmpi_allgather(StepDevice *d) {
    host_allgather(d->tc);
    cuda_upload_params(dev_cm(d), d->tc->model->params);
}

static const StepDeviceOps cuda_hostmpi_step_ops = {
    .grad_begin = cu_grad_begin, .micro_batch = cu_micro_batch, .grad_end = cu_grad_end, .poison = cu_poison,
    .grad_download = cu_grad_download, .reduce = hostmpi_reduce, .params_allgather = hostmpi_allgather,
};

// ---- the backend ---------------------------------------------------------------------------
static int cuda_available(char *err, size_t errlen) {
    char why[256];
    if (cuda_device_count(why, sizeof why)) return 0;
    snprintf(err, errlen, "%s", why);
    return -1;
}

static void cuda_destroy(Backend *be) {
    if (!be) return;
    CudaBackend *c = cb(be);
    if (c->cm) cuda_model_destroy(c->cm);
    free(c->host_grad);
    free(c->stage);
    free(c);
}

// World > 1: one GPU per rank (the node-local rank, dist_local_rank: MPI's count of the
// ranks sharing this node, under any launcher, modulo the devices this process sees, so
// CUDA_VISIBLE_DEVICES is respected); NCCL shards the optimizer over the ranks, the
// host-MPI fallback keeps Adam on the host.
static void place_ranks(CudaBackend *c, const TrainCore *tc) {
    const ParamTable *t = &tc->model->table;
    c->lo = 0;
    c->hi = t->total;
    if (tc->world <= 1) return;
    cuda_select_device(dist_local_rank());
    const char *nc = getenv("OLMO_CUDA_NCCL");
    c->nccl = cuda_nccl_built() && !(nc && !strcmp(nc, "0"));
    c->hostmpi = !c->nccl;
    if (c->nccl) {   // this rank's shard of its shard group (HSDP: of its group)
        c->lo = tc->bounds[tc->srank];
        c->hi = tc->bounds[tc->srank + 1];
        size_t big = 1;
        for (int i = 0; i < t->n; i++)
            if (t->p[i].numel > big) big = t->p[i].numel;
        c->stage = xmalloc_aligned(sizeof(float) * big);
    } else {
        c->lo = c->hi = 0;   // Adam stays on the host
        c->host_grad = xmalloc_aligned(sizeof(float) * t->total);
    }
}

// Per-block activation recompute (docs/cuda.md): train.recompute on or off decides; auto
// turns it on when the plan without it does not fit the device's free memory (less 5% for
// the CUDA context, cuBLASLt and fragmentation): the 7B on one GPU.
static void choose_recompute(CudaBackend *c, const Model *m, int bf16, int max_B, int max_T, Recompute want) {
    if (want != RECOMPUTE_AUTO) {
        c->recompute = want == RECOMPUTE_ON;
        snprintf(c->recompute_why, sizeof c->recompute_why, "train.recompute=%s", c->recompute ? "on" : "off");
        return;
    }
    CudaMemPlan plan;
    cuda_mem_plan_shard(&m->cfg, &m->table, max_B, max_T, bf16, 0, c->shard, c->lo, c->hi, &plan);
    double fr = (double)cuda_device_free_bytes();
    c->recompute = fr > 0 && plan.total > 0.95 * fr;
    snprintf(c->recompute_why, sizeof c->recompute_why, "auto: %.1f GiB planned without it, %.1f GiB free",
             plan.total / 1073741824.0, fr / 1073741824.0);
}

// The communicators: the shard group's (all ranks, or HSDP's group of G consecutive ranks)
// and, with HSDP, the replicas' (the ranks of the same shard index, one per group). Each
// communicator's unique id comes from its first rank; all of them travel in one MPI
// all-gather (128 bytes per rank and communicator kind).
static int nccl_join(CudaBackend *c, const TrainCore *tc, char *err, size_t errlen) {
    const int W = tc->world, G = tc->sworld, hsdp = G < W;
    unsigned char mine[2][128], *all = xcalloc((size_t)W, sizeof mine);
    memset(mine, 0, sizeof mine);
    if (tc->srank == 0 && cuda_nccl_unique_id(mine[0], 128) < 0) die("NCCL: ncclGetUniqueId failed");
    if (hsdp && tc->rank < G && cuda_nccl_unique_id(mine[1], 128) < 0) die("NCCL: ncclGetUniqueId failed");
    dist_allgather_bytes(mine, (int)sizeof mine, all);
    const int group = tc->rank / G;
    int rc = cuda_nccl_init(c->cm, all + (size_t)group * G * sizeof mine, tc->srank, G, tc->bounds, err, errlen);
    if (rc == 0 && hsdp)
        rc = cuda_nccl_init_replicas(c->cm, all + (size_t)tc->srank * sizeof mine + 128, group, W / G, err, errlen);
    free(all);
    return rc;
}

static Backend *cuda_create(Precision prec, TrainCore *tc, int max_B, int max_T, Recompute recompute, char *err,
                            size_t errlen) {
    CudaBackend *c = xcalloc(1, sizeof *c);
    Backend *be = &c->base;
    be->iface = &backend_cuda;
    be->prec = prec;
    const Model *m = tc->model;
    const int bf16 = prec == PRECISION_BF16;
    place_ranks(c, tc);
    // dist.shard grads/full: NCCL's collectives on the devices; one GPU runs the same parts
    // with the whole table as its shard (no communicator: the local copies only).
    if (tc->dev_shard != SHARD_OPTIM && c->hostmpi) {
        snprintf(err, errlen, "dist.shard: %s on train.backend: cuda needs NCCL (%s): use dist.shard: optim",
                 tc->dev_shard == SHARD_FULL ? "full" : "grads",
                 cuda_nccl_built() ? "OLMO_CUDA_NCCL=0 chose the host-MPI fallback" : "this binary was built without it");
        cuda_destroy(be);
        return NULL;
    }
    c->shard = c->nccl || tc->world == 1 ? (int)tc->dev_shard : 0;
    choose_recompute(c, m, bf16, max_B, max_T, recompute);
    if (tc->cp > 1 && tc->sworld < tc->world)   // cp_cuda_model_create joins one communicator of all ranks
        snprintf(err, errlen, "dist.context_parallel %d with dist.shard_group %d on train.backend=cuda is not built: "
                              "use dist.shard_group: 0", tc->cp, tc->sworld);
    else if (tc->cp > 1 && !c->nccl)   // the group's K/V exchange is NCCL's (cp_cuda.h)
        snprintf(err, errlen, "dist.context_parallel %d with train.backend=cuda needs NCCL (not built, or "
                              "OLMO_CUDA_NCCL=0)", tc->cp);
    else if (tc->cp > 1 && c->shard)   // cp_cuda_model_create builds the ZeRO-1 device state only
        snprintf(err, errlen, "dist.context_parallel %d with dist.shard: %s on train.backend=cuda is not built: use "
                              "dist.shard: optim", tc->cp, c->shard == SHARD_FULL ? "full" : "grads");
    else if (tc->cp > 1)
        c->cm = cp_cuda_model_create(tc, max_B, max_T, bf16, c->recompute, c->lo, c->hi, err, errlen);
    else
        c->cm = cuda_model_create_shard(&m->cfg, &m->table, max_B, max_T, bf16, c->recompute, c->shard, c->lo, c->hi,
                                        err, errlen);
    // All ranks fail together (a rank out of memory must not leave the others waiting in
    // the NCCL set-up below).
    const int failed = c->cm == NULL;
    if (tc->world > 1 ? dist_any(failed) : failed) {
        if (!failed) snprintf(err, errlen, "train.backend=cuda: another rank could not create its CUDA model");
        cuda_destroy(be);
        return NULL;
    }
    if (c->nccl && nccl_join(c, tc, err, errlen) != 0) {
        cuda_destroy(be);
        return NULL;
    }
    if (tc->sworld < tc->world)
        snprintf(c->hsdp, sizeof c->hsdp, ", HSDP: %d groups of %d ranks (dist.shard_group), replicas %s", tc->world / tc->sworld,
                 tc->sworld, c->nccl ? "all-reduced over NCCL" : "reduced on the host");
    be->dev = (StepDevice){c->hostmpi ? &cuda_hostmpi_step_ops : &cuda_step_ops, c, tc, {0}};
    if (!c->hostmpi) cuda_devstate(c->cm, &be->dev.state);   // host-MPI: host_reduce sets it each step
    return be;
}

static void cuda_describe(const Backend *be, char *out, size_t outlen) {
    const CudaBackend *c = (const CudaBackend *)be;
    char dev[256];
    cuda_device_describe(dev, sizeof dev);
    snprintf(out, outlen, "backend: cuda, %s, %s%s%s | activation recompute %s (%s) | %.2f GiB on the device", dev,
             be->prec == PRECISION_BF16 ? "bf16 weights/activations, fp32 master/grads/Adam/residual stream"
                                        : "fp32 throughout",
             c->shard && !c->nccl ? (c->shard == 2 ? ", dist.shard full on one GPU (weights and gradient part by part)"
                                                   : ", dist.shard grads on one GPU (gradient part by part)")
             : c->shard == 2 ? ", NCCL dist.shard full (ZeRO-3: master, Adam, gradient sharded; weights gathered per part)"
             : c->shard == 1 ? ", NCCL dist.shard grads (ZeRO-2: master, Adam, gradient sharded)"
             : c->nccl ? ", NCCL ZeRO-1 (master + Adam sharded on the devices)"
                     : c->hostmpi ? ", host-MPI data parallel (Adam on the host)" : "",
             c->hsdp, c->recompute ? "on" : "off", c->recompute_why, cuda_model_bytes(c->cm) / 1073741824.0);
}

static int cuda_devices(void) { return cuda_device_count(NULL, 0); }

// Every device buffer is allocated once at create (model.cu), so what it holds is its peak.
static double cuda_device_bytes(const Backend *be) { return (double)cuda_model_bytes(((const CudaBackend *)be)->cm); }

static double cuda_device_peak(Precision prec, const char **source) {
    const int bf16 = prec == PRECISION_BF16;
    *source = bf16 ? "H100/H200 SXM dense bf16 datasheet; perf.peak_flops overrides"
                   : "H100/H200 SXM fp32 datasheet; perf.peak_flops overrides";
    return bf16 ? 989.5e12 : 67e12;
}

// [off, off + n) of buffer `which` (0 master, 1 m, 2 v) to rank 0's dst (NULL elsewhere).
// One device: a direct download. NCCL: every rank downloads its part of the range (its
// shard's intersection) and MPI gathers them to rank 0; collective.
static void fetch_range(CudaBackend *c, const TrainCore *tc, int which, size_t off, size_t n, float *dst) {
    if (!c->nccl) {
        cuda_download_range(c->cm, which, off, off + n, dst);
        return;
    }
    size_t a = c->lo > off ? c->lo : off, e = c->hi < off + n ? c->hi : off + n;
    // No overlap (a tensor wholly before or after this shard): an empty download at the
    // shard's start; [a, a) itself can lie past the shard, which cuda_download_range refuses.
    if (e <= a) a = e = c->lo;
    cuda_download_range(c->cm, which, a, e, c->stage);
    dist_gather_range(c->stage, dst, off, off + n, tc->bounds);
}

typedef struct {
    CudaBackend *c;
    const TrainCore *tc;
} FetchCtx;

static void ckpt_fetch(void *ctx, int which, size_t offset, size_t n, float *dst) {
    FetchCtx *f = ctx;
    fetch_range(f->c, f->tc, which, offset, n, dst);
}

static int cuda_streams_checkpoint(const Backend *be) { return !((const CudaBackend *)be)->hostmpi; }

static void cuda_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st) {
    FetchCtx ctx = {cb(be), tc};
    if (tc->rank == 0) {
        ckpt_commit_fetch(w, st, ckpt_fetch, &ctx);
        return;
    }
    // The other ranks take part in the same gathers in the writer's order: every
    // parameter, every exp_avg, every exp_avg_sq (ckpt_commit_fetch's contract).
    const ParamTable *t = &tc->model->table;
    for (int which = 0; which < 3; which++)
        for (int i = 0; i < t->n; i++) ckpt_fetch(&ctx, which, t->p[i].offset, t->p[i].numel, NULL);
}

// The checkpoint's snapshot: a device-to-host copy of this rank's range (the host-MPI
// fallback holds the state on the host); the file write then runs on the host.
static void cuda_snapshot_range(Backend *be, TrainCore *tc, int which, size_t lo, size_t hi, float *dst) {
    if (cb(be)->hostmpi) host_snapshot_range(tc, which, lo, hi, dst);
    else cuda_download_range(cb(be)->cm, which, lo, hi, dst);
}

static void cuda_sync_to_host(Backend *be, TrainCore *tc, int optim) {
    CudaBackend *c = cb(be);
    if (c->hostmpi) return;   // host params and Adam shards are the authoritative copies
    // Parameters tensor by tensor (NCCL: gathered to rank 0; MPI counts stay < 2^31).
    const ParamTable *t = &tc->model->table;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        fetch_range(c, tc, 0, p->offset, p->numel, tc->rank == 0 ? tc->model->params + p->offset : NULL);
    }
    if (optim) {   // tests: the device's Adam range into host arrays (allocated again if released)
        size_t n = c->hi - c->lo;
        if (!tc->opt.m) tc->opt.m = xmalloc_aligned(sizeof(float) * (n ? n : 1));
        if (!tc->opt.v) tc->opt.v = xmalloc_aligned(sizeof(float) * (n ? n : 1));
        cuda_download_adam(c->cm, tc->opt.m, tc->opt.v);
    }
}

static void cuda_sync_from_host(Backend *be, TrainCore *tc) {
    CudaBackend *c = cb(be);
    cuda_upload_params(c->cm, tc->model->params);
    if (c->hostmpi) return;   // Adam stays on the host
    cuda_upload_adam(c->cm, tc->opt.m, tc->opt.v);
    // The device holds Adam from now on: release the host copies (8 bytes per parameter
    // of the range; checkpoints stream from the device, backend_save_checkpoint).
    free(tc->opt.m);
    free(tc->opt.v);
    tc->opt.m = tc->opt.v = NULL;
}

static LossSums cuda_fb(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B, int T,
                        float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce) {
    (void)tc;
    CudaModel *cm = cb(be)->cm;
    if (grads) cuda_grad_reset(cm);
    LossSums s = cuda_forward_backward(cm, inputs, targets, B, T, z_coef, inv_count, grads != NULL, logits_out, tok_ce);
    if (grads) {
        cuda_grad_push(cm);
        cuda_grad_finish(cm);
        cuda_grad_download(cm, grads);
    }
    return s;
}

const BackendIface backend_cuda = {
    .name = "cuda",
    .default_precision = PRECISION_BF16,
    .on_device = 1,
    .available = cuda_available,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .describe = cuda_describe,
    .devices = cuda_devices,
    .device_peak = cuda_device_peak,
    .streams_checkpoint = cuda_streams_checkpoint,
    .save_checkpoint = cuda_save_checkpoint,
    .snapshot_range = cuda_snapshot_range,
    .sync_to_host = cuda_sync_to_host,
    .sync_from_host = cuda_sync_from_host,
    .forward_backward = cuda_fb,
    .device_bytes = cuda_device_bytes,
};
