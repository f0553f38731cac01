// peak.c: see peak.h.
#include "train/peak.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "util/common.h"

char *openblas_get_corename(void);

// The best of `reps` runs of C (n, n) = A (n, n) @ B^T (n, n), fp32 sgemm or (bf16 != 0)
// matmul_forward under MATMUL_BF16; the precision in force before is restored.
static double calibrate(int n, int bf16, int reps) {
    float *a = xmalloc_aligned(sizeof(float) * (size_t)n * n), *b = xmalloc_aligned(sizeof(float) * (size_t)n * n),
          *c = xmalloc_aligned(sizeof(float) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
        b[i] = (float)((i * 40503u) % 1000) * 1e-3f;
    }
    MatmulPrecision was = matmul_get_precision();
    if (bf16) matmul_set_precision(MATMUL_BF16);
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_seconds();
        if (bf16) matmul_forward(c, a, b, n, n, n);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = now_seconds() - t0;
        double f = 2.0 * n * (double)n * n / dt;
        if (f > best) best = f;
    }
    matmul_set_precision(was);
    free(a);
    free(b);
    free(c);
    return best;
}

double peak_flops_calibrate(int n) { return calibrate(n, 0, 5); }
// The first bf16 run also grows the packing workspaces and probes AMX: one more rep.
double peak_flops_bf16_calibrate(int n) { return calibrate(n, 1, 8); }

// kind "" (fp32) or "bf16-ENGINE-"; keyed by host, BLAS kernel set and thread count: each
// changes the ceiling
static void cache_path(char *out, size_t len, const char *kind) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    const char *core = openblas_get_corename();
    if (xdg && *xdg)
        snprintf(out, len, "%s/olmo/peak-%s%s-%s-t%d.txt", xdg, kind, host, core, omp_get_max_threads());
    else
        snprintf(out, len, "%s/.cache/olmo/peak-%s%s-%s-t%d.txt", home ? home : "/tmp", kind, host, core,
                 omp_get_max_threads());
}

// The cached value of calibration `kind`, or measured now (n x n x n) and cached.
static double cached(const char *kind, int bf16, int n, const char **source) {
    char path[4096];
    cache_path(path, sizeof path, kind);
    FILE *f = fopen(path, "r");
    double v = 0;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = 0;
        fclose(f);
    }
    if (v > 0) {
        *source = bf16 ? "cached bf16 GEMM calibration" : "cached fp32 GEMM calibration";
        return v;
    }
    v = bf16 ? peak_flops_bf16_calibrate(n) : peak_flops_calibrate(n);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        mkdir_p(dir);
    }
    char buf[64];
    int len = snprintf(buf, sizeof buf, "%.6e\n", v);
    write_file_atomic(path, buf, (size_t)len);   // best effort: a read-only home only costs a re-measure
    *source = bf16 ? "bf16 GEMM calibration (measured now)" : "fp32 GEMM calibration (measured now)";
    return v;
}

double peak_flops(double recipe_peak, const char **source) {
    if (recipe_peak > 0) {
        *source = "recipe perf.peak_flops";
        return recipe_peak;
    }
    return cached("", 0, 2048, source);
}

double peak_flops_bf16(const char **source) {
    char kind[64];
    snprintf(kind, sizeof kind, "bf16-%s-", matmul_bf16_engine());
    return cached(kind, 1, 4096, source);
}
