// backend.h: where the training step runs, one Backend object either way (backend_create).
// `cpu`: the host Model (model.c: the graph over the CPU op table) and its StepDevice
// (step.c). `cuda` keeps the model, gradients and Adam state on NVIDIA GPUs
// (src/kernels/cuda, src/train/cuda) and runs the same step there: the same global-count
// loss normalization, micro-batch gradients accumulated in a fixed order, global-norm
// clip, skip-step and AdamW; with mpirun, one GPU per rank and ZeRO-1 over NCCL (or the
// host-MPI fallback). After backend_sync_from_host the device owns the optimizer state
// (the host m, v are released); checkpoints stream from the device
// (backend_save_checkpoint) in the same fp32 HF safetensors as the CPU writes,
// backend_sync_to_host refreshes Model.params for the final weights (and CPU evaluation,
// eval.device=cpu), and in-loop evaluation runs on the device (backend_forward_backward).
// docs/cuda.md.
#ifndef OLMO_BACKEND_H
#define OLMO_BACKEND_H

#include <stddef.h>

#include "train/checkpoint.h"
#include "train/step.h"

typedef enum { BACKEND_CPU = 0, BACKEND_CUDA = 1 } BackendKind;

typedef struct Backend Backend;

// Parse train.backend / train.precision ("" precision = the backend's default: bf16 on
// cuda, fp32 on cpu). 0, or -1 with a message (unknown name, bf16 on cpu, cuda in a
// binary built without CUDA, no device).
int backend_resolve(const char *backend, const char *precision, BackendKind *kind, Precision *prec, char *err,
                    size_t errlen);
// 1 if this binary has the CUDA backend compiled in.
int backend_cuda_built(void);

// Create the backend for tc->model (sized for micro-batches of (max_B, max_T)); the CPU
// backend is an empty shell. NULL + err on failure (no device, out of device memory).
Backend *backend_create(BackendKind kind, Precision prec, TrainCore *tc, int max_B, int max_T, char *err,
                        size_t errlen);
void backend_free(Backend *be);
BackendKind backend_kind(const Backend *be);
// One line describing the device and memory (for the run log); "" for cpu.
void backend_describe(const Backend *be, char *out, size_t outlen);

// train_step on the backend (cpu: train_step itself; cuda: one GPU, NCCL or host-MPI by world).
StepResult backend_train_step(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets,
                              int global_batch, int micro_batch, int T, long step, float *grads_out);
// 1 when checkpoints must go through backend_save_checkpoint (the device holds the state);
// 0 for cpu and the host-MPI fallback (the host copies are authoritative).
int backend_streams_checkpoint(const Backend *be);
// Collective (every rank calls it): rank 0 writes checkpoint st through w tensor by tensor
// from the device (ckpt_commit_fetch; synchronous); the other ranks send their shards.
void backend_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st);
// Device state -> host: params into Model.params (rank 0; collective with NCCL); with optim
// also the device's Adam range into opt.m/v (allocated if released; tests). No-op on cpu.
void backend_sync_to_host(Backend *be, TrainCore *tc, int optim);
// Host -> device (params, Adam m, v), then the host m, v are released (opt.m/v = NULL)
// unless the host keeps Adam (host-MPI fallback). No-op on cpu.
void backend_sync_from_host(Backend *be, TrainCore *tc);
// Forward (and backward with grads) of one micro-batch on the backend, as
// model_forward_backward (grads: the flat host buffer to receive them, or NULL). Tests,
// and in-loop evaluation on the device (grads NULL, tok_ce: the trainer's eval hook):
// without grads it touches neither the gradient nor the optimizer state, so the next
// training step is unaffected.
LossSums backend_forward_backward(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                  int T, float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce);

#endif
