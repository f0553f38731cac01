// history.h: a run directory's recipe history. Every recipe a run trained under is kept as
// RUN_DIR/recipes/step-NNNNNNNN.yml, named by the step it took effect after (0 = from the
// start; 10 = steps 11, 12, ... ran under it), and marked in metrics.jsonl by a record
//   {"kind":"recipe","step":10,"file":"recipes/step-00000010.yml","changes":["optim.lr: 0.003 -> 0.001"]}
// RUN_DIR/recipe.yml is always the newest one. `olmo train` writes it (history_begin);
// `olmo report` and `olmo compare` list the segments (history_read). docs/checkpoints.md.
#ifndef OLMO_HISTORY_H
#define OLMO_HISTORY_H

#include <stddef.h>

#include "train/metrics.h"

// Start a segment at `step` under the resolved recipe `yaml` (rank 0, after the resume
// guard passed). recipes/step-N.yml with N > step belong to steps being trained again
// (resume from an older checkpoint) and are removed. A new file and record are written
// when the newest kept recipe differs from `yaml`, and always when `fresh` (a new
// metrics.jsonl). changes: the resume guard's lines (may be NULL / 0).
void history_begin(const char *run_dir, long step, const char *yaml, int fresh, const char *const *changes,
                   int nchanges, MetricsLog *log);

typedef struct {
    long step;          // took effect after this step
    char file[128];     // relative to the run directory
    char *changes;      // "optim.lr: 0.003 -> 0.001; train.max_steps: 40 -> 45", "" for the first (malloc'd)
} HistorySegment;

// The segments recorded in RUN_DIR/metrics.jsonl, oldest first (a later record at the
// same or an earlier step replaces those it overlaps, as a resumed run's records do).
// Returns the count (0 for a run from before the history was kept); free with history_free.
int history_read(const char *run_dir, const char *who, HistorySegment **out);
void history_free(HistorySegment *s, int n);
// One segment as text: "from the start: recipes/step-00000000.yml" or "after step 6:
// recipes/step-00000006.yml: optim.lr: 0.003 -> 0.001" (report, compare).
void history_line(const HistorySegment *h, char *buf, size_t n);

#endif
