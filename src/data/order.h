// order.h: which instances of the global order (see pcg64.h) a data-parallel rank reads,
// exactly as OLMo-core's data loader slices it:
//     n_batches = N // ipb                      (ipb = instances per global batch)
//     batches = perm[:n_batches * ipb].reshape(n_batches, ipb)   (the tail is dropped)
//     batches = batches[batches_processed:]     (resuming skips what was trained on)
//     local = batches[:, r::W]                  (rank r of W takes every W-th instance)
// Global batch b of this run (counting from batches_processed) gives rank r the
// instances batches[b, r::W], in that order.
#ifndef OLMO_ORDER_H
#define OLMO_ORDER_H

#include <stdint.h>

// Number of full global batches in an order of n instances (the tail is dropped).
uint64_t order_num_batches(uint64_t n, uint64_t ipb);
// Instances rank r of W gets per global batch: ceil((ipb - r) / W), 0 if r >= ipb.
uint64_t order_rank_count(uint64_t ipb, int W, int r);

// Writes perm[:nb*ipb].reshape(nb, ipb)[batches_processed + b, r::W] to out (room for
// order_rank_count(ipb, W, r) values) and returns how many were written; returns 0 if
// that batch does not exist (b at or past the last full batch).
uint64_t global_batch_rank_instances(const uint32_t *perm, uint64_t n, uint64_t ipb,
                                     uint64_t batches_processed, uint64_t b, int W, int r,
                                     uint32_t *out);

#endif
