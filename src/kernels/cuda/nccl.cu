// nccl.cu: the collectives of the CUDA backend's ZeRO-1 step over NCCL (docs/cuda.md
// "Multi-GPU"): the communicator, the gradient reduce (shard r of the sum onto rank r) and
// the all-gather of the updated weights, each waited for with a bound on a lost peer.
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cuda/cuda_model.cuh"

extern "C" {

int cuda_nccl_built(void) {
#ifdef OLMO_NCCL
    return 1;
#else
    return 0;
#endif
}

int cuda_nccl_unique_id(void *id, size_t cap) {
#ifdef OLMO_NCCL
    if (cap < sizeof(ncclUniqueId)) return -1;
    ncclUniqueId u;
    if (ncclGetUniqueId(&u) != ncclSuccess) return -1;
    memcpy(id, &u, sizeof u);
    return (int)sizeof u;
#else
    (void)id, (void)cap;
    return -1;
#endif
}

#ifdef OLMO_NCCL
#define NCCL_CHECK(x) OLMO_LIB_CHECK("NCCL", ncclResult_t, ncclSuccess, ncclGetErrorString, x)

// Wait for the NCCL operations just queued on the model's stream, polling the
// communicator's asynchronous error meanwhile: a peer whose process died (NCCL reports
// ncclRemoteError or ncclSystemError when its connections close) or that never joins the
// collective (stalled, hung, or killed without the transport noticing) ends this rank with
// a message after OLMO_NCCL_TIMEOUT seconds (default 600) instead of hanging forever;
// mpirun then stops the other ranks. The host blocks here, where it would block at the
// gradient norm's synchronization a few kernels later anyway.
static void nccl_wait(CudaModel *b, const char *what) {
    const char *e = getenv("OLMO_NCCL_TIMEOUT");
    const double limit = e && *e ? atof(e) : 600.0;
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spin = 0;; spin++) {
        cudaError_t q = cudaStreamQuery(b->st);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) CUDA_CHECK(q);
        ncclResult_t ae = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(b->comm, &ae));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double waited = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
        if ((ae != ncclSuccess && ae != ncclInProgress) || waited > limit) {
            ncclCommAbort(b->comm);
            b->comm = nullptr;
            if (ae != ncclSuccess && ae != ncclInProgress)
                fprintf(stderr, "olmo: error: NCCL: %s failed on rank %d of %d: %s (a peer rank died or lost its connection)\n",
                        what, b->rank, b->world, ncclGetErrorString(ae));
            else
                fprintf(stderr, "olmo: error: NCCL: %s did not complete within %.0f s on rank %d of %d (OLMO_NCCL_TIMEOUT): a peer rank is stalled or gone\n",
                        what, limit, b->rank, b->world);
            exit(1);
        }
        if (spin > 1000) usleep(200);
    }
}
#endif

int cuda_nccl_init(CudaModel *cm, const void *id, int rank, int world, const size_t *bounds, char *err, size_t errlen) {
#ifdef OLMO_NCCL
    CudaModel *b = cm;
    if (b->olo != bounds[rank] || b->ohi != bounds[rank + 1]) {
        snprintf(err, errlen, "NCCL: the device optimizer range [%zu, %zu) is not shard %d [%zu, %zu)", b->olo, b->ohi,
                 rank, bounds[rank], bounds[rank + 1]);
        return -1;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&b->comm, world, u, rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: ncclCommInitRank (rank %d of %d): %s (two ranks on one GPU are refused)", rank,
                 world, ncclGetErrorString(r));
        b->comm = nullptr;
        return -1;
    }
    b->world = world;
    b->rank = rank;
    b->bounds.assign(bounds, bounds + world + 1);
    return 0;
#else
    (void)cm, (void)id, (void)rank, (void)world, (void)bounds;
    snprintf(err, errlen, "this binary was built without NCCL");
    return -1;
#endif
}

// Shard r of the summed gradient lands on rank r, in place in grad: one ncclReduce per
// shard (root r), grouped so NCCL runs them together. Shards are the CPU's uneven
// chunk-aligned bounds, which ncclReduceScatter (equal counts) cannot express.
void cuda_grad_reduce(CudaModel *cm) {
#ifdef OLMO_NCCL
    CudaModel *b = cm;
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < b->world; r++) {
        float *p = b->grad + b->bounds[r];
        NCCL_CHECK(ncclReduce(p, p, b->bounds[r + 1] - b->bounds[r], ncclFloat, ncclSum, r, b->comm, b->st));
    }
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(b, "the gradient reduce");
#else
    (void)cm;
    fprintf(stderr, "olmo: error: cuda_grad_reduce: built without NCCL\n");
    exit(1);
#endif
}

// After AdamW on every shard: each rank broadcasts its shard of the compute weights (bf16;
// fp32 mode: the master itself) and its pieces of the norm weights (bf16 with a sharded
// master keeps them in fp32 on every rank).
void cuda_params_allgather(CudaModel *cm) {
#ifdef OLMO_NCCL
    CudaModel *b = cm;
    const ncclDataType_t wt = b->is_bf16 ? ncclBfloat16 : ncclFloat;
    const size_t es = b->is_bf16 ? 2 : 4;
    char *w = (char *)b->w;
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < b->world; r++) {
        char *p = w + b->bounds[r] * es;
        NCCL_CHECK(ncclBroadcast(p, p, b->bounds[r + 1] - b->bounds[r], wt, r, b->comm, b->st));
    }
    for (const CudaModel::NormSeg &s : b->norm_segs)
        for (int r = 0; r < b->world; r++) {
            size_t a = s.off > b->bounds[r] ? s.off : b->bounds[r];
            size_t e = s.off + s.n < b->bounds[r + 1] ? s.off + s.n : b->bounds[r + 1];
            if (a >= e) continue;
            float *p = b->normf + s.coff + (a - s.off);
            NCCL_CHECK(ncclBroadcast(p, p, e - a, ncclFloat, r, b->comm, b->st));
        }
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(b, "the weight all-gather");
#else
    (void)cm;
    fprintf(stderr, "olmo: error: cuda_params_allgather: built without NCCL\n");
    exit(1);
#endif
}

}   // extern "C"
