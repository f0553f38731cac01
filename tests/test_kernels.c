// test_kernels.c: every CPU kernel in src/kernels/kernels.h against the math.
//
// For each op with a backward: a double-precision reference forward written here straight
// from the header comments; the fp32 forward is compared against it, and the fp32 backward
// (fed dout = R) is compared against central finite differences OF THE DOUBLE REFERENCE of
// the scalar objective L = sum(out * R), R fixed random (for the LM-head loss, L is the loss
// itself). Differencing in double with h = 1e-5 leaves FD error ~1e-9 relative (truncation
// h^2 f'''/6 ~ 1e-10, cancellation 1e-16 |L| / h ~ 1e-10), so the measured error is the fp32
// kernel's own rounding. Error metric: max |got - ref| / max |ref| over the tensor.
//
// Tolerances (fp32 unit roundoff u = 6e-8):
//   TOL_FWD  = 1e-5: forwards are sums of <= 64 products plus exp/log/sqrt; worst-case
//            accumulated rounding is K u <= 4e-6 relative to the largest output.
//   TOL_BWD  = 1e-5: backwards of matmul/rmsnorm/rope/swiglu/embedding, same argument.
//   TOL_ATTN = 2e-5: the attention backward recomputes p = exp(s - lse) in fp32 from an fp32
//            lse; an absolute error of a few u * |s| (|s| up to ~6 here) in the exponent is
//            a relative error in every p, and dq/dk then sum up to T*D such terms.
//   TOL_LOSS = 1e-5: LM-head dx/dW: softmax from fp32 logits (error ~|logit| u) and an fp32
//            lse (|lse| ~ 5: 2.4e-7 abs), summed over <= 13 tokens / 16 columns.
//   TOL_KV   = 1e-6: attention_forward_kv against the fp32 full forward's last rows: the same
//            fp32 sums, cut into other query blocks (a few u); bitwise when the blocks coincide.
//   Loss sums: relative 1e-6 (double accumulation of fp32-logit-based terms, |logit| u).
//   AdamW: absolute 1e-6 on p (p ~ 1, 3 steps of ~8 fp32 ops, each ~u), relative 1e-6 on m, v.
//   sumsq: relative 1e-12 against a long-double sum (both accumulate in >= double).
// Determinism: every kernel run with 1, 2 and 3 OpenMP threads (the OpenBLAS used is the
// OpenMP build, which follows omp_set_num_threads) must give bitwise-identical outputs.
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/blas_core.h"
#include "kernels/cpu/vexp.h"
#include "kernels/kernels.h"
#include "model/docmask.h"

#define TOL_FWD 1e-5
#define TOL_BWD 1e-5
#define TOL_ATTN 2e-5
#define TOL_LOSS 1e-5
#define FD_H 1e-5

static int failures = 0, checks = 0;

static void report(const char *name, double err, double tol) {
    int ok = err <= tol && !isnan(err);
    checks++;
    if (!ok) failures++;
    printf("%-58s err %.3e  tol %.1e  %s\n", name, err, tol, ok ? "ok" : "FAIL");
}

// ---- RNG ---------------------------------------------------------------------------------
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return rng_state = x;
}
static float urand(void) { return (float)((xorshift64() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0); }
static float *frand(size_t n, float scale) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = urand() * scale;
    return p;
}
static double *todouble(const float *f, size_t n) {
    double *d = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    return d;
}
static float *fdup(const float *f, size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    memcpy(p, f, sizeof(float) * n);
    return p;
}
static float *ffill(size_t n, float v) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

// max |a - ref| / max(max |ref|, floor)
static double relerr(const float *a, const double *ref, size_t n, double floor) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= md)) md = d;   // propagates NaN
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return md / (mr > floor ? mr : floor);
}
static double maxabs(const double *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

// ---- finite differences over a double array inside some context -------------------------
typedef double (*ObjFn)(void *ctx);
static void fd_grad(double *grad, double *x, size_t n, ObjFn f, void *ctx) {
    for (size_t i = 0; i < n; i++) {
        double o = x[i], h = FD_H * (fabs(o) > 1 ? fabs(o) : 1);
        x[i] = o + h; double fp = f(ctx);
        x[i] = o - h; double fm = f(ctx);
        x[i] = o;
        grad[i] = (fp - fm) / (2 * h);
    }
}
static double dotd(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// Runs body(nthreads, out) for 1, 2, 3 threads; out holds `bytes`; requires identical bytes.
typedef void (*DetFn)(void *ctx, void *out);
static void det_check(const char *name, DetFn fn, void *ctx, size_t bytes) {
    unsigned char *ref = malloc(bytes), *got = malloc(bytes);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    memset(ref, 0, bytes);
    fn(ctx, ref);
    double bad = 0;
    for (int t = 2; t <= 3; t++) {
        omp_set_num_threads(t);
        memset(got, 0, bytes);
        fn(ctx, got);
        if (memcmp(ref, got, bytes) != 0) bad = 1;
    }
    omp_set_num_threads(saved);
    char label[256];
    snprintf(label, sizeof label, "determinism %s (1/2/3 threads, memcmp)", name);
    report(label, bad, 0);
    free(ref);
    free(got);
}

// ======================================== matmul ========================================
typedef struct { int N, C, OC; double *inp, *W, *R, *out; } MMCtx;
static void mm_ref(double *out, const double *inp, const double *W, int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = dotd(inp + (size_t)n * C, W + (size_t)o * C, C);
}
static double mm_obj(void *p) {
    MMCtx *c = p;
    mm_ref(c->out, c->inp, c->W, c->N, c->C, c->OC);
    return dotd(c->out, c->R, (size_t)c->N * c->OC);
}
static void test_matmul(int N, int C, int OC) {
    char nm[128];
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *inp = frand(ni, 1), *W = frand(nw, 1), *R = frand(no, 1), *out = malloc(sizeof(float) * no);
    MMCtx c = {N, C, OC, todouble(inp, ni), todouble(W, nw), todouble(R, no), malloc(sizeof(double) * no)};
    matmul_forward(out, inp, W, N, C, OC, PRECISION_FP32, NULL);
    double L = mm_obj(&c); (void)L;
    snprintf(nm, sizeof nm, "matmul fwd N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(out, c.out, no, 0), TOL_FWD);
    double *gi = malloc(sizeof(double) * ni), *gw = malloc(sizeof(double) * nw);
    fd_grad(gi, c.inp, ni, mm_obj, &c);
    fd_grad(gw, c.W, nw, mm_obj, &c);
    float *dinp = ffill(ni, 777.f), *dW = ffill(nw, -777.f);
    matmul_backward(dinp, dW, R, inp, W, N, C, OC, 0, 0, PRECISION_FP32, NULL);
    snprintf(nm, sizeof nm, "matmul bwd dinp (overwrite) N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(dinp, gi, ni, 0), TOL_BWD);
    snprintf(nm, sizeof nm, "matmul bwd dW (overwrite) N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(dW, gw, nw, 0), TOL_BWD);
    // accumulate flags: start from P, expect P + grad
    float *P1 = frand(ni, 1), *P2 = frand(nw, 1);
    float *a1 = fdup(P1, ni), *a2 = fdup(P2, nw);
    for (size_t i = 0; i < ni; i++) gi[i] += P1[i];
    for (size_t i = 0; i < nw; i++) gw[i] += P2[i];
    matmul_backward(a1, a2, R, inp, W, N, C, OC, 1, 1, PRECISION_FP32, NULL);
    snprintf(nm, sizeof nm, "matmul bwd dinp (accumulate) N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(a1, gi, ni, 0), TOL_BWD);
    snprintf(nm, sizeof nm, "matmul bwd dW (accumulate) N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(a2, gw, nw, 0), TOL_BWD);
    // NULL skips one
    float *d3 = ffill(nw, 5.f);
    matmul_backward(NULL, d3, R, inp, W, N, C, OC, 0, 0, PRECISION_FP32, NULL);
    for (size_t i = 0; i < nw; i++) gw[i] -= P2[i];
    snprintf(nm, sizeof nm, "matmul bwd dinp=NULL N=%d C=%d OC=%d", N, C, OC);
    report(nm, relerr(d3, gw, nw, 0), TOL_BWD);
    free(inp); free(W); free(R); free(out); free(c.inp); free(c.W); free(c.R); free(c.out);
    free(gi); free(gw); free(dinp); free(dW); free(P1); free(P2); free(a1); free(a2); free(d3);
}

typedef struct { int N, C, OC; float *inp, *W, *dout; } MMDet;
static void mm_det_fwd(void *p, void *o) {
    MMDet *c = p;
    matmul_forward(o, c->inp, c->W, c->N, c->C, c->OC, PRECISION_FP32, NULL);
}
static void mm_det_dinp(void *p, void *o) {
    MMDet *c = p;
    matmul_backward(o, NULL, c->dout, c->inp, c->W, c->N, c->C, c->OC, 0, 0, PRECISION_FP32, NULL);
}
static void mm_det_dW(void *p, void *o) {
    MMDet *c = p;
    matmul_backward(NULL, o, c->dout, c->inp, c->W, c->N, c->C, c->OC, 0, 0, PRECISION_FP32, NULL);
}

// ======================================== rmsnorm ========================================
typedef struct { int N, C, is; double eps; double *inp, *w, *R, *out, *rstd; } RNCtx;
static double rn_obj(void *p) {
    RNCtx *c = p;
    double L = 0;
    for (int n = 0; n < c->N; n++) {
        const double *x = c->inp + (size_t)n * c->is;
        double ss = 0;
        for (int k = 0; k < c->C; k++) ss += x[k] * x[k];
        double r = 1.0 / sqrt(ss / c->C + c->eps);
        c->rstd[n] = r;
        for (int k = 0; k < c->C; k++) {
            double o = c->w[k] * x[k] * r;
            c->out[(size_t)n * c->C + k] = o;
            L += o * c->R[(size_t)n * c->C + k];
        }
    }
    return L;
}
static void test_rmsnorm(int N, int C, int is, int os, int ds, int dis, float eps) {
    char nm[160], tag[96];
    snprintf(tag, sizeof tag, "N=%d C=%d in_stride=%d out_stride=%d dout_stride=%d din_stride=%d", N, C, is, os, ds, dis);
    const float SENT = 12345.f;
    float *inp = frand((size_t)N * is, 1.5f), *w = frand(C, 1), *Rc = frand((size_t)N * C, 1);
    for (int k = 0; k < C; k++) w[k] += 1.0f;
    float *out = ffill((size_t)N * os, SENT), *rstd = malloc(sizeof(float) * N);
    float *dout = ffill((size_t)N * ds, SENT);
    for (int n = 0; n < N; n++) memcpy(dout + (size_t)n * ds, Rc + (size_t)n * C, sizeof(float) * C);
    RNCtx c = {N, C, is, eps, todouble(inp, (size_t)N * is), todouble(w, C), todouble(Rc, (size_t)N * C),
               malloc(sizeof(double) * N * C), malloc(sizeof(double) * N)};
    rn_obj(&c);
    rmsnorm_forward(out, rstd, inp, w, N, C, is, os, eps);
    float *outc = malloc(sizeof(float) * N * C);
    int gap_ok = 1;
    for (int n = 0; n < N; n++) {
        memcpy(outc + (size_t)n * C, out + (size_t)n * os, sizeof(float) * C);
        for (int k = C; k < os; k++) if (out[(size_t)n * os + k] != SENT) gap_ok = 0;
    }
    snprintf(nm, sizeof nm, "rmsnorm fwd out %s", tag); report(nm, relerr(outc, c.out, (size_t)N * C, 0), TOL_FWD);
    snprintf(nm, sizeof nm, "rmsnorm fwd rstd %s", tag); report(nm, relerr(rstd, c.rstd, N, 0), TOL_FWD);
    snprintf(nm, sizeof nm, "rmsnorm fwd leaves out gaps alone %s", tag); report(nm, !gap_ok, 0);
    // FD over the whole strided input (gap entries get gradient 0), and over w
    double *gi = malloc(sizeof(double) * N * is), *gw = malloc(sizeof(double) * C);
    fd_grad(gi, c.inp, (size_t)N * is, rn_obj, &c);
    fd_grad(gw, c.w, C, rn_obj, &c);
    double *gic = malloc(sizeof(double) * N * C);
    for (int n = 0; n < N; n++) memcpy(gic + (size_t)n * C, gi + (size_t)n * is, sizeof(double) * C);
    float *dinp = ffill((size_t)N * dis, SENT), *dw = ffill(C, -SENT);
    rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, ds, is, dis);
    float *dic = malloc(sizeof(float) * N * C);
    gap_ok = 1;
    for (int n = 0; n < N; n++) {
        memcpy(dic + (size_t)n * C, dinp + (size_t)n * dis, sizeof(float) * C);
        for (int k = C; k < dis; k++) if (dinp[(size_t)n * dis + k] != SENT) gap_ok = 0;
    }
    snprintf(nm, sizeof nm, "rmsnorm bwd dinp %s", tag); report(nm, relerr(dic, gic, (size_t)N * C, 0), TOL_BWD);
    snprintf(nm, sizeof nm, "rmsnorm bwd dw %s", tag); report(nm, relerr(dw, gw, C, 0), TOL_BWD);
    snprintf(nm, sizeof nm, "rmsnorm bwd leaves dinp gaps alone %s", tag); report(nm, !gap_ok, 0);
    free(inp); free(w); free(Rc); free(out); free(rstd); free(dout); free(c.inp); free(c.w); free(c.R);
    free(c.out); free(c.rstd); free(outc); free(gi); free(gw); free(gic); free(dinp); free(dw); free(dic);
}

typedef struct { int N, C, is; float *inp, *w, *dout; } RNDet;
static void rn_det(void *p, void *o) {
    RNDet *c = p;
    float *out = o, *rstd = out + (size_t)c->N * c->C, *dinp = rstd + c->N, *dw = dinp + (size_t)c->N * c->C;
    rmsnorm_forward(out, rstd, c->inp, c->w, c->N, c->C, c->is, c->C, 1e-6f);
    rmsnorm_backward(dinp, dw, c->dout, c->inp, c->w, rstd, c->N, c->C, c->C, c->is, c->C);
}

// ======================================== rope ========================================
// Frequency j of RoPE in double, plain or YaRN, written from the equations of kernels.h
// (OLMo-core's YaRNRoPEScalingConfig): ramp over j between floor(d(beta_fast)) and
// ceil(d(beta_slow)), clipped to [0, D/2-1], d(n) = D ln(L / (2 pi n)) / (2 ln theta).
static double inv_freq_ref(int j, int D, double theta, const RopeScaling *sc) {
    double f = 1.0 / pow(theta, 2.0 * j / D);
    if (!sc || sc->type != ROPE_SCALING_YARN) return f;
    double dlo = D * log(sc->original_context / (sc->beta_fast * 2 * M_PI)) / (2 * log(theta));
    double dhi = D * log(sc->original_context / (sc->beta_slow * 2 * M_PI)) / (2 * log(theta));
    double lo = fmax(floor(dlo), 0.0), hi = fmin(ceil(dhi), D / 2 - 1.0);
    double ramp = fmin(fmax((j - lo) / fmax(hi - lo, 1e-3), 0.0), 1.0);
    return (1 - ramp) * f + ramp * f / sc->factor;
}
static double mscale_ref(const RopeScaling *sc) {
    return sc && sc->type == ROPE_SCALING_YARN ? 1.0 + 0.1 * log(sc->factor) : 1.0;
}

typedef struct { int B, T, H, D; double theta; double *x, *R, *out; const RopeScaling *sc; } RPCtx;
static void rope_ref(double *out, const double *x, int B, int T, int H, int D, double theta, const RopeScaling *sc) {
    int half = D / 2;
    double m = mscale_ref(sc);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                size_t off = (((size_t)b * T + t) * H + h) * D;
                for (int j = 0; j < half; j++) {
                    double a = t * inv_freq_ref(j, D, theta, sc), cs = m * cos(a), sn = m * sin(a);
                    double x1 = x[off + j], x2 = x[off + j + half];
                    out[off + j] = x1 * cs - x2 * sn;
                    out[off + j + half] = x2 * cs + x1 * sn;
                }
            }
}
static double rp_obj(void *p) {
    RPCtx *c = p;
    size_t n = (size_t)c->B * c->T * c->H * c->D;
    rope_ref(c->out, c->x, c->B, c->T, c->H, c->D, c->theta, c->sc);
    return dotd(c->out, c->R, n);
}
static void test_rope(int B, int T, int H, int D, double theta, const RopeScaling *sc) {
    char nm[128], tag[96];
    snprintf(tag, sizeof tag, "%sB=%d T=%d H=%d D=%d", sc ? "yarn " : "", B, T, H, D);
    size_t n = (size_t)B * T * H * D, nt = (size_t)T * (D / 2);
    float *ct = malloc(sizeof(float) * nt), *st = malloc(sizeof(float) * nt);
    rope_tables(ct, st, T, D, theta, sc);
    double *cr = malloc(sizeof(double) * nt), *sr = malloc(sizeof(double) * nt);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < D / 2; j++) {
            double a = t * inv_freq_ref(j, D, theta, sc);
            cr[t * (D / 2) + j] = mscale_ref(sc) * cos(a);
            sr[t * (D / 2) + j] = mscale_ref(sc) * sin(a);
        }
    snprintf(nm, sizeof nm, "rope tables cos %s", tag); report(nm, relerr(ct, cr, nt, 0), TOL_FWD);
    snprintf(nm, sizeof nm, "rope tables sin %s", tag); report(nm, relerr(st, sr, nt, 0), TOL_FWD);
    float *x = frand(n, 1), *R = frand(n, 1);
    RPCtx c = {B, T, H, D, theta, todouble(x, n), todouble(R, n), malloc(sizeof(double) * n), sc};
    rp_obj(&c);
    float *y = fdup(x, n);
    rope_forward(y, ct, st, B, T, H, D);
    snprintf(nm, sizeof nm, "rope fwd %s", tag); report(nm, relerr(y, c.out, n, 0), TOL_FWD);
    double *g = malloc(sizeof(double) * n);
    fd_grad(g, c.x, n, rp_obj, &c);
    float *dx = fdup(R, n);
    rope_backward(dx, ct, st, B, T, H, D);
    snprintf(nm, sizeof nm, "rope bwd %s", tag); report(nm, relerr(dx, g, n, 0), TOL_BWD);
    free(ct); free(st); free(cr); free(sr); free(x); free(R); free(c.x); free(c.R); free(c.out); free(y); free(g); free(dx);
}

typedef struct { int B, T, H, D; float *x, *ct, *st; } RPDet;
static void rp_det(void *p, void *o) {
    RPDet *c = p;
    size_t n = (size_t)c->B * c->T * c->H * c->D;
    float *y = o, *dy = y + n;
    memcpy(y, c->x, sizeof(float) * n);
    memcpy(dy, c->x, sizeof(float) * n);
    rope_forward(y, c->ct, c->st, c->B, c->T, c->H, c->D);
    rope_backward(dy, c->ct, c->st, c->B, c->T, c->H, c->D);
}

// ======================================== attention ========================================
// ds: (B, T) document starts or NULL (no document mask).
typedef struct { int B, T, NH, NKV, D, window; double *q, *k, *v, *R, *out, *lse; const int32_t *ds; } ATCtx;
static void attn_ref(ATCtx *c) {
    int B = c->B, T = c->T, NH = c->NH, NKV = c->NKV, D = c->D, group = NH / NKV;
    double scale = 1.0 / sqrt((double)D);
    double *s = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                int g = h / group, lo = i - c->window + 1 > 0 ? i - c->window + 1 : 0;
                if (c->ds && c->ds[(size_t)b * T + i] > lo) lo = c->ds[(size_t)b * T + i];
                const double *qi = c->q + (((size_t)b * T + i) * NH + h) * D;
                double mx = -INFINITY;
                for (int j = lo; j <= i; j++) {
                    s[j] = dotd(qi, c->k + (((size_t)b * T + j) * NKV + g) * D, D) * scale;
                    if (s[j] > mx) mx = s[j];
                }
                double sum = 0;
                for (int j = lo; j <= i; j++) sum += exp(s[j] - mx);
                double *o = c->out + (((size_t)b * T + i) * NH + h) * D;
                for (int d = 0; d < D; d++) o[d] = 0;
                for (int j = lo; j <= i; j++) {
                    double p = exp(s[j] - mx) / sum;
                    const double *vj = c->v + (((size_t)b * T + j) * NKV + g) * D;
                    for (int d = 0; d < D; d++) o[d] += p * vj[d];
                }
                c->lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
            }
    free(s);
}
static double at_obj(void *p) {
    ATCtx *c = p;
    attn_ref(c);
    return dotd(c->out, c->R, (size_t)c->B * c->T * c->NH * c->D);
}
// Document starts for a test: a boundary after position t with probability 1/mean_doc
// (each row's boundaries differ), plus one right before the last position so a
// one-token document is covered. mean_doc 0: NULL (no mask).
static int32_t *random_doc_starts(int B, int T, int mean_doc) {
    if (!mean_doc) return NULL;
    int32_t *ds = malloc(sizeof(int32_t) * (size_t)B * T);
    for (int b = 0; b < B; b++) {
        int32_t start = 0;
        for (int t = 0; t < T; t++) {
            if (t == T - 1 && T > 1) start = t;
            ds[(size_t)b * T + t] = start;
            if ((int)(xorshift64() % (uint64_t)mean_doc) == 0) start = t + 1;
        }
    }
    return ds;
}

static void test_attention_doc(const char *what, int B, int T, int NH, int NKV, int D, int window, float qscale,
                               int mean_doc) {
    char nm[192], tag[160];
    snprintf(tag, sizeof tag, "%s B=%d T=%d NH=%d NKV=%d D=%d win=%d%s", what, B, T, NH, NKV, D, window,
             mean_doc ? " docmask" : "");
    size_t nq = (size_t)B * T * NH * D, nk = (size_t)B * T * NKV * D, nl = (size_t)B * NH * T;
    float *q = frand(nq, qscale), *k = frand(nk, qscale), *v = frand(nk, 1), *R = frand(nq, 1);
    float *out = malloc(sizeof(float) * nq), *lse = malloc(sizeof(float) * nl);
    int32_t *ds = random_doc_starts(B, T, mean_doc);
    ATCtx c = {B, T, NH, NKV, D, window, todouble(q, nq), todouble(k, nk), todouble(v, nk), todouble(R, nq),
               malloc(sizeof(double) * nq), malloc(sizeof(double) * nl), ds};
    at_obj(&c);
    attention_forward(out, lse, q, k, v, B, T, NH, NKV, D, window, ds, PRECISION_FP32);
    snprintf(nm, sizeof nm, "attn fwd out %s", tag); report(nm, relerr(out, c.out, nq, 0), TOL_FWD);
    snprintf(nm, sizeof nm, "attn fwd lse %s", tag); report(nm, relerr(lse, c.lse, nl, 0), TOL_FWD);
    double *gq = malloc(sizeof(double) * nq), *gk = malloc(sizeof(double) * nk), *gv = malloc(sizeof(double) * nk);
    fd_grad(gq, c.q, nq, at_obj, &c);
    fd_grad(gk, c.k, nk, at_obj, &c);
    fd_grad(gv, c.v, nk, at_obj, &c);
    float *dq = ffill(nq, 99.f), *dk = ffill(nk, 99.f), *dv = ffill(nk, 99.f);
    attention_backward(dq, dk, dv, R, q, k, v, out, lse, B, T, NH, NKV, D, window, ds, PRECISION_FP32);
    // Per-tensor relative error, with the denominator floored at 1e-3 of the largest
    // gradient of the three (window=1 makes dq and dk exactly zero: FD gives ~1e-10 noise,
    // the kernel exactly 0, since its D_i = rowsum(P dP) cancels dP when P = 1).
    double fl = fmax(maxabs(gq, nq), fmax(maxabs(gk, nk), maxabs(gv, nk))) * 1e-3;
    snprintf(nm, sizeof nm, "attn bwd dq %s", tag); report(nm, relerr(dq, gq, nq, fl), TOL_ATTN);
    snprintf(nm, sizeof nm, "attn bwd dk %s", tag); report(nm, relerr(dk, gk, nk, fl), TOL_ATTN);
    snprintf(nm, sizeof nm, "attn bwd dv %s", tag); report(nm, relerr(dv, gv, nk, fl), TOL_ATTN);
    free(q); free(k); free(v); free(R); free(out); free(lse); free(c.q); free(c.k); free(c.v); free(c.R);
    free(c.out); free(c.lse); free(gq); free(gk); free(gv); free(dq); free(dk); free(dv); free(ds);
}
static void test_attention(const char *what, int B, int T, int NH, int NKV, int D, int window, float qscale) {
    test_attention_doc(what, B, T, NH, NKV, D, window, qscale, 0);
}

typedef struct { int B, T, NH, NKV, D, window; float *q, *k, *v, *dout; const int32_t *ds; } ATDet;
static size_t at_det_bytes(ATDet *c) {
    size_t nq = (size_t)c->B * c->T * c->NH * c->D, nk = (size_t)c->B * c->T * c->NKV * c->D;
    return sizeof(float) * (2 * nq + (size_t)c->B * c->NH * c->T + 2 * nk);
}
static void at_det(void *p, void *o) {
    ATDet *c = p;
    size_t nq = (size_t)c->B * c->T * c->NH * c->D, nk = (size_t)c->B * c->T * c->NKV * c->D;
    float *out = o, *lse = out + nq, *dq = lse + (size_t)c->B * c->NH * c->T, *dk = dq + nq, *dv = dk + nk;
    attention_forward(out, lse, c->q, c->k, c->v, c->B, c->T, c->NH, c->NKV, c->D, c->window, c->ds, PRECISION_FP32);
    attention_backward(dq, dk, dv, c->dout, c->q, c->k, c->v, out, lse, c->B, c->T, c->NH, c->NKV, c->D, c->window,
                       c->ds, PRECISION_FP32);
}

// ======================================== swiglu ========================================
typedef struct { int N, H; double *gu, *R, *out; } SWCtx;
static double sw_obj(void *p) {
    SWCtx *c = p;
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int j = 0; j < c->H; j++) {
            double g = c->gu[(size_t)n * 2 * c->H + j], u = c->gu[(size_t)n * 2 * c->H + c->H + j];
            double o = g / (1 + exp(-g)) * u;
            c->out[(size_t)n * c->H + j] = o;
            L += o * c->R[(size_t)n * c->H + j];
        }
    return L;
}
static void test_swiglu(int N, int H) {
    char nm[128];
    size_t ng = (size_t)N * 2 * H, no = (size_t)N * H;
    float *gu = frand(ng, 4), *R = frand(no, 1), *out = malloc(sizeof(float) * no);
    SWCtx c = {N, H, todouble(gu, ng), todouble(R, no), malloc(sizeof(double) * no)};
    sw_obj(&c);
    swiglu_forward(out, gu, N, H);
    snprintf(nm, sizeof nm, "swiglu fwd N=%d H=%d", N, H); report(nm, relerr(out, c.out, no, 0), TOL_FWD);
    double *g = malloc(sizeof(double) * ng);
    fd_grad(g, c.gu, ng, sw_obj, &c);
    float *dgu = ffill(ng, 3.f);
    swiglu_backward(dgu, R, gu, N, H);
    snprintf(nm, sizeof nm, "swiglu bwd N=%d H=%d", N, H); report(nm, relerr(dgu, g, ng, 0), TOL_BWD);
    free(gu); free(R); free(out); free(c.gu); free(c.R); free(c.out); free(g); free(dgu);
}
typedef struct { int N, H; float *gu, *dout; } SWDet;
static void sw_det(void *p, void *o) {
    SWDet *c = p;
    float *out = o, *dgu = out + (size_t)c->N * c->H;
    swiglu_forward(out, c->gu, c->N, c->H);
    swiglu_backward(dgu, c->dout, c->gu, c->N, c->H);
}

// ======================================== embedding ========================================
typedef struct { int N, C; const int32_t *tok; double *E, *R; } EMCtx;
static double em_obj(void *p) {
    EMCtx *c = p;
    double L = 0;
    for (int n = 0; n < c->N; n++) L += dotd(c->E + (size_t)c->tok[n] * c->C, c->R + (size_t)n * c->C, c->C);
    return L;
}
static void test_embedding(void) {
    enum { N = 12, C = 9, V = 7 };
    const int32_t tok[N] = {3, 0, 3, 6, 1, 3, 0, 5, 6, 3, 2, 0};   // repeats, row 4 unused
    float *E = frand((size_t)V * C, 1), *R = frand((size_t)N * C, 1), *out = malloc(sizeof(float) * N * C);
    embedding_forward(out, tok, E, N, C);
    int same = 1;
    for (int n = 0; n < N; n++) if (memcmp(out + (size_t)n * C, E + (size_t)tok[n] * C, sizeof(float) * C)) same = 0;
    report("embedding fwd == E[tokens] (exact)", !same, 0);
    EMCtx c = {N, C, tok, todouble(E, (size_t)V * C), todouble(R, (size_t)N * C)};
    double *g = malloc(sizeof(double) * V * C);
    fd_grad(g, c.E, (size_t)V * C, em_obj, &c);
    float *dE = ffill((size_t)V * C, 0.f);
    embedding_backward(dE, R, tok, N, C);
    report("embedding bwd (zeroed dE, repeated tokens) N=12 C=9 V=7", relerr(dE, g, (size_t)V * C, 0), TOL_BWD);
    // accumulates into existing dE
    float *P = frand((size_t)V * C, 1), *dE2 = fdup(P, (size_t)V * C);
    for (size_t i = 0; i < (size_t)V * C; i++) g[i] += P[i];
    embedding_backward(dE2, R, tok, N, C);
    report("embedding bwd adds to existing dE", relerr(dE2, g, (size_t)V * C, 0), TOL_BWD);
    free(E); free(R); free(out); free(c.E); free(c.R); free(g); free(dE); free(P); free(dE2);
}
typedef struct { int N, C, V; int32_t *tok; float *E, *dout; } EMDet;
static void em_det(void *p, void *o) {
    EMDet *c = p;
    float *out = o, *dE = out + (size_t)c->N * c->C;
    embedding_forward(out, c->tok, c->E, c->N, c->C);
    memset(dE, 0, sizeof(float) * c->V * c->C);
    embedding_backward(dE, c->dout, c->tok, c->N, c->C);
}

// ======================================== LM head loss ========================================
typedef struct { int N, C, V; const int32_t *tgt; double z, inv; double *x, *W, *logits, ce, zs; long nv; } LMCtx;
static double lm_obj(void *p) {
    LMCtx *c = p;
    int N = c->N, C = c->C, V = c->V;
    double ce = 0, zs = 0;
    long nv = 0;
    mm_ref(c->logits, c->x, c->W, N, C, V);
    for (int n = 0; n < N; n++) {
        if (c->tgt[n] < 0) continue;
        const double *lg = c->logits + (size_t)n * V;
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) if (lg[v] > mx) mx = lg[v];
        for (int v = 0; v < V; v++) s += exp(lg[v] - mx);
        double lse = mx + log(s);
        ce += lse - lg[c->tgt[n]];
        zs += lse * lse;
        nv++;
    }
    c->ce = ce; c->zs = zs; c->nv = nv;
    return (ce + c->z * zs) * c->inv;
}
static void test_lmhead(int N, int C, int V, int chunk, float z_coef, int check_z_matters) {
    char nm[160], tag[96];
    snprintf(tag, sizeof tag, "N=%d C=%d V=%d chunk=%d z=%g", N, C, V, chunk, z_coef);
    int32_t *tgt = malloc(sizeof(int32_t) * N);
    long nv = 0;
    for (int n = 0; n < N; n++) {
        tgt[n] = (n % 4 == 1) ? -100 : (int32_t)(xorshift64() % (uint64_t)V);
        if (tgt[n] >= 0) nv++;
    }
    float inv = 1.0f / (float)nv;
    // x, W scaled so logits span several units (lse ~ 4..8): the z term 2 z lse is then
    // ~10% of the gradient, well above the tolerance.
    size_t nx = (size_t)N * C, nw = (size_t)V * C;
    float *x = frand(nx, 1.5f), *W = frand(nw, 1.0f);
    for (size_t i = 0; i < nw; i++) W[i] += 0.3f;   // common shift raises every logit -> large lse
    float *scratch = malloc(sizeof(float) * (size_t)chunk * V);
    float *dx = ffill(nx, 55.f), *dW = ffill(nw, -55.f), *logits = malloc(sizeof(float) * N * V), *tok_ce = ffill(N, 9.f);
    LossSums s = lmhead_loss_forward_backward(dx, dW, x, W, tgt, N, C, V, z_coef, inv, scratch, chunk, logits, tok_ce, PRECISION_FP32, NULL);
    LMCtx c = {N, C, V, tgt, z_coef, inv, todouble(x, nx), todouble(W, nw), malloc(sizeof(double) * N * V), 0, 0, 0};
    lm_obj(&c);
    snprintf(nm, sizeof nm, "lmhead n_valid %s", tag); report(nm, s.n_valid != c.nv, 0);
    snprintf(nm, sizeof nm, "lmhead ce_sum vs double %s", tag); report(nm, fabs(s.ce_sum - c.ce) / fabs(c.ce), 1e-6);
    snprintf(nm, sizeof nm, "lmhead z_sum vs double %s", tag); report(nm, fabs(s.z_sum - c.zs) / fabs(c.zs), 1e-6);
    snprintf(nm, sizeof nm, "lmhead logits_out %s", tag); report(nm, relerr(logits, c.logits, (size_t)N * V, 0), TOL_FWD);
    // per-token CE reference
    double *tce = malloc(sizeof(double) * N);
    for (int n = 0; n < N; n++) {
        tce[n] = 0;
        if (tgt[n] < 0) continue;
        const double *lg = c.logits + (size_t)n * V;
        double mx = -INFINITY, sm = 0;
        for (int v = 0; v < V; v++) if (lg[v] > mx) mx = lg[v];
        for (int v = 0; v < V; v++) sm += exp(lg[v] - mx);
        tce[n] = mx + log(sm) - lg[tgt[n]];
    }
    snprintf(nm, sizeof nm, "lmhead tok_ce (0 where masked) %s", tag); report(nm, relerr(tok_ce, tce, N, 0), TOL_FWD);
    double *gx = malloc(sizeof(double) * nx), *gw = malloc(sizeof(double) * nw);
    fd_grad(gx, c.x, nx, lm_obj, &c);
    fd_grad(gw, c.W, nw, lm_obj, &c);
    snprintf(nm, sizeof nm, "lmhead bwd dx %s", tag); report(nm, relerr(dx, gx, nx, 0), TOL_LOSS);
    snprintf(nm, sizeof nm, "lmhead bwd dW %s", tag); report(nm, relerr(dW, gw, nw, 0), TOL_LOSS);
    if (check_z_matters) {
        // the z part must be visible: gradients without it differ by >> TOL_LOSS
        LMCtx c0 = c;
        c0.z = 0;
        double *g0 = malloc(sizeof(double) * nx);
        fd_grad(g0, c0.x, nx, lm_obj, &c0);
        double md = 0;
        for (size_t i = 0; i < nx; i++) md = fmax(md, fabs(g0[i] - gx[i]));
        md /= maxabs(gx, nx);
        snprintf(nm, sizeof nm, "lmhead z part changes dx by (want > 100 tol) %s", tag);
        report(nm, 100 * TOL_LOSS / md, 1.0);
        free(g0);
    }
    // forward only (dx NULL): same sums
    LossSums s2 = lmhead_loss_forward_backward(NULL, NULL, x, W, tgt, N, C, V, z_coef, inv, scratch, chunk, NULL, NULL, PRECISION_FP32, NULL);
    snprintf(nm, sizeof nm, "lmhead fwd-only sums == fwd+bwd sums %s", tag);
    report(nm, (s2.ce_sum != s.ce_sum || s2.z_sum != s.z_sum || s2.n_valid != s.n_valid), 0);
    free(tgt); free(x); free(W); free(scratch); free(dx); free(dW); free(logits); free(tok_ce);
    free(c.x); free(c.W); free(c.logits); free(tce); free(gx); free(gw);
}
typedef struct { int N, C, V, chunk; int32_t *tgt; float *x, *W, *scratch; } LMDet;
static void lm_det(void *p, void *o) {
    LMDet *c = p;
    double *sums = o;
    float *dx = (float *)(sums + 2), *dW = dx + (size_t)c->N * c->C, *tce = dW + (size_t)c->V * c->C;
    LossSums s = lmhead_loss_forward_backward(dx, dW, c->x, c->W, c->tgt, c->N, c->C, c->V, 1e-2f, 0.01f,
                                              c->scratch, c->chunk, NULL, tce, PRECISION_FP32, NULL);
    sums[0] = s.ce_sum;
    sums[1] = s.z_sum;
}

// ======================================== optimizer ========================================
static void test_adamw(void) {
    enum { n = 1000 };
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    float *p = frand(n, 1), *m = ffill(n, 0), *v = ffill(n, 0);
    double *pd = todouble(p, n), *md = calloc(n, sizeof(double)), *vd = calloc(n, sizeof(double));
    for (int step = 1; step <= 3; step++) {
        float *g = frand(n, 1);
        g[0] = 0;   // zero gradient element: update is decay only at first
        for (int i = 0; i < n; i++) {
            double gi = g[i];
            // torch.optim.AdamW: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
            // p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
            double bc1 = 1 - pow((double)b1, step), bc2 = 1 - pow((double)b2, step);
            pd[i] *= 1 - (double)lr * wd;
            md[i] = b1 * md[i] + (1 - (double)b1) * gi;
            vd[i] = b2 * vd[i] + (1 - (double)b2) * gi * gi;
            pd[i] -= (double)lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + eps);
        }
        adamw_update(p, m, v, g, n, lr, b1, b2, eps, wd, step);
        char nm[96];
        double ep = 0;
        for (int i = 0; i < n; i++) ep = fmax(ep, fabs(p[i] - pd[i]));
        snprintf(nm, sizeof nm, "adamw step %d p (abs)", step); report(nm, ep, 1e-6);
        snprintf(nm, sizeof nm, "adamw step %d m", step); report(nm, relerr(m, md, n, 0), 1e-6);
        snprintf(nm, sizeof nm, "adamw step %d v", step); report(nm, relerr(v, vd, n, 0), 1e-6);
        free(g);
    }
    free(p); free(m); free(v); free(pd); free(md); free(vd);
}

static void test_sumsq(void) {
    const size_t sizes[] = {0, 1, 1000, 65536, 65537, (size_t)3 * 65536 + 17, (size_t)256 * 65536 + 12345};
    float *x = frand(sizes[6], 1);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        long double ref = 0;
        for (size_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
        double got = sumsq(x, n);
        char nm[96];
        snprintf(nm, sizeof nm, "sumsq n=%zu vs long double", n);
        report(nm, n ? fabs(got - (double)ref) / (double)ref : fabs(got), 1e-12);
        if (k == 6) {
            double r[3];
            for (int t = 1; t <= 3; t++) { omp_set_num_threads(t); r[t - 1] = sumsq(x, n); }
            omp_set_num_threads(3);
            report("determinism sumsq n=16789561 (1/2/3 threads, memcmp)", memcmp(r, r + 1, 8) || memcmp(r, r + 2, 8), 0);
        }
    }
    free(x);
}

static void test_small_helpers(void) {
    enum { n = 1001 };
    float *a = frand(n, 1), *b = frand(n, 1), *o = malloc(sizeof(float) * n), *acc = fdup(a, n), *sc = fdup(a, n);
    residual_forward(o, a, b, n);
    add_inplace(acc, b, n);
    scale_inplace(sc, 0.37f, n);
    int ok1 = 1, ok2 = 1, ok3 = 1;
    for (int i = 0; i < n; i++) {
        if (o[i] != a[i] + b[i]) ok1 = 0;
        if (acc[i] != a[i] + b[i]) ok2 = 0;
        if (sc[i] != a[i] * 0.37f) ok3 = 0;
    }
    report("residual_forward == a + b (exact)", !ok1, 0);
    report("add_inplace == acc + x (exact)", !ok2, 0);
    report("scale_inplace == x * s (exact)", !ok3, 0);
    free(a); free(b); free(o); free(acc); free(sc);
}

// ======================================== determinism ========================================
// Known failure (found by this test): matmul_forward/matmul_backward in
// src/kernels/cpu/matmul.c call one multi-threaded OpenBLAS sgemm over the whole matrix.
// OpenBLAS (0.3.21, OpenMP build, AVX-512 here) partitions the M/N tiles by thread count,
// and elements that land on a different tile edge get a different micro-kernel and
// summation order: e.g. N=193 C=160 OC=211 gives ~1000 of 40723 forward outputs that differ
// in the last bits between 1 and 2 threads (dinp/dW: ~70% differ). lmhead inherits it.
// Fixed in matmul.c: shape-derived blocks, one single-threaded sgemm per block inside an
// OpenMP loop.
static void test_determinism(void) {
    {   // big enough for OpenBLAS to split the work over threads
        MMDet c = {193, 160, 211, frand(193 * 160, 1), frand(211 * 160, 1), frand(193 * 211, 1)};
        det_check("matmul fwd N=193 C=160 OC=211", mm_det_fwd, &c, sizeof(float) * 193 * 211);
        det_check("matmul bwd dinp N=193 C=160 OC=211", mm_det_dinp, &c, sizeof(float) * 193 * 160);
        det_check("matmul bwd dW N=193 C=160 OC=211", mm_det_dW, &c, sizeof(float) * 211 * 160);
        free(c.inp); free(c.W); free(c.dout);
    }
    {   // dims >= 1024 take the 256-row blocks of matmul.c's block_size
        MMDet c = {1100, 48, 1030, frand(1100 * 48, 1), frand(1030 * 48, 1), frand(1100 * 1030, 1)};
        det_check("matmul fwd N=1100 C=48 OC=1030", mm_det_fwd, &c, sizeof(float) * 1100 * 1030);
        det_check("matmul bwd dinp N=1100 C=48 OC=1030", mm_det_dinp, &c, sizeof(float) * 1100 * 48);
        det_check("matmul bwd dW N=1100 C=48 OC=1030", mm_det_dW, &c, sizeof(float) * 1030 * 48);
        free(c.inp); free(c.W); free(c.dout);
    }
    {
        RNDet c = {37, 600, 700, frand(37 * 700, 1), frand(600, 1), frand(37 * 600, 1)};
        det_check("rmsnorm fwd+bwd N=37 C=600 strided", rn_det, &c, sizeof(float) * (37 * 600 * 2 + 37 + 600));
        free(c.inp); free(c.w); free(c.dout);
    }
    {
        RPDet c = {2, 17, 5, 16, frand(2 * 17 * 5 * 16, 1), malloc(sizeof(float) * 17 * 8), malloc(sizeof(float) * 17 * 8)};
        rope_tables(c.ct, c.st, 17, 16, 500000.0, NULL);
        det_check("rope fwd+bwd B=2 T=17 H=5 D=16", rp_det, &c, sizeof(float) * 2 * 2 * 17 * 5 * 16);
        free(c.x); free(c.ct); free(c.st);
    }
    const int wins[3] = {9, 1 << 20, 1 << 20};
    for (int w = 0; w < 3; w++) {
        // T = 141 spans three query blocks of the tiled kernel (64 rows each); the third
        // run adds a document mask
        ATDet c = {2, 141, 6, 2, 16, wins[w], NULL, NULL, NULL, NULL, w == 2 ? random_doc_starts(2, 141, 30) : NULL};
        size_t nq = (size_t)2 * 141 * 6 * 16, nk = (size_t)2 * 141 * 2 * 16;
        c.q = frand(nq, 1); c.k = frand(nk, 1); c.v = frand(nk, 1); c.dout = frand(nq, 1);
        char nm[96];
        snprintf(nm, sizeof nm, "attention fwd+bwd B=2 T=141 NH=6 NKV=2 D=16 win=%d%s", wins[w], c.ds ? " docmask" : "");
        det_check(nm, at_det, &c, at_det_bytes(&c));
        free(c.q); free(c.k); free(c.v); free(c.dout); free((void *)c.ds);
    }
    {
        SWDet c = {53, 97, frand(53 * 2 * 97, 3), frand(53 * 97, 1)};
        det_check("swiglu fwd+bwd N=53 H=97", sw_det, &c, sizeof(float) * 53 * 97 * 3);
        free(c.gu); free(c.dout);
    }
    {
        EMDet c = {300, 67, 11, malloc(sizeof(int32_t) * 300), frand(11 * 67, 1), frand(300 * 67, 1)};
        for (int i = 0; i < 300; i++) c.tok[i] = (int32_t)(xorshift64() % 11);
        det_check("embedding fwd+bwd N=300 C=67 V=11 (repeats)", em_det, &c, sizeof(float) * (300 * 67 + 11 * 67));
        free(c.tok); free(c.E); free(c.dout);
    }
    {
        // V 7000: seven vocab blocks of 1024 in lmhead.c's six dx groups (uneven)
        LMDet c = {70, 64, 7000, 16, malloc(sizeof(int32_t) * 70), frand(70 * 64, 1), frand(7000 * 64, 1), malloc(sizeof(float) * 16 * 7000)};
        for (int i = 0; i < 70; i++) c.tgt[i] = i % 5 == 2 ? -100 : (int32_t)(xorshift64() % 7000);
        det_check("lmhead loss fwd+bwd N=70 C=64 V=7000 chunk=16", lm_det, &c,
                  sizeof(double) * 2 + sizeof(float) * (70 * 64 + 7000 * 64 + 70));
        free(c.tgt); free(c.x); free(c.W); free(c.scratch);
    }
    {   // adamw: elementwise, but check anyway
        enum { n = 5000 };
        float *p0 = frand(n, 1), *g = frand(n, 1), *res[3];
        for (int t = 1; t <= 3; t++) {
            omp_set_num_threads(t);
            float *p = fdup(p0, n), *m = ffill(n, 0), *v = ffill(n, 0);
            for (int s = 1; s <= 3; s++) adamw_update(p, m, v, g, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, s);
            res[t - 1] = p;
            free(m); free(v);
        }
        report("determinism adamw 3 steps (1/2/3 threads, memcmp)",
               memcmp(res[0], res[1], sizeof(float) * n) || memcmp(res[0], res[2], sizeof(float) * n), 0);
        for (int t = 0; t < 3; t++) free(res[t]);
        free(p0); free(g);
    }
}

// ======================================== attention, KV-cache form ========================================
// attention_forward_kv: Tn queries at positions p0..p0+Tn-1 against keys 0..p0+Tn-1 must
// give the last Tn rows of attention_forward over all p0+Tn positions (same window,
// document starts, GQA). Reference 1: that fp32 full forward, within TOL_KV = 1e-6
// relative (both are fp32 sums of the same <= p0+Tn products; only the query-block cut,
// and with it the sgemm's key count, differs, a few u); when p0 is a multiple of the
// 64-row query block the blocks coincide and the rows must be bitwise equal. Reference 2:
// the double reference over all positions, within TOL_FWD. Decode cases (T = 1, p0 > 0) take
// the kernel's sgemv path.
#define TOL_KV 1e-6
static void test_attention_kv(const char *what, int B, int p0, int Tn, int NH, int NKV, int D, int window,
                              int mean_doc) {
    const int Tk = p0 + Tn;
    char nm[320], tag[192];
    snprintf(tag, sizeof tag, "%s B=%d p0=%d T=%d NH=%d NKV=%d D=%d win=%d%s", what, B, p0, Tn, NH, NKV, D, window,
             mean_doc ? " docmask" : "");
    const size_t rq = (size_t)NH * D, nqf = (size_t)B * Tk * rq, nk = (size_t)B * Tk * NKV * D, nq = (size_t)B * Tn * rq;
    float *qf = frand(nqf, 2.0f), *k = frand(nk, 2.0f), *v = frand(nk, 1);
    int32_t *ds = random_doc_starts(B, Tk, mean_doc);
    float *outf = malloc(sizeof(float) * nqf), *lsef = malloc(sizeof(float) * (size_t)B * NH * Tk);
    attention_forward(outf, lsef, qf, k, v, B, Tk, NH, NKV, D, window, ds, PRECISION_FP32);
    // the new rows of q, and the full forward's rows for them: (B, Tn, NH, D), lse (B, NH, Tn)
    float *q = malloc(sizeof(float) * nq), *want = malloc(sizeof(float) * nq);
    float *want_lse = malloc(sizeof(float) * (size_t)B * NH * Tn);
    for (int b = 0; b < B; b++) {
        memcpy(q + (size_t)b * Tn * rq, qf + ((size_t)b * Tk + p0) * rq, sizeof(float) * Tn * rq);
        memcpy(want + (size_t)b * Tn * rq, outf + ((size_t)b * Tk + p0) * rq, sizeof(float) * Tn * rq);
        for (int h = 0; h < NH; h++)
            memcpy(want_lse + ((size_t)b * NH + h) * Tn, lsef + ((size_t)b * NH + h) * Tk + p0, sizeof(float) * Tn);
    }
    float *out = ffill(nq, 99.f), *lse = ffill((size_t)B * NH * Tn, 99.f);
    attention_forward_kv(out, lse, q, k, v, B, Tn, p0, NH, NKV, D, window, ds, PRECISION_FP32);
    double *wd = todouble(want, nq), *wl = todouble(want_lse, (size_t)B * NH * Tn);
    snprintf(nm, sizeof nm, "attn kv out vs full fwd %s", tag); report(nm, relerr(out, wd, nq, 0), TOL_KV);
    snprintf(nm, sizeof nm, "attn kv lse vs full fwd %s", tag); report(nm, relerr(lse, wl, (size_t)B * NH * Tn, 0), TOL_KV);
    if (p0 % 64 == 0) {
        snprintf(nm, sizeof nm, "attn kv == full fwd bitwise (p0 on a block edge) %s", tag);
        report(nm, memcmp(out, want, sizeof(float) * nq) || memcmp(lse, want_lse, sizeof(float) * B * NH * Tn), 0);
    }
    ATCtx c = {B, Tk, NH, NKV, D, window, todouble(qf, nqf), todouble(k, nk), todouble(v, nk), NULL,
               malloc(sizeof(double) * nqf), malloc(sizeof(double) * (size_t)B * NH * Tk), ds};
    attn_ref(&c);
    for (int b = 0; b < B; b++) {   // the double reference's rows for the new queries, into wd / wl
        for (size_t i = 0; i < (size_t)Tn * rq; i++) wd[(size_t)b * Tn * rq + i] = c.out[((size_t)b * Tk + p0) * rq + i];
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tn; t++) wl[((size_t)b * NH + h) * Tn + t] = c.lse[((size_t)b * NH + h) * Tk + p0 + t];
    }
    snprintf(nm, sizeof nm, "attn kv out vs double ref %s", tag); report(nm, relerr(out, wd, nq, 0), TOL_FWD);
    snprintf(nm, sizeof nm, "attn kv lse vs double ref %s", tag); report(nm, relerr(lse, wl, (size_t)B * NH * Tn, 0), TOL_FWD);
    free(qf); free(k); free(v); free(ds); free(outf); free(lsef); free(q); free(want); free(want_lse); free(out);
    free(lse); free(wd); free(wl); free(c.q); free(c.k); free(c.v); free(c.out); free(c.lse);
}

typedef struct { int B, Tn, p0, NH, NKV, D, window; float *q, *k, *v; const int32_t *ds; } AKDet;
static void ak_det(void *p, void *o) {
    AKDet *c = p;
    float *out = o, *lse = out + (size_t)c->B * c->Tn * c->NH * c->D;
    attention_forward_kv(out, lse, c->q, c->k, c->v, c->B, c->Tn, c->p0, c->NH, c->NKV, c->D, c->window, c->ds, PRECISION_FP32);
}

static void test_attention_kv_all(void) {
    const int FULL = 1 << 20;
    test_attention_kv("decode full", 1, 20, 1, 4, 2, 8, FULL, 0);
    test_attention_kv("decode sliding", 1, 100, 1, 4, 2, 8, 7, 0);
    test_attention_kv("decode window=1", 1, 9, 1, 2, 1, 4, 1, 0);
    test_attention_kv("decode docmask", 1, 90, 1, 4, 2, 8, FULL, 10);
    test_attention_kv("chunk across a block edge, GQA 4:1 sliding", 1, 50, 30, 4, 1, 8, 40, 0);
    test_attention_kv("chunk sliding docmask", 1, 90, 5, 4, 2, 8, 16, 6);
    test_attention_kv("multi-block chunk docmask", 1, 37, 150, 2, 1, 4, FULL, 30);
    test_attention_kv("two rows MHA sliding", 2, 13, 9, 3, 3, 6, 5, 0);
    test_attention_kv("block-aligned", 1, 64, 70, 2, 2, 4, 50, 0);
    test_attention_kv("block-aligned docmask", 2, 128, 3, 2, 1, 4, FULL, 20);
    test_attention_kv("no cache (p0 = 0)", 2, 0, 17, 4, 2, 8, 5, 4);
    {
        AKDet c = {1, 77, 90, 6, 2, 16, 40, frand(77 * 6 * 16, 1), frand(167 * 2 * 16, 1), frand(167 * 2 * 16, 1),
                   random_doc_starts(1, 167, 30)};
        det_check("attention kv fwd B=1 p0=90 T=77 NH=6 NKV=2 D=16 win=40 docmask", ak_det, &c,
                  sizeof(float) * (77 * 6 * 16 + 6 * 77));
        free(c.q); free(c.k); free(c.v); free((void *)c.ds);
    }
    {   // a decode step: one query row, the kernel's sgemv path
        AKDet c = {1, 1, 300, 6, 2, 16, FULL, frand(6 * 16, 1), frand(301 * 2 * 16, 1), frand(301 * 2 * 16, 1), NULL};
        det_check("attention kv fwd (decode) B=1 p0=300 T=1 NH=6 NKV=2 D=16 full", ak_det, &c, sizeof(float) * (6 * 16 + 6));
        free(c.q); free(c.k); free(c.v);
    }
    {   // matmul_forward of one row (a decode step) is a blocked sgemv: OC > 256 spans blocks
        MMDet c = {1, 96, 1030, frand(96, 1), frand(1030 * 96, 1), NULL};
        det_check("matmul fwd N=1 C=96 OC=1030 (sgemv)", mm_det_fwd, &c, sizeof(float) * 1030);
        float *out = malloc(sizeof(float) * 1030);
        double *ref = malloc(sizeof(double) * 1030), *di = todouble(c.inp, 96), *dw = todouble(c.W, 1030 * 96);
        matmul_forward(out, c.inp, c.W, 1, 96, 1030, PRECISION_FP32, NULL);
        mm_ref(ref, di, dw, 1, 96, 1030);
        report("matmul fwd N=1 C=96 OC=1030 (sgemv) vs double ref", relerr(out, ref, 1030, 0), TOL_FWD);
        free(out); free(ref); free(di); free(dw);
        free(c.inp); free(c.W);
    }
}

// vexpf (src/kernels/cpu/vexp.h) against double exp over the softmax range [-87, 0] and a
// little above: relative error within 4 ulp (4.8e-7), 0 below -87.3.
static void test_vexpf(void) {
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f + 90.0f * (float)i / 2000000.0f;
        double ref = exp((double)x);
        double err = fabs(vexpf(x) - ref) / ref;
        if (err > worst) worst = err;
    }
    report("vexpf vs exp on [-87, 3]", worst, 4.8e-7);
    report("vexpf(-100) flushes to 0", vexpf(-100.0f), 0.0);
}

// vexpf_glibc (vexp.h) is libm's expf bit for bit on x86-64 with FMA (glibc's __expf_fma):
// every `stride`-th float, NaNs aside, plus the edges. The suite takes every 97th; all 2^32:
// `build/tests/test_kernels expf-all` (about 10 s on 2 cores). On a CPU without FMA glibc
// runs its other expf, which differs in two inputs of 2^32.
static void test_vexpf_glibc(long stride) {
    if (!__builtin_cpu_supports("fma")) {
        printf("vexpf_glibc == expf: skipped, this CPU has no FMA (glibc takes its other expf)\n");
        return;
    }
    long differ = 0;
#pragma omp parallel for reduction(+ : differ) schedule(static)
    for (long i = 0; i < (1L << 32); i += stride) {
        const uint32_t u = (uint32_t)i;
        float x, a, b;
        memcpy(&x, &u, 4);
        a = expf(x), b = vexpf_glibc(x);
        if (memcmp(&a, &b, 4) && !(a != a && b != b)) differ++;
    }
    const float edges[] = {0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f, -0x1.9fe36ap6f, -0x1.5d589ep6f, 0.0f, -0.0f,
                           1e-30f, -87.5f, INFINITY, -INFINITY, 0x1.04845ep+5f, -0x1.f8cbb2p+5f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const float a = expf(edges[i]), b = vexpf_glibc(edges[i]);
        differ += memcmp(&a, &b, 4) != 0;
    }
    char nm[96];
    if (stride == 1) snprintf(nm, sizeof nm, "vexpf_glibc == libm expf bit for bit (all 2^32 floats)");
    else snprintf(nm, sizeof nm, "vexpf_glibc == libm expf bit for bit (every %ldth float, edges)", stride);
    report(nm, (double)differ, 0);
}

// doc_starts_from_tokens: an EOS closes its own document (OLMo-core get_document_lengths):
// tokens [5 E 7 8 E E 9] (E = EOS) hold documents [5 E] [7 8 E] [E] [9].
static void test_doc_starts(void) {
    const int32_t E = 3, in[2][7] = {{5, E, 7, 8, E, E, 9}, {E, 1, 1, 1, 1, 1, E}};
    const int32_t want[2][7] = {{0, 0, 2, 2, 2, 5, 6}, {0, 1, 1, 1, 1, 1, 1}};
    int32_t got[2][7];
    doc_starts_from_tokens(&in[0][0], 2, 7, E, &got[0][0]);
    report("doc_starts_from_tokens (EOS ends its document)", memcmp(got, want, sizeof got) != 0, 0);
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    test_doc_starts();
    if (argc > 1 && !strcmp(argv[1], "expf-all")) {   // the exhaustive check alone
        test_vexpf_glibc(1);
        printf("%d checks, %d failed\n", checks, failures);
        return failures != 0;
    }
    test_vexpf();
    test_vexpf_glibc(97);
    omp_set_num_threads(3);
    test_matmul(5, 7, 6);
    test_matmul(1, 16, 3);
    test_rmsnorm(6, 16, 16, 16, 16, 16, 1e-6f);
    // QK-norm shape: norm a C-wide slice of fused rows; every stride different
    test_rmsnorm(5, 8, 40, 24, 32, 48, 1e-6f);
    test_rmsnorm(3, 300, 301, 300, 305, 300, 1e-5f);   // C > 256: dw column blocking
    test_rope(2, 9, 3, 8, 10000.0, NULL);
    test_rope(1, 5, 2, 4, 500000.0, NULL);
    test_attention("causal full", 1, 7, 2, 2, 4, 7, 1.0f);
    test_attention("causal full window>T", 2, 6, 3, 3, 8, 1000, 2.0f);
    test_attention("sliding", 2, 11, 4, 2, 8, 4, 2.0f);
    test_attention("GQA full", 2, 13, 4, 2, 8, 13, 2.0f);
    test_attention("MHA sliding", 2, 9, 3, 3, 6, 5, 2.0f);
    test_attention("window=1", 2, 6, 4, 2, 4, 1, 2.0f);
    test_attention("GQA 4:1 sliding", 1, 10, 4, 1, 8, 3, 2.0f);
    // T > 64 crosses the tiled kernel's query-block boundaries (key range starts > 0)
    test_attention("multi-block sliding", 1, 150, 2, 1, 4, 40, 2.0f);
    test_attention("multi-block full", 1, 130, 2, 2, 4, 130, 2.0f);
    // document mask: short documents, with and without a window, GQA, across blocks
    test_attention_doc("full", 2, 13, 4, 2, 8, 13, 2.0f, 4);
    test_attention_doc("sliding", 2, 17, 4, 2, 8, 5, 2.0f, 6);
    test_attention_doc("multi-block full", 1, 150, 2, 1, 4, 150, 2.0f, 40);
    test_attention_doc("multi-block sliding", 1, 150, 2, 2, 4, 50, 2.0f, 25);
    test_attention_doc("mostly one-token docs", 1, 9, 2, 1, 4, 9, 2.0f, 2);
    {   // (after the attention cases, so their random inputs stay as before) YaRN: OLMo 3's parameters at head_dim 128 (ramp over j = 18..35), and a small
        // config whose ramp is clipped at D/2 - 1 (original context 64, theta 10000, D 16)
        RopeScaling olmo3 = {ROPE_SCALING_YARN, 8.0, 32.0, 1.0, 8192};
        RopeScaling clip = {ROPE_SCALING_YARN, 4.0, 32.0, 1.0, 64};
        RopeScaling wide = {ROPE_SCALING_YARN, 2.0, 8.0, 0.5, 4096};
        test_rope(1, 40, 2, 128, 500000.0, &olmo3);
        test_rope(2, 9, 2, 16, 10000.0, &clip);
        test_rope(1, 7, 3, 32, 500000.0, &wide);
        report("rope_attention_factor(yarn 8) == 0.1 ln 8 + 1", fabs(rope_attention_factor(&olmo3) - (0.1 * log(8.0) + 1)), 1e-15);
        report("rope_attention_factor(NULL) == 1", fabs(rope_attention_factor(NULL) - 1.0), 0);
    }
    test_swiglu(5, 7);
    test_swiglu(3, 33);
    test_embedding();
    test_lmhead(11, 8, 13, 4, 1e-2f, 1);   // chunk < N, not dividing N
    test_lmhead(11, 8, 13, 11, 1e-2f, 0);  // one chunk
    test_lmhead(7, 6, 10, 1, 1e-2f, 0);    // chunk of one token
    test_lmhead(9, 5, 17, 16, 0.0f, 0);    // chunk > N, no z
    test_lmhead(9, 3, 2100, 4, 1e-2f, 0);  // three vocab blocks of lmhead.c's 1024, the last partial
    test_adamw();
    test_sumsq();
    test_small_helpers();
    test_determinism();
    test_attention_kv_all();   // last: the cases above keep their random inputs
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
