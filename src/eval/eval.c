// eval.c: held-out evaluation: the Evaluator (built from the recipe's eval.* keys), the
// batched forward every metric shares, and the perplexity sets.
//
// Perplexity set: a token file (raw little-endian uint32, OLMo-core layout) cut into
// documents at EOS; the EOS closing a document belongs to it, so it is predicted too. One
// instance per document, truncated to seq_len: inputs doc[0..n-1), targets doc[1..n),
// n <= seq_len + 1; the rest of the row is masked (-100). Per set:
//   ce  = sum of per-token CE (nats) / predicted tokens      (token-weighted)
//   ppl = exp(ce)
//   bpb = sum of per-token CE / ln 2 / UTF-8 bytes of the predicted target tokens
// and the macro average over sets. Sums are kept per document and reduced in document
// order, so a future data-parallel split (each rank a contiguous slice of documents)
// gives the same numbers at any world size.
// Every forward goes through eval_forward_rows: the CPU Model, or the hook set by
// eval_set_forward (the trainer's device model under train.backend=cuda).
#include "eval/eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "eval/eval_internal.h"
#include "eval/olmes.h"
#include "util/common.h"

// ---------------------------------------------------------------------------------------
// Specs: "name=path" or "path"

void eval_split_spec(const char *spec, const char *const *strip, const Recipe *r, char name[64], char **path) {
    const char *eq = strchr(spec, '=');
    if (eq) {
        size_t n = (size_t)(eq - spec);
        if (n == 0 || n >= 64) die_input("eval: '%s': the name before '=' must be 1..63 characters", spec);
        memcpy(name, spec, n);
        name[n] = 0;
        *path = xstrdup(eq + 1);
    } else {
        const char *base = strrchr(spec, '/');
        base = base ? base + 1 : spec;
        snprintf(name, 64, "%s", base);
        for (int i = 0; strip && strip[i]; i++) {
            size_t nl = strlen(name), sl = strlen(strip[i]);
            if (nl > sl && !strcmp(name + nl - sl, strip[i])) { name[nl - sl] = 0; break; }
        }
        *path = xstrdup(spec);
    }
    if (!(*path)[0]) die_input("eval: '%s': empty path", spec);
    if (r) {   // eval.tokenizer_id for {TOKENIZER}, eval.base_dir under relative paths
        char full[RECIPE_MAX_STR + 1024];
        if (recipe_eval_path(r, *path, full, sizeof full) != 0) die_input("eval: '%s': the path is too long", spec);
        free(*path);
        *path = xstrdup(full);
    }
    for (const char *c = name; *c; c++)
        if (*c == '/' || *c == ' ') die_input("eval: '%s': the name may not contain '/' or spaces", spec);
}

// ---------------------------------------------------------------------------------------
// Perplexity sets

static void set_load(Evaluator *e, EvalSet *s, const char *spec, const Recipe *r) {
    static const char *const strip[] = {".heldout.npy", ".npy", ".bin", NULL};
    eval_split_spec(spec, strip, r, s->name, &s->path);
    size_t len = 0;
    char *raw = read_file_all(s->path, &len);
    if (!raw) die_input("eval set %s: cannot read %s: %s", s->name, s->path, strerror(errno));
    if (len % 4) die_input("eval set %s: %s: %zu bytes is not a whole number of uint32 tokens", s->name, s->path, len);
    size_t ntok = len / 4;
    s->tok = xmalloc(ntok ? len : 4);
    memcpy(s->tok, raw, len);   // read_file_all's buffer is not aligned for uint32
    free(raw);
    // Documents end at EOS. A trailing run without EOS is an incomplete document (a
    // truncated file): it is not evaluated.
    long ndocs = 0, cap = 64;
    s->start = xmalloc(sizeof(size_t) * (size_t)(cap + 1));
    s->start[0] = 0;
    long max_docs = e->max_docs > 0 ? e->max_docs : -1;
    for (size_t i = 0; i < ntok && ndocs != max_docs; i++) {
        if (s->tok[i] >= (uint32_t)e->vocab)
            die_input("eval set %s: %s: token %u at index %zu is >= model.vocab_size %d (wrong tokenizer or "
                      "eval.eos_id?)", s->name, s->path, s->tok[i], i, e->vocab);
        if (s->tok[i] == e->eos) {
            if (ndocs == cap) { cap *= 2; s->start = xrealloc(s->start, sizeof(size_t) * (size_t)(cap + 1)); }
            s->start[++ndocs] = i + 1;
        }
    }
    s->ndocs = ndocs;
    if (ndocs == 0)
        die_input("eval set %s: %s: no complete document (no EOS id %u among %zu tokens)", s->name, s->path,
                  e->eos, ntok);
    long predicted = 0;
    for (long d = 0; d < ndocs; d++) predicted += (long)(s->start[d + 1] - s->start[d]) - 1;
    if (predicted < 1)
        die_input("eval set %s: %s: no document is longer than its EOS: nothing to predict", s->name, s->path);
}

// The instance of document d: tokens seq[0..n), n-1 <= T targets, every one scored.
static EvalRow doc_row(const Evaluator *e, const EvalSet *s, long d) {
    size_t n = s->start[d + 1] - s->start[d];
    if (n > (size_t)e->T + 1) n = (size_t)e->T + 1;
    return (EvalRow){(const int32_t *)(s->tok + s->start[d]), (int)n, 1};
}

// Per-document sums of documents [d0, d1): CE nats, predicted tokens, target bytes.
// The unit of a data-parallel split: sums depend only on the document.
static void set_doc_sums(Evaluator *e, Model *m, const EvalSet *s, long d0, long d1, double *ce, long *ntok,
                         long *nbytes) {
    long nd = d1 - d0;
    EvalRow *rows = xmalloc(sizeof(EvalRow) * (size_t)(nd > 0 ? nd : 1));
    for (long d = d0; d < d1; d++) {
        EvalRow r = doc_row(e, s, d);
        rows[d - d0] = r;
        ntok[d - d0] = r.n - 1;
        long b = 0;
        for (int t = 1; t < r.n; t++) b += e->tok_bytes[(uint32_t)r.seq[t]];
        nbytes[d - d0] = b;
    }
    eval_forward_rows(e, m, rows, (int)nd, ce);
    free(rows);
}

// ---------------------------------------------------------------------------------------
// The batched forward shared by sets and tasks

void eval_forward_rows(Evaluator *e, Model *m, const EvalRow *rows, int nrows, double *ce_out) {
    for (int r0 = 0; r0 < nrows; r0 += e->B) {
        int nb = nrows - r0 < e->B ? nrows - r0 : e->B;
        // The batch is as long as its longest row: causal attention makes a row's
        // positions independent of what comes after them, so the length only costs time.
        int T = 1;
        for (int i = 0; i < nb; i++)
            if (rows[r0 + i].n - 1 > T) T = rows[r0 + i].n - 1;
        for (int i = 0; i < nb; i++) {
            const EvalRow *r = &rows[r0 + i];
            int32_t *in = e->inp + (size_t)i * T, *tg = e->tgt + (size_t)i * T;
            for (int t = 0; t < T; t++) {
                int valid = t < r->n - 1;
                in[t] = valid ? r->seq[t] : 0;
                tg[t] = valid && t + 1 >= r->first ? r->seq[t + 1] : -100;
            }
        }
        if (e->fwd) e->fwd(e->fwd_ctx, e->inp, e->tgt, nb, T, e->tok_ce);
        else model_forward_backward(m, e->inp, e->tgt, nb, T, 0.0f, 1.0f, NULL, NULL, e->tok_ce);
        for (int i = 0; i < nb; i++) {
            double s = 0;
            const int32_t *tg = e->tgt + (size_t)i * T;
            const float *ce = e->tok_ce + (size_t)i * T;
            for (int t = 0; t < T; t++)
                if (tg[t] >= 0) s += ce[t];
            ce_out[r0 + i] = s;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Token byte lengths (bits per byte)

// A token id is special when its text is "<|...|>" and ordinary encoding does not give it
// back (added tokens are only produced from text with allow_special). Specials and the
// document separator carry no text: 0 bytes.
static void build_byte_table(Evaluator *e) {
    e->tok_bytes = xcalloc((size_t)e->vocab, sizeof(int));
    uint32_t tv = tokenizer_vocab_size(e->tok);
    uint32_t *ids = NULL;
    size_t cap = 0;
    for (int id = 0; id < e->vocab && (uint32_t)id < tv; id++) {
        uint32_t u = (uint32_t)id;
        size_t len = 0;
        char *txt = tokenizer_decode(e->tok, &u, 1, &len);
        if (!txt) continue;
        int bytes = (int)len;
        if (len >= 4 && !strncmp(txt, "<|", 2) && !strcmp(txt + len - 2, "|>")) {
            size_t n = 0;
            if (tokenizer_encode(e->tok, txt, len, 0, &ids, &n, &cap) != 0 || n != 1 || ids[0] != u) bytes = 0;
        }
        if (u == e->eos) bytes = 0;
        e->tok_bytes[id] = bytes;
        free(txt);
    }
    free(ids);
}

// ---------------------------------------------------------------------------------------
// Evaluator

static Evaluator *evaluator_new(const Recipe *r) {
    if (r->eval_interval < 0) die_input("eval.interval must be >= 0 (0 = only at start and end), got %ld", r->eval_interval);
    if (r->eval_max_docs < 0) die_input("eval.max_docs must be >= 0 (0 = all), got %ld", r->eval_max_docs);
    if (r->eval_max_examples < 0) die_input("eval.max_examples must be >= 0 (0 = all), got %ld", r->eval_max_examples);
    if (r->eval_eos_id < 0 || r->eval_eos_id > 0xFFFFFFFFL) die_input("eval.eos_id must be a uint32, got %ld", r->eval_eos_id);
    Evaluator *e = xcalloc(1, sizeof *e);
    e->B = r->micro_batch;
    e->T = r->seq_len;
    e->interval = r->eval_interval;
    e->max_docs = r->eval_max_docs;
    e->max_examples = r->eval_max_examples;
    e->eos = (uint32_t)r->eval_eos_id;
    e->vocab = r->vocab_size;
    char *tp = tokenizer_resolve_path(r->eval_tokenizer[0] ? r->eval_tokenizer : NULL);
    e->tok = tokenizer_load(tp);
    free(tp);
    build_byte_table(e);
    e->inp = xmalloc(sizeof(int32_t) * (size_t)e->B * e->T);
    e->tgt = xmalloc(sizeof(int32_t) * (size_t)e->B * e->T);
    e->tok_ce = xmalloc(sizeof(float) * (size_t)e->B * e->T);
    return e;
}

Evaluator *eval_create(const Recipe *r) {
    if (r->n_eval_sets == 0 && r->n_eval_tasks == 0 && r->n_eval_downstream == 0) return NULL;
    Evaluator *e = evaluator_new(r);
    e->sets = xcalloc((size_t)r->n_eval_sets + 1, sizeof(EvalSet));
    for (int i = 0; i < r->n_eval_sets; i++) {
        set_load(e, &e->sets[i], r->eval_sets[i], r);
        for (int j = 0; j < i; j++)
            if (!strcmp(e->sets[j].name, e->sets[i].name)) die_input("eval.sets: the name '%s' is used twice", e->sets[i].name);
        e->nsets++;
    }
    e->tasks = xcalloc((size_t)r->n_eval_tasks + 1, sizeof(EvalTask));
    for (int i = 0; i < r->n_eval_tasks; i++) {
        eval_task_load(e, &e->tasks[i], r->eval_tasks[i], r);
        for (int j = 0; j < i; j++)
            if (!strcmp(e->tasks[j].name, e->tasks[i].name)) die_input("eval.tasks: the name '%s' is used twice", e->tasks[i].name);
        e->ntasks++;
    }
    if (r->eval_downstream_max_docs < 0) die_input("eval.downstream_max_docs must be >= 0 (0 = all), got %ld", r->eval_downstream_max_docs);
    e->downstream = xcalloc((size_t)r->n_eval_downstream + 1, sizeof(OlmesTask));
    for (int i = 0; i < r->n_eval_downstream; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(e->downstream[j].label, r->eval_downstream[i])) die_input("eval.downstream: '%s' is listed twice", r->eval_downstream[i]);
        olmes_task_load(e, &e->downstream[i], r->eval_downstream[i], r->eval_downstream_dir, r->eval_downstream_max_docs);
        e->ndownstream++;
    }
    return e;
}

void eval_free(Evaluator *e) {
    if (!e) return;
    for (int i = 0; i < e->nsets; i++) { free(e->sets[i].path); free(e->sets[i].tok); free(e->sets[i].start); }
    free(e->sets);
    for (int i = 0; i < e->ntasks; i++) eval_task_free(&e->tasks[i]);
    free(e->tasks);
    for (int i = 0; i < e->ndownstream; i++) olmes_task_free(&e->downstream[i]);
    free(e->downstream);
    tokenizer_free(e->tok);
    free(e->tok_bytes);
    free(e->inp);
    free(e->tgt);
    free(e->tok_ce);
    free(e);
}

int eval_nsets(const Evaluator *e) { return e ? e->nsets : 0; }

void eval_print_cuts(FILE *f, const Evaluator *e, const char *prefix) {
    for (int i = 0; e && i < e->nsets; i++) {
        const EvalSet *s = &e->sets[i];
        long cut = 0, kept = 0, total = 0;
        for (long d = 0; d < s->ndocs; d++) {
            long n = (long)(s->start[d + 1] - s->start[d]);
            total += n - 1;
            if (n > (long)e->T + 1) cut++, kept += e->T;
            else kept += n - 1;
        }
        if (cut)
            fprintf(f, "%seval set %s: %ld of %ld documents are longer than train.seq_len + 1 = %d tokens and are cut to "
                    "their first %d (%.1f%% of the set's tokens are scored)\n", prefix, s->name, cut, s->ndocs,
                    e->T + 1, e->T + 1, total > 0 ? 100.0 * (double)kept / (double)total : 100.0);
    }
}

int eval_due(const Evaluator *e, long step, long total_steps) {
    if (!e) return 0;
    if (step == total_steps) return 1;
    return e->interval > 0 && step > 0 && step % e->interval == 0;
}

static void add_num(cJSON *out, const char *kind, const char *name, const char *metric, double v) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s/%s", kind, name, metric);
    cJSON_DeleteItemFromObjectCaseSensitive(out, key);
    if (isfinite(v)) cJSON_AddNumberToObject(out, key, v);
    else cJSON_AddNullToObject(out, key);   // JSON has no inf/nan
}

void eval_set_forward(Evaluator *e, EvalForwardFn fn, void *ctx) {
    if (!e) return;
    e->fwd = fn;
    e->fwd_ctx = fn ? ctx : NULL;
}

int eval_longest_row(const Evaluator *e) {
    long n = 1;
    for (int i = 0; e && i < e->nsets; i++)
        for (long d = 0; d < e->sets[i].ndocs; d++) {
            long k = (long)(e->sets[i].start[d + 1] - e->sets[i].start[d]) - 1;
            if (k > n) n = k;
        }
    for (int i = 0; e && i < e->ntasks; i++)
        for (int j = 0; j < e->tasks[i].n; j++)
            for (int c = 0; c < e->tasks[i].ex[j].nchoices; c++) {
                long k = (long)e->tasks[i].ex[j].nctx + e->tasks[i].ex[j].ncont[c] - 1;
                if (k > n) n = k;
            }
    for (int i = 0; e && i < e->ndownstream; i++)   // a downstream row runs its nseq - 1 inputs
        for (int j = 0; j < e->downstream[i].n; j++)
            if (e->downstream[i].s[j].nseq - 1 > n) n = e->downstream[i].s[j].nseq - 1;
    return n < e->T ? (int)n : e->T;
}

void eval_run(Evaluator *e, Model *m, cJSON *out) {
    if (!e) return;
    // The hook's model was sized by its owner for (micro_batch, seq_len); the CPU Model's
    // buffers matter only when it runs the forward, and only for the rows it will run.
    const int T = e->fwd ? 0 : eval_longest_row(e);
    if (!e->fwd && (m->max_B < e->B || m->max_T < T))
        die("eval_run: the model's buffers (%d, %d) are smaller than (micro_batch %d, longest row %d)", m->max_B,
            m->max_T, e->B, T);
    double t0 = now_seconds();
    double macro_ce = 0, macro_bpb = 0;
    for (int i = 0; i < e->nsets; i++) {
        const EvalSet *s = &e->sets[i];
        double *ce = xmalloc(sizeof(double) * (size_t)s->ndocs);
        long *nt = xmalloc(sizeof(long) * (size_t)s->ndocs), *nb = xmalloc(sizeof(long) * (size_t)s->ndocs);
        set_doc_sums(e, m, s, 0, s->ndocs, ce, nt, nb);
        double sum = 0;
        long tokens = 0, bytes = 0;
        for (long d = 0; d < s->ndocs; d++) { sum += ce[d]; tokens += nt[d]; bytes += nb[d]; }   // document order
        double c = sum / (double)tokens, bpb = bytes > 0 ? sum / log(2.0) / (double)bytes : NAN;
        add_num(out, "eval", s->name, "ce", c);
        add_num(out, "eval", s->name, "ppl", exp(c));
        add_num(out, "eval", s->name, "bpb", bpb);
        add_num(out, "eval", s->name, "tokens", (double)tokens);
        add_num(out, "eval", s->name, "bytes", (double)bytes);
        add_num(out, "eval", s->name, "docs", (double)s->ndocs);
        macro_ce += c;
        macro_bpb += bpb;
        free(ce); free(nt); free(nb);
    }
    if (e->nsets > 0) {
        add_num(out, "eval", "macro", "ce", macro_ce / e->nsets);
        add_num(out, "eval", "macro", "ppl", exp(macro_ce / e->nsets));
        add_num(out, "eval", "macro", "bpb", macro_bpb / e->nsets);
    }
    for (int i = 0; i < e->ntasks; i++) eval_task_run(e, m, &e->tasks[i], out);
    for (int i = 0; i < e->ndownstream; i++) olmes_task_run(e, m, &e->downstream[i], out);
    cJSON_DeleteItemFromObjectCaseSensitive(out, "eval/seconds");
    cJSON_AddNumberToObject(out, "eval/seconds", now_seconds() - t0);
}

void eval_print_summary(const cJSON *out, long step) {
    printf("eval step %ld:", step);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(out, "eval/macro/ce");
    if (cJSON_IsNumber(v)) printf(" macro ce %.4f |", v->valuedouble);
    const cJSON *it;
    cJSON_ArrayForEach(it, out) {
        const char *k = it->string;
        size_t n = k ? strlen(k) : 0;
        if (!cJSON_IsNumber(it) || n < 9) continue;
        if (!strncmp(k, "eval/", 5) && !strcmp(k + n - 3, "/ce") && strcmp(k, "eval/macro/ce"))
            printf(" %.*s %.4f", (int)(n - 8), k + 5, it->valuedouble);
        else if (!strncmp(k, "task/", 5) && n > 9 && !strcmp(k + n - 4, "/acc"))
            printf(" %.*s acc %.3f", (int)(n - 9), k + 5, it->valuedouble);
    }
    v = cJSON_GetObjectItemCaseSensitive(out, "eval/seconds");
    if (cJSON_IsNumber(v)) printf(" (%.1fs)", v->valuedouble);
    printf("\n");
    fflush(stdout);
}

void eval_set_details(Evaluator *e, const char *path) { e->details_path = path; }

// One metric of the record: "<kind>/<name>/<metric>", NAN when absent.
static double metric_num(const cJSON *out, const char *kind, const char *name, const char *metric) {
    char key[160];
    snprintf(key, sizeof key, "%s/%s/%s", kind, name, metric);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(out, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

void eval_print_table(FILE *f, const Evaluator *e, const cJSON *out) {
    if (e->nsets) {
        fprintf(f, "%-24s %7s %10s %9s %11s %8s\n", "set", "docs", "tokens", "ce", "ppl", "bpb");
        for (int i = 0; i < e->nsets; i++) {
            const char *n = e->sets[i].name;
            fprintf(f, "%-24s %7.0f %10.0f %9.5f %11.3f %8.5f\n", n, metric_num(out, "eval", n, "docs"),
                    metric_num(out, "eval", n, "tokens"), metric_num(out, "eval", n, "ce"), metric_num(out, "eval", n, "ppl"),
                    metric_num(out, "eval", n, "bpb"));
        }
        fprintf(f, "%-24s %7s %10s %9.5f %11.3f %8.5f\n", "macro", "", "", metric_num(out, "eval", "macro", "ce"),
                metric_num(out, "eval", "macro", "ppl"), metric_num(out, "eval", "macro", "bpb"));
    }
    if (e->ntasks) {
        if (e->nsets) fprintf(f, "\n");
        fprintf(f, "%-24s %8s %8s %8s %8s\n", "task", "examples", "acc", "len_norm", "bpb");
        for (int i = 0; i < e->ntasks; i++) {
            const char *n = e->tasks[i].name;
            fprintf(f, "%-24s %8.0f %8.4f %8.4f %8.5f\n", n, metric_num(out, "task", n, "examples"), metric_num(out, "task", n, "acc"),
                    metric_num(out, "task", n, "len_norm"), metric_num(out, "task", n, "bpb"));
        }
    }
    olmes_print_table(f, e, out);
}
