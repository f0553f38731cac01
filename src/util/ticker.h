// ticker.h: a thread that calls a function every `period` seconds until stopped, or until the
// function asks to end (the run lock's lease renewal, io/run_lock.c; the collectives'
// heartbeat and deadline, dist/dist_watch.c). Stopping wakes it at once.
#ifndef OLMO_TICKER_H
#define OLMO_TICKER_H

#include <pthread.h>

typedef struct {
    double period;
    int (*tick)(void *arg);   // 0: go on; non-zero: the thread ends
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int now, stop, running;   // running: set and read by the starting thread only
} Ticker;

// 0 with the thread started (its first tick after one period, unless `now`); -1 when it
// could not start.
int ticker_start(Ticker *t, double period, int now, int (*tick)(void *), void *arg);
// Wake it, wait for it to end (idempotent).
void ticker_stop(Ticker *t);

#endif
