// resume.c: how a run starts from a checkpoint (run.h). train.resume: the resume guard
// (this recipe against the checkpoint's, before anything is written), the checkpoint's
// weights, Adam shard, counters, skip-step history and loader position, and metrics.jsonl
// cut back to the checkpoint's step. train.load_path, the OLMo 3 stage transition: another
// run's weights (its checkpoint or weights file, resolved by ckpt_source_resolve,
// io/ckpt_dir.h), optionally its Adam moments and trainer state.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ckpt_dir.h"
#include "io/ckpt_verify.h"
#include "io/params_io.h"
#include "train/optim.h"
#include "train/run.h"
#include "util/common.h"

// On resume: keep the metrics records of steps <= step (and lines without a step), drop
// the rest and any torn last line, rewritten atomically; the run then appends.
void metrics_truncate(const char *run_dir, long step) {
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

// Keys whose change moves the learning rate of the coming steps.
static int moves_lr(const char *key) {
    return !strncmp(key, "schedule.", 9) || !strcmp(key, "optim.lr") || !strcmp(key, "train.max_steps") ||
           !strcmp(key, "train.max_tokens") || !strcmp(key, "train.global_batch") || !strcmp(key, "train.seq_len");
}

// The resume guard (docs/checkpoints.md, "Changing the recipe on resume"), before anything
// is written: this recipe against the one the checkpoint was trained with, key by key.
// Rank 0 prints every difference; keys that change the training are refused (exit 2)
// unless train.allow_recipe_change lists them, a model change always is, and so is a
// recipe that would train no step past the checkpoint. A checkpoint without a readable
// train_state.json is left to ckpt_load, which says what is wrong with it.
void resume_guard(const Recipe *r, const char *ckpt_dir, const Loader *loader, int rank, Guard *g) {
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
        schedule_from_recipe(old, &so);
        schedule_from_recipe(r, &sn);
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


// The newest complete checkpoint of the run other than `bad` (a step-* directory is complete
// by construction: checkpoint.h), as a sentence for a refusal; "" when there is none.
static void last_complete(const Run *u, const char *bad, char *out, size_t outlen) {
    char ckdir[4200], p[4300];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", u->r->run_dir);
    int n;
    long *steps = ckpt_list_steps(ckdir, &n);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/step-%08ld", ckdir, steps[i]);
        if (!strcmp(p, bad)) continue;
        snprintf(out, outlen, "; the last complete checkpoint is %s (train.resume=%s resumes from it)", p, p);
        break;
    }
    free(steps);
}

// train.resume: the checkpoint's weights, this rank's Adam shard, step, tokens, skip-step
// history and loader position.
void run_resume(Run *u) {
    TrainCore *tc = &u->tc;
    char *msg = u->msg;
    TrainState st;
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    double t0 = now_seconds();
    if (ckpt_load(u->ckpt_dir, &u->m.table, &u->cfg, u->m.params, tc->opt.m, tc->opt.v, lo, hi, &st, msg, sizeof u->msg) != 0) {
        char m2[8192 + 4700 + 9000], last[9000];
        last_complete(u, u->ckpt_dir, last, sizeof last);
        snprintf(m2, sizeof m2, "cannot resume from %s: %s%s", u->ckpt_dir, msg, last);
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

// Resolve train.load_path (ckpt_source_resolve, CKPT_FOR_TRAINING): a checkpoint directory
// as is; a run directory to its newest checkpoint, else to its model.safetensors; a
// directory with only model.safetensors (an import) or a .safetensors file as weights. An
// HF directory the trainer cannot read as weights is refused by name. Bad input: every
// rank exits 2.
static void load_source(Run *u, CkptSource *src) {
    const char *p = u->r->load_path;
    int rc = ckpt_source_resolve(p, CKPT_FOR_TRAINING, src, u->msg, sizeof u->msg);
    if (rc == CKPT_SRC_MISSING) snprintf(u->msg, sizeof u->msg, "train.load_path: %s does not exist", p);
    if (rc == CKPT_SRC_EMPTY)
        snprintf(u->msg, sizeof u->msg, "train.load_path: %s holds no checkpoint (checkpoints/step-*) and no "
                 "model.safetensors", p);
    if (rc == 0 && src->kind == CKPT_SRC_HF) {
        snprintf(u->msg, sizeof u->msg, "train.load_path: %s is a Hugging Face directory without a model.safetensors "
                 "(its weights in shards): convert it with `olmo import-hf %s OUT`, then give train.load_path=OUT", p, p);
        rc = -1;
    }
    if (rc != 0) fail_all(u->rank, 2, u->msg);
}

// train.load_path, the OLMo 3 stage transition: a fresh run starting from another run's
// weights (and Adam moments with load_optim); step counter, schedule and loader restart
// unless load_trainer_state.
void run_load_path(Run *u) {
    const Recipe *r = u->r;
    TrainCore *tc = &u->tc;
    char *msg = u->msg;
    const int rank = u->rank;
    CkptSource source;
    load_source(u, &source);
    const char *src = source.path;
    int need_ckpt = r->load_optim || r->load_trainer_state;
    if (source.kind != CKPT_SRC_CHECKPOINT) {
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
