// ckpt_dir.c: the checkpoint directories of a run on disk: names, listing, which one to
// resume from (ckpt_dir.h).
#include "io/ckpt_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

int ckpt_resolve(const char *run_dir, const char *resume, char *out, size_t outlen, char *err, size_t errlen) {
    if (!strcmp(resume, "never")) return 0;
    if (strcmp(resume, "auto") != 0) {
        if (!is_dir(resume)) {
            snprintf(err, errlen, "train.resume=%s: no such checkpoint directory", resume);
            return -1;
        }
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
