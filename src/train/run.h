// run.h: the state of one training run, shared by the files that make up `train_run`
// (private to src/train; the public entry is trainer.h). OLMo-core's trainer-plus-callbacks
// cut: trainer.c is the list of steps and the loop; around it
//   resume.c      the resume guard, train.resume and train.load_path, metrics truncation
//   ckpt_save.c   the run's checkpoints (snapshot, commit, the checkpoint record)
//   runlog.c      MFU's ceiling, the banner and its warnings, the step record and line
//   train_eval.c  in-loop held-out evaluation and the memorization alarm
// each takes the one Run below.
#ifndef OLMO_TRAIN_RUN_H
#define OLMO_TRAIN_RUN_H

#include "data/loader.h"
#include "eval/alarm.h"
#include "eval/eval.h"
#include "model/model.h"
#include "recipe/recipe.h"
#include "train/backend.h"
#include "train/checkpoint.h"
#include "train/ckpt_shard.h"
#include "train/metrics.h"
#include "train/peak.h"
#include "train/step.h"

// What the resume guard decided (resume_guard).
typedef struct {
    int nlines;
    char *lines[RECIPE_MAX_CHANGES];   // "optim.lr: 0.003 -> 0.001", for the history record
    int complete;                      // the run already trained its unchanged number of steps
    int force_data;                    // a changed data fingerprint is allowed (loader_set_state)
} Guard;

// The memorization alarm's view of the run: the training loss just before an evaluation
// (mean of the last WATCH_STEPS steps) against the watched in-domain held-out CE
// (src/eval/alarm.h). Not the mean since the previous evaluation: while the loss falls
// fast that mean lags far behind the point-in-time held-out CE, and the shrinking lag
// looks like a growing train/held-out gap.
#define WATCH_STEPS 5
typedef struct {
    MemoAlarm alarm;
    double last[WATCH_STEPS];
    long n;             // training losses recorded since the previous evaluation
    char set[160];      // "eval/<set>/ce" key, or "" = the first set's
} Watch;

// In-loop evaluation on the training backend's model (train_eval.c, device_eval_forward).
typedef struct {
    Backend *be;
    TrainCore *tc;
} DeviceEval;

// What a run holds from its start to its end (this rank's; w and log are rank 0's).
typedef struct {
    const Recipe *r;
    const char *recipe_path;    // for the banner
    int rank, W;
    int locked;                 // rank 0 holds run_dir/.lock (io/run_lock.h)
    int shared_checked;         // run_check_shared has run on an existing run_dir
    int T, GB, MB, local_batch, micro_per_rank;
    int C;                  // dist.context_parallel: ranks per instance; the loader sees W / C groups
    long total_steps;
    const BackendIface *bimpl;  // train.backend (backend.h)
    Precision bprec;
    Precision mprec;   // the CPU model's matmuls: the run's precision on the cpu backend, else fp32
    ModelConfig cfg;
    LoaderConfig lc;
    Loader *loader;
    Evaluator *ev;              // rank 0 only
    int resume;                 // 1: resume from ckpt_dir (ckpt_resolve), 0: a fresh run
    char ckpt_dir[4600];
    Guard guard;
    Model m;
    TrainCore tc;
    char *yaml;                 // the resolved recipe, and its sha256
    char yaml_sha[65];
    long start_step, tokens, skipped_total;
    Backend *be;                // the run's backend, the CPU's too (backend_create)
    int dev_eval;               // in-loop evaluation on the device model (DeviceEval)
    int host_eval_sync;         // evaluation on the CPU model of a CUDA run: every rank syncs
    DeviceEval deval;
    char eval_on[40];           // "cpu fp32", "cuda bf16", "cuda fp32" (the record's eval/device)
    MetricsLog log;
    CkptWriter *w;              // rank 0: the gathering writer (one rank)
    CkptShard *sw;              // world > 1, every rank: the sharded writer (ckpt_shard.h)
    double peak, fpt;           // MFU's ceiling (FLOP/s of the job) and FLOPs per token (window-aware)
    double fpt_v23;             // the OLMo-core v2.3 count (6N + 12 L H Dh T), logged beside it
    char peak_desc[512];
    Watch watch;
    char msg[8192];             // the message of a refusal
} Run;

// The training loop's counters.
typedef struct {
    long step, last_saved, steps_run, bad_run;
    int stopped, diverged;
    double t_start, t_train;
    StepResult res;
} Loop;

// trainer.c: rank 0 prints a message; every rank leaves with `code` (all ranks reach this
// together).
void fail_all(int rank, int code, const char *msg);

// resume.c
// The resume guard (docs/checkpoints.md, "Changing the recipe on resume"), before anything
// is written: r against the recipe ckpt_dir was trained with, key by key. Rank 0 prints
// every difference; keys that change the training are refused (every rank exits 2) unless
// train.allow_recipe_change lists them, a model change always is, and so is a recipe that
// would train no step past the checkpoint.
void resume_guard(const Recipe *r, const char *ckpt_dir, const Loader *loader, int rank, Guard *g);
// train.resume: the checkpoint's weights, this rank's Adam shard, step, tokens, skip-step
// history and loader position.
void run_resume(Run *u);
// train.load_path (a fresh run from another run's weights, optionally its Adam moments and
// trainer state).
void run_load_path(Run *u);
// On resume: keep the metrics records of steps <= step, rewritten atomically.
void metrics_truncate(const char *run_dir, long step);

// ckpt_save.c: checkpoint `step` of the run. Collective: every rank calls it.
void save_checkpoint(Run *u, long step, double lr);
// The write in flight (collective): a sharded one is published once every rank's part is
// in (block: waits for it; else at the first step boundary after); prints when one completes.
void ckpt_save_poll(Run *u, int block);

// runlog.c
// MFU's ceiling: sets u->peak and u->peak_desc (rank 0) and fills the job's cores.
// run_dir.c: rank 0 takes run_dir/.lock when the directory exists (every rank fails together
// when another run holds it); every rank sees the run_dir rank 0 sees, once it exists (rank 0
// writes a token, each rank reads it back; a rank that cannot exits 2 naming its rank and
// host, with all the others); every rank's data has rank 0's fingerprint. All collective.
void run_take_lock(Run *u);
void run_print_placement(const Run *u);   // rank 0: the hosts, their ranks and local ranks
void run_check_shared(Run *u);
void run_check_data(Run *u);
// Every rank's peak resident memory (collective): a "memory" record and a line on rank 0.
void run_memory_report(Run *u, long step);
void run_peak(Run *u, JobCores *jc);
// Rank 0: the run's first lines (what trains where, the shard, the MFU count, the
// backend) and the recipe's warnings.
void run_banner(Run *u, const JobCores *jc);
// Rank 0: the step's metrics record, and its progress line every train.log_every steps.
void run_log_step(Run *u, const Loop *lp, double dt);

// train_eval.c
// The eval hook of a device model (run_backend installs it when the device evaluates).
void device_eval_forward(void *ctx, const int32_t *inputs, const int32_t *targets, int B, int T, float *tok_ce);
// The memorization alarm and where evaluation syncs from, once the backend is known.
void run_eval_open(Run *u);
// Record a step's training loss for the alarm.
void watch_loss(Watch *w, double loss);
// In-loop evaluation at `step` when `due` (collective where the CPU model of a CUDA run evaluates).
void run_eval_if(Run *u, int due, long step);

#endif
