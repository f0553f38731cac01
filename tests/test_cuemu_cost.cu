// test_cuemu_cost.cu: the emulation's counted cost model (tests/cuemu/cost.cpp) checked on
// kernels whose shared-memory conflicts and global sectors are known by construction, and
// (with the argument `table`) the model's figures for the attention kernels at OLMo 3 7B's
// head shapes, which scripts/gpu_cost_model.sh prints.
// Checks (one warp, one instruction each; wavefronts exact):
//   4-byte loads at word stride 1 -> 1 wavefront; stride 2 -> 2; stride 32 -> 32 (32-way);
//   all lanes one word -> 1 (broadcast); 8-byte loads, consecutive -> 2 (two half-warps),
//   at a 128-byte stride -> 32 (16-way in each half); 16-byte loads, consecutive -> 4 (four
//   quarter-warps), at a 32-byte stride -> 8 (2-way); a WMMA bf16 tile at ldm 128 -> 32
//   (8-way: every row at the same banks), at ldm 136 -> 4; an fp32 accumulator store (four
//   8-byte instructions) at ldm 64 -> 32 (4-way), at ldm 72 -> 8; global 4-byte loads, consecutive -> 4 sectors,
//   at a 32-byte stride -> 32; one mma_sync -> 1 mma.
// table [T [W]]: the attention ops forward and backward (bf16, tensor cores) at head dim
// 128, B = 1, one query and one kv head, T (default 1024) tokens, causal, then (given W)
// with a W-token window; one table each. scripts/gpu_cost_model.sh scales them to the 7B
// (T 8192, 32 heads, window 4096 = T / 2).
// Emulation only: under a real nvcc this prints SKIP (the cost model is the emulation's;
// a GPU measures with ncu, scripts/gpu-check.sh).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "util/blas_core.h"
}
#include "check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.cuh"

#ifdef OLMO_CUEMU
#include <mma.h>

#include "cuemu_cost.h"
using namespace nvcuda;

__global__ void k_ld4(float *out, int stride) {
    __shared__ float s[32 * 32];
    for (int i = threadIdx.x; i < 32 * 32; i += 32) s[i] = (float)i;
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x * stride) % (32 * 32)];
}
__global__ void k_ld8(float *out, int stride_words) {
    __shared__ __align__(16) float s[32 * 64];
    for (int i = threadIdx.x; i < 32 * 64; i += 32) s[i] = (float)i;
    __syncthreads();
    ((float2 *)out)[threadIdx.x] = *(const float2 *)&s[threadIdx.x * stride_words];   // one 8-byte copy
}
__global__ void k_ld16(float *out, int stride_words) {
    __shared__ __align__(16) float s[32 * 64];
    for (int i = threadIdx.x; i < 32 * 64; i += 32) s[i] = (float)i;
    __syncthreads();
    ((float4 *)out)[threadIdx.x] = *(const float4 *)&s[threadIdx.x * stride_words];   // one 16-byte copy
}
__global__ void k_gld(float *out, const float *in, int stride) { out[threadIdx.x] = in[threadIdx.x * stride]; }
__global__ void k_wmma(float *out, int ldm) {
    __shared__ __align__(32) bf16 a[16 * 136];
    __shared__ __align__(32) float c[16 * 72];
    for (int i = threadIdx.x; i < 16 * 136; i += 32) a[i] = __float2bfloat16(1.0f);
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, ldm);
    wmma::load_matrix_sync(fb, a, ldm);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, ldm == 136 ? 72 : 64, wmma::mem_row_major);
    __syncthreads();
    out[threadIdx.x] = c[threadIdx.x];
}

// The counted figures of the one kernel launched since the last reset (name prefix).
static cuemu::cost::Stats counted(const char *name) {
    cuemu::cost::Stats s;
    CHECK(cuemu::cost::lookup(name, &s), "cost model: no launch of %s counted", name);
    cuemu::cost::reset();
    return s;
}
// wavefronts of the counted kernel minus its setup (the fills and the global store: a
// run at a conflict-free stride of the same kernel measured them)
static void expect_wf(const char *what, unsigned long long got, unsigned long long base, unsigned long long want) {
    const unsigned long long wf = got - base;
    printf("%-58s -> %llu wavefront(s) (want %llu)\n", what, wf, want);
    CHECK(wf == want, "cost model: %s: %llu wavefronts, want %llu", what, wf, want);
}

static void counter_checks(float *x, float *y) {
    using cuemu::cost::Stats;
    cuemu::cost::enable(true);
    cuemu::cost::reset();
    // the fill loop: 32 iterations of one conflict-free 4-byte store per lane = 32 wavefronts
    k_ld4<<<1, 32>>>(x, 1);
    Stats s = counted("k_ld4");
    const unsigned long long fill32 = 32;
    expect_wf("4-byte loads, word stride 1", s.smem_wavefronts, fill32, 1);
    k_ld4<<<1, 32>>>(x, 2);
    expect_wf("4-byte loads, word stride 2 (2-way)", counted("k_ld4").smem_wavefronts, fill32, 2);
    k_ld4<<<1, 32>>>(x, 32);
    s = counted("k_ld4");
    expect_wf("4-byte loads, word stride 32 (32-way)", s.smem_wavefronts, fill32, 32);
    CHECK(s.smem_ideal == fill32 + 1, "cost model: stride 32: ideal %llu, want %llu", s.smem_ideal, fill32 + 1);
    k_ld4<<<1, 32>>>(x, 0);
    expect_wf("4-byte loads, one word (broadcast)", counted("k_ld4").smem_wavefronts, fill32, 1);
    const unsigned long long fill64 = 64;   // 64 conflict-free 4-byte store rounds
    k_ld8<<<1, 32>>>(x, 2);
    expect_wf("8-byte loads, consecutive (2 half-warps)", counted("k_ld8").smem_wavefronts, fill64, 2);
    k_ld8<<<1, 32>>>(x, 32);
    expect_wf("8-byte loads, 128-byte stride (16-way per half)", counted("k_ld8").smem_wavefronts, fill64, 32);
    k_ld16<<<1, 32>>>(x, 4);
    expect_wf("16-byte loads, consecutive (4 quarter-warps)", counted("k_ld16").smem_wavefronts, fill64, 4);
    k_ld16<<<1, 32>>>(x, 8);
    expect_wf("16-byte loads, 32-byte stride (2-way)", counted("k_ld16").smem_wavefronts, fill64, 8);
    // WMMA: fills 16*136 bf16 = 68 rounds of 2-byte stores (2 lanes per word: 1 wavefront
    // each), the final read 1; A and B loads each 4 ideal; the store 2 ideal
    k_wmma<<<1, 32>>>(x, 136);
    s = counted("k_wmma");
    const unsigned long long wbase = 68 + 1;
    expect_wf("WMMA bf16 A+B loads at ldm 136, fp32 store at ldm 72", s.smem_wavefronts, wbase, 4 + 4 + 8);
    CHECK(s.mma == 1, "cost model: %llu mma, want 1", s.mma);
    k_wmma<<<1, 32>>>(x, 128);
    expect_wf("WMMA bf16 A+B loads at ldm 128 (8-way), store at ldm 64 (4-way)", counted("k_wmma").smem_wavefronts, wbase,
              32 + 32 + 32);
    k_gld<<<1, 32>>>(x, y, 1);
    s = counted("k_gld");
    printf("%-58s -> %llu load sector(s) (want 4)\n", "global 4-byte loads, consecutive", s.gld_sectors);
    CHECK(s.gld_sectors == 4 && s.gst_sectors == 4, "cost model: coalesced: %llu/%llu sectors, want 4/4", s.gld_sectors,
          s.gst_sectors);
    k_gld<<<1, 32>>>(x, y, 8);
    s = counted("k_gld");
    printf("%-58s -> %llu load sector(s) (want 32)\n", "global 4-byte loads, 32-byte stride", s.gld_sectors);
    CHECK(s.gld_sectors == 32, "cost model: strided: %llu sectors, want 32", s.gld_sectors);
    cuemu::cost::enable(false);
}

static void *dalloc(size_t bytes) {
    void *p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}

// The attention ops at head dim 128 (bf16, WMMA) with T tokens, one head; the table.
static void table(int T, int W) {
    const int D = 128;
    std::vector<bf16> h((size_t)T * D);
    unsigned long long s = 12345;
    for (auto &e : h) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        e = __float2bfloat16((float)((s >> 40) % 2001) / 1000.0f - 1.0f);
    }
    const size_t n = (size_t)T * D * sizeof(bf16);
    bf16 *q = (bf16 *)dalloc(n), *k = (bf16 *)dalloc(n), *v = (bf16 *)dalloc(n), *o = (bf16 *)dalloc(n),
         *dout = (bf16 *)dalloc(n), *dq = (bf16 *)dalloc(n), *dk = (bf16 *)dalloc(n), *dv = (bf16 *)dalloc(n);
    float *lse = (float *)dalloc((size_t)T * 4), *Di = (float *)dalloc((size_t)T * 4);
    void *ds = dalloc(cuda_attn_ds_bytes(1, T, 1, 1));
    for (bf16 *p : {q, k, v, dout}) CUDA_CHECK(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice));
    const int windows[2] = {T, W};
    for (int wi = 0; wi < (W > 0 ? 2 : 1); wi++) {
        cuemu::cost::enable(true);
        cuemu::cost::reset();
        attention_forward_cuda_dt(0, o, lse, q, k, v, DT_BF16, 1, T, 1, 1, D, windows[wi], nullptr);
        attention_backward_cuda_dt(0, dq, dk, dv, Di, ds, dout, q, k, v, o, lse, DT_BF16, 1, T, 1, 1, D, windows[wi], nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        printf("== attention, bf16 WMMA, B 1, T %d, heads 1/1, D %d, window %d\n", T, D, windows[wi]);
        cuemu::cost::report(stdout);
        cuemu::cost::enable(false);
    }
}
#endif

int main(int argc, char **argv) {
    blas_core_init(argv);
#ifndef OLMO_CUEMU
    (void)argc;
    printf("SKIP: the cost model is the emulation's (tests/cuemu); on a GPU, ncu measures\n");
    return 0;
#else
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "table")) {
        const int T = argc > 2 ? atoi(argv[2]) : 1024, W = argc > 3 ? atoi(argv[3]) : 0;
        if (T < 64 || T > 65536 || (argc > 3 && (W < 1 || W > T))) {
            fprintf(stderr, "test_cuemu_cost: table T [W]: want 64 <= T <= 65536 and 1 <= W <= T (got %s %s)\n",
                    argc > 2 ? argv[2] : "", argc > 3 ? argv[3] : "");
            return 2;
        }
        table(T, W);
        return 0;
    }
    float *x = (float *)dalloc(1 << 16), *y = (float *)dalloc(1 << 16);
    counter_checks(x, y);
    cudaFree(x);
    cudaFree(y);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cuemu_cost: all checks passed\n");
    return 0;
#endif
}
