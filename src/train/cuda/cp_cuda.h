// cp_cuda.h: context parallelism on the CUDA backend (dist.context_parallel: C with
// train.backend=cuda; docs/distributed.md): the CUDA model of one group member, whose
// graph's K/V collectives run over its group's own NCCL communicator. Private to the
// backend (backend_cuda.c).
#ifndef OLMO_CP_CUDA_H
#define OLMO_CP_CUDA_H

#include <stddef.h>

#include "train/cuda/cuda_model.h"
#include "train/step.h"

// Collective over the world: every group's member 0 makes an NCCL unique id, each group
// learns its own (MPI broadcasts, one per group, in group order), and each rank creates
// its member's CUDA model (cuda_model_create_cp) at tc->cp, tc->cp_head_stride over
// max_T-token instances. NULL + err on failure (this rank's; the caller agrees on failure
// with the other ranks).
CudaModel *cp_cuda_model_create(const TrainCore *tc, int max_B, int max_T, int bf16, int recompute, size_t opt_lo,
                                size_t opt_hi, char *err, size_t errlen);

#endif
