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
#include "train/optim.h"

typedef struct {
    Model *model;
    AdamW opt;          // whole table, or (world > 1 / train_core_shard) the shard only
    GradAcc acc;
    SkipStep skip;
    int use_skip;
    Schedule sched;
    double max_grad_norm;
    float z_loss;
    // Sharding: zero-initialized means one process owning everything (opt over the table).
    int world, rank;
    size_t *bounds;     // world+1 shard boundaries (dist_shard_bounds)
    float *shard_grad;  // this rank's reduced gradient shard
    float *recv;        // reduce-scatter scratch (world x shard floats), world > 1 only
    double *chunk_sq;   // per-chunk squared norms
    double *loss_local, *loss_all;   // per-micro-batch (ce, z) sums: this rank's / all ranks'
} TrainCore;

// Set up the sharded state for (world, rank): shard bounds, AdamW on the shard, scratch.
// Call instead of adamw_init; train_core_free releases everything but the model.
void train_core_shard(TrainCore *tc, int world, int rank, int micro_per_rank, double beta1, double beta2, double eps,
                      double wd, int decay_embedding);
void train_core_free(TrainCore *tc);
// This rank's shard [lo, hi) of the flat buffer ([0, total) without sharding).
void train_core_range(const TrainCore *tc, size_t *lo, size_t *hi);

typedef struct {
    double loss, ce, z_loss;   // per non-masked token; z_loss is the scaled term: loss = ce + z_loss
    double grad_norm;          // before clipping
    double lr;
    long n_valid;
    int skipped;
} StepResult;

// inputs, targets: this rank's block of the global batch, (global_batch / world, T),
// targets < 0 masked; processed micro_batch instances at a time. step counts from 1.
// If grads_out != NULL and world == 1, the summed gradient (before clipping) is copied there.
// OLMo 3's loss denominator: the non-masked targets (>= 0) among this rank's n, summed
// over ranks when the core is sharded, so it is the whole global batch's count everywhere.
long train_count_targets(const TrainCore *tc, const int32_t *targets, size_t n);
// The part of a sharded step after this rank's gradient tree, shared by the CPU and CUDA
// backends: loss sums over ranks in global micro-batch order (tc->loss_local holds this
// rank's k (ce, z) pairs), the fixed-order reduce-scatter of `local` (this rank's summed
// gradient, full length), clipping from the chunked sharded norm, skip-step, AdamW on the
// rank's shard and the all-gather of the parameters. count: non-masked tokens, all ranks.
StepResult train_step_finish_sharded(TrainCore *tc, float *local, int k, long count, long step);
// The step's result from the summed CE and z-loss over `count` tokens and the gradient norm
// (before clipping): losses, learning rate, and the skip decision (skip-step; a non-finite
// loss or norm is always skipped). Shared by the CPU steps and the CUDA backend.
StepResult train_step_result(TrainCore *tc, double ce_sum, double z_sum, long count, double norm, long step);
// FAULT INJECTION (tests/test_faults.sh): the step whose gradient is made NaN
// (OLMO_FAULT_NAN_STEP), -1 when unset.
long train_fault_nan_step(void);
StepResult train_step(TrainCore *tc, const int32_t *inputs, const int32_t *targets, int global_batch,
                      int micro_batch, int T, long step, float *grads_out);

#endif
