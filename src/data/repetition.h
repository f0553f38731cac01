// repetition.h: OLMo-core's instance filter (InstanceFilterConfig, used by the OLMo 3 32B
// recipes): an instance whose tokens hold a periodic run -- some period p in
// [min_period, max_period] repeated max_count times or more -- is masked out of the loss.
// The detection is OLMo-core's find_periodic_sequences (olmo_core/data/utils.py:642-718 at
// fa6c5014) step for step, so it finds exactly the runs it finds: the instance cut into
// rows of p tokens (the last row padded with a value no token has), rows equal to the row
// before them grouped when consecutive, each group widened by the equal tokens at the end of
// the row before it and the start of the row after it; times = the run's length / p, kept
// when > 2; max_period is capped at n / 3. tests/test_instance_filter.py checks it against a
// numpy port of that function.
#ifndef OLMO_REPETITION_H
#define OLMO_REPETITION_H

#include <stdint.h>

typedef struct {
    int min_period, max_period, max_count;   // OLMo-core's defaults: 1, 13, 32
} RepetitionFilter;

// The largest `times` of the runs find_periodic_sequences yields for tok[0..n) (0: none).
int repetition_max_times(const int32_t *tok, int n, int min_period, int max_period);
// 1 when the instance is filtered: a run with times >= f->max_count.
int repetition_filtered(const int32_t *tok, int n, const RepetitionFilter *f);

#endif
