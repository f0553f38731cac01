// eval_internal.h: the Evaluator's parts shared by eval.c (perplexity sets, the run loop)
// and tasks.c (multiple-choice tasks). Not a public API: eval.h is.
#ifndef OLMO_EVAL_INTERNAL_H
#define OLMO_EVAL_INTERNAL_H

#include <stdint.h>

#include "data/tokenizer.h"
#include "eval/eval.h"

// A perplexity set: a token file (raw uint32) cut into documents at EOS. Document d is
// tok[start[d] .. start[d+1]), its EOS last (the EOS after a document belongs to it).
typedef struct {
    char name[64];
    char *path;
    uint32_t *tok;
    long ndocs;       // complete documents kept (after eval.max_docs)
    size_t *start;    // ndocs + 1 boundaries
} EvalSet;

// One multiple-choice example, tokenized at load: context (few-shot prefix included) and
// one continuation per choice.
typedef struct {
    int32_t *ctx;
    int nctx;
    int nchoices, gold;
    int32_t **cont;   // (nchoices) token ids
    int *ncont;
    long *chars;      // Unicode code points of each continuation (len_norm)
    long gold_bytes;  // UTF-8 bytes of the gold continuation (bpb)
} TaskExample;

typedef struct {
    char name[64];
    char *path;
    TaskExample *ex;
    int n;
} EvalTask;

struct Evaluator {
    int B, T;               // micro_batch, seq_len: the model's buffers
    long interval;
    long max_docs, max_examples;
    uint32_t eos;
    int vocab;              // model vocab: ids at or above it are bad input
    Tokenizer *tok;
    int *tok_bytes;         // (vocab) UTF-8 bytes of each token id; specials and EOS 0
    EvalSet *sets;
    int nsets;
    EvalTask *tasks;
    int ntasks;
    struct OlmesTask *downstream;   // eval.downstream (olmes.h)
    int ndownstream;
    int32_t *inp, *tgt;     // (B*T) batch buffers
    float *tok_ce;          // (B*T)
    const char *details_path;  // optional JSONL of per-example task scores (olmo eval --details)
    EvalForwardFn fwd;      // eval_set_forward: the forward in place of the CPU Model; NULL = the Model
    void *fwd_ctx;
};

// A row of a forward batch: a token sequence seq[0..n) with n-1 <= T. Inputs are
// seq[0..n-1), targets seq[1..n); only targets seq[first..n) are scored (first >= 1).
typedef struct {
    const int32_t *seq;
    int n, first;
} EvalRow;

// Forward rows B at a time, in the given order; ce_out[i] = sum of the per-token CE (nats)
// of row i's scored targets. A row's sum depends only on the row (causal attention; padding
// is masked) up to fp32 rounding: the kernels' blocking follows the batch's shape, so the
// rows beside it can move its last bits (up to 8e-8 relative measured at micro_batch 4 when
// the rows were sorted by length: why they are not, results stay bitwise; docs/eval.md).
// The forward is e->fwd when set (m unused, may be NULL), else model_forward_backward on m.
void eval_forward_rows(Evaluator *e, Model *m, const EvalRow *rows, int nrows, double *ce_out);

// tasks.c
// Bad input in a file (exit 2): "path:line: message", or "path: message" for line <= 0.
__attribute__((format(printf, 3, 4), noreturn)) void eval_bad_line(const char *path, long line, const char *fmt, ...);
void eval_task_load(Evaluator *e, EvalTask *t, const char *spec, const Recipe *r);
void eval_task_free(EvalTask *t);
void eval_task_run(Evaluator *e, Model *m, const EvalTask *t, cJSON *out);

// "name=path" or "path" (name = file stem without `strip` suffixes); name into name[64]. With r,
// the path is resolved by recipe_eval_path (eval.tokenizer_id, eval.base_dir); NULL: as given.
void eval_split_spec(const char *spec, const char *const *strip, const Recipe *r, char name[64], char **path);

#endif
