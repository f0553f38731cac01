// norm.c: RMSNorm forward/backward (also used for QK-norm over a slice of fused QKV rows).
// Row statistics accumulate in double so the fp32 result is as close to exact as fp32 allows,
// in lanes.h's eight lanes: the order is the source's, so the loops vectorize and give the
// same bits at any vector width.
#include <math.h>

#include <omp.h>

#include "kernels/cpu/lanes.h"
#include "kernels/kernels.h"

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w, int N, int C,
                     int in_stride, int out_stride, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * in_stride;
        float *o = out + (size_t)n * out_stride;
        double ss = dot8(x, NULL, C);
        float r = (float)(1.0 / sqrt(ss / C + eps));
        rstd[n] = r;
        for (int c = 0; c < C; c++) o[c] = w[c] * (x[c] * r);
    }
}

void rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w,
                      const float *rstd, int N, int C, int dout_stride, int in_stride, int din_stride) {
    // dx = r * (w*dy - xhat * mean(w*dy*xhat)), xhat = x*r
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * in_stride, *dy = dout + (size_t)n * dout_stride;
        float *dx = dinp + (size_t)n * din_stride;
        float r = rstd[n];
        double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};   // dot8's lanes (lanes.h) over (w dy) * xhat
        int c = 0;
        for (; c + 8 <= C; c += 8)
            for (int j = 0; j < 8; j++) l[j] += (double)(w[c + j] * dy[c + j]) * (x[c + j] * r);
        for (int j = 0; c < C; c++, j++) l[j] += (double)(w[c] * dy[c]) * (x[c] * r);
        const double dot = lanes8_total(l);
        float m = (float)(dot / C);
        for (c = 0; c < C; c++) dx[c] = r * (w[c] * dy[c] - (x[c] * r) * m);
    }
    // dw[c] = sum_n dy[n,c] * xhat[n,c]: threads split columns; each column sums rows in
    // order, so the result does not depend on the thread count.
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        if (c1 > c0) {
            double acc[256];
            for (int cb = c0; cb < c1; cb += 256) {
                int ce = cb + 256 < c1 ? cb + 256 : c1;
                for (int c = cb; c < ce; c++) acc[c - cb] = 0.0;
                for (int n = 0; n < N; n++) {
                    const float *x = inp + (size_t)n * in_stride, *dy = dout + (size_t)n * dout_stride;
                    float r = rstd[n];
                    for (int c = cb; c < ce; c++) acc[c - cb] += (double)dy[c] * (x[c] * r);
                }
                for (int c = cb; c < ce; c++) dw[c] = (float)acc[c - cb];
            }
        }
    }
}
