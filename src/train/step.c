// step.c: see step.h.
#include "train/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "dist/dist.h"
#include "kernels/kernels.h"
#include "train/fsdp.h"
#include "util/common.h"

// FAULT INJECTION (tests/test_faults.sh, docs/robustness.md): OLMO_FAULT_NAN_STEP=N makes one
// gradient NaN at step N. Unset (always, outside tests): -1, no effect.
long train_fault_nan_step(void) {
    static long s = -2;
    if (s == -2) { const char *e = getenv("OLMO_FAULT_NAN_STEP"); s = e ? atol(e) : -1; }
    return s;
}

int train_shard_mode(const char *shard, int group, int world, char *err, size_t errlen) {
    const int mode = !strcmp(shard, "optim") ? SHARD_OPTIM : !strcmp(shard, "grads") ? SHARD_GRADS
                     : !strcmp(shard, "full") ? SHARD_FULL : -1;
    if (mode < 0) {
        snprintf(err, errlen, "dist.shard must be optim, grads or full, got '%s'", shard);
        return -1;
    }
    if (group < 0 || (group > 0 && world % group)) {
        snprintf(err, errlen, "dist.shard_group %d does not divide the world size %d (shard groups are that many "
                 "consecutive ranks; 0 = all ranks)", group, world);
        return -1;
    }
    return mode;
}

// grads, full: the reduce-scatter's round, in floats per piece (4 MiB: large enough that
// the rounds' latency is small next to their transfer, small next to any model's gradient).
// TEST HOOK (tests/test_shard.sh): OLMO_TEST_SHARD_ROUND=N floats, so that the tiny test
// models' shards take many rounds.
static size_t shard_round(void) {
    const char *e = getenv("OLMO_TEST_SHARD_ROUND");
    return e && atol(e) > 0 ? (size_t)atol(e) : (size_t)1 << 20;
}

void train_core_shard(TrainCore *tc, int world, int rank, int micro_per_rank, double beta1, double beta2, double eps,
                      double wd, int decay_embedding) {
    const size_t n = tc->model->table.total;
    tc->world = world;
    tc->rank = rank;
    tc->sworld = 1, tc->srank = 0;
    if (world > 1) {
        char err[256];
        if (dist_shard_group(tc->shard_group, err, sizeof err) != 0) die("%s", err);
        tc->sworld = dist_shard_world(), tc->srank = dist_shard_rank();
    }
    tc->bounds = xmalloc(sizeof(size_t) * ((size_t)tc->sworld + 1));
    dist_shard_bounds(n, tc->sworld, tc->bounds);
    size_t lo = tc->bounds[tc->srank], hi = tc->bounds[tc->srank + 1];
    adamw_init_range(&tc->opt, &tc->model->table, lo, hi, beta1, beta2, eps, wd, decay_embedding);
    if (world > 1) {
        tc->shard_grad = xmalloc_aligned(sizeof(float) * (hi - lo + 1));
        // Rank r receives its shard from every group member, then (HSDP) from every group:
        // all of it at once (optim), or (grads, full: no full-size scratch) in rounds of at
        // most shard_round() floats per piece (dist_reduce_scatter).
        const int pieces = tc->sworld > world / tc->sworld ? tc->sworld : world / tc->sworld;
        tc->round = tc->shard_mode == SHARD_OPTIM ? n : shard_round();   // optim: one round
        tc->recv_n = (hi - lo + 1 < tc->round ? hi - lo + 1 : tc->round) * (size_t)pieces;
        tc->recv = xmalloc_aligned(sizeof(float) * tc->recv_n);
    }
    if (tc->shard_mode == SHARD_FULL) {
        tc->master = xmalloc_aligned(sizeof(float) * (hi - lo + 1));
        memcpy(tc->master, tc->model->params + lo, sizeof(float) * (hi - lo));
        tc->fsdp = fsdp_create(tc);
    }
    tc->chunk_sq = xcalloc((n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK + 1, sizeof(double));
    // micro_per_rank: the most any rank has (uneven blocks are padded to it in the gather).
    tc->loss_local = xcalloc(2 * (size_t)micro_per_rank, sizeof(double));
    tc->loss_all = xcalloc(2 * (size_t)micro_per_rank * (size_t)world, sizeof(double));
}

void train_core_free(TrainCore *tc) {
    adamw_free(&tc->opt);
    gradacc_free(&tc->acc);
    fsdp_free(tc->fsdp);
    free(tc->bounds);
    free(tc->shard_grad);
    free(tc->recv);
    free(tc->master);
    free(tc->chunk_sq);
    free(tc->loss_local);
    free(tc->loss_all);
    tc->bounds = NULL;
    tc->fsdp = NULL;
    tc->shard_grad = tc->recv = tc->master = NULL;
    tc->chunk_sq = tc->loss_local = tc->loss_all = NULL;
}

void train_core_range(const TrainCore *tc, size_t *lo, size_t *hi) {
    if (tc->bounds) {
        *lo = tc->bounds[tc->srank];
        *hi = tc->bounds[tc->srank + 1];
    } else {
        *lo = 0;
        *hi = tc->model->table.total;
    }
}

void train_core_load_master(TrainCore *tc) {
    if (!tc->master) return;
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    memcpy(tc->master, tc->model->params + lo, sizeof(float) * (hi - lo));
    pages_release(tc->model->params, sizeof(float) * tc->model->table.total);
}

void train_core_gather_params(TrainCore *tc) {
    if (tc->master) dist_gather_shards(tc->master, tc->rank == 0 ? tc->model->params : NULL, tc->bounds);
}

StepResult train_step_result(TrainCore *tc, double ce_sum, double z_sum, long count, double norm, long step) {
    StepResult r = {0};
    r.n_valid = count;
    r.ce = count ? ce_sum / count : 0;
    r.z_loss = count ? tc->z_loss * z_sum / count : 0;
    r.loss = r.ce + r.z_loss;
    r.grad_norm = norm;
    r.lr = schedule_lr(&tc->sched, step);
    // A non-finite loss or norm never reaches the weights, skip_step on or off, except under
    // optim.skip_step_compat: olmo_core, which does what OLMo-core does (skipstep.h).
    // (Sharded: loss and norm are identical on every rank: every rank decides the same.)
    r.skipped = skipstep_decide(&tc->skip, tc->use_skip, r.ce, r.loss, r.grad_norm);
    return r;
}

static long count_local(const int32_t *targets, size_t n) {
    long count = 0;
    // A filtered instance's positions count, as OLMo-core counts them (LOADER_TARGET_FILTERED).
    for (size_t i = 0; i < n; i++) count += targets[i] >= 0 || targets[i] == LOADER_TARGET_FILTERED;
    return count;
}

StepResult train_step_on(StepDevice *d, const int32_t *inputs, const int32_t *targets, int global_batch,
                         int micro_batch, int T, long step, float *grads_out) {
    TrainCore *tc = d->tc;
    // inputs: the rank's block of instances; with context parallelism its group's (every
    // member the same whole instances: each takes its own chunks of them, graph.h).
    const int W = tc->bounds ? tc->world : 1, C = tc->cp > 1 ? tc->cp : 1, groups = W / C;
    const int M = global_batch / micro_batch;
    int first, k;   // this rank's group's block of the global batch's M micro-batches (loader_rank_block)
    loader_rank_block(M, groups, tc->bounds ? tc->rank / C : 0, &first, &k);
    const int local_batch = k * micro_batch, kmax = (M + groups - 1) / groups;
    // An exact integer sum over ranks: every rank scales its loss by the same 1/count. With
    // context parallelism the C members of a group hold (and counted) the same instances.
    const long mine = count_local(targets, (size_t)local_batch * T);
    const long count = tc->bounds ? dist_sum_long(mine) / C : mine;
    float inv_count = count > 0 ? 1.0f / (float)count : 0.0f;
    // OLMo-core's per-rank denominator (step.h): this rank's loss over its own count, the
    // ranks' gradients summed by the reduce, so each carries 1 / (groups * its count). A rank
    // with no target contributes nothing (OLMo-core would divide by zero).
    // A context-parallel group is one data-parallel rank here: its count is its instances'.
    const int per_rank = tc->loss_per_rank && groups > 1;
    const double rank_denom = (double)groups * (double)mine;
    if (per_rank) inv_count = mine > 0 ? (float)(1.0 / rank_denom) : 0.0f;
    double ce = 0, z = 0;
    d->ops->grad_begin(d);
    for (int j = 0; j < k; j++) {
        size_t off = (size_t)j * micro_batch * T;
        LossSums s = d->ops->micro_batch(d, inputs + off, targets + off, micro_batch, T, tc->z_loss, inv_count);
        if (tc->loss_local) {   // per rank: already this rank's share of the mean over ranks
            tc->loss_local[2 * j] = per_rank ? (mine > 0 ? s.ce_sum / rank_denom : 0.0) : s.ce_sum;
            tc->loss_local[2 * j + 1] = per_rank ? (mine > 0 ? s.z_sum / rank_denom : 0.0) : s.z_sum;
        }
        ce += s.ce_sum;
        z += s.z_sum;
    }
    d->ops->grad_end(d);
    if (step == train_fault_nan_step()) d->ops->poison(d);   // FAULT INJECTION
    if (grads_out && W == 1) d->ops->grad_download(d, grads_out);
    // The device's own collective first: a peer lost in an NCCL reduce is caught by its
    // bounded wait (nccl.cu), where an MPI collective would block for ever.
    d->ops->reduce(d);
    // As clip_grad_norm (torch clip_grad_norm_), from fixed chunks summed in chunk order.
    const size_t n = tc->model->table.total, nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double norm;
    if (tc->bounds) {
        devstate_sumsq(&d->state, tc->chunk_sq);
        norm = sqrt(dist_sumsq_gather(tc->chunk_sq, tc->bounds));
    } else {
        double *part = xcalloc(nch + 1, sizeof(double)), t = 0;
        devstate_sumsq(&d->state, part);
        for (size_t c = 0; c < nch; c++) t += part[c];
        free(part);
        norm = sqrt(t);
    }
    if (tc->bounds) {   // loss sums in global micro-batch order (the order of a single process)
        // Every rank sends kmax pairs (a shorter block's tail is padding, never summed).
        dist_allgather_doubles(tc->loss_local, 2 * kmax, tc->loss_all);
        ce = z = 0;
        for (int q = 0; q < W; q++) {
            int fq, kq;
            loader_rank_block(M, groups, q / C, &fq, &kq);   // rank q's group's block
            for (int j = 0; j < kq; j++) {
                ce += tc->loss_all[2 * ((size_t)q * kmax + j)];
                z += tc->loss_all[2 * ((size_t)q * kmax + j) + 1];
            }
        }
    }
    double coef = skipstep_clip_coef(&tc->skip, norm, tc->max_grad_norm);
    // per rank: ce and z are the means already (the sums above), so over a count of 1
    StepResult r = train_step_result(tc, ce, z, per_rank ? 1 : count, norm, step);
    r.n_valid = count;
    if (!r.skipped) {
        devstate_clip_adamw(&d->state, &tc->opt, r.lr, coef);   // the clip in the update (CUDA)
        d->ops->params_allgather(d);
    } else {
        if (!(coef >= 1.0)) devstate_scale(&d->state, (float)coef);
        if (skipstep_zero_factor(&tc->skip, &d->state, r.grad_norm)) d->ops->params_allgather(d);
    }
    return r;
}

// ---- the host's state and collectives (the CPU device, and the CUDA host-MPI fallback) ----
static void host_devstate(DevState *s, TrainCore *tc) {
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    float *master = tc->master ? tc->master : tc->model->params + lo;
    *s = (DevState){model_backend(tc->model), &tc->model->table, lo, hi, master, tc->opt.m, tc->opt.v, NULL, NULL, DT_F32};
}

void host_reduce(TrainCore *tc, float *local, DevState *s) {
    host_devstate(s, tc);   // the host's master, m and v as they are now
    tc->local = local;
    tc->shard = local + s->lo;
    if (tc->bounds && tc->world > 1) {
        dist_reduce_scatter(local, tc->shard_grad, tc->recv, tc->round, tc->bounds);
        tc->shard = tc->shard_grad;
        // grads, full: the full-size gradient and the reduction's scratch are dead until the
        // next step's micro-batches; their pages go back (the shard is a buffer of its own).
        if (tc->shard_mode != SHARD_OPTIM) {
            for (int i = 0; i < tc->acc.nbuf; i++) pages_release(tc->acc.buf[i], sizeof(float) * tc->acc.n);
            pages_release(tc->recv, sizeof(float) * tc->recv_n);
        }
    }
    s->grad = tc->shard;
}

void host_snapshot_range(const TrainCore *tc, int which, size_t lo, size_t hi, float *dst) {
    size_t slo, shi;
    train_core_range(tc, &slo, &shi);
    const float *src = which == 1 ? tc->opt.m : which == 2 ? tc->opt.v : tc->master;
    if (which == 0 && !src) src = tc->model->params, slo = 0;   // the weights are whole here
    else if (lo < slo || hi > shi) die("host_snapshot_range: [%zu, %zu) outside this rank's shard [%zu, %zu)", lo, hi, slo, shi);
    memcpy(dst, src + (lo - slo), sizeof(float) * (hi - lo));
}

void host_allgather(TrainCore *tc) {
    // full: nothing to gather now; each part's weights are gathered when the graph reads them.
    if (tc->bounds && tc->world > 1 && !tc->master) dist_allgather_shards(tc->model->params, tc->bounds);
}
