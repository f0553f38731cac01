// dist_cp.h: context parallelism's groups and collectives (dist.context_parallel: C;
// docs/distributed.md). Ranks in groups of C consecutive ranks share one instance; member
// j of a group holds two of the instance's 2C equal chunks, j and 2C-1-j (Llama 3's load
// balance: causal work per member is even), in that order. The collectives move rows of
// per-layer K/V (and their gradients) between the members of one group, with fixed orders:
// the reduce-scatter sums the members' partials in member order 0..C-1, so the result is
// the same at any thread count and timing. Without MPI (or C = 1) there is no group.
#ifndef OLMO_DIST_CP_H
#define OLMO_DIST_CP_H

#include <stdint.h>

// Split the world into groups of C. 0, or -1 when C does not divide the world size or
// C > 1 cannot be served (a build without MPI, or not started by mpirun). Idempotent for
// the same C.
int dist_cp_init(int C);
int dist_cp_degree(void);   // C (1 before dist_cp_init)
int dist_cp_member(void);   // j: this rank's index in its group (rank % C)

// First positions of member j's two chunks of a T-token instance (T divisible by 2C;
// chunk length T / (2C)).
void dist_cp_chunk_starts(int T, int C, int j, int start[2]);
// Member j's rows of (B, T) int32s: out (B, T / C), its chunks in order.
void dist_cp_local_ids(const int32_t *in, int32_t *out, int B, int T, int C, int j);

// All-gather within the group: local holds this member's T / C rows (its chunks in order)
// of width w floats, row stride ld; global (T, w) receives every member's rows at their
// positions.
void dist_cp_allgather_rows(const float *local, int ld, int w, int T, float *global);
// Reduce-scatter within the group: every member holds a partial global (T, w); member j
// receives into local (its T / C rows, stride ld) the sum over members, in member order.
void dist_cp_reduce_scatter_rows(const float *global, int T, int w, float *local, int ld);

#endif
