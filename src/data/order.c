// order.c: a rank's share of a global batch of the instance order (see order.h).
#include "data/order.h"

uint64_t order_num_batches(uint64_t n, uint64_t ipb) { return ipb ? n / ipb : 0; }

uint64_t order_rank_count(uint64_t ipb, int W, int r) {
    if (W <= 0 || r < 0 || (uint64_t)r >= ipb) return 0;
    return (ipb - (uint64_t)r + (uint64_t)W - 1) / (uint64_t)W;
}

uint64_t global_batch_rank_instances(const uint32_t *perm, uint64_t n, uint64_t ipb,
                                     uint64_t batches_processed, uint64_t b, int W, int r,
                                     uint32_t *out) {
    uint64_t nb = order_num_batches(n, ipb);
    if (order_rank_count(ipb, W, r) == 0) return 0;
    if (batches_processed >= nb || b >= nb - batches_processed) return 0;
    const uint32_t *row = perm + (batches_processed + b) * ipb;
    uint64_t cnt = 0;
    for (uint64_t k = (uint64_t)r; k < ipb; k += (uint64_t)W) out[cnt++] = row[k];
    return cnt;
}
