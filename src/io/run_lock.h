// run_lock.h: one `olmo train` per run directory. RUN_DIR/.lock holds the holder's pid, host
// and start time; it is created exclusively (O_EXCL) before the run writes anything there and
// removed when the run ends. A second run on the same directory is refused naming the
// holder; a lock whose pid is dead on this host (a run killed with SIGKILL, an MPI abort) is
// taken over with a message. A lock from another host cannot be checked: it is refused, and
// the message says how to remove it.
#ifndef OLMO_RUN_LOCK_H
#define OLMO_RUN_LOCK_H

#include <stddef.h>

// 0: this process holds the lock (msg: "" or what it took over); -1: held by another run, or
// not creatable (msg says which, naming the file).
int run_lock_acquire(const char *run_dir, char *msg, size_t msglen);
// Remove the lock if this process holds it (also run at exit).
void run_lock_release(void);

#endif
