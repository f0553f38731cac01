// runlog.c: what a run tells its user and metrics.jsonl (run.h): MFU's ceiling (run_peak),
// the banner (what trains where, the ZeRO-1 shard, the MFU count, the backend) and the
// recipe's warnings, per step the "train" record and the progress line, and at the end every
// rank's peak memory.
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "kernels/kernels.h"
#include "train/run.h"
#include "util/common.h"

// MFU's ceiling (peak.h): the hardware the whole job runs on. CPU: the per-core GEMM peak
// of the run's precision times the physical cores the ranks use, each counted once; the
// other ranks sleep while rank 0 calibrates, so they do not slow it. CUDA: one peak per
// device, one device per rank. Sets u->peak and u->peak_desc (rank 0) and returns the job's
// cores.
void run_peak(Run *u, JobCores *jc) {
    const Recipe *r = u->r;
    const int devices = backend_devices(u->be);
    job_cores(jc, devices);
    if (devices > 0) {
        const char *source;
        double dev = backend_device_peak(u->be, &source);
        if (r->peak_flops > 0) dev = r->peak_flops, source = "recipe perf.peak_flops per GPU";
        u->peak = dev * jc->gpus;
        snprintf(u->peak_desc, sizeof u->peak_desc, "%d GPU%s x %.1f TFLOP/s = %.1f TFLOP/s (%s)", jc->gpus,
                 jc->gpus > 1 ? "s" : "", dev / 1e12, u->peak / 1e12, source);
    } else {
        CorePeak cp;
        dist_barrier_quiet();
        if (u->rank == 0) core_peak(u->bprec == PRECISION_BF16, r->peak_flops, &cp);
        dist_barrier_quiet();
        if (u->rank == 0) {
            u->peak = cp.per_core * jc->cores;
            core_peak_describe(&cp, jc->cores, u->peak_desc, sizeof u->peak_desc);
        }
    }
}

// The run's first lines: what trains where, the ZeRO-1 shard, the MFU count, the backend.
static void print_banner(Run *u, const JobCores *jc) {
    const int W = u->W;
    u->fpt = model_flops_per_token_window(&u->cfg, u->T);
    u->fpt_v23 = model_flops_per_token_olmo_core(&u->cfg, u->T);
    char over[160] = "";
    if (jc->oversubscribed)
        snprintf(over, sizeof over, " | OVERSUBSCRIBED: %d threads on %d CPUs (ranks x threads > cores)", jc->threads,
                 jc->cpus);
    // Micro-batches per rank (per context-parallel group): "4", or for an uneven split
    // "2-3 ... (uneven: ranks 0-4 take 3)".
    // (the split is loader_rank_block's: the first groups take the extra micro-batches)
    const int G = W / u->C, M = u->GB / u->MB;
    int first, most, fewest;
    loader_rank_block(M, G, 0, &first, &most);
    loader_rank_block(M, G, G - 1, &first, &fewest);
    const int extra = M - fewest * G;   // groups with one more
    char micro[96], uneven[96] = "";
    if (most != fewest) {
        const char *who = u->C > 1 ? "group" : "rank";
        snprintf(micro, sizeof micro, "%d-%d", fewest, most);
        if (extra == 1) snprintf(uneven, sizeof uneven, " (uneven: %s 0 takes %d)", who, most);
        else snprintf(uneven, sizeof uneven, " (uneven: %ss 0-%d take %d)", who, extra - 1, most);
    } else {
        snprintf(micro, sizeof micro, "%d", most);
    }
    printf("olmo train: %s | %zu params | %ld steps x %d instances x %d tokens | %d rank%s x %d threads on %d "
           "physical core%s%s | %s micro-batch%s of %d per rank%s%s%s\n",
           u->recipe_path, model_num_params(&u->cfg), u->total_steps, u->GB, u->T, W, W > 1 ? "s" : "",
           omp_get_max_threads(), jc->cores, jc->cores > 1 ? "s" : "", jc->hosts > 1 ? " (all hosts)" : "", micro,
           most > 1 ? "es" : "", u->MB, u->C > 1 ? " (group)" : "", uneven, over);
    if (u->C > 1)
        printf("context parallel: %d ranks per instance, %d group%s (data parallel over them); each rank holds %d of "
               "every instance's %d tokens (chunks j and %d-j of %d, j = rank %% %d); K/V all-gathered %d KV head%s at "
               "a time\n", u->C, u->W / u->C, u->W / u->C > 1 ? "s" : "", u->T / u->C, u->T, 2 * u->C - 1, 2 * u->C,
               u->C, u->tc.cp_head_stride, u->tc.cp_head_stride > 1 ? "s" : "");
    size_t lo0, hi0;
    train_core_range(&u->tc, &lo0, &hi0);
    printf("ZeRO-1: Adam m, v %.2f MiB on rank 0 (shard %zu..%zu; %.2f MiB unsharded)\n",
           8.0 * (double)(hi0 - lo0) / 1048576.0, lo0, hi0, 8.0 * (double)u->m.table.total / 1048576.0);
    printf("MFU: window-aware count %.4g GFLOP/token (OLMo-core v2.3 count %.4g: mfu_olmo_core_v2_3) x tokens/s of "
           "the job vs %s\n", u->fpt / 1e9, u->fpt_v23 / 1e9, u->peak_desc);
    char desc[512];
    backend_describe(u->be, desc, sizeof desc);
    if (desc[0]) printf("%s\n", desc);
    fflush(stdout);
}

// The banner's warnings: what the recipe does that a user may not mean (a warmup longer than
// the run, held-out documents cut by seq_len, checkpoints no evaluation judges, no held-out
// evaluation at all). Warnings only: nothing here changes the run.
static void print_warnings(const Run *u) {
    const Recipe *r = u->r;
    const long total = u->total_steps;
    if (r->eval_off)
        printf("warning: eval.off: true: no held-out evaluation during training (no held-out loss, no memorization "
               "alarm%s); `olmo eval RUN --attach` evaluates afterwards\n",
               r->n_eval_sets || r->n_eval_tasks ? "; the recipe's eval.sets / eval.tasks are not run" : "");
    if (r->warmup_steps > 0 && r->warmup_steps >= total) {
        Schedule s;
        schedule_from_recipe(r, &s);
        printf("warning: schedule.warmup_steps %ld >= the run's %ld steps: the LR never leaves its warmup "
               "(step 1: %.3g, last step: %.3g, optim.lr %.3g)\n", r->warmup_steps, total, schedule_lr(&s, 1),
               schedule_lr(&s, total), r->lr);
    }
    if (!u->ev) return;
    eval_print_cuts(stdout, u->ev, "warning: ");
    if (eval_nsets(u->ev) > 0 && r->ckpt_interval > 0 && r->ckpt_interval < total &&
        (r->eval_interval == 0 || r->eval_interval > r->ckpt_interval))
        printf("warning: eval.interval %ld%s is longer than ckpt.interval %ld: checkpoints between evaluations have "
               "no held-out loss\n", r->eval_interval, r->eval_interval == 0 ? " (only at start and end)" : "",
               r->ckpt_interval);
}

// Rank 0: the banner and its warnings.
void run_banner(Run *u, const JobCores *jc) {
    print_banner(u, jc);
    print_warnings(u);
}

// Rank 0: the step's metrics record, and its progress line every train.log_every steps
// (and at the first and the last).
void run_log_step(Run *u, const Loop *lp, double dt) {
    const StepResult *res = &lp->res;
    const long step = lp->step;
    double tps = (double)u->GB * u->T / dt;
    double mfu = tps * u->fpt / u->peak;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "train");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "loss", res->loss);
    cJSON_AddNumberToObject(o, "ce", res->ce);
    cJSON_AddNumberToObject(o, "z_loss", res->z_loss);
    cJSON_AddNumberToObject(o, "lr", res->lr);
    cJSON_AddNumberToObject(o, "grad_norm", res->grad_norm);
    cJSON_AddNumberToObject(o, "tokens", (double)u->tokens);
    cJSON_AddNumberToObject(o, "tokens_per_s", tps);
    cJSON_AddNumberToObject(o, "tokens_per_s_per_rank", tps / u->W);
    cJSON_AddNumberToObject(o, "world_size", u->W);
    cJSON_AddNumberToObject(o, "mfu", mfu);
    cJSON_AddNumberToObject(o, "flops_per_token", u->fpt);
    cJSON_AddNumberToObject(o, "mfu_olmo_core_v2_3", tps * u->fpt_v23 / u->peak);
    cJSON_AddNumberToObject(o, "flops_per_token_olmo_core_v2_3", u->fpt_v23);
    cJSON_AddNumberToObject(o, "peak_flops", u->peak);
    cJSON_AddNumberToObject(o, "skipped", res->skipped);
    cJSON_AddNumberToObject(o, "skipped_total", (double)u->skipped_total);
    cJSON_AddNumberToObject(o, "step_time", dt);
    cJSON_AddNumberToObject(o, "peak_rss_gib", (double)peak_rss_bytes() / 1073741824.0);   // rank 0's, so far
    loader_metrics(u->loader, o);
    metrics_write(&u->log, o);
    cJSON_Delete(o);
    if (step % u->r->log_every == 0 || step == u->total_steps || step == u->start_step + 1) {
        char eta[32];
        format_duration(eta, sizeof eta, lp->t_train / lp->steps_run * (u->total_steps - step));
        printf("step %6ld/%ld | loss %.4f (ce %.4f z %.2e) | lr %.3e | gnorm %.3f | %6.0f tok/s | MFU %4.1f%% | "
               "ETA %s%s\n",
               step, u->total_steps, res->loss, res->ce, res->z_loss, res->lr, res->grad_norm, tps, 100 * mfu, eta,
               res->skipped ? " | SKIPPED" : "");
        fflush(stdout);
    }
}

// Every rank's peak resident memory (VmHWM) and, on a device backend, its device peak
// (memory_device), gathered to rank 0: printed and recorded.
void run_memory_report(Run *u, long step) {
    double mine[2] = {(double)peak_rss_bytes(), backend_device_bytes(u->be)};
    double *all = xcalloc(2 * (size_t)u->W, sizeof(double));
    dist_allgather_doubles(mine, 2, all);
    if (u->rank == 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", "memory");
        cJSON_AddNumberToObject(o, "step", (double)step);
        cJSON *a = cJSON_AddArrayToObject(o, "peak_rss_gib");
        double mx = 0;
        for (int i = 0; i < u->W; i++) {
            cJSON_AddItemToArray(a, cJSON_CreateNumber(all[2 * i] / 1073741824.0));
            if (all[2 * i] > mx) mx = all[2 * i];
        }
        cJSON_AddNumberToObject(o, "peak_rss_gib_max", mx / 1073741824.0);
        double dmx = 0;
        if (u->bimpl->on_device) {
            cJSON *dv = cJSON_AddArrayToObject(o, "memory_device_gib");
            for (int i = 0; i < u->W; i++) {
                cJSON_AddItemToArray(dv, cJSON_CreateNumber(all[2 * i + 1] / 1073741824.0));
                if (all[2 * i + 1] > dmx) dmx = all[2 * i + 1];
            }
            cJSON_AddNumberToObject(o, "memory_device_gib_max", dmx / 1073741824.0);
        }
        metrics_write(&u->log, o);
        cJSON_Delete(o);
        printf("memory: peak RSS %.2f GiB on rank 0", all[0] / 1073741824.0);
        if (u->W > 1) printf(", %.2f GiB on the largest of %d ranks", mx / 1073741824.0, u->W);
        if (u->bimpl->on_device)
            printf(" (host memory); device peak %.3f GiB on rank 0, %.3f GiB on the largest rank\n",
                   all[1] / 1073741824.0, dmx / 1073741824.0);
        else printf(" (host memory)\n");
    }
    free(all);
}
