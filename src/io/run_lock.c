// run_lock.c: see run_lock.h (the lock file, its lease and the thread that renews it).
#include "io/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/ticker.h"

#define LEASE_DEFAULT 60
#define LEASE_MAX 604800

// The lock this process holds: its file, its first line (what the renewer expects to find
// there), the lease, and the renewing thread.
static struct {
    char path[4200], line[512];
    int lease;
    Ticker renewer;
    atomic_int lost;
    atomic_llong seen_ms;   // monotonic ms when the file last held our line
} g;

// A lock file as read: its fields (lease 0 when the file predates leases), its first line and
// its modification time (the last renewal).
typedef struct {
    long pid;
    int lease;
    char host[256], when[64], line[512];
    double mtime;
} Holder;

static double mtime_of(const struct stat *st) { return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9; }

static double monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// 0 with h filled; -1 when the file is gone or unreadable.
static int read_holder(const char *path, Holder *h) {
    memset(h, 0, sizeof *h);
    h->pid = -1;
    snprintf(h->host, sizeof h->host, "?");
    snprintf(h->when, sizeof h->when, "?");
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0) h->mtime = mtime_of(&st);
    if (!fgets(h->line, sizeof h->line, f)) h->line[0] = 0;
    fclose(f);
    if (sscanf(h->line, "pid %ld host %255s started %63s lease %d", &h->pid, h->host, h->when, &h->lease) < 2) h->pid = -1;
    if (h->lease < 0) h->lease = 0;
    return 0;
}

// 0 when the file still holds our line (and when it was last seen so); 1 when it does not: the
// lock was taken over or removed, lost for good (the message printed once).
static int verify(void) {
    Holder h;
    const int gone_file = read_holder(g.path, &h) != 0;
    if (!gone_file && !strcmp(h.line, g.line)) {
        atomic_store(&g.seen_ms, (long long)(monotonic() * 1000));
        return 0;
    }
    if (atomic_exchange(&g.lost, 1)) return 1;
    h.line[strcspn(h.line, "\n")] = 0;
    fprintf(stderr, "olmo: error: the run lock %s is no longer this run's (%s%s%s): another run took it over after "
                    "this one missed its lease of %d s, or it was removed; stopping without writing more\n",
            g.path, gone_file ? "it is gone" : "it now reads \"", gone_file ? "" : h.line, gone_file ? "" : "\"",
            g.lease);
    return 1;
}

// The renewing thread's tick (every lease/4 seconds): still ours? then the modification time
// set to now.
static int renew(void *arg) {
    (void)arg;
    if (verify()) return 1;
    utimensat(AT_FDCWD, g.path, NULL, 0);
    return 0;
}

// Also checked here, at once, when the lock was last seen ours more than half a lease ago: a
// process stopped past its lease (SIGSTOP, a suspended job) learns it at its first step
// after waking, before the renewing thread's next tick, and writes no checkpoint meanwhile.
int run_lock_lost(void) {
    if (atomic_load(&g.lost)) return 1;
    if (!g.path[0] || monotonic() * 1000 - atomic_load(&g.seen_ms) <= g.lease * 500.0) return 0;
    return verify();
}

void run_lock_release(void) {
    if (!g.path[0]) return;
    ticker_stop(&g.renewer);
    // Only our own lock: a run that took over ours wrote its own line.
    Holder h;
    if (read_holder(g.path, &h) == 0 && !strcmp(h.line, g.line)) unlink(g.path);
    g.path[0] = 0;
}

// 1 when pid is not a running process here: no such process, or a zombie (killed, not yet
// reaped by its parent).
static int gone(long pid) {
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    char p[64], stat[512];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = 0;
    const char *close_paren = strrchr(stat, ')');   // "pid (comm) S ...": the state follows the name
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

static int create(const char *path, int lease, char *line, size_t linelen) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return -1;
    char host[256] = "?", when[64];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int n = snprintf(line, linelen, "pid %ld host %s started %s lease %d\n", (long)getpid(), host, when, lease);
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    return ok ? 0 : -1;
}

// The filesystem's clock now: the modification time of a file written in run_dir just now
// (the file server's clock on NFS, the one that stamped the lease); this host's clock when
// the file cannot be written.
static double fs_now(const char *run_dir) {
    char probe[4300], host[256] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(probe, sizeof probe, "%s/.lock-clock-%s-%ld", run_dir, host, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    struct stat st;
    double t = -1;
    if (fd >= 0) {
        if (write(fd, "t", 1) == 1 && fstat(fd, &st) == 0) t = mtime_of(&st);
        close(fd);
        unlink(probe);
    }
    if (t < 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    }
    return t;
}

// A lock held on another host with a lease: 1 when it expired (msg says so), 0 when it was
// renewed (it lives). Waits up to the lease for one or the other.
static int lease_expired(const char *run_dir, const char *path, const Holder *h) {
    double age = fs_now(run_dir) - h->mtime;
    if (age <= h->lease) {
        printf("run lock: %s is held by pid %ld on host %s (lease %d s, renewed %.1f s ago); watching it for up to "
               "%.0f s: a live run renews it\n", path, h->pid, h->host, h->lease, age > 0 ? age : 0,
               h->lease - age + 1);
        fflush(stdout);
        const double t0 = monotonic(), age0 = age;
        while (age <= h->lease) {
            struct timespec ts = {0, 200000000};
            nanosleep(&ts, NULL);
            Holder now;
            if (read_holder(path, &now) != 0 || strcmp(now.line, h->line) != 0 || now.mtime != h->mtime) return 0;
            age = age0 + monotonic() - t0;
        }
    }
    return 1;
}

static int lease_from_env(char *msg, size_t msglen) {
    const char *e = getenv("OLMO_RUN_LEASE");
    if (!e || !*e) return LEASE_DEFAULT;
    char *end;
    long v = strtol(e, &end, 10);
    if (*end || v < 1 || v > LEASE_MAX) {
        snprintf(msg, msglen, "OLMO_RUN_LEASE=%s: the run lock's lease must be a whole number of seconds in 1..%d "
                              "(default %d)", e, LEASE_MAX, LEASE_DEFAULT);
        return -1;
    }
    return (int)v;
}

static void start_renewing(const char *path, int lease) {
    snprintf(g.path, sizeof g.path, "%s", path);
    g.lease = lease;
    atomic_store(&g.lost, 0);
    atomic_store(&g.seen_ms, (long long)(monotonic() * 1000));
    ticker_start(&g.renewer, lease / 4.0, 0, renew, NULL);   // without it the lease expires: another host may take over
    static int registered;
    if (!registered) atexit(run_lock_release), registered = 1;
}

int run_lock_acquire(const char *run_dir, char *msg, size_t msglen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    msg[0] = 0;
    const int lease = lease_from_env(msg, msglen);
    if (lease < 0) return -1;
    char taken[9000] = "";
    for (int attempt = 0; attempt < 2; attempt++) {
        if (create(path, lease, g.line, sizeof g.line) == 0) {
            start_renewing(path, lease);
            snprintf(msg, msglen, "%s", taken);
            return 0;
        }
        if (errno != EEXIST) {
            snprintf(msg, msglen, "cannot create the run lock %s: %s", path, strerror(errno));
            return -1;
        }
        Holder h;
        if (read_holder(path, &h) != 0) continue;   // removed meanwhile: try again
        char me[256] = "";
        gethostname(me, sizeof me - 1);
        const int here = !strcmp(h.host, me);
        if (attempt == 0 && h.pid > 0 && here && gone(h.pid)) {
            // The holder is gone (SIGKILL, an MPI abort): take the lock over.
            snprintf(taken, sizeof taken, "run lock: %s was held by pid %ld on %s (started %s), which is gone; "
                     "taking it over", path, h.pid, h.host, h.when);
            unlink(path);
            continue;
        }
        if (attempt == 0 && h.pid > 0 && !here && h.lease > 0 && lease_expired(run_dir, path, &h)) {
            snprintf(taken, sizeof taken, "run lock: %s was held by pid %ld on host %s (started %s), whose lease of "
                     "%d s expired without renewal (that run or its host is gone); taking it over",
                     path, h.pid, h.host, h.when, h.lease);
            Holder again;   // unlink only the lock judged expired, not one a third run wrote meanwhile
            if (read_holder(path, &again) == 0 && !strcmp(again.line, h.line)) unlink(path);
            continue;
        }
        if (h.pid <= 0)
            snprintf(msg, msglen, "run_dir %s is locked by %s, which names no holder (a run creating it, or a damaged "
                                  "lock); if no run uses this directory, remove the file", run_dir, path);
        else if (!here && h.lease > 0)
            snprintf(msg, msglen, "run_dir %s is in use by another olmo train: pid %ld on host %s, started %s (%s): "
                     "it renewed its lease of %d s just now", run_dir, h.pid, h.host, h.when, path, h.lease);
        else
            snprintf(msg, msglen, "run_dir %s is in use by another olmo train: pid %ld on host %s, started %s (%s)%s",
                     run_dir, h.pid, h.host, h.when, path,
                     here ? "" : "; it has no lease (an older olmo wrote it): if that run is gone, remove the file "
                                 "(another host's pid cannot be checked from here)");
        return -1;
    }
    snprintf(msg, msglen, "cannot take over the run lock %s", path);
    return -1;
}
