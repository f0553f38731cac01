// history.c: the run directory's recipe history (history.h): recipes/step-N.yml files
// and the "recipe" records of metrics.jsonl. Kept so that a run directory states what
// every one of its steps was trained with, however often the run was resumed.
#include "train/history.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

// The step of a "step-NNNNNNNN.yml" name, or -1.
static long step_of(const char *name) {
    long s;
    char tail[8];
    if (sscanf(name, "step-%ld%7s", &s, tail) != 2 || strcmp(tail, ".yml") || s < 0) return -1;
    return s;
}

void history_begin(const char *run_dir, long step, const char *yaml, int fresh, const char *const *changes,
                   int nchanges, MetricsLog *log) {
    char dir[4200], path[4600];
    snprintf(dir, sizeof dir, "%s/recipes", run_dir);
    if (mkdir_p(dir) != 0) die("cannot create %s", dir);
    // The newest recipe at or before `step`; later ones are history being retrained.
    long newest = -1;
    DIR *d = opendir(dir);
    if (!d) die("cannot read %s", dir);
    for (struct dirent *e; (e = readdir(d));) {
        long s = step_of(e->d_name);
        if (s < 0) continue;
        if (s > step || fresh) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) != 0) die("cannot remove %s", path);
            printf("recipes: removed %s (%s)\n", path, fresh ? "a new run starts here" : "its steps are trained again");
        } else if (s > newest) newest = s;
    }
    closedir(d);
    if (newest >= 0 && !fresh) {
        snprintf(path, sizeof path, "%s/step-%08ld.yml", dir, newest);
        char *old = read_file_all(path, NULL);
        int same = old && !strcmp(old, yaml);
        free(old);
        if (same) return;   // the segment this run continues
    }
    char file[128];
    snprintf(file, sizeof file, "recipes/step-%08ld.yml", step);
    snprintf(path, sizeof path, "%s/%s", run_dir, file);
    if (write_file_atomic(path, yaml, strlen(yaml)) != 0) die("cannot write %s", path);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "recipe");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddStringToObject(o, "file", file);
    cJSON *a = cJSON_AddArrayToObject(o, "changes");
    for (int i = 0; i < nchanges; i++) cJSON_AddItemToArray(a, cJSON_CreateString(changes[i]));
    metrics_write(log, o);
    cJSON_Delete(o);
    if (step > 0) printf("recipes: steps after %ld run under %s/%s\n", step, run_dir, file);
}

typedef struct {
    HistorySegment *s;
    int n, cap;
} SegList;

static void add_segment(cJSON *o, void *ctx) {
    SegList *l = ctx;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind"), *st = cJSON_GetObjectItemCaseSensitive(o, "step");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file"), *ch = cJSON_GetObjectItemCaseSensitive(o, "changes");
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "recipe") && cJSON_IsNumber(st) && cJSON_IsString(file)) {
        long step = (long)st->valuedouble;
        while (l->n > 0 && l->s[l->n - 1].step >= step) free(l->s[--l->n].changes);
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 8;
            l->s = xrealloc(l->s, sizeof *l->s * (size_t)l->cap);
        }
        HistorySegment *h = &l->s[l->n++];
        h->step = step;
        snprintf(h->file, sizeof h->file, "%s", file->valuestring);
        size_t len = 1;
        const cJSON *it;
        cJSON_ArrayForEach(it, ch) if (cJSON_IsString(it)) len += strlen(it->valuestring) + 2;
        h->changes = xmalloc(len);
        h->changes[0] = 0;
        cJSON_ArrayForEach(it, ch) if (cJSON_IsString(it)) {
            if (h->changes[0]) strcat(h->changes, "; ");
            strcat(h->changes, it->valuestring);
        }
    }
    cJSON_Delete(o);
}

int history_read(const char *run_dir, const char *who, HistorySegment **out) {
    SegList l = {NULL, 0, 0};
    metrics_read(run_dir, who, add_segment, &l);
    *out = l.s;
    return l.n;
}

void history_free(HistorySegment *s, int n) {
    for (int i = 0; i < n; i++) free(s[i].changes);
    free(s);
}

void history_line(const HistorySegment *h, char *buf, size_t n) {
    char when[64];
    if (h->step == 0) snprintf(when, sizeof when, "from the start");
    else snprintf(when, sizeof when, "after step %ld", h->step);
    snprintf(buf, n, "%s: %s%s%s", when, h->file, h->changes[0] ? ": " : "", h->changes);
}
