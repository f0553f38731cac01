// step.h: one optimizer step over a global batch: micro-batch forward/backward into the
// deterministic accumulator, loss normalized by the global count of non-masked tokens,
// global-norm clipping, the skip-step guard, AdamW at the scheduled LR.
#ifndef OLMO_STEP_H
#define OLMO_STEP_H

#include <stdint.h>

#include "model/model.h"
#include "train/optim.h"

typedef struct {
    Model *model;
    AdamW opt;
    GradAcc acc;
    SkipStep skip;
    int use_skip;
    Schedule sched;
    double max_grad_norm;
    float z_loss;
} TrainCore;

typedef struct {
    double loss, ce, z_loss;   // per non-masked token; z_loss is the scaled term: loss = ce + z_loss
    double grad_norm;          // before clipping
    double lr;
    long n_valid;
    int skipped;
} StepResult;

// inputs, targets: (global_batch, T), targets < 0 masked; processed micro_batch
// instances at a time. step counts from 1. If grads_out != NULL the summed gradient
// (before clipping) is copied there.
StepResult train_step(TrainCore *tc, const int32_t *inputs, const int32_t *targets, int global_batch,
                      int micro_batch, int T, long step, float *grads_out);

#endif
