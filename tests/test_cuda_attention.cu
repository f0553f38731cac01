// test_cuda_attention.cu: the CUDA attention kernels (src/kernels/cuda/attention.cu) forward
// and backward against the CPU's (kernels/cpu/attention.c), op by op, on the shapes where
// tiled kernels go wrong: T not a multiple of the 32- and 64-row tiles, window 1 (a row sees
// only itself), a window shorter and longer than a tile, GQA 2:1 and 4:1, head dims 16 to
// 128, the document mask with documents crossing tile edges, and every path: fp32 SIMT,
// bf16 SIMT (OLMO_CUDA_ATTN=simt) and bf16 tensor-core (WMMA).
// Measure: max |cuda - cpu| / max |cpu| per output (out, lse, dq, dk, dv). The CPU runs in
// fp32 on the same inputs (for bf16, the inputs rounded to bf16 first), so fp32 differs
// only by summation order: tolerance 1e-5. bf16 rounds its outputs (and P, dS in the
// tensor-core kernels) to 8 mantissa bits, 2^-9 = 2e-3 relative each: tolerance 1e-2.
// Built in CUDA builds only (real or emulated, tests/cuemu); without a device: SKIP, exit 0.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {
#include "util/blas_core.h"
#include "kernels/kernels.h"
#include "model/docmask.h"
}
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sizes.h"

static int failures;

struct Shape {
    int B, T, NH, NKV, D, window, docs;
};

static double rel_to_max(const std::vector<float> &a, const std::vector<float> &ref) {
    double mx = 0, d = 0;
    for (size_t i = 0; i < a.size(); i++) {
        mx = fmax(mx, fabs((double)ref[i]));
        double e = fabs((double)a[i] - ref[i]);
        if (!(e <= d)) d = isnan(e) ? INFINITY : e;
    }
    return mx > 0 ? d / mx : d;
}

// host-side conversions (common.cuh's tof/fromf are device functions)
template <typename T> static T fromf_host(float x);
template <> float fromf_host<float>(float x) { return x; }
template <> bf16 fromf_host<bf16>(float x) { return __float2bfloat16(x); }
static float tof_host(float x) { return x; }
static float tof_host(bf16 x) { return __bfloat162float(x); }

static float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

template <typename T> static T *to_device(const std::vector<float> &h) {
    std::vector<T> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = fromf_host<T>(h[i]);
    T *d = nullptr;
    CUDA_CHECK(cudaMalloc(&d, sizeof(T) * (h.size() ? h.size() : 1)));
    CUDA_CHECK(cudaMemcpy(d, t.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice));
    return d;
}
template <typename T> static std::vector<float> to_host(const T *d, size_t n) {
    std::vector<T> t(n);
    CUDA_CHECK(cudaMemcpy(t.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = tof_host(t[i]);
    return h;
}

template <typename T>
static void check(const Shape &s, const char *path) {
    const bool bf = sizeof(T) == 2;
    const size_t nq = (size_t)s.B * s.T * s.NH * s.D, nk = (size_t)s.B * s.T * s.NKV * s.D, nl = (size_t)s.B * s.NH * s.T;
    unsigned long long seed = 1234 + s.T * 7 + s.D;
    auto rnd = [&]() {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (float)((seed >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
    };
    std::vector<float> q(nq), k(nk), v(nk), dout(nq);
    for (auto &x : q) x = rnd() * 2.0f;   // scores of a few units: peaked and flat rows both
    for (auto &x : k) x = rnd() * 2.0f;
    for (auto &x : v) x = rnd();
    for (auto &x : dout) x = rnd();
    if (bf)
        for (auto *a : {&q, &k, &v, &dout})
            for (auto &x : *a) x = bf16_round(x);
    std::vector<int32_t> tok((size_t)s.B * s.T), docs((size_t)s.B * s.T);
    for (size_t i = 0; i < tok.size(); i++) tok[i] = (i * 37 + i / 11) % 23 == 0 ? 0 : 1;   // EOS = 0, irregular
    doc_starts_from_tokens(tok.data(), s.B, s.T, 0, docs.data());
    const int32_t *dh = s.docs ? docs.data() : nullptr;
    // CPU reference (fp32)
    std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.B, s.T, s.NH, s.NKV, s.D, s.window, dh, PRECISION_FP32);
    attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(),
                       s.B, s.T, s.NH, s.NKV, s.D, s.window, dh, PRECISION_FP32);
    // device
    T *qd = to_device<T>(q), *kd = to_device<T>(k), *vd = to_device<T>(v), *dod = to_device<T>(dout);
    T *od, *dqd, *dkd, *dvd;
    float *lsed, *Did;
    int32_t *docd = nullptr;
    CUDA_CHECK(cudaMalloc(&od, sizeof(T) * nq));
    CUDA_CHECK(cudaMalloc(&dqd, sizeof(T) * nq));
    CUDA_CHECK(cudaMalloc(&dkd, sizeof(T) * nk));
    CUDA_CHECK(cudaMalloc(&dvd, sizeof(T) * nk));
    CUDA_CHECK(cudaMalloc(&lsed, sizeof(float) * nl));
    CUDA_CHECK(cudaMalloc(&Did, sizeof(float) * nl));
    if (s.docs) {
        CUDA_CHECK(cudaMalloc(&docd, sizeof(int32_t) * docs.size()));
        CUDA_CHECK(cudaMemcpy(docd, docs.data(), sizeof(int32_t) * docs.size(), cudaMemcpyHostToDevice));
    }
    attention_forward_cuda<T>(od, lsed, qd, kd, vd, s.B, s.T, s.NH, s.NKV, s.D, s.window, docd, 0);
    // the backward from the CPU's output (bf16: rounded), so both see the same O
    std::vector<float> out_in = out;
    if (bf)
        for (auto &x : out_in) x = bf16_round(x);
    T *oin = to_device<T>(out_in);
    std::vector<float> lse_g = to_host(lsed, nl);
    // the dS scratch of one kv-head group where there are several: the bf16 backward then
    // runs a launch pair per group (what a budget-bound 7B shape does), else all at once
    const size_t dsb = cuda_attn_ds_bytes(s.B, s.T, s.NH, s.NKV) / s.NKV;
    void *dsd;
    CUDA_CHECK(cudaMalloc(&dsd, dsb));
    attention_backward_cuda<T>(dqd, dkd, dvd, Did, dsd, dsb, dod, qd, kd, vd, oin, lsed, s.B, s.T, s.NH, s.NKV, s.D, s.window, docd, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const double tol = bf ? 1e-2 : 1e-5;
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    const double e[5] = {rel_to_max(to_host(od, nq), out), rel_to_max(lse_g, lse), rel_to_max(to_host(dqd, nq), dq),
                         rel_to_max(to_host(dkd, nk), dk), rel_to_max(to_host(dvd, nk), dv)};
    printf("%-10s B %d T %3d heads %d/%d D %3d window %3d%s:", path, s.B, s.T, s.NH, s.NKV, s.D, s.window,
           s.docs ? " docs" : "     ");
    for (int i = 0; i < 5; i++) {
        printf(" %s %.2g", names[i], e[i]);
        if (!(e[i] <= tol)) {
            printf(" (FAIL > %g)", tol);
            failures++;
        }
    }
    printf("\n");
    for (void *p : {(void *)qd, (void *)kd, (void *)vd, (void *)dod, (void *)od, (void *)dqd, (void *)dkd, (void *)dvd,
                    (void *)lsed, (void *)Did, dsd, (void *)oin, (void *)docd})
        cudaFree(p);
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    const Shape shapes[] = {
        {2, 37, 4, 2, 16, 8, 0},      // T not a multiple of any tile, window < tile, GQA 2:1
        {1, 70, 2, 2, 64, 1, 0},      // window 1: each row sees only itself
        {1, 100, 4, 1, 32, 100, 1},   // full causal, GQA 4:1, document mask
        {1, 160, 2, 1, 128, 48, 1},   // head dim 128, window 48 (tile skipping), documents
        {2, 129, 2, 1, 16, 70, 0},    // one row past two 64-row tiles, window > tile
        {1, 150, 2, 1, 32, 66, 0},    // window = 2 mod 64 (and mod 32): the first visible key is
                                      // the last of a tile, so an off-by-one first tile skips it
        {1, 200, 2, 1, 64, 50, 0},    // window 50: query 64 (a tile's first) sees key 15 only of
                                      // keys 0-15 (a warp's 16), row 112 key 63
        {1, 130, 2, 1, 32, 2, 0},     // window 2: rows 64 and 128 see one key of the previous
                                      // key tile (half their weight): the per-warp tile skip's
                                      // bounds must be exact (with 50 keys a lost one hides
                                      // under the bf16 tolerance)
    };
    for (const Shape &s : shapes) {
        unsetenv("OLMO_CUDA_ATTN");
        check<float>(s, "fp32 simt");
        check<bf16>(s, "bf16 wmma");
        setenv("OLMO_CUDA_ATTN", "simt", 1);
        check<bf16>(s, "bf16 simt");
    }
    unsetenv("OLMO_CUDA_ATTN");
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_cuda_attention: all checks passed\n");
    return 0;
}
