// metrics.c: see metrics.h.
#include "train/metrics.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/tfevents.h"
#include "util/common.h"

void metrics_open(MetricsLog *m, const char *run_dir, const char *mode) {
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    FILE *f = fopen(path, mode);
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    m->fp = f;
    m->tb = NULL;
}

void metrics_open_tensorboard(MetricsLog *m, const char *run_dir) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tb", run_dir);
    m->tb = tfevents_open(dir);
}

// Every number of the record is a scalar (an eval record of the OLMo 3 suite has ~250:
// 26 downstream tasks x up to 11 keys, so no fixed cap).
static void write_scalars(TfEvents *t, const cJSON *obj) {
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind"), *step = cJSON_GetObjectItemCaseSensitive(obj, "step");
    if (!cJSON_IsString(kind) || !cJSON_IsNumber(step)) return;
    int cap = cJSON_GetArraySize(obj), n = 0;
    char (*tags)[256] = xmalloc(sizeof *tags * (size_t)(cap + 1));
    const char **tag = xmalloc(sizeof *tag * (size_t)(cap + 1));
    double *value = xmalloc(sizeof *value * (size_t)(cap + 1));
    for (const cJSON *c = obj->child; c && n < cap; c = c->next) {
        if (!cJSON_IsNumber(c) || !c->string || !strcmp(c->string, "step")) continue;
        if (strchr(c->string, '/')) snprintf(tags[n], sizeof tags[n], "%s", c->string);
        else snprintf(tags[n], sizeof tags[n], "%s/%s", kind->valuestring, c->string);
        tag[n] = tags[n];
        value[n++] = c->valuedouble;
    }
    tfevents_scalars(t, (long)step->valuedouble, n, tag, value);   // one Event, one flush per record
    free(tags); free(tag); free(value);
}

void metrics_write(MetricsLog *m, cJSON *obj) {
    char *s = cJSON_PrintUnformatted(obj);
    FILE *f = m->fp;
    fprintf(f, "%s\n", s);
    fflush(f);
    free(s);
    if (m->tb) write_scalars(m->tb, obj);
}

void metrics_close(MetricsLog *m) {
    if (m->fp) fclose(m->fp);
    m->fp = NULL;
    tfevents_close(m->tb);
    m->tb = NULL;
}

void format_duration(char *buf, int len, double s) {
    if (!(s >= 0) || s > 1e8) { snprintf(buf, (size_t)len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, (size_t)len, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60) snprintf(buf, (size_t)len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, (size_t)len, "%lds", t);
}

void metrics_append(const char *run_dir, cJSON *obj) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" METRICS_ATTACHED, run_dir);
    MetricsLog m = {NULL, NULL};
    m.fp = fopen(path, "a");
    if (!m.fp) die("cannot open %s: %s", path, strerror(errno));
    metrics_write(&m, obj);
    if (fsync(fileno((FILE *)m.fp)) != 0) die("cannot write %s: %s", path, strerror(errno));
    metrics_close(&m);
}

static void read_lines(const char *run_dir, const char *file, int optional, const char *who, MetricsLineFn fn,
                       void *ctx) {
    struct stat st;
    if (stat(run_dir, &st) != 0 || !S_ISDIR(st.st_mode)) die_input("%s: run directory %s does not exist", who, run_dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", run_dir, file);
    if (optional && stat(path, &st) != 0) return;
    char *text = read_file_all(path, NULL);
    if (!text) die_input("%s: %s: cannot read (not a run directory?)", who, path);
    long lineno = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        lineno++;
        if (!*line) continue;
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            // A run killed mid-write may leave a torn last line; anything else is corrupt.
            if (!next || !*next) {
                warnf("%s: %s:%ld: ignoring an incomplete last line", who, path, lineno);
                continue;
            }
            die_input("%s: %s:%ld: not a JSON object", who, path, lineno);
        }
        fn(o, ctx);
    }
    free(text);
}

void metrics_read(const char *run_dir, const char *who, MetricsLineFn fn, void *ctx) {
    read_lines(run_dir, "metrics.jsonl", 0, who, fn, ctx);
}

void metrics_read_attached(const char *run_dir, const char *who, MetricsLineFn fn, void *ctx) {
    read_lines(run_dir, METRICS_ATTACHED, 1, who, fn, ctx);
}
