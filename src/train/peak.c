// peak.c: see peak.h.
#include "train/peak.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

char *openblas_get_corename(void);

double peak_flops_calibrate(int n) {
    float *a = xmalloc_aligned(sizeof(float) * (size_t)n * n), *b = xmalloc_aligned(sizeof(float) * (size_t)n * n),
          *c = xmalloc_aligned(sizeof(float) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
        b[i] = (float)((i * 40503u) % 1000) * 1e-3f;
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = now_seconds() - t0;
        double f = 2.0 * n * (double)n * n / dt;
        if (f > best) best = f;
    }
    free(a);
    free(b);
    free(c);
    return best;
}

static void cache_path(char *out, size_t len) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    // keyed by host, BLAS kernel set and thread count: each changes the ceiling
    const char *core = openblas_get_corename();
    if (xdg && *xdg) snprintf(out, len, "%s/olmo/peak-%s-%s-t%d.txt", xdg, host, core, omp_get_max_threads());
    else snprintf(out, len, "%s/.cache/olmo/peak-%s-%s-t%d.txt", home ? home : "/tmp", host, core, omp_get_max_threads());
}

double peak_flops(double recipe_peak, const char **source) {
    if (recipe_peak > 0) {
        *source = "recipe perf.peak_flops";
        return recipe_peak;
    }
    char path[4096];
    cache_path(path, sizeof path);
    FILE *f = fopen(path, "r");
    double v = 0;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = 0;
        fclose(f);
    }
    if (v > 0) {
        *source = "cached fp32 GEMM calibration";
        return v;
    }
    v = peak_flops_calibrate(2048);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        mkdir_p(dir);
    }
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%.6e\n", v);
    write_file_atomic(path, buf, (size_t)n);   // best effort: a read-only home only costs a re-measure
    *source = "fp32 GEMM calibration (measured now)";
    return v;
}
