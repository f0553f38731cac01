// ckpt_shard.c: see ckpt_shard.h.
#include "train/ckpt_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/dist.h"
#include "util/common.h"
#include "util/crc32c.h"

static const char *const file_name[2] = {"model.safetensors", "optim.safetensors"};

void ckpt_layout_init(CkptLayout *L, const ParamTable *t, const TrainState *st) {
    memset(L, 0, sizeof *L);
    L->names = xcalloc(2 * (size_t)t->n, sizeof(char *));
    char meta[256];
    for (int f = 0; f < 2; f++) {
        L->ws[f] = xcalloc(2 * (size_t)t->n, sizeof(StWrite));
        L->n[f] = ckpt_file_tensors(t, f, st, L->ws[f], L->names, meta, sizeof meta);
        L->header[f] = st_header(L->ws[f], L->n[f], meta, &L->hlen[f]);
        st_regions(L->ws[f], L->n[f], L->hlen[f], CKPT_SUM_CHUNK, &L->reg[f]);
    }
    L->nreg = L->reg[0].n + L->reg[1].n;
    L->total = t->total;
}

void ckpt_layout_free(CkptLayout *L) {
    for (int i = 0; i < 2 * L->n[0]; i++) free(L->names[i]);
    free(L->names);
    for (int f = 0; f < 2; f++) {
        free(L->ws[f]);
        free(L->header[f]);
        free(L->reg[f].r);
    }
    memset(L, 0, sizeof *L);
}

static int failf(char *err, size_t errlen, const char *what, const char *path) {
    int e = errno;
    snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
    errno = e;
    return -1;
}

static int pwrite_all(int fd, const void *buf, size_t len, size_t at) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)at);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w, at += (size_t)w, len -= (size_t)w;
    }
    return 0;
}

int ckpt_shard_prepare(const CkptLayout *L, const char *tmp, int world, long step, char *err, size_t errlen) {
    char p[4700], txt[160];
    snprintf(p, sizeof p, "%s/%s", tmp, CKPT_INCOMPLETE_NAME);
    int n = snprintf(txt, sizeof txt, "olmo.c sharded checkpoint step %ld: being written by %d ranks\n", step, world);
    if (write_file_atomic(p, txt, (size_t)n) != 0) return failf(err, errlen, "cannot write", p);
    for (int f = 0; f < 2; f++) {
        snprintf(p, sizeof p, "%s/%s", tmp, file_name[f]);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) return failf(err, errlen, "cannot create", p);
        // The blocks up front: a full disk shows here, on rank 0, before any rank writes,
        // and the ranks' pwrites then fill allocated space (no holes, no fragmentation
        // race between them). ftruncate where the file system has no fallocate.
        const off_t size = (off_t)L->reg[f].file_size;
        int rc = posix_fallocate(fd, 0, size);
        if (rc == EOPNOTSUPP || rc == EINVAL) rc = ftruncate(fd, size) ? errno : 0;
        if (rc) errno = rc;
        if (rc || pwrite_all(fd, L->header[f], L->hlen[f], 0) != 0 || fsync(fd) != 0) {
            failf(err, errlen, "cannot preallocate", p);
            close(fd);
            return -1;
        }
        if (close(fd) != 0) return failf(err, errlen, "cannot close", p);
    }
    return 0;
}

// The byte ranges of file `file` that shard [lo, hi) owns (model: one; optim: exp_avg's and
// exp_avg_sq's), as [begin, end) of the file; returns how many.
static int owned_ranges(const CkptLayout *L, int file, size_t lo, size_t hi, size_t r[2][2]) {
    const size_t h = L->hlen[file];
    for (int k = 0; k < 1 + file; k++) {
        r[k][0] = h + sizeof(float) * (k * L->total + lo);
        r[k][1] = h + sizeof(float) * (k * L->total + hi);
    }
    return 1 + file;
}

int ckpt_shard_write_part(const CkptLayout *L, const char *tmp, int file, size_t lo, size_t hi, const float *src,
                          const float *src2, uint32_t *crc, char *err, size_t errlen) {
    char p[4700];
    snprintf(p, sizeof p, "%s/%s", tmp, file_name[file]);
    int fd = open(p, O_WRONLY);
    if (fd < 0) return failf(err, errlen, "cannot open", p);
    size_t r[2][2];
    const int nr = owned_ranges(L, file, lo, hi, r);
    const StSums *reg = &L->reg[file];
    uint32_t *out = crc + (file ? L->reg[0].n : 0);
    int rc = 0;
    for (int k = 0; k < nr && rc == 0; k++) {
        const uint8_t *bytes = (const uint8_t *)(k ? src2 : src);
        rc = pwrite_all(fd, bytes, r[k][1] - r[k][0], r[k][0]);
        // Checksummed from the buffer written (as st_write_sums), region by region: the
        // part of each region inside this range.
        for (int i = 1; i < reg->n && rc == 0; i++) {
            size_t a = reg->r[i].begin > r[k][0] ? reg->r[i].begin : r[k][0];
            size_t b = reg->r[i].end < r[k][1] ? reg->r[i].end : r[k][1];
            if (a < b) out[i] = crc32c(0, bytes + (a - r[k][0]), b - a);
        }
    }
    if (rc == 0) rc = fsync(fd);
    int e = errno;
    if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    errno = e;
    return rc ? failf(err, errlen, "cannot write its part of", p) : 0;
}

void ckpt_shard_sums(const CkptLayout *L, int G, const size_t *bounds, const uint32_t *crcs, CkptSums *sums) {
    memset(sums, 0, sizeof *sums);
    for (int f = 0; f < 2; f++) {
        StSums s = L->reg[f];   // the layout's regions, this file's CRCs
        s.r = xmalloc(sizeof(StRegion) * (size_t)s.n);
        memcpy(s.r, L->reg[f].r, sizeof(StRegion) * (size_t)s.n);
        s.r[0].crc = crc32c(0, L->header[f], L->hlen[f]);
        const int base = f ? L->reg[0].n : 0;
        for (int i = 1; i < s.n; i++) {
            uint32_t c = 0;
            for (int g = 0; g < G; g++) {   // the parts in file order: ranks' ranges ascend with g
                size_t r[2][2];
                const int nr = owned_ranges(L, f, bounds[g], bounds[g + 1], r);
                for (int k = 0; k < nr; k++) {
                    size_t a = s.r[i].begin > r[k][0] ? s.r[i].begin : r[k][0];
                    size_t b = s.r[i].end < r[k][1] ? s.r[i].end : r[k][1];
                    if (a < b) c = crc32c_combine(c, crcs[(size_t)g * L->nreg + base + i], b - a);
                }
            }
            s.r[i].crc = c;   // an empty region: crc32c of nothing, 0
        }
        ckpt_sums_add_st(sums, file_name[f], L->ws[f], &s);
        free(s.r);
    }
}

// ---- the run's writer --------------------------------------------------------------------------
struct CkptShard {
    CkptPolicy pol;
    char tmp[4600], last[4800];
    const ParamTable *t;
    int writes, G;
    size_t lo, hi;
    size_t *bounds;
    float *p, *m, *v;          // this rank's snapshot of its shard
    TrainState st;             // the checkpoint in flight (recipe text owned)
    CkptLayout L;
    uint32_t *crc;             // this rank's partial CRCs (L.nreg)
    pthread_t th;
    int running, threaded;
    atomic_int done;           // the part of this rank is written (or failed)
    int failed;
    char errmsg[5000];
    double t0;
};

CkptShard *ckpt_shard_create(const char *run_dir, const ParamTable *t, int keep_last, int keep_every, int async,
                             size_t lo, size_t hi, int G, const size_t *bounds, int writes) {
    CkptShard *s = xcalloc(1, sizeof *s);
    ckpt_policy_init(&s->pol, run_dir, keep_last, keep_every, async);
    s->t = t;
    s->lo = lo, s->hi = hi, s->G = G, s->writes = writes;
    s->bounds = xmalloc(sizeof(size_t) * (size_t)(G + 1));
    memcpy(s->bounds, bounds, sizeof(size_t) * (size_t)(G + 1));
    return s;
}

size_t ckpt_shard_snapshot_bytes(size_t lo, size_t hi) { return 3 * sizeof(float) * (hi - lo); }

void ckpt_shard_buffers(CkptShard *s, float **p, float **m, float **v) {
    ckpt_shard_poll(s, 1, NULL);
    if (s->writes && !s->p) {
        const size_t n = s->hi - s->lo ? s->hi - s->lo : 1;
        s->p = xmalloc_aligned(sizeof(float) * n);
        s->m = xmalloc_aligned(sizeof(float) * n);
        s->v = xmalloc_aligned(sizeof(float) * n);
    }
    *p = s->p, *m = s->m, *v = s->v;
}

// The test hooks (ckpt_shard.h): OLMO_TEST_CKPT_SHARD_PAUSE=RANK:SECONDS[:STEP] gives the
// seconds this rank sleeps in checkpoint `step` (0: none), OLMO_TEST_CKPT_SHARD_FAIL=
// RANK[:STEP] whether its part fails; without STEP every checkpoint.
static double test_pause_here(long step) {
    const char *e = getenv("OLMO_TEST_CKPT_SHARD_PAUSE");
    int r;
    long at = -1;
    double sec;
    if (!e || sscanf(e, "%d:%lf:%ld", &r, &sec, &at) < 2) return 0;
    return r == dist_rank() && (at < 0 || at == step) ? sec : 0;
}
static int test_fail_here(long step) {
    const char *e = getenv("OLMO_TEST_CKPT_SHARD_FAIL");
    int r;
    long at = -1;
    return e && sscanf(e, "%d:%ld", &r, &at) >= 1 && r == dist_rank() && (at < 0 || at == step);
}

// Step 2 on this rank: its part of both files (the background thread's body with async).
static void *write_part(void *arg) {
    CkptShard *s = arg;
    int rc = ckpt_shard_write_part(&s->L, s->tmp, 0, s->lo, s->hi, s->p, NULL, s->crc, s->errmsg, sizeof s->errmsg);
    ckpt_test_pause();   // OLMO_TEST_CKPT_PAUSE: every rank, as the gathering writer between its files
    const double pause = test_pause_here(s->st.step);
    if (pause > 0) {
        fprintf(stderr, "test hook: rank %d (pid %d) pausing %.1fs in its checkpoint part\n", dist_rank(), (int)getpid(),
                pause);
        usleep((useconds_t)(pause * 1e6));
    }
    if (rc == 0 && test_fail_here(s->st.step)) {
        errno = EIO;
        snprintf(s->errmsg, sizeof s->errmsg, "cannot write its part of %s/optim.safetensors: %s (test hook "
                 "OLMO_TEST_CKPT_SHARD_FAIL)", s->tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0)
        rc = ckpt_shard_write_part(&s->L, s->tmp, 1, s->lo, s->hi, s->m, s->v, s->crc, s->errmsg, sizeof s->errmsg);
    s->failed = rc != 0;
    atomic_store(&s->done, 1);
    return NULL;
}

// Rank 0, before it publishes: both files still have the size it laid out (a rank that wrote
// past its range, or anything else that truncated or extended them, stops the commit).
static int check_sizes(CkptShard *s) {
    char p[4700];
    for (int f = 0; f < 2; f++) {
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", s->tmp, file_name[f]);
        if (stat(p, &sb) != 0) return failf(s->errmsg, sizeof s->errmsg, "cannot stat", p);
        if ((size_t)sb.st_size != s->L.reg[f].file_size) {
            snprintf(s->errmsg, sizeof s->errmsg, "%s: %zu bytes, laid out as %zu", p, (size_t)sb.st_size,
                     s->L.reg[f].file_size);
            return -1;
        }
    }
    return 0;
}

// Every rank stops with code 1 after rank 0 said why (the directory stays .tmp-*, marked).
static void fail_together(CkptShard *s, int bad, const char *what) {
    if (bad) fprintf(stderr, "olmo: error: rank %d: checkpoint step %ld: %s\n", dist_rank(), s->st.step, s->errmsg);
    if (dist_rank() == 0)
        fprintf(stderr, "olmo: error: checkpoint step %ld was not published (%s): %s stays incomplete; resume picks "
                "the last complete checkpoint\n", s->st.step, what, s->tmp);
    dist_exit(1);
}

void ckpt_shard_commit(CkptShard *s, const TrainState *st) {
    ckpt_shard_poll(s, 1, NULL);
    s->t0 = now_seconds();
    free(s->st.recipe_yaml);
    s->st = *st;
    s->st.recipe_yaml = xstrdup(st->recipe_yaml ? st->recipe_yaml : "");
    ckpt_layout_free(&s->L);
    ckpt_layout_init(&s->L, s->t, &s->st);
    free(s->crc);
    s->crc = xcalloc((size_t)s->L.nreg, sizeof(uint32_t));
    snprintf(s->tmp, sizeof s->tmp, "%s/.tmp-step-%08ld", s->pol.ckdir, st->step);
    // Step 1: rank 0 lays the files out; the others open them only after it said so.
    int bad = 0;
    if (dist_rank() == 0)
        bad = ckpt_temp_dir(s->pol.ckdir, st->step, s->tmp, sizeof s->tmp, s->errmsg, sizeof s->errmsg) != 0 ||
              ckpt_shard_prepare(&s->L, s->tmp, dist_world(), st->step, s->errmsg, sizeof s->errmsg) != 0;
    if (dist_any(bad)) fail_together(s, bad, "rank 0 could not lay out its files");
    s->running = 1;
    s->failed = 0;
    atomic_store(&s->done, !s->writes);
    s->threaded = s->pol.async && s->writes;
    if (s->threaded) {
        if (pthread_create(&s->th, NULL, write_part, s) != 0) die("cannot start the checkpoint thread");
    } else if (!s->pol.async) {   // (the other shard groups, async: nothing to write, the poll comes later as for all)
        if (s->writes) write_part(s);
        ckpt_shard_poll(s, 1, NULL);   // sync: published before the loop goes on
    }
}

int ckpt_shard_poll(CkptShard *s, int block, double *seconds) {
    if (!s->running) return 1;
    // Collective: every rank has the same write in flight, so all decide alike.
    if (dist_any(!block && !atomic_load(&s->done))) return 0;
    if (s->threaded) pthread_join(s->th, NULL);
    s->running = s->threaded = 0;
    const int W = dist_world();
    int *status = xmalloc(sizeof(int) * (size_t)W);
    dist_allgather_bytes(&s->failed, sizeof(int), status);
    int nbad = 0;
    char who[256] = "";
    for (int r = 0; r < W; r++)
        if (status[r] && strlen(who) < sizeof who - 16)
            snprintf(who + strlen(who), sizeof who - strlen(who), "%s%d", nbad++ ? ", " : "rank ", r);
    free(status);
    if (nbad) fail_together(s, s->failed, who);
    // Rank 0 needs the parts of group 0; an all-gather keeps the one collective of dist.h.
    const size_t k = sizeof(uint32_t) * (size_t)s->L.nreg;
    uint32_t *all = xmalloc(k * (size_t)W);
    dist_allgather_bytes(s->crc, (int)k, all);
    int rc = 0;
    if (dist_rank() == 0 && (rc = check_sizes(s)) == 0) {
        CkptSums sums;
        ckpt_shard_sums(&s->L, s->G, s->bounds, all, &sums);
        rc = ckpt_publish(s->pol.ckdir, s->tmp, &s->st, &sums, s->pol.keep_last, s->pol.keep_every, s->last, sizeof s->last,
                          s->errmsg, sizeof s->errmsg);
        ckpt_sums_free(&sums);
    }
    free(all);
    if (dist_any(rc)) fail_together(s, rc != 0, "rank 0 could not publish it");
    if (seconds) *seconds = now_seconds() - s->t0;
    return 1;
}

const char *ckpt_shard_last_path(const CkptShard *s) { return s->last; }

void ckpt_shard_free(CkptShard *s) {
    if (!s) return;
    ckpt_shard_poll(s, 1, NULL);
    ckpt_layout_free(&s->L);
    free(s->crc);
    free(s->bounds);
    free(s->p);
    free(s->m);
    free(s->v);
    free(s->st.recipe_yaml);
    free(s);
}
