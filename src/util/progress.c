// progress.c: the progress bar of progress.h.
#include <stdio.h>

#include "util/common.h"
#include "util/progress.h"

void progress_draw(Progress *p, int final) {
    if (!p->bar) return;
    double now = now_seconds(), dt = now - p->t0;
    if (!final && now - p->last_draw < 0.25) return;
    p->last_draw = now;
    int w = 30, fill = p->total ? (int)((double)w * (double)p->done / (double)p->total) : w;
    fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.2f / %.2f GB  %.2f GB/s", fill, "##############################", w - fill, "",
            p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, (double)p->done / 1e9, (double)p->total / 1e9,
            dt > 0 ? (double)p->done / dt / 1e9 : 0.0);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}
