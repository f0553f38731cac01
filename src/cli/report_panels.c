// report_panels.c: the parts of `olmo report` that explain a run rather than plot it
// (report.h): the alarms panel (what the memorization and the loader's repeat alarms
// compare, their latest numbers, whether they fired, every alarm record), the held-out sets
// legend (what each set is: in-domain held-out documents, an out-of-domain source, a
// concatenation of held-out splits and of which sources) and the downstream results (one
// bar chart with chance marked, one compact table).
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/report.h"
#include "eval/svg.h"
#include "util/common.h"

void report_row_begin(FILE *f, const char *label, const cJSON *o, const char *cls, const char *text) {
    fprintf(f, "<tr><td>");
    html_escape(f, label);
    fprintf(f, "</td>");
    report_cell(f, report_num(o, "step"), "%.0f");
    fprintf(f, "<td class=\"%s\">", cls);
    html_escape(f, text);
    fprintf(f, "</td>");
}

// ---------------------------------------------------------------------------------------
// Alarms

// The training loss the trainer's Watch (src/train/trainer.c) compares an evaluation with:
// the mean of the last WATCH_STEPS losses of the steps since the previous evaluation, added
// in the Watch's ring-buffer slot order, so the mean is bitwise the trainer's.
#define WATCH_STEPS 5
static double watch_mean(const RecList *train, double after, double upto) {
    double last[WATCH_STEPS];
    long n = 0;
    for (int i = 0; i < train->n; i++) {
        const double s = report_num(train->r[i], "step");
        if (s <= after || s > upto) continue;
        last[n % WATCH_STEPS] = report_num(train->r[i], "loss");
        n++;
    }
    const long k = n < WATCH_STEPS ? n : WATCH_STEPS;
    double t = 0;
    for (long i = 0; i < k; i++) t += last[i];
    return k ? t / (double)k : NAN;
}

// The watched CE of an eval record, as the trainer picks it: the key alarm.heldout_set
// names, else the record's first per-set CE (macro excluded).
static double watch_ce(const cJSON *o, const char *key, char *picked, size_t n) {
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        const char *k = it->string;
        const size_t len = k ? strlen(k) : 0;
        const int is_ce = key[0] ? !strcmp(k, key)
                                 : len > 8 && !strncmp(k, "eval/", 5) && !strcmp(k + len - 3, "/ce") &&
                                       strcmp(k, "eval/macro/ce");
        if (is_ce && cJSON_IsNumber(it)) {
            if (!picked[0]) snprintf(picked, n, "%s", k);
            return it->valuedouble;
        }
    }
    return NAN;
}

static void alarm_view(Run *run) {
    AlarmView *v = &run->av;
    const Recipe *rc = run->recipe;
    memset(v, 0, sizeof *v);
    v->k = rc ? rc->memo_k : 3;
    v->drop = rc ? rc->memo_drop : 0.05;
    v->ratio = rc ? rc->memo_ratio : 0.25;
    v->first_fired = v->loader_first = -1;
    char key[160] = "";
    if (rc && rc->memo_set[0]) snprintf(key, sizeof key, "eval/%s/ce", rc->memo_set);
    memo_alarm_init(&v->last, v->k, v->drop, v->ratio);
    double prev = -INFINITY;
    for (int i = 0; i < run->eval.n; i++) {
        cJSON *o = run->eval.r[i];
        const double step = report_num(o, "step");
        const double train = watch_mean(&run->train, prev, step), ce = watch_ce(o, key, v->set, sizeof v->set);
        prev = step;
        if (!isfinite(train) || !isfinite(ce)) continue;
        v->inputs++;
        cJSON_AddNumberToObject(o, "alarm/train_loss", train);
        cJSON_AddNumberToObject(o, "alarm/heldout_ce", ce);
        cJSON_AddNumberToObject(o, "alarm/gap", ce - train);
        if (memo_alarm_update(&v->last, (long)step, train, ce, NULL, 0)) {
            if (v->first_fired < 0) v->first_fired = (long)step;
            v->fired++;
        }
    }
    if (!v->set[0]) snprintf(v->set, sizeof v->set, "%s", key[0] ? key : "eval/<first set>/ce");
    for (int i = 0; i < run->alarms.n; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(run->alarms.r[i], "alarm");
        v->recorded += cJSON_IsString(a) && !strcmp(a->valuestring, "memorization");
    }
    for (int i = 0; i < run->train.n; i++) {
        const cJSON *o = run->train.r[i];
        const double n = report_num(o, "loader_alarms");
        if (!(n > 0)) continue;
        v->loader_alarms += n;
        if (v->loader_first < 0) v->loader_first = (long)report_num(o, "step");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "loader_alarm");
        if (cJSON_IsString(m)) snprintf(v->loader_msg, sizeof v->loader_msg, "%s", m->valuestring);
    }
    const cJSON *t = run->train.n ? run->train.r[run->train.n - 1] : NULL;
    v->loader_epoch = t ? report_num(t, "loader_epoch") : NAN;
    v->loader_coverage = t ? report_num(t, "loader_coverage") : NAN;
    v->loader_repeats = t ? report_num(t, "loader_repeats") : NAN;
    v->docs_whole = t ? report_num(t, "loader_docs_whole") : NAN;
    v->docs_fragmented = t ? report_num(t, "loader_docs_fragmented") : NAN;
    v->docs_truncated = t ? report_num(t, "loader_docs_truncated") : NAN;
    v->tokens_dropped = t ? report_num(t, "loader_tokens_dropped") : NAN;
    v->padding_frac = t ? report_num(t, "loader_padding_frac") : NAN;
}

void report_alarm_views(Run *runs, int nruns) {
    for (int r = 0; r < nruns; r++) alarm_view(&runs[r]);
}

// Every alarm record: run, step, name, the "why" text and the other fields.
static void alarm_records(FILE *f, const Run *runs, int nruns) {
    int total = 0;
    for (int r = 0; r < nruns; r++) total += runs[r].alarms.n;
    if (!total) { fprintf(f, "<p class=\"note\">No alarm records in metrics.jsonl.</p>\n"); return; }
    fprintf(f, "<table class=\"alarms\">\n<tr><th>run</th><th>step</th><th>alarm</th><th>details</th></tr>\n");
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].alarms.n; i++) {
            const cJSON *o = runs[r].alarms.r[i];
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "alarm");
            report_row_begin(f, runs[r].label, o, "alarm", cJSON_IsString(a) ? a->valuestring : "?");
            fprintf(f, "<td>");
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "why");
            if (!why) why = cJSON_GetObjectItemCaseSensitive(o, "message");
            if (cJSON_IsString(why)) { html_escape(f, why->valuestring); fprintf(f, "<br>"); }
            const cJSON *it;
            cJSON_ArrayForEach(it, o) {
                if (!it->string || it == why || it == a || !strcmp(it->string, "kind") || !strcmp(it->string, "step"))
                    continue;
                char *val = cJSON_PrintUnformatted(it);
                fprintf(f, "<span class=\"kv\">");
                html_escape(f, it->string);
                fprintf(f, "=");
                html_escape(f, val);
                fprintf(f, "</span> ");
                free(val);
            }
            fprintf(f, "</td></tr>\n");
        }
    fprintf(f, "</table>\n");
}

// An alarm's row for one run: <tr data-alarm data-run>, on the first run's row the alarm's
// name and rule once for all runs, then the run.
static void alarm_row_begin(FILE *f, const char *kind, const Run *run, int nruns, int first, const char *name,
                            const char *rule) {
    fprintf(f, "<tr data-alarm=\"%s\" data-run=\"", kind);
    html_escape(f, run->label);
    fprintf(f, "\">");
    if (first) fprintf(f, "<th rowspan=\"%d\">%s<div class=\"rule\">%s</div></th>", nruns, name, rule);
    fprintf(f, "<td>");
    html_escape(f, run->label);
    fprintf(f, "</td>");
}

static void memo_row(FILE *f, const Run *run, const Run *runs, int nruns, int first) {
    const AlarmView *v = &run->av;
    const MemoAlarm *a = &v->last;
    char set[160], tag[64];
    const char *slash = strrchr(v->set, '/');
    snprintf(set, sizeof set, "%.*s", slash && slash > v->set + 5 ? (int)(slash - v->set - 5) : 0, v->set + 5);
    report_set_tag(runs, nruns, set, tag, sizeof tag);
    alarm_row_begin(f, "memorization", run, nruns, first, "memorization",
                    "the training loss (mean of the last 5 steps before each evaluation) and the watched held-out CE "
                    "over the last <i>k</i> evaluations: fires when the training loss fell by more than <i>drop</i> "
                    "nats while held-out CE fell by less than <i>ratio</i> x that, the gap (held-out - training) "
                    "growing at every evaluation (data repeated or memorized)");
    fprintf(f, "<td>held-out CE of <b>");
    html_escape(f, set[0] ? set : "the first set");
    fprintf(f, "</b>%s%s%s; <i>k</i> %d, <i>drop</i> %.3g, <i>ratio</i> %.3g</td><td>", tag[0] ? " (" : "", tag,
            tag[0] ? ")" : "", v->k, v->drop, v->ratio);
    if (a->n == a->k)
        fprintf(f, "steps %ld..%ld: training loss fell %.4f (%.4f &rarr; %.4f); held-out CE %s %.4f (%.4f &rarr; %.4f; "
                   "needs a fall of %.4f); gap %.4f &rarr; %.4f", a->window_start, a->step[a->n - 1], a->train_drop,
                a->train[0], a->train[a->n - 1], a->heldout_drop >= 0 ? "fell" : "rose", fabs(a->heldout_drop),
                a->heldout[0], a->heldout[a->n - 1], a->ratio * a->train_drop, a->gap_first, a->gap_last);
    else fprintf(f, "%d of the %d evaluations its window needs (the step-0 evaluation has no training loss)", a->n, a->k);
    fprintf(f, "</td>");
    if (v->fired) fprintf(f, "<td class=\"alarm\">fired %ld time%s, first at step %ld", v->fired, v->fired > 1 ? "s" : "",
                          v->first_fired);
    else fprintf(f, "<td class=\"quiet\">quiet");
    if (v->recorded != v->fired)
        fprintf(f, " (the trainer recorded %ld: a resumed run restarts the alarm's window, and records written "
                   "by hand count too)", v->recorded);
    fprintf(f, "</td></tr>\n");
}

static void repeat_row(FILE *f, const Run *run, int nruns, int first) {
    const AlarmView *v = &run->av;
    alarm_row_begin(f, "repeat", run, nruns, first, "repeat (loader)",
                    "every instance served against those already served in its epoch (a repeat), each step's ids "
                    "across ranks (overlaps) and against the step's global batch (off-batch), a resumed run's next "
                    "position against its saved state");
    fprintf(f, "<td>the instances served</td><td>");
    if (isfinite(v->loader_epoch))
        fprintf(f, "epoch %.0f, %.1f%% of the epoch's instances served, %.0f repeated this epoch", v->loader_epoch,
                100 * v->loader_coverage, v->loader_repeats);
    else fprintf(f, "&ndash; (no loader fields in the train records)");
    if (isfinite(v->docs_whole))   // packed instances (docs/loader.md): what the packing kept, cut and dropped
        fprintf(f, "; packed: %.0f documents kept whole, %.0f fragmented, %.0f truncated, %.0f tokens dropped, "
                   "%.2f%% padding in the last batch",
                v->docs_whole, v->docs_fragmented, v->docs_truncated, v->tokens_dropped, 100 * v->padding_frac);
    fprintf(f, "</td>");
    if (v->loader_alarms > 0) {
        fprintf(f, "<td class=\"alarm\">%.0f alarm%s, first at step %ld; last: ", v->loader_alarms,
                v->loader_alarms > 1 ? "s" : "", v->loader_first);
        html_escape(f, v->loader_msg);
    } else fprintf(f, "<td class=\"quiet\">quiet");
    fprintf(f, "</td></tr>\n");
}

void report_alarms_panel(FILE *f, const Run *runs, int nruns) {
    fprintf(f, "<table class=\"alarmpanel\">\n<tr><th>alarm: what it compares</th><th>run</th><th>on</th>"
               "<th>latest</th><th>status</th></tr>\n");
    for (int r = 0; r < nruns; r++) memo_row(f, &runs[r], runs, nruns, r == 0);
    for (int r = 0; r < nruns; r++) repeat_row(f, &runs[r], nruns, r == 0);
    fprintf(f, "</table>\n<p class=\"note\">The report recomputes the memorization alarm from metrics.jsonl with the "
               "trainer's inputs and rule (src/eval/alarm.h, docs/report.md); the charts below draw its inputs. The "
               "loader's counts are the train records' <code>loader_*</code> fields.</p>\n");
    int total = 0;
    for (int r = 0; r < nruns; r++) total += runs[r].alarms.n;
    if (total) fprintf(f, "<details><summary>%d alarm record%s in metrics.jsonl</summary>\n", total, total > 1 ? "s" : "");
    alarm_records(f, runs, nruns);
    if (total) fprintf(f, "</details>\n");
}

// ---------------------------------------------------------------------------------------
// Held-out sets

// The sources a set file was concatenated from: when `path` is not itself a
// "<source>.heldout.npy" split, and its bytes are, in some order, exactly the whole files
// "<source>.heldout.npy" beside it (olmo prepare's held-out splits; `cat a.heldout.npy
// b.heldout.npy > set.npy` makes a valid set, EOS-separated documents concatenate), the
// source names, comma-separated, into out; else 0. Files over 1 GiB are not read.
static int concat_parts(const char *path, char *out, size_t n) {
    static const char suf[] = ".heldout.npy";
    const size_t sl = sizeof suf - 1;
    const char *b = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", b ? (int)(b - path) : 1, b ? path : ".");
    b = b ? b + 1 : path;
    struct stat st;
    if ((strlen(b) > sl && !strcmp(b + strlen(b) - sl, suf)) || stat(path, &st) != 0 || st.st_size == 0 ||
        st.st_size > (1L << 30))
        return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    enum { MAXP = 512 };
    char *names[MAXP];
    char *data[MAXP];
    size_t lens[MAXP];
    int np = 0;
    struct dirent *e;
    while ((e = readdir(d)) && np < MAXP) {
        const size_t l = strlen(e->d_name);
        if (l <= sl || strcmp(e->d_name + l - sl, suf) || !strcmp(e->d_name, b)) continue;
        names[np] = xstrdup(e->d_name);
        data[np] = NULL;
        np++;
    }
    closedir(d);
    if (np == 0) return 0;
    size_t len = 0;
    char *all = read_file_all(path, &len);
    int nparts = 0, ok = all != NULL;
    out[0] = 0;
    for (size_t off = 0; ok && off < len;) {
        ok = 0;
        for (int i = 0; i < np && !ok; i++) {
            if (!data[i]) {
                char p[8192];
                snprintf(p, sizeof p, "%s/%s", dir, names[i]);
                data[i] = read_file_all(p, &lens[i]);
                if (!data[i]) { data[i] = xstrdup(""); lens[i] = 0; }
            }
            if (lens[i] == 0 || lens[i] == (size_t)-1 || lens[i] > len - off || memcmp(all + off, data[i], lens[i]))
                continue;
            const size_t used = strlen(out);
            snprintf(out + used, n - used, "%s%.*s", nparts ? ", " : "", (int)(strlen(names[i]) - sl), names[i]);
            off += lens[i];
            lens[i] = (size_t)-1;   // each file once
            nparts++, ok = 1;
        }
    }
    for (int i = 0; i < np; i++) { free(names[i]); free(data[i]); }
    free(all);
    if (!ok || nparts < 2) { out[0] = 0; return 0; }
    return nparts;
}

// concat_parts, remembered per path (the legend asks for a set once per run and chart).
static int concat_parts_cached(const char *path, char *out, size_t n) {
    enum { NCACHE = 32 };
    static struct Known { char path[4096], parts[8192]; int np; } cache[NCACHE];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (!strcmp(cache[i].path, path)) { snprintf(out, n, "%s", cache[i].parts); return cache[i].np; }
    const int np = concat_parts(path, out, n);
    if (ncache < NCACHE && strlen(path) < sizeof cache[0].path) {
        struct Known *k = &cache[ncache++];
        snprintf(k->path, sizeof k->path, "%s", path);
        snprintf(k->parts, sizeof k->parts, "%s", np ? out : "");
        k->np = np;
    }
    return np;
}

// Whether the directory parts of paths a and b (up to their last '/'; none: ".") are one
// directory; one that does not resolve (a glob in it, not there) does not count against.
static int same_dir(const char *a, const char *b) {
    char da[4096], db[4096];
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    snprintf(da, sizeof da, "%.*s", sa ? (int)(sa - a + 1) : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s", sb ? (int)(sb - b + 1) : 1, sb ? b : ".");
    char *ra = realpath(da, NULL), *rb = realpath(db, NULL);
    const int same = !ra || !rb || !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

// Whether the run trains on source `src` (a file stem) of the held-out file `heldout`: a
// data.paths / data.sources entry ("name=glob" or a path/glob) whose file part matches
// "<src>.npy" in the held-out file's directory.
static int trains_on(const Recipe *rc, const char *heldout, const char *src) {
    char file[300];
    snprintf(file, sizeof file, "%s.npy", src);
    for (int k = 0; k < rc->n_paths + rc->n_sources; k++) {
        const char *t = k < rc->n_paths ? rc->paths[k] : rc->sources[k - rc->n_paths];
        const char *eq = k >= rc->n_paths ? strchr(t, '=') : NULL;
        if (eq) t = eq + 1;
        const char *tb = strrchr(t, '/');
        if (!fnmatch(tb ? tb + 1 : t, file, 0) && same_dir(t, heldout)) return 1;
    }
    return 0;
}

// A set's role for a run: text (the table's role cell) and tag (chart titles).
static void set_role(const Recipe *rc, const char *path, int watched, char *text, size_t n, char *tag, size_t tn) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const size_t bl = strlen(b), sl = strlen(".heldout.npy");
    char parts[8192];
    int np;
    if (bl > sl && !strcmp(b + bl - sl, ".heldout.npy")) {
        char src[256];
        snprintf(src, sizeof src, "%.*s", (int)(bl - sl), b);
        const int in = trains_on(rc, path, src);
        snprintf(tag, tn, "%s", in ? "in-domain" : "out of domain");
        snprintf(text, n, "%s: held-out documents of source %s, %s", tag, src,
                 in ? "which the run trains on" : "which the run does not train on");
    } else if ((np = concat_parts_cached(path, parts, sizeof parts)) > 0) {
        char in[8192] = "", out[8192] = "";
        int nin = 0, nout = 0;
        for (char *s = parts, *save = NULL, *t; (t = strtok_r(s, ", ", &save)); s = NULL) {
            char *dst = trains_on(rc, path, t) ? in : out;
            int *cnt = dst == in ? &nin : &nout;
            snprintf(dst + strlen(dst), sizeof in - strlen(dst), "%s%s", *cnt ? ", " : "", t);
            (*cnt)++;
        }
        snprintf(tag, tn, "%s", !nout ? "in-domain" : !nin ? "out of domain" : "partly in-domain");
        snprintf(text, n, "%s: the held-out documents of %d sources concatenated; trained on: %s%s%s", tag, np,
                 nin ? in : "none", nout ? "; not trained on: " : "", nout ? out : "");
    } else {
        snprintf(tag, tn, "%s", watched ? "in-domain" : "");
        snprintf(text, n, "%s", watched ? "in-domain (the set the memorization alarm watches)" : "another held-out set");
    }
    if (watched) snprintf(text + strlen(text), n - strlen(text), "%s", "; the memorization alarm compares its CE with "
                                                                       "the training loss");
}

// The name and resolved path of the run's i-th set (eval.sets: "name=path" or "path").
static void set_spec(const Recipe *rc, int i, char *name, size_t nn, char *path, size_t pn) {
    const char *spec = rc->eval_sets[i], *eq = strchr(spec, '=');
    if (eq) snprintf(name, nn, "%.*s", (int)(eq - spec), spec);
    else {
        const char *b = strrchr(spec, '/');
        snprintf(name, nn, "%s", b ? b + 1 : spec);
        char *dot = strstr(name, ".heldout.npy");
        if (!dot) dot = strstr(name, ".npy");
        if (dot) *dot = 0;
    }
    if (recipe_eval_path(rc, eq ? eq + 1 : spec, path, pn) != 0) snprintf(path, pn, "%s", eq ? eq + 1 : spec);
}

static int watches(const Recipe *rc, const char *name, int i) {
    return rc->memo_set[0] ? !strcmp(rc->memo_set, name) : i == 0;
}

const char *report_set_tag(const Run *runs, int nruns, const char *name, char *buf, size_t n) {
    int seen = 0;
    buf[0] = 0;
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        for (int i = 0; rc && i < rc->n_eval_sets; i++) {
            char nm[128], path[RECIPE_MAX_STR + 1024], text[16384], tag[64];
            set_spec(rc, i, nm, sizeof nm, path, sizeof path);
            if (strcmp(nm, name)) continue;
            set_role(rc, path, watches(rc, nm, i), text, sizeof text, tag, sizeof tag);
            if (!seen++) snprintf(buf, n, "%s", tag);
            else if (strcmp(buf, tag)) { buf[0] = 0; return buf; }
        }
    }
    return buf;
}

void report_sets_table(FILE *f, const Run *runs, int nruns) {
    fprintf(f, "<table class=\"sets\">\n<tr><th>run</th><th>set</th><th>file</th><th>documents</th>"
               "<th>tokens scored</th><th>evaluated at</th><th>final CE</th><th>PPL</th><th>bits/byte</th>"
               "<th>what it is</th></tr>\n");
    int any = 0;
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        for (int i = 0; rc && i < rc->n_eval_sets; i++) {
            char name[128], path[RECIPE_MAX_STR + 1024], text[16384], tag[64], k[5][200];
            set_spec(rc, i, name, sizeof name, path, sizeof path);
            static const char *const m[5] = {"docs", "tokens", "ce", "ppl", "bpb"};
            for (int j = 0; j < 5; j++) snprintf(k[j], sizeof k[j], "eval/%s/%s", name, m[j]);
            const cJSON *o = report_last_with(&runs[r].eval, k[2]);
            fprintf(f, "<tr><td>");
            html_escape(f, runs[r].label);
            fprintf(f, "</td><th>");
            html_escape(f, name);
            fprintf(f, "</th><td class=\"path\">");
            html_escape(f, path);
            fprintf(f, "</td>");
            static const char *const fmt[5] = {"%.0f", "%.0f", "%.4f", "%.2f", "%.4f"};
            for (int j = 0; j < 5; j++) {
                if (j == 2) fprintf(f, "<td>%d tokens</td>", rc->seq_len);
                report_cell(f, o ? report_num(o, k[j]) : NAN, fmt[j]);
            }
            set_role(rc, path, watches(rc, name, i), text, sizeof text, tag, sizeof tag);
            fprintf(f, "<td>");
            html_escape(f, text);
            fprintf(f, "</td></tr>\n");
            any = 1;
        }
    }
    fprintf(f, "</table>\n");
    if (!any) fprintf(f, "<p>No recipe names held-out sets (eval.sets).</p>\n");
    fprintf(f, "<p class=\"note\">Held-out documents are never trained on: <code>olmo prepare</code> holds out a "
               "fraction of every source's documents by a hash of their text (<code>&lt;source&gt;.heldout.npy</code>: "
               "in-domain when the run trains on that source, out of domain when it does not), and several splits "
               "concatenated make one set (recognized by its bytes). Each document is one instance cut to the length "
               "it is evaluated at (train.seq_len), so a set's CE at 1024 tokens is not comparable with its CE at "
               "256: the charts show each length apart. A set's perplexity (exp CE) and bits per byte (CE x tokens / "
               "bytes / ln 2, both fixed per set and length) follow its CE, so only CE is charted per set.</p>\n");
}

// ---------------------------------------------------------------------------------------
// Downstream tasks

void report_tasks(FILE *f, const Run *runs, int nruns, const Names *tasks) {
    if (!tasks->n) { fprintf(f, "<p>No downstream tasks were evaluated (eval.tasks, olmo eval --task).</p>\n"); return; }
    const int nt = tasks->n;
    double *acc = xmalloc(sizeof(double) * (size_t)(nt * nruns)), *chance = xmalloc(sizeof(double) * (size_t)nt);
    const cJSON **rec = xcalloc((size_t)(nt * nruns), sizeof(cJSON *));
    char key[300];
    for (int i = 0; i < nt; i++) {
        chance[i] = NAN;
        for (int r = 0; r < nruns; r++) {
            snprintf(key, sizeof key, "task/%s/acc", tasks->name[i]);
            const cJSON *o = rec[i * nruns + r] = report_last_with(&runs[r].eval, key);
            acc[i * nruns + r] = o ? report_num(o, key) : NAN;
            snprintf(key, sizeof key, "task/%s/chance", tasks->name[i]);
            if (o && !isfinite(chance[i])) chance[i] = report_num(o, key);
        }
    }
    // The chart: a group of bars per task (one per run, its color), chance a dark tick.
    const char **ids = xcalloc((size_t)(nt * nruns), sizeof(char *)), **colors = xcalloc((size_t)nruns, sizeof(char *));
    const char **labels = xcalloc((size_t)nruns, sizeof(char *));
    for (int r = 0; r < nruns; r++) { colors[r] = svg_color(r); labels[r] = runs[r].label; }
    for (int i = 0; i < nt; i++)
        for (int r = 0; r < nruns; r++) {
            char *id = xmalloc(strlen(runs[r].label) + strlen(tasks->name[i]) + 16);
            sprintf(id, "%s:task/%s/acc", runs[r].label, tasks->name[i]);
            ids[i * nruns + r] = id;
        }
    SvgBars bars = {"Downstream accuracy (the tick: chance)", "accuracy", 560, nt, (const char *const *)tasks->name,
                    chance, nruns, labels, colors, ids, acc};
    fprintf(f, "<div class=\"charts\">\n");
    svg_bars(f, &bars);
    fprintf(f, "</div>\n");
    // The table: a row per task.
    fprintf(f, "<table class=\"tasks\">\n<tr><th>task</th><th>examples</th><th>chance</th>");
    for (int r = 0; r < nruns; r++) report_run_th(f, runs, r, ": acc (- chance), len_norm, step");
    fprintf(f, "</tr>\n");
    for (int i = 0; i < nt; i++) {
        fprintf(f, "<tr><th>");
        html_escape(f, tasks->name[i]);
        fprintf(f, "</th>");
        double ex = NAN;
        snprintf(key, sizeof key, "task/%s/examples", tasks->name[i]);
        for (int r = 0; r < nruns && !isfinite(ex); r++) if (rec[i * nruns + r]) ex = report_num(rec[i * nruns + r], key);
        report_cell(f, ex, "%.0f");
        report_cell(f, chance[i], "%.3f");
        for (int r = 0; r < nruns; r++) {
            const cJSON *o = rec[i * nruns + r];
            const double a = acc[i * nruns + r], c = chance[i];
            if (!o) { fprintf(f, "<td>&ndash;</td>"); continue; }
            const int low = isfinite(c) && a <= c + 1e-9;
            fprintf(f, "<td%s>%.3f", low ? " class=\"chance\"" : "", a);
            if (isfinite(c)) fprintf(f, " (%+.3f%s)", a - c, low ? ", at or below chance" : "");
            snprintf(key, sizeof key, "task/%s/len_norm", tasks->name[i]);
            fprintf(f, ", %.3f, step %.0f</td>", report_num(o, key), report_num(o, "step"));
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n<p class=\"note\">chance: the accuracy of guessing, the mean over examples of 1 / choices "
               "(recorded by olmo.c's evaluation since issue 37; &ndash; for older records). acc is rank classification "
               "over the choices' log-likelihoods, len_norm the same per character (docs/eval.md).</p>\n");
    for (int i = 0; i < nt * nruns; i++) free((void *)ids[i]);
    free(ids);
    free(colors);
    free(labels);
    free(rec);
    free(acc);
    free(chance);
}

// ---------------------------------------------------------------------------------------
// OLMo 3's downstream suite (eval.downstream)

const char *report_suite_primary(const Run *runs, int nruns, const char *label, char *key, size_t n) {
    static const char *const order[] = {"len_norm_v1", "acc_v1", "bpb_v1", "ce_loss_v1"};
    for (int k = 0; k < 4; k++) {
        snprintf(key, n, "downstream/%s/%s", label, order[k]);
        for (int r = 0; r < nruns; r++)
            if (report_last_with(&runs[r].eval, key)) return order[k];
    }
    return NULL;
}

double report_suite_chance(const Run *runs, int nruns, const char *label) {
    char key[300];
    snprintf(key, sizeof key, "downstream/%s/chance", label);
    for (int r = 0; r < nruns; r++) {
        const cJSON *o = report_last_with(&runs[r].eval, key);
        if (o) return report_num(o, key);
    }
    return NAN;
}

void report_suite_table(FILE *f, const Run *runs, int nruns, const Names *suite) {
    if (!suite->n) {
        fprintf(f, "<p>The OLMo 3 downstream suite was not evaluated (eval.downstream, docs/eval.md).</p>\n");
        return;
    }
    fprintf(f, "<table class=\"suite\">\n<tr><th>label</th><th>metric</th><th>chance</th>");
    for (int r = 0; r < nruns; r++) report_run_th(f, runs, r, ": last value, step");
    fprintf(f, "</tr>\n");
    for (int i = 0; i < suite->n; i++) {
        char key[300];
        const char *m = report_suite_primary(runs, nruns, suite->name[i], key, sizeof key);
        if (!m) continue;
        fprintf(f, "<tr><th>");
        html_escape(f, suite->name[i]);
        fprintf(f, "</th><td>%s</td>", m);
        report_cell(f, report_suite_chance(runs, nruns, suite->name[i]), "%.3f");
        for (int r = 0; r < nruns; r++) {
            const cJSON *o = report_last_with(&runs[r].eval, key);
            if (o) fprintf(f, "<td>%.4f, step %.0f</td>", report_num(o, key), report_num(o, "step"));
            else fprintf(f, "<td>&ndash;</td>");
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n<p class=\"note\">Per label its primary metric as ICLMetric names it: len_norm_v1 "
               "(length-normalized accuracy) or acc_v1 (accuracy) for multiple-choice tasks, higher is better, "
               "chance the mean over questions of 1 / choices; bpb_v1 (bits per byte of the gold continuation) "
               "for the bpb tasks, lower is better, no chance level. Every metric is in metrics.jsonl as "
               "downstream/&lt;label&gt;/&lt;metric&gt; (docs/eval.md).</p>\n");
}
