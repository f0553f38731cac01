// backend.c: see backend.h. The CUDA step mirrors step.c's single-process path line by
// line, with the buffers on the device.
#include "train/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "kernels/kernels.h"
#include "util/common.h"
#ifdef OLMO_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

struct Backend {
    BackendKind kind;
    Precision prec;
#ifdef OLMO_CUDA
    CudaModel *cm;
    int sharded;        // world > 1: host-side ZeRO-1 step (see backend_step_sharded)
    float *host_grad;   // sharded: this rank's summed gradient, downloaded (table.total)
#endif
};

int backend_cuda_built(void) {
#ifdef OLMO_CUDA
    return 1;
#else
    return 0;
#endif
}

int backend_resolve(const char *backend, const char *precision, BackendKind *kind, Precision *prec, char *err,
                    size_t errlen) {
    if (!backend || !backend[0] || !strcmp(backend, "cpu")) *kind = BACKEND_CPU;
    else if (!strcmp(backend, "cuda")) *kind = BACKEND_CUDA;
    else {
        snprintf(err, errlen, "train.backend: unknown backend '%s' (cpu | cuda)", backend);
        return -1;
    }
    if (!precision || !precision[0]) *prec = *kind == BACKEND_CUDA ? PRECISION_BF16 : PRECISION_FP32;
    else if (!strcmp(precision, "fp32")) *prec = PRECISION_FP32;
    else if (!strcmp(precision, "bf16")) *prec = PRECISION_BF16;
    else {
        snprintf(err, errlen, "train.precision: unknown precision '%s' (fp32 | bf16)", precision);
        return -1;
    }
    if (*kind == BACKEND_CUDA) {
#ifndef OLMO_CUDA
        snprintf(err, errlen, "train.backend=cuda: this binary was built without CUDA (nvcc was not found at build "
                              "time; see docs/cuda.md)");
        return -1;
#else
        char why[256];
        if (!cuda_device_count(why, sizeof why)) {
            snprintf(err, errlen, "train.backend=cuda: %s", why);
            return -1;
        }
#endif
    }
    return 0;
}

Backend *backend_create(BackendKind kind, Precision prec, TrainCore *tc, int max_B, int max_T, char *err,
                        size_t errlen) {
    Backend *be = xcalloc(1, sizeof *be);
    be->kind = kind;
    be->prec = prec;
    if (kind == BACKEND_CPU) return be;
#ifdef OLMO_CUDA
    Model *m = tc->model;
    if (tc->world > 1) {
        // One GPU per rank: the node-local rank (Open MPI's variable, else the world rank)
        // modulo the devices this process sees.
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        cuda_select_device(lr ? atoi(lr) : tc->rank);
        be->sharded = 1;
        be->host_grad = xmalloc_aligned(sizeof(float) * m->table.total);
    }
    // OLMO_CUDA_RECOMPUTE=1: per-block activation recompute (docs/cuda.md).
    const char *rc = getenv("OLMO_CUDA_RECOMPUTE");
    be->cm = cuda_model_create(&m->cfg, &m->table, max_B, max_T, prec == PRECISION_BF16, rc && atoi(rc) > 0, err, errlen);
    if (!be->cm) {
        free(be);
        return NULL;
    }
    return be;
#else
    (void)tc; (void)max_B; (void)max_T;
    snprintf(err, errlen, "train.backend=cuda: this binary was built without CUDA");
    free(be);
    return NULL;
#endif
}

void backend_free(Backend *be) {
    if (!be) return;
#ifdef OLMO_CUDA
    if (be->cm) cuda_model_destroy(be->cm);
    free(be->host_grad);
#endif
    free(be);
}

BackendKind backend_kind(const Backend *be) { return be ? be->kind : BACKEND_CPU; }

void backend_describe(const Backend *be, char *out, size_t outlen) {
    out[0] = 0;
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    char dev[256];
    cuda_device_describe(dev, sizeof dev);
    snprintf(out, outlen, "backend: cuda, %s, %s | %.2f GiB on the device", dev,
             be->prec == PRECISION_BF16 ? "bf16 weights/activations, fp32 master/grads/Adam" : "fp32 throughout",
             cuda_model_bytes(be->cm) / 1073741824.0);
#else
    (void)outlen;
#endif
}


#ifdef OLMO_CUDA
// world > 1 (mpirun, one GPU per rank): step.c's sharded step with the micro-batch
// forward/backward and the local gradient tree on the GPU, then everything after it on
// the host exactly as the CPU does it: the summed local gradient is downloaded, reduce-
// scattered over ranks in the fixed tree (dist.h), clipped from the chunked sharded norm,
// AdamW updates this rank's shard (host m, v: ZeRO-1), the parameters are all-gathered
// and uploaded. Bitwise identical for every world size with a power-of-two number of
// micro-batches per rank. The transfers cost PCIe time per step (the full gradient down,
// the full parameters up): a first multi-GPU path, not a fast one (docs/cuda.md).
static StepResult backend_step_sharded(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets,
                                       int global_batch, int micro_batch, int T, long step) {
    CudaModel *cm = be->cm;
    const int W = tc->world;
    const int local_batch = global_batch / W, k = local_batch / micro_batch;
    long count = train_count_targets(tc, targets, (size_t)local_batch * T);
    float inv_count = count > 0 ? 1.0f / (float)count : 0.0f;
    cuda_grad_reset(cm);
    for (int j = 0; j < k; j++) {
        size_t off = (size_t)j * micro_batch * T;
        LossSums s = cuda_forward_backward(cm, inputs + off, targets + off, micro_batch, T, tc->z_loss, inv_count, 1,
                                           NULL, NULL);
        cuda_grad_push(cm);
        tc->loss_local[2 * j] = s.ce_sum;
        tc->loss_local[2 * j + 1] = s.z_sum;
    }
    cuda_grad_finish(cm);
    cuda_grad_download(cm, be->host_grad);
    if (step == train_fault_nan_step()) be->host_grad[0] = NAN;
    StepResult r = train_step_finish_sharded(tc, be->host_grad, k, count, step);
    if (!r.skipped) cuda_upload_params(cm, tc->model->params);
    return r;
}
#endif

StepResult backend_train_step(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets,
                              int global_batch, int micro_batch, int T, long step, float *grads_out) {
    if (!be || be->kind == BACKEND_CPU)
        return train_step(tc, inputs, targets, global_batch, micro_batch, T, step, grads_out);
#ifdef OLMO_CUDA
    if (be->sharded) return backend_step_sharded(be, tc, inputs, targets, global_batch, micro_batch, T, step);
    CudaModel *cm = be->cm;
    long count = train_count_targets(tc, targets, (size_t)global_batch * T);
    float inv_count = count > 0 ? 1.0f / (float)count : 0.0f;
    double ce = 0, z = 0;
    cuda_grad_reset(cm);
    for (int b0 = 0; b0 < global_batch; b0 += micro_batch) {
        size_t off = (size_t)b0 * T;
        LossSums s = cuda_forward_backward(cm, inputs + off, targets + off, micro_batch, T, tc->z_loss, inv_count, 1,
                                           NULL, NULL);
        cuda_grad_push(cm);
        ce += s.ce_sum;
        z += s.z_sum;
    }
    cuda_grad_finish(cm);
    if (step == train_fault_nan_step()) cuda_grad_poison(cm);
    if (grads_out) cuda_grad_download(cm, grads_out);
    double norm = sqrt(cuda_grad_sumsq(cm)), coef = clip_coef(norm, tc->max_grad_norm);
    if (coef < 1.0) cuda_grad_scale(cm, (float)coef);
    StepResult r = train_step_result(tc, ce, z, count, norm, step);
    if (!r.skipped) {
        AdamW *o = &tc->opt;
        o->step++;
        cuda_adamw(cm, (float)r.lr, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)o->weight_decay,
                   o->decay_embedding, (int)o->step);
    }
    return r;
#else
    (void)tc; (void)inputs; (void)targets; (void)global_batch; (void)micro_batch; (void)T; (void)step; (void)grads_out;
    die("backend_train_step: built without CUDA");
#endif
}

void backend_sync_to_host(Backend *be, TrainCore *tc, int optim) {
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    if (be->sharded) return;   // host params and Adam shards are the authoritative copies
    cuda_download_params(be->cm, tc->model->params);
    if (optim) cuda_download_adam(be->cm, tc->opt.m, tc->opt.v);
#else
    (void)tc; (void)optim;
#endif
}

void backend_sync_from_host(Backend *be, TrainCore *tc) {
    if (!be || be->kind == BACKEND_CPU) return;
#ifdef OLMO_CUDA
    cuda_upload_params(be->cm, tc->model->params);
    if (!be->sharded) cuda_upload_adam(be->cm, tc->opt.m, tc->opt.v);   // sharded: Adam stays on the host
#else
    (void)tc;
#endif
}

LossSums backend_forward_backward(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                  int T, float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce) {
    if (!be || be->kind == BACKEND_CPU)
        return model_forward_backward(tc->model, inputs, targets, B, T, z_coef, inv_count, grads, logits_out, tok_ce);
#ifdef OLMO_CUDA
    if (grads) cuda_grad_reset(be->cm);
    LossSums s = cuda_forward_backward(be->cm, inputs, targets, B, T, z_coef, inv_count, grads != NULL, logits_out, tok_ce);
    if (grads) {
        cuda_grad_push(be->cm);
        cuda_grad_finish(be->cm);
        cuda_grad_download(be->cm, grads);
    }
    return s;
#else
    die("backend_forward_backward: built without CUDA");
#endif
}
