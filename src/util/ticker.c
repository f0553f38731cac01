// ticker.c: see ticker.h.
#include "util/ticker.h"

#include <time.h>

static void *run(void *p) {
    Ticker *t = p;
    pthread_mutex_lock(&t->mu);
    int first = t->now;   // tick before the first wait
    while (!t->stop) {
        if (!first) {
            struct timespec ts;   // the condition variable's clock: CLOCK_REALTIME
            clock_gettime(CLOCK_REALTIME, &ts);
            long ns = ts.tv_nsec + (long)((t->period - (long)t->period) * 1e9);
            ts.tv_sec += (time_t)t->period + ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            if (t->stop) break;
        }
        first = 0;
        if (t->tick(t->arg)) break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int ticker_start(Ticker *t, double period, int now, int (*tick)(void *), void *arg) {
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->period = period, t->tick = tick, t->arg = arg, t->stop = 0;
    t->now = now, t->running = 1;
    if (pthread_create(&t->thread, NULL, run, t) != 0) {
        t->running = 0;
        return -1;
    }
    return 0;
}

void ticker_stop(Ticker *t) {
    if (!t->running) return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    t->running = 0;
}
