// trainer.c: the training run of `olmo train RECIPE.yml [key=value ...]`, also as `mpirun
// -np W olmo train ...` (train_run, trainer.h; the command is src/cli/cmd_train.c).
// Validates the recipe, the data, the evaluation sets and any checkpoint to resume from
// (and, on resume, this recipe against the checkpoint's: resume_guard) before writing
// anything, then per step: this rank's block of the global batch -> train_step (reduction
// across ranks, ZeRO-1 AdamW) -> one progress line and one metrics.jsonl record (rank 0),
// checkpoints every ckpt.interval steps and at the end, held-out evaluation at step 0,
// every eval.interval and at the end. train_run reads as that list of steps (run_plan ...
// run_finish); what each step does beyond the loop lives beside it, on the one Run of
// run.h: resume.c (train.resume, train.load_path), ckpt_save.c (checkpoints), runlog.c
// (MFU, banner, step line), train_eval.c (in-loop evaluation, memorization alarm).
// SIGTERM / SIGHUP / SIGINT / SIGUSR1 (SIGUSR1: what mpirun forwards; scripts/olmo-mpirun turns
// mpirun's SIGTERM/SIGHUP into it): finish the step, checkpoint, exit 0.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "dist/dist_cp.h"
#include "dist/dist_watch.h"
#include "io/params_io.h"
#include "io/run_lock.h"
#include "model/limits.h"
#include "recipe/mixture.h"
#include "train/history.h"
#include "train/optim.h"
#include "train/run.h"
#include "train/trainer.h"
#include "util/common.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

// SIGTERM (what SLURM and Kubernetes send before a preemption), SIGHUP (a closed ssh
// session), SIGINT and SIGUSR1 set g_stop; the loop finishes the step, checkpoints and
// stops with exit 0 (docs/robustness.md); a rerun continues bitwise.
static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

// Rank 0 prints a message; every rank leaves with `code` (all ranks reach this together).
void fail_all(int rank, int code, const char *msg) {
    if (rank == 0) fprintf(stderr, "olmo: error: %s\n", msg);
    dist_exit(code);
}

// The shape of the job: the model, the steps, this rank's share of the global batch, the
// backend and precision. Bad input: every rank exits 2 with nothing written.
static void run_plan(Run *u) {
    const Recipe *r = u->r;
    u->cfg = recipe_model_config(r);
    u->total_steps = recipe_total_steps(r);
    u->T = r->seq_len, u->GB = r->global_batch, u->MB = r->micro_batch;
    const int GB = u->GB, MB = u->MB;
    // Context parallelism: groups of C ranks share each instance; data parallel over the groups.
    u->C = r->context_parallel;
    if (u->W % u->C || dist_cp_init(u->C)) {
        snprintf(u->msg, sizeof u->msg, "dist.context_parallel %d must divide the world size %d (mpirun -np)%s", u->C,
                 u->W, u->W % u->C ? "" : " and needs a run started by mpirun in a build with MPI");
        fail_all(u->rank, 2, u->msg);
    }
    const int W = u->W / u->C;   // data-parallel ranks (groups)
    // Elastic world size: the global batch is fixed by the recipe, ranks (groups) split its
    // micro-batches in contiguous blocks, unevenly when W does not divide them (loader_rank_block).
    if (GB % MB != 0 || GB / MB < W) {
        snprintf(u->msg, sizeof u->msg,
                 GB % MB ? "train.global_batch %d is not a multiple of train.micro_batch %d"
                         : "train.global_batch %d / train.micro_batch %d = %d micro-batches for %d %ss: every %s "
                           "needs at least one", GB, MB, GB / MB, W, u->C > 1 ? "context-parallel group" : "rank",
                 u->C > 1 ? "group" : "rank");
        fail_all(u->rank, 2, u->msg);
    }
    int first;
    loader_rank_block(GB / MB, W, u->rank / u->C, &first, &u->micro_per_rank);
    u->local_batch = u->micro_per_rank * MB;
    // dist.shard, dist.shard_group (step.h): refused when the group does not divide W (before
    // the backend is looked for; a backend lacking a mode's collectives refuses at create).
    const int shard = train_shard_mode(r->shard, r->shard_group, u->W, u->msg, sizeof u->msg);
    if (shard < 0) fail_all(u->rank, 2, u->msg);
    if (shard == SHARD_FULL && u->C > 1) {   // the member's graph reads the whole table (backend_cpu.c)
        snprintf(u->msg, sizeof u->msg, "dist.shard: full with dist.context_parallel %d: not built yet (the "
                 "context-parallel graph reads whole weights); use dist.shard: optim or grads", u->C);
        fail_all(u->rank, 2, u->msg);
    }
    if (shard == SHARD_FULL && (GB / MB) % W) {   // every rank gathers each part once per micro-batch
        snprintf(u->msg, sizeof u->msg, "dist.shard: full needs the same micro-batches on every rank: train.global_batch "
                 "%d / train.micro_batch %d = %d do not split evenly over %d ranks (uneven blocks run the weight "
                 "gathers a different number of times); use dist.shard: optim or grads, or another world size", GB,
                 MB, GB / MB, W);
        fail_all(u->rank, 2, u->msg);
    }
    u->tc.shard_mode = (ShardMode)shard;
    u->tc.shard_group = r->shard_group;
    // train.backend / train.precision (src/train/backend.h): a CUDA run in a binary built
    // without CUDA, or on a machine without a device, stops here with nothing written.
    if (backend_resolve(r->backend, r->precision, &u->bimpl, &u->bprec, u->msg, sizeof u->msg) != 0)
        fail_all(u->rank, 2, u->msg);
    // A device backend shards its own state (cuda: fsdp_cuda.cu); the host stays ZeRO-1. Its
    // gradient reduce runs once per part per micro-batch, so every rank needs the same count.
    if (u->bimpl->on_device && shard != SHARD_OPTIM) {
        if ((GB / MB) % W) {
            snprintf(u->msg, sizeof u->msg, "dist.shard: %s on train.backend: cuda needs the same micro-batches on "
                     "every rank: train.global_batch %d / train.micro_batch %d = %d do not split evenly over %d ranks; "
                     "use dist.shard: optim, or another world size", r->shard, GB, MB, GB / MB, W);
            fail_all(u->rank, 2, u->msg);
        }
        u->tc.dev_shard = (ShardMode)shard;
        u->tc.shard_mode = SHARD_OPTIM;
    }
    // The CPU model trains with its matmuls in the run's precision (run_eval switches to
    // fp32 for evaluation; under cuda the host copy evaluates only with eval.device=cpu).
    u->mprec = !u->bimpl->on_device && u->bprec == PRECISION_BF16 ? PRECISION_BF16 : PRECISION_FP32;
}

// Open the data, the eval sets and the checkpoint before anything is written: bad input
// stops the run with nothing on disk.
static void run_open_inputs(Run *u) {
    const Recipe *r = u->r;
    run_print_placement(u);
    recipe_loader_config(r, &u->lc, u->W / u->C, u->rank / u->C);   // a group reads as one rank
    u->lc.verbose = u->rank == 0;   // its summary once, not once per member of group 0
    u->loader = loader_create(&u->lc);
    u->ev = u->rank == 0 && !r->eval_off ? eval_create(r) : NULL;   // rank 0 evaluates (others wait)

    run_check_data(u);   // every rank reads the same data
    run_take_lock(u);    // before the first write into run_dir
    run_check_shared(u); // every rank sees the run_dir rank 0 sees (when it exists already)
    // Resolved before the clean-up: train.resume naming an incomplete (.tmp-*) checkpoint is
    // refused by name, not after it was removed (ckpt_resolve).
    u->resume = ckpt_resolve(r->run_dir, r->resume, u->ckpt_dir, sizeof u->ckpt_dir, u->msg, sizeof u->msg);
    if (u->resume < 0) fail_all(u->rank, 2, u->msg);
    dist_barrier();   // every rank resolved before rank 0 removes anything
    if (u->rank == 0) ckpt_clean_temp(r->run_dir);
    dist_barrier();
    if (u->resume == 1) resume_guard(r, u->ckpt_dir, u->loader, u->rank, &u->guard);
}

// The model (refused before allocating when this machine cannot hold it: src/model/limits.h),
// its initial weights, the training state around it, and the resolved recipe.
static void run_create_model(Run *u) {
    const Recipe *r = u->r;
    const int MB = u->MB, T = u->T;
    char lim[512];
    // train.backend=cuda: the host holds the fp32 params (checkpoints, the final weights)
    // and Adam only until it is uploaded; CPU activations are allocated only if evaluation
    // runs on the CPU model (eval.device=cpu).
    // Context parallelism: each rank holds T / C positions (its graph: backend_cpu.c); the
    // host model's own activations are allocated only if evaluation uses them.
    if (u->bimpl->on_device ? model_check_size(&u->cfg, MB, T, lim, sizeof lim)
                                 : model_check_memory(&u->cfg, MB, T / u->C, u->mprec, lim, sizeof lim))
        fail_all(u->rank, 2, lim);
    if (u->bimpl->on_device || u->C > 1) model_create_lazy(&u->m, &u->cfg, MB, T);
    else model_create(&u->m, &u->cfg, MB, T);
    model_set_precision(&u->m, u->mprec);
    param_init(&u->m.table, u->m.params, r->seed);
    TrainCore *tc = &u->tc;
    tc->model = &u->m;
    tc->cp = u->C, tc->cp_head_stride = r->cp_head_stride;
    const int groups = u->W / u->C, most = (u->GB / u->MB + groups - 1) / groups;   // the largest block
    train_core_shard(tc, u->W, u->rank, most, r->beta1, r->beta2, r->eps, r->weight_decay, r->decay_embedding);
    gradacc_init(&tc->acc, u->m.table.total);
    skipstep_from_recipe(&tc->skip, r);
    tc->use_skip = r->skip_step;
    tc->max_grad_norm = r->max_grad_norm;
    tc->z_loss = (float)r->z_loss;
    tc->loss_per_rank = recipe_loss_per_rank(r);
    schedule_from_recipe(r, &tc->sched);

    u->yaml = recipe_to_yaml(r);
    ckpt_sha256_hex(u->yaml, strlen(u->yaml), u->yaml_sha);
}

// The backend the steps run on (cpu: the host Model; cuda: the device model, loaded from
// the host's state) and where in-loop evaluation runs: on the device model (no host sync,
// the run's precision) unless eval.device=cpu asks for the fp32 CPU model.
static void run_backend(Run *u) {
    const Recompute rc = !strcmp(u->r->recompute, "on") ? RECOMPUTE_ON : !strcmp(u->r->recompute, "off") ? RECOMPUTE_OFF
                                                                                                  : RECOMPUTE_AUTO;
    u->be = backend_create(u->bimpl, u->bprec, &u->tc, u->MB, u->T, rc, u->msg, sizeof u->msg);
    if (!u->be) fail_all(u->rank, 2, u->msg);
    backend_sync_from_host(u->be, &u->tc);   // cuda: initialized or loaded params + Adam m, v -> device
    // On the device only rank 0 evaluates, so held-out evaluation runs on the host copy
    // (gathered by backend_sync_to_host, every rank taking part) when no rank holds whole
    // weights there (dist.shard: full) or the device graph holds a member's rows and needs
    // its group (context parallelism: whole instances on the CPU model).
    u->dev_eval = u->bimpl->on_device && !strcmp(u->r->eval_device, "auto") && u->tc.dev_shard != SHARD_FULL &&
                  u->C == 1;
    u->deval = (DeviceEval){u->be, &u->tc};
    if (u->dev_eval) eval_set_forward(u->ev, device_eval_forward, &u->deval);   // ev NULL (ranks > 0): no-op
    snprintf(u->eval_on, sizeof u->eval_on, "%s %s", u->dev_eval ? u->bimpl->name : "cpu",
             u->dev_eval && u->bprec == PRECISION_BF16 ? "bf16" : "fp32");
}

// train.resume=never (rank 0): a fresh run must not mix its checkpoints (or its recipe
// history) with an older run's (retention and resume=auto go by step number): move the
// old ones aside, never delete them.
static void move_previous_run_aside(const Recipe *r) {
    static const char *const aside[] = {"checkpoints", "recipes"};
    char old[2][4200], path[4200];
    int i = 1;
    for (; i < 1000; i++) {
        for (int k = 0; k < 2; k++) snprintf(old[k], sizeof old[k], "%s/%s.replaced-%d", r->run_dir, aside[k], i);
        if (access(old[0], F_OK) != 0 && access(old[1], F_OK) != 0) break;
    }
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s", r->run_dir, aside[k]);
        if (access(path, F_OK) != 0) continue;
        if (rename(path, old[k]) != 0) die("cannot move %s aside", path);
        printf("train.resume=never: moved the previous run's %s to %s\n", path, old[k]);
    }
}

// Rank 0: the run directory (metrics.jsonl, recipe.yml, the recipe history), the
// checkpoint writer, then the banner and its warnings.
static void run_open_outputs(Run *u, const JobCores *jc) {
    const Recipe *r = u->r;
    if (mkdir_p(r->run_dir) != 0) die("cannot create run_dir %s", r->run_dir);
    if (!u->locked) {   // a fresh run_dir, created just now
        if (run_lock_acquire(r->run_dir, u->msg, sizeof u->msg) != 0) die_input("%s", u->msg);
        u->locked = 1;
    }
    if (u->resume == 1) metrics_truncate(r->run_dir, u->start_step);
    metrics_open(&u->log, r->run_dir, u->resume == 1 ? "a" : "w");
    if (r->tensorboard) metrics_open_tensorboard(&u->log, r->run_dir);
    // recipe.yml states what the newest segment trains with; recipes/ keeps them all
    // (src/train/history.h). A complete run trains nothing: its history stays as is.
    if (!u->guard.complete) {
        char path[4200];
        snprintf(path, sizeof path, "%s/recipe.yml", r->run_dir);
        if (write_file_atomic(path, u->yaml, strlen(u->yaml)) != 0) die("cannot write %s", path);
        history_begin(r->run_dir, u->start_step, u->yaml, u->resume != 1, (const char *const *)u->guard.lines,
                      u->guard.nlines, &u->log);
    }
    u->w = ckpt_writer_create(r->run_dir, &u->m.table, r->ckpt_keep_last, (int)r->ckpt_keep_every, r->ckpt_async);
    run_banner(u, jc);
    fflush(stdout);
}

// The steps: this rank's block of the global batch -> train_step -> the record and
// progress line, in-loop evaluation, stop decisions (signal, train.stop_at, divergence),
// checkpoints every ckpt.interval steps.
// Test hook (OLMO_TEST_STEP_PAUSE=SECONDS): a sleep after every step, so that a signal a
// test sends through a launcher or a scheduler lands mid-run however fast the tiny model's
// steps are (tests/test_slurm.sh). Changes no number.
static void test_step_pause(void) {
    static double pause = -1;
    if (pause < 0) {
        const char *e = getenv("OLMO_TEST_STEP_PAUSE");
        pause = e ? atof(e) : 0;
    }
    if (pause > 0) usleep((useconds_t)(pause * 1e6));
}

static void run_loop(Run *u, Loop *lp) {
    const Recipe *r = u->r;
    const int GB = u->GB, MB = u->MB, T = u->T;
    int32_t *inputs = xmalloc(sizeof(int32_t) * (size_t)u->local_batch * T);
    int32_t *targets = xmalloc(sizeof(int32_t) * (size_t)u->local_batch * T);
    lp->step = u->start_step, lp->last_saved = u->start_step;
    while (lp->step < u->total_steps) {
        const long step = ++lp->step;
        double t0 = now_seconds();
        loader_next_batch(u->loader, inputs, targets);
        lp->res = train_step_on(backend_step_device(u->be), inputs, targets, GB, MB, T, step, NULL);
        double dt = now_seconds() - t0;
        lp->t_train += dt;
        lp->steps_run++;
        u->tokens += (long)GB * T;
        u->skipped_total += lp->res.skipped;
        if (u->rank == 0) run_log_step(u, lp, dt);
        // Evaluation hook 2/3 (eval.interval) and 3/3 (last step: eval_due says so).
        watch_loss(&u->watch, lp->res.loss);
        run_eval_if(u, u->ev && eval_due(u->ev, step, u->total_steps), step);
        // Every rank sees the same decision: a signal to any rank stops them all here.
        if (r->stop_at > 0 && step >= r->stop_at) g_stop = 1;
        // A run whose loss or gradient stays non-finite skips every step (the weights stay
        // the last good ones); after 16 in a row it stops with a checkpoint and exit 1.
        lp->bad_run = lp->res.skipped && (!isfinite(lp->res.loss) || !isfinite(lp->res.grad_norm)) ? lp->bad_run + 1 : 0;
        if (lp->bad_run >= 16) {
            lp->diverged = 1;
            g_stop = 1;
        }
        test_step_pause();
        ckpt_save_poll(u, 0);   // a sharded write in the background: published once every rank is done
        // A lock taken over by another run (this one was frozen past its lease): nothing more written.
        if (dist_any(u->rank == 0 && run_lock_lost()))
            fail_all(u->rank, 2, "run_dir's lock was taken over by another run: stopped without a checkpoint");
        if (dist_any(g_stop)) {
            lp->stopped = 1;
            break;
        }
        if (r->ckpt_interval > 0 && step % r->ckpt_interval == 0 && step < u->total_steps) {
            save_checkpoint(u, step, lp->res.lr);
            lp->last_saved = step;
        }
    }
    free(inputs);
    free(targets);
}

// The last checkpoint, then (rank 0) the final weights RUN_DIR/model.safetensors and the
// closing line, or why the run stopped early.
static void run_finish(Run *u, const Loop *lp) {
    const long step = lp->step;
    backend_sync_to_host(u->be, &u->tc, 0);   // cuda: the final weights on the host for model.safetensors
    if (step != lp->last_saved || (lp->steps_run == 0 && u->resume != 1))
        save_checkpoint(u, step, lp->res.lr);
    ckpt_save_poll(u, 1);
    run_memory_report(u, step);
    if (u->rank != 0) return;
    double wall = now_seconds() - lp->t_start;
    if (lp->diverged) {
        fprintf(stderr, "olmo: error: %ld consecutive steps had a non-finite loss or gradient norm and were "
                        "skipped; stopped after step %ld with %s checkpointed\n", lp->bad_run, step,
                u->tc.skip.rule == SKIP_RULE_OLMO_CORE ? "the weights (optim.skip_step_compat: olmo_core lets non-finite "
                "values reach them, as OLMo-core)" : "the last good weights");
    } else if (lp->stopped) {
        printf("stopped after step %ld (signal or train.stop_at): checkpoint written; rerun to continue\n", step);
    } else {
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors", u->r->run_dir);
        params_save_safetensors(&u->m.table, u->m.params, path, NULL);
        printf("done: %ld steps (%ld this run), %ld tokens in %.1fs (%.0f tok/s), %ld skipped; model: %s\n", step,
               lp->steps_run, u->tokens, wall, lp->steps_run * (double)u->GB * u->T / (lp->t_train > 0 ? lp->t_train : 1),
               u->skipped_total, path);
    }
    fflush(stdout);
    metrics_close(&u->log);
    ckpt_writer_free(u->w);
}

static void run_free(Run *u) {
    ckpt_shard_free(u->sw);
    if (u->ev) eval_free(u->ev);
    free(u->yaml);
    for (int i = 0; i < u->guard.nlines; i++) free(u->guard.lines[i]);
    loader_free(u->loader);
    recipe_loader_config_free(&u->lc);
    backend_free(u->be);
    train_core_free(&u->tc);
    model_destroy(&u->m);
    free(u);
}

int train_run(const Recipe *r, const char *recipe_path) {
    Run *u = xcalloc(1, sizeof *u);   // large (the loader config, the guard's lines): not on the stack
    u->r = r;
    u->recipe_path = recipe_path;
    u->rank = dist_rank(), u->W = dist_world();
    catch_stop_signals();   // from the start: SIGUSR1's default action would kill a rank not yet listening
    run_plan(u);
    run_open_inputs(u);
    run_create_model(u);
    if (u->resume == 1) run_resume(u);
    if (u->resume == 0 && r->load_path[0]) run_load_path(u);
    run_backend(u);
    if (u->rank == 0 && u->resume == 0 && !strcmp(r->resume, "never")) move_previous_run_aside(r);
    JobCores jc;
    run_peak(u, &jc);
    if (u->rank == 0) run_open_outputs(u, &jc);
    if (u->W > 1) {   // every rank writes its own shard of the checkpoints (ckpt_shard.h)
        size_t lo, hi;
        train_core_range(&u->tc, &lo, &hi);
        u->sw = ckpt_shard_create(r->run_dir, &u->m.table, r->ckpt_keep_last, (int)r->ckpt_keep_every, r->ckpt_async,
                                  lo, hi, u->tc.sworld, u->tc.bounds, u->rank < u->tc.sworld);
    }
    run_check_shared(u);   // a run_dir rank 0 created just now
    if (dist_any(dist_watch_start(r->run_dir, u->rank, u->W, u->msg, sizeof u->msg) != 0)) fail_all(u->rank, 2, u->msg);
    run_eval_open(u);
    // Evaluation hook 1/3: before training (fresh runs only; a resumed run had it).
    run_eval_if(u, u->ev && u->start_step == 0, 0);

    Loop lp = {0};
    lp.t_start = now_seconds();
    run_loop(u, &lp);
    run_finish(u, &lp);
    run_free(u);
    run_lock_release();
    return lp.diverged ? 1 : 0;
}
