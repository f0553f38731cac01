// ops_profile.h: the per-op-family time breakdown of `olmo bench --profile`: a timing
// wrapper around a CPU backend's op table. Attaching swaps be->ops for a table whose entries
// read the clock around the original entry, so a backend without it runs exactly as before
// (no timing call on its hot path) and one with it computes the same bits (the clock reads
// touch no operand). CPU ops are synchronous, so an op's wall time is its own.
#ifndef OLMO_OPS_PROFILE_H
#define OLMO_OPS_PROFILE_H

#include <stdio.h>

#include "kernels/ops.h"

// The matmul widths that name a GEMM's role (the graph's shapes, model/graph.c): inputs of
// d_model to q_width + 2 kv_width outputs are the fused QKV projection, q_width -> d_model
// the attention output, d_model -> 2 mlp_hidden the MLP gate/up, mlp_hidden -> d_model the
// MLP down projection; anything else counts as "other GEMM".
typedef struct { int d_model, q_width, kv_width, mlp_hidden; } ProfileShapes;

// The rates a family is measured against: FLOP/s of the run's GEMM precision (matmuls, LM
// head and attention's products run at it), and a measured memory bandwidth in bytes/s.
typedef struct { double gemm_peak, bandwidth; const char *gemm_name, *bw_about; } ProfilePeaks;

// One profiler per process (the bench worker): attach to the backend the model uses.
void ops_profile_attach(OpsBackend *be, const ProfileShapes *shapes);
void ops_profile_reset(void);   // forget what was timed so far (after the warmup step)
// Lines "profile: FAMILY  ms/step  % of step  rate  % of peak", then the step's time
// outside the op table; step_s: the timed steps' total wall time, steps: their number.
void ops_profile_report(FILE *f, double step_s, int steps, const ProfilePeaks *pk);
// Triad a[i] = b[i] + s c[i] over three arrays of `floats` floats with the threads in force,
// best of `reps`: bytes/s moved (12 bytes per element).
double ops_profile_triad_bandwidth(size_t floats, int reps);

#endif
