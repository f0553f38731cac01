// run_dir.c: the run directory as the ranks share it (run.h): rank 0's lock on it
// (io/run_lock.h), and the checks at start that every rank sees the same run_dir and reads the
// same data as rank 0 -- run_dir and the data must be on a filesystem every host shares
// (checkpoints are read by every rank on resume); a rank that sees another directory would
// otherwise resume from another state, or start fresh while the others resume.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "io/run_lock.h"
#include "train/run.h"
#include "util/common.h"

static void host_name(char *h, size_t n) {
    snprintf(h, n, "?");
    gethostname(h, n - 1);
}

// "a-b" or "a" into buf: the ranks (or local ranks) lo..hi of one host.
static void span(char *buf, size_t n, int lo, int hi) {
    if (lo == hi) snprintf(buf, n, "%d", lo);
    else snprintf(buf, n, "%d-%d", lo, hi);
}

// Rank 0 prints where the ranks run: per host (in order of its first rank), its ranks and
// their node-local ranks (MPI's: dist_local_rank, the GPU a CUDA rank takes). A host's
// ranks are listed as runs of consecutive ranks, so `--map-by ppr:8:node` on 8 nodes is one
// short line per node. What a user reads to see that the launcher placed the ranks as meant.
#define PLACE_HOST 64
typedef struct {
    char host[PLACE_HOST];
    int local;
} Place;

// One host's ranks, from its first rank r: " 0-7 (local 0-7), 16 (local 8)" into buf.
static void host_ranks(const Place *all, int W, int r, char *done, char *buf, size_t n) {
    size_t len = 0;
    char part[32], lp[32];
    for (int q = r; q < W; q++) {
        if (done[q] || strcmp(all[q].host, all[r].host) != 0) continue;
        int e = q;   // a run of consecutive ranks with consecutive local ranks
        while (e + 1 < W && strcmp(all[e + 1].host, all[r].host) == 0 && all[e + 1].local == all[e].local + 1) e++;
        span(part, sizeof part, q, e);
        span(lp, sizeof lp, all[q].local, all[e].local);
        if (len < n) len += (size_t)snprintf(buf + len, n - len, "%s%s (local %s)", len ? ", " : " ", part, lp);
        for (int k = q; k <= e; k++) done[k] = 1;
        q = e;
    }
}

void run_print_placement(const Run *u) {
    const int W = u->W;
    if (W == 1) return;
    Place mine, *all = xcalloc((size_t)W, sizeof mine);
    memset(&mine, 0, sizeof mine);
    host_name(mine.host, sizeof mine.host);
    mine.local = dist_local_rank();
    dist_allgather_bytes(&mine, (int)sizeof mine, all);
    if (u->rank == 0) {
        char *done = xcalloc((size_t)W, 1), line[8192], ranks[4096];
        int hosts = 0;
        size_t len = 0;
        for (int r = 0; r < W; r++) {
            if (done[r]) continue;
            hosts++;
            host_ranks(all, W, r, done, ranks, sizeof ranks);
            if (len < sizeof line) len += (size_t)snprintf(line + len, sizeof line - len, " | %s: rank%s%s", all[r].host,
                                                           strchr(ranks, ',') || strchr(ranks, '-') ? "s" : "", ranks);
        }
        printf("placement: %d ranks on %d host%s%s\n", W, hosts, hosts > 1 ? "s" : "", line);
        fflush(stdout);
        free(done);
    }
    free(all);
}

// Rank 0 takes run_dir/.lock (io/run_lock.h) when the directory exists; every rank fails
// together when another run holds it.
void run_take_lock(Run *u) {
    int held = 0;
    if (u->rank == 0 && access(u->r->run_dir, F_OK) == 0) {
        held = run_lock_acquire(u->r->run_dir, u->msg, sizeof u->msg) != 0;
        if (!held) {
            u->locked = 1;
            if (u->msg[0]) printf("%s\n", u->msg);
        }
    }
    if (dist_any(held)) fail_all(u->rank, 2, u->msg);
}


void run_check_shared(Run *u) {
    if (u->W == 1 || u->shared_checked) return;
    const char *dir = u->r->run_dir;
    int exists = u->rank == 0 && access(dir, F_OK) == 0;
    dist_bcast(&exists, sizeof exists, 0);
    if (!exists) return;   // checked once rank 0 has created it
    u->shared_checked = 1;
    char path[4200], token[400], h[256];
    snprintf(path, sizeof path, "%s/.rank-check", dir);
    host_name(h, sizeof h);
    if (u->rank == 0) {
        snprintf(token, sizeof token, "pid %ld host %s time %.6f\n", (long)getpid(), h, now_seconds());
        if (write_file_atomic(path, token, strlen(token)) != 0) die("cannot write %s", path);
    }
    dist_bcast(token, sizeof token, 0);
    dist_barrier();
    size_t n = 0;
    char *got = read_file_all(path, &n);
    const int bad = !got || n != strlen(token) || memcmp(got, token, n);
    free(got);
    if (bad)
        fprintf(stderr, "olmo: error: rank %d on host %s does not see the run_dir rank 0 sees: %s (rank 0 wrote %s; "
                        "this rank reads %s): run_dir must be on a filesystem every rank shares\n",
                u->rank, h, dir, path, n ? "other content" : "nothing");
    const int any = dist_any(bad);
    if (u->rank == 0) unlink(path);
    if (any) dist_exit(2);
}

void run_check_data(Run *u) {
    if (u->W == 1) return;
    char fp[65], h[256];
    snprintf(fp, sizeof fp, "%s", loader_fingerprint(u->loader));
    dist_bcast(fp, sizeof fp, 0);
    const int bad = strcmp(fp, loader_fingerprint(u->loader)) != 0;
    if (bad) {
        host_name(h, sizeof h);
        fprintf(stderr, "olmo: error: rank %d on host %s reads other data than rank 0: dataset fingerprint %.16s..., rank "
                        "0's %.16s... (the files, their sizes or the mixture differ): every rank must see the same "
                        "data files\n", u->rank, h, loader_fingerprint(u->loader), fp);
    }
    if (dist_any(bad)) dist_exit(2);
}
