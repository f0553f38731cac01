// tasks.c: downstream multiple-choice tasks (OLMES / lm-eval shape), scored by rank
// classification over continuation log-likelihoods.
//
// File: JSONL, one example per line:
//   {"id": ..., "context": "...", "choices": ["...", ...], "gold": 0,
//    "fewshot": [{"context": "...", "choices": [...], "gold": 1}, ...]}   (fewshot optional)
// Few-shot examples are prepended as context + gold choice + "\n\n". The context (prefix
// included) and each continuation are tokenized separately and concatenated, as lm-eval
// does; an empty context becomes the EOS token so the first continuation token has
// something to be predicted from. A sequence longer than seq_len + 1 loses tokens on the
// left. Per example, with S_i = sum of log p over the continuation tokens of choice i:
//   acc      = [argmax_i S_i == gold]
//   len_norm = [argmax_i S_i / chars_i == gold]        (OLMES acc_per_char)
//   bpb      = -S_gold / ln 2 / UTF-8 bytes of the gold continuation
// each averaged over the examples (ties go to the lowest index).
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/eval_internal.h"
#include "util/common.h"

typedef struct {
    const char *path;
    long line;
} Where;

#define BAD(w, ...) eval_bad_line((w).path, (w).line, __VA_ARGS__)

void eval_bad_line(const char *path, long line, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) die_input("%s:%ld: %s", path, line, msg);
    die_input("%s: %s", path, msg);
}

static long utf8_chars(const char *s) {
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

// Validate {"context", "choices", "gold"} of an example or a few-shot example.
static void check_mc(Where w, const cJSON *o, const char *what, const cJSON **ctx, const cJSON **choices, int *gold) {
    if (!cJSON_IsObject(o)) BAD(w, "%s: expected a JSON object", what);
    *ctx = cJSON_GetObjectItemCaseSensitive(o, "context");
    if (!cJSON_IsString(*ctx)) BAD(w, "%s: \"context\" must be a string", what);
    *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
    if (!cJSON_IsArray(*choices)) BAD(w, "%s: \"choices\" must be a list of strings", what);
    int n = cJSON_GetArraySize(*choices);
    if (n < 1) BAD(w, "%s: \"choices\" is empty", what);
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, *choices) {
        if (!cJSON_IsString(c)) BAD(w, "%s: choice %d is not a string", what, i);
        if (!c->valuestring[0]) BAD(w, "%s: choice %d is empty (nothing to score)", what, i);
        i++;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "gold");
    if (!cJSON_IsNumber(g) || !(fabs(g->valuedouble) <= 1e9) || g->valuedouble != (double)(int)g->valuedouble)
        BAD(w, "%s: \"gold\" must be an integer index into \"choices\"", what);
    *gold = (int)g->valuedouble;
    if (*gold < 0 || *gold >= n) BAD(w, "%s: \"gold\" %d is out of range (%d choices)", what, *gold, n);
}

static int32_t *encode(Evaluator *e, Where w, const char *text, const char *what, int *n_out) {
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    if (tokenizer_encode(e->tok, text, strlen(text), 0, &ids, &n, &cap) != 0)
        BAD(w, "%s: invalid UTF-8 at byte %zu", what, tokenizer_utf8_error_offset(text, strlen(text)));
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= (uint32_t)e->vocab)
            BAD(w, "%s: token id %u >= model.vocab_size %d (the tokenizer does not match the model)", what, ids[i],
                e->vocab);
    *n_out = (int)n;
    return (int32_t *)ids;
}

static void parse_example(Evaluator *e, Where w, const cJSON *o, TaskExample *x) {
    const cJSON *ctx, *choices;
    int gold;
    check_mc(w, o, "example", &ctx, &choices, &gold);
    // Context = few-shot prefix + the example's context.
    size_t cap = strlen(ctx->valuestring) + 1, len = 0;
    char *text = xmalloc(cap);
    text[0] = 0;
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(o, "fewshot");
    if (fs && !cJSON_IsNull(fs)) {
        if (!cJSON_IsArray(fs)) BAD(w, "\"fewshot\" must be a list of {context, choices, gold}");
        int k = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, fs) {
            char what[48];
            snprintf(what, sizeof what, "fewshot %d", k++);
            const cJSON *fc, *fch;
            int fg;
            check_mc(w, f, what, &fc, &fch, &fg);
            const char *ans = cJSON_GetArrayItem(fch, fg)->valuestring;
            size_t add = strlen(fc->valuestring) + strlen(ans) + 2;
            text = xrealloc(text, cap += add);
            len += (size_t)sprintf(text + len, "%s%s\n\n", fc->valuestring, ans);
        }
    }
    strcpy(text + len, ctx->valuestring);
    x->ctx = encode(e, w, text, "context", &x->nctx);
    free(text);
    if (x->nctx == 0) {   // nothing to condition on: start from EOS, like lm-eval
        x->ctx = xrealloc(x->ctx, sizeof(int32_t));
        x->ctx[0] = (int32_t)e->eos;
        x->nctx = 1;
    }
    x->nchoices = cJSON_GetArraySize(choices);
    x->gold = gold;
    x->cont = xcalloc((size_t)x->nchoices, sizeof(int32_t *));
    x->ncont = xcalloc((size_t)x->nchoices, sizeof(int));
    x->chars = xcalloc((size_t)x->nchoices, sizeof(long));
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, choices) {
        char what[32];
        snprintf(what, sizeof what, "choice %d", i);
        x->cont[i] = encode(e, w, c->valuestring, what, &x->ncont[i]);
        x->chars[i] = utf8_chars(c->valuestring);
        if (i == gold) x->gold_bytes = (long)strlen(c->valuestring);
        i++;
    }
}

void eval_task_load(Evaluator *e, EvalTask *t, const char *spec, const Recipe *r) {
    static const char *const strip[] = {".jsonl", ".json", NULL};
    eval_split_spec(spec, strip, r, t->name, &t->path);
    size_t len = 0;
    char *buf = read_file_all(t->path, &len);
    if (!buf) die_input("eval task %s: cannot read %s: %s", t->name, t->path, strerror(errno));
    int cap = 16;
    t->ex = xcalloc((size_t)cap, sizeof(TaskExample));
    Where w = {t->path, 0};
    for (char *p = buf; p < buf + len && (e->max_examples <= 0 || t->n < e->max_examples);) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *end = nl ? nl : buf + len;
        w.line++;
        char *q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < end) {   // blank lines are skipped
            const char *err = NULL;
            cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &err, 0);
            if (!o) BAD(w, "malformed JSON near column %ld", err ? (long)(err - p) + 1 : 1L);
            if (t->n == cap) { t->ex = xrealloc(t->ex, sizeof(TaskExample) * (size_t)(cap *= 2)); }
            memset(&t->ex[t->n], 0, sizeof(TaskExample));
            parse_example(e, w, o, &t->ex[t->n++]);
            cJSON_Delete(o);
        }
        p = end + 1;
    }
    free(buf);
    if (t->n == 0) die_input("eval task %s: %s: no examples", t->name, t->path);
}

void eval_task_free(EvalTask *t) {
    for (int i = 0; i < t->n; i++) {
        TaskExample *x = &t->ex[i];
        for (int c = 0; c < x->nchoices; c++) free(x->cont[c]);
        free(x->cont); free(x->ncont); free(x->chars); free(x->ctx);
    }
    free(t->ex);
    free(t->path);
}

void eval_task_run(Evaluator *e, Model *m, const EvalTask *t, cJSON *out) {
    // One row per (example, choice), in file order.
    int nrows = 0;
    for (int i = 0; i < t->n; i++) nrows += t->ex[i].nchoices;
    EvalRow *rows = xmalloc(sizeof(EvalRow) * (size_t)nrows);
    int32_t **seqs = xmalloc(sizeof(int32_t *) * (size_t)nrows);
    int r = 0;
    for (int i = 0; i < t->n; i++) {
        const TaskExample *x = &t->ex[i];
        for (int c = 0; c < x->nchoices; c++, r++) {
            int n = x->nctx + x->ncont[c];
            int32_t *s = xmalloc(sizeof(int32_t) * (size_t)n);
            memcpy(s, x->ctx, sizeof(int32_t) * (size_t)x->nctx);
            memcpy(s + x->nctx, x->cont[c], sizeof(int32_t) * (size_t)x->ncont[c]);
            int drop = n - 1 > e->T ? n - 1 - e->T : 0;   // left truncation
            int first = x->nctx - drop;
            seqs[r] = s;
            rows[r] = (EvalRow){s + drop, n - drop, first < 1 ? 1 : first};
        }
    }
    double *ce = xmalloc(sizeof(double) * (size_t)nrows);
    eval_forward_rows(e, m, rows, nrows, ce);

    FILE *det = NULL;
    if (e->details_path) {
        det = fopen(e->details_path, "a");
        if (!det) die("cannot write %s: %s", e->details_path, strerror(errno));
    }
    double acc = 0, len_norm = 0, bpb = 0, chance = 0;
    r = 0;
    for (int i = 0; i < t->n; i++) {
        const TaskExample *x = &t->ex[i];
        chance += 1.0 / x->nchoices;   // the accuracy of guessing: 1 / choices, averaged
        int best = 0, best_n = 0;
        for (int c = 0; c < x->nchoices; c++) {
            double s = -ce[r + c], sb = -ce[r + best];
            double cn = x->chars[c] > 0 ? (double)x->chars[c] : 1, bn = x->chars[best_n] > 0 ? (double)x->chars[best_n] : 1;
            if (s > sb) best = c;
            if (s / cn > -ce[r + best_n] / bn) best_n = c;
        }
        acc += best == x->gold;
        len_norm += best_n == x->gold;
        bpb += ce[r + x->gold] / log(2.0) / (double)x->gold_bytes;
        if (det) {
            fprintf(det, "{\"task\":\"%s\",\"index\":%d,\"gold\":%d,\"pred\":%d,\"pred_norm\":%d,\"logp\":[", t->name, i,
                    x->gold, best, best_n);
            for (int c = 0; c < x->nchoices; c++) fprintf(det, "%s%.17g", c ? "," : "", -ce[r + c]);
            fprintf(det, "]}\n");
        }
        r += x->nchoices;
    }
    if (det) fclose(det);
    char key[160];
    const char *metric[4] = {"acc", "len_norm", "bpb", "chance"};
    double val[4] = {acc / t->n, len_norm / t->n, bpb / t->n, chance / t->n};
    for (int k = 0; k < 4; k++) {
        snprintf(key, sizeof key, "task/%s/%s", t->name, metric[k]);
        cJSON_DeleteItemFromObjectCaseSensitive(out, key);
        cJSON_AddNumberToObject(out, key, val[k]);
    }
    snprintf(key, sizeof key, "task/%s/examples", t->name);
    cJSON_DeleteItemFromObjectCaseSensitive(out, key);
    cJSON_AddNumberToObject(out, key, t->n);
    for (int i = 0; i < nrows; i++) free(seqs[i]);
    free(seqs); free(rows); free(ce);
}
