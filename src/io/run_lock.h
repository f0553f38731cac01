// run_lock.h: one `olmo train` per run directory, as a lease its holder renews.
// RUN_DIR/.lock holds the holder's pid, host, start time and lease ("pid P host H started T
// lease L"); it is created exclusively (O_EXCL) before the run writes anything there and
// removed when the run ends. While the run lives a thread of the holder renews the lease
// (the file's modification time) every L/4 seconds. Another run on the same directory:
//  - holder on this host: refused while its pid lives; a dead pid's lock (SIGKILL, an MPI
//    abort) is taken over at once, with a message;
//  - holder on another host (its pid cannot be checked from here): taken over with a message
//    once the lease has expired (not renewed for L seconds, measured on the filesystem's own
//    clock: the modification time of a file written now); while it may still be live the
//    new run watches it for up to L seconds and is refused as soon as it is renewed;
//  - a lock without a lease (written before leases): refused as before, saying how to remove it.
// The holder that finds its lock taken over (it was frozen past its lease) is told by
// run_lock_lost() and must stop without writing more. L is OLMO_RUN_LEASE (seconds, default
// 60; docs/cluster.md).
#ifndef OLMO_RUN_LOCK_H
#define OLMO_RUN_LOCK_H

#include <stddef.h>

// 0: this process holds the lock (msg: "" or what it took over); -1: held by another run, not
// creatable, or OLMO_RUN_LEASE not a number of seconds (msg says which, naming the file or
// the variable).
int run_lock_acquire(const char *run_dir, char *msg, size_t msglen);
// Stop renewing and remove the lock if this process holds it (also run at exit).
void run_lock_release(void);
// 1 once the renewing thread found the lock no longer ours (another run took it over).
int run_lock_lost(void);

#endif
