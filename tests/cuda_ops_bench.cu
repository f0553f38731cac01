// cuda_ops_bench.cu: per-op-family device time of the CUDA backend's kernels at OLMo 3 7B
// shapes (micro-batch 1, T tokens, d 4096, 32 heads of 128, MLP 11008), bf16, timed with
// cudaEvents: each op once to warm up, then `reps` times (default 3), the mean in ms.
//   cuda_ops_bench [T=8192] [reps=3]
// One line per op: MEASURE <op> ms <mean> <what> (TFLOP/s of its matmul FLOPs, or GB/s of
// the bytes it must move), then the device memory in use at the peak (cudaMemGetInfo).
// The attention ops run at window T (a full layer) and 4096 (a sliding one), as
// scripts/gpu_cost_model.sh predicts them (scripts/gpu-check.sh prints both). Not a test
// (no pass/fail): the device check's measurement. Under the emulation (tests/cuemu) it
// runs at small T and its times are the CPU's, which checks only that it runs.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "util/blas_core.h"
}
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.cuh"

static void *dalloc(size_t bytes) {
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}
// bf16 values in [-1, 1] (a fixed LCG), so that softmax and exp see ordinary numbers
static bf16 *drand_bf16(size_t n, unsigned long long seed) {
    std::vector<bf16> h(n);
    for (auto &e : h) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        e = __float2bfloat16((float)((seed >> 40) % 2001) / 1000.0f - 1.0f);
    }
    bf16 *d = (bf16 *)dalloc(n * sizeof(bf16));
    CUDA_CHECK(cudaMemcpy(d, h.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
    return d;
}

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

static void line(const char *op, double ms, double flops, double bytes) {
    if (flops > 0) printf("MEASURE %-24s ms %9.3f  %8.1f TFLOP/s\n", op, ms, flops / (ms * 1e-3) / 1e12);
    else printf("MEASURE %-24s ms %9.3f  %8.1f GB/s\n", op, ms, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

// causal attention FLOPs of the visible (query, key) pairs: 4 D per pair forward (QK^T, PV)
static double attn_pairs(int T, int W) {
    double n = 0;
    for (int i = 0; i < T; i++) n += i + 1 < W ? i + 1 : W;
    return n;
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    int T = 8192, reps = 3;
    for (int a = 1; a < argc; a++) {
        if (!strncmp(argv[a], "T=", 2)) T = atoi(argv[a] + 2);
        else if (!strncmp(argv[a], "reps=", 5)) reps = atoi(argv[a] + 5);
        else {
            fprintf(stderr, "cuda_ops_bench: unknown argument %s (want T=N reps=N)\n", argv[a]);
            return 2;
        }
    }
    if (T < 64 || T % 64 || reps < 1) {
        fprintf(stderr, "cuda_ops_bench: T=%d reps=%d: want T a multiple of 64, reps >= 1\n", T, reps);
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
    printf("cuda_ops_bench: T %d, d %d, %d heads x %d, MLP %d, bf16, %d timed reps after 1 warm-up\n", T, C, H, D, F, reps);

    // ---- attention: forward and backward, full and sliding
    bf16 *q = drand_bf16(nq, 1), *k = drand_bf16(nq, 2), *v = drand_bf16(nq, 3), *dout = drand_bf16(nq, 4);
    bf16 *o = (bf16 *)dalloc(nq * 2), *dq = (bf16 *)dalloc(nq * 2), *dk = (bf16 *)dalloc(nq * 2), *dv = (bf16 *)dalloc(nq * 2);
    float *lse = (float *)dalloc(N * H * 4), *Di = (float *)dalloc(N * H * 4);
    void *ds = dalloc(cuda_attn_ds_bytes(1, T, H, H));
    for (int win : {T, W}) {
        if (win > T) continue;
        const double pairs = attn_pairs(T, win) * H;
        char name[64];
        snprintf(name, sizeof name, "attn_fwd_w%d", win);
        line(name, tm.time([&] { attention_forward_cuda_dt(0, o, lse, q, k, v, DT_BF16, 1, T, H, H, D, win, nullptr); }),
             pairs * 4 * D, 0);
        snprintf(name, sizeof name, "attn_bwd_w%d", win);
        // the backward's 5 tile matmuls (S, dP, dV, dK, dQ): 10 D FLOPs a visible pair
        line(name, tm.time([&] {
                 attention_backward_cuda_dt(0, dq, dk, dv, Di, ds, dout, q, k, v, o, lse, DT_BF16, 1, T, H, H, D, win, nullptr);
             }),
             pairs * 10 * D, 0);
    }

    // ---- norms, rope, swiglu: bytes they must move
    float *w = (float *)dalloc(C * 4), *rstd = (float *)dalloc(N * 4), *resid = (float *)dalloc(N * C * 4);
    bf16 *xn = (bf16 *)dalloc(N * C * 2);
    float *dw = (float *)dalloc(C * 4);
    double *part = (double *)dalloc((size_t)NORM_PARTS * C * 8);
    float *dres = (float *)dalloc(N * C * 4);
    line("rmsnorm_fwd", tm.time([&] {
             rmsnorm_forward_cuda(0, xn, DT_BF16, nullptr, rstd, resid, DT_F32, w, nullptr, (int)N, C, C, C, 1e-6f);
         }),
         0, N * C * (4.0 + 2.0));
    line("rmsnorm_bwd", tm.time([&] {
             rmsnorm_backward_cuda(0, dres, DT_F32, dw, 0, xn, DT_BF16, resid, DT_F32, w, rstd, (int)N, C, C, C, C, part);
         }),
         0, N * C * (2.0 + 4.0 + 4.0));
    float *cs = (float *)dalloc(N * D / 2 * 4), *sn = (float *)dalloc(N * D / 2 * 4);
    line("rope_q", tm.time([&] { rope_cuda(0, q, DT_BF16, cs, sn, 1, T, H, D, 1.0f); }), 0, nq * 2.0 * 2);
    bf16 *gu = drand_bf16(N * 2 * F, 5), *act = (bf16 *)dalloc(N * F * 2), *dgu = (bf16 *)dalloc(N * 2 * F * 2);
    line("swiglu_fwd", tm.time([&] { swiglu_forward_cuda(0, act, gu, DT_BF16, (int)N, F); }), 0, N * F * 2.0 * 3);
    line("swiglu_bwd", tm.time([&] { swiglu_backward_cuda(0, dgu, act, gu, DT_BF16, (int)N, F); }), 0, N * F * 2.0 * 5);

    // ---- matmuls (cuBLASLt): the qkv projection and the MLP's up projection, fwd + bwd
    CudaGemm g;
    LT_CHECK(cublasLtCreate(&g.lt));
    g.workspace = dalloc(CUDA_WORKSPACE_BYTES);
    g.st = 0;
    bf16 *Wqkv = drand_bf16((size_t)3 * C * C, 6), *Wup = drand_bf16((size_t)2 * F * C, 7);
    bf16 *qkv = (bf16 *)dalloc(N * 3 * C * 2), *dx = (bf16 *)dalloc(N * C * 2);
    float *dWqkv = (float *)dalloc((size_t)3 * C * C * 4), *dWup = (float *)dalloc((size_t)2 * F * C * 4);
    line("matmul_qkv_fwd", tm.time([&] { matmul_forward_cuda(&g, qkv, xn, Wqkv, DT_BF16, (int)N, C, 3 * C); }),
         2.0 * N * C * 3 * C, 0);
    line("matmul_qkv_bwd", tm.time([&] {
             matmul_backward_cuda(&g, dx, DT_BF16, dWqkv, qkv, xn, Wqkv, DT_BF16, (int)N, C, 3 * C, 0, 1);
         }),
         4.0 * N * C * 3 * C, 0);
    line("matmul_up_fwd", tm.time([&] { matmul_forward_cuda(&g, gu, xn, Wup, DT_BF16, (int)N, C, 2 * F); }),
         2.0 * N * C * 2 * F, 0);
    line("matmul_up_bwd", tm.time([&] {
             matmul_backward_cuda(&g, dx, DT_BF16, dWup, gu, xn, Wup, DT_BF16, (int)N, C, 2 * F, 0, 1);
         }),
         4.0 * N * C * 2 * F, 0);

    // ---- AdamW over one layer's parameters (fp32 p, m, v, g; bf16 copy); T / 8192 of them
    // below T = 8192 (the emulation's check)
    const size_t np = ((size_t)4 * C * C + (size_t)3 * C * F) / 8192 * T;
    float *p = (float *)dalloc(np * 4), *m = (float *)dalloc(np * 4), *vv = (float *)dalloc(np * 4), *gr = (float *)dalloc(np * 4);
    bf16 *pc = (bf16 *)dalloc(np * 2);
    line("adamw_layer", tm.time([&] { adamw_cuda(0, p, m, vv, gr, pc, DT_BF16, np, 0.9f, 0.95f, 1e-8f, 0.9999f, 1e-4f, 1.0f); }),
         0, np * (4.0 * 7 + 2));
    size_t free1 = 0;
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    printf("MEMORY in use %.2f GiB of %.2f GiB (this bench's buffers: %.2f GiB)\n", (total - free1) / 1073741824.0,
           total / 1073741824.0, (free0 - free1) / 1073741824.0);
    return 0;
}
