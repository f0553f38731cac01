// fsdp.h: the weights of a fully sharded (dist.shard: full, ZeRO-3/FSDP) CPU rank. The fp32
// master weights exist only as this rank's shard (TrainCore.master); the Model's full-size
// params buffer is the gather target of the compute weights, resident one model part at a
// time: each part (the embedding, each block, the final norm + LM head: the graph's
// GRAPH_PART_*) is all-gathered within the shard group just before the graph reads it, the
// next part's gather posted (MPI_Iallgatherv) before the current part computes, and its
// pages are handed back to the kernel (madvise MADV_DONTNEED) once the graph moves on, so
// the buffer costs virtual address space, not memory. The gathered values are the master's
// bits, so the step is bitwise the one of a replicated rank.
#ifndef OLMO_FSDP_H
#define OLMO_FSDP_H

#include <stddef.h>

#include "train/step.h"

typedef struct Fsdp Fsdp;

// For tc (sharded, tc->master filled by the caller afterwards): the parts of tc's model.
Fsdp *fsdp_create(TrainCore *tc);
void fsdp_free(Fsdp *f);
// GraphParams.weights (graph.h): ctx is the Fsdp.
void fsdp_weights(void *ctx, int part, int next);
// Hand back the pages of every part (none is in use).
void fsdp_release_all(Fsdp *f);
// Give the pages of [p, p + bytes) wholly inside it back to the kernel; they read as zero
// until written again. For buffers whose contents are dead (the gradient after its reduction).
void pages_release(void *p, size_t bytes);

#endif
