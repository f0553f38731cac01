// generate.c: sampling, prompt id lists and the --check-kv comparison of `olmo generate`
// (see generate.h); the KV-cache forward is kv.c, the command src/cli/cmd_generate.c.
#include "model/generate.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kv.h"
#include "util/common.h"

// ---- sampling -----------------------------------------------------------------------------------
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static int cand_cmp(const void *a, const void *b) {
    const SampleCand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;   // ties: lower id first, so the order is total (deterministic)
}

// Nucleus sampling: the smallest set of most likely tokens whose mass reaches top_p.
static int sample_top_p(const float *logits, int V, float temp, float top_p, uint64_t *rng, SampleCand *c) {
    int b = argmax(logits, V);
    double sum = 0;
    for (int i = 0; i < V; i++) sum += expf((logits[i] - logits[b]) / temp);
    // Only tokens with mass >= (1 - top_p) / (V - 1) can be in the nucleus: the others
    // together hold less than 1 - top_p. Sorting just those gives the same nucleus as
    // sorting everything, at a fraction of the cost.
    double cut = V > 1 ? (1.0 - top_p) / (V - 1) * sum : 0;
    int m = 0;
    for (int i = 0; i < V; i++) {
        float p = expf((logits[i] - logits[b]) / temp);
        if (p >= cut || i == b) c[m++] = (SampleCand){p, i};
    }
    qsort(c, (size_t)m, sizeof *c, cand_cmp);
    double keep = 0;
    int n = 0;
    while (n < m && (n == 0 || keep < top_p * sum)) keep += c[n++].p;
    double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53 * keep, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[n - 1].id;
}

void sampler_init(Sampler *s, int V, int greedy, float temperature, float top_p, uint64_t seed) {
    *s = (Sampler){V, greedy || temperature == 0, temperature, top_p, seed, xmalloc(sizeof(SampleCand) * (size_t)V)};
}

void sampler_free(Sampler *s) {
    free(s->cand);
    s->cand = NULL;
}

int sampler_next(Sampler *s, const float *logits) {
    return s->greedy ? argmax(logits, s->V) : sample_top_p(logits, s->V, s->temperature, s->top_p, &s->rng, s->cand);
}

// ---- prompt ids ---------------------------------------------------------------------------------
uint32_t *gen_parse_ids(const char *arg, size_t *n) {
    uint32_t *ids = NULL;
    size_t T = 0, cap = 0;
    for (const char *p = arg; *p;) {
        char *e;
        errno = 0;
        long v = strtol(p, &e, 10);
        if (e == p || errno || v < 0 || v > INT_MAX) die_input("generate: --tokens: bad id at '%s'", p);
        if (T == cap) { cap = cap ? 2 * cap : 64; ids = xrealloc(ids, sizeof *ids * cap); }
        ids[T++] = (uint32_t)v;
        p = *e == ',' ? e + 1 : e;
        if (*e && *e != ',') die_input("generate: --tokens: expected comma-separated ids, got '%s'", e);
    }
    *n = T;
    return ids;
}

// ---- --check-kv ---------------------------------------------------------------------------------
// Max over positions of max|a - b| / max|b| over the real-vocab row.
static double rel_err(const float *a, const float *b, int T, int V, int lda, int ldb) {
    double worst = 0;
    for (int t = 0; t < T; t++) {
        double num = 0, den = 0;
        for (int i = 0; i < V; i++) {
            double d = fabs((double)a[(size_t)t * lda + i] - b[(size_t)t * ldb + i]);
            num = d > num ? d : num;
            den = fabs(b[(size_t)t * ldb + i]) > den ? fabs(b[(size_t)t * ldb + i]) : den;
        }
        double r = num / (den > 0 ? den : 1);
        worst = r > worst ? r : worst;
    }
    return worst;
}

KVCheck gen_check_kv(Model *m, const int32_t *seq, int T, const float *decode_logits) {
    const ModelConfig *c = &m->cfg;
    const int Vp = c->padded_vocab, V = c->vocab_size, CHUNK = 5;
    float *full = xmalloc_aligned(sizeof(float) * (size_t)T * Vp);
    float *chunked = xmalloc_aligned(sizeof(float) * (size_t)T * Vp);
    int32_t *tg = xmalloc(sizeof(int32_t) * (size_t)T);
    for (int i = 0; i < T; i++) tg[i] = i + 1 < T ? seq[i + 1] : -100;
    model_forward_backward(m, seq, tg, 1, T, 0.0f, 1.0f, NULL, full, NULL);
    KVModel kc;
    if (m->stored) kv_create_stored(&kc, c, &m->table, m->stored, T, CHUNK);
    else kv_create(&kc, c, &m->table, m->params, T, CHUNK);
    for (int i = 0; i < T; i += CHUNK) {
        int n = T - i < CHUNK ? T - i : CHUNK;
        kv_forward(&kc, seq + i, n, chunked + (size_t)i * Vp, 1);
    }
    KVCheck r = {rel_err(decode_logits, full, T, V, Vp, Vp), rel_err(chunked, full, T, V, Vp, Vp)};
    kv_free(&kc);
    free(full);
    free(chunked);
    free(tg);
    return r;
}
