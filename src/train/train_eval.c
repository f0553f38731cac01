// train_eval.c: in-loop held-out evaluation and the memorization alarm (run.h), OLMo-core's
// evaluator callback: at step 0 (fresh runs), every eval.interval and at the last step,
// on the device model or the CPU model, an "eval" record and summary, and the alarm's
// verdict on the training loss against the watched held-out CE (src/eval/alarm.h).
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist/dist.h"
#include "train/run.h"

void watch_loss(Watch *w, double loss) {
    w->last[w->n % WATCH_STEPS] = loss;
    w->n++;
}

static double watched_ce(const cJSON *o, const char *key) {
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        const char *k = it->string;
        size_t n = strlen(k);
        int is_ce = key[0] ? !strcmp(k, key)
                           : (!strncmp(k, "eval/", 5) && n > 8 && !strcmp(k + n - 3, "/ce") && strcmp(k, "eval/macro/ce"));
        if (is_ce && cJSON_IsNumber(it)) return it->valuedouble;
    }
    return NAN;
}

// In-loop evaluation on the training backend's model (train.backend=cuda, eval.device
// auto): the device already holds the current weights, so nothing crosses to the host and
// the CPU Model's activations (79 GiB of fp32 for the 7B at T = 8192) are never allocated.
// A forward without gradients, in the run's precision; every rank's device holds the full
// compute weights (ZeRO-1 shards only the master and Adam), so rank 0 evaluates alone.
void device_eval_forward(void *ctx, const int32_t *inputs, const int32_t *targets, int B, int T, float *tok_ce) {
    DeviceEval *d = ctx;
    backend_forward_backward(d->be, d->tc, inputs, targets, B, T, 0.0f, 1.0f, NULL, NULL, tok_ce);
}

// device: what evaluates, for the record ("cpu fp32", "cuda bf16", "cuda fp32").
static void run_eval(Evaluator *ev, Model *m, MetricsLog *log, long step, Watch *w, const char *device) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "eval");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddStringToObject(o, "eval/device", device);
    // On the CPU model held-out numbers are computed in fp32 whatever the training
    // precision, so runs in different precisions are judged by the same measure (the
    // weights are fp32 anyway). A device hook runs in the run's precision; this switch only
    // concerns the CPU model and is then idle.
    Precision prec = m->prec;
    model_set_precision(m, PRECISION_FP32);
    eval_run(ev, m, o);
    model_set_precision(m, prec);
    metrics_write(log, o);
    eval_print_summary(o, step);
    double ce = watched_ce(o, w->set);
    cJSON_Delete(o);
    long k = w->n < WATCH_STEPS ? w->n : WATCH_STEPS;
    double train = 0;
    for (long i = 0; i < k; i++) train += w->last[i];
    train = k ? train / (double)k : NAN;
    w->n = 0;
    char why[512];
    if (memo_alarm_update(&w->alarm, step, train, ce, why, sizeof why)) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "kind", "alarm");
        cJSON_AddStringToObject(a, "alarm", "memorization");
        cJSON_AddNumberToObject(a, "step", (double)step);
        cJSON_AddStringToObject(a, "why", why);
        cJSON_AddNumberToObject(a, "train_drop", w->alarm.train_drop);
        cJSON_AddNumberToObject(a, "heldout_drop", w->alarm.heldout_drop);
        cJSON_AddNumberToObject(a, "gap_first", w->alarm.gap_first);
        cJSON_AddNumberToObject(a, "gap_last", w->alarm.gap_last);
        cJSON_AddNumberToObject(a, "window_start", (double)w->alarm.window_start);
        metrics_write(log, a);
        cJSON_Delete(a);
        printf("WARNING: memorization alarm at step %ld: %s\n", step, why);
    }
    fflush(stdout);
}

// The alarm (alarm.memo_*, alarm.heldout_set) and its watched set, and whether evaluation on the CPU
// model of a CUDA run needs the weights brought to the host first.
void run_eval_open(Run *u) {
    const Recipe *r = u->r;
    memo_alarm_init(&u->watch.alarm, r->memo_k, r->memo_drop, r->memo_ratio);
    if (r->memo_set[0]) snprintf(u->watch.set, sizeof u->watch.set, "eval/%s/ce", r->memo_set);
    // (dist.shard: full: the CPU model's weights are gathered to rank 0 for it, every rank taking part.)
    u->host_eval_sync = (u->bimpl->on_device && !u->dev_eval) || u->tc.shard_mode == SHARD_FULL;
}

// In-loop evaluation at `step` when `due` (a collective decision when the CPU model of a
// CUDA run evaluates: every rank takes part in bringing the weights to the host, NCCL
// gathering the shards on rank 0; on the device model rank 0 needs nobody, the others
// wait at the next collective).
void run_eval_if(Run *u, int due, long step) {
    if (u->host_eval_sync) due = dist_any(due);
    if (due) {
        if (u->host_eval_sync) backend_sync_to_host(u->be, &u->tc, 0);
        if (u->ev) run_eval(u->ev, &u->m, &u->log, step, &u->watch, u->eval_on);
    }
}
