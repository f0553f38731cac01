// bench_bf16_parts.c: the packed bf16 matmul's parts timed apart on one shape after
// another (scripts/bench_bf16_parts.sh builds and runs it): packing A, packing B, and
// bf16_gemm in its own block order and in each of the two forced ones (bf16_gemm_order).
// C (M, N) = op(A) op(B), op(A) (M, K) stored (K, M) when at, op(B) (K, N) stored (N, K)
// when bt: matmul_forward is at 0 bt 1, its dinp at 0 bt 0, its dW at 1 bt 0. Best of 10
// runs each (the GEMM after one untimed call), all threads (OMP_NUM_THREADS). Needs a CPU with a packed engine (amx or
// avx512bf16).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/bf16.h"
#include "kernels/kernels.h"
#include "util/blas_core.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    matmul_bf16_init();
    if (!bf16_packed()) {
        fprintf(stderr, "bench_bf16_parts: engine %s has no packed layouts\n", matmul_bf16_engine());
        return 2;
    }
    // the step shapes of olmo bench's config (b) (2048 tokens a micro-batch): fwd, dinp, dW
    // of qkv, mlp up/gate, mlp down, then the LM head's blocks
    static const int def[][5] = {{2048, 1536, 512, 0, 1}, {2048, 512, 1536, 0, 0}, {1536, 512, 2048, 1, 0},
                                 {2048, 3072, 512, 0, 1}, {2048, 512, 3072, 0, 0}, {3072, 512, 2048, 1, 0},
                                 {2048, 512, 1536, 0, 1}, {2048, 1536, 512, 0, 0}, {512, 1536, 2048, 1, 0},
                                 {512, 512, 512, 0, 1}, {512, 512, 512, 0, 0}};
    const int nuser = (argc - 1) / 5, n = nuser ? nuser : (int)(sizeof def / sizeof def[0]);
    printf("engine %s; ms, best of 10: pack A, pack B, gemm in its own order (n- or m-blocks fastest), "
           "forced n-fast, forced m-fast\n", matmul_bf16_engine());
    for (int s = 0; s < n; s++) {
        int sh[5];
        for (int i = 0; i < 5; i++) sh[i] = nuser ? atoi(argv[1 + 5 * s + i]) : def[s][i];
        const int M = sh[0], N = sh[1], K = sh[2], at = sh[3], bt = sh[4], kbt = bf16_ktiles(K);
        float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 13) * 0.1f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 7) * 0.1f;
        uint16_t *pa = aligned_alloc(64, 2 * bf16_packed_a_size(M, kbt)), *pb = aligned_alloc(64, 2 * bf16_packed_b_size(N, kbt));
        double t[5] = {1e9, 1e9, 1e9, 1e9, 1e9};
        for (int r = 0; r < 10; r++) {
            double t0 = now();
            bf16_pack_a(pa, kbt, 0, A, at ? M : K, at, M, K);
            double t1 = now();
            bf16_pack_b(pb, kbt, 0, B, bt ? K : N, bt, K, N);
            double t2 = now();
            t[0] = t1 - t0 < t[0] ? t1 - t0 : t[0];
            t[1] = t2 - t1 < t[1] ? t2 - t1 : t[1];
            bf16_gemm(C, N, 0, pa, kbt, pb, kbt, M, N, K, 0);   // warm (caches, AMX's power-up): not timed
            for (int o = 0; o < 3; o++) {
                bf16_gemm_order = o;
                double g0 = now();
                bf16_gemm(C, N, 0, pa, kbt, pb, kbt, M, N, K, 0);
                double g = now() - g0;
                t[2 + o] = g < t[2 + o] ? g : t[2 + o];
            }
            bf16_gemm_order = 0;
        }
        const double gf = 2.0 * M * N * K / 1e9;
        printf("M %5d N %5d K %5d at %d bt %d | pack A %6.3f  pack B %6.3f | gemm %6.3f (%4.0f GFLOP/s), n-fast %6.3f, "
               "m-fast %6.3f\n", M, N, K, at, bt, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, gf / t[2], t[3] * 1e3, t[4] * 1e3);
        free(A), free(B), free(C), free(pa), free(pb);
    }
    return 0;
}
