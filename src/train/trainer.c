// trainer.c: the training run of `olmo train RECIPE.yml [key=value ...]`, also as `mpirun
// -np W olmo train ...` (train_run, trainer.h; the command is src/cli/cmd_train.c).
// Validates the recipe, the data, the evaluation sets and any checkpoint to resume from
// (and, on resume, this recipe against the checkpoint's: resume_guard) before writing
// anything, then per step: this rank's block of the global batch -> train_step (reduction
// across ranks, ZeRO-1 AdamW) -> one progress line and one metrics.jsonl record (rank 0),
// checkpoints every ckpt.interval steps and at the end, held-out evaluation at step 0,
// every eval.interval and at the end. train_run reads as that list of steps (run_plan ...
// run_finish). SIGTERM / SIGINT / SIGUSR1 (what mpirun forwards): finish the step,
// checkpoint, exit 0.
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/loader.h"
#include "dist/dist.h"
#include "eval/alarm.h"
#include "eval/eval.h"
#include "io/ckpt_verify.h"
#include "io/params_io.h"
#include "kernels/kernels.h"
#include "model/limits.h"
#include "model/model.h"
#include "recipe/mixture.h"
#include "recipe/recipe.h"
#include "train/backend.h"
#include "train/checkpoint.h"
#include "train/cuda/cuda_backend.h"
#include "train/history.h"
#include "train/metrics.h"
#include "train/peak.h"
#include "train/step.h"
#include "train/trainer.h"
#include "util/common.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

// Rank 0 prints a message; every rank leaves with `code` (all ranks reach this together).
static void fail_all(int rank, int code, const char *msg) {
    if (rank == 0) fprintf(stderr, "olmo: error: %s\n", msg);
    dist_exit(code);
}

// On resume: keep the metrics records of steps <= step (and lines without a step), drop
// the rest and any torn last line, rewritten atomically; the run then appends.
static void metrics_truncate(const char *run_dir, long step) {
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    size_t len;
    char *txt = read_file_all(path, &len);
    if (!txt) return;
    char *out = xmalloc(len + 1);
    size_t o = 0;
    long dropped = 0;
    for (char *line = txt; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) {   // torn last line (killed mid-write)
            dropped++;
            break;
        }
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
        int keep = j && (!cJSON_IsNumber(s) || s->valuedouble <= (double)step);
        cJSON_Delete(j);
        if (keep) {
            size_t l = strlen(line);
            memcpy(out + o, line, l);
            out[o + l] = '\n';
            o += l + 1;
        } else dropped++;
        line = nl + 1;
    }
    if (write_file_atomic(path, out, o) != 0) die("cannot rewrite %s", path);
    if (dropped) printf("metrics: dropped %ld record(s) after step %ld from %s\n", dropped, step, path);
    free(out);
    free(txt);
}

typedef struct {
    const Recipe *r;
    Model *m;
    TrainCore *tc;
    Loader *loader;
    CkptWriter *w;      // rank 0 only
    MetricsLog *log;    // rank 0 only
    const char *yaml, *yaml_sha;
    int rank, world;
    Backend *be;        // the run's backend (never NULL); a CUDA state is copied to host first
} Ctx;

// Snapshot (params + gathered Adam shards) to host memory on rank 0, then write there
// in the background. Collective: every rank calls it. A CUDA backend that holds the state
// on the device streams it to rank 0's files tensor by tensor instead (synchronous, no
// host snapshot; backend_save_checkpoint).
static void save_checkpoint(Ctx *c, long step, long tokens, long skipped_total, double lr) {
    double t0 = now_seconds();
    float *P = NULL, *M = NULL, *V = NULL;
    const int stream = backend_streams_checkpoint(c->be);
    if (!stream) {
        backend_sync_to_host(c->be, c->tc, 1);   // cpu and the host-MPI fallback: no-op (host is authoritative)
        if (c->rank == 0) {
            ckpt_snapshot_buffers(c->w, &P, &M, &V);   // waits for the previous write
            memcpy(P, c->m->params, sizeof(float) * c->m->table.total);
        }
        dist_gather_shards(c->tc->opt.m, M, c->tc->bounds);
        dist_gather_shards(c->tc->opt.v, V, c->tc->bounds);
        if (c->rank != 0) return;
    }
    TrainState st;
    memset(&st, 0, sizeof st);
    st.step = step;
    st.tokens = tokens;
    st.skipped_total = skipped_total;
    st.adam_step = c->tc->opt.step;
    st.world_size = c->world;
    st.global_batch = c->r->global_batch;
    st.micro_batch = c->r->micro_batch;
    st.seq_len = c->r->seq_len;
    loader_get_state(c->loader, &st.loader);
    st.skip = c->tc->skip;
    st.sched = c->tc->sched;
    st.lr = lr;
    st.cfg = c->m->cfg;
    st.n_params = c->m->table.total;
    snprintf(st.recipe_sha256, sizeof st.recipe_sha256, "%s", c->yaml_sha);
    st.recipe_yaml = (char *)c->yaml;
    if (stream) {
        backend_save_checkpoint(c->be, c->tc, c->w, &st);
        if (c->rank != 0) return;
    } else {
        ckpt_commit(c->w, &st);
    }
    const int background = c->r->ckpt_async && !stream;
    // What the checkpoint cost the loop: waiting for the previous write, the snapshot and
    // the shard gathers (async), or the whole write (sync).
    double blocking = now_seconds() - t0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "checkpoint");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "blocking_s", blocking);
    cJSON_AddBoolToObject(o, "async", background);
    metrics_write(c->log, o);
    cJSON_Delete(o);
    printf("checkpoint: step %ld -> %s/checkpoints/step-%08ld (loop blocked %.3fs%s)\n", step, c->r->run_dir, step,
           blocking, background ? ", writing in the background" : "");
    fflush(stdout);
}

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

static void watch_loss(Watch *w, double loss) {
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
typedef struct {
    Backend *be;
    TrainCore *tc;
} DeviceEval;

static void device_eval_forward(void *ctx, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float *tok_ce) {
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

// The schedule a recipe trains with (optim.c).
static void schedule_of(const Recipe *r, Schedule *s) { schedule_from_recipe(r, s); }

// Keys whose change moves the learning rate of the coming steps.
static int moves_lr(const char *key) {
    return !strncmp(key, "schedule.", 9) || !strcmp(key, "optim.lr") || !strcmp(key, "train.max_steps") ||
           !strcmp(key, "train.max_tokens") || !strcmp(key, "train.global_batch") || !strcmp(key, "train.seq_len");
}

// What the resume guard decided (resume_guard).
typedef struct {
    int nlines;
    char *lines[RECIPE_MAX_CHANGES];   // "optim.lr: 0.003 -> 0.001", for the history record
    int complete;                      // the run already trained its unchanged number of steps
    int force_data;                    // a changed data fingerprint is allowed (loader_set_state)
} Guard;

// The resume guard (docs/checkpoints.md, "Changing the recipe on resume"), before anything
// is written: this recipe against the one the checkpoint was trained with, key by key.
// Rank 0 prints every difference; keys that change the training are refused (exit 2)
// unless train.allow_recipe_change lists them, a model change always is, and so is a
// recipe that would train no step past the checkpoint. A checkpoint without a readable
// train_state.json is left to ckpt_load, which says what is wrong with it.
static void resume_guard(const Recipe *r, const char *ckpt_dir, const Loader *loader, int rank, Guard *g) {
    memset(g, 0, sizeof *g);
    g->force_data = recipe_change_allowed(r, "data.paths") || recipe_change_allowed(r, "data.sources") ||
                    recipe_change_allowed(r, "data.mix") || recipe_change_allowed(r, "train.seq_len");
    char path[4700];
    snprintf(path, sizeof path, "%s/train_state.json", ckpt_dir);
    // the stored recipe is read before ckpt_load checks the files: check its bytes first, so
    // a flipped bit is reported as such (file, byte range, the checkpoint to resume from
    // instead), not as a strange recipe key
    char verr[8192];
    if (ckpt_verify_path(path, 1, verr, sizeof verr) < 0) {   // 1: its one region, no warning (ckpt_load gives it)
        char m2[8192 + 4800];
        snprintf(m2, sizeof m2, "cannot resume from %s: %s", ckpt_dir, verr);
        fail_all(rank, 2, m2);
    }
    char *txt = read_file_all(path, NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(j, "recipe"), *st = cJSON_GetObjectItemCaseSensitive(j, "step");
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "loader"), "fingerprint");
    if (!cJSON_IsString(y) || !y->valuestring[0] || !cJSON_IsNumber(st)) {
        if (j && rank == 0) printf("resume: note: %s holds no recipe to compare this one with\n", path);
        cJSON_Delete(j);
        return;
    }
    const long ck_step = (long)st->valuedouble;
    Recipe *old = xmalloc(sizeof *old);   // large (path lists): not on the stack
    char origin[4800];
    snprintf(origin, sizeof origin, "%s (the checkpoint's recipe)", path);
    recipe_load_text(old, y->valuestring, origin);
    const int same_files = cJSON_IsString(fp) && !strcmp(fp->valuestring, loader_fingerprint(loader));
    cJSON_Delete(j);

    RecipeChange *ch = xmalloc(sizeof *ch * RECIPE_MAX_CHANGES);
    const int n = recipe_diff(old, r, ch);
    char *rep = NULL, refused[2048] = "";
    size_t replen = 0;
    FILE *f = open_memstream(&rep, &replen);
    if (!f) die("out of memory (resume_guard)");
    int nref = 0, model = 0, lr_moves = 0;
    for (int i = 0; i < n; i++) {
        char line[600];
        recipe_change_line(&ch[i], line, sizeof line);
        g->lines[g->nlines++] = xstrdup(line);
        const char *why = "does not change the training";
        if (ch[i].cls == RC_MODEL) {
            why = "changes the model: refused";
            model++;
        } else if (ch[i].cls == RC_TRAJECTORY || (ch[i].cls == RC_DATA_FILES && !same_files)) {
            if (recipe_change_allowed(r, ch[i].key)) why = "changes the training: allowed by train.allow_recipe_change";
            else {
                why = "changes the training: refused";
                size_t l = strlen(refused);
                snprintf(refused + l, sizeof refused - l, "%s%s", nref++ ? "," : "", ch[i].key);
            }
        } else if (ch[i].cls == RC_DATA_FILES) why = "the same data files: the fingerprint is unchanged";
        fprintf(f, "  %s   (%s)\n", line, why);
        lr_moves |= moves_lr(ch[i].key);
    }
    if (lr_moves) {
        Schedule so, sn;
        schedule_of(old, &so);
        schedule_of(r, &sn);
        fprintf(f, "  lr: step %ld ran at %.4g; step %ld runs at %.4g (%.4g under the checkpoint's recipe); "
                   "%ld steps in all (were %ld)\n", ck_step, schedule_lr(&so, ck_step), ck_step + 1,
                   schedule_lr(&sn, ck_step + 1), schedule_lr(&so, ck_step + 1), sn.max_steps, so.max_steps);
    }
    fclose(f);
    const long total = recipe_total_steps(r), old_total = recipe_total_steps(old);
    char msg[16384];
    // Checked first: allowing the change would not help.
    if (total < ck_step || (total == ck_step && total != old_total)) {
        snprintf(msg, sizeof msg, "cannot resume from %s: this recipe trains %ld steps (train.max_steps / "
                 "train.max_tokens), at or below the checkpoint's step %ld, so nothing would be trained; give more "
                 "steps to continue, or a new train.run_dir for a new run. Changes from the checkpoint's recipe:\n%s",
                 ckpt_dir, total, ck_step, rep);
        fail_all(rank, 2, msg);
    }
    if (model || nref) {
        int o = snprintf(msg, sizeof msg, "cannot resume from %s with this recipe: it differs from the checkpoint's in "
                         "%d key%s:\n%s", ckpt_dir, n, n > 1 ? "s" : "", rep);
        if (model)
            snprintf(msg + o, sizeof msg - (size_t)o, "the model cannot change on resume: a changed model is a new run "
                     "(a new train.run_dir, with train.load_path=%s to start from these weights)", r->run_dir);
        else
            snprintf(msg + o, sizeof msg - (size_t)o, "if the change is meant, allow it: train.allow_recipe_change=%s "
                     "(docs/checkpoints.md); for a new run, give a new train.run_dir (train.load_path=%s starts it "
                     "from these weights)", refused, r->run_dir);
        fail_all(rank, 2, msg);
    }
    g->complete = total == ck_step;
    if (rank == 0 && n)
        printf("resume: the recipe differs from the checkpoint's (step %ld) in %d key%s:\n%s", ck_step, n,
               n > 1 ? "s" : "", rep);
    if (rank == 0 && g->complete)
        printf("resume: the run is complete: step %ld of %ld; nothing to train (more steps: raise train.max_steps "
               "with train.allow_recipe_change=train.max_steps)\n", ck_step, total);
    free(rep);
    free(ch);
    free(old);
}

static int is_checkpoint_dir(const char *p) {
    char f[4700];
    snprintf(f, sizeof f, "%s/train_state.json", p);
    return access(f, R_OK) == 0;
}

// Resolve train.load_path: a checkpoint dir as is; a run dir to its newest checkpoint,
// else to its model.safetensors; a directory with only model.safetensors (an import) or a
// .safetensors file as weights.
static int load_source(const Recipe *r, char *out, size_t outlen, char *err, size_t errlen) {
    const char *p = r->load_path;
    struct stat sb;
    if (stat(p, &sb) != 0) {
        snprintf(err, errlen, "train.load_path: %s does not exist", p);
        return -1;
    }
    if (S_ISREG(sb.st_mode)) {
        snprintf(out, outlen, "%s", p);
        return 0;
    }
    if (is_checkpoint_dir(p)) {
        snprintf(out, outlen, "%s", p);
        return 0;
    }
    char ck[4600];
    int rc = ckpt_resolve(p, "auto", ck, sizeof ck, err, errlen);
    if (rc < 0) return -1;
    if (rc == 1) {
        snprintf(out, outlen, "%s", ck);
        return 0;
    }
    snprintf(ck, sizeof ck, "%s/model.safetensors", p);
    if (access(ck, R_OK) == 0) {
        snprintf(out, outlen, "%s", ck);
        return 0;
    }
    snprintf(err, errlen, "train.load_path: %s holds no checkpoint (checkpoints/step-*) and no model.safetensors", p);
    return -1;
}

// ---- the run, step by step ------------------------------------------------------------------
// What a run holds from its start to its end (this rank's; w and log are rank 0's).
typedef struct {
    const Recipe *r;
    const char *recipe_path;    // for the banner
    int rank, W;
    int T, GB, MB, local_batch, micro_per_rank;
    long total_steps;
    BackendKind bkind;
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
    const char *eval_on;        // "cpu fp32", "cuda bf16", "cuda fp32" (the record's eval/device)
    MetricsLog log;
    CkptWriter *w;
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

// The shape of the job: the model, the steps, this rank's share of the global batch, the
// backend and precision. Bad input: every rank exits 2 with nothing written.
static void run_plan(Run *u) {
    const Recipe *r = u->r;
    u->cfg = recipe_model_config(r);
    u->total_steps = recipe_total_steps(r);
    u->T = r->seq_len, u->GB = r->global_batch, u->MB = r->micro_batch;
    const int GB = u->GB, MB = u->MB, W = u->W;
    // Elastic world size: the global batch is fixed by the recipe, ranks split its micro-batches.
    if (GB % MB != 0 || (GB / MB) % W != 0) {
        snprintf(u->msg, sizeof u->msg,
                 "train.global_batch %d / train.micro_batch %d = %d micro-batches do not split over %d ranks "
                 "(micro-batches per rank must be an integer)", GB, MB, GB / MB, W);
        fail_all(u->rank, 2, u->msg);
    }
    u->local_batch = GB / W, u->micro_per_rank = u->local_batch / MB;
    // train.backend / train.precision (src/train/backend.h): a CUDA run in a binary built
    // without CUDA, or on a machine without a device, stops here with nothing written.
    if (backend_resolve(r->backend, r->precision, &u->bkind, &u->bprec, u->msg, sizeof u->msg) != 0)
        fail_all(u->rank, 2, u->msg);
    // The CPU model trains with its matmuls in the run's precision (run_eval switches to
    // fp32 for evaluation; under cuda the host copy evaluates only with eval.device=cpu).
    u->mprec = u->bkind == BACKEND_CPU && u->bprec == PRECISION_BF16 ? PRECISION_BF16 : PRECISION_FP32;
}

// Open the data, the eval sets and the checkpoint before anything is written: bad input
// stops the run with nothing on disk.
static void run_open_inputs(Run *u) {
    const Recipe *r = u->r;
    recipe_loader_config(r, &u->lc, u->W, u->rank);
    u->loader = loader_create(&u->lc);
    u->ev = u->rank == 0 && !r->eval_off ? eval_create(r) : NULL;   // rank 0 evaluates (others wait)

    if (u->rank == 0) ckpt_clean_temp(r->run_dir);
    dist_barrier();
    u->resume = ckpt_resolve(r->run_dir, r->resume, u->ckpt_dir, sizeof u->ckpt_dir, u->msg, sizeof u->msg);
    if (u->resume < 0) fail_all(u->rank, 2, u->msg);
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
    if (u->bkind == BACKEND_CUDA ? model_check_size(&u->cfg, MB, T, lim, sizeof lim)
                                 : model_check_memory(&u->cfg, MB, T, u->mprec, lim, sizeof lim))
        fail_all(u->rank, 2, lim);
    if (u->bkind == BACKEND_CUDA) model_create_lazy(&u->m, &u->cfg, MB, T);
    else model_create(&u->m, &u->cfg, MB, T);
    model_set_precision(&u->m, u->mprec);
    param_init(&u->m.table, u->m.params, r->seed);
    TrainCore *tc = &u->tc;
    tc->model = &u->m;
    train_core_shard(tc, u->W, u->rank, u->micro_per_rank, r->beta1, r->beta2, r->eps, r->weight_decay, r->decay_embedding);
    gradacc_init(&tc->acc, u->m.table.total);
    skipstep_from_recipe(&tc->skip, r);
    tc->use_skip = r->skip_step;
    tc->max_grad_norm = r->max_grad_norm;
    tc->z_loss = (float)r->z_loss;
    schedule_of(r, &tc->sched);

    u->yaml = recipe_to_yaml(r);
    ckpt_sha256_hex(u->yaml, strlen(u->yaml), u->yaml_sha);
}

// train.resume: the checkpoint's weights, this rank's Adam shard, step, tokens, skip-step
// history and loader position.
static void run_resume(Run *u) {
    TrainCore *tc = &u->tc;
    char *msg = u->msg;
    TrainState st;
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    double t0 = now_seconds();
    if (ckpt_load(u->ckpt_dir, &u->m.table, &u->cfg, u->m.params, tc->opt.m, tc->opt.v, lo, hi, &st, msg, sizeof u->msg) != 0) {
        char m2[8192 + 4700];
        snprintf(m2, sizeof m2, "cannot resume from %s: %s", u->ckpt_dir, msg);
        fail_all(u->rank, 2, m2);
    }
    if (!rope_scaling_equal(&st.cfg.rope_scaling, &u->cfg.rope_scaling)) {
        char a[160], b[160];
        snprintf(msg, sizeof u->msg, "cannot resume from %s: it was trained with model.rope_scaling %s, the recipe has %s "
                 "(changing it is a stage transition: start a new run_dir with train.load_path)", u->ckpt_dir,
                 rope_scaling_describe(&st.cfg.rope_scaling, a, sizeof a), rope_scaling_describe(&u->cfg.rope_scaling, b, sizeof b));
        fail_all(u->rank, 2, msg);
    }
    u->start_step = st.step;
    u->tokens = st.tokens;
    u->skipped_total = st.skipped_total;
    tc->opt.step = st.adam_step;
    skipstep_restore(&tc->skip, &st.skip);
    loader_set_state(u->loader, &st.loader, u->guard.force_data);
    if (u->rank == 0)
        printf("resume: %s (step %ld, %ld tokens, saved by %d rank%s, now %d) in %.2fs\n", u->ckpt_dir, st.step,
               st.tokens, st.world_size, st.world_size > 1 ? "s" : "", u->W, now_seconds() - t0);
    ckpt_state_free(&st);
}

// train.load_path, the OLMo 3 stage transition: a fresh run starting from another run's
// weights (and Adam moments with load_optim); step counter, schedule and loader restart
// unless load_trainer_state.
static void run_load_path(Run *u) {
    const Recipe *r = u->r;
    TrainCore *tc = &u->tc;
    char *msg = u->msg;
    const int rank = u->rank;
    char src[4600];
    if (load_source(r, src, sizeof src, msg, sizeof u->msg) != 0) fail_all(rank, 2, msg);
    int need_ckpt = r->load_optim || r->load_trainer_state;
    if (!is_checkpoint_dir(src)) {
        if (need_ckpt) {
            snprintf(msg, sizeof u->msg, "train.load_path %s: load_optim/load_trainer_state need a checkpoint "
                     "(a step-* directory with train_state.json and optim.safetensors), found only weights", src);
            fail_all(rank, 2, msg);
        }
        if (params_load_safetensors(&u->m.table, u->m.params, src, msg, sizeof u->msg) != 0) {
            char m2[8400];
            snprintf(m2, sizeof m2, "train.load_path: %s", msg);
            fail_all(rank, 2, m2);
        }
        if (rank == 0) printf("load_path: weights from %s (optimizer, step and loader start fresh)\n", src);
        return;
    }
    TrainState st;
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    if (ckpt_load(src, &u->m.table, &u->cfg, u->m.params, r->load_optim ? tc->opt.m : NULL, r->load_optim ? tc->opt.v : NULL,
                  lo, hi, &st, msg, sizeof u->msg) != 0) {
        char m2[8192 + 4700];
        snprintf(m2, sizeof m2, "train.load_path %s: %s", src, msg);
        fail_all(rank, 2, m2);
    }
    // Adam's bias correction continues from the loaded moments' step count, as
    // OLMo-core's optimizer state dict carries it.
    if (r->load_optim) tc->opt.step = st.adam_step;
    if (r->load_trainer_state) {
        u->start_step = st.step;
        u->tokens = st.tokens;
        u->skipped_total = st.skipped_total;
        skipstep_restore(&tc->skip, &st.skip);
        loader_set_state(u->loader, &st.loader, 0);
    }
    if (rank == 0)
        printf("load_path: %s (step %ld): weights%s%s\n", src, st.step, r->load_optim ? " + Adam moments" : "",
               r->load_trainer_state ? " + trainer state" : "; step, schedule and loader restart");
    if (rank == 0 && !rope_scaling_equal(&st.cfg.rope_scaling, &u->cfg.rope_scaling)) {
        char a[160], b[160];
        printf("load_path: rope scaling %s -> %s (stage transition)\n",
               rope_scaling_describe(&st.cfg.rope_scaling, a, sizeof a), rope_scaling_describe(&u->cfg.rope_scaling, b, sizeof b));
    }
    ckpt_state_free(&st);
}

// The backend the steps run on (cpu: the host Model; cuda: the device model, loaded from
// the host's state) and where in-loop evaluation runs: on the device model (no host sync,
// the run's precision) unless eval.device=cpu asks for the fp32 CPU model.
static void run_backend(Run *u) {
    u->be = backend_create(u->bkind, u->bprec, &u->tc, u->MB, u->T, u->msg, sizeof u->msg);
    if (!u->be) fail_all(u->rank, 2, u->msg);
    backend_sync_from_host(u->be, &u->tc);   // cuda: initialized or loaded params + Adam m, v -> device
    const int cuda = backend_kind(u->be) == BACKEND_CUDA;
    u->dev_eval = cuda && !strcmp(u->r->eval_device, "auto");
    u->deval = (DeviceEval){u->be, &u->tc};
    if (u->dev_eval) eval_set_forward(u->ev, device_eval_forward, &u->deval);   // ev NULL (ranks > 0): no-op
    u->eval_on = !u->dev_eval ? "cpu fp32" : u->bprec == PRECISION_BF16 ? "cuda bf16" : "cuda fp32";
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

// MFU's ceiling (peak.h): the hardware the whole job runs on. CPU: the per-core GEMM peak
// of the run's precision times the physical cores the ranks use, each counted once; the
// other ranks sleep while rank 0 calibrates, so they do not slow it. CUDA: one peak per
// device, one device per rank. Sets u->peak and u->peak_desc (rank 0) and returns the job's
// cores.
static void run_peak(Run *u, JobCores *jc) {
    const Recipe *r = u->r;
    int devices = 0;
    const int cuda = backend_kind(u->be) == BACKEND_CUDA;
#ifdef OLMO_CUDA
    if (cuda) devices = cuda_device_count(NULL, 0);
#endif
    job_cores(jc, devices);
    if (cuda) {
        double dev = r->peak_flops > 0 ? r->peak_flops : u->bprec == PRECISION_BF16 ? 989.5e12 : 67e12;
        u->peak = dev * jc->gpus;
        snprintf(u->peak_desc, sizeof u->peak_desc, "%d GPU%s x %.1f TFLOP/s = %.1f TFLOP/s (%s)", jc->gpus,
                 jc->gpus > 1 ? "s" : "", dev / 1e12, u->peak / 1e12,
                 r->peak_flops > 0 ? "recipe perf.peak_flops per GPU"
                 : u->bprec == PRECISION_BF16 ? "H100/H200 SXM dense bf16 datasheet; perf.peak_flops overrides"
                                              : "H100/H200 SXM fp32 datasheet; perf.peak_flops overrides");
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
    printf("olmo train: %s | %zu params | %ld steps x %d instances x %d tokens | %d rank%s x %d threads on %d "
           "physical core%s%s | %d micro-batch%s of %d per rank%s\n",
           u->recipe_path, model_num_params(&u->cfg), u->total_steps, u->GB, u->T, W, W > 1 ? "s" : "",
           omp_get_max_threads(), jc->cores, jc->cores > 1 ? "s" : "", jc->hosts > 1 ? " (all hosts)" : "",
           u->micro_per_rank, u->micro_per_rank > 1 ? "es" : "", u->MB, over);
    size_t lo0, hi0;
    train_core_range(&u->tc, &lo0, &hi0);
    printf("ZeRO-1: Adam m, v %.2f MiB on rank 0 (shard %zu..%zu; %.2f MiB unsharded)\n",
           8.0 * (double)(hi0 - lo0) / 1048576.0, lo0, hi0, 8.0 * (double)u->m.table.total / 1048576.0);
    printf("MFU: window-aware count %.4g GFLOP/token (OLMo-core v2.3 count %.4g: mfu_olmo_core_v2_3) x tokens/s of "
           "the job vs %s\n", u->fpt / 1e9, u->fpt_v23 / 1e9, u->peak_desc);
    if (backend_kind(u->be) == BACKEND_CUDA) {
        char desc[512];
        backend_describe(u->be, desc, sizeof desc);
        printf("%s\n", desc);
    } else if (u->bprec == PRECISION_BF16) {
        const int emu = !strcmp(matmul_bf16_engine(), "emulated");
        printf("backend: cpu, bf16 matmul operands (%s engine), fp32 accumulation, activations, master weights "
               "and Adam%s\n", matmul_bf16_engine(),
               emu ? " (no native bf16 engine for this CPU, or switched off: emulated, slower than fp32; "
                     "docs/performance.md)" : "");
    }
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
        schedule_of(r, &s);
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

// Rank 0: the run directory (metrics.jsonl, recipe.yml, the recipe history), the
// checkpoint writer, then the banner and its warnings.
static void run_open_outputs(Run *u, const JobCores *jc) {
    const Recipe *r = u->r;
    if (mkdir_p(r->run_dir) != 0) die("cannot create run_dir %s", r->run_dir);
    if (u->resume == 1) metrics_truncate(r->run_dir, u->start_step);
    metrics_open(&u->log, r->run_dir, u->resume == 1 ? "a" : "w");
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
    print_banner(u, jc);
    print_warnings(u);
    fflush(stdout);
}

// In-loop evaluation at `step` when `due` (a collective decision when the CPU model of a
// CUDA run evaluates: every rank takes part in bringing the weights to the host, NCCL
// gathering the shards on rank 0; on the device model rank 0 needs nobody, the others
// wait at the next collective).
static void run_eval_if(Run *u, int due, long step) {
    if (u->host_eval_sync) due = dist_any(due);
    if (due) {
        if (u->host_eval_sync) backend_sync_to_host(u->be, &u->tc, 0);
        if (u->ev) run_eval(u->ev, &u->m, &u->log, step, &u->watch, u->eval_on);
    }
}

// Rank 0: the step's metrics record, and its progress line every train.log_every steps
// (and at the first and the last).
static void log_step(Run *u, const Loop *lp, double dt) {
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

// The steps: this rank's block of the global batch -> train_step -> the record and
// progress line, in-loop evaluation, stop decisions (signal, train.stop_at, divergence),
// checkpoints every ckpt.interval steps.
static void run_loop(Run *u, Ctx *c, Loop *lp) {
    const Recipe *r = u->r;
    const int GB = u->GB, MB = u->MB, T = u->T;
    int32_t *inputs = xmalloc(sizeof(int32_t) * (size_t)u->local_batch * T);
    int32_t *targets = xmalloc(sizeof(int32_t) * (size_t)u->local_batch * T);
    lp->step = u->start_step, lp->last_saved = u->start_step;
    while (lp->step < u->total_steps) {
        const long step = ++lp->step;
        double t0 = now_seconds();
        loader_next_batch(u->loader, inputs, targets);
        lp->res = backend_train_step(u->be, &u->tc, inputs, targets, GB, MB, T, step, NULL);
        double dt = now_seconds() - t0;
        lp->t_train += dt;
        lp->steps_run++;
        u->tokens += (long)GB * T;
        u->skipped_total += lp->res.skipped;
        if (u->rank == 0) log_step(u, lp, dt);
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
        if (dist_any(g_stop)) {
            lp->stopped = 1;
            break;
        }
        if (r->ckpt_interval > 0 && step % r->ckpt_interval == 0 && step < u->total_steps) {
            save_checkpoint(c, step, u->tokens, u->skipped_total, lp->res.lr);
            lp->last_saved = step;
        }
    }
    free(inputs);
    free(targets);
}

// The last checkpoint, then (rank 0) the final weights RUN_DIR/model.safetensors and the
// closing line, or why the run stopped early.
static void run_finish(Run *u, Ctx *c, const Loop *lp) {
    const long step = lp->step;
    backend_sync_to_host(u->be, &u->tc, 0);   // cuda: the final weights on the host for model.safetensors
    if (step != lp->last_saved || (lp->steps_run == 0 && u->resume != 1))
        save_checkpoint(c, step, u->tokens, u->skipped_total, lp->res.lr);
    if (u->rank != 0) return;
    double wsec = ckpt_wait(u->w);
    if (wsec > 0) printf("checkpoint: %s complete (last write %.2fs)\n", ckpt_last_path(u->w), wsec);
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

int train_run(const Recipe *r, const char *recipe_path) {
    Run *u = xcalloc(1, sizeof *u);   // large (the loader config, the guard's lines): not on the stack
    u->r = r;
    u->recipe_path = recipe_path;
    u->rank = dist_rank(), u->W = dist_world();
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
    Ctx c = {r, &u->m, &u->tc, u->loader, u->w, &u->log, u->yaml, u->yaml_sha, u->rank, u->W, u->be};

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    // Evaluation hook 1/3: before training (fresh runs only; a resumed run had it).
    memo_alarm_init(&u->watch.alarm, r->memo_k, r->memo_drop, r->memo_ratio);
    if (r->memo_set[0]) snprintf(u->watch.set, sizeof u->watch.set, "eval/%s/ce", r->memo_set);
    u->host_eval_sync = backend_kind(u->be) == BACKEND_CUDA && !u->dev_eval;
    run_eval_if(u, u->ev && u->start_step == 0, 0);

    Loop lp = {0};
    lp.t_start = now_seconds();
    run_loop(u, &c, &lp);
    run_finish(u, &c, &lp);

    if (u->ev) eval_free(u->ev);
    free(u->yaml);
    for (int i = 0; i < u->guard.nlines; i++) free(u->guard.lines[i]);
    loader_free(u->loader);
    recipe_loader_config_free(&u->lc);
    backend_free(u->be);
    train_core_free(&u->tc);
    model_destroy(&u->m);
    const int rc = lp.diverged ? 1 : 0;
    free(u);
    return rc;
}
