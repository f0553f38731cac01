// alarm.h: the memorization alarm (docs/olmo3.md s.7): training loss is not evidence of a
// better model. Fed once per held-out evaluation with the smoothed training loss and the
// in-domain held-out CE, it flags a run whose training loss keeps falling while held-out
// loss does not follow (data repeated by a loader bug, a too-small corpus, a replaying
// resume). Thresholds and logic: docs/report.md.
//
// Use (the trainer, after each eval):
//     MemoAlarm a; memo_alarm_init(&a, 3, 0.05, 0.25);            // once
//     char why[256];
//     if (memo_alarm_update(&a, step, mean_train_loss_since_last_eval, heldout_ce, why, sizeof why))
//         write {"kind":"alarm","alarm":"memorization","step":..,"why":why, a.train_drop, ...}
#ifndef OLMO_ALARM_H
#define OLMO_ALARM_H

#include <stddef.h>

#define MEMO_ALARM_MAX_K 64

typedef struct {
    // Settings.
    int k;          // evaluations in the window (>= 2): the first and last are compared
    double drop;    // minimum fall of the training loss over the window (nats)
    double ratio;   // held-out CE must fall by at least ratio * (train fall), or the alarm fires
    // History: the last k accepted evaluations, oldest first.
    int n;
    long step[MEMO_ALARM_MAX_K];
    double train[MEMO_ALARM_MAX_K], heldout[MEMO_ALARM_MAX_K];
    // The numbers of the latest update (valid once n == k), for the alarm record.
    double train_drop;      // train[first] - train[last]
    double heldout_drop;    // heldout[first] - heldout[last] (negative: held-out rose)
    double gap_first, gap_last;  // heldout - train at the window's ends
    long window_start;      // step of the window's first evaluation
    int fired;              // 1 when the latest update fired
    long times_fired;       // updates that fired so far
} MemoAlarm;

// k < 2 or > MEMO_ALARM_MAX_K, drop <= 0 or ratio outside [0, 1) are clamped to the
// defaults (3, 0.05, 0.25); the recipe layer validates user values before this.
void memo_alarm_init(MemoAlarm *a, int k, double drop, double ratio);
// Feed one evaluation. A non-finite train_loss or heldout_ce (e.g. the eval before the
// first training step, where there is no training loss yet) is ignored. Returns 1 when the
// alarm fires at this evaluation, with a one-line reason (numbers) in why (may be NULL);
// 0 otherwise (why gets "" or a short status). Fires at every evaluation where the
// condition holds, so a persistent problem keeps being reported.
int memo_alarm_update(MemoAlarm *a, long step, double train_loss, double heldout_ce, char *why, size_t whylen);

#endif
