// generate.c: `olmo generate CKPT --prompt TEXT`: KV-cache inference and sampling.
//
// The prompt is run through the model in chunks (prefill), then one token per step. Every
// layer keeps K (after k-norm and RoPE at the absolute position) and V of all positions;
// a query at position p on a sliding layer attends keys max(0, p-window+1)..p, on a full
// layer 0..p, exactly the training mask, so the cached logits equal a full forward over
// the same tokens (checked by --check-kv and tests/test_generate.sh).
// Sampling: greedy (argmax, lowest id on ties) or temperature + top-p (nucleus) with a
// seeded splitmix64 stream, so a (checkpoint, prompt, seed) triple always gives the same
// text. Only the real-vocab rows are candidates: the padding rows of the LM head are
// never sampled.
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data/tokenizer.h"
#include "io/hf.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/generate.h"
#include "model/model.h"
#include "util/common.h"

#define DOLMA2_EOS 100257

// ---- KV-cache forward ---------------------------------------------------------------------------
void kv_create(KVModel *k, const ModelConfig *cfg, const ParamTable *t, float *params, int max_len, int max_n) {
    memset(k, 0, sizeof *k);
    k->cfg = *cfg;
    model_view(&k->w, t, cfg, params);
    k->max_len = max_len;
    k->max_n = max_n;
    size_t C = (size_t)cfg->d_model, D = (size_t)cfg->head_dim, Q = (size_t)cfg->n_heads * D,
           KV = (size_t)cfg->n_kv_heads * D, H = (size_t)cfg->mlp_hidden, L = (size_t)cfg->n_layers,
           n = (size_t)max_n;
    k->kcache = xmalloc_aligned(sizeof(float) * L * (size_t)max_len * KV);
    k->vcache = xmalloc_aligned(sizeof(float) * L * (size_t)max_len * KV);
    k->rope_cos = xmalloc_aligned(sizeof(float) * (size_t)max_len * D / 2);
    k->rope_sin = xmalloc_aligned(sizeof(float) * (size_t)max_len * D / 2);
    rope_tables(k->rope_cos, k->rope_sin, max_len, (int)D, cfg->rope_theta, NULL);
    if (cfg->rope_scaling.type == ROPE_SCALING_YARN) {   // full layers rotate with YaRN (model.c)
        k->yarn_cos = xmalloc_aligned(sizeof(float) * (size_t)max_len * D / 2);
        k->yarn_sin = xmalloc_aligned(sizeof(float) * (size_t)max_len * D / 2);
        rope_tables(k->yarn_cos, k->yarn_sin, max_len, (int)D, cfg->rope_theta, &cfg->rope_scaling);
    }
    k->x = xmalloc_aligned(sizeof(float) * n * C);
    k->qkv = xmalloc_aligned(sizeof(float) * n * (Q + 2 * KV));
    k->q = xmalloc_aligned(sizeof(float) * n * Q);
    k->att = xmalloc_aligned(sizeof(float) * n * Q);
    k->a = xmalloc_aligned(sizeof(float) * n * C);
    k->an = xmalloc_aligned(sizeof(float) * n * C);
    k->gu = xmalloc_aligned(sizeof(float) * n * 2 * H);
    k->act = xmalloc_aligned(sizeof(float) * n * H);
    k->mo = xmalloc_aligned(sizeof(float) * n * C);
    k->rstd = xmalloc_aligned(sizeof(float) * n);
    k->xf = xmalloc_aligned(sizeof(float) * n * C);
}

void kv_free(KVModel *k) {
    float *b[] = {k->kcache, k->vcache, k->rope_cos, k->rope_sin, k->yarn_cos, k->yarn_sin, k->x, k->qkv, k->q, k->att, k->a,
                  k->an, k->gu, k->act, k->mo, k->rstd, k->xf};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) free(b[i]);
    memset(k, 0, sizeof *k);
}

// out (N, OC) = inp (N, C) @ W^T. One token (decode): blocked sgemv, since sgemm would
// repack all of W for a single row (most of the decode time at a 100k vocab). Blocks are a
// function of OC only and OpenBLAS is single-threaded inside the OpenMP loop, so the
// result does not depend on the thread count.
static void linear(float *out, const float *inp, const float *W, int N, int C, int OC) {
    if (N > 1) { matmul_forward(out, inp, W, N, C, OC); return; }
    const int BLOCK = 256, nb = (OC + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < nb; b++) {
        int o0 = b * BLOCK, m = OC - o0 < BLOCK ? OC - o0 : BLOCK;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, m, C, 1.0f, W + (size_t)o0 * C, C, inp, 1, 0.0f, out + o0, 1);
    }
}

// out (D) = softmax(q . K[lo..p] / sqrt(D)) V[lo..p] for one query head; K, V rows of stride ld.
static void attend_one(float *out, const float *q, const float *K, const float *V, int lo, int p, int ld, int D,
                       float *s) {
    const float scale = 1.0f / sqrtf((float)D);
    float mx = -INFINITY;
    for (int j = lo; j <= p; j++) {
        const float *kj = K + (size_t)j * ld;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[d] * kj[d];
        s[j - lo] = dot * scale;
        mx = s[j - lo] > mx ? s[j - lo] : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j <= p - lo; j++) { s[j] = expf(s[j] - mx); sum += s[j]; }
    float inv = 1.0f / sum;
    for (int d = 0; d < D; d++) out[d] = 0.0f;
    for (int j = lo; j <= p; j++) {
        const float *vj = V + (size_t)j * ld;
        float pj = s[j - lo] * inv;
        for (int d = 0; d < D; d++) out[d] += pj * vj[d];
    }
}

void kv_forward(KVModel *k, const int32_t *tokens, int n, float *logits, int all_logits) {
    const ModelConfig *c = &k->cfg;
    if (n <= 0 || n > k->max_n || k->len + n > k->max_len) die("kv_forward: %d tokens at position %d exceed the cache", n, k->len);
    const int C = c->d_model, D = c->head_dim, NH = c->n_heads, NKV = c->n_kv_heads, H = c->mlp_hidden;
    const int Q = NH * D, KV = NKV * D, QKV = Q + 2 * KV, group = NH / NKV, p0 = k->len;
    const float eps = (float)c->rms_eps;
    embedding_forward(k->x, tokens, k->w.embed, n, C);
    for (int l = 0; l < c->n_layers; l++) {
        const LayerView *w = &k->w.layers[l];
        float *Kc = k->kcache + (size_t)l * k->max_len * KV, *Vc = k->vcache + (size_t)l * k->max_len * KV;
        linear(k->qkv, k->x, w->wqkv, n, C, QKV);
        // q-norm / k-norm over the whole projection (before the head split), then RoPE at
        // the absolute positions p0.. (table rows offset by p0). K and V go to the cache.
        rmsnorm_forward(k->q, k->rstd, k->qkv, w->q_norm, n, Q, QKV, Q, eps);
        rmsnorm_forward(Kc + (size_t)p0 * KV, k->rstd, k->qkv + Q, w->k_norm, n, KV, QKV, KV, eps);
        for (int i = 0; i < n; i++) memcpy(Vc + (size_t)(p0 + i) * KV, k->qkv + (size_t)i * QKV + Q + KV, sizeof(float) * KV);
        const int scaled = model_layer_rope_scaled(c, l);
        const float *cs = (scaled ? k->yarn_cos : k->rope_cos) + (size_t)p0 * D / 2;
        const float *sn = (scaled ? k->yarn_sin : k->rope_sin) + (size_t)p0 * D / 2;
        rope_forward(k->q, cs, sn, 1, n, NH, D);
        rope_forward(Kc + (size_t)p0 * KV, cs, sn, 1, n, NKV, D);
        int sliding = model_layer_is_sliding(c, l);
        // One (query, head) pair per task; each output row is computed by one thread in a
        // fixed order, so the result does not depend on the thread count.
#pragma omp parallel
        {
            float *sc = xmalloc(sizeof(float) * (size_t)(p0 + n));
#pragma omp for collapse(2) schedule(static)
            for (int i = 0; i < n; i++)
                for (int h = 0; h < NH; h++) {
                    int p = p0 + i, lo = sliding && p - c->sliding_window + 1 > 0 ? p - c->sliding_window + 1 : 0;
                    int g = h / group;
                    attend_one(k->att + (size_t)i * Q + (size_t)h * D, k->q + (size_t)i * Q + (size_t)h * D,
                               Kc + (size_t)g * D, Vc + (size_t)g * D, lo, p, KV, D, sc);
                }
            free(sc);
        }
        linear(k->a, k->att, w->wo, n, Q, C);
        rmsnorm_forward(k->an, k->rstd, k->a, w->attn_norm, n, C, C, C, eps);
        residual_forward(k->x, k->x, k->an, (size_t)n * C);   // h = x + norm(attn out)
        linear(k->gu, k->x, w->wgu, n, C, 2 * H);
        swiglu_forward(k->act, k->gu, n, H);
        linear(k->mo, k->act, w->wdown, n, H, C);
        rmsnorm_forward(k->an, k->rstd, k->mo, w->mlp_norm, n, C, C, C, eps);
        residual_forward(k->x, k->x, k->an, (size_t)n * C);   // y = h + norm(mlp out)
    }
    k->len += n;
    if (!logits) return;
    int first = all_logits ? 0 : n - 1, rows = n - first;
    rmsnorm_forward(k->xf, k->rstd, k->x + (size_t)first * C, k->w.final_norm, rows, C, C, C, eps);
    linear(logits, k->xf, k->w.lm_head, rows, C, c->padded_vocab);
}

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

typedef struct { float p; int id; } Cand;
static int cand_cmp(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;   // ties: lower id first, so the order is total (deterministic)
}

// Nucleus sampling: the smallest set of most likely tokens whose mass reaches top_p.
static int sample_top_p(const float *logits, int V, float temp, float top_p, uint64_t *rng, Cand *c) {
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
        if (p >= cut || i == b) c[m++] = (Cand){p, i};
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

// ---- CLI ----------------------------------------------------------------------------------------
static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo generate CKPT (--prompt TEXT | --tokens ID,ID,...) [--max-new N] [--greedy]\n"
            "                     [--temperature T] [--top-p P] [--seed S] [--eos ID] [--tokenizer FILE]\n"
            "                     [--check-kv] [--dump-logits FILE]\n"
            "\n"
            "Continue a prompt with a KV-cache forward (docs/hf.md). CKPT: a run directory, a\n"
            "checkpoint directory, a model.safetensors file (shape from olmo_config metadata,\n"
            "train_state.json or a recipe.yml near it) or an HF Olmo3 directory.\n"
            "The completion goes to stdout (text; with --tokens, ids); stats to stderr.\n"
            "\n"
            "  --prompt TEXT      tokenized with dolma2 (no BOS; special-token strings allowed)\n"
            "  --tokens IDS       prompt as comma-separated ids (no tokenizer; output as ids)\n"
            "  --max-new N        tokens to generate at most (default 64); stops at EOS\n"
            "  --greedy           argmax decoding (same as --temperature 0)\n"
            "  --temperature T    softmax temperature (default 1.0)\n"
            "  --top-p P          nucleus sampling mass in (0, 1] (default 0.95)\n"
            "  --seed S           sampling seed (default 0): same seed, same output\n"
            "  --eos ID           stop token (default 100257, dolma2 <|endoftext|>; -1 = none)\n"
            "  --tokenizer FILE   tokenizer.json (default: env OLMO_TOKENIZER, else dolma2)\n"
            "  --check-kv         compare the KV-cache logits at every prompt position with a\n"
            "                     full forward; prints the max relative error, exit 1 above 1e-5\n"
            "  --dump-logits FILE write the KV-cache logits of the prompt positions, real vocab rows,\n"
            "                     as safetensors tensor \"logits\" (T, vocab_size) F32\n");
}

static long parse_long(const char *s, const char *opt, long lo, long hi) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || e == s || v < lo || v > hi) die_input("generate: %s must be an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
    return v;
}

static double parse_double(const char *s, const char *opt) {
    char *e;
    double v = strtod(s, &e);
    if (*e || e == s || !isfinite(v)) die_input("generate: %s must be a number, got '%s'", opt, s);
    return v;
}

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

int cmd_generate(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    const char *ckpt = NULL, *prompt = NULL, *ids_arg = NULL, *tok_path = NULL, *dump = NULL;
    long max_new = 64, eos = DOLMA2_EOS;
    double temp = 1.0, top_p = 0.95;
    uint64_t seed = 0;
    int greedy = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--prompt") && has) prompt = argv[++i];
        else if (!strcmp(a, "--tokens") && has) ids_arg = argv[++i];
        else if (!strcmp(a, "--max-new") && has) max_new = parse_long(argv[++i], a, 0, 1L << 24);
        else if (!strcmp(a, "--temperature") && has) temp = parse_double(argv[++i], a);
        else if (!strcmp(a, "--top-p") && has) top_p = parse_double(argv[++i], a);
        else if (!strcmp(a, "--seed") && has) seed = (uint64_t)parse_long(argv[++i], a, 0, LONG_MAX);
        else if (!strcmp(a, "--eos") && has) eos = parse_long(argv[++i], a, -1, INT_MAX);
        else if (!strcmp(a, "--tokenizer") && has) tok_path = argv[++i];
        else if (!strcmp(a, "--dump-logits") && has) dump = argv[++i];
        else if (!strcmp(a, "--greedy")) greedy = 1;
        else if (!strcmp(a, "--check-kv")) check = 1;
        else if (a[0] == '-') { usage(stderr); die_input("generate: unknown or incomplete option '%s'", a); }
        else if (!ckpt) ckpt = a;
        else die_input("generate: unexpected argument '%s'", a);
    }
    if (!ckpt) { usage(stderr); return 2; }
    if (!prompt == !ids_arg) die_input("generate: give exactly one of --prompt TEXT or --tokens IDS");
    if (temp < 0) die_input("generate: --temperature must be >= 0, got %g", temp);
    if (!(top_p > 0 && top_p <= 1)) die_input("generate: --top-p must be in (0, 1], got %g", top_p);
    if (temp == 0) greedy = 1;

    char err[4096];
    ModelSource s;
    if (model_source_resolve(ckpt, &s, err, sizeof err) != 0) die_input("generate: %s", err);
    const ModelConfig *c = &s.cfg;

    // Prompt tokens.
    Tokenizer *tok = NULL;
    uint32_t *ids = NULL;
    size_t T = 0, cap = 0;
    if (prompt) {
        // An HF directory brings its own tokenizer.json; otherwise the default (dolma2).
        char hf_tok[4200];
        snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", s.path);
        FILE *probe = !tok_path && s.is_hf ? fopen(hf_tok, "rb") : NULL;
        if (probe) { fclose(probe); tok_path = hf_tok; }
        char *tp = tokenizer_resolve_path(tok_path);
        tok = tokenizer_load(tp);
        free(tp);
        if (tokenizer_encode(tok, prompt, strlen(prompt), 1, &ids, &T, &cap) != 0)
            die_input("generate: --prompt is not valid UTF-8 (byte %zu)", tokenizer_utf8_error_offset(prompt, strlen(prompt)));
    } else {
        for (const char *p = ids_arg; *p;) {
            char *e;
            errno = 0;
            long v = strtol(p, &e, 10);
            if (e == p || errno || v < 0 || v > INT_MAX) die_input("generate: --tokens: bad id at '%s'", p);
            if (T == cap) { cap = cap ? 2 * cap : 64; ids = xrealloc(ids, sizeof *ids * cap); }
            ids[T++] = (uint32_t)v;
            p = *e == ',' ? e + 1 : e;
            if (*e && *e != ',') die_input("generate: --tokens: expected comma-separated ids, got '%s'", e);
        }
    }
    if (T == 0) die_input("generate: the prompt is empty (no tokens)");
    for (size_t i = 0; i < T; i++)
        if ((int)ids[i] >= c->vocab_size)
            die_input("generate: prompt token %u at position %zu is outside the model's vocab (%d)", ids[i], i, c->vocab_size);

    // Parameters live in a Model (its full forward serves --check-kv); the KV path views them.
    Model m;
    model_create(&m, c, 1, check ? (int)T : 1);
    if (model_source_load(&s, &m.table, m.params, err, sizeof err) != 0) die_input("generate: %s", err);
    size_t max_len = T + (size_t)max_new;
    if (max_len > INT_MAX / 2) die_input("generate: prompt + --max-new too long");
    if (s.seq_len > 0 && max_len > (size_t)s.seq_len)
        warnf("generate: %zu positions exceed the training length %d", max_len, s.seq_len);
    const int CHUNK = 64;
    KVModel kv;
    kv_create(&kv, c, &m.table, m.params, (int)max_len, CHUNK);
    const int Vp = c->padded_vocab, V = c->vocab_size;
    int32_t *seq = xmalloc(sizeof(int32_t) * max_len);
    for (size_t i = 0; i < T; i++) seq[i] = (int32_t)ids[i];
    float *logits = xmalloc_aligned(sizeof(float) * (size_t)CHUNK * Vp);
    int keep_all = check || dump;
    float *prompt_logits = keep_all ? xmalloc_aligned(sizeof(float) * T * Vp) : NULL;
    int rc = 0;

    double t0 = now_seconds();
    if (keep_all) {
        // Token by token: the decode path at every prompt position.
        for (size_t i = 0; i < T; i++) kv_forward(&kv, seq + i, 1, prompt_logits + i * Vp, 1);
    } else {
        for (size_t i = 0; i < T; i += CHUNK) {
            int n = T - i < (size_t)CHUNK ? (int)(T - i) : CHUNK;
            kv_forward(&kv, seq + i, n, logits, 0);
        }
    }
    double t_prefill = now_seconds() - t0;
    const float *last = keep_all ? prompt_logits + (T - 1) * Vp : logits;

    if (check) {
        // Full forward over the prompt, and the chunked-prefill path, against the decode path.
        float *full = xmalloc_aligned(sizeof(float) * T * Vp);
        int32_t *tg = xmalloc(sizeof(int32_t) * T);
        for (size_t i = 0; i < T; i++) tg[i] = i + 1 < T ? seq[i + 1] : -100;
        model_forward_backward(&m, seq, tg, 1, (int)T, 0.0f, 1.0f, NULL, full, NULL);
        KVModel kc;
        kv_create(&kc, c, &m.table, m.params, (int)T, CHUNK);
        float *chunked = xmalloc_aligned(sizeof(float) * T * Vp);
        for (size_t i = 0; i < T; i += 5) {   // odd chunk size: chunks straddle the window
            int n = T - i < 5 ? (int)(T - i) : 5;
            kv_forward(&kc, seq + i, n, chunked + i * Vp, 1);
        }
        double e1 = rel_err(prompt_logits, full, (int)T, V, Vp, Vp), e2 = rel_err(chunked, full, (int)T, V, Vp, Vp);
        printf("check-kv: %zu positions, window %d: decode vs full forward max rel err %.3g, "
               "chunked prefill vs full %.3g (tolerance 1e-5)\n", T, c->sliding_window, e1, e2);
        if (!(e1 <= 1e-5 && e2 <= 1e-5)) { fprintf(stderr, "olmo: error: check-kv: KV-cache logits differ from the full forward\n"); rc = 1; }
        kv_free(&kc);
        free(full);
        free(tg);
        free(chunked);
    }
    if (dump) {
        float *real = xmalloc(sizeof(float) * T * V);
        for (size_t t = 0; t < T; t++) memcpy(real + t * V, prompt_logits + t * Vp, sizeof(float) * V);
        StWrite w = {"logits", "F32", 2, {(int64_t)T, V}, real, sizeof(float) * T * V};
        if (st_write(dump, &w, 1, NULL) != 0) die_input("generate: cannot write %s: %s", dump, strerror(errno));
        free(real);
    }

    // Generation.
    uint64_t rng = seed;
    Cand *cand = xmalloc(sizeof(Cand) * (size_t)V);
    float *cur = xmalloc(sizeof(float) * (size_t)Vp);
    memcpy(cur, last, sizeof(float) * Vp);
    size_t len = T;
    double t1 = now_seconds();
    for (long g = 0; g < max_new; g++) {
        int next = greedy ? argmax(cur, V) : sample_top_p(cur, V, (float)temp, (float)top_p, &rng, cand);
        seq[len++] = next;
        if (tok) {
            size_t nb;
            uint32_t u = (uint32_t)next;
            char *b = tokenizer_decode(tok, &u, 1, &nb);
            if (b && next != eos) fwrite(b, 1, nb, stdout);
            free(b);
        } else {
            printf("%s%d", g ? "," : "", next);
        }
        fflush(stdout);
        if (next == eos || g + 1 == max_new) break;
        kv_forward(&kv, &seq[len - 1], 1, cur, 0);
    }
    printf("\n");
    double t_gen = now_seconds() - t1;
    fprintf(stderr, "generate: %zu prompt tokens (%.3fs), %zu new (%.3fs, %.1f tok/s)%s; shape from %s\n", T, t_prefill,
            len - T, t_gen, t_gen > 0 ? (double)(len - T) / t_gen : 0.0, len > T && seq[len - 1] == eos ? ", stopped at EOS" : "",
            s.config_from);

    free(cand);
    free(cur);
    free(seq);
    free(logits);
    free(prompt_logits);
    free(ids);
    kv_free(&kv);
    model_destroy(&m);
    if (tok) tokenizer_free(tok);
    return rc;
}
