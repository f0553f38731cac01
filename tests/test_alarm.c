// test_alarm.c: the memorization alarm (src/eval/alarm.h) on synthetic series: a clean run
// (train and held-out fall together) never fires; memorizing runs (train falls, held-out
// flat or rising) fire with the right numbers; noisy-but-healthy runs do not; the window,
// NaN handling and argument clamping behave as documented.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/alarm.h"
#include "util/blas_core.h"

#include "check.h"

// Deterministic uniform noise in [-1, 1).
static double noise(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (double)(*s >> 8) / (double)(1u << 23) - 1.0;
}

// Feed n evaluations (train[i], held[i]) at steps 100*(i+1); returns how many fired and the
// index of the first firing (-1 if none).
static int feed(MemoAlarm *a, const double *train, const double *held, int n, int *first) {
    int fires = 0;
    *first = -1;
    char why[512];
    for (int i = 0; i < n; i++) {
        if (memo_alarm_update(a, 100L * (i + 1), train[i], held[i], why, sizeof why)) {
            if (*first < 0) *first = i;
            fires++;
            CHECK(strstr(why, "training loss fell") != NULL, "why text: %s", why);
        }
    }
    return fires;
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    enum { N = 40 };
    double tr[N], he[N];
    int first;
    MemoAlarm a;

    // 1. Clean run: both fall like a power law, held-out a constant 0.1 above train.
    for (int i = 0; i < N; i++) {
        tr[i] = 2.0 + 8.0 / sqrt(i + 1.0);
        he[i] = tr[i] + 0.1;
    }
    memo_alarm_init(&a, 3, 0.05, 0.25);
    CHECK(feed(&a, tr, he, N, &first) == 0, "clean run fired at eval %d", first);

    // 1b. Clean run where held-out falls a bit slower (gap grows slowly, as in a healthy
    // run approaching its data's entropy): held-out follows half the training fall.
    for (int i = 0; i < N; i++) {
        tr[i] = 2.0 + 8.0 / sqrt(i + 1.0);
        he[i] = 2.5 + 4.0 / sqrt(i + 1.0);
    }
    memo_alarm_init(&a, 3, 0.05, 0.25);
    CHECK(feed(&a, tr, he, N, &first) == 0, "half-following held-out fired at eval %d", first);

    // 2. Memorizing run: both fall together for 10 evals, then train keeps falling 0.05
    // per eval while held-out is flat.
    for (int i = 0; i < N; i++) {
        tr[i] = 5.0 - 0.05 * i;
        he[i] = i < 10 ? tr[i] + 0.1 : tr[9] + 0.1;
    }
    memo_alarm_init(&a, 3, 0.05, 0.25);
    int fires = feed(&a, tr, he, N, &first);
    // The window of 3 evals ending at eval 11 is the first fully past the turn (9, 10, 11):
    // train fell 0.10 > 0.05, held-out 0, gap 0.1 -> 0.15 -> 0.2.
    CHECK(first == 11, "memorizing run: first fire at eval %d, want 11", first);
    CHECK(fires == N - 11, "memorizing run: fired %d times, want %d (every eval after the turn)", fires, N - 11);
    CHECK(a.fired == 1 && a.times_fired == fires, "state: fired %d times_fired %ld", a.fired, a.times_fired);
    CHECK(fabs(a.train_drop - 0.10) < 1e-9, "train_drop %g", a.train_drop);
    CHECK(fabs(a.heldout_drop) < 1e-9, "heldout_drop %g", a.heldout_drop);
    CHECK(a.gap_last > a.gap_first, "gap %g -> %g", a.gap_first, a.gap_last);
    CHECK(a.window_start == 100L * (N - 2), "window_start %ld", a.window_start);

    // 3. Memorizing run with rising held-out (the s.7 double-sharding signature).
    for (int i = 0; i < N; i++) {
        tr[i] = 4.0 - 0.03 * i;
        he[i] = 4.2 + 0.01 * i;
    }
    memo_alarm_init(&a, 3, 0.05, 0.25);
    fires = feed(&a, tr, he, N, &first);
    CHECK(first == 2, "rising held-out: first fire at eval %d, want 2", first);
    CHECK(a.heldout_drop < 0, "rising held-out: heldout_drop %g should be negative", a.heldout_drop);
    {
        char why[512];
        memo_alarm_init(&a, 3, 0.05, 0.25);
        for (int i = 0; i < 3; i++) memo_alarm_update(&a, i, tr[i], he[i], why, sizeof why);
        CHECK(strstr(why, "rose") != NULL, "why should say held-out rose: %s", why);
    }

    // 4. Noise: a flat-ish healthy run (both plateaued) with +-0.03 independent noise on
    // each curve never fires: the train fall over 3 evals rarely exceeds 0.05, and when it
    // does the gap does not grow at every eval.
    unsigned s = 12345;
    int noisy_fires = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < N; i++) {
            tr[i] = 3.0 - 0.002 * i + 0.02 * noise(&s);
            he[i] = 3.1 - 0.002 * i + 0.02 * noise(&s);
        }
        memo_alarm_init(&a, 3, 0.05, 0.25);
        noisy_fires += feed(&a, tr, he, N, &first);
    }
    CHECK(noisy_fires == 0, "noisy plateau fired %d times over 200 runs", noisy_fires);

    // 4b. Noisy but healthy falling run: both fall 0.04 per eval, held-out noise +-0.03.
    noisy_fires = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < N; i++) {
            tr[i] = 5.0 - 0.04 * i + 0.005 * noise(&s);
            he[i] = 5.1 - 0.04 * i + 0.03 * noise(&s);
        }
        memo_alarm_init(&a, 3, 0.05, 0.25);
        noisy_fires += feed(&a, tr, he, N, &first);
    }
    CHECK(noisy_fires == 0, "noisy healthy run fired %d times over 200 runs", noisy_fires);

    // 5. Non-finite values are ignored (the step-0 eval has no training loss yet) and do
    // not break the window.
    memo_alarm_init(&a, 3, 0.05, 0.25);
    char why[256];
    CHECK(memo_alarm_update(&a, 0, NAN, 5.0, why, sizeof why) == 0 && a.n == 0, "NaN train accepted");
    CHECK(memo_alarm_update(&a, 1, 4.0, INFINITY, why, sizeof why) == 0 && a.n == 0, "inf held-out accepted");
    memo_alarm_update(&a, 100, 4.0, 4.1, NULL, 0);
    memo_alarm_update(&a, 200, 3.9, 4.1, NULL, 0);
    CHECK(memo_alarm_update(&a, 300, 3.8, 4.1, why, sizeof why) == 1, "3-eval memorization window did not fire");

    // 6. A larger k needs a longer divergence: with k = 5 the turn of case 2 fires later.
    for (int i = 0; i < N; i++) {
        tr[i] = 5.0 - 0.05 * i;
        he[i] = i < 10 ? tr[i] + 0.1 : tr[9] + 0.1;
    }
    memo_alarm_init(&a, 5, 0.05, 0.25);
    feed(&a, tr, he, N, &first);
    CHECK(first == 13, "k=5: first fire at eval %d, want 13", first);

    // 7. Bad settings fall back to the defaults.
    memo_alarm_init(&a, 1, -1, 2.0);
    CHECK(a.k == 3 && a.drop == 0.05 && a.ratio == 0.25, "clamp: k %d drop %g ratio %g", a.k, a.drop, a.ratio);
    memo_alarm_init(&a, MEMO_ALARM_MAX_K + 1, 0.1, 0.5);
    CHECK(a.k == 3 && a.drop == 0.1 && a.ratio == 0.5, "clamp k: %d", a.k);

    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    printf("test_alarm: ok\n");
    return 0;
}
