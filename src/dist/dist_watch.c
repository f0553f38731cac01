// dist_watch.c: see dist_watch.h (the heartbeat files and the deadline on collectives).
#include "dist/dist_watch.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "util/common.h"
#include "util/ticker.h"

#define TIMEOUT_DEFAULT 600

static struct {
    int on, rank, world, timeout;
    double period;
    unsigned long long run;              // this run's id (rank 0's, broadcast): in every heartbeat's name
    char dir[4200], mine[4300], host[256];
    atomic_llong since_ms;               // when this rank entered its collective; 0 outside one
    _Atomic(const char *) what;          // which collective
    atomic_long seq;                     // collectives entered so far
    Ticker ticker;
    double next_judge;                   // seconds into a wait when judge() looks next
} g;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dist_watch_enter(const char *what) {
    if (!g.on) return;
    atomic_store(&g.what, what);
    atomic_fetch_add(&g.seq, 1);
    atomic_store(&g.since_ms, now_ms());
}

void dist_watch_leave(void) {
    if (g.on) atomic_store(&g.since_ms, 0);
}

// One rank's heartbeat as read back: its host, whether it waits in a collective, and how long
// ago (on the filesystem's clock, against our own file just written) it was renewed.
typedef struct {
    char host[256], wait[64];
    double age;
    int ok;
} Beat;

static void beat_write(void) {
    const long long since = atomic_load(&g.since_ms);
    const char *what = atomic_load(&g.what);
    char line[512];
    int n = snprintf(line, sizeof line, "host %s seq %ld wait %s\n", g.host, atomic_load(&g.seq),
                     since ? (what ? what : "?") : "-");
    write_file_atomic(g.mine, line, (size_t)n);
}

static double mtime(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

static Beat beat_read(int r, double ref) {
    Beat b = {.host = "?", .wait = "?", .age = 1e9, .ok = 0};
    char path[4300], line[512];
    snprintf(path, sizeof path, "%s/rank-%d.%016llx", g.dir, r, g.run);
    FILE *f = fopen(path, "r");
    if (!f) return b;
    if (fgets(line, sizeof line, f)) {
        long seq;
        b.ok = sscanf(line, "host %255s seq %ld wait %63s", b.host, &seq, b.wait) == 3;
    }
    fclose(f);
    double t = mtime(path);
    if (t >= 0) b.age = ref - t;
    return b;
}

// After the message: exit 1, but first give the launcher min(timeout, 30) s to notice a lost
// daemon itself (Open MPI's oob_tcp_keepalive_*) and end the job in order: a rank's exit makes
// mpirun send to every daemon, and a send to a host that is gone blocks in TCP retransmissions
// (about 15 minutes) where the keepalive would have ended the job in seconds.
static void leave(void) {
    fflush(stderr);
    const int grace = g.timeout < 30 ? g.timeout : 30;
    struct timespec ts = {grace, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    _exit(1);
}

// This rank has waited past the deadline: read every heartbeat and decide (dist_watch.h).
// Returns only when the wait may still end (a rank busy outside collectives).
static void judge(double waited, const char *what) {
    beat_write();
    const double ref = mtime(g.mine), stale = 4 * g.period + 1;
    char gone[2048] = "", cut[2048] = "", busy[512] = "";
    size_t ng = 0, nc = 0;
    for (int r = 0; r < g.world; r++) {
        if (r == g.rank) continue;
        Beat b = beat_read(r, ref);
        if (!b.ok || b.age > stale) {
            if (ng < sizeof gone && b.ok)
                ng += (size_t)snprintf(gone + ng, sizeof gone - ng, "%srank %d on host %s (no heartbeat for %.0f s)",
                                       ng ? ", " : "", r, b.host, b.age);
            else if (ng < sizeof gone)
                ng += (size_t)snprintf(gone + ng, sizeof gone - ng, "%srank %d (no heartbeat from it in this run)",
                                       ng ? ", " : "", r);
        } else if (!strcmp(b.wait, "-")) {
            if (!busy[0]) snprintf(busy, sizeof busy, "rank %d on host %s", r, b.host);
        } else if (strcmp(b.host, g.host) != 0 && nc < sizeof cut) {
            nc += (size_t)snprintf(cut + nc, sizeof cut - nc, "%srank %d on host %s", nc ? ", " : "", r, b.host);
        }
    }
    if (gone[0]) {
        fprintf(stderr, "olmo: error: rank %d on host %s: %s got no answer for %.0f s (OLMO_DIST_TIMEOUT=%d); stopped "
                        "answering: %s: that process or its host is gone; this rank stops (rerun the same command "
                        "on the hosts left: docs/cluster.md)\n", g.rank, g.host, what, waited, g.timeout, gone);
        leave();
    }
    if (!busy[0]) {
        fprintf(stderr, "olmo: error: rank %d on host %s: %s got no answer for %.0f s (OLMO_DIST_TIMEOUT=%d); every "
                        "rank is alive and waiting in a collective: %s cannot be reached from here: the network "
                        "between the hosts stopped carrying MPI traffic; this rank stops\n", g.rank, g.host, what,
                waited, g.timeout, cut[0] ? cut : "a rank on this host");
        leave();
    }
    fprintf(stderr, "olmo: note: rank %d on host %s has waited %.0f s in %s for %s, which is alive and busy outside "
                    "any collective; waiting on\n", g.rank, g.host, waited, what, busy);
}

// The thread's tick: the heartbeat, then the deadline.
static int watch(void *arg) {
    (void)arg;
    beat_write();
    const long long since = atomic_load(&g.since_ms);
    const double waited = since ? (now_ms() - since) / 1000.0 : 0;
    if (!since) g.next_judge = g.timeout;
    if (since && waited > g.next_judge) {
        judge(waited, atomic_load(&g.what));
        g.next_judge = waited + g.timeout;   // a busy rank: look again one timeout later
    }
    return 0;
}

// Rank 0, before any rank of this run writes a heartbeat (dist_watch_start): remove what an
// earlier run left in RUN_DIR/.alive (a crash leaves every rank's file; a run at a larger world
// size leaves ranks this one does not have), so that the directory goes with the last rank out.
static void clear_old_beats(void) {
    DIR *d = opendir(g.dir);
    if (!d) return;
    struct dirent *e;
    char path[4500];
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "rank-", 5)) {
            snprintf(path, sizeof path, "%s/%s", g.dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

// This run's id: rank 0's clock and pid, the same on every rank. A heartbeat's file name
// carries it, so a file of another run (left by a crash, or still written by a process of a
// dead job that nobody has killed yet) is never read as this run's rank: neither a dead rank
// taken for alive nor a live one's file overwritten by a ghost.
static unsigned long long run_id(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec) ^
           ((unsigned long long)getpid() << 40);
}

int dist_watch_start(const char *run_dir, int rank, int world, char *msg, unsigned long msglen) {
    msg[0] = 0;
    if (g.on || world <= 1) return 0;
    const char *e = getenv("OLMO_DIST_TIMEOUT");
    long t = TIMEOUT_DEFAULT;
    int bad = 0;
    if (e && *e) {
        char *end;
        t = strtol(e, &end, 10);
        bad = *end || t < 0 || t > 86400 * 7;
    }
    // Every rank reaches the broadcast (whatever its OLMO_DIST_TIMEOUT); rank 0 clears the old
    // heartbeats before it, so no heartbeat of this run exists yet when it does.
    snprintf(g.dir, sizeof g.dir, "%s/.alive", run_dir);
    if (rank == 0) clear_old_beats();
    g.run = rank == 0 ? run_id() : 0;
    dist_bcast(&g.run, sizeof g.run, 0);
    if (bad) {
        snprintf(msg, msglen, "OLMO_DIST_TIMEOUT=%s: the deadline on MPI collectives must be a whole number of "
                              "seconds (0 = none; default %d)", e, TIMEOUT_DEFAULT);
        return -1;
    }
    if (t == 0) return 0;
    g.timeout = (int)t, g.rank = rank, g.world = world;
    g.period = t / 8.0 < 0.25 ? 0.25 : t / 8.0 > 10 ? 10 : t / 8.0;
    gethostname(g.host, sizeof g.host - 1);
    if (mkdir(g.dir, 0755) != 0 && errno != EEXIST) {
        snprintf(msg, msglen, "cannot create %s: %s", g.dir, strerror(errno));
        return -1;
    }
    snprintf(g.mine, sizeof g.mine, "%s/rank-%d.%016llx", g.dir, rank, g.run);
    g.next_judge = g.timeout;
    g.on = 1;
    if (ticker_start(&g.ticker, g.period, 1, watch, NULL) != 0) {
        g.on = 0;
        snprintf(msg, msglen, "cannot start the collective watch thread");
        return -1;
    }
    static int registered;
    if (!registered) atexit(dist_watch_stop), registered = 1;
    return 0;
}

void dist_watch_stop(void) {
    if (!g.on) return;
    ticker_stop(&g.ticker);
    g.on = 0;
    unlink(g.mine);
    rmdir(g.dir);   // the last rank out removes it
}
