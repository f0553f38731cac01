// devstate.h: the optimizer's part of one rank's device state, the same on every backend.
// A rank optimizes a range [lo, hi) of the flat parameter table (model/params.h: all of it
// on one rank, its ZeRO-1 shard under data parallelism); DevState says where that range's
// buffers live on the backend (fp32 master weights, Adam m and v, the reduced gradient and,
// where the backend computes in another type, the compute copy of the weights), and the
// functions below update them through the backend's op table (kernels/ops.h: sumsq, scale,
// adamw). So the global-norm chunks, the clip scale and AdamW's per-tensor loop (the
// embedding without weight decay unless decay_embedding) are written once, here, for the
// CPU and CUDA steps alike (train/step.c runs them). Each backend's StepDevice fills its
// DevState (step.h).
#ifndef OLMO_DEVSTATE_H
#define OLMO_DEVSTATE_H

#include <stddef.h>

#include "kernels/ops.h"
#include "model/params.h"
#include "train/optim.h"

typedef struct {
    OpsBackend *be;
    const ParamTable *table;
    size_t lo, hi;                  // the range this rank optimizes; lo is a multiple of SUMSQ_CHUNK
    float *master, *m, *v, *grad;   // device buffers of the range, element lo first
    void *wcopy;                    // the compute copy of the range (element lo first), or NULL
    DType wtype;                    // its type
} DevState;

// Squared norm of the gradient of the range per SUMSQ_CHUNK chunk: part[c] for the chunks
// c of [lo, hi), indexed by their global chunk number (lo / SUMSQ_CHUNK first).
void devstate_sumsq(const DevState *s, double *part);
// The gradient of the range *= coef (the clip factor).
void devstate_scale(const DevState *s, float coef);
// One AdamW step of the range with learning rate lr, tensor by tensor with each tensor's
// weight decay; o gives the hyperparameters and its step count, incremented here. The
// compute copy (if any) is refreshed from the updated master.
void devstate_adamw(const DevState *s, AdamW *o, double lr);
// devstate_scale(clip) when clip < 1, then devstate_adamw, bit for bit: where the backend
// has adamw_spans (CUDA) in one launch for every tensor with the clip folded in (one pass
// over the gradient fewer; the gradient buffer keeps its unclipped values), else (the CPU)
// those two calls.
void devstate_clip_adamw(const DevState *s, AdamW *o, double lr, double clip);

#endif
