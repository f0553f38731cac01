// backend.h: where the training step runs. A backend is an interface table (BackendIface)
// that one file fills: src/train/backend_cpu.c (the host Model: model/graph.c over the CPU op
// table) and src/train/cuda/backend_cuda.c (the model, gradients and Adam state on NVIDIA
// GPUs: src/kernels/cuda, src/train/cuda). backend.c is the registry: the only place that
// knows which backends this binary was built with (its one `#ifdef OLMO_CUDA`).
//
// Every backend runs the same step (step.c's train_step_on over the StepDevice the backend
// keeps in its Backend): the same global-count loss normalization, micro-batch gradients
// accumulated in a fixed order, global-norm clip, skip-step and AdamW over its DevState.
// A device backend (cuda) owns the optimizer state after backend_sync_from_host (the host
// m, v are released; checkpoints copy the device state to host memory at the step boundary,
// backend_snapshot_range, and are written in the background, or stream from the device
// through backend_save_checkpoint without ckpt.async: the same fp32 HF safetensors as the
// CPU writes), backend_sync_to_host refreshes
// Model.params for the final weights and CPU evaluation (eval.device=cpu), and in-loop
// evaluation runs on the device (backend_forward_backward). docs/cuda.md, and
// docs/adding-an-op.md "Adding a backend".
#ifndef OLMO_BACKEND_H
#define OLMO_BACKEND_H

#include <stddef.h>

#include "train/checkpoint.h"
#include "train/step.h"

typedef struct Backend Backend;

// train.recompute: per-block activation recompute (a device backend's memory saver).
typedef enum { RECOMPUTE_AUTO = -1, RECOMPUTE_OFF = 0, RECOMPUTE_ON = 1 } Recompute;

// What a backend fills (one const table per backend; the registry lists them).
typedef struct BackendIface {
    const char *name;                 // train.backend's value: "cpu", "cuda"
    Precision default_precision;      // train.precision "" means this
    // 1: the model lives in device memory: the host Model is created lazily (its
    // activations only if something evaluates on it) and sized by model_check_size instead
    // of model_check_memory; CPU evaluation first brings the weights to the host.
    int on_device;
    // 0, or -1 with a reason in err (no device, built without it).
    int (*available)(char *err, size_t errlen);
    // The backend for tc (sized for micro-batches of (max_B, max_T)): a Backend whose
    // first member is the struct Backend below. NULL + err on failure (out of memory, ...).
    Backend *(*create)(Precision prec, TrainCore *tc, int max_B, int max_T, Recompute recompute, char *err,
                       size_t errlen);
    void (*destroy)(Backend *be);
    // One line describing the device and memory for the run log ("" where nothing to say).
    void (*describe)(const Backend *be, char *out, size_t outlen);
    // The accelerators one rank uses (0: none, MFU counts CPU cores) and the dense peak
    // FLOP/s of one of them in this precision, with where that figure comes from.
    int (*devices)(void);
    double (*device_peak)(Precision prec, const char **source);
    // Checkpoints: 1 when they must go through save_checkpoint (the device holds the state).
    int (*streams_checkpoint)(const Backend *be);
    void (*save_checkpoint)(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st);
    void (*snapshot_range)(Backend *be, TrainCore *tc, int which, size_t lo, size_t hi, float *dst);
    void (*sync_to_host)(Backend *be, TrainCore *tc, int optim);
    void (*sync_from_host)(Backend *be, TrainCore *tc);
    LossSums (*forward_backward)(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                 int T, float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce);
    // The device memory this rank's backend holds at its peak, in bytes (NULL: no device).
    double (*device_bytes)(const Backend *be);
} BackendIface;

// The part every backend's object starts with.
struct Backend {
    const BackendIface *iface;
    Precision prec;
    StepDevice dev;   // where train_step_on runs this backend's steps (filled once, by create)
};

// The backend named by train.backend ("" = cpu) and the precision train.precision gives
// ("" = the backend's default: bf16 on cuda, fp32 on cpu). 0, or -1 with a message
// (unknown name or precision, a backend this binary was built without, no device).
int backend_resolve(const char *name, const char *precision, const BackendIface **impl, Precision *prec, char *err,
                    size_t errlen);
// 1 if this binary has the backend `name` compiled in (whether or not a device is present).
int backend_built(const char *name);

Backend *backend_create(const BackendIface *impl, Precision prec, TrainCore *tc, int max_B, int max_T,
                        Recompute recompute, char *err, size_t errlen);
void backend_free(Backend *be);
// The StepDevice of be, for train_step_on (step.h).
StepDevice *backend_step_device(Backend *be);
// One line describing the backend, its device and memory for the run log ("" for cpu fp32).
void backend_describe(const Backend *be, char *out, size_t outlen);
// The accelerators one rank uses (0 for cpu) and one device's dense peak FLOP/s in the
// backend's precision, with where the figure comes from (the MFU ceiling; peak.h for CPUs).
int backend_devices(const Backend *be);
double backend_device_peak(const Backend *be, const char **source);
// This rank's device memory at its peak (bytes; 0 for a backend without a device).
double backend_device_bytes(const Backend *be);
// 1 when checkpoints must go through backend_save_checkpoint (the device holds the state);
// 0 for cpu and the host-MPI fallback (the host copies are authoritative).
int backend_streams_checkpoint(const Backend *be);
// Collective (every rank calls it): rank 0 writes checkpoint st through w tensor by tensor
// from the device (ckpt_commit_fetch; synchronous); the other ranks send their shards.
// One device with ckpt.async off (src/train/ckpt_save.c); otherwise backend_snapshot_range.
void backend_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st);
// Copy [lo, hi) of this rank's state `which` (0 fp32 master weights, 1 Adam m, 2 Adam v) to
// host memory dst (hi - lo floats), within this rank's shard (train_core_range; the weights
// anywhere without dist.shard: full). Not collective: the checkpoint's snapshot at the step
// boundary, each rank its own part (src/train/ckpt_shard.h), one device the whole state;
// on CUDA a device-to-host copy, the write then runs on the host in the background.
void backend_snapshot_range(Backend *be, TrainCore *tc, int which, size_t lo, size_t hi, float *dst);
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
