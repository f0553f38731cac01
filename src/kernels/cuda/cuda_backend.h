// cuda_backend.h: the C interface of the CUDA model (src/kernels/cuda/*.cu). The model
// lives on the device: fp32 master weights, gradients and Adam m, v in the parameter
// table's flat layout (model/params.h), a bf16 copy of the weights for the GEMMs (bf16
// mode; the fp32 mode computes everything in fp32), activations of the activation type.
// Only src/train/backend.c calls this; it is compiled only when nvcc is found (OLMO_CUDA).
#ifndef OLMO_CUDA_BACKEND_H
#define OLMO_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/kernels.h"
#include "model/config.h"
#include "model/params.h"

typedef struct CudaModel CudaModel;

// Number of CUDA devices (0 when none or no driver); a reason in err when 0.
int cuda_device_count(char *err, size_t errlen);
// Use device (local_rank modulo the device count) in this process (one GPU per rank).
void cuda_select_device(int local_rank);
// Device name and memory for logs.
void cuda_device_describe(char *out, size_t outlen);

// Allocate everything for micro-batches up to (max_B, max_T). bf16: 1 = bf16 weights and
// activations (fp32 master, grads, Adam), 0 = fp32 throughout. recompute: 1 = keep only
// each block's input (the residual stream) and recompute the block's forward before its
// backward (one block's activations in memory instead of L; one extra forward per step).
// NULL + err on failure (no device, out of memory, unsupported head_dim).
CudaModel *cuda_model_create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int bf16,
                             int recompute, char *err, size_t errlen);
void cuda_model_destroy(CudaModel *cm);
// Wait for all queued device work.
void cuda_sync(CudaModel *cm);
// Device bytes allocated (for logs).
size_t cuda_model_bytes(const CudaModel *cm);

// Master weights host <-> device (the bf16 copy is refreshed on upload).
void cuda_upload_params(CudaModel *cm, const float *host);
void cuda_download_params(CudaModel *cm, float *host);
// Adam moments host <-> device (whole table).
void cuda_upload_adam(CudaModel *cm, const float *m, const float *v);
void cuda_download_adam(CudaModel *cm, float *m, float *v);

// One micro-batch, exactly model_forward_backward's contract: inputs, targets (B, T) on
// the host. want_grads: also the backward of (ce + z z_sum) * inv_count into the current
// gradient slot (see cuda_grad_*). logits_out (B*T, Vp) and tok_ce (B*T) are optional
// host outputs.
LossSums cuda_forward_backward(CudaModel *cm, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count, int want_grads, float *logits_out, float *tok_ce);

// The deterministic gradient tree (optim.h GradAcc) on the device.
void cuda_grad_reset(CudaModel *cm);
void cuda_grad_push(CudaModel *cm);     // commit the slot the last backward wrote
void cuda_grad_finish(CudaModel *cm);   // fold the stack; the total is "the gradient"
void cuda_grad_download(CudaModel *cm, float *host);
void cuda_grad_poison(CudaModel *cm);   // fault injection: gradient element 0 = NaN
// Sum of squares of the gradient: fixed 65536-element chunks summed in double on the
// device, partials summed in chunk order on the host (sumsq()'s scheme).
double cuda_grad_sumsq(CudaModel *cm);
void cuda_grad_scale(CudaModel *cm, float s);
// AdamW (torch semantics, adamw_update's arithmetic) over every tensor; the embedding is
// decayed only with decay_embedding. step = Adam's t after increment. Refreshes bf16 weights.
void cuda_adamw(CudaModel *cm, float lr, float beta1, float beta2, float eps, float wd, int decay_embedding, int step);

#ifdef __cplusplus
}
#endif
#endif
