// ckpt_dir.c: the checkpoint directories of a run on disk: names, listing, which one to
// resume from, and what a CKPT argument names (ckpt_dir.h).
#include "io/ckpt_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/common.h"

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}
// "step-00001000" -> 1000; -1 if the name is not a checkpoint directory name.
long ckpt_step_of_name(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    char *end;
    errno = 0;
    long s = strtol(name + 5, &end, 10);
    if (errno || *end || end == name + 5 || s < 0) return -1;
    return s;
}
static int cmp_long_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
// Steps of every step-* directory under ckdir, newest first; *n receives the count.
long *ckpt_list_steps(const char *ckdir, int *n) {
    *n = 0;
    DIR *d = opendir(ckdir);
    if (!d) return NULL;
    int cap = 16;
    long *s = xmalloc(sizeof(long) * (size_t)cap);
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        long st = ckpt_step_of_name(e->d_name);
        if (st < 0) continue;
        snprintf(p, sizeof p, "%s/%s", ckdir, e->d_name);
        if (!is_dir(p)) continue;
        if (*n == cap) s = xrealloc(s, sizeof(long) * (size_t)(cap *= 2));
        s[(*n)++] = st;
    }
    closedir(d);
    qsort(s, (size_t)*n, sizeof(long), cmp_long_desc);
    return s;
}

int ckpt_is_incomplete(const char *dir) {
    char p[4600];
    snprintf(p, sizeof p, "%s/%s", dir, CKPT_INCOMPLETE_NAME);
    return access(p, F_OK) == 0;
}

// train.resume=PATH names a checkpoint whose write did not finish: a sharded one with its
// marker (a rank failed or was killed before every part was in), or a writer's .tmp-*
// directory. Refused here, before the trainer's clean-up of .tmp-* directories could remove
// it and leave only "no such directory"; the message names the run's last complete one.
static int refuse_incomplete(const char *run_dir, const char *resume, char *err, size_t errlen) {
    const char *base = strrchr(resume, '/');
    base = base ? base + 1 : resume;
    const int marker = ckpt_is_incomplete(resume);
    if (!marker && strncmp(base, ".tmp-", 5) != 0) return 0;
    char ckdir[4096];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
    int n;
    long *steps = ckpt_list_steps(ckdir, &n);
    int used = snprintf(err, errlen, "cannot resume from %s: %s", resume,
                        marker ? "an incomplete sharded checkpoint (it still holds '" CKPT_INCOMPLETE_NAME "': not every "
                                 "rank finished writing its part, a rank failed or was killed)"
                               : "an incomplete checkpoint (a .tmp-* directory: its write did not finish)");
    if (used > 0 && (size_t)used < errlen) {
        if (n > 0)
            snprintf(err + used, errlen - (size_t)used, "; the last complete checkpoint is %s/step-%08ld "
                     "(train.resume=%s/step-%08ld resumes from it)", ckdir, steps[0], ckdir, steps[0]);
        else
            snprintf(err + used, errlen - (size_t)used, "; %s holds no complete checkpoint", ckdir);
    }
    free(steps);
    return -1;
}

int ckpt_resolve(const char *run_dir, const char *resume, char *out, size_t outlen, char *err, size_t errlen) {
    if (!strcmp(resume, "never")) return 0;
    if (strcmp(resume, "auto") != 0) {
        if (!is_dir(resume)) {
            snprintf(err, errlen, "train.resume=%s: no such checkpoint directory", resume);
            return -1;
        }
        if (refuse_incomplete(run_dir, resume, err, errlen)) return -1;
        snprintf(out, outlen, "%s", resume);
        return 1;
    }
    char ckdir[4096], p[4600];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
    snprintf(p, sizeof p, "%s/latest", ckdir);
    size_t len;
    char *latest = read_file_all(p, &len);
    if (latest) {
        latest[strcspn(latest, "\r\n")] = 0;
        char target[4700];
        snprintf(target, sizeof target, "%s/%s", ckdir, latest);
        if (ckpt_step_of_name(latest) < 0 || !is_dir(target)) {
            snprintf(err, errlen, "%s names '%s', which is not a checkpoint directory in %s (remove %s to start from "
                     "the newest step-* directory, or set train.resume=PATH)", p, latest, ckdir, p);
            free(latest);
            return -1;
        }
        free(latest);
    }
    // The newest step-* directory: a kill between the rename and the `latest` update
    // leaves `latest` one behind, and the renamed directory is complete by construction.
    int n;
    long *steps = ckpt_list_steps(ckdir, &n);
    if (n == 0) {
        free(steps);
        return 0;
    }
    snprintf(out, outlen, "%s/step-%08ld", ckdir, steps[0]);
    free(steps);
    return 1;
}

// ---- what a CKPT argument names -------------------------------------------------------------
// The ways a directory can hold a model, tried in the order of the caller's use (ckpt_dir.h).
typedef enum { PROBE_HF, PROBE_CHECKPOINT, PROBE_MODEL_FILE, PROBE_NEWEST, PROBE_END } Probe;
static const Probe probe_order[2][PROBE_END + 1] = {
    [CKPT_FOR_WEIGHTS] = {PROBE_HF, PROBE_CHECKPOINT, PROBE_MODEL_FILE, PROBE_NEWEST, PROBE_END},
    [CKPT_FOR_TRAINING] = {PROBE_CHECKPOINT, PROBE_NEWEST, PROBE_MODEL_FILE, PROBE_HF, PROBE_END},
};

// DIR/config.json is a JSON object with a model_type (what transformers' AutoConfig needs).
static int is_hf_dir(const char *dir) {
    char p[4700];
    snprintf(p, sizeof p, "%s/config.json", dir);
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    char *txt = read_file_all(p, NULL);
    cJSON *o = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    int hf = cJSON_IsObject(o) && cJSON_GetObjectItemCaseSensitive(o, "model_type") != NULL;
    cJSON_Delete(o);
    return hf;
}

// One probe of directory dir: 1 with what it found in *kind and path, 0 when dir is not
// held that way, -1 with a message in err.
static int probe(Probe pr, const char *dir, CkptSourceKind *kind, char *path, size_t n, char *err, size_t errlen) {
    struct stat sb;
    switch (pr) {
    case PROBE_HF:
        *kind = CKPT_SRC_HF;
        snprintf(path, n, "%s", dir);
        return is_hf_dir(dir);
    case PROBE_CHECKPOINT:
        *kind = CKPT_SRC_CHECKPOINT;
        snprintf(path, n, "%s/train_state.json", dir);
        if (access(path, R_OK) != 0) return 0;
        snprintf(path, n, "%s", dir);
        return 1;
    case PROBE_MODEL_FILE:
        *kind = CKPT_SRC_WEIGHTS;
        snprintf(path, n, "%s/model.safetensors", dir);
        return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
    case PROBE_NEWEST:
        *kind = CKPT_SRC_CHECKPOINT;
        return ckpt_resolve(dir, "auto", path, n, err, errlen);
    case PROBE_END: break;
    }
    return 0;
}

int ckpt_source_resolve(const char *ckpt, CkptUse use, CkptSource *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    struct stat sb;
    if (stat(ckpt, &sb) != 0) return CKPT_SRC_MISSING;
    char path[4700];
    int found = 0;
    if (S_ISDIR(sb.st_mode) && ckpt_is_incomplete(ckpt)) {   // its files hold parts not yet written
        snprintf(err, errlen, "%s is an incomplete sharded checkpoint (it holds '%s': not every rank finished "
                 "writing its part); not read", ckpt, CKPT_INCOMPLETE_NAME);
        return -1;
    }
    if (S_ISREG(sb.st_mode)) {
        s->kind = CKPT_SRC_WEIGHTS;
        snprintf(path, sizeof path, "%s", ckpt);
        found = 1;
    } else if (S_ISDIR(sb.st_mode)) {
        for (const Probe *pr = probe_order[use]; *pr != PROBE_END && !found; pr++) {
            found = probe(*pr, ckpt, &s->kind, path, sizeof path, err, errlen);
            if (found < 0) return -1;
        }
    }
    if (!found) return CKPT_SRC_EMPTY;
    if (strlen(path) >= sizeof s->path) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    snprintf(s->path, sizeof s->path, "%s", path);
    return 0;
}
