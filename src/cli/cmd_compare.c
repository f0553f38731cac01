// cmd_compare.c: `olmo compare RUN_A RUN_B`: is B a reproduction of A? (docs/olmo3.md s.6: the
// MaxText reproduction compared held-out surfaces at landmarks, plus token-level KL.)
//
//  1. Landmarks: the steps at which both runs wrote an eval record to metrics.jsonl.
//     For every held-out metric both runs report (eval/<set>/{ce,ppl,bpb},
//     eval/macro/*, task/<name>/{acc,len_norm,bpb}, downstream/<label>/<metric> of OLMo 3's
//     suite) it prints A, B and the gap B - A at
//     each landmark, the largest |gap| and how often the gap's sign flips across
//     landmarks (a reproduction's gaps flip; a systematic difference does not).
//  2. With --kl-set: token-level KL(A||B) = sum_v pA(v) log(pA(v)/pB(v)) of the two runs'
//     next-token distributions (softmax over the padded vocab, as the model defines it),
//     averaged over the predicted tokens of held-out documents (EOS-separated runs of a
//     token file, one instance per document truncated to seq_len, as in src/eval).
//     Logits of one micro-batch per model exist at a time.
//  3. Verdict against tolerances (docs/report.md): |gap| of every */ce metric within
//     --tol-ce, of every task acc/len_norm (and downstream acc_v1/v2, len_norm_v1/v2) within
//     --tol-task, mean KL within --tol-kl.
//     Exit 0 match, 1 mismatch, 2 bad input.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "io/params_io.h"
#include "model/model.h"
#include "recipe/recipe.h"
#include "train/checkpoint.h"
#include "train/history.h"
#include "train/metrics.h"
#include "util/common.h"

#define TOL_CE 0.02     // nats: held-out CE gap allowed at every landmark
#define TOL_TASK 0.05   // absolute: task accuracy gap allowed at every landmark
#define TOL_KL 0.01     // nats/token: mean KL(A||B) allowed

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo compare RUN_A RUN_B [--tol-ce X] [--tol-task X] [--tol-kl X]\n"
            "                    [--kl-set TOKENS.npy [--kl-docs N] [--kl-batch N] [--eos ID]]\n"
            "                    [--ckpt-a PATH] [--ckpt-b PATH]\n"
            "\n"
            "Is run B a reproduction of run A? Lines up the eval records of RUN_A/metrics.jsonl\n"
            "and RUN_B/metrics.jsonl at their common steps (landmarks) and prints, per held-out\n"
            "metric and landmark, the gap B - A, the largest |gap| and how often its sign flips.\n"
            "With --kl-set, also the mean token-level KL(A||B) of the two runs' checkpoints on\n"
            "held-out documents. Ends with a verdict (docs/report.md):\n"
            "\n"
            "  --tol-ce X     every eval/*/ce gap within X nats at every landmark (default %.3g)\n"
            "  --tol-task X   every task/*/acc and len_norm gap (and downstream/*/acc_v*,\n"
            "                 len_norm_v*) within X (default %.3g)\n"
            "  --tol-kl X     mean KL(A||B) within X nats/token (default %.3g)\n"
            "  --kl-set FILE  token file (raw uint32, EOS-separated documents) for the KL\n"
            "  --kl-docs N    first N complete documents of it (default 64; 0 = all)\n"
            "  --kl-batch N   documents per forward (default: RUN_A's train.micro_batch)\n"
            "  --eos ID       document separator (default: RUN_A's eval.eos_id)\n"
            "  --ckpt-a PATH  checkpoint of A (model.safetensors or a directory holding one;\n"
            "                 default RUN_A/model.safetensors, else its newest checkpoint)\n"
            "  --ckpt-b PATH  the same for B\n"
            "\n"
            "ppl and bpb gaps are printed, not judged (they follow CE). Exit status: 0 match,\n"
            "1 mismatch, 2 bad input (missing run or metrics, no common eval step, ...).\n",
            TOL_CE, TOL_TASK, TOL_KL);
}

// ---------------------------------------------------------------------------------------
// A run's eval records

typedef struct {
    long step;
    cJSON *rec;
} EvalRec;

typedef struct {
    const char *dir;
    EvalRec *ev;     // sorted by step; a step evaluated twice (a resumed run) keeps the last
    int nev, cap;
} RunEvals;

static int cmp_evrec(const void *a, const void *b) {
    long x = ((const EvalRec *)a)->step, y = ((const EvalRec *)b)->step;
    return (x > y) - (x < y);
}

static void add_eval(cJSON *o, void *ctx) {
    RunEvals *run = ctx;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "eval") || !cJSON_IsNumber(step)) {
        cJSON_Delete(o);
        return;
    }
    // A step evaluated twice (after a resume): the last record counts.
    long s = (long)step->valuedouble;
    for (int i = 0; i < run->nev; i++)
        if (run->ev[i].step == s) {
            cJSON_Delete(run->ev[i].rec);
            run->ev[i].rec = o;
            return;
        }
    if (run->nev == run->cap) {
        run->cap = run->cap ? 2 * run->cap : 16;
        run->ev = xrealloc(run->ev, sizeof(EvalRec) * (size_t)run->cap);
    }
    run->ev[run->nev++] = (EvalRec){s, o};
}

static void load_evals(RunEvals *run, const char *dir) {
    run->dir = dir;
    run->ev = NULL;
    run->nev = run->cap = 0;
    metrics_read(dir, "compare", add_eval, run);
    if (run->nev == 0)
        die_input("compare: %s/metrics.jsonl has no eval records (was the run trained with eval.sets / eval.tasks?)", dir);
    qsort(run->ev, (size_t)run->nev, sizeof(EvalRec), cmp_evrec);
}

static void free_evals(RunEvals *run) {
    for (int i = 0; i < run->nev; i++) cJSON_Delete(run->ev[i].rec);
    free(run->ev);
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

// Which metrics are compared, and with which tolerance: 0 = printed only, 1 = CE, 2 = task.
static int metric_class(const char *k) {
    if (!strncmp(k, "eval/", 5)) {
        if (ends_with(k, "/ce")) return 1;
        if (ends_with(k, "/ppl") || ends_with(k, "/bpb")) return 0;
        return -1;   // counts (tokens, bytes, docs) and eval/seconds: not metrics
    }
    if (!strncmp(k, "task/", 5)) {
        if (ends_with(k, "/acc") || ends_with(k, "/len_norm")) return 2;
        if (ends_with(k, "/bpb")) return 0;
    }
    if (!strncmp(k, "downstream/", 11)) {   // OLMo 3's suite: ICLMetric's names (docs/eval.md)
        if (strstr(k, "/acc_v") || strstr(k, "/len_norm_v")) return 2;   // accuracies: --tol-task
        if (ends_with(k, "/samples") || ends_with(k, "/chance")) return -1;   // a count, a constant
        return 0;   // bpb, ce_loss, soft, soft_log: printed
    }
    return -1;
}

static double num(const cJSON *rec, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

// ---------------------------------------------------------------------------------------
// Token-level KL(A||B)

// The checkpoint of a run: the given path (file or directory holding model.safetensors),
// else RUN/model.safetensors (written at the end of a run), else its newest checkpoint.
static char *find_ckpt(const char *run, const char *given) {
    struct stat st;
    char *p = xmalloc(8192);
    if (given) {
        if (stat(given, &st) != 0) die_input("compare: checkpoint %s: no such file or directory", given);
        if (S_ISDIR(st.st_mode)) snprintf(p, 8192, "%s/model.safetensors", given);
        else snprintf(p, 8192, "%s", given);
        if (stat(p, &st) != 0) die_input("compare: checkpoint directory %s has no model.safetensors", given);
        return p;
    }
    snprintf(p, 8192, "%s/model.safetensors", run);
    if (stat(p, &st) == 0) return p;
    char dir[4096], err[1024];
    int rc = ckpt_resolve(run, "auto", dir, sizeof dir, err, sizeof err);
    if (rc < 0) die_input("compare: %s: %s", run, err);
    if (rc == 0) die_input("compare: %s has no model.safetensors and no checkpoint (give --ckpt-a/--ckpt-b)", run);
    snprintf(p, 8192, "%s/model.safetensors", dir);
    if (stat(p, &st) != 0) die_input("compare: checkpoint %s has no model.safetensors", dir);
    return p;
}

static void load_run_model(Model *m, Recipe *r, const char *run, const char *ckpt, int B, int T, const char *label) {
    char path[4096];
    snprintf(path, sizeof path, "%s/recipe.yml", run);
    struct stat st;
    if (stat(path, &st) != 0) die_input("compare: %s: no recipe.yml (needed for the KL: the model shape)", run);
    recipe_load(r, path, 0, NULL);
    ModelConfig cfg = recipe_model_config(r);
    model_create(m, &cfg, B, T);
    char err[1024];
    if (params_load_safetensors(&m->table, m->params, ckpt, err, sizeof err) != 0)
        die_input("compare: run %s (%s): %s", label, run, err);
}

typedef struct {
    double mean, max, ce_a, ce_b;
    long tokens, docs;
} KLResult;

static KLResult token_kl(const char *run_a, const char *run_b, const char *ckpt_a, const char *ckpt_b,
                         const char *set, long max_docs, int batch, long eos_opt) {
    Recipe *ra = xcalloc(1, sizeof *ra), *rb = xcalloc(1, sizeof *rb);
    // Read A's recipe first for seq_len / micro_batch / eos; both models use A's (B, T).
    char path[4096];
    snprintf(path, sizeof path, "%s/recipe.yml", run_a);
    struct stat st;
    if (stat(path, &st) != 0) die_input("compare: %s: no recipe.yml (needed for the KL: the model shape)", run_a);
    recipe_load(ra, path, 0, NULL);
    int T = ra->seq_len, B = batch > 0 ? batch : ra->micro_batch;
    long eos = eos_opt >= 0 ? eos_opt : ra->eval_eos_id;

    // Documents of the token file.
    size_t len = 0;
    char *raw = read_file_all(set, &len);
    if (!raw) die_input("compare: --kl-set %s: cannot read", set);
    if (len % 4) die_input("compare: --kl-set %s: %zu bytes is not a whole number of uint32 tokens", set, len);
    size_t ntok = len / 4;
    uint32_t *tok = xmalloc(ntok ? len : 4);
    memcpy(tok, raw, len);   // read_file_all's buffer is not aligned for uint32
    free(raw);
    long ndocs = 0, cap = 64;
    size_t *start = xmalloc(sizeof(size_t) * (size_t)(cap + 1));
    start[0] = 0;
    for (size_t i = 0; i < ntok && (max_docs <= 0 || ndocs < max_docs); i++) {
        if (tok[i] >= (uint32_t)ra->vocab_size)
            die_input("compare: --kl-set %s: token %u at index %zu is >= model.vocab_size %d", set, tok[i], i,
                      ra->vocab_size);
        if (tok[i] == (uint32_t)eos) {
            if (ndocs == cap) { cap *= 2; start = xrealloc(start, sizeof(size_t) * (size_t)(cap + 1)); }
            start[++ndocs] = i + 1;
        }
    }
    if (ndocs == 0) die_input("compare: --kl-set %s: no complete document (no EOS id %ld; see --eos)", set, eos);

    Model ma, mb;
    load_run_model(&ma, ra, run_a, ckpt_a, B, T, "A");
    load_run_model(&mb, rb, run_b, ckpt_b, B, T, "B");
    int Vp = ma.cfg.padded_vocab;
    if (mb.cfg.padded_vocab != Vp)
        die_input("compare: the runs' vocabularies differ (padded %d vs %d): KL is not defined", Vp,
                  mb.cfg.padded_vocab);

    size_t BT = (size_t)B * T;
    int32_t *inp = xmalloc(sizeof(int32_t) * BT), *tgt = xmalloc(sizeof(int32_t) * BT);
    float *la = xmalloc(sizeof(float) * BT * Vp), *lb = xmalloc(sizeof(float) * BT * Vp);
    float *cea = xmalloc(sizeof(float) * BT), *ceb = xmalloc(sizeof(float) * BT);
    double *kl = xmalloc(sizeof(double) * BT);
    KLResult res = {0, 0, 0, 0, 0, ndocs};
    double sum = 0, sa = 0, sb = 0;
    for (long d0 = 0; d0 < ndocs; d0 += B) {
        int nb = ndocs - d0 < B ? (int)(ndocs - d0) : B;
        int Tb = 1, n[nb];
        for (int i = 0; i < nb; i++) {
            size_t dl = start[d0 + i + 1] - start[d0 + i];
            n[i] = dl > (size_t)T + 1 ? T + 1 : (int)dl;   // instance = document truncated to T+1 tokens
            if (n[i] - 1 > Tb) Tb = n[i] - 1;
        }
        for (int i = 0; i < nb; i++) {
            const uint32_t *seq = tok + start[d0 + i];
            for (int t = 0; t < Tb; t++) {
                int valid = t < n[i] - 1;
                inp[(size_t)i * Tb + t] = valid ? (int32_t)seq[t] : 0;
                tgt[(size_t)i * Tb + t] = valid ? (int32_t)seq[t + 1] : -100;
            }
        }
        model_forward_backward(&ma, inp, tgt, nb, Tb, 0.0f, 1.0f, NULL, la, cea);
        model_forward_backward(&mb, inp, tgt, nb, Tb, 0.0f, 1.0f, NULL, lb, ceb);
        // KL per position (independent, in parallel), then summed in position order so the
        // result does not depend on the thread count.
        int N = nb * Tb;
#pragma omp parallel for schedule(static)
        for (int p = 0; p < N; p++) {
            if (tgt[p] < 0) { kl[p] = 0; continue; }
            const float *a = la + (size_t)p * Vp, *b = lb + (size_t)p * Vp;
            double ma_ = -INFINITY, mb_ = -INFINITY;
            for (int v = 0; v < Vp; v++) {
                if (a[v] > ma_) ma_ = a[v];
                if (b[v] > mb_) mb_ = b[v];
            }
            double za = 0, zb = 0;
            for (int v = 0; v < Vp; v++) { za += exp(a[v] - ma_); zb += exp(b[v] - mb_); }
            double lza = ma_ + log(za), lzb = mb_ + log(zb), s = 0;
            // Identical logits give (la - lza) - (lb - lzb) == 0 exactly: KL(A||A) = 0.
            for (int v = 0; v < Vp; v++) {
                double lpa = a[v] - lza, lpb = b[v] - lzb;
                s += exp(lpa) * (lpa - lpb);
            }
            kl[p] = s;
        }
        for (int p = 0; p < N; p++) {
            if (tgt[p] < 0) continue;
            sum += kl[p];
            if (kl[p] > res.max) res.max = kl[p];
            sa += cea[p];
            sb += ceb[p];
            res.tokens++;
        }
    }
    res.mean = res.tokens ? sum / (double)res.tokens : NAN;
    res.ce_a = res.tokens ? sa / (double)res.tokens : NAN;
    res.ce_b = res.tokens ? sb / (double)res.tokens : NAN;
    if (res.tokens == 0) die_input("compare: --kl-set %s: no document is longer than its EOS: nothing to predict", set);
    model_destroy(&ma);
    model_destroy(&mb);
    free(inp); free(tgt); free(la); free(lb); free(cea); free(ceb); free(kl);
    free(tok); free(start); free(ra); free(rb);
    return res;
}

// ---------------------------------------------------------------------------------------

static double parse_num(const char *opt, const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0) die_input("compare: %s needs a number >= 0, got '%s'", opt, s);
    return v;
}

// The checks of a comparison: how many were judged, the failures and their messages.
typedef struct {
    int fails, judged;
    char **msgs;
    int nmsgs;
} Verdict;

static void verdict_fail(Verdict *v, const char *msg) {
    v->msgs = xrealloc(v->msgs, sizeof(char *) * (size_t)(v->nmsgs + 1));
    v->msgs[v->nmsgs++] = xstrdup(msg);
}

// Landmarks: the eval steps both runs have (both lists are sorted), as index pairs into A
// and B; their count (0: none, said on stderr).
static int find_landmarks(const RunEvals *A, const RunEvals *B, const char *const runs[2], int *ia, int *ib) {
    int nl = 0;
    for (int i = 0, j = 0; i < A->nev && j < B->nev;) {
        if (A->ev[i].step == B->ev[j].step) { ia[nl] = i++; ib[nl++] = j++; }
        else if (A->ev[i].step < B->ev[j].step) i++;
        else j++;
    }
    if (nl == 0) {
        fprintf(stderr, "olmo: error: compare: the runs have no eval step in common: A (%s) evaluated at steps", runs[0]);
        for (int i = 0; i < A->nev && i < 12; i++) fprintf(stderr, " %ld", A->ev[i].step);
        fprintf(stderr, "%s; B (%s) at", A->nev > 12 ? " ..." : "", runs[1]);
        for (int i = 0; i < B->nev && i < 12; i++) fprintf(stderr, " %ld", B->ev[i].step);
        fprintf(stderr, "%s (use the same eval.interval)\n", B->nev > 12 ? " ..." : "");
    }
    return nl;
}

// The recipes each run trained under (src/train/history.h): a run resumed with a changed
// recipe is not the run its first recipe describes.
static void print_recipes(const char *const runs[2]) {
    for (int k = 0; k < 2; k++) {
        HistorySegment *segs;
        int ns = history_read(runs[k], "compare", &segs);
        printf("recipes of %c:%s\n", "AB"[k], ns ? "" : " (no recipe history in metrics.jsonl)");
        for (int i = 0; i < ns; i++) {
            char line[8192];
            history_line(&segs[i], line, sizeof line);
            printf("  %s\n", line);
        }
        history_free(segs, ns);
    }
}

// The recipe diff A -> B, key by key (the resume guard's format; train.run_dir left out):
// what the two runs were told to do differently.
static void print_recipe_diff(const char *const runs[2]) {
    Recipe *rr[2];
    for (int k = 0; k < 2; k++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/recipe.yml", runs[k]);
        if (stat(path, &st) != 0) {
            printf("recipe diff: none (%s has no recipe.yml)\n", runs[k]);
            if (k) free(rr[0]);
            return;
        }
        rr[k] = xcalloc(1, sizeof(Recipe));
        recipe_load(rr[k], path, 0, NULL);
    }
    RecipeChange ch[RECIPE_MAX_CHANGES];
    int n = recipe_diff(rr[0], rr[1], ch), shown = 0;
    char line[600];
    printf("recipe diff (A -> B):");
    for (int i = 0; i < n; i++) {
        if (!strcmp(ch[i].key, "train.run_dir")) continue;
        recipe_change_line(&ch[i], line, sizeof line);
        printf("\n  %s", line);
        shown++;
    }
    printf("%s\n", shown ? "" : " none (the same recipe but for train.run_dir)");
    free(rr[0]);
    free(rr[1]);
}

// Which run is better on each held-out metric at the last landmark, and by how much: lower
// CE / PPL / BPB, higher task acc / len_norm.
static void print_better(const RunEvals *A, const RunEvals *B, const int *ia, const int *ib, int nl, char **keys,
                         int nkeys) {
    const cJSON *ra = A->ev[ia[nl - 1]].rec, *rb = B->ev[ib[nl - 1]].rec;
    printf("\nat the last landmark (step %ld), which run is better:\n", A->ev[ia[nl - 1]].step);
    for (int k = 0; k < nkeys; k++) {
        const char *key = keys[k];
        const int up = ends_with(key, "/acc") || ends_with(key, "/len_norm");
        const int down = ends_with(key, "/ce") || ends_with(key, "/bpb");
        if (!up && !down) continue;
        double a = num(ra, key), b = num(rb, key);
        if (!isfinite(a) || !isfinite(b)) continue;
        const char *unit = ends_with(key, "/ce") ? " nats" : ends_with(key, "/bpb") ? " bits/byte" : "";
        double d = up ? b - a : a - b;   // > 0: B is better
        if (d == 0) printf("  %-28s A and B equal (%.6f)\n", key, a);
        else printf("  %-28s %c is better by %.6f%s (A %.6f, B %.6f)\n", key, d > 0 ? 'B' : 'A', fabs(d), unit, a, b);
    }
}

// The metrics: the keys of A's landmark records, in record order (malloc'd; the strings
// are A's).
static char **metric_keys(const RunEvals *A, const int *ia, int nl, int *nkeys_out) {
    char **keys = NULL;
    int nkeys = 0;
    for (int l = 0; l < nl; l++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, A->ev[ia[l]].rec) {
            if (!it->string || metric_class(it->string) < 0) continue;
            int seen = 0;
            for (int k = 0; k < nkeys && !seen; k++) seen = !strcmp(keys[k], it->string);
            if (seen) continue;
            keys = xrealloc(keys, sizeof(char *) * (size_t)(nkeys + 1));
            keys[nkeys++] = it->string;
        }
    }
    *nkeys_out = nkeys;
    return keys;
}

// The table: per metric both runs report, the largest gap B - A over the landmarks, its
// mean, the sign flips, and the verdict against its tolerance. Returns how many metrics
// were compared.
static int compare_metrics(const RunEvals *A, const RunEvals *B, const int *ia, const int *ib, int nl, char **keys,
                           int nkeys, double tol_ce, double tol_task, Verdict *v) {
    printf("%-28s %10s %10s %12s %12s %10s %6s  %s\n", "metric", "tolerance", "landmarks", "max|B-A|", "at step",
           "mean B-A", "flips", "verdict");
    int ncompared = 0;
    for (int k = 0; k < nkeys; k++) {
        int cls = metric_class(keys[k]);
        double tol = cls == 1 ? tol_ce : cls == 2 ? tol_task : INFINITY;
        double maxgap = -1, sumgap = 0;
        long maxstep = 0;
        int n = 0, flips = 0, prev_sign = 0, bad = 0;
        for (int l = 0; l < nl; l++) {
            double a = num(A->ev[ia[l]].rec, keys[k]), b = num(B->ev[ib[l]].rec, keys[k]);
            if (!isfinite(a) || !isfinite(b)) continue;
            double g = b - a;
            n++;
            sumgap += g;
            if (fabs(g) > maxgap) { maxgap = fabs(g); maxstep = A->ev[ia[l]].step; }
            int sign = (g > 0) - (g < 0);
            if (sign && prev_sign && sign != prev_sign) flips++;
            if (sign) prev_sign = sign;
            if (fabs(g) > tol) bad = 1;
        }
        if (n == 0) continue;
        ncompared++;
        char tols[32];
        if (cls == 0) snprintf(tols, sizeof tols, "-");
        else snprintf(tols, sizeof tols, "%.4g", tol);
        const char *verdict = cls == 0 ? "(info)" : bad ? "MISMATCH" : "ok";
        printf("%-28s %10s %10d %12.6f %12ld %+10.6f %6d  %s\n", keys[k], tols, n, maxgap, maxstep, sumgap / n, flips,
               verdict);
        if (cls > 0) v->judged++;
        if (bad && cls > 0) {
            v->fails++;
            char msg[256];
            snprintf(msg, sizeof msg, "%s: |B-A| = %.6f at step %ld > %.4g", keys[k], maxgap, maxstep, tol);
            verdict_fail(v, msg);
        }
    }
    return ncompared;
}

// Per-landmark detail of the judged metrics.
static void print_landmark_detail(const RunEvals *A, const RunEvals *B, const int *ia, const int *ib, int nl,
                                  char **keys, int nkeys) {
    printf("\nper landmark (A, B, B-A):\n");
    for (int k = 0; k < nkeys; k++) {
        if (metric_class(keys[k]) <= 0) continue;
        printf("%s\n", keys[k]);
        for (int l = 0; l < nl; l++) {
            double a = num(A->ev[ia[l]].rec, keys[k]), b = num(B->ev[ib[l]].rec, keys[k]);
            if (!isfinite(a) || !isfinite(b)) continue;
            printf("  step %10ld  %12.6f  %12.6f  %+12.6f\n", A->ev[ia[l]].step, a, b, b - a);
        }
    }
}

// --kl-set: the token-level KL of the two runs' checkpoints, judged against tol_kl.
static void compare_kl(const char *const runs[2], const char *const ckpt_opt[2], const char *kl_set, long kl_docs,
                       int kl_batch, long eos, double tol_kl, Verdict *v) {
    char *ca = find_ckpt(runs[0], ckpt_opt[0]), *cb = find_ckpt(runs[1], ckpt_opt[1]);
    printf("\ntoken-level KL(A||B) on %s\n  A: %s\n  B: %s\n", kl_set, ca, cb);
    fflush(stdout);
    KLResult kr = token_kl(runs[0], runs[1], ca, cb, kl_set, kl_docs, kl_batch, eos);
    printf("  %ld documents, %ld tokens: mean KL %.8g nats/token (max %.6g); CE A %.6f, B %.6f; tolerance %.4g: %s\n",
           kr.docs, kr.tokens, kr.mean, kr.max, kr.ce_a, kr.ce_b, tol_kl, kr.mean <= tol_kl ? "ok" : "MISMATCH");
    v->judged++;
    if (!(kr.mean <= tol_kl)) {
        char msg[256];
        snprintf(msg, sizeof msg, "mean KL(A||B) = %.6g nats/token > %.4g", kr.mean, tol_kl);
        verdict_fail(v, msg);
        v->fails++;
    }
    free(ca);
    free(cb);
}

// The last lines; returns the exit status (0 match, 1 mismatch, 2 nothing to judge).
static int print_verdict(const Verdict *v, int nl) {
    if (v->judged == 0) {
        printf("\nverdict: nothing to judge (no */ce or task acc/len_norm metric in common; no --kl-set)\n");
        return EXIT_BADINPUT;
    }
    if (v->fails) {
        printf("\nverdict: MISMATCH (%d of %d checks failed)\n", v->fails, v->judged);
        for (int i = 0; i < v->nmsgs; i++) printf("  %s\n", v->msgs[i]);
        return 1;
    }
    printf("\nverdict: MATCH (%d checks within tolerance at %d landmarks)\n", v->judged, nl);
    return 0;
}

int cmd_compare(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    const char *runs[2] = {NULL, NULL}, *kl_set = NULL, *ckpt_opt[2] = {NULL, NULL};
    int nruns = 0, kl_batch = 0;
    double tol_ce = TOL_CE, tol_task = TOL_TASK, tol_kl = TOL_KL;
    long kl_docs = 64, eos = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = a[0] == '-' && a[1] == '-';
        if (takes && !v) die_input("compare: %s needs a value (olmo compare --help)", a);
        if (!strcmp(a, "--tol-ce")) tol_ce = parse_num(a, v);
        else if (!strcmp(a, "--tol-task")) tol_task = parse_num(a, v);
        else if (!strcmp(a, "--tol-kl")) tol_kl = parse_num(a, v);
        else if (!strcmp(a, "--kl-set")) kl_set = v;
        else if (!strcmp(a, "--kl-docs")) kl_docs = (long)parse_num(a, v);
        else if (!strcmp(a, "--kl-batch")) {
            kl_batch = (int)parse_num(a, v);
            if (kl_batch < 1) die_input("compare: --kl-batch must be >= 1");
        }
        else if (!strcmp(a, "--eos")) eos = (long)parse_num(a, v);
        else if (!strcmp(a, "--ckpt-a")) ckpt_opt[0] = v;
        else if (!strcmp(a, "--ckpt-b")) ckpt_opt[1] = v;
        else if (a[0] == '-') die_input("compare: unknown option '%s' (olmo compare --help)", a);
        else {
            if (nruns == 2) die_input("compare: give exactly two run directories (extra '%s')", a);
            runs[nruns++] = a;
            continue;
        }
        i++;
    }
    if (nruns != 2) { usage(stderr); return EXIT_BADINPUT; }

    RunEvals A, B;
    load_evals(&A, runs[0]);
    load_evals(&B, runs[1]);
    int *ia = xmalloc(sizeof(int) * (size_t)A.nev), *ib = xmalloc(sizeof(int) * (size_t)A.nev);
    int nl = find_landmarks(&A, &B, runs, ia, ib);
    if (nl == 0) return EXIT_BADINPUT;
    printf("olmo compare: A = %s (%d evals), B = %s (%d evals)\n", runs[0], A.nev, runs[1], B.nev);
    print_recipes(runs);
    print_recipe_diff(runs);
    printf("landmarks (common eval steps, %d):", nl);
    for (int l = 0; l < nl; l++) printf(" %ld", A.ev[ia[l]].step);
    printf("\n\n");

    int nkeys;
    char **keys = metric_keys(&A, ia, nl, &nkeys);
    Verdict v = {0};
    if (compare_metrics(&A, &B, ia, ib, nl, keys, nkeys, tol_ce, tol_task, &v) == 0)
        die_input("compare: the runs' eval records at their common steps share no held-out metric");
    print_landmark_detail(&A, &B, ia, ib, nl, keys, nkeys);
    print_better(&A, &B, ia, ib, nl, keys, nkeys);
    if (kl_set) compare_kl(runs, ckpt_opt, kl_set, kl_docs, kl_batch, eos, tol_kl, &v);

    int rc = print_verdict(&v, nl);
    for (int i = 0; i < v.nmsgs; i++) free(v.msgs[i]);
    free(v.msgs);
    free(keys);
    free(ia);
    free(ib);
    free_evals(&A);
    free_evals(&B);
    return rc;
}
