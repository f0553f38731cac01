// backend.c: the registry of training backends (backend.h): which this binary has, by name,
// and the calls every backend answers through its interface table. The one place that knows
// how the binary was built: a build without CUDA lists "cuda" with only the reason it is
// absent, so train.backend=cuda is refused with that reason.
#include "train/backend.h"

#include <stdio.h>
#include <string.h>

#include "train/backend_cpu.h"
#include "train/cuda/cuda_backend.h"
#include "util/common.h"

#ifdef OLMO_CUDA
#define CUDA_ENTRY (&backend_cuda)
#else
static int cuda_absent(char *err, size_t errlen) {
    snprintf(err, errlen, "this binary was built without CUDA (nvcc was not found at build time; see docs/cuda.md)");
    return -1;
}
static const BackendIface backend_cuda_absent = {.name = "cuda", .default_precision = PRECISION_BF16, .on_device = 1,
                                                 .available = cuda_absent};
#define CUDA_ENTRY (&backend_cuda_absent)
#endif

static const BackendIface *const registry[] = {&backend_cpu, CUDA_ENTRY};
enum { N_BACKENDS = sizeof registry / sizeof registry[0] };

static const BackendIface *find(const char *name) {
    for (int i = 0; i < N_BACKENDS; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

int backend_built(const char *name) {
    const BackendIface *b = find(name);
    return b && b->create;
}

int backend_resolve(const char *name, const char *precision, const BackendIface **impl, Precision *prec, char *err,
                    size_t errlen) {
    const BackendIface *b = find(name && name[0] ? name : "cpu");
    if (!b) {
        char names[128] = "";
        for (int i = 0; i < N_BACKENDS; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " | " : "", registry[i]->name);
        snprintf(err, errlen, "train.backend: unknown backend '%s' (%s)", name, names);
        return -1;
    }
    if (!precision || !precision[0]) *prec = b->default_precision;
    else if (!strcmp(precision, "fp32")) *prec = PRECISION_FP32;
    else if (!strcmp(precision, "bf16")) *prec = PRECISION_BF16;
    else {
        snprintf(err, errlen, "train.precision: unknown precision '%s' (fp32 | bf16)", precision);
        return -1;
    }
    char why[320];
    if (b->available(why, sizeof why) != 0) {
        snprintf(err, errlen, "train.backend=%s: %s", b->name, why);
        return -1;
    }
    *impl = b;
    return 0;
}

Backend *backend_create(const BackendIface *impl, Precision prec, TrainCore *tc, int max_B, int max_T,
                        Recompute recompute, char *err, size_t errlen) {
    if (!impl->create) {
        impl->available(err, errlen);
        return NULL;
    }
    return impl->create(prec, tc, max_B, max_T, recompute, err, errlen);
}

void backend_free(Backend *be) {
    if (be) be->iface->destroy(be);
}

StepDevice *backend_step_device(Backend *be) { return &be->dev; }

void backend_describe(const Backend *be, char *out, size_t outlen) { be->iface->describe(be, out, outlen); }

int backend_devices(const Backend *be) { return be->iface->devices(); }

double backend_device_bytes(const Backend *be) { return be && be->iface->device_bytes ? be->iface->device_bytes(be) : 0; }

double backend_device_peak(const Backend *be, const char **source) {
    return be->iface->device_peak(be->prec, source);
}

int backend_streams_checkpoint(const Backend *be) { return be->iface->streams_checkpoint(be); }

void backend_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st) {
    be->iface->save_checkpoint(be, tc, w, st);
}

void backend_snapshot_range(Backend *be, TrainCore *tc, int which, size_t lo, size_t hi, float *dst) {
    be->iface->snapshot_range(be, tc, which, lo, hi, dst);
}

void backend_sync_to_host(Backend *be, TrainCore *tc, int optim) { be->iface->sync_to_host(be, tc, optim); }

void backend_sync_from_host(Backend *be, TrainCore *tc) { be->iface->sync_from_host(be, tc); }

LossSums backend_forward_backward(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                  int T, float z_coef, float inv_count, float *grads, float *logits_out, float *tok_ce) {
    return be->iface->forward_backward(be, tc, inputs, targets, B, T, z_coef, inv_count, grads, logits_out, tok_ce);
}
