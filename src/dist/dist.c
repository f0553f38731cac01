// dist.c: see dist.h. Built with OLMO_MPI (Makefile MPI=1, the default) the collectives
// are MPI calls; without it, or when the process was not started by mpirun, the world
// is one rank and each collective is the identity.
#include "dist/dist.h"
#include "dist/dist_watch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "util/common.h"

#ifdef OLMO_MPI
#include <mpi.h>
#endif

// A blocking collective under olmo.c's own deadline (dist_watch.h).
#define WATCHED(what, call) \
    do { \
        dist_watch_enter(what); \
        call; \
        dist_watch_leave(); \
    } while (0)

static int g_init, g_mpi, g_rank, g_world = 1, g_local_rank;
// The shard group (dist_shard_group): the collectives over `bounds` run among the g_sworld
// ranks of this rank's group (all ranks unless HSDP); g_nrep groups hold replicas.
static int g_sworld = 1, g_srank, g_nrep = 1;
#ifdef OLMO_MPI
static MPI_Comm g_scomm = MPI_COMM_NULL, g_rcomm = MPI_COMM_NULL;   // my group; the ranks of my shard index
#define SCOMM (g_scomm != MPI_COMM_NULL ? g_scomm : MPI_COMM_WORLD)
#endif

// `srun -n N olmo ...` without an MPI plugin (--mpi=pmix or pmi2) starts N processes that see
// no process manager: each would join MPI alone as world size 1 and train the whole run into
// the same run_dir. SLURM_STEP_NUM_TASKS is set by srun for the tasks of a job step (not in
// an sbatch script's own shell, where a single olmo command is legitimate).
static void srun_check(int launched) {
    const char *n = getenv("SLURM_STEP_NUM_TASKS");
    if (launched || !n || atoi(n) <= 1) return;
    const char *id = getenv("SLURM_PROCID");
    fprintf(stderr, "olmo: error: srun started %s tasks (SLURM_STEP_NUM_TASKS; this is task %s) but no MPI process "
                    "manager is visible (PMIX_RANK, PMI_RANK or OMPI_COMM_WORLD_SIZE unset): every task would run "
                    "alone as world size 1 into the same run_dir. Launch with `srun --mpi=pmix` (or --mpi=pmi2; "
                    "`srun --mpi=list` shows what this cluster offers), or with mpirun (docs/cluster.md)\n",
            n, id ? id : "?");
    exit(2);
}

void dist_init(void) {
    if (g_init) return;
    g_init = 1;
    // Only join MPI when a launcher started us: a plain `olmo train` stays MPI-free (no
    // singleton start-up cost, works where no MPI runtime is configured).
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
    srun_check(launched);
#ifdef OLMO_MPI
    if (launched) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_world);
        // The rank among the processes of this node (sharing memory), whatever launched
        // us (mpirun, mpiexec.hydra, srun): MPI's own answer, not a launcher's variable.
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &g_local_rank);
        MPI_Comm_free(&node);
        g_mpi = 1;
        g_sworld = g_world, g_srank = g_rank;
    }
#endif
}

void dist_finalize(void) {
    dist_watch_stop();
#ifdef OLMO_MPI
    if (g_scomm != MPI_COMM_NULL) MPI_Comm_free(&g_scomm);
    if (g_rcomm != MPI_COMM_NULL) MPI_Comm_free(&g_rcomm);
    if (g_mpi) MPI_Finalize();
#endif
    g_mpi = 0;
}

int dist_rank(void) { return g_rank; }
int dist_world(void) { return g_world; }
int dist_local_rank(void) { return g_local_rank; }
int dist_is_mpi(void) { return g_mpi; }

void dist_barrier(void) {
#ifdef OLMO_MPI
    if (g_mpi) WATCHED("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD));
#endif
}

void dist_barrier_quiet(void) {
#ifdef OLMO_MPI
    if (!g_mpi || g_world == 1) return;
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    dist_watch_enter("MPI_Ibarrier");
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        struct timespec ts = {0, 1000000};   // 1 ms: a waiting rank leaves its cores to the others
        nanosleep(&ts, NULL);
    }
    dist_watch_leave();
#endif
}

void dist_exit(int code) {
    fflush(stdout);
    fflush(stderr);
    dist_finalize();
    exit(code);
}

void dist_shard_bounds(size_t n, int world, size_t *bounds) {
    size_t nchunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    for (int r = 0; r <= world; r++) {
        size_t c = nchunks * (size_t)r / (size_t)world;
        size_t b = c * SUMSQ_CHUNK;
        bounds[r] = b < n ? b : n;
    }
    bounds[world] = n;
}

#ifdef OLMO_MPI
// MPI counts are ints; shards of more than 2^31 floats would need a derived datatype.
static void counts_of(const size_t *bounds, int *cnt, int *dsp) {
    for (int r = 0; r < g_sworld; r++) {
        size_t c = bounds[r + 1] - bounds[r];
        if (c > INT32_MAX || bounds[r] > INT32_MAX) die("dist: shard too large for MPI int counts");
        cnt[r] = (int)c;
        dsp[r] = (int)bounds[r];
    }
}
#endif

#ifdef OLMO_MPI
// Sum the n pieces of S floats at buf + i*S (i = 0..n-1) in the binary-counter tree over i:
// merge the two newest partial sums whenever they cover equal spans, then fold newest into
// older (exactly GradAcc's order); returns the piece holding the sum.
static float *tree_sum(float *buf, size_t S, int n) {
    int stack[64];
    long span[64];
    int depth = 0;
    for (int i = 0; i < n; i++) {
        stack[depth] = i;
        span[depth++] = 1;
        while (depth >= 2 && span[depth - 1] == span[depth - 2]) {
            add_inplace(buf + S * (size_t)stack[depth - 2], buf + S * (size_t)stack[depth - 1], S);
            span[depth - 2] *= 2;
            depth--;
        }
    }
    for (int i = depth - 1; i >= 1; i--) add_inplace(buf + S * (size_t)stack[i - 1], buf + S * (size_t)stack[i], S);
    return buf + S * (size_t)stack[0];
}
#endif

void dist_reduce_scatter(const float *local, float *shard_out, float *recv, size_t round, const size_t *bounds) {
    const int W = g_sworld, r = g_srank;
    const size_t S = bounds[r + 1] - bounds[r];
    if (g_world == 1) {
        if (shard_out != local) memcpy(shard_out, local, sizeof(float) * S);
        return;
    }
#ifdef OLMO_MPI
    // The shards go in rounds of at most P floats of each (recv holds one round's pieces
    // from every member, or from every group): the sums are elementwise, so the rounds
    // change no bit, only the scratch recv needs.
    size_t maxS = 0;
    for (int j = 0; j < W; j++) maxS = bounds[j + 1] - bounds[j] > maxS ? bounds[j + 1] - bounds[j] : maxS;
    const size_t P = round < maxS ? round : maxS;   // the same on every rank: the same rounds
    if (P == 0 && maxS > 0) die("dist_reduce_scatter: a round of 0 floats");
    int *scnt = xmalloc(sizeof(int) * 4 * (size_t)W), *sdsp = scnt + W, *rcnt = scnt + 2 * W, *rdsp = scnt + 3 * W;
    for (size_t o = 0; o < maxS || o == 0; o += P) {
        const size_t c = S > o ? (S - o < P ? S - o : P) : 0;   // my shard's floats this round
        // Within the group: piece o of shard j of my partial sum to member j; piece o of my
        // shard from member i at i*c; summed over members in the counter tree.
        float *sum = (float *)local + bounds[r] + o;
        if (W > 1) {
            for (int j = 0; j < W; j++) {
                const size_t Sj = bounds[j + 1] - bounds[j], cj = Sj > o ? (Sj - o < P ? Sj - o : P) : 0;
                if (bounds[j] + o > INT32_MAX || cj > INT32_MAX) die("dist: shard too large for MPI int counts");
                scnt[j] = (int)cj;
                sdsp[j] = (int)(bounds[j] + (cj ? o : 0));
                rcnt[j] = (int)c;
                rdsp[j] = (int)(c * (size_t)j);
            }
            WATCHED("MPI_Alltoallv", MPI_Alltoallv(local, scnt, sdsp, MPI_FLOAT, recv, rcnt, rdsp, MPI_FLOAT, SCOMM));
            sum = tree_sum(recv, c, W);
        }
        // HSDP: the groups' sums of this piece, gathered in group order and summed in the
        // counter tree over groups (with G a power of two: the tree over all ranks).
        if (g_nrep > 1) {
            float *mine = recv + c * (size_t)(g_rank / g_sworld);   // in place: my group's slot
            if (sum != mine) memmove(mine, sum, sizeof(float) * c);
            WATCHED("MPI_Allgather", MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)c, MPI_FLOAT, g_rcomm));
            sum = tree_sum(recv, c, g_nrep);
        }
        if (c) memcpy(shard_out + o, sum, sizeof(float) * c);
        if (maxS == 0) break;
    }
    free(scnt);
#else
    (void)recv, (void)round;
#endif
}

double dist_sumsq_gather(double *part, const size_t *bounds) {
    const int W = g_sworld;
    const size_t n = bounds[W];
#ifdef OLMO_MPI
    if (W > 1) {
        int *cnt = xmalloc(sizeof(int) * 2 * (size_t)W), *dsp = cnt + W;
        size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
        for (int i = 0; i < W; i++) {
            size_t a = bounds[i] / SUMSQ_CHUNK, b = i == W - 1 ? nch : bounds[i + 1] / SUMSQ_CHUNK;
            dsp[i] = (int)a;
            cnt[i] = (int)(b - a);
        }
        WATCHED("MPI_Allgatherv", MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, part, cnt, dsp, MPI_DOUBLE, SCOMM));
        free(cnt);
    }
#endif
    size_t nch = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    double total = 0.0;
    for (size_t c = 0; c < nch; c++) total += part[c];
    return total;
}

#ifdef OLMO_MPI
// Each group member's part of [lo, hi): counts and displacements from lo.
static void range_counts(const size_t *bounds, size_t lo, size_t hi, int *cnt, int *dsp) {
    if (hi - lo > INT32_MAX) die("dist: a range of %zu floats is too many for MPI int counts", hi - lo);
    for (int r = 0; r < g_sworld; r++) {
        size_t a = bounds[r] > lo ? bounds[r] : lo, b = bounds[r + 1] < hi ? bounds[r + 1] : hi;
        cnt[r] = b > a ? (int)(b - a) : 0;
        dsp[r] = b > a ? (int)(a - lo) : 0;
    }
}
#endif

void dist_gather_range(const float *mine, float *full, size_t lo, size_t hi, const size_t *bounds) {
    if (g_sworld == 1) {
        if (g_rank == 0 && full != mine && hi > lo) memcpy(full, mine, sizeof(float) * (hi - lo));
        return;
    }
#ifdef OLMO_MPI
    if (g_rank >= g_sworld) return;   // HSDP: group 0 (rank 0's) holds every shard; the others are replicas
    int *cnt = xmalloc(sizeof(int) * 2 * (size_t)g_sworld), *dsp = cnt + g_sworld;
    range_counts(bounds, lo, hi, cnt, dsp);
    WATCHED("MPI_Gatherv", MPI_Gatherv(mine, cnt[g_srank], MPI_FLOAT, full, cnt, dsp, MPI_FLOAT, 0, SCOMM));
    free(cnt);
#else
    (void)mine, (void)full, (void)lo, (void)hi, (void)bounds;
#endif
}

void dist_allgather_shards(float *buf, const size_t *bounds) {
    if (g_sworld == 1) return;
#ifdef OLMO_MPI
    int *cnt = xmalloc(sizeof(int) * 2 * (size_t)g_sworld), *dsp = cnt + g_sworld;
    counts_of(bounds, cnt, dsp);
    WATCHED("MPI_Allgatherv", MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_FLOAT, SCOMM));
    free(cnt);
#else
    (void)buf, (void)bounds;
#endif
}

void dist_gather_shards(const float *shard, float *full, const size_t *bounds) {
    if (g_sworld == 1) {
        if (g_rank == 0) memcpy(full, shard, sizeof(float) * bounds[1]);
        return;
    }
#ifdef OLMO_MPI
    if (g_rank >= g_sworld) return;   // HSDP: group 0 holds every shard
    int *cnt = xmalloc(sizeof(int) * 2 * (size_t)g_sworld), *dsp = cnt + g_sworld;
    counts_of(bounds, cnt, dsp);
    WATCHED("MPI_Gatherv", MPI_Gatherv(shard, cnt[g_srank], MPI_FLOAT, full, cnt, dsp, MPI_FLOAT, 0, SCOMM));
    free(cnt);
#endif
}

void dist_allgather_doubles(const double *mine, int k, double *all) {
    if (g_world == 1) {
        memcpy(all, mine, sizeof(double) * (size_t)k);
        return;
    }
#ifdef OLMO_MPI
    WATCHED("MPI_Allgather", MPI_Allgather(mine, k, MPI_DOUBLE, all, k, MPI_DOUBLE, MPI_COMM_WORLD));
#endif
}

void dist_allgather_bytes(const void *mine, int k, void *all) {
    if (g_world == 1) {
        memcpy(all, mine, (size_t)k);
        return;
    }
#ifdef OLMO_MPI
    WATCHED("MPI_Allgather", MPI_Allgather(mine, k, MPI_BYTE, all, k, MPI_BYTE, MPI_COMM_WORLD));
#endif
}

long dist_sum_long(long x) {
#ifdef OLMO_MPI
    if (g_world > 1) {
        long y;
        WATCHED("MPI_Allreduce", MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        return y;
    }
#endif
    return x;
}

int dist_any(int flag) {
#ifdef OLMO_MPI
    if (g_world > 1) {
        int y, f = flag != 0;
        WATCHED("MPI_Allreduce", MPI_Allreduce(&f, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        return y;
    }
#endif
    return flag != 0;
}

void dist_bcast(void *buf, size_t bytes, int root) {
#ifdef OLMO_MPI
    if (g_world > 1) {
        if (bytes > INT32_MAX) die("dist_bcast: %zu bytes too large", bytes);
        WATCHED("MPI_Bcast", MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD));
    }
#else
    (void)buf, (void)bytes, (void)root;
#endif
}

// ---- shard groups (HSDP) and the per-block weight gathers of dist.shard: full -------------
int dist_shard_group(int G, char *err, size_t errlen) {
    if (G <= 0) G = g_world;
    if (g_world % G) {
        snprintf(err, errlen, "dist.shard_group %d does not divide the world size %d (shard groups are %d consecutive "
                 "ranks)", G, g_world, G);
        return -1;
    }
    if (G == g_sworld && g_nrep == g_world / G) return 0;
#ifdef OLMO_MPI
    if (g_scomm != MPI_COMM_NULL) MPI_Comm_free(&g_scomm);
    if (g_rcomm != MPI_COMM_NULL) MPI_Comm_free(&g_rcomm);
    // Group g = ranks g*G .. g*G+G-1 (consecutive ranks: one node's, under mpirun's default
    // placement); the replica communicator joins the ranks with the same index in their group.
    MPI_Comm_split(MPI_COMM_WORLD, g_rank / G, g_rank, &g_scomm);
    MPI_Comm_split(MPI_COMM_WORLD, g_rank % G, g_rank, &g_rcomm);
#endif
    g_sworld = G, g_srank = g_rank % G, g_nrep = g_world / G;
    return 0;
}

int dist_shard_world(void) { return g_sworld; }
int dist_shard_rank(void) { return g_srank; }

#ifdef OLMO_MPI
struct DistReq {
    MPI_Request req;
    int *cnt;
};
#else
struct DistReq {
    int unused;
};
#endif

DistReq *dist_iallgather_range(float *buf, size_t lo, size_t hi, const size_t *bounds) {
    if (g_sworld == 1 || hi <= lo) return NULL;
#ifdef OLMO_MPI
    DistReq *q = xmalloc(sizeof *q);
    q->cnt = xmalloc(sizeof(int) * 2 * (size_t)g_sworld);
    range_counts(bounds, lo, hi, q->cnt, q->cnt + g_sworld);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf + lo, q->cnt, q->cnt + g_sworld, MPI_FLOAT, SCOMM, &q->req);
    return q;
#else
    (void)buf, (void)bounds;
    return NULL;
#endif
}

void dist_wait(DistReq *q) {
    if (!q) return;
#ifdef OLMO_MPI
    WATCHED("MPI_Wait", MPI_Wait(&q->req, MPI_STATUS_IGNORE));
    free(q->cnt);
#endif
    free(q);
}
