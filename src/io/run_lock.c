// run_lock.c: see run_lock.h.
#include "io/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char g_path[4200];   // the lock this process holds ("" when none)

void run_lock_release(void) {
    if (!g_path[0]) return;
    // Only our own lock: a run that took over a stale one wrote its own pid.
    FILE *f = fopen(g_path, "r");
    long pid = -1;
    if (f) {
        if (fscanf(f, "pid %ld", &pid) != 1) pid = -1;
        fclose(f);
    }
    if (pid == (long)getpid()) unlink(g_path);
    g_path[0] = 0;
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

static int create(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return -1;
    char host[256] = "?", line[512], when[64];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    int n = snprintf(line, sizeof line, "pid %ld host %s started %s\n", (long)getpid(), host, when);
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    return ok ? 0 : -1;
}

int run_lock_acquire(const char *run_dir, char *msg, size_t msglen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", run_dir);
    msg[0] = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (create(path) == 0) {
            snprintf(g_path, sizeof g_path, "%s", path);
            static int registered;
            if (!registered) atexit(run_lock_release), registered = 1;
            return 0;
        }
        if (errno != EEXIST) {
            snprintf(msg, msglen, "cannot create the run lock %s: %s", path, strerror(errno));
            return -1;
        }
        long pid = -1;
        char host[256] = "?", when[64] = "?", me[256] = "";
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "pid %ld host %255s started %63s", &pid, host, when) < 2) pid = -1;
            fclose(f);
        }
        gethostname(me, sizeof me - 1);
        const int here = !strcmp(host, me);
        if (attempt == 0 && here && pid > 0 && gone(pid)) {
            // The holder is gone (SIGKILL, an MPI abort): take the lock over.
            snprintf(msg, msglen, "run lock: %s was held by pid %ld on %s (started %s), which is gone; taking it over",
                     path, pid, host, when);
            unlink(path);
            continue;
        }
        if (pid <= 0)
            snprintf(msg, msglen, "run_dir %s is locked by %s, which names no holder (a run creating it, or a damaged "
                                  "lock); if no run uses this directory, remove the file", run_dir, path);
        else
            snprintf(msg, msglen, "run_dir %s is in use by another olmo train: pid %ld on host %s, started %s (%s)%s",
                     run_dir, pid, host, when, path,
                     here ? "" : "; if that run is gone, remove the file (another host's pid cannot be checked from here)");
        return -1;
    }
    snprintf(msg, msglen, "cannot take over the run lock %s", path);
    return -1;
}
