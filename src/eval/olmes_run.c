// olmes_run.c: scoring a downstream task (olmes_tasks.c's samples) with the model: one
// forward row per sample, and per choice for fast_mc (the same query, each choice as the
// one target), through eval_forward_rows; then ICLMetric's values (olmes_metrics.c) into the
// record as "downstream/<label>/<metric>" and "downstream/<label>/samples" (the package's
// sample count: one per question for fast_mc and bpb/ce_loss tasks, one per question and
// continuation otherwise), and for acc / len_norm tasks "downstream/<label>/chance": the
// accuracy of guessing, the mean over questions of 1 / choices (olmo report's reference
// line; not one of ICLMetric's values). With --details, one JSON line per scored pair, in update order:
// {"downstream", "doc_id", "cont_id", "label", "logp"}.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/olmes.h"
#include "util/common.h"

int olmes_task_pairs(const OlmesTask *t, const double *S, OlmesScore *p) {
    int r = 0;
    for (int i = 0; i < t->n; i++) {
        const OlmesSample *s = &t->s[i];
        int k = t->def->fast_mc ? s->nchoices : 1;
        for (int c = 0; c < k; c++, r++) {
            if (p) p[r] = olmes_score(t->def->metric, s, t->def->fast_mc ? c : s->cont_id, S ? S[r] : 0.0);
        }
    }
    return r;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

// The mean over questions (distinct doc_ids of the pairs) of 1 / the question's pairs.
static double chance_of(const OlmesScore *p, int np) {
    long *d = xmalloc(sizeof(long) * (size_t)(np ? np : 1));
    for (int i = 0; i < np; i++) d[i] = p[i].doc_id;
    qsort(d, (size_t)np, sizeof(long), cmp_long);
    double sum = 0;
    long nq = 0;
    for (int i = 0, j; i < np; i = j) {
        for (j = i; j < np && d[j] == d[i]; j++) {}
        sum += 1.0 / (double)(j - i);
        nq++;
    }
    free(d);
    return nq ? sum / (double)nq : NAN;
}

void olmes_task_run(Evaluator *e, Model *m, const OlmesTask *t, cJSON *out) {
    int np = olmes_task_pairs(t, NULL, NULL);
    EvalRow *rows = xmalloc(sizeof(EvalRow) * (size_t)np);
    int32_t **tmp = xcalloc((size_t)np, sizeof(int32_t *));
    int r = 0;
    for (int i = 0; i < t->n; i++) {
        const OlmesSample *s = &t->s[i];
        if (!t->def->fast_mc) { rows[r++] = (EvalRow){s->seq, s->nseq, s->ctx_len}; continue; }
        for (int c = 0; c < s->nchoices; c++, r++) {   // the query, then choice c as the target
            tmp[r] = xmalloc(sizeof(int32_t) * (size_t)s->nseq);
            memcpy(tmp[r], s->seq, sizeof(int32_t) * (size_t)(s->nseq - 1));
            tmp[r][s->nseq - 1] = s->choices[c];
            rows[r] = (EvalRow){tmp[r], s->nseq, s->nseq - 1};
        }
    }
    double *ce = xmalloc(sizeof(double) * (size_t)np);
    eval_forward_rows(e, m, rows, np, ce);

    FILE *det = NULL;
    if (e->details_path && !(det = fopen(e->details_path, "a"))) die("cannot write %s: %s", e->details_path, strerror(errno));
    for (int i = 0; i < np; i++) ce[i] = -ce[i];   // the pairs' log-likelihoods
    OlmesScore *p = xmalloc(sizeof(OlmesScore) * (size_t)np);
    olmes_task_pairs(t, ce, p);
    for (int i = 0; det && i < np; i++)
        fprintf(det, "{\"downstream\":\"%s\",\"doc_id\":%ld,\"cont_id\":%d,\"label\":%d,\"logp\":%.17g}\n",
                t->label, p[i].doc_id, p[i].cont_id, p[i].label, p[i].S);
    if (det) fclose(det);
    const char *names[11];
    double vals[11];   // olmes_compute's (at most 10) and chance
    int k = olmes_compute(t->def->metric, t->label, p, np, names, vals);
    char key[200];
    if (t->def->metric == OLMES_ACC || t->def->metric == OLMES_LEN_NORM) {
        names[k] = "chance";
        vals[k++] = chance_of(p, np);
    }
    for (int i = 0; i <= k; i++) {
        snprintf(key, sizeof key, "downstream/%s/%s", t->label, i < k ? names[i] : "samples");
        double v = i < k ? vals[i] : (double)t->n;
        cJSON_DeleteItemFromObjectCaseSensitive(out, key);
        if (isfinite(v)) cJSON_AddNumberToObject(out, key, v);
        else cJSON_AddNullToObject(out, key);   // JSON has no inf/nan
    }
    for (int i = 0; i < np; i++) free(tmp[i]);
    free(tmp); free(rows); free(ce); free(p);
}

void olmes_print_table(FILE *f, const Evaluator *e, const cJSON *out) {
    for (int i = 0; i < e->ndownstream; i++) {
        if (i == 0 && (e->nsets || e->ntasks)) fprintf(f, "\n");
        char prefix[200];
        int n = snprintf(prefix, sizeof prefix, "downstream/%s/", e->downstream[i].label);
        const cJSON *it;
        cJSON_ArrayForEach(it, out) {
            if (!it->string || strncmp(it->string, prefix, (size_t)n)) continue;
            if (cJSON_IsNumber(it)) fprintf(f, "%-56s %.6f\n", it->string, it->valuedouble);
            else fprintf(f, "%-56s %s\n", it->string, "null");
        }
    }
}
