// step.h: one optimizer step over a global batch: micro-batch forward/backward into the
// deterministic accumulator, loss normalized by the global count of non-masked tokens,
// global-norm clipping, the skip-step guard, AdamW at the scheduled LR.
//
// Data parallel (world > 1, see dist.h): each rank runs its contiguous block of
// micro-batches into a local GradAcc tree, the partial sums are reduce-scattered in a
// fixed tree over ranks, the norm comes from fixed chunks, AdamW updates this rank's
// shard only (ZeRO-1: opt.m/opt.v hold the shard) and the parameters are all-gathered.
// With a power-of-two number of micro-batches per rank every step is bitwise identical
// to the single-process step.
#ifndef OLMO_STEP_H
#define OLMO_STEP_H

#include <stdint.h>

#include "model/model.h"
#include "train/devstate.h"
#include "train/optim.h"
#include "train/skipstep.h"

// dist.shard (docs/distributed.md): what a rank keeps of the state beyond its shard.
typedef enum {
    SHARD_OPTIM = 0,   // ZeRO-1: Adam m, v sharded; weights and gradient replicated
    SHARD_GRADS,       // ZeRO-2: also the reduced gradient; the full-size one's pages handed back after the reduction
    SHARD_FULL,        // ZeRO-3/FSDP: also the fp32 master; the weights gathered part by part (train/fsdp.h)
} ShardMode;
struct Fsdp;

typedef struct {
    Model *model;
    AdamW opt;          // whole table, or (world > 1 / train_core_shard) the shard only
    GradAcc acc;
    SkipStep skip;
    int use_skip;
    Schedule sched;
    double max_grad_norm;
    float z_loss;
    int loss_per_rank;  // train.loss_norm resolved to rank: OLMo-core's per-rank denominator (train_step_on)
    // Sharding: zero-initialized means one process owning everything (opt over the table).
    ShardMode shard_mode;   // set before train_core_shard (0: optim)
    ShardMode dev_shard;    // grads/full on a device backend (cuda: train/cuda/fsdp_cuda.cu): the device
                            // shards; the host keeps ZeRO-1's layout (shard_mode optim)
    int shard_group;        // dist.shard_group, set before train_core_shard (0: all ranks)
    int world, rank;        // all ranks (micro-batches split over world / cp groups) and this rank
    int cp, cp_head_stride; // dist.context_parallel (0 or 1: off) and its head stride
    int sworld, srank;      // the shard group's size (world unless HSDP) and this rank's shard
    size_t *bounds;     // sworld+1 shard boundaries (dist_shard_bounds)
    float *master;      // full: this rank's fp32 master weights (its shard); else NULL (Model.params)
    struct Fsdp *fsdp;  // full: the part-by-part weight gathers
    float *shard_grad;  // this rank's reduced gradient shard
    float *recv;        // reduce-scatter scratch (max(G, W/G) x shard floats), world > 1 only
    size_t recv_n;      // its floats
    size_t round;       // the reduce-scatter's round (floats of each shard; dist_reduce_scatter)
    double *chunk_sq;   // per-chunk squared norms
    double *loss_local, *loss_all;   // per-micro-batch (ce, z) sums: this rank's / all ranks'
    float *local, *shard;            // the step in progress: this rank's summed gradient, its shard of the sum
} TrainCore;

// Set up the sharded state for (world, rank): the shard group (tc->shard_group; collective),
// shard bounds, AdamW on the shard, scratch, and with tc->shard_mode full the master shard
// (filled by train_core_load_master) and the weight gathers. Call instead of adamw_init;
// train_core_free releases everything but the model.
void train_core_shard(TrainCore *tc, int world, int rank, int micro_per_rank, double beta1, double beta2, double eps,
                      double wd, int decay_embedding);
void train_core_free(TrainCore *tc);
// This rank's shard [lo, hi) of the flat buffer ([0, total) without sharding).
void train_core_range(const TrainCore *tc, size_t *lo, size_t *hi);
// dist.shard / dist.shard_group for a run of `world` ranks: the mode, or -1 with a message
// naming the key (unknown mode, a group not dividing the world). What a backend cannot run
// with it (cuda: grads/full without NCCL) its create refuses.
int train_shard_mode(const char *shard, int group, int world, char *err, size_t errlen);
// full: the master shard from Model.params (initialized or loaded there), whose pages are
// then handed back (params is only the gather target from now on). No-op otherwise.
void train_core_load_master(TrainCore *tc);
// full: the whole weights into rank 0's Model.params (evaluation, checkpoints, the final
// weights; collective). No-op otherwise.
void train_core_gather_params(TrainCore *tc);

typedef struct {
    double loss, ce, z_loss;   // per non-masked token; z_loss is the scaled term: loss = ce + z_loss
    double grad_norm;          // before clipping
    double lr;
    long n_valid;
    int skipped;
} StepResult;

// Where a step runs: what really differs between backends, the micro-batches into this
// rank's local gradient, the reduction to this rank's shard and the all-gather of the
// updated weights; and the DevState (devstate.h) the shard's norm, clip and AdamW run on,
// through the backend's op table. train_step_on (step.c) is the one step over it. Each
// backend keeps one StepDevice in its Backend (backend.h), its ops a const table chosen
// once: the CPU's (backend_cpu.c), the CUDA backend's for one GPU or NCCL ZeRO-1, and its
// host-MPI fallback that keeps Adam on the host (cuda/backend_cuda.c).
typedef struct StepDevice StepDevice;
typedef struct {
    void (*grad_begin)(StepDevice *d);
    // One micro-batch's forward and backward into the local gradient (written by the first
    // after grad_begin, accumulated by the others in order).
    LossSums (*micro_batch)(StepDevice *d, const int32_t *inputs, const int32_t *targets, int B, int T, float z_coef,
                            float inv_count);
    void (*grad_end)(StepDevice *d);
    void (*poison)(StepDevice *d);                      // FAULT INJECTION: local gradient element 0 = NaN
    void (*grad_download)(StepDevice *d, float *host);  // the whole local gradient (tests)
    // This rank's shard of the sum over ranks into d->state (its gradient, and where the
    // range's master, m and v are now: the host's m, v can be replaced between steps).
    void (*reduce)(StepDevice *d);
    void (*params_allgather)(StepDevice *d);            // every rank gets every updated shard
} StepDeviceOps;
struct StepDevice {
    const StepDeviceOps *ops;
    void *ctx;                                          // the backend's object
    TrainCore *tc;
    DevState state;                                     // the shard the optimizer updates
};

// One optimizer step on device d. inputs, targets: this rank's block of the global batch,
// (global_batch / world, T), targets < 0 masked; processed micro_batch instances at a
// time. step counts from 1. If grads_out != NULL and world == 1, the summed gradient
// (before clipping) is copied there. The loss is normalized by the global count of
// non-masked targets; the per-micro-batch (ce, z) sums are added in global micro-batch
// order; the norm is summed from fixed chunks in chunk order; so the result does not
// depend on the device's thread count, and with a power-of-two number of micro-batches
// per rank the CPU's steps are bitwise identical at any world size.
StepResult train_step_on(StepDevice *d, const int32_t *inputs, const int32_t *targets, int global_batch,
                         int micro_batch, int T, long step, float *grads_out);
// The host's collectives, for a device whose gradient is on the host (the CPU, and the CUDA
// host-MPI fallback): local, this rank's full summed gradient, reduce-scattered to its
// shard; s becomes the host's DevState of tc's range (the CPU op table of tc's Model over
// its parameters, tc's AdamW moments, that gradient); the updated parameters all-gathered.
void host_reduce(TrainCore *tc, float *local, DevState *s);
// [lo, hi) of the host's state `which` (0 weights: the master shard under full, else
// Model.params; 1 Adam m, 2 Adam v: this rank's shard, indexed from its start) into dst:
// backend_snapshot_range where the host holds the state (cpu, CUDA's host-MPI fallback).
void host_snapshot_range(const TrainCore *tc, int which, size_t lo, size_t hi, float *dst);
void host_allgather(TrainCore *tc);

// With tc->loss_per_rank (train.loss_norm: rank; the default for packed data) and W > 1, each
// rank's loss is divided by its own count and the gradient is the mean over ranks, as
// OLMo-core's train_module.py does (batch_num_tokens_for_loss per rank, FSDP's mean); the
// loss reported is then the mean of the ranks' losses. At W = 1 both are the same.
//
// OLMo 3's loss denominator (train_step_on): the non-masked targets (>= 0) of the batch, plus
// the positions of instances the repetition filter masked (LOADER_TARGET_FILTERED, counted as
// OLMo-core counts them), summed over ranks when the core is sharded, so it is the whole
// global batch's count everywhere.

// The step's result from the summed CE and z-loss over `count` tokens and the gradient norm
// (before clipping): losses, learning rate, and the skip decision (skip-step; a non-finite
// loss or norm is always skipped).
StepResult train_step_result(TrainCore *tc, double ce_sum, double z_sum, long count, double norm, long step);
// FAULT INJECTION (tests/test_faults.sh): the step whose gradient is made NaN
// (OLMO_FAULT_NAN_STEP), -1 when unset.
long train_fault_nan_step(void);
#endif
