// test_bf16.c: the bf16 matmul engines (src/kernels/cpu/bf16*.c, PRECISION_BF16): the one
// this CPU picks, then every other one it has in a child process (OLMO_BF16_ENGINE).
// Reference: the same products in double from operands rounded by bf16_round, whose
// rounding is itself checked against its definition (nearest, ties to even; denormals to
// signed zero) and, on AMX machines, against VCVTNE2PS2BF16 through the packers. Products of
// two bf16 values are exact in fp32, so the only error left is fp32 accumulation:
// tolerance 1e-5 relative to the output's largest magnitude, as for the fp32 matmul.
// Also: every pack layout and transpose, edge shapes (M, N not multiples of 16, K not of
// 32; several k blocks and L2 groups), accumulate, every engine against the same reference, and bitwise
// determinism at 1, 2 and 3 threads.
#include <cpuid.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "util/blas_core.h"
#include "check.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/kernels.h"

static Bf16Work *g_ws;   // the bf16 kernels' scratch, as the CPU ops backend keeps one
static uint64_t rng = 0x243F6A8885A308D3ull;
static float urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}
static float *frand(size_t n) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = urand();
    return x;
}
static double rb(float x) { return bf16_to_float(bf16_round(x)); }

static void test_round(void) {
    struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80},  // tie, even stays
        {0x3f818000u, 0x3f82},                         // tie, odd rounds up
        {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80}, {0xbf808001u, 0xbf81},
        {0x00000001u, 0x0000}, {0x80400000u, 0x8000},  // denormals -> signed zero
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, {0x7f7fffffu, 0x7f80},  // inf; max rounds to inf
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f;
        memcpy(&f, &cases[i].in, 4);
        CHECK(bf16_round(f) == cases[i].out, "bf16_round(0x%08x) = 0x%04x, want 0x%04x", cases[i].in, bf16_round(f),
              cases[i].out);
    }
    float nan = NAN;
    uint16_t h = bf16_round(nan);
    CHECK((h & 0x7f80) == 0x7f80 && (h & 0x7f), "bf16_round(NaN) = 0x%04x is not a NaN", h);
}

// C (M, N) = A (M, K) @ B (K, N) in double from rounded operands, layouts as gemm_bf16
static void ref_gemm(double *C, int at, int bt, int M, int N, int K, const float *A, int lda, const float *B, int ldb) {
    double *a = malloc(sizeof(double) * M * K), *b = malloc(sizeof(double) * N * K);  // rounded, (M, K) and (N, K)
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) a[(size_t)i * K + k] = rb(at ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++) b[(size_t)j * K + k] = rb(bt ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += a[(size_t)i * K + k] * b[(size_t)j * K + k];
            C[(size_t)i * N + j] = s;
        }
    free(a), free(b);
}
static double err_rel_max(const float *C, const double *ref, size_t n) {
    double mx = 0, e = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(C[i] - ref[i]));
    return e / (mx > 0 ? mx : 1);
}

// pad > 0: row strides longer than the rows, operands allocated to their exact extent
// ((rows - 1) strides + one row) so the sanitizer run (test_sanitize.sh) sees any overread.
static void test_gemm(int at, int bt, int M, int N, int K, int accumulate, int pad) {
    int lda = (at ? M : K) + pad, ldb = (bt ? K : N) + pad;
    float *A = frand((size_t)((at ? K : M) - 1) * lda + (at ? M : K));
    float *B = frand((size_t)((bt ? N : K) - 1) * ldb + (bt ? K : N));
    float *C = frand((size_t)M * N);
    double *ref = malloc(sizeof(double) * M * N);
    ref_gemm(ref, at, bt, M, N, K, A, lda, B, ldb);
    if (accumulate)
        for (size_t i = 0; i < (size_t)M * N; i++) ref[i] += C[i];
    float *C3 = malloc(sizeof(float) * M * N);
    memcpy(C3, C, sizeof(float) * M * N);
    omp_set_num_threads(1);
    gemm_bf16(at, bt, M, N, K, A, lda, B, ldb, accumulate, C, N, g_ws);
    omp_set_num_threads(3);
    gemm_bf16(at, bt, M, N, K, A, lda, B, ldb, accumulate, C3, N, g_ws);
    omp_set_num_threads(2);
    CHECK(!memcmp(C, C3, sizeof(float) * M * N), "gemm_bf16 at=%d bt=%d M=%d N=%d K=%d acc=%d: 1 and 3 threads differ",
          at, bt, M, N, K, accumulate);
    free(C3);
    double e = err_rel_max(C, ref, (size_t)M * N);
    CHECK(e < 1e-5, "gemm_bf16 at=%d bt=%d M=%d N=%d K=%d acc=%d (%s): rel err %.3g > 1e-5", at, bt, M, N, K,
          accumulate, matmul_bf16_engine(), e);
    printf("  gemm_bf16 at=%d bt=%d M=%4d N=%4d K=%4d acc=%d pad=%d  err %.2e\n", at, bt, M, N, K, accumulate, pad, e);
    free(A), free(B), free(C), free(ref);
}

// The packed engines' exp (bf16_rows.c's exp16), through bf16_att_prob_row with scale 1,
// no masked column and lse 0 (both exact), on every `stride`-th float: where exp(x) is a
// normal float, within EXP_ULP of exp in double (the exhaustive maximum, 1.0103 ulp, from
// `build/tests/test_bf16 exp-all`, rounded up); where it is subnormal, within one subnormal
// step; 0 below -104 and for -inf, inf past the overflow threshold, NaN for NaN. The suite
// takes every 97th float; exp-all all 2^32 (~1 min on 2 cores).
#define EXP_ULP 1.011
static void test_exp16(long stride) {
    if (!bf16_packed()) return;
    double worst = 0;
    long bad = 0, normals = 0;
#pragma omp parallel reduction(max : worst) reduction(+ : bad, normals)
    {
        float in[4096], out[4096];
#pragma omp for schedule(static)
        for (long i0 = 0; i0 < (1L << 32); i0 += 4096 * stride) {
            int n = 0;
            for (long i = i0; i < i0 + 4096 * stride && i < (1L << 32); i += stride, n++) {
                const uint32_t u = (uint32_t)i;
                memcpy(&in[n], &u, 4);
            }
            memcpy(out, in, sizeof(float) * n);
            bf16_att_prob_row(out, n, 1.0f, 0, n - 1, 0.0f);
            for (int j = 0; j < n; j++) {
                const float x = in[j], y = out[j];
                const double ref = exp((double)x);
                const float rf = (float)ref;
                if (x != x) bad += y == y;
                else if (x < -104.0f) bad += y != 0.0f;
                else if (isinf(rf)) bad += !isinf(y);
                else if (rf < 0x1p-126f) bad += fabs(y - ref) > 0x1p-149;
                else {
                    const double u = fabs(y - ref) / (nextafterf(rf, INFINITY) - rf);
                    worst = u > worst ? u : worst;
                    bad += !(u <= EXP_ULP);
                    normals++;
                }
            }
        }
    }
    CHECK(bad == 0, "packed exp: %ld of the checked floats outside the bounds (worst %.4f ulp)", bad, worst);
    printf("  packed exp (every %ldth float): worst %.4f ulp over %ld normal results, bound %.3f\n", stride, worst,
           normals, EXP_ULP);
}

// bf16_pack_b_both (the LM head's weight in both B layouts in one pass) against the two
// bf16_pack_b calls it stands for, bit for bit, on full and edge 32 x 32 blocks (R, K not
// multiples of 32 or 16).
static void test_pack_both(int R, int K) {
    if (!bf16_packed()) return;
    float *src = frand((size_t)R * K);
    const int kt = bf16_ktiles(K), kn = bf16_ktiles(R);
    const size_t nt = bf16_packed_b_size(R, kt), nn = bf16_packed_b_size(K, kn);
    uint16_t *t1 = calloc(nt, 2), *t2 = calloc(nt, 2), *n1 = calloc(nn, 2), *n2 = calloc(nn, 2);
    bf16_pack_b(t1, kt, 0, src, K, 1, K, R);
    bf16_pack_b(n1, kn, 0, src, K, 0, R, K);
    bf16_pack_b_both(t2, kt, n2, kn, src, K, R, K);
    CHECK(!memcmp(t1, t2, 2 * nt) && !memcmp(n1, n2, 2 * nn), "bf16_pack_b_both R=%d K=%d differs from bf16_pack_b", R, K);
    printf("  pack_b_both R=%d K=%d: bitwise the two bf16_pack_b\n", R, K);
    free(src), free(t1), free(t2), free(n1), free(n2);
}

// ---- LM head ------------------------------------------------------------------------------
typedef struct {
    int N, C, V, chunk;
    float *x, *W, *dx, *dW, *logits, *scratch;
    int32_t *tg;
    LossSums sums;
} LM;

static void lm_run(LM *l) {
    l->sums = lmhead_loss_forward_backward(l->dx, l->dW, l->x, l->W, l->tg, l->N, l->C, l->V, 1e-4f, 1.0f / l->N,
                                           l->scratch, l->chunk, l->logits, NULL, PRECISION_BF16, g_ws);
}
static LM lm_make(int N, int C, int V, int chunk) {
    LM l = {N, C, V, chunk, frand((size_t)N * C), frand((size_t)V * C), malloc(sizeof(float) * N * C),
            malloc(sizeof(float) * (size_t)V * C), malloc(sizeof(float) * (size_t)N * V),
            malloc(sizeof(float) * (size_t)chunk * V), malloc(sizeof(int32_t) * N), {0, 0, 0}};
    for (int i = 0; i < N; i++) l.tg[i] = i % 7 == 3 ? -100 : (int32_t)((unsigned)(i * 2654435761u) % (unsigned)V);
    return l;
}
static void lm_free(LM *l) { free(l->x), free(l->W), free(l->dx), free(l->dW), free(l->logits), free(l->scratch), free(l->tg); }

// Logits and the loss against double from rounded x, W; the fp32 dlogits (through the
// test hook, before they are rounded as an operand) against
// double from the double logits; dx and dW against double products of the rounded fp32
// dlogits. vblock: the AMX path's vocab block (several, the last one partial).
static void test_lmhead_single(int N, int C, int V, int chunk, int vblock) {
    LM l = lm_make(N, C, V, chunk);
    float *dlo = malloc(sizeof(float) * N * V);
    bf16_lmhead_dl_out = dlo, bf16_lmhead_vblock = vblock, bf16_lmhead_chunk = chunk;
    lm_run(&l);
    bf16_lmhead_dl_out = NULL, bf16_lmhead_vblock = 0, bf16_lmhead_chunk = 0;
    double *lg = malloc(sizeof(double) * N * V), *dl = malloc(sizeof(double) * N * V);
    ref_gemm(lg, 0, 1, N, V, C, l.x, C, l.W, C);
    double ce = 0, z = 0;
    for (int i = 0; i < N; i++) {
        double mx = -1e300, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, lg[(size_t)i * V + v]);
        for (int v = 0; v < V; v++) s += exp(lg[(size_t)i * V + v] - mx);
        double lse = mx + log(s);
        for (int v = 0; v < V; v++) {
            double p = exp(lg[(size_t)i * V + v] - lse);
            dl[(size_t)i * V + v] = l.tg[i] < 0 ? 0 : (p * (1 + 2e-4 * lse) - (v == l.tg[i])) / N;
        }
        if (l.tg[i] >= 0) ce += lse - lg[(size_t)i * V + l.tg[i]], z += lse * lse;
    }
    double e = err_rel_max(l.logits, lg, (size_t)N * V);
    CHECK(e < 1e-5, "lmhead bf16 N=%d C=%d V=%d logits: rel err %.3g", N, C, V, e);
    double ece = fabs(l.sums.ce_sum - ce) / ce, ez = fabs(l.sums.z_sum - z) / z;
    CHECK(ece < 1e-5 && ez < 1e-5, "lmhead bf16 loss sums: ce %.3g z %.3g rel err", ece, ez);
    double edl = err_rel_max(dlo, dl, (size_t)N * V);
    CHECK(edl < 1e-5, "lmhead bf16 dlogits: rel err %.3g", edl);
    double *rdx = malloc(sizeof(double) * N * C), *rdW = malloc(sizeof(double) * V * C);
    ref_gemm(rdx, 0, 0, N, C, V, dlo, V, l.W, C);   // dx = dl W
    ref_gemm(rdW, 1, 0, V, C, N, dlo, V, l.x, C);   // dW = dl^T x
    double edx = err_rel_max(l.dx, rdx, (size_t)N * C), edW = err_rel_max(l.dW, rdW, (size_t)V * C);
    CHECK(edx < 1e-5 && edW < 1e-5, "lmhead bf16 dx %.3g dW %.3g rel err", edx, edW);
    free(dlo);
    printf("  lmhead bf16 N=%d C=%d V=%d chunk=%d vblock=%d: logits %.1e loss %.1e/%.1e dlogits %.1e dx %.1e dW %.1e\n", N, C, V, l.chunk, vblock, e, ece,
           ez, edl, edx, edW);
    free(lg), free(dl), free(rdx), free(rdW);
    lm_free(&l);
}

// AMX: the chunk size changes no bit (chunk boundaries fall on k-tiles); the emulated
// engine sums dW chunk by chunk as the fp32 path does, so there only threads are checked.
// Neither engine depends on the thread count.
static void test_lmhead_splits(void) {
    const int N = 200, C = 48, V = 333;
    const int amx = strcmp(matmul_bf16_engine(), "emulated") != 0;   // a packed engine (AMX, AVX512_BF16)
    LM a = lm_make(N, C, V, 224), b = lm_make(N, C, V, 64);
    memcpy(b.x, a.x, sizeof(float) * N * C), memcpy(b.W, a.W, sizeof(float) * V * C);
    bf16_lmhead_vblock = 64;   // 6 vocab blocks, the last partial
    bf16_lmhead_chunk = 224;
    lm_run(&a);
    bf16_lmhead_chunk = 64;
    lm_run(&b);
    if (amx) {
        int same = !memcmp(a.dx, b.dx, sizeof(float) * N * C) && !memcmp(a.dW, b.dW, sizeof(float) * V * C) &&
                   !memcmp(a.logits, b.logits, sizeof(float) * N * V) && a.sums.ce_sum == b.sums.ce_sum;
        CHECK(same, "lmhead bf16: chunks of 64 differ from one chunk of 224");
    }
    float *dx0 = malloc(sizeof(float) * N * C), *dW0 = malloc(sizeof(float) * V * C);
    memcpy(dx0, b.dx, sizeof(float) * N * C), memcpy(dW0, b.dW, sizeof(float) * V * C);
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        lm_run(&b);
        CHECK(!memcmp(dx0, b.dx, sizeof(float) * N * C) && !memcmp(dW0, b.dW, sizeof(float) * V * C),
              "lmhead bf16: %d threads differ", th);
    }
    omp_set_num_threads(2);
    bf16_lmhead_vblock = 0, bf16_lmhead_chunk = 0;
    printf("  lmhead bf16 %s1/2/3 threads: bitwise identical\n", amx ? "one chunk of 224 vs chunks of 64, " : "");
    free(dx0), free(dW0);
    lm_free(&a), lm_free(&b);
}

// matmul_forward/_backward under PRECISION_BF16 give the gemm_bf16 products, at 1/2/3 threads
static void test_matmul_mode(void) {
    const int N = 96, C = 80, OC = 112;
    float *x = frand((size_t)N * C), *W = frand((size_t)OC * C), *dy = frand((size_t)N * OC);
    float *y[3], *dx[3], *dW[3];
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        y[th - 1] = malloc(sizeof(float) * N * OC), dx[th - 1] = malloc(sizeof(float) * N * C);
        dW[th - 1] = malloc(sizeof(float) * OC * C);
        matmul_forward(y[th - 1], x, W, N, C, OC, PRECISION_BF16, g_ws);
        matmul_backward(dx[th - 1], dW[th - 1], dy, x, W, N, C, OC, 0, 0, PRECISION_BF16, g_ws);
    }
    omp_set_num_threads(2);
    double *r = malloc(sizeof(double) * OC * C * 4);
    ref_gemm(r, 0, 1, N, OC, C, x, C, W, C);
    double e1 = err_rel_max(y[0], r, (size_t)N * OC);
    ref_gemm(r, 0, 0, N, C, OC, dy, OC, W, C);
    double e2 = err_rel_max(dx[0], r, (size_t)N * C);
    ref_gemm(r, 1, 0, OC, C, N, dy, OC, x, C);
    double e3 = err_rel_max(dW[0], r, (size_t)OC * C);
    CHECK(e1 < 1e-5 && e2 < 1e-5 && e3 < 1e-5, "matmul bf16 mode: fwd %.3g dinp %.3g dW %.3g", e1, e2, e3);
    for (int t = 1; t < 3; t++)
        CHECK(!memcmp(y[0], y[t], sizeof(float) * N * OC) && !memcmp(dx[0], dx[t], sizeof(float) * N * C) &&
                  !memcmp(dW[0], dW[t], sizeof(float) * OC * C),
              "matmul bf16 mode: %d threads differ from 1", t + 1);
    printf("  matmul bf16 mode: fwd %.1e dinp %.1e dW %.1e, 1/2/3 threads bitwise\n", e1, e2, e3);
}

// --dump DIR: inputs and outputs for tests/test_bf16_torch.py (the PyTorch side):
// round.f32 (values incl. ties) -> round.u16; x (N, C), W (OC, C), dy (N, OC) ->
// y = x W^T, dx = dy W, dW = dy^T x under PRECISION_BF16. Raw little-endian arrays.
static void dump(const char *dir) {
    char p[4096];
    const int N = 40, C = 72, OC = 50, R = 1 << 16;
    float *v = frand(R);
    for (int i = 0; i < R; i += 4) {   // every 4th value an exact tie between two bf16
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&v[i], &u, 4);
    }
    for (int i = 1; i < R; i += 8) v[i] *= 1e30f;   // and large magnitudes
    uint16_t *h = malloc(2 * R);
    for (int i = 0; i < R; i++) h[i] = bf16_round(v[i]);
    float *x = frand((size_t)N * C), *W = frand((size_t)OC * C), *dy = frand((size_t)N * OC);
    float *y = malloc(4 * N * OC), *dx = malloc(4 * N * C), *dW = malloc(4 * OC * C);
    matmul_bf16_init();
    matmul_forward(y, x, W, N, C, OC, PRECISION_BF16, g_ws);
    matmul_backward(dx, dW, dy, x, W, N, C, OC, 0, 0, PRECISION_BF16, g_ws);
    struct { const char *name; const void *p; size_t bytes; } f[] = {
        {"round.f32", v, 4 * R}, {"round.u16", h, 2 * R}, {"x.f32", x, 4 * N * C}, {"W.f32", W, 4 * OC * C},
        {"dy.f32", dy, 4 * N * OC}, {"y.f32", y, 4 * N * OC}, {"dx.f32", dx, 4 * N * C}, {"dW.f32", dW, 4 * OC * C}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, f[i].name);
        FILE *fp = fopen(p, "wb");
        if (!fp || fwrite(f[i].p, 1, f[i].bytes, fp) != f[i].bytes || fclose(fp)) {
            fprintf(stderr, "test_bf16: cannot write %s\n", p);
            exit(1);
        }
    }
    printf("N=%d C=%d OC=%d R=%d engine=%s\n", N, C, OC, R, matmul_bf16_engine());
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    g_ws = bf16_work_create();
    if (argc == 3 && !strcmp(argv[1], "--dump")) {
        dump(argv[2]);
        return 0;
    }
    printf("bf16 engine: %s\n", matmul_bf16_engine());
    matmul_bf16_init();
    if (argc == 2 && !strcmp(argv[1], "exp-all")) {   // the exhaustive exp check alone
        test_exp16(1);
        return failures != 0;
    }
    test_round();
    test_exp16(97);
    int shapes[][3] = {{16, 16, 32}, {32, 32, 64}, {48, 80, 96}, {17, 33, 45}, {1, 5, 3}, {100, 7, 300}, {64, 256, 4100},
                      {200, 400, 2100}};  // 66 k-tiles: 3 L2 groups of 3 m blocks, the last short
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int at = 0; at < 2; at++)
            for (int bt = 0; bt < 2; bt++)
                for (int acc = 0; acc < 2; acc++) test_gemm(at, bt, shapes[s][0], shapes[s][1], shapes[s][2], acc, 0);
    for (int at = 0; at < 2; at++)
        for (int bt = 0; bt < 2; bt++) test_gemm(at, bt, 37, 50, 70, 1, 5);
    matmul_bf16_init();
    test_matmul_mode();
    test_pack_both(301, 64);
    test_pack_both(70, 48);
    test_pack_both(64, 96);
    test_lmhead_single(70, 64, 301, 96, 0);
    test_lmhead_single(70, 64, 301, 32, 96);   // chunks of 32, vocab blocks of 96 (last: 13)
    test_lmhead_single(32, 96, 1024, 32, 0);
    test_lmhead_single(100, 48, 20, 64, 0);    // V < 32
    test_lmhead_splits();
    // Run everything again on every other engine this CPU has (a child process each: the
    // engine is chosen once per process), the default process choosing them.
    if (!getenv("OLMO_BF16_ENGINE")) {
        unsigned a, b, c, d;
        int avx512 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
        const char *others[] = {"avx512bf16", "emulated"};
        for (int i = 0; i < 2; i++) {
            if (!strcmp(others[i], matmul_bf16_engine()) || (i == 0 && !avx512)) continue;
            char cmd[4200];
            snprintf(cmd, sizeof cmd, "OLMO_BF16_ENGINE=%s %s", others[i], argv[0]);
            printf("-- again with OLMO_BF16_ENGINE=%s:\n", others[i]);
            fflush(stdout);
            CHECK(system(cmd) == 0, "the %s engine failed (output above)", others[i]);
        }
    }
    printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures != 0;
}
