// progress.h: a one-line progress bar on stderr for long byte-counted jobs (data verify,
// export-gguf): bar, percent, GB done / total, GB/s; redrawn at most 4 times a second.
#ifndef OLMO_PROGRESS_H
#define OLMO_PROGRESS_H

#include <stdint.h>

typedef struct {
    uint64_t total, done;   // bytes
    double t0, last_draw;   // now_seconds() at the start, at the last draw
    int bar;                // 0: draw nothing
} Progress;

// Redraw (final: unconditionally, then a newline).
void progress_draw(Progress *p, int final);

#endif
