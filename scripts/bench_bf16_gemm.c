// bench_bf16_gemm.c: olmo.c's matmul against oneDNN's, side by side on the model's shapes
// (issue 22), built and run by scripts/bench_bf16_gemm.sh. Not part of the product: oneDNN
// (Debian libdnnl-dev) is needed only here.
//
// Per shape (M tokens; W: N x K, the nn.Linear weight), out (M, N) = x (M, K) @ W^T:
//   olmo.c   matmul_forward under the run's precision and bf16 engine (OLMO_BF16_ENGINE),
//            fp32 operands in, packing/rounding included as in training;
//   oneDNN   a matmul primitive, bf16 src/weights (converted beforehand, not timed) and fp32
//            dst -- or all fp32 with --fp32 -- on the ISA DNNL_MAX_CPU_ISA allows; its
//            implementation name is printed.
// For a packed bf16 engine also "GEMM alone": bf16_gemm on operands packed beforehand, the
// like of oneDNN's untimed conversion. Both: the best of 5 runs after one warm-up, GFLOP/s = 2 M N K / s. Then determinism:
// each library's output at 1 thread against 2 threads, bitwise (olmo.c by construction;
// oneDNN's is what this checks), and the two outputs' largest relative difference.
// --insn: the instruction ceilings instead, one thread: register-only loops of 24
// independent accumulators, VDPBF16PS zmm (64 FLOP each) and VFMADD231PS zmm (32 FLOP each),
// the best of 3 runs of 1e8 instructions -- on Intel a VDPBF16PS issues at half the FMA rate.
// Usage: bench_bf16_gemm [--fp32] [M N K ...]   (default: the shapes below) | --insn
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "kernels/cpu/bf16.h"
#include "kernels/kernels.h"
#include "util/blas_core.h"
#include "util/common.h"

#define CK(x)                                                                       \
    do {                                                                            \
        dnnl_status_t st_ = (x);                                                    \
        if (st_ != dnnl_success) {                                                  \
            fprintf(stderr, "oneDNN: %s failed (status %d)\n", #x, (int)st_);      \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t s;
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c;
    const char *impl;
} Dnnl;

// A matmul primitive (M, K) x (K, N) -> (M, N); B given as W (N, K) row-major (tag ba).
static void dnnl_make(Dnnl *d, int M, int N, int K, int fp32, void *a, void *b, float *c) {
    CK(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    CK(dnnl_stream_create(&d->s, d->eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t a_md, b_md, c_md;
    dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    const dnnl_data_type_t t = fp32 ? dnnl_f32 : dnnl_bf16;
    CK(dnnl_memory_desc_init_by_tag(&a_md, 2, ad, t, dnnl_ab));
    CK(dnnl_memory_desc_init_by_tag(&b_md, 2, bd, t, dnnl_ba));
    CK(dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_f32, dnnl_ab));
    dnnl_matmul_desc_t md;
    CK(dnnl_matmul_desc_init(&md, &a_md, &b_md, NULL, &c_md));
    dnnl_primitive_desc_t pd;
    CK(dnnl_primitive_desc_create(&pd, &md, NULL, d->eng, NULL));
    CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &d->impl));
    CK(dnnl_primitive_create(&d->p, pd));
    CK(dnnl_memory_create(&d->a, &a_md, d->eng, a));
    CK(dnnl_memory_create(&d->b, &b_md, d->eng, b));
    CK(dnnl_memory_create(&d->c, &c_md, d->eng, c));
}
static void dnnl_run(Dnnl *d) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, d->a}, {DNNL_ARG_WEIGHTS, d->b}, {DNNL_ARG_DST, d->c}};
    CK(dnnl_primitive_execute(d->p, d->s, 3, args));
    CK(dnnl_stream_wait(d->s));
}

static double best_gflops(int M, int N, int K, void (*f)(void *), void *ctx) {
    f(ctx);
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
        f(ctx);
        double g = 2.0 * M * (double)N * K / (now_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}

typedef struct { float *out; const float *x, *W; int M, N, K; Precision prec; Bf16Work *ws; } Ours;
static void ours_run(void *p) {
    Ours *o = p;
    matmul_forward(o->out, o->x, o->W, o->M, o->K, o->N, o->prec, o->ws);
}
static void dnnl_run_v(void *p) { dnnl_run(p); }
// bf16 engines: the GEMM alone on operands packed beforehand (as oneDNN gets bf16 inputs)
typedef struct { float *out; const uint16_t *pa, *pb; int M, N, K; } Packed;
static void packed_run(void *p) {
    Packed *q = p;
    bf16_gemm(q->out, q->N, 0, q->pa, bf16_ktiles(q->K), q->pb, bf16_ktiles(q->K), q->M, q->N, q->K, 0);
}

__attribute__((target("avx512f,avx512bf16"))) static void insn(void) {
    double best[2] = {0, 0};
    for (int rep = 0; rep < 3; rep++) {
        const long n = 100000000 / 24;
        __m512 acc[24];
        for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
        __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = a;
        double t0 = now_seconds();
        for (long k = 0; k < n; k++) {
#pragma GCC unroll 24
            for (int i = 0; i < 24; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
            __asm__ volatile("" : "+v"(a));   // keeps the loop from being folded
        }
        double g = n * 24 * 64.0 / (now_seconds() - t0) / 1e9;
        __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f), f[24];
        for (int i = 0; i < 24; i++) f[i] = acc[i];
        t0 = now_seconds();
        for (long k = 0; k < n; k++) {
#pragma GCC unroll 24
            for (int i = 0; i < 24; i++) f[i] = _mm512_fmadd_ps(f[i], x, y);
            __asm__ volatile("" : "+v"(x));
        }
        double h = n * 24 * 32.0 / (now_seconds() - t0) / 1e9;
        float sink = 0;
        for (int i = 0; i < 24; i++) sink += _mm512_reduce_add_ps(f[i]);
        if (sink == 12345.0f) printf(" ");
        if (g > best[0]) best[0] = g;
        if (h > best[1]) best[1] = h;
    }
    printf("one core: VDPBF16PS zmm %.1f GFLOP/s, VFMADD231PS zmm %.1f GFLOP/s (bf16 / fp32 = %.2f)\n", best[0], best[1],
           best[0] / best[1]);
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    if (argc > 1 && !strcmp(argv[1], "--insn")) {
        insn();
        return 0;
    }
    int fp32 = argc > 1 && !strcmp(argv[1], "--fp32");
    int def[][3] = {{2048, 768, 256}, {2048, 256, 768}, {2048, 100352, 256}, {2048, 2048, 2048}};
    int n = (argc - 1 - fp32) / 3, (*shapes)[3] = n ? malloc(sizeof(int[3]) * n) : def;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 3; j++) shapes[i][j] = atoi(argv[1 + fp32 + 3 * i + j]);
    if (!n) n = 4;
    if (!fp32) matmul_bf16_init();
    Bf16Work *ws = fp32 ? NULL : bf16_work_create();   // the bf16 operands' scratch (kernels.h)
    const int threads = omp_get_max_threads();
    printf("%s, %d threads: olmo.c %s vs oneDNN %s (DNNL_MAX_CPU_ISA=%s)\n", fp32 ? "fp32" : "bf16 operands, fp32 accumulation",
           threads, fp32 ? "sgemm (matmul.c)" : matmul_bf16_engine(), dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP ? "(OpenMP)" : "",
           getenv("DNNL_MAX_CPU_ISA") ? getenv("DNNL_MAX_CPU_ISA") : "unset");
    for (int s = 0; s < n; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *x = xmalloc_aligned(sizeof(float) * (size_t)M * K), *W = xmalloc_aligned(sizeof(float) * (size_t)N * K);
        float *c1 = xmalloc_aligned(sizeof(float) * (size_t)M * N), *c2 = xmalloc_aligned(sizeof(float) * (size_t)M * N);
        uint16_t *xb = xmalloc_aligned(2 * (size_t)M * K), *Wb = xmalloc_aligned(2 * (size_t)N * K);
        for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f, xb[i] = bf16_round(x[i]);
        for (size_t i = 0; i < (size_t)N * K; i++) W[i] = (float)((i * 40503u) % 2001) * 1e-3f - 1.0f, Wb[i] = bf16_round(W[i]);
        Ours o = {c1, x, W, M, N, K, fp32 ? PRECISION_FP32 : PRECISION_BF16, ws};
        Dnnl d;
        dnnl_make(&d, M, N, K, fp32, fp32 ? (void *)x : xb, fp32 ? (void *)W : Wb, c2);
        double g_ours = best_gflops(M, N, K, ours_run, &o), g_dnnl = best_gflops(M, N, K, dnnl_run_v, &d), g_packed = 0;
        if (!fp32 && strcmp(matmul_bf16_engine(), "emulated")) {
            const int kbt = bf16_ktiles(K);
            uint16_t *pa = xmalloc_aligned(2 * bf16_packed_a_size(M, kbt)), *pb = xmalloc_aligned(2 * bf16_packed_b_size(N, kbt));
            bf16_pack_a(pa, kbt, 0, x, K, 0, M, K);
            bf16_pack_b(pb, kbt, 0, W, K, 1, K, N);
            Packed q = {c1, pa, pb, M, N, K};
            g_packed = best_gflops(M, N, K, packed_run, &q);
            free(pa), free(pb);
        }
        // determinism: 1 thread vs `threads` (the outputs above), bitwise
        float *r1 = xmalloc_aligned(sizeof(float) * (size_t)M * N), *r2 = xmalloc_aligned(sizeof(float) * (size_t)M * N);
        memcpy(r1, c1, sizeof(float) * (size_t)M * N);
        memcpy(r2, c2, sizeof(float) * (size_t)M * N);
        omp_set_num_threads(1);
        ours_run(&o);
        Dnnl d1;
        dnnl_make(&d1, M, N, K, fp32, fp32 ? (void *)x : xb, fp32 ? (void *)W : Wb, c2);   // primitive made at 1 thread
        dnnl_run(&d1);
        omp_set_num_threads(threads);
        int same_ours = !memcmp(r1, c1, sizeof(float) * (size_t)M * N), same_dnnl = !memcmp(r2, c2, sizeof(float) * (size_t)M * N);
        double mx = 0, e = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) mx = fmax(mx, fabs(r2[i])), e = fmax(e, fabs(r1[i] - r2[i]));
        char pk[64] = "";
        if (g_packed > 0) snprintf(pk, sizeof pk, " (GEMM alone %.1f)", g_packed);
        printf("  M %5d N %6d K %5d | olmo.c %7.1f GFLOP/s%s | oneDNN %7.1f GFLOP/s (%s) | 1 vs %d threads bitwise: "
               "olmo.c %s, oneDNN %s | max diff %.1e rel\n",
               M, N, K, g_ours, pk, g_dnnl, d.impl, threads, same_ours ? "yes" : "NO", same_dnnl ? "yes" : "NO", e / mx);
        fflush(stdout);
        free(x), free(W), free(c1), free(c2), free(xb), free(Wb), free(r1), free(r2);
    }
    return 0;
}
