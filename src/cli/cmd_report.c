// cmd_report.c: `olmo report RUN... [-o report.html] [--title T]`: one self-contained HTML
// file (inline SVG from src/eval/svg.c; no JavaScript, no network, nothing external) of
// one or more runs, overlaid so a reproduction can be judged by eye:
//   - a summary table (a column per run): model and recipe key facts, steps and tokens,
//     final training loss and held-out metrics, throughput, alarms raised;
//   - the alarms the runs recorded (metrics records with an "alarm" key);
//   - charts: training loss vs step and vs tokens, training loss next to held-out CE (the
//     memorization view, docs/olmo3.md s.7), held-out CE / PPL / BPB per set and macro,
//     downstream acc / len_norm / bpb per task, LR, grad norm, tokens/s and MFU.
// Every series is a <path data-series="<run>:<metric key>">, the metric key as in
// metrics.jsonl (loss, lr, eval/macro/ce, task/arc/acc, ...). docs/report.md lists it all.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "eval/svg.h"
#include "recipe/recipe.h"
#include "train/history.h"
#include "train/metrics.h"
#include "util/common.h"

#define CHART_W 560
#define CHART_H 300

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo report RUN_DIR... [-o FILE.html] [--title TEXT] [--x tokens|step]\n"
            "\n"
            "Write one self-contained HTML report (inline SVG charts, no scripts, no network) of\n"
            "one or more runs, overlaid with a legend: training loss (vs step and tokens), held-out\n"
            "CE / perplexity / bits-per-byte per set and macro, downstream acc / len_norm / bpb,\n"
            "LR, grad norm, tokens/s, MFU; a summary table per run (model, steps, tokens, final\n"
            "metrics, alarms). Reads RUN_DIR/metrics.jsonl and RUN_DIR/recipe.yml (docs/report.md).\n"
            "\n"
            "  -o FILE      output (default: RUN_DIR/report.html for one run, ./report.html for several)\n"
            "  --title T    page title (default: the run names)\n"
            "  --x WHAT     x axis of every chart: tokens (default) or step. A run that starts from an\n"
            "               earlier one's weights (train.load_path, trainer state restarted: the next\n"
            "               stage) continues its axis, the boundary marked; held-out charts are drawn\n"
            "               per evaluation length (train.seq_len), perplexity on a log scale\n"
            "\n"
            "Exit status: 0 written, 2 bad input (missing run directory or metrics.jsonl).\n");
}

// ---------------------------------------------------------------------------------------
// Runs

typedef struct {
    int n, cap;
    cJSON **r;
} RecList;

typedef struct {
    const char *dir;
    char label[256];
    RecList train, eval, alarms;
    RecList attached;   // RUN_DIR/evals.jsonl: `olmo eval RUN --attach` records
    Recipe *recipe;     // NULL when RUN_DIR/recipe.yml is missing (else the newest segment's)
    HistorySegment *segs;   // the recipes it trained under (src/train/history.h)
    int nsegs;
    double tok_off, step_off;   // where it starts on the report's axis: a stage that starts from an
                                // earlier run's weights (train.load_path) continues that run's axis
    int seq_len;                // its recipe's train.seq_len (0: no recipe): held-out charts group by it
} Run;

static void reclist_push(RecList *l, cJSON *o) {
    if (l->n == l->cap) { l->cap = l->cap ? 2 * l->cap : 64; l->r = xrealloc(l->r, sizeof(cJSON *) * (size_t)l->cap); }
    l->r[l->n++] = o;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// Step-ordered records: a record whose step is not past the last one (a resumed run
// replaying steps after its checkpoint) replaces the records it overlaps, so the lists
// hold the history that led to the final state.
static void push_step_record(RecList *l, cJSON *o) {
    double s = num(o, "step");
    while (l->n > 0 && num(l->r[l->n - 1], "step") >= s) cJSON_Delete(l->r[--l->n]);
    reclist_push(l, o);
}

static void add_record(cJSON *o, void *ctx) {
    Run *run = ctx;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    const char *k = cJSON_IsString(kind) ? kind->valuestring : "";
    int has_step = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "step"));
    if (cJSON_GetObjectItemCaseSensitive(o, "alarm")) reclist_push(&run->alarms, o);
    else if (!strcmp(k, "train") && has_step) push_step_record(&run->train, o);
    else if (!strcmp(k, "eval") && has_step) push_step_record(&run->eval, o);
    else cJSON_Delete(o);
}

static void add_attached(cJSON *o, void *ctx) { reclist_push(&((Run *)ctx)->attached, o); }

static void load_run(Run *run, const char *dir) {
    memset(run, 0, sizeof *run);
    run->dir = dir;
    metrics_read(dir, "report", add_record, run);
    metrics_read_attached(dir, "report", add_attached, run);
    run->nsegs = history_read(dir, "report", &run->segs);
    struct stat st;
    char path[4096];
    snprintf(path, sizeof path, "%s/recipe.yml", dir);
    if (stat(path, &st) == 0) {
        run->recipe = xcalloc(1, sizeof(Recipe));
        recipe_load(run->recipe, path, 0, NULL);
    }
    // Label: the directory's last component.
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
    const char *base = strrchr(tmp, '/');
    snprintf(run->label, sizeof run->label, "%s", base && base[1] ? base + 1 : tmp);
}

static void free_run(Run *run) {
    RecList *ls[4] = {&run->train, &run->eval, &run->alarms, &run->attached};
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < ls[i]->n; j++) cJSON_Delete(ls[i]->r[j]);
        free(ls[i]->r);
    }
    free(run->recipe);
    history_free(run->segs, run->nsegs);
}

// Tokens trained by the end of `step` (from the train records; 0 before the first step).
static double tokens_at(const Run *run, double step) {
    double t = 0;
    for (int i = 0; i < run->train.n && num(run->train.r[i], "step") <= step; i++) {
        double v = num(run->train.r[i], "tokens");
        if (isfinite(v)) t = v;
    }
    return t;
}

// ---------------------------------------------------------------------------------------
// Charts

// Which x axis, and from which records.
enum { X_STEP, X_TOKENS };

typedef struct {
    FILE *f;
    const Run *runs;
    int nruns;
    int ncharts, nseries;
    int xaxis;                  // X_TOKENS (default) or X_STEP (--x step), offset per run (Run.tok_off)
    int only_T;                 // > 0: only the runs of this train.seq_len (held-out charts by length)
    double *vlines;             // stage boundaries on the x axis, and their labels
    char **vlabels;
    int nvlines;
} Report;

// One chart of `key` (a metric key of train or eval records) for every run.
// `also` (optional): a second key from the other record kind, dashed (the overlay view).
static void chart(Report *rp, const char *title, const char *ylabel, int from_eval, const char *key, const char *also) {
    const int xaxis = rp->xaxis;
    int ns = 0;
    SvgSeries *s = xcalloc((size_t)rp->nruns * 2, sizeof(SvgSeries));
    char **ids = xcalloc((size_t)rp->nruns * 4, sizeof(char *));
    double **bufs = xcalloc((size_t)rp->nruns * 4, sizeof(double *));
    int nbuf = 0, nid = 0, any = 0;
    for (int r = 0; r < rp->nruns; r++) {
        const Run *run = &rp->runs[r];
        if (rp->only_T > 0 && run->seq_len != rp->only_T) continue;
        for (int pass = 0; pass < (also ? 2 : 1); pass++) {
            const char *k = pass ? also : key;
            int ev = pass ? !from_eval : from_eval;
            const RecList *l = ev ? &run->eval : &run->train;
            double *x = xmalloc(sizeof(double) * (size_t)(l->n + 1)), *y = xmalloc(sizeof(double) * (size_t)(l->n + 1));
            int n = 0, finite = 0;
            for (int i = 0; i < l->n; i++) {
                double st = num(l->r[i], "step");
                x[n] = xaxis == X_TOKENS ? run->tok_off + (ev ? tokens_at(run, st) : num(l->r[i], "tokens"))
                                         : run->step_off + st;
                y[n] = num(l->r[i], k);
                finite += isfinite(y[n]);
                n++;
            }
            bufs[nbuf++] = x;
            bufs[nbuf++] = y;
            if (!finite) continue;   // this run does not report the metric
            any = 1;
            size_t idl = strlen(run->label) + strlen(k) + 2;
            char *id = xmalloc(idl), *label = xmalloc(idl + 16);
            snprintf(id, idl, "%s:%s", run->label, k);
            if (also) snprintf(label, idl + 16, "%s %s", run->label, ev ? "held-out" : "train");
            else snprintf(label, idl + 16, "%s", run->label);
            ids[nid++] = id;
            ids[nid++] = label;
            s[ns++] = (SvgSeries){id, label, svg_color(r), x, y, n, pass == 1 || (also && from_eval), ev};
        }
    }
    if (any) {
        const int logy = strlen(key) > 4 && !strcmp(key + strlen(key) - 4, "/ppl");
        SvgChart c = {title, xaxis == X_TOKENS ? "tokens (all stages on one axis)" : "step (all stages on one axis)",
                      ylabel, CHART_W, CHART_H, logy, rp->vlines, (const char *const *)rp->vlabels, rp->nvlines};
        svg_chart(rp->f, &c, s, ns);
        rp->ncharts++;
        rp->nseries += ns;
    }
    for (int i = 0; i < nid; i++) free(ids[i]);
    for (int i = 0; i < nbuf; i++) free(bufs[i]);
    free(ids);
    free(bufs);
    free(s);
}

// ---------------------------------------------------------------------------------------
// Metric keys present in eval records (first appearance order)

typedef struct {
    int n;
    char **name;
} Names;

static void names_add(Names *ns, const char *s, size_t len) {
    for (int i = 0; i < ns->n; i++)
        if (strlen(ns->name[i]) == len && !strncmp(ns->name[i], s, len)) return;
    ns->name = xrealloc(ns->name, sizeof(char *) * (size_t)(ns->n + 1));
    ns->name[ns->n] = xmalloc(len + 1);
    memcpy(ns->name[ns->n], s, len);
    ns->name[ns->n++][len] = 0;
}

// A held-out chart, one per evaluation length when the runs evaluated at several
// (train.seq_len: a document cut at 1024 tokens scores other tokens than at 256).
static void chart_by_T(Report *rp, const char *title, const char *ylabel, int from_eval, const char *key,
                       const char *also) {
    int Ts[64], nT = 0;
    for (int r = 0; r < rp->nruns; r++) {
        int seen = 0;
        for (int i = 0; i < nT; i++) seen |= Ts[i] == rp->runs[r].seq_len;
        if (!seen && nT < 64) Ts[nT++] = rp->runs[r].seq_len;
    }
    if (nT <= 1) { chart(rp, title, ylabel, from_eval, key, also); return; }
    char t[600];
    for (int i = 0; i < nT; i++) {
        rp->only_T = Ts[i];
        if (Ts[i] > 0) snprintf(t, sizeof t, "%s, evaluated at %d tokens", title, Ts[i]);
        else snprintf(t, sizeof t, "%s, runs without a recipe", title);
        chart(rp, t, ylabel, from_eval, key, also);
    }
    rp->only_T = 0;
}

// One chart per (name, metric): key PREFIX/name/metric, titled "name: label", y axis the label.
static void chart_each(Report *rp, const char *prefix, const Names *names, const char *metrics[][2]) {
    char key[512], t[512];
    for (int i = 0; i < names->n; i++)
        for (int m = 0; m < 3; m++) {
            snprintf(key, sizeof key, "%s/%s/%s", prefix, names->name[i], metrics[m][0]);
            snprintf(t, sizeof t, "%s: %s", names->name[i], metrics[m][1]);
            chart_by_T(rp, t, metrics[m][1], 1, key, NULL);
        }
}

static void names_free(Names *ns) {
    for (int i = 0; i < ns->n; i++) free(ns->name[i]);
    free(ns->name);
}

// Set names (eval/<set>/ce, macro excluded) and task names (task/<name>/acc|len_norm|bpb).
static void collect_names(const Run *runs, int nruns, Names *sets, Names *tasks) {
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].eval.n; i++) {
            const cJSON *it;
            cJSON_ArrayForEach(it, runs[r].eval.r[i]) {
                const char *k = it->string;
                if (!k) continue;
                const char *slash = strrchr(k, '/');
                if (!slash || slash - k < 6) continue;
                if (!strncmp(k, "eval/", 5) && !strcmp(slash, "/ce") && strncmp(k, "eval/macro/", 11))
                    names_add(sets, k + 5, (size_t)(slash - k - 5));
                else if (!strncmp(k, "task/", 5) &&
                         (!strcmp(slash, "/acc") || !strcmp(slash, "/len_norm") || !strcmp(slash, "/bpb")))
                    names_add(tasks, k + 5, (size_t)(slash - k - 5));
            }
        }
}

// ---------------------------------------------------------------------------------------
// Summary table

static const cJSON *last_with(const RecList *l, const char *key) {
    for (int i = l->n - 1; i >= 0; i--)
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l->r[i], key))) return l->r[i];
    return NULL;
}

static void cell_num(FILE *f, double v, const char *fmt) {
    fprintf(f, "<td>");
    if (isfinite(v)) fprintf(f, fmt, v);
    else fprintf(f, "&ndash;");
    fprintf(f, "</td>");
}

// A row: the last value of `key` in the runs' train or eval records.
static void row_last(FILE *f, const Run *runs, int nruns, const char *title, int from_eval, const char *key,
                     const char *fmt) {
    fprintf(f, "<tr><th>");
    html_escape(f, title);
    fprintf(f, "</th>");
    for (int r = 0; r < nruns; r++) {
        const cJSON *o = last_with(from_eval ? &runs[r].eval : &runs[r].train, key);
        cell_num(f, o ? num(o, key) : NAN, fmt);
    }
    fprintf(f, "</tr>\n");
}

// Mean of `key` over the train records after the first (the first step carries warm-up
// costs: allocation, page faults, the peak-FLOPs measurement).
static double mean_after_first(const Run *run, const char *key) {
    double s = 0;
    int n = 0;
    for (int i = run->train.n > 1 ? 1 : 0; i < run->train.n; i++) {
        double v = num(run->train.r[i], key);
        if (isfinite(v)) { s += v; n++; }
    }
    return n ? s / n : NAN;
}

static void summary(FILE *f, const Run *runs, int nruns, const Names *sets, const Names *tasks) {
    fprintf(f, "<table class=\"summary\">\n<tr><th></th>");
    for (int r = 0; r < nruns; r++) {
        fprintf(f, "<th><span class=\"swatch\" style=\"background:%s\"></span>", svg_color(r));
        html_escape(f, runs[r].label);
        fprintf(f, "</th>");
    }
    fprintf(f, "</tr>\n<tr><th>run directory</th>");
    for (int r = 0; r < nruns; r++) { fprintf(f, "<td class=\"path\">"); html_escape(f, runs[r].dir); fprintf(f, "</td>"); }
    fprintf(f, "</tr>\n<tr><th>model</th>");
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        fprintf(f, "<td>");
        if (rc) {
            ModelConfig cfg = recipe_model_config(rc);
            html_escape(f, rc->model_preset[0] ? rc->model_preset : "custom");
            fprintf(f, " (d_model %d, %d layers, %d/%d heads, vocab %d; %.2fM params)", rc->d_model, rc->n_layers,
                    rc->n_heads, rc->n_kv_heads, rc->vocab_size, (double)model_num_params(&cfg) / 1e6);
        } else fprintf(f, "&ndash; (no recipe.yml)");
        fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n<tr><th>batch</th>");
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        if (rc) fprintf(f, "<td>%d x %d tokens (micro-batch %d), lr %.3g, %s schedule</td>", rc->global_batch,
                        rc->seq_len, rc->micro_batch, rc->lr, rc->schedule);
        else fprintf(f, "<td>&ndash;</td>");
    }
    fprintf(f, "</tr>\n<tr><th>recipes (segments)</th>");
    for (int r = 0; r < nruns; r++) {
        fprintf(f, "<td class=\"segments\">");
        if (!runs[r].nsegs) fprintf(f, "&ndash; (no recipe history)");
        for (int i = 0; i < runs[r].nsegs; i++) {
            char line[8192];
            history_line(&runs[r].segs[i], line, sizeof line);
            if (i) fprintf(f, "<br>");
            html_escape(f, line);
        }
        fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n<tr><th>steps (done / planned)</th>");
    for (int r = 0; r < nruns; r++) {
        const Run *run = &runs[r];
        double last = run->train.n ? num(run->train.r[run->train.n - 1], "step") : NAN;
        fprintf(f, "<td>");
        if (isfinite(last)) fprintf(f, "%.0f", last); else fprintf(f, "&ndash;");
        if (run->recipe) fprintf(f, " / %ld", recipe_total_steps(run->recipe));
        fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n");
    row_last(f, runs, nruns, "tokens trained", 0, "tokens", "%.0f");
    row_last(f, runs, nruns, "final training loss", 0, "loss", "%.4f");
    row_last(f, runs, nruns, "final LR", 0, "lr", "%.3g");
    fprintf(f, "<tr><th>mean tokens/s</th>");
    for (int r = 0; r < nruns; r++) cell_num(f, mean_after_first(&runs[r], "tokens_per_s"), "%.0f");
    fprintf(f, "</tr>\n<tr><th>mean MFU</th>");
    for (int r = 0; r < nruns; r++) cell_num(f, 100 * mean_after_first(&runs[r], "mfu"), "%.2f%%");
    fprintf(f, "</tr>\n");
    row_last(f, runs, nruns, "last eval step", 1, "step", "%.0f");
    row_last(f, runs, nruns, "held-out CE, macro", 1, "eval/macro/ce", "%.4f");
    row_last(f, runs, nruns, "held-out PPL, macro", 1, "eval/macro/ppl", "%.3f");
    char key[256], title[256];
    for (int i = 0; i < sets->n; i++) {
        snprintf(key, sizeof key, "eval/%s/ce", sets->name[i]);
        snprintf(title, sizeof title, "held-out CE, %s", sets->name[i]);
        row_last(f, runs, nruns, title, 1, key, "%.4f");
    }
    for (int i = 0; i < tasks->n; i++) {
        snprintf(key, sizeof key, "task/%s/acc", tasks->name[i]);
        snprintf(title, sizeof title, "%s acc", tasks->name[i]);
        row_last(f, runs, nruns, title, 1, key, "%.4f");
    }
    fprintf(f, "<tr><th>alarms</th>");
    for (int r = 0; r < nruns; r++)
        fprintf(f, "<td%s>%d</td>", runs[r].alarms.n ? " class=\"alarm\"" : "", runs[r].alarms.n);
    fprintf(f, "</tr>\n</table>\n");
}

// A record's row of a table: <tr>, the run, the record's step, `text` in a cell of class `cls`.
static void row_begin(FILE *f, const char *label, const cJSON *o, const char *cls, const char *text) {
    fprintf(f, "<tr><td>");
    html_escape(f, label);
    fprintf(f, "</td>");
    cell_num(f, num(o, "step"), "%.0f");
    fprintf(f, "<td class=\"%s\">", cls);
    html_escape(f, text);
    fprintf(f, "</td>");
}

static void alarms_table(FILE *f, const Run *runs, int nruns) {
    int total = 0;
    for (int r = 0; r < nruns; r++) total += runs[r].alarms.n;
    if (!total) { fprintf(f, "<p>No alarms were recorded.</p>\n"); return; }
    fprintf(f, "<table class=\"alarms\">\n<tr><th>run</th><th>step</th><th>alarm</th><th>details</th></tr>\n");
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].alarms.n; i++) {
            const cJSON *o = runs[r].alarms.r[i];
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "alarm");
            row_begin(f, runs[r].label, o, "alarm", cJSON_IsString(a) ? a->valuestring : "?");
            fprintf(f, "<td>");
            // Every other field, as key=value (the "why" text first when present).
            const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "why");
            if (!why) why = cJSON_GetObjectItemCaseSensitive(o, "message");
            if (cJSON_IsString(why)) { html_escape(f, why->valuestring); fprintf(f, "<br>"); }
            const cJSON *it;
            cJSON_ArrayForEach(it, o) {
                if (!it->string || it == why || it == a || !strcmp(it->string, "kind") || !strcmp(it->string, "step"))
                    continue;
                char *v = cJSON_PrintUnformatted(it);
                fprintf(f, "<span class=\"kv\">");
                html_escape(f, it->string);
                fprintf(f, "=");
                html_escape(f, v);
                fprintf(f, "</span> ");
                free(v);
            }
            fprintf(f, "</td></tr>\n");
        }
    fprintf(f, "</table>\n");
}

// Evaluations attached afterwards (`olmo eval RUN --attach`): one row per record, a column
// per held-out set (CE) and per task (acc) that any of them has.
static void attached_table(FILE *f, const Run *runs, int nruns) {
    Names cols = {0, NULL};
    int total = 0;
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].attached.n; i++, total++) {
            const cJSON *it;
            cJSON_ArrayForEach(it, runs[r].attached.r[i]) {
                const char *k = it->string, *slash = k ? strrchr(k, '/') : NULL;
                if (slash && ((!strncmp(k, "eval/", 5) && !strcmp(slash, "/ce")) ||
                              (!strncmp(k, "task/", 5) && !strcmp(slash, "/acc"))))
                    names_add(&cols, k, strlen(k));
            }
        }
    if (!total) {
        fprintf(f, "<p class=\"note\">None (<code>olmo eval RUN --attach</code> adds them: RUN/evals.jsonl).</p>\n");
        return;
    }
    fprintf(f, "<table class=\"attached\">\n<tr><th>run</th><th>step</th><th>checkpoint</th><th>seq_len</th>");
    for (int c = 0; c < cols.n; c++) { fprintf(f, "<th>"); html_escape(f, cols.name[c]); fprintf(f, "</th>"); }
    fprintf(f, "</tr>\n");
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].attached.n; i++) {
            const cJSON *o = runs[r].attached.r[i], *ck = cJSON_GetObjectItemCaseSensitive(o, "checkpoint");
            row_begin(f, runs[r].label, o, "path", cJSON_IsString(ck) ? ck->valuestring : "?");
            cell_num(f, num(o, "seq_len"), "%.0f");
            for (int c = 0; c < cols.n; c++) cell_num(f, num(o, cols.name[c]), "%.4f");
            fprintf(f, "</tr>\n");
        }
    fprintf(f, "</table>\n");
    names_free(&cols);
}

// Downstream tasks as one table: per task and run, the last evaluated acc, len_norm and
// gold bits per byte next to chance (task/<name>/chance: what guessing scores).
static void tasks_table(FILE *f, const Run *runs, int nruns, const Names *tasks) {
    if (!tasks->n) { fprintf(f, "<p>No downstream tasks were evaluated (eval.tasks, olmo eval --task).</p>\n"); return; }
    fprintf(f, "<table class=\"tasks\">\n<tr><th>task</th><th>run</th><th>step</th><th>examples</th><th>acc</th>"
               "<th>chance</th><th>acc - chance</th><th>len_norm</th><th>gold bits/byte</th></tr>\n");
    char key[300];
    for (int i = 0; i < tasks->n; i++)
        for (int r = 0; r < nruns; r++) {
            snprintf(key, sizeof key, "task/%s/acc", tasks->name[i]);
            const cJSON *o = last_with(&runs[r].eval, key);
            if (!o) continue;
            double acc = num(o, key), v[4];
            const char *m[4] = {"examples", "chance", "len_norm", "bpb"};
            for (int k = 0; k < 4; k++) {
                snprintf(key, sizeof key, "task/%s/%s", tasks->name[i], m[k]);
                v[k] = num(o, key);
            }
            fprintf(f, "<tr><th>");
            html_escape(f, tasks->name[i]);
            fprintf(f, "</th><td>");
            html_escape(f, runs[r].label);
            fprintf(f, "</td>");
            cell_num(f, num(o, "step"), "%.0f");
            cell_num(f, v[0], "%.0f");
            cell_num(f, acc, "%.3f");
            cell_num(f, v[1], "%.3f");
            fprintf(f, "<td%s>", isfinite(v[1]) && acc <= v[1] + 1e-9 ? " class=\"chance\"" : "");
            if (isfinite(v[1])) fprintf(f, "%+.3f%s", acc - v[1], acc <= v[1] + 1e-9 ? " (at or below chance)" : "");
            else fprintf(f, "&ndash;");
            fprintf(f, "</td>");
            cell_num(f, v[2], "%.3f");
            cell_num(f, v[3], "%.3f");
            fprintf(f, "</tr>\n");
        }
    fprintf(f, "</table>\n<p class=\"note\">chance: the accuracy of guessing, the mean over examples of 1 / "
               "choices (recorded by olmo.c's evaluation since issue 37; &ndash; for older records).</p>\n");
}

// What a held-out set is to the run: "<source>.heldout.npy" (olmo prepare's held-out split)
// of a source the run trains on is in-domain, of one it does not train on out of domain;
// otherwise the set the memorization alarm watches is taken as in-domain.
static const char *set_role(const Recipe *rc, const char *path, int watched, char *buf, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t bl = strlen(b), sl = strlen(".heldout.npy");
    if (bl > sl && !strcmp(b + bl - sl, ".heldout.npy")) {
        char src[256];
        snprintf(src, sizeof src, "%.*s.npy", (int)(bl - sl), b);
        int trained = 0;
        for (int k = 0; k < rc->n_paths + rc->n_sources && !trained; k++) {
            const char *t = k < rc->n_paths ? rc->paths[k] : rc->sources[k - rc->n_paths];
            const char *tb = strrchr(t, '/');
            trained = !strcmp(tb ? tb + 1 : t, src);
        }
        snprintf(buf, n, "%s: held-out documents of source %.*s, %s", trained ? "in-domain" : "out of domain",
                 (int)(bl - sl), b, trained ? "which the run trains on" : "which the run does not train on");
    } else snprintf(buf, n, "%s", watched ? "in-domain (the set the memorization alarm watches)" : "another held-out set");
    if (watched) snprintf(buf + strlen(buf), n - strlen(buf), "%s", "; the memorization alarm compares its CE with the "
                                                                     "training loss");
    return buf;
}

// What each held-out set is: its file (the recipe's eval.sets), documents and tokens scored,
// the length it was evaluated at, and whether the memorization alarm watches it.
static void sets_table(FILE *f, const Run *runs, int nruns) {
    fprintf(f, "<table class=\"sets\">\n<tr><th>run</th><th>set</th><th>file</th><th>documents</th>"
               "<th>tokens scored</th><th>evaluated at</th><th>role</th></tr>\n");
    int any = 0;
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        for (int i = 0; rc && i < rc->n_eval_sets; i++) {
            const char *spec = rc->eval_sets[i], *eq = strchr(spec, '=');
            char name[128];
            if (eq) snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
            else {
                const char *b = strrchr(spec, '/');
                snprintf(name, sizeof name, "%s", b ? b + 1 : spec);
                char *dot = strstr(name, ".heldout.npy");
                if (!dot) dot = strstr(name, ".npy");
                if (dot) *dot = 0;
            }
            char kd[200], kt[200];
            snprintf(kd, sizeof kd, "eval/%s/docs", name);
            snprintf(kt, sizeof kt, "eval/%s/tokens", name);
            const cJSON *o = last_with(&runs[r].eval, kd);
            const int watched = rc->memo_set[0] ? !strcmp(rc->memo_set, name) : i == 0;
            fprintf(f, "<tr><td>");
            html_escape(f, runs[r].label);
            fprintf(f, "</td><th>");
            html_escape(f, name);
            fprintf(f, "</th><td class=\"path\">");
            html_escape(f, eq ? eq + 1 : spec);
            fprintf(f, "</td>");
            cell_num(f, o ? num(o, kd) : NAN, "%.0f");
            cell_num(f, o ? num(o, kt) : NAN, "%.0f");
            char role[600];
            fprintf(f, "<td>%d tokens</td><td>", rc->seq_len);
            html_escape(f, set_role(rc, eq ? eq + 1 : spec, watched, role, sizeof role));
            fprintf(f, "</td></tr>\n");
            any = 1;
        }
    }
    fprintf(f, "</table>\n");
    if (!any) fprintf(f, "<p>No recipe names held-out sets (eval.sets).</p>\n");
    fprintf(f, "<p class=\"note\">Held-out documents are never trained on: <code>olmo prepare</code> holds out a "
               "fraction of every source's documents by a hash of their text (in-domain), and a set may also be a whole "
               "source the recipe does not train on (out of domain). Each document is one instance cut to the length "
               "it is evaluated at (train.seq_len), so a set's CE at 1024 tokens is not comparable with its CE at "
               "256: the charts show each length apart.</p>\n");
}

// What the alarms compare, from each run's recipe (alarm.*).
static void alarms_explained(FILE *f, const Run *runs, int nruns) {
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        if (!rc) continue;
        const char *set = rc->memo_set[0] ? rc->memo_set : rc->n_eval_sets ? "the first of eval.sets" : "(no set)";
        fprintf(f, "<p class=\"note\"><b>");
        html_escape(f, runs[r].label);
        fprintf(f, "</b>: the memorization alarm fires when, over the last %d evaluations, the training loss fell by "
                   "at least %.3g nats while the held-out CE of ", rc->memo_k, rc->memo_drop);
        html_escape(f, set);
        fprintf(f, " fell by less than %.3g x that (data repeated or memorized: docs/report.md). The loader's repeat "
                   "accounting (repeat per source) is in the run's log.</p>\n", rc->memo_ratio);
    }
}

// Stages on one axis: a run that starts from an earlier run's weights (train.load_path: its
// directory, a checkpoint or model file in it) without its trainer state starts where that
// run ended, on the token and on the step axis; the boundary is marked.
static void stage_offsets(Run *runs, int nruns, Report *rp) {
    for (int r = 0; r < nruns; r++) {
        const Recipe *rc = runs[r].recipe;
        runs[r].seq_len = rc ? rc->seq_len : 0;
        if (!rc || !rc->load_path[0] || rc->load_trainer_state) continue;
        char *lp = realpath(rc->load_path, NULL);
        for (int q = 0; lp && q < r; q++) {
            char *qd = realpath(runs[q].dir, NULL);
            size_t n = qd ? strlen(qd) : 0;
            if (qd && !strncmp(lp, qd, n) && (lp[n] == 0 || lp[n] == '/')) {
                const RecList *t = &runs[q].train;
                runs[r].tok_off = runs[q].tok_off + (t->n ? num(t->r[t->n - 1], "tokens") : 0);
                runs[r].step_off = runs[q].step_off + (t->n ? num(t->r[t->n - 1], "step") : 0);
                rp->vlines = xrealloc(rp->vlines, sizeof(double) * (size_t)(rp->nvlines + 1));
                rp->vlabels = xrealloc(rp->vlabels, sizeof(char *) * (size_t)(rp->nvlines + 1));
                rp->vlines[rp->nvlines] = rp->xaxis == X_TOKENS ? runs[r].tok_off : runs[r].step_off;
                rp->vlabels[rp->nvlines] = xmalloc(strlen(runs[r].label) + 1);
                strcpy(rp->vlabels[rp->nvlines++], runs[r].label);
                free(qd);
                break;
            }
            free(qd);
        }
        free(lp);
    }
}

// ---------------------------------------------------------------------------------------

static const char *CSS =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}\n"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}\n"
    "table{border-collapse:collapse;font-size:13px;background:#fff}\n"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f0f0f0}td.path{font-family:monospace;font-size:12px}\n"
    ".alarm{color:#b00;font-weight:bold}.kv{font-family:monospace;font-size:11px;color:#555}\n"
    ".swatch{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:middle}\n"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));gap:10px}\n"
    ".chart{border:1px solid #ddd;background:#fff;width:100%;height:auto}\n"
    "table{max-width:100%;overflow-x:auto;display:block}\n"
    "@media (max-width:600px){body{margin:8px}.charts{grid-template-columns:1fr}}\n"
    "p.note{font-size:13px;color:#555}td.chance{color:#b00}\n";

int cmd_report(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    const char *out = NULL, *title = NULL;
    int xstep = 0;
    const char **dirs = xmalloc(sizeof(char *) * (size_t)argc);
    int nruns = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) die_input("report: %s needs a file name", a);
            out = argv[++i];
        } else if (!strcmp(a, "--x")) {
            if (i + 1 >= argc || (strcmp(argv[i + 1], "tokens") && strcmp(argv[i + 1], "step")))
                die_input("report: --x needs tokens or step");
            xstep = !strcmp(argv[++i], "step");
        } else if (!strcmp(a, "--title")) {
            if (i + 1 >= argc) die_input("report: --title needs a text");
            title = argv[++i];
        } else if (a[0] == '-') die_input("report: unknown option '%s' (olmo report --help)", a);
        else dirs[nruns++] = a;
    }
    if (nruns == 0) { usage(stderr); free(dirs); return EXIT_BADINPUT; }

    Run *runs = xcalloc((size_t)nruns, sizeof(Run));
    for (int r = 0; r < nruns; r++) load_run(&runs[r], dirs[r]);
    // Labels name the series: make them unique (the full path when two basenames clash).
    for (int r = 0; r < nruns; r++)
        for (int q = 0; q < r; q++)
            if (!strcmp(runs[r].label, runs[q].label)) {
                snprintf(runs[r].label, sizeof runs[r].label, "%s#%d", runs[r].dir, r + 1);
                break;
            }
    char *outpath = NULL;
    if (out) outpath = xstrdup(out);
    else if (nruns == 1) {
        outpath = xmalloc(strlen(dirs[0]) + 16);
        sprintf(outpath, "%s/report.html", dirs[0]);
    } else outpath = xstrdup("report.html");

    Names sets = {0, NULL}, tasks = {0, NULL};
    collect_names(runs, nruns, &sets, &tasks);

    char *buf = NULL;
    size_t buflen = 0;
    FILE *f = open_memstream(&buf, &buflen);
    if (!f) die("report: out of memory");
    char deftitle[1024] = "olmo report:";
    for (int r = 0; r < nruns && strlen(deftitle) < sizeof deftitle - 300; r++) {
        strcat(deftitle, r ? ", " : " ");
        strncat(deftitle, runs[r].label, 256);
    }
    if (!title) title = deftitle;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    html_escape(f, title);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>", CSS);
    html_escape(f, title);
    fprintf(f, "</h1>\n<p class=\"note\">Written by <code>olmo report</code> from each run's metrics.jsonl and "
               "recipe.yml. Series are overlaid per metric, one color per run; dashed lines are held-out.</p>\n");

    Report rp = {f, runs, nruns, 0, 0, xstep ? X_STEP : X_TOKENS, 0, NULL, NULL, 0};
    stage_offsets(runs, nruns, &rp);
    fprintf(f, "<h2>Summary</h2>\n");
    summary(f, runs, nruns, &sets, &tasks);
    fprintf(f, "<h2>Alarms</h2>\n");
    alarms_table(f, runs, nruns);
    alarms_explained(f, runs, nruns);
    fprintf(f, "<h2>Held-out sets: what each one is</h2>\n");
    sets_table(f, runs, nruns);

    char key[256];
    fprintf(f, "<h2>Training loss</h2>\n<div class=\"charts\">\n");
    chart(&rp, "Training loss", "loss (nats)", 0, "loss", NULL);
    // The memorization view: training loss next to in-domain held-out CE.
    const char *held = NULL;
    for (int r = 0; r < nruns && !held; r++) if (last_with(&runs[r].eval, "eval/macro/ce")) held = "eval/macro/ce";
    if (!held && sets.n) { snprintf(key, sizeof key, "eval/%s/ce", sets.name[0]); held = key; }
    if (held) chart_by_T(&rp, "Training loss and held-out CE", "nats", 0, "loss", held);
    fprintf(f, "</div>\n");

    fprintf(f, "<h2>Held-out perplexity sets</h2>\n<div class=\"charts\">\n");
    chart_by_T(&rp, "Held-out CE, macro over sets", "CE (nats)", 1, "eval/macro/ce", NULL);
    chart_by_T(&rp, "Held-out perplexity, macro (log scale)", "PPL", 1, "eval/macro/ppl", NULL);
    chart_by_T(&rp, "Held-out bits per byte, macro", "bits/byte", 1, "eval/macro/bpb", NULL);
    static const char *set_metrics[][2] = {{"ce", "CE (nats)"}, {"ppl", "perplexity (log scale)"}, {"bpb", "bits per byte"}};
    chart_each(&rp, "eval", &sets, set_metrics);
    if (!sets.n) fprintf(f, "<p>No perplexity sets were evaluated (eval.sets).</p>\n");
    fprintf(f, "</div>\n");

    fprintf(f, "<h2>Downstream tasks</h2>\n");
    tasks_table(f, runs, nruns, &tasks);
    fprintf(f, "<h2>Evaluations attached with olmo eval --attach</h2>\n");
    attached_table(f, runs, nruns);

    fprintf(f, "<h2>Optimization and throughput</h2>\n<div class=\"charts\">\n");
    chart(&rp, "Learning rate", "LR", 0, "lr", NULL);
    chart(&rp, "Gradient norm (before clipping)", "global L2 norm", 0, "grad_norm", NULL);
    chart(&rp, "Throughput", "tokens/s", 0, "tokens_per_s", NULL);
    chart(&rp, "Model FLOPs utilization", "MFU", 0, "mfu", NULL);
    fprintf(f, "</div>\n");
    fprintf(f, "<p class=\"note\">MFU uses the OLMo-core FLOPs count (docs/olmo3.md s.8): 6 N_nonembedding + "
               "12 L H Dh T per token, times the job's tokens/s, over the peak of the hardware the job uses "
               "(the per-core GEMM peak x the physical cores its ranks use, or the sum of its GPUs' peaks).</p>\n"
               "</body>\n</html>\n");
    fclose(f);

    if (write_file_atomic(outpath, buf, buflen) != 0) die_input("report: cannot write %s", outpath);
    printf("report: wrote %s (%d runs, %d charts, %d series, %zu bytes)\n", outpath, nruns, rp.ncharts, rp.nseries,
           buflen);
    free(buf);
    free(outpath);
    names_free(&sets);
    names_free(&tasks);
    for (int i = 0; i < rp.nvlines; i++) free(rp.vlabels[i]);
    free(rp.vlines);
    free(rp.vlabels);
    for (int r = 0; r < nruns; r++) free_run(&runs[r]);
    free(runs);
    free(dirs);
    return 0;
}
