// dist.h: data parallelism. One process per rank, launched by `mpirun -np W olmo ...`;
// without mpirun (or in a build with MPI=0) everything runs as world size 1 and no MPI
// call is made. Every collective here has a fixed reduction order (docs/distributed.md),
// so the result never depends on timing or on which rank answers first:
//   - the gradient reduce-scatter sums the ranks' partial sums in a binary-counter tree
//     over the source rank index (the same tree GradAcc builds over micro-batches), so a
//     power-of-two number of micro-batches per rank gives the tree of a single process;
//   - the squared norm is summed over fixed 65536-float chunks in chunk order, and shard
//     boundaries fall on chunk boundaries, so the norm is the same for every world size;
//   - small double vectors (loss sums) are all-gathered and summed in global order.
// A shard is the contiguous range [bounds[r], bounds[r+1]) of the flat buffer, r this
// rank's index in its shard group: all ranks (ZeRO-1/2/3), or HSDP's groups of G
// consecutive ranks (dist_shard_group), whose replicas are reduced across the groups.
#ifndef OLMO_DIST_H
#define OLMO_DIST_H

#include <stddef.h>

// Shards are whole SUMSQ_CHUNKs (kernels.h, the chunk of the deterministic squared norm),
// so per-chunk partials are the same whatever the world size.

// Start (MPI_Init when launched by mpirun) and stop. dist_init is idempotent.
void dist_init(void);
void dist_finalize(void);
int dist_rank(void);
int dist_world(void);
// This rank's index among the ranks on its node (0 without MPI): one GPU per local rank.
int dist_local_rank(void);
int dist_is_mpi(void);
void dist_barrier(void);
// A barrier whose waiting ranks sleep instead of polling (MPI_Barrier spins on its core):
// used around work that one rank times alone, such as the GEMM peak calibration (peak.h).
void dist_barrier_quiet(void);
// Exit the whole job with `code` (after a message printed by the caller).
void dist_exit(int code) __attribute__((noreturn));

// The collectives below that take `bounds` run within this rank's shard group (bounds has
// dist_shard_world() + 1 entries); the others over all ranks.
// Shard boundaries for n floats over W ranks: bounds[0..W], multiples of SUMSQ_CHUNK
// (except bounds[W] = n), chunks spread as evenly as possible.
void dist_shard_bounds(size_t n, int world, size_t *bounds);

// Reduce-scatter: every rank holds its full partial sum `local` (n = bounds[G] floats);
// group member r receives shard r of every member (MPI_Alltoallv into recv: G x shard r
// floats) and sums them in a binary-counter tree over source members; with HSDP the groups'
// sums of the shard are then all-gathered across the replicas (recv: W/G x shard floats)
// and summed in the counter tree over groups, so with G a power of two the tree is the one
// over all ranks. Result in shard_out. The shards go in rounds of `round` floats of each
// (the same value on every rank; >= the largest shard: one round), which changes no bit of
// the sums; recv holds max(G, W/G) x min(round, shard r) floats.
void dist_reduce_scatter(const float *local, float *shard_out, float *recv, size_t round, const size_t *bounds);
// Global sum of squares of a sharded vector from the per-chunk partials part[c] of this
// rank's chunks (its device computed them: devstate_sumsq), all-gathered, summed in chunk
// order; part holds ceil(n / SUMSQ_CHUNK) doubles.
double dist_sumsq_gather(double *part, const size_t *bounds);
// Gather [lo, hi) of a sharded vector to rank 0: `mine` is this rank's part of it (the
// intersection with shard rank, in order); rank 0 receives hi - lo floats in full (NULL
// elsewhere). Used per tensor by the CUDA checkpoint stream (MPI int counts: < 2^31).
void dist_gather_range(const float *mine, float *full, size_t lo, size_t hi, const size_t *bounds);
// All-gather shards in place: buf (n floats) has this rank's shard filled; afterwards all.
void dist_allgather_shards(float *buf, const size_t *bounds);
// Gather shards to rank 0: full (n floats, rank 0 only; may be NULL elsewhere).
void dist_gather_shards(const float *shard, float *full, const size_t *bounds);
// Every rank contributes k doubles; all receives world*k doubles in rank order.
void dist_allgather_doubles(const double *mine, int k, double *all);
// Every rank contributes k bytes; all receives world*k bytes in rank order.
void dist_allgather_bytes(const void *mine, int k, void *all);
long dist_sum_long(long x);          // exact integer sum over ranks
int dist_any(int flag);              // 1 if any rank passes a non-zero flag
void dist_bcast(void *buf, size_t bytes, int root);


// ---- shard groups (HSDP) and the per-block weight gathers of dist.shard: full ----
// Shard within groups of G consecutive ranks (G = 0: all ranks). Collective; idempotent.
// 0, or -1 with a message naming dist.shard_group when G does not divide the world size.
int dist_shard_group(int G, char *err, size_t errlen);
int dist_shard_world(void);   // G (1 without MPI)
int dist_shard_rank(void);    // this rank's index in its group: its shard
// Non-blocking all-gather of [lo, hi) of a sharded vector within the group, in place: buf
// is the whole vector, this rank's part of [lo, hi) already filled. NULL when there is
// nothing to wait for (one member, empty range). dist_wait completes and frees it.
typedef struct DistReq DistReq;
DistReq *dist_iallgather_range(float *buf, size_t lo, size_t hi, const size_t *bounds);
void dist_wait(DistReq *q);

#endif
