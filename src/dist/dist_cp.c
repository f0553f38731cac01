// dist_cp.c: see dist_cp.h. The collectives are MPI_Allgather / MPI_Alltoall over the
// group's communicator (MPI_Comm_split of the world by rank / C), through packed
// contiguous buffers that grow as needed.
#include "dist/dist_cp.h"

#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/dist_watch.h"
#include "util/common.h"

#ifdef OLMO_MPI
#include <mpi.h>
static MPI_Comm g_comm;
#endif

static int g_C = 1, g_member;
static float *g_send, *g_recv;
static size_t g_cap;   // floats in each of g_send, g_recv

int dist_cp_init(int C) {
    if (C == g_C) return 0;
    if (C < 1 || g_C != 1) return -1;
    if (C == 1) return 0;
    const int W = dist_world();
    if (!dist_is_mpi() || W % C) return -1;
#ifdef OLMO_MPI
    MPI_Comm_split(MPI_COMM_WORLD, dist_rank() / C, dist_rank(), &g_comm);
    g_C = C;
    g_member = dist_rank() % C;
    return 0;
#else
    return -1;
#endif
}

int dist_cp_degree(void) { return g_C; }
int dist_cp_member(void) { return g_member; }

void dist_cp_chunk_starts(int T, int C, int j, int start[2]) {
    const int ch = T / (2 * C);
    start[0] = j * ch;
    start[1] = (2 * C - 1 - j) * ch;
}

void dist_cp_local_ids(const int32_t *in, int32_t *out, int B, int T, int C, int j) {
    const int ch = T / (2 * C);
    int st[2];
    dist_cp_chunk_starts(T, C, j, st);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 2; c++)
            memcpy(out + (size_t)b * 2 * ch + (size_t)c * ch, in + (size_t)b * T + st[c], sizeof(int32_t) * ch);
}

static void reserve(size_t floats) {
    if (floats <= g_cap) return;
    free(g_send);
    free(g_recv);
    g_send = xmalloc_aligned(sizeof(float) * floats);
    g_recv = xmalloc_aligned(sizeof(float) * floats);
    g_cap = floats;
}

// Floats one member sends (its T / C rows of width w), as an MPI count.
static int block_count(int T, int w) {
    const size_t n = (size_t)(T / g_C) * w;
    if (n > 0x7fffffff) die("context parallelism: %zu floats per member exceed an MPI count; use a smaller dist.cp_head_stride", n);
    return (int)n;
}

void dist_cp_allgather_rows(const float *local, int ld, int w, int T, float *global) {
    const int C = g_C, ch = T / (2 * C), n = block_count(T, w);
    reserve((size_t)n * C);
    for (int r = 0; r < 2 * ch; r++) memcpy(g_send + (size_t)r * w, local + (size_t)r * ld, sizeof(float) * w);
#ifdef OLMO_MPI
    dist_watch_enter("MPI_Allgather (context parallelism)");
    MPI_Allgather(g_send, n, MPI_FLOAT, g_recv, n, MPI_FLOAT, g_comm);
    dist_watch_leave();
#else
    memcpy(g_recv, g_send, sizeof(float) * n);
#endif
    for (int m = 0; m < C; m++) {
        int st[2];
        dist_cp_chunk_starts(T, C, m, st);
        for (int c = 0; c < 2; c++)
            memcpy(global + (size_t)st[c] * w, g_recv + (size_t)m * n + (size_t)c * ch * w, sizeof(float) * ch * w);
    }
}

void dist_cp_reduce_scatter_rows(const float *global, int T, int w, float *local, int ld) {
    const int C = g_C, ch = T / (2 * C), n = block_count(T, w);
    reserve((size_t)n * C);
    for (int m = 0; m < C; m++) {   // block m: member m's rows of this member's partial
        int st[2];
        dist_cp_chunk_starts(T, C, m, st);
        for (int c = 0; c < 2; c++)
            memcpy(g_send + (size_t)m * n + (size_t)c * ch * w, global + (size_t)st[c] * w, sizeof(float) * ch * w);
    }
#ifdef OLMO_MPI
    dist_watch_enter("MPI_Alltoall (context parallelism)");
    MPI_Alltoall(g_send, n, MPI_FLOAT, g_recv, n, MPI_FLOAT, g_comm);
    dist_watch_leave();
#else
    memcpy(g_recv, g_send, sizeof(float) * n);
#endif
    // Sum in member order: ((p0 + p1) + p2) + ..., the same whoever answered first.
    for (int r = 0; r < 2 * ch; r++) {
        float *o = local + (size_t)r * ld;
        memcpy(o, g_recv + (size_t)r * w, sizeof(float) * w);
        for (int m = 1; m < C; m++) {
            const float *p = g_recv + (size_t)m * n + (size_t)r * w;
            for (int i = 0; i < w; i++) o[i] += p[i];
        }
    }
}
