// cmd_report.c: `olmo report RUN... [-o report.html] [--title T]`: one self-contained HTML
// file (inline SVG from src/eval/svg.c; no JavaScript, no network, nothing external) of
// one or more runs, overlaid so a reproduction can be judged by eye. This file: arguments,
// the runs' records, the stage axis, the summary table (a column per run: model, recipe
// facts, steps and tokens, final metrics, throughput, alarms) and the charts (training
// loss; training loss next to held-out CE, the memorization view of docs/olmo3.md s.7; the
// memorization alarm's inputs and gap; held-out CE / PPL / BPB macro and CE per set, per
// evaluation length; LR, grad norm, tokens/s, MFU). report_panels.c: the alarms panel, the
// held-out sets legend, the downstream bars and table (report.h).
// Every series is a <path data-series="<run>:<metric key>">, the metric key as in
// metrics.jsonl (loss, lr, eval/macro/ce, ...). docs/report.md lists it all.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/report.h"
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
            "one or more runs, overlaid with a legend: a summary table per run (model, steps, tokens,\n"
            "final metrics, alarms); the alarms panel (what the memorization and repeat alarms compare,\n"
            "their latest numbers, whether they fired); what each held-out set is; downstream accuracy\n"
            "against chance; charts of training loss, held-out CE / perplexity / bits-per-byte, LR,\n"
            "grad norm, tokens/s, MFU. Reads RUN_DIR/metrics.jsonl and RUN_DIR/recipe.yml (docs/report.md).\n"
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

static void reclist_push(RecList *l, cJSON *o) {
    if (l->n == l->cap) { l->cap = l->cap ? 2 * l->cap : 64; l->r = xrealloc(l->r, sizeof(cJSON *) * (size_t)l->cap); }
    l->r[l->n++] = o;
}

double report_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// Step-ordered records: a record whose step is not past the last one (a resumed run
// replaying steps after its checkpoint) replaces the records it overlaps, so the lists
// hold the history that led to the final state.
static void push_step_record(RecList *l, cJSON *o) {
    double s = report_num(o, "step");
    while (l->n > 0 && report_num(l->r[l->n - 1], "step") >= s) cJSON_Delete(l->r[--l->n]);
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
    for (int i = 0; i < run->train.n && report_num(run->train.r[i], "step") <= step; i++) {
        double v = report_num(run->train.r[i], "tokens");
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
    int also_same;              // chart()'s `also` key is of the same record kind as `key` (the alarm's inputs)
    double *vlines;             // stage boundaries on the x axis, and their labels
    char **vlabels;
    int nvlines;
    double ref_y;               // finite: chart() adds a dark dashed "chance" line at this y
} Report;

// One chart of `key` (a metric key of train or eval records) for every run.
// `also` (optional): a second key from the other record kind, dashed (the overlay view).
static void chart(Report *rp, const char *title, const char *ylabel, int from_eval, const char *key, const char *also) {
    const int xaxis = rp->xaxis;
    int ns = 0;
    SvgSeries *s = xcalloc((size_t)rp->nruns * 2 + 1, sizeof(SvgSeries));
    char **ids = xcalloc((size_t)rp->nruns * 4, sizeof(char *));
    double **bufs = xcalloc((size_t)rp->nruns * 4, sizeof(double *));
    int nbuf = 0, nid = 0, any = 0;
    for (int r = 0; r < rp->nruns; r++) {
        const Run *run = &rp->runs[r];
        if (rp->only_T > 0 && run->seq_len != rp->only_T) continue;
        for (int pass = 0; pass < (also ? 2 : 1); pass++) {
            const char *k = pass ? also : key;
            int ev = pass && !rp->also_same ? !from_eval : from_eval;
            const RecList *l = ev ? &run->eval : &run->train;
            double *x = xmalloc(sizeof(double) * (size_t)(l->n + 1)), *y = xmalloc(sizeof(double) * (size_t)(l->n + 1));
            int n = 0, finite = 0;
            for (int i = 0; i < l->n; i++) {
                double st = report_num(l->r[i], "step");
                x[n] = xaxis == X_TOKENS ? run->tok_off + (ev ? tokens_at(run, st) : report_num(l->r[i], "tokens"))
                                         : run->step_off + st;
                y[n] = report_num(l->r[i], k);
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
            if (also) snprintf(label, idl + 16, "%s %s", run->label, (rp->also_same ? pass : ev) ? "held-out" : "train");
            else snprintf(label, idl + 16, "%s", run->label);
            ids[nid++] = id;
            ids[nid++] = label;
            const int dashed = rp->also_same ? pass == 1 : pass == 1 || (also && from_eval);
            s[ns++] = (SvgSeries){id, label, svg_color(r), x, y, n, dashed, ev};
        }
    }
    double xr[2] = {INFINITY, -INFINITY}, yr[2] = {rp->ref_y, rp->ref_y};
    if (any && isfinite(rp->ref_y)) {   // the reference spans the series' x range
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < s[i].n; j++)
                if (isfinite(s[i].y[j]) && isfinite(s[i].x[j])) {
                    if (s[i].x[j] < xr[0]) xr[0] = s[i].x[j];
                    if (s[i].x[j] > xr[1]) xr[1] = s[i].x[j];
                }
        s[ns++] = (SvgSeries){"chance", "chance", "#222222", xr, yr, 2, 1, 0};
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

// The OLMo 3 suite panel: the table (report_suite_table), then per label its primary
// metric over steps, chance a dark dashed line where the metric is an accuracy.
static void suite_panel(Report *rp, const Names *suite) {
    report_suite_table(rp->f, rp->runs, rp->nruns, suite);
    if (!suite->n) return;
    fprintf(rp->f, "<div class=\"charts\">\n");
    for (int i = 0; i < suite->n; i++) {
        char key[300], title[400];
        const char *m = report_suite_primary(rp->runs, rp->nruns, suite->name[i], key, sizeof key);
        if (!m) continue;
        rp->ref_y = report_suite_chance(rp->runs, rp->nruns, suite->name[i]);
        if (isfinite(rp->ref_y)) snprintf(title, sizeof title, "%s: %s (chance %.3f)", suite->name[i], m, rp->ref_y);
        else snprintf(title, sizeof title, "%s: %s", suite->name[i], m);
        chart(rp, title, m, 1, key, NULL);
        rp->ref_y = NAN;
    }
    fprintf(rp->f, "</div>\n");
}

// ---------------------------------------------------------------------------------------
// Metric keys present in eval records (first appearance order)

void report_names_add(Names *ns, const char *s, size_t len) {
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

void report_names_free(Names *ns) {
    for (int i = 0; i < ns->n; i++) free(ns->name[i]);
    free(ns->name);
}

// Set names (eval/<set>/ce, macro excluded), task names (task/<name>/acc|len_norm|bpb) and
// OLMo 3 suite labels (downstream/<label>/<metric>).
static void collect_names(const Run *runs, int nruns, Names *sets, Names *tasks, Names *suite) {
    for (int r = 0; r < nruns; r++)
        for (int i = 0; i < runs[r].eval.n; i++) {
            const cJSON *it;
            cJSON_ArrayForEach(it, runs[r].eval.r[i]) {
                const char *k = it->string;
                if (!k) continue;
                const char *slash = strrchr(k, '/');
                if (!slash || slash - k < 6) continue;
                if (!strncmp(k, "eval/", 5) && !strcmp(slash, "/ce") && strncmp(k, "eval/macro/", 11))
                    report_names_add(sets, k + 5, (size_t)(slash - k - 5));
                else if (!strncmp(k, "task/", 5) &&
                         (!strcmp(slash, "/acc") || !strcmp(slash, "/len_norm") || !strcmp(slash, "/bpb")))
                    report_names_add(tasks, k + 5, (size_t)(slash - k - 5));
                else if (!strncmp(k, "downstream/", 11) && slash > k + 11)
                    report_names_add(suite, k + 11, (size_t)(slash - k - 11));
            }
        }
}

// ---------------------------------------------------------------------------------------
// Summary table

const cJSON *report_last_with(const RecList *l, const char *key) {
    for (int i = l->n - 1; i >= 0; i--)
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(l->r[i], key))) return l->r[i];
    return NULL;
}

void report_cell(FILE *f, double v, const char *fmt) {
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
        const cJSON *o = report_last_with(from_eval ? &runs[r].eval : &runs[r].train, key);
        report_cell(f, o ? report_num(o, key) : NAN, fmt);
    }
    fprintf(f, "</tr>\n");
}

// Mean of `key` over the train records after the first (the first step carries warm-up
// costs: allocation, page faults, the peak-FLOPs measurement).
static double mean_after_first(const Run *run, const char *key) {
    double s = 0;
    int n = 0;
    for (int i = run->train.n > 1 ? 1 : 0; i < run->train.n; i++) {
        double v = report_num(run->train.r[i], key);
        if (isfinite(v)) { s += v; n++; }
    }
    return n ? s / n : NAN;
}

void report_run_th(FILE *f, const Run *runs, int r, const char *suffix) {
    fprintf(f, "<th><span class=\"swatch\" style=\"background:%s\"></span>", svg_color(r));
    html_escape(f, runs[r].label);
    fprintf(f, "%s</th>", suffix);
}

static void summary(FILE *f, const Run *runs, int nruns, const Names *sets, const Names *tasks) {
    fprintf(f, "<table class=\"summary\">\n<tr><th></th>");
    for (int r = 0; r < nruns; r++) report_run_th(f, runs, r, "");
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
        double last = run->train.n ? report_num(run->train.r[run->train.n - 1], "step") : NAN;
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
    for (int r = 0; r < nruns; r++) report_cell(f, mean_after_first(&runs[r], "tokens_per_s"), "%.0f");
    fprintf(f, "</tr>\n<tr><th>mean MFU</th>");
    for (int r = 0; r < nruns; r++) report_cell(f, 100 * mean_after_first(&runs[r], "mfu"), "%.2f%%");
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
                    report_names_add(&cols, k, strlen(k));
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
            report_row_begin(f, runs[r].label, o, "path", cJSON_IsString(ck) ? ck->valuestring : "?");
            report_cell(f, report_num(o, "seq_len"), "%.0f");
            for (int c = 0; c < cols.n; c++) report_cell(f, report_num(o, cols.name[c]), "%.4f");
            fprintf(f, "</tr>\n");
        }
    fprintf(f, "</table>\n");
    report_names_free(&cols);
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
                runs[r].tok_off = runs[q].tok_off + (t->n ? report_num(t->r[t->n - 1], "tokens") : 0);
                runs[r].step_off = runs[q].step_off + (t->n ? report_num(t->r[t->n - 1], "step") : 0);
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
    "p.note{font-size:13px;color:#555}td.chance{color:#b00}td.quiet{color:#2a7a2a}\n"
    "table.alarmpanel td,table.sets td{max-width:420px}div.rule{font-weight:normal;font-size:11px;color:#555;"
    "max-width:300px}\n";

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

    Names sets = {0, NULL}, tasks = {0, NULL}, suite = {0, NULL};
    collect_names(runs, nruns, &sets, &tasks, &suite);

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

    Report rp = {f, runs, nruns, 0, 0, xstep ? X_STEP : X_TOKENS, 0, 0, NULL, NULL, 0, NAN};
    stage_offsets(runs, nruns, &rp);
    report_alarm_views(runs, nruns);
    fprintf(f, "<h2>Summary</h2>\n");
    summary(f, runs, nruns, &sets, &tasks);
    fprintf(f, "<h2>Alarms</h2>\n");
    report_alarms_panel(f, runs, nruns);
    fprintf(f, "<div class=\"charts\">\n");
    rp.also_same = 1;
    chart_by_T(&rp, "What the memorization alarm compares", "nats", 1, "alarm/train_loss", "alarm/heldout_ce");
    rp.also_same = 0;
    chart_by_T(&rp, "Its gap: held-out CE - training loss", "nats", 1, "alarm/gap", NULL);
    fprintf(f, "</div>\n");
    fprintf(f, "<h2>Held-out sets: what each one is</h2>\n");
    report_sets_table(f, runs, nruns);

    fprintf(f, "<h2>Downstream tasks</h2>\n");
    report_tasks(f, runs, nruns, &tasks);

    fprintf(f, "<h2>OLMo 3 downstream suite (eval.downstream)</h2>\n");
    suite_panel(&rp, &suite);

    char key[256];
    fprintf(f, "<h2>Training loss</h2>\n<div class=\"charts\">\n");
    chart(&rp, "Training loss", "loss (nats)", 0, "loss", NULL);
    // The memorization view: training loss next to in-domain held-out CE.
    const char *held = NULL;
    for (int r = 0; r < nruns && !held; r++) if (report_last_with(&runs[r].eval, "eval/macro/ce")) held = "eval/macro/ce";
    if (!held && sets.n) { snprintf(key, sizeof key, "eval/%s/ce", sets.name[0]); held = key; }
    if (held) chart_by_T(&rp, "Training loss and held-out CE", "nats", 0, "loss", held);
    fprintf(f, "</div>\n");

    fprintf(f, "<h2>Held-out perplexity sets</h2>\n<div class=\"charts\">\n");
    chart_by_T(&rp, "Held-out CE, macro over sets", "CE (nats)", 1, "eval/macro/ce", NULL);
    chart_by_T(&rp, "Held-out perplexity, macro (log scale)", "PPL", 1, "eval/macro/ppl", NULL);
    chart_by_T(&rp, "Held-out bits per byte, macro", "bits/byte", 1, "eval/macro/bpb", NULL);
    for (int i = 0; i < sets.n; i++) {   // CE only: a set's PPL and bits per byte follow it (the sets table)
        char tag[64], t[512];
        report_set_tag(runs, nruns, sets.name[i], tag, sizeof tag);
        snprintf(key, sizeof key, "eval/%s/ce", sets.name[i]);
        snprintf(t, sizeof t, "%s%s%s%s: CE (nats)", sets.name[i], tag[0] ? " (" : "", tag, tag[0] ? ")" : "");
        chart_by_T(&rp, t, "CE (nats)", 1, key, NULL);
    }
    if (!sets.n) fprintf(f, "<p>No perplexity sets were evaluated (eval.sets).</p>\n");
    fprintf(f, "</div>\n");

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
    report_names_free(&sets);
    report_names_free(&tasks);
    report_names_free(&suite);
    for (int i = 0; i < rp.nvlines; i++) free(rp.vlabels[i]);
    free(rp.vlines);
    free(rp.vlabels);
    for (int r = 0; r < nruns; r++) free_run(&runs[r]);
    free(runs);
    free(dirs);
    return 0;
}
