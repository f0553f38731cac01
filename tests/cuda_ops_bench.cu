// cuda_ops_bench.cu: per-op-family device time of the CUDA backend's kernels at OLMo 3 7B
// shapes (micro-batch 1, T tokens, d 4096, 32 heads of 128, MLP 11008, V vocabulary rows),
// bf16, timed with cudaEvents: each op once to warm up, then `reps` times (default 3), the
// mean in ms.
//   cuda_ops_bench [T=8192] [reps=3] [V=100352] [hbm=3.35e12] [predict=docs/gpu_cost_model.txt] [only=attn]
// (only=attn: the attention ops alone, for ncu)
// Every input is random (a fixed LCG, values in [-1, 1]; norm weights in [0.5, 1.5]):
// tensor cores and memory systems run measurably faster on zeros, which would flatter the
// model. Every GEMM shape of the step (cuBLASLt, as ops_cuda.cu calls it): the qkv
// projection, the attention output, MLP up (gate + up) and down, each forward and backward
// (dX and dW, fp32 dW), and the LM head over the T tokens in chunks of CUDA_LM_CHUNK_MAX
// (forward GEMM to fp32 logits, the loss rows, the two backward GEMMs) as c_lmhead_loss.
// One line per op, measured beside the cost model's figure at once:
//   MEASURE <op> ms <mean> <rate> | PREDICT ms <model> <basis> x<measured/model>
// the model: GEMMs at 70% of 989.5 TFLOP/s (scripts/gpu_cost_model.sh's GEMM_EFF, PEAK),
// memory-bound kernels their bytes at 85% of hbm (bytes/s; gpu-check.sh passes the card's),
// attention the counted PREDICT lines of predict=FILE (docs/gpu_cost_model.txt, which are
// for T 8192: at another T none is printed). Then the device memory in use at the peak.
// Not a test (no pass/fail): the device check's measurement. Under the emulation
// (tests/cuemu) it runs at small T and V and its times are the CPU's, which checks only
// that it runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

extern "C" {
#include "util/blas_core.h"
}
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/sizes.h"

static const double PEAK = 989.5e12, GEMM_EFF = 0.70, HBM_EFF = 0.85;
static double g_hbm = 3.35e12;

static void *dalloc(size_t bytes) {   // outputs and scratch: zeroed, overwritten by the op
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}
static inline void put(bf16 &d, float x) { d = __float2bfloat16(x); }
static inline void put(float &d, float x) { d = x; }
// n values lo + (hi - lo) u, u uniform in [0, 1] from a fixed LCG, as T (bf16 or float),
// filled and uploaded 16M at a time
template <typename T> static T *drand(size_t n, unsigned long long seed, float lo = -1.0f, float hi = 1.0f) {
    T *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(T)));
    std::vector<T> h(std::min(n, (size_t)1 << 24));
    seed = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t at = 0; at < n; at += h.size()) {
        const size_t m = std::min(h.size(), n - at);
        for (size_t i = 0; i < m; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            put(h[i], lo + (hi - lo) * (float)((seed >> 40) % 65536) / 65535.0f);
        }
        CUDA_CHECK(cudaMemcpy(d + at, h.data(), m * sizeof(T), cudaMemcpyHostToDevice));
    }
    return d;
}
static bf16 *drand_bf16(size_t n, unsigned long long seed) { return drand<bf16>(n, seed); }

struct Timer {
    cudaEvent_t a, b;
    int reps;
    Timer(int r) : reps(r) {
        CUDA_CHECK(cudaEventCreate(&a));
        CUDA_CHECK(cudaEventCreate(&b));
    }
    // fn once (warm-up), then reps times between two events: the mean in ms
    template <typename F> double time(F fn) {
        fn();
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaEventRecord(a, 0));
        for (int i = 0; i < reps; i++) fn();
        CUDA_CHECK(cudaEventRecord(b, 0));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaGetLastError());
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        return ms / reps;
    }
};

// One MEASURE line: the rate (TFLOP/s of the matmul FLOPs, else GB/s of the bytes the op
// must move) and the model's time beside it: pred_ms > 0 as given (attention), else from
// flops (GEMM_EFF of PEAK) or bytes (HBM_EFF of hbm).
static void line(const char *op, double ms, double flops, double bytes, double pred_ms = 0, const char *basis = nullptr) {
    char rate[64], pred[128] = "";
    if (flops > 0) snprintf(rate, sizeof rate, "%8.1f TFLOP/s", flops / (ms * 1e-3) / 1e12);
    else snprintf(rate, sizeof rate, "%8.1f GB/s", bytes / (ms * 1e-3) / 1e9);
    if (pred_ms <= 0 && !basis) {
        pred_ms = flops > 0 ? flops / (PEAK * GEMM_EFF) * 1e3 : bytes / (g_hbm * HBM_EFF) * 1e3;
        basis = flops > 0 ? "gemm@70%" : "hbm@85%";
    }
    if (pred_ms > 0) snprintf(pred, sizeof pred, " | PREDICT ms %9.3f %-14s x%.2f", pred_ms, basis, ms / pred_ms);
    printf("MEASURE %-24s ms %9.3f  %s%s\n", op, ms, rate, pred);
    fflush(stdout);
}

// causal attention FLOPs of the visible (query, key) pairs: 4 D per pair forward (QK^T, PV)
static double attn_pairs(int T, int W) {
    double n = 0;
    for (int i = 0; i < T; i++) n += i + 1 < W ? i + 1 : W;
    return n;
}

// PREDICT attn_<kernel> <full|sliding> layer_ms X from the cost model's file (0: none)
static double predicted(const char *file, const char *kernel, const char *layer) {
    FILE *f = file ? fopen(file, "r") : nullptr;
    if (!f) return 0;
    char buf[512], k[64], l[64], u[64];
    double v = 0, x;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "PREDICT %63s %63s %63s %lf", k, l, u, &x) == 4 && !strcmp(k, kernel) && !strcmp(l, layer) &&
            !strcmp(u, "layer_ms"))
            v = x;
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    int T = 8192, reps = 3, V = 100352;
    const char *pfile = nullptr;
    int only_attn = 0;
    for (int a = 1; a < argc; a++) {
        if (!strncmp(argv[a], "T=", 2)) T = atoi(argv[a] + 2);
        else if (!strncmp(argv[a], "reps=", 5)) reps = atoi(argv[a] + 5);
        else if (!strncmp(argv[a], "V=", 2)) V = atoi(argv[a] + 2);
        else if (!strncmp(argv[a], "hbm=", 4)) g_hbm = atof(argv[a] + 4);
        else if (!strncmp(argv[a], "predict=", 8)) pfile = argv[a] + 8;
        else if (!strcmp(argv[a], "only=attn")) only_attn = 1;
        else {
            fprintf(stderr, "cuda_ops_bench: unknown argument %s (want T=N reps=N V=N hbm=BYTES_PER_S predict=FILE only=attn)\n", argv[a]);
            return 2;
        }
    }
    if (T < 64 || T % 64 || reps < 1 || V < 64 || V % 64 || !(g_hbm > 0)) {
        fprintf(stderr, "cuda_ops_bench: T=%d reps=%d V=%d hbm=%g: want T, V multiples of 64, reps >= 1, hbm > 0\n", T,
                reps, V, g_hbm);
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    const int C = 4096, H = 32, D = 128, F = 11008, W = 4096;
    const size_t N = (size_t)T, nq = N * H * D;
    Timer tm(reps);
    size_t free0 = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free0, &total));
    printf("cuda_ops_bench: T %d, d %d, %d heads x %d, MLP %d, vocab rows %d, bf16, random inputs, %d timed reps after 1 "
           "warm-up; model: GEMMs at %.0f%% of %.1f TFLOP/s, memory at %.0f%% of %.2f TB/s, attention from %s\n",
           T, C, H, D, F, V, reps, GEMM_EFF * 100, PEAK / 1e12, HBM_EFF * 100, g_hbm / 1e12,
           pfile && T == 8192 ? pfile : "(none: predict=FILE at T 8192)");

    // ---- attention: forward and backward, full and sliding
    bf16 *q = drand_bf16(nq, 1), *k = drand_bf16(nq, 2), *v = drand_bf16(nq, 3), *dout = drand_bf16(nq, 4);
    bf16 *o = (bf16 *)dalloc(nq * 2), *dq = (bf16 *)dalloc(nq * 2), *dk = (bf16 *)dalloc(nq * 2), *dv = (bf16 *)dalloc(nq * 2);
    float *lse = (float *)dalloc(N * H * 4), *Di = (float *)dalloc(N * H * 4);
    void *ds = dalloc(cuda_attn_ds_bytes(1, T, H, H));
    const char *pf = T == 8192 ? pfile : nullptr;
    for (int win : {T, W}) {
        if (win > T) continue;
        const char *layer = win == T ? "full" : "sliding";
        const double pairs = attn_pairs(T, win) * H;
        char name[64];
        snprintf(name, sizeof name, "attn_fwd_w%d", win);
        line(name, tm.time([&] { attention_forward_cuda_dt(0, o, lse, q, k, v, DT_BF16, 1, T, H, H, D, win, nullptr); }),
             pairs * 4 * D, 0, predicted(pf, "attn_fwd", layer), "counted");
        snprintf(name, sizeof name, "attn_bwd_w%d", win);
        // the backward's 5 tile matmuls (S, dP, dV, dK, dQ): 10 D FLOPs a visible pair; the
        // model's dK/dV + dQ (its Di pass not counted)
        line(name, tm.time([&] {
                 attention_backward_cuda_dt(0, dq, dk, dv, Di, ds, dout, q, k, v, o, lse, DT_BF16, 1, T, H, H, D, win, nullptr);
             }),
             pairs * 10 * D, 0, predicted(pf, "attn_dkdv", layer) + predicted(pf, "attn_dq", layer), "counted");
    }

    if (only_attn) return 0;

    // ---- norms, rope, swiglu: bytes they must move
    float *w = drand<float>(C, 11, 0.5f, 1.5f), *rstd = (float *)dalloc(N * 4), *resid = drand<float>(N * C, 12);
    bf16 *xn = drand_bf16(N * C, 13);
    float *dw = (float *)dalloc(C * 4);
    double *part = (double *)dalloc((size_t)NORM_PARTS * C * 8);
    float *dres = drand<float>(N * C, 14);
    line("rmsnorm_fwd", tm.time([&] {
             rmsnorm_forward_cuda(0, xn, DT_BF16, nullptr, rstd, resid, DT_F32, w, nullptr, (int)N, C, C, C, 1e-6f);
         }),
         0, N * C * (4.0 + 2.0));
    bf16 *dnorm = drand_bf16(N * C, 15);   // the norm's output gradient (xn is its forward output: random too)
    line("rmsnorm_bwd", tm.time([&] {
             rmsnorm_backward_cuda(0, dres, DT_F32, dw, 0, dnorm, DT_BF16, resid, DT_F32, w, rstd, (int)N, C, C, C, C, part);
         }),
         0, N * C * (2.0 + 4.0 + 4.0));
    float *cs = drand<float>(N * D / 2, 16), *sn = drand<float>(N * D / 2, 17);
    line("rope_q", tm.time([&] { rope_cuda(0, q, DT_BF16, cs, sn, 1, T, H, D, 1.0f); }), 0, nq * 2.0 * 2);
    bf16 *gu = drand_bf16(N * 2 * F, 5), *act = drand_bf16(N * F, 18), *dgu = (bf16 *)dalloc(N * 2 * F * 2);
    line("swiglu_fwd", tm.time([&] { swiglu_forward_cuda(0, act, gu, DT_BF16, (int)N, F); }), 0, N * F * 2.0 * 3);
    bf16 *dact = drand_bf16(N * F, 19);
    line("swiglu_bwd", tm.time([&] { swiglu_backward_cuda(0, dgu, dact, gu, DT_BF16, (int)N, F); }), 0, N * F * 2.0 * 5);

    // ---- matmuls (cuBLASLt), every shape of a block: forward out = x W^T; backward dX (bf16)
    // and dW (fp32, accumulated: beta 1 as every micro-batch after the first) from a random dY
    CudaGemm g;
    LT_CHECK(cublasLtCreate(&g.lt));
    g.workspace = dalloc(CUDA_WORKSPACE_BYTES);
    g.st = 0;
    struct Gemm {
        const char *name;
        int in, out;
    } gemms[] = {{"qkv", C, 3 * C}, {"attn_out", C, C}, {"mlp_up", C, 2 * F}, {"mlp_down", F, C}};
    size_t most = (size_t)2 * F;
    bf16 *X = drand_bf16(N * most, 20), *dY = drand_bf16(N * most, 21), *Y = (bf16 *)dalloc(N * most * 2);
    bf16 *dX = (bf16 *)dalloc(N * most * 2);
    for (const Gemm &m : gemms) {
        bf16 *Wt = drand_bf16((size_t)m.out * m.in, 22);
        float *dWt = (float *)dalloc((size_t)m.out * m.in * 4);
        char name[64];
        const double fl = 2.0 * N * m.in * m.out;
        snprintf(name, sizeof name, "matmul_%s_fwd", m.name);
        line(name, tm.time([&] { matmul_forward_cuda(&g, Y, X, Wt, DT_BF16, (int)N, m.in, m.out); }), fl, 0);
        snprintf(name, sizeof name, "matmul_%s_bwd", m.name);
        line(name, tm.time([&] { matmul_backward_cuda(&g, dX, DT_BF16, dWt, dY, X, Wt, DT_BF16, (int)N, m.in, m.out, 0, 1); }),
             2 * fl, 0);
        CUDA_CHECK(cudaFree(Wt));
        CUDA_CHECK(cudaFree(dWt));
    }

    // ---- the LM head as c_lmhead_loss runs it: chunks of CUDA_LM_CHUNK_MAX tokens, logits
    // (fp32) = W x, the loss rows (dlogits bf16), dX and dW (fp32, accumulated over chunks)
    {
        const int chunk = (int)std::min(N, (size_t)CUDA_LM_CHUNK_MAX);
        bf16 *Wh = drand_bf16((size_t)V * C, 23), *dlog = (bf16 *)dalloc((size_t)chunk * V * 2);
        float *dWh = (float *)dalloc((size_t)V * C * 4), *logits = (float *)dalloc((size_t)chunk * V * 4);
        int32_t *tg = nullptr;
        {
            std::vector<int32_t> h(N);
            for (size_t i = 0; i < N; i++) h[i] = (int32_t)((i * 2654435761u) % (unsigned)V);
            CUDA_CHECK(cudaMalloc(&tg, N * 4));
            CUDA_CHECK(cudaMemcpy(tg, h.data(), N * 4, cudaMemcpyHostToDevice));
        }
        double *rows = (double *)dalloc(N * 2 * 8);
        float *tok = (float *)dalloc(N * 4);
        const double fl = 2.0 * N * C * V;
        line("lmhead_fwd_gemm", tm.time([&] {
                 for (size_t n0 = 0; n0 < N; n0 += chunk)
                     gemm_cuda(&g, true, false, V, chunk, C, Wh, C, X + n0 * C, C, logits, V, 0.0f, DT_BF16, DT_F32);
             }),
             fl, 0);
        line("lmhead_rows", tm.time([&] {
                 for (size_t n0 = 0; n0 < N; n0 += chunk)
                     lmhead_rows_cuda(0, dlog, DT_BF16, logits, tg + n0, chunk, V, 1e-5f, 1.0f / N, 1, rows + n0,
                                      rows + N + n0, tok + n0);
             }),
             0, N * (double)V * (4.0 + 2.0));
        line("lmhead_bwd_gemm", tm.time([&] {
                 for (size_t n0 = 0; n0 < N; n0 += chunk)
                     matmul_backward_cuda(&g, dX + n0 * C, DT_BF16, dWh, dlog, X + n0 * C, Wh, DT_BF16, chunk, C, V, 0, 1);
             }),
             2 * fl, 0);
        CUDA_CHECK(cudaFree(Wh));
        CUDA_CHECK(cudaFree(dWh));
        CUDA_CHECK(cudaFree(dlog));
        CUDA_CHECK(cudaFree(logits));
    }

    // ---- AdamW over one layer's parameters (fp32 p, m, v, g; bf16 copy); T / 8192 of them
    // below T = 8192 (the emulation's check)
    const size_t np = ((size_t)4 * C * C + (size_t)3 * C * F) / 8192 * T;
    float *p = drand<float>(np, 31), *m = drand<float>(np, 32, -1e-3f, 1e-3f), *vv = drand<float>(np, 33, 0.0f, 1e-6f);
    float *gr = drand<float>(np, 34, -1e-3f, 1e-3f);
    bf16 *pc = (bf16 *)dalloc(np * 2);
    line("adamw_layer", tm.time([&] { adamw_cuda(0, p, m, vv, gr, pc, DT_BF16, np, 0.9f, 0.95f, 1e-8f, 0.9999f, 1e-4f, 1.0f); }),
         0, np * (4.0 * 7 + 2));
    size_t free1 = 0;
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    printf("MEMORY in use %.2f GiB of %.2f GiB (this bench's buffers: %.2f GiB)\n", (total - free1) / 1073741824.0,
           total / 1073741824.0, (free0 - free1) / 1073741824.0);
    return 0;
}
