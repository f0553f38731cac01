// olmes_metrics.c: ICLMetric's metrics (the ai2-olmo-eval package's metrics.py), from the
// sum S of the log-probabilities of each scored (question, continuation) pair.
//
// update, per pair, with L = code points and B = UTF-8 bytes of the continuation (of
// continuation 0 for fast_mc's choices), L' = L - 1 and B' = the bytes without its first
// code point ("no leading space"), LOG2E = 1.44269504089 (the package's constant):
//   acc:                 ll = S,     ll' = S
//   len_norm/ce_loss/bpb: ll = S / L, ll' = S / L'
//   all:                 ce = -S / L, ce' = -S / L', bpb = -S / B * LOG2E, bpb' = -S / B' * LOG2E
// (IEEE division: a one-character continuation gives L' = 0 and an infinite ll', ce', bpb'
// as torch does). compute: per doc_id the first value of each cont_id and the first label;
// a question whose cont_ids are not 0..n-1 is skipped; then, averaged over questions:
//   ce_loss: ce_loss_v1 = mean ce'[0],  ce_loss_v2 = mean ce[0]
//   bpb:     bpb_v1 = mean bpb'[0],     bpb_v2 = mean bpb[0]
//   acc / len_norm: <type>_v1 = <type>_v2 = mean [argmax ll == label] (the first maximum),
//     ce_loss_v1/v2 = mean ce'/ce[label], bpb_v1/v2 = mean bpb'/bpb[label],
//     soft_v1/v2 = mean softmax(ll'/ll)[label], soft_log_v1/v2 = mean log_softmax(ll'/ll)[label].
// The package holds ll in float32 for the argmax; this holds doubles (a float32 tie can
// differ).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/olmes.h"
#include "util/common.h"

#define LOG_2_OF_E 1.44269504089

OlmesScore olmes_score(OlmesMetric m, const OlmesSample *s, int cont_id, double S) {
    OlmesScore p = {s->doc_id, cont_id, s->label, S, S, S, 0, 0, 0, 0};
    if (m != OLMES_ACC) {
        p.ll = S / (double)s->str_len;
        p.ll_nls = S / (double)s->str_len_nls;
    }
    p.ce = -S / (double)s->str_len;
    p.ce_nls = -S / (double)s->str_len_nls;
    p.bpb = -S / (double)s->byte_len * LOG_2_OF_E;
    p.bpb_nls = -S / (double)s->byte_len_nls * LOG_2_OF_E;
    return p;
}

static int by_doc(const void *a, const void *b) {
    const OlmesScore *x = *(const OlmesScore *const *)a, *y = *(const OlmesScore *const *)b;
    if (x->doc_id != y->doc_id) return x->doc_id < y->doc_id ? -1 : 1;
    return x < y ? -1 : 1;   // update order within a question
}

// softmax(v)[g] and log_softmax(v)[g] over n values.
static void soft(const double *v, int n, int g, double *sm, double *lsm) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < n; i++) if (v[i] > mx) mx = v[i];
    for (int i = 0; i < n; i++) z += exp(v[i] - mx);
    *lsm = v[g] - mx - log(z);
    *sm = exp(*lsm);
}

// torch.argmax: the first maximum; a NaN is the maximum.
static int argmax(const double *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (!isnan(v[b]) && (isnan(v[i]) || v[i] > v[b])) b = i;
    return b;
}

enum { CORRECT, CE1, CE2, BPB1, BPB2, SOFT1, SOFT2, SLOG1, SLOG2, NSUM };

// One question's pairs q[0..n) (update order): adds its terms to sum; 0 when skipped.
static int question(OlmesMetric m, const char *task, const OlmesScore *const *q, int n, double sum[NSUM]) {
    // the first value of each cont_id; their number is the question's continuations
    const OlmesScore *by[256] = {0};
    int nc = 0;
    for (int i = 0; i < n; i++) {
        if (q[i]->cont_id >= 256) return 0;   // beyond any count: an IndexError, skipped
        if (!by[q[i]->cont_id]) { by[q[i]->cont_id] = q[i]; nc++; }
    }
    for (int c = 0; c < nc; c++)
        if (!by[c]) return 0;   // cont_ids not 0..nc-1: the package skips the question
    int g = q[0]->label;
    if (m == OLMES_CE_LOSS || m == OLMES_BPB) g = 0;
    if (g >= nc)
        die_input("downstream task %s: doc_id %ld: label %d but %d continuations (the package fails on it too)", task,
                  q[0]->doc_id, g, nc);
    double ll[256], lln[256];
    for (int c = 0; c < nc; c++) { ll[c] = by[c]->ll; lln[c] = by[c]->ll_nls; }
    sum[CE1] += by[g]->ce_nls;
    sum[CE2] += by[g]->ce;
    sum[BPB1] += by[g]->bpb_nls;
    sum[BPB2] += by[g]->bpb;
    if (m == OLMES_ACC || m == OLMES_LEN_NORM) {
        double a, b;
        sum[CORRECT] += argmax(ll, nc) == g;
        soft(lln, nc, g, &a, &b);
        sum[SOFT1] += a; sum[SLOG1] += b;
        soft(ll, nc, g, &a, &b);
        sum[SOFT2] += a; sum[SLOG2] += b;
    }
    return 1;
}

int olmes_compute(OlmesMetric m, const char *task, const OlmesScore *p, int np, const char *names[10], double values[10]) {
    const OlmesScore **q = xmalloc(sizeof *q * (size_t)(np > 0 ? np : 1));
    for (int i = 0; i < np; i++) q[i] = &p[i];
    qsort(q, (size_t)np, sizeof *q, by_doc);
    double sum[NSUM] = {0};
    long nq = 0;
    for (int i = 0; i < np;) {
        int j = i;
        while (j < np && q[j]->doc_id == q[i]->doc_id) j++;
        nq += question(m, task, q + i, j - i, sum);
        i = j;
    }
    free(q);
    if (nq == 0) die_input("downstream task %s: no question with all its continuations scored", task);
    int k = 0;
#define PUT(name, v) (names[k] = (name), values[k++] = (v) / (double)nq)
    if (m == OLMES_CE_LOSS) { PUT("ce_loss_v1", sum[CE1]); PUT("ce_loss_v2", sum[CE2]); return k; }
    if (m == OLMES_BPB) { PUT("bpb_v1", sum[BPB1]); PUT("bpb_v2", sum[BPB2]); return k; }
    PUT(m == OLMES_ACC ? "acc_v1" : "len_norm_v1", sum[CORRECT]);
    PUT(m == OLMES_ACC ? "acc_v2" : "len_norm_v2", sum[CORRECT]);
    PUT("ce_loss_v1", sum[CE1]); PUT("ce_loss_v2", sum[CE2]);
    PUT("bpb_v1", sum[BPB1]); PUT("bpb_v2", sum[BPB2]);
    PUT("soft_v1", sum[SOFT1]); PUT("soft_v2", sum[SOFT2]);
    PUT("soft_log_v1", sum[SLOG1]); PUT("soft_log_v2", sum[SLOG2]);
#undef PUT
    return k;
}
