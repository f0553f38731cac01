// backend_cpu.c: the CPU backend (backend_cpu.h). The host Model is the training state:
// Model.params are the master weights, the GradAcc tree sums the micro-batches' gradients
// pairwise, the host collectives (step.c) reduce-scatter and all-gather over MPI, and AdamW
// runs over the host's DevState through the CPU op table. Nothing lives elsewhere, so the
// synchronisations are no-ops (but for dist.shard: full, train/fsdp.h) and checkpoints are
// written from host memory.
#include "train/backend_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_cp.h"
#include "kernels/kernels.h"
#include "train/fsdp.h"
#include "util/common.h"

// The CPU's backend object: with context parallelism (dist.context_parallel > 1) also the
// member's own graph, at T / C positions per instance (the Model's graph, if evaluation
// allocates it, stays the whole-instance one).
typedef struct {
    Backend base;
    Graph *cp_graph;
} CpuBackend;

// ---- the StepDevice: the Model's graph on the CPU op table, the GradAcc tree -------------
static void cpu_grad_begin(StepDevice *d) { gradacc_reset(&d->tc->acc); }

static LossSums cpu_micro_batch(StepDevice *d, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count) {
    TrainCore *tc = d->tc;
    const CpuBackend *be = d->ctx;
    LossSums s;
    if (be && be->cp_graph) {   // context parallelism: this member's chunks of the instances
        Model *m = tc->model;
        GraphParams p = {m->params, &m->w, gradacc_slot(&tc->acc), 0, NULL, NULL, NULL, NULL};   // as model_graph's, no activations
        s = graph_forward_backward_cp(be->cp_graph, &p, inputs, targets, B, z_coef, inv_count, NULL, NULL);
    } else {
        GraphParams p;
        Graph *g = model_graph(tc->model, gradacc_slot(&tc->acc), &p);
        if (tc->fsdp) {   // dist.shard: full: the weights gathered part by part as the graph reads them
            p.weights = fsdp_weights;
            p.weights_ctx = tc->fsdp;
        }
        s = graph_forward_backward(g, &p, inputs, targets, B, T, z_coef, inv_count, NULL, NULL);
    }
    gradacc_push(&tc->acc);
    return s;
}

static void cpu_grad_end(StepDevice *d) { d->tc->local = gradacc_finish(&d->tc->acc); }
static void cpu_poison(StepDevice *d) { d->tc->local[0] = NAN; }
static void cpu_grad_download(StepDevice *d, float *host) {
    memcpy(host, d->tc->local, sizeof(float) * d->tc->model->table.total);
}
static void cpu_reduce(StepDevice *d) { host_reduce(d->tc, d->tc->local, &d->state); }
static void cpu_allgather(StepDevice *d) { host_allgather(d->tc); }

static const StepDeviceOps cpu_step_ops = {
    .grad_begin = cpu_grad_begin,
    .micro_batch = cpu_micro_batch,
    .grad_end = cpu_grad_end,
    .poison = cpu_poison,
    .grad_download = cpu_grad_download,
    .reduce = cpu_reduce,
    .params_allgather = cpu_allgather,
};

void cpu_step_device(StepDevice *d, TrainCore *tc) {
    memset(d, 0, sizeof *d);
    d->ops = &cpu_step_ops;
    d->tc = tc;
}

StepResult cpu_train_step(TrainCore *tc, const int32_t *inputs, const int32_t *targets, int global_batch,
                          int micro_batch, int T, long step, float *grads_out) {
    StepDevice d;
    cpu_step_device(&d, tc);
    return train_step_on(&d, inputs, targets, global_batch, micro_batch, T, step, grads_out);
}

// ---- the backend -------------------------------------------------------------------------
static int cpu_available(char *err, size_t errlen) {
    (void)err, (void)errlen;
    return 0;
}

static Backend *cpu_create(Precision prec, TrainCore *tc, int max_B, int max_T, Recompute recompute, char *err,
                           size_t errlen) {
    (void)recompute;   // the recipe refuses recompute=on here
    CpuBackend *cb = xcalloc(1, sizeof *cb);
    Backend *be = &cb->base;
    be->iface = &backend_cpu;
    be->prec = prec;
    if (tc->cp > 1) {   // the member's activations, at T / C rows per instance (dist_cp.h)
        const GraphCP cp = {tc->cp, dist_cp_member(), max_T, tc->cp_head_stride > 0 ? tc->cp_head_stride : 1, NULL};
        cb->cp_graph = xcalloc(1, sizeof *cb->cp_graph);
        if (graph_init_cp(cb->cp_graph, model_backend(tc->model), &tc->model->cfg, &tc->model->table, max_B, 0, &cp)) {
            snprintf(err, errlen, "dist.context_parallel %d: out of memory for the activations of (B=%d, T=%d / %d)",
                     tc->cp, max_B, max_T, tc->cp);
            free(cb->cp_graph);
            free(cb);
            return NULL;
        }
    }
    cpu_step_device(&be->dev, tc);
    be->dev.ctx = be;
    return be;
}

static void cpu_destroy(Backend *be) {
    CpuBackend *cb = (CpuBackend *)be;
    if (cb->cp_graph) graph_free(cb->cp_graph);
    free(cb->cp_graph);
    free(cb);
}

static void cpu_describe(const Backend *be, char *out, size_t outlen) {
    out[0] = 0;
    if (be->prec != PRECISION_BF16) return;
    const int emu = !strcmp(matmul_bf16_engine(), "emulated");
    snprintf(out, outlen,
             "backend: cpu, bf16 matmul operands (%s engine), fp32 accumulation, activations, master weights and "
             "Adam%s", matmul_bf16_engine(),
             emu ? " (no native bf16 engine for this CPU, or switched off: emulated, slower than fp32; "
                   "docs/performance.md)" : "");
}

static int cpu_devices(void) { return 0; }

static double cpu_device_peak(Precision prec, const char **source) {
    (void)prec;
    *source = "no accelerator: the CPU cores' calibrated GEMM peak (peak.h)";
    return 0;
}

static int cpu_streams_checkpoint(const Backend *be) {
    (void)be;
    return 0;
}

static void cpu_save_checkpoint(Backend *be, TrainCore *tc, CkptWriter *w, const TrainState *st) {
    (void)be, (void)tc, (void)w, (void)st;
    die("backend cpu: checkpoints are written from host memory (backend_streams_checkpoint is 0)");
}

// The host holds it: the master shard (full) or Model.params, the Adam shard (from lo).
static void cpu_snapshot_range(Backend *be, TrainCore *tc, int which, size_t lo, size_t hi, float *dst) {
    (void)be;
    host_snapshot_range(tc, which, lo, hi, dst);
}

// Without dist.shard: full the host's Model is the state itself; with it, Model.params is
// only the gather target: rank 0 gathers the master shards there for evaluation, the
// checkpoint and the final weights, and the master shard is taken from it after
// initialization or a resume.
static void cpu_sync_to_host(Backend *be, TrainCore *tc, int optim) {
    (void)be, (void)optim;
    train_core_gather_params(tc);
}
static void cpu_sync_from_host(Backend *be, TrainCore *tc) {
    (void)be;
    train_core_load_master(tc);
}

static LossSums cpu_forward_backward(Backend *be, TrainCore *tc, const int32_t *inputs, const int32_t *targets, int B,
                                     int T, float z_coef, float inv_count, float *grads, float *logits_out,
                                     float *tok_ce) {
    (void)be;
    return model_forward_backward(tc->model, inputs, targets, B, T, z_coef, inv_count, grads, logits_out, tok_ce);
}

const BackendIface backend_cpu = {
    .name = "cpu",
    .default_precision = PRECISION_FP32,
    .on_device = 0,
    .available = cpu_available,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .describe = cpu_describe,
    .devices = cpu_devices,
    .device_peak = cpu_device_peak,
    .streams_checkpoint = cpu_streams_checkpoint,
    .save_checkpoint = cpu_save_checkpoint,
    .snapshot_range = cpu_snapshot_range,
    .sync_to_host = cpu_sync_to_host,
    .sync_from_host = cpu_sync_from_host,
    .forward_backward = cpu_forward_backward,
};
