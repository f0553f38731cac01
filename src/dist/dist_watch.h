// dist_watch.h: olmo.c's own deadline on its MPI collectives (OLMO_DIST_TIMEOUT), so that a
// lost node or link ends the job with a message instead of every rank spinning forever.
// Each rank runs one thread that (a) writes a heartbeat file, RUN_DIR/.alive/rank-R.ID ("host H
// seq S wait WHAT"; ID: this run's, from rank 0, so that what an earlier run left there, or a
// process of a dead job still writes, is never taken for this run's; rank 0 clears the old
// files at start), every timeout/8 seconds (0.25 to 10 s) and (b) watches the collective
// this rank is in (dist.c brackets every blocking MPI call with dist_watch_enter/leave).
// When one has waited longer than the timeout, the thread reads every rank's heartbeat:
//  - a heartbeat not renewed for 4 periods: that rank (or its host) is gone: the message names
//    it and its host, and this rank exits 1 (after the grace below);
//  - every other rank alive and itself waiting in a collective: nothing can progress (the
//    network between hosts is cut): the message names the ranks on other hosts and their
//    hosts, and this rank exits 1;
//  - some rank alive and busy outside any collective (a long evaluation or write): it is only
//    slow; a note naming it, and the wait goes on.
// Every rank decides alone, so no rank is left spinning. A rank that stops waits min(timeout,
// 30) s before it exits, for the launcher to end the job in order (dist_watch.c: leave). RUN_DIR must be shared (checked at
// start: train/run_dir.c). OLMO_DIST_TIMEOUT: seconds, default 600, 0 = off.
#ifndef OLMO_DIST_WATCH_H
#define OLMO_DIST_WATCH_H

// Start the heartbeat and the watch (W > 1 under MPI; no-op otherwise or with the timeout
// 0). 0, or -1 with msg naming OLMO_DIST_TIMEOUT when it is not a number of seconds.
int dist_watch_start(const char *run_dir, int rank, int world, char *msg, unsigned long msglen);
// Stop the thread and remove this rank's heartbeat (also at exit; idempotent).
void dist_watch_stop(void);
// Around a blocking collective (main thread): what it is, for the message.
void dist_watch_enter(const char *what);
void dist_watch_leave(void);

#endif
