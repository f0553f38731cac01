// backend_cpu.h: the CPU backend (backend.h's interface, filled in backend_cpu.c): the host
// Model (model/graph.c over the CPU op table) trains itself; its StepDevice accumulates the
// micro-batches in the GradAcc tree and reduces over MPI on the host.
#ifndef OLMO_BACKEND_CPU_H
#define OLMO_BACKEND_CPU_H

#include "train/backend.h"

extern const BackendIface backend_cpu;

// The CPU's StepDevice over tc (its Model, GradAcc, AdamW), for programs that drive a
// TrainCore without a Backend (olmo bench, tests/tool_parity_dump).
void cpu_step_device(StepDevice *d, TrainCore *tc);
// train_step_on over the CPU's StepDevice of tc.
StepResult cpu_train_step(TrainCore *tc, const int32_t *inputs, const int32_t *targets, int global_batch,
                          int micro_batch, int T, long step, float *grads_out);

#endif
