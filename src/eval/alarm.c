// alarm.c: the memorization alarm (see alarm.h, docs/report.md).
//
// Over a window of the last k evaluations (first = oldest, last = newest) it fires when
//   1. the training loss fell:      D_train = train[first] - train[last] > drop
//   2. held-out did not follow:     D_held  = held[first]  - held[last]  < ratio * D_train
//                                   (a rising held-out CE has D_held < 0 and qualifies)
//   3. the gap grew at every eval:  gap[i] = held[i] - train[i] is strictly increasing
//                                   across the window.
// 1 and 2 already imply gap[last] - gap[first] > (1 - ratio) * drop > 0; condition 3 asks
// for it at every step of the window, which is what separates a steady divergence from
// held-out noise (a noisy held-out curve makes the gap go up and down).
#include "eval/alarm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void memo_alarm_init(MemoAlarm *a, int k, double drop, double ratio) {
    memset(a, 0, sizeof *a);
    a->k = (k >= 2 && k <= MEMO_ALARM_MAX_K) ? k : 3;
    a->drop = drop > 0 ? drop : 0.05;
    a->ratio = (ratio >= 0 && ratio < 1) ? ratio : 0.25;
}

int memo_alarm_update(MemoAlarm *a, long step, double train_loss, double heldout_ce, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    a->fired = 0;
    if (!isfinite(train_loss) || !isfinite(heldout_ce)) return 0;
    // Append, dropping the oldest when the window is full.
    if (a->n == a->k) {
        memmove(a->step, a->step + 1, sizeof(long) * (size_t)(a->k - 1));
        memmove(a->train, a->train + 1, sizeof(double) * (size_t)(a->k - 1));
        memmove(a->heldout, a->heldout + 1, sizeof(double) * (size_t)(a->k - 1));
        a->n--;
    }
    a->step[a->n] = step;
    a->train[a->n] = train_loss;
    a->heldout[a->n] = heldout_ce;
    a->n++;
    if (a->n < a->k) return 0;

    int f = 0, l = a->k - 1;
    a->window_start = a->step[f];
    a->train_drop = a->train[f] - a->train[l];
    a->heldout_drop = a->heldout[f] - a->heldout[l];
    a->gap_first = a->heldout[f] - a->train[f];
    a->gap_last = a->heldout[l] - a->train[l];
    int gap_grows = 1;
    for (int i = 1; i < a->k; i++)
        if (!(a->heldout[i] - a->train[i] > a->heldout[i - 1] - a->train[i - 1])) gap_grows = 0;
    int fire = a->train_drop > a->drop && a->heldout_drop < a->ratio * a->train_drop && gap_grows;
    if (!fire) return 0;
    a->fired = 1;
    a->times_fired++;
    if (why && whylen)
        snprintf(why, whylen,
                 "steps %ld..%ld: training loss fell %.4f nats (%.4f -> %.4f) but held-out CE %s %.4f "
                 "(%.4f -> %.4f; needs a fall of >= %.4f = %.2f x the training fall); train/held-out gap "
                 "grew at each of the last %d evals (%.4f -> %.4f)",
                 a->window_start, step, a->train_drop, a->train[f], a->train[l],
                 a->heldout_drop >= 0 ? "fell only" : "rose", fabs(a->heldout_drop), a->heldout[f], a->heldout[l],
                 a->ratio * a->train_drop, a->ratio, a->k, a->gap_first, a->gap_last);
    return 1;
}
