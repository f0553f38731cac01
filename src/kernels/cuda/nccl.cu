// nccl.cu: the collectives of the CUDA backend (NCCL; docs/cuda.md "Multi-GPU"): the
// communicator, grouped reductions and broadcasts of pieces of device buffers, and the
// all-reduce of HSDP's replicas, each waited for with a bound, so a lost peer ends the job
// with a message naming it instead of hanging. Built against NCCL when nccl.h is found (OLMO_NCCL); without it every call but
// nccl_built reports that.
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef OLMO_NCCL
#include <nccl.h>
#endif

#include "kernels/cuda/ops.cuh"

int nccl_built(void) {
#ifdef OLMO_NCCL
    return 1;
#else
    return 0;
#endif
}

#ifdef OLMO_NCCL
#define NCCL_CHECK(x) OLMO_LIB_CHECK("NCCL", ncclResult_t, ncclSuccess, ncclGetErrorString, x)

struct NcclComm {
    ncclComm_t comm;
    int rank, world;
};

int nccl_unique_id(void *id, size_t cap) {
    if (cap < sizeof(ncclUniqueId)) return -1;
    ncclUniqueId u;
    if (ncclGetUniqueId(&u) != ncclSuccess) return -1;
    memcpy(id, &u, sizeof u);
    return (int)sizeof u;
}

NcclComm *nccl_comm_create(const void *id, int rank, int world, char *err, size_t errlen) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    NcclComm *c = new NcclComm;
    c->rank = rank;
    c->world = world;
    ncclResult_t r = ncclCommInitRank(&c->comm, world, u, rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: ncclCommInitRank (rank %d of %d): %s (two ranks on one GPU are refused)", rank,
                 world, ncclGetErrorString(r));
        delete c;
        return nullptr;
    }
    return c;
}

void nccl_comm_destroy(NcclComm *c) {
    if (!c) return;
    if (c->comm) ncclCommDestroy(c->comm);
    delete c;
}

// Wait for the NCCL operations just queued on stream st, polling the communicator's
// asynchronous error meanwhile: a peer whose process died (NCCL reports ncclRemoteError or
// ncclSystemError when its connections close) or that never joins the collective (stalled,
// hung, or killed without the transport noticing) ends this rank with a message after
// OLMO_NCCL_TIMEOUT seconds (default 600) instead of hanging forever; mpirun then stops the
// other ranks. The host blocks here, where it would block at the gradient norm's
// synchronization a few kernels later anyway.
static void nccl_wait(NcclComm *c, cudaStream_t st, const char *what) {
    const char *e = getenv("OLMO_NCCL_TIMEOUT");
    const double limit = e && *e ? atof(e) : 600.0;
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spin = 0;; spin++) {
        cudaError_t q = cudaStreamQuery(st);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) CUDA_CHECK(q);
        ncclResult_t ae = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(c->comm, &ae));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double waited = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
        if ((ae != ncclSuccess && ae != ncclInProgress) || waited > limit) {
            ncclCommAbort(c->comm);
            c->comm = nullptr;
            if (ae != ncclSuccess && ae != ncclInProgress)
                die("NCCL: %s failed on rank %d of %d: %s (a peer rank died or lost its connection)", what, c->rank,
                    c->world, ncclGetErrorString(ae));
            die("NCCL: %s did not complete within %.0f s on rank %d of %d (OLMO_NCCL_TIMEOUT): a peer rank is stalled or gone",
                what, limit, c->rank, c->world);
        }
        if (spin > 1000) usleep(200);
    }
}

static ncclDataType_t nccl_type(DType t) { return t == DT_BF16 ? ncclBfloat16 : ncclFloat; }

void nccl_reduce_pieces(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n, const char *what) {
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++)
        NCCL_CHECK(ncclReduce(p[i].buf, p[i].buf, p[i].count, nccl_type(p[i].t), ncclSum, p[i].root, c->comm, st));
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(c, st, what);
}

void nccl_broadcast_pieces(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n, const char *what) {
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++)
        NCCL_CHECK(ncclBroadcast(p[i].buf, p[i].buf, p[i].count, nccl_type(p[i].t), p[i].root, c->comm, st));
    NCCL_CHECK(ncclGroupEnd());
    nccl_wait(c, st, what);
}

// HSDP (dist.shard_group): a shard summed over its replicas, in place, then waited for.
void nccl_allreduce(NcclComm *c, cudaStream_t st, void *buf, size_t count, DType t, const char *what) {
    NCCL_CHECK(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, c->comm, st));
    nccl_wait(c, st, what);
}

// ---- dist.shard on the device (train/cuda/fsdp_cuda.cu): a broadcast group left in flight
// on its stream (the next part's weight gather, overlapping the compute), waited for later.
void nccl_broadcast_pieces_async(NcclComm *c, cudaStream_t st, const NcclPiece *p, int n) {
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < n; i++)
        NCCL_CHECK(ncclBroadcast(p[i].buf, p[i].buf, p[i].count, nccl_type(p[i].t), p[i].root, c->comm, st));
    NCCL_CHECK(ncclGroupEnd());
}
void nccl_stream_wait(NcclComm *c, cudaStream_t st, const char *what) { nccl_wait(c, st, what); }
#else
static void no_nccl(const char *what) {
    die("%s: this binary was built without NCCL", what);
}
int nccl_unique_id(void *, size_t) { return -1; }
NcclComm *nccl_comm_create(const void *, int, int, char *err, size_t errlen) {
    snprintf(err, errlen, "this binary was built without NCCL");
    return nullptr;
}
void nccl_comm_destroy(NcclComm *) {}
void nccl_reduce_pieces(NcclComm *, cudaStream_t, const NcclPiece *, int, const char *what) { no_nccl(what); }
void nccl_broadcast_pieces(NcclComm *, cudaStream_t, const NcclPiece *, int, const char *what) { no_nccl(what); }
void nccl_allreduce(NcclComm *, cudaStream_t, void *, size_t, DType, const char *what) { no_nccl(what); }
void nccl_broadcast_pieces_async(NcclComm *, cudaStream_t, const NcclPiece *, int) { no_nccl("the weight all-gather"); }
void nccl_stream_wait(NcclComm *, cudaStream_t, const char *what) { no_nccl(what); }
#endif
