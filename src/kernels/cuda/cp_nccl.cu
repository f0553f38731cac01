// cp_nccl.cu: context parallelism's collectives on CUDA devices (the NCCL counterpart of
// dist/dist_cp.c; docs/distributed.md): one NCCL communicator per group of C ranks, and
//   all-gather       each member's two chunks of one head group's K or V rows, copied into
//                    their places of the whole instance's (T, w) buffer, then sent to every
//                    other member with ncclSend / ncclRecv straight into theirs;
//   reduce-scatter   each member's partial (T, w) gradient: the rows of member m go to m,
//                    which sums the C partials in member order 0..C-1 (fp32 accumulation,
//                    one rounding in bf16) -- a fixed order, so a run is bitwise repeatable
//                    and the fp32 sum is the CPU's (dist_cp_reduce_scatter_rows).
// The transfers are queued on the ops stream and ordered with the kernels around them; the
// host does not wait. Built against NCCL when nccl.h is found (OLMO_NCCL).
#include <string.h>

#include <vector>
#ifdef OLMO_NCCL
#include <nccl.h>
#endif

#include "kernels/cuda/ops.cuh"

#ifdef OLMO_NCCL
// First rows of member j's two chunks (dist_cp_chunk_starts).
static void chunk_starts(int T, int C, int j, int st[2]) {
    const int ch = T / (2 * C);
    st[0] = j * ch;
    st[1] = (2 * C - 1 - j) * ch;
}

// local (2 ch rows, stride ld) = sum over the C blocks of parts (C, 2 ch, w), in block order.
template <typename T> __global__ void cp_sum_kernel(T *local, int ld, const T *parts, int C, int rows, int w) {
    const long long n = (long long)rows * w, idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    float s = tof(parts[idx]);
    for (int m = 1; m < C; m++) s += tof(parts[(size_t)m * n + idx]);
    local[(size_t)(idx / w) * ld + idx % w] = fromf<T>(s);
}

// global rows s0.. and s1.. (ch each, width w) = local's 2 ch rows of stride ld.
template <typename T> __global__ void cp_place_kernel(T *global, const T *local, int ld, int ch, int w, int s0, int s1) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= 2LL * ch * w) return;
    const int r = (int)(idx / w), x = (int)(idx % w);
    global[(size_t)(r < ch ? s0 + r : s1 + r - ch) * w + x] = local[(size_t)r * ld + x];
}

#define NCCL_CHECK(x) OLMO_LIB_CHECK("NCCL", ncclResult_t, ncclSuccess, ncclGetErrorString, x)

struct CpNccl {
    ncclComm_t comm;
    int C, member;
    void *parts;   // the reduce-scatter's C partials of this member's rows
    size_t cap;    // bytes of parts
};

CpNccl *cp_nccl_create(const void *id, int member, int C, size_t max_bytes, char *err, size_t errlen) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    CpNccl *c = new CpNccl();
    c->C = C;
    c->member = member;
    ncclResult_t r = ncclCommInitRank(&c->comm, C, u, member);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "NCCL: the context-parallel group's ncclCommInitRank (member %d of %d): %s", member, C,
                 ncclGetErrorString(r));
        delete c;
        return nullptr;
    }
    if (cudaMalloc(&c->parts, max_bytes ? max_bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "CUDA: out of memory for the context-parallel reduce-scatter (%zu bytes)", max_bytes);
        ncclCommDestroy(c->comm);
        delete c;
        return nullptr;
    }
    c->cap = max_bytes;
    return c;
}

void cp_nccl_destroy(CpNccl *c) {
    if (!c) return;
    cudaFree(c->parts);
    if (c->comm) ncclCommDestroy(c->comm);
    delete c;
}

static ncclDataType_t cp_type(DType t) { return t == DT_BF16 ? ncclBfloat16 : ncclFloat; }

// One NCCL group: to each peer m its blocks snd[2m], snd[2m+1], from it rcv[2m], rcv[2m+1]
// (blk elements each; this member's own entries are skipped).
static void exchange(CpNccl *c, cudaStream_t st, DType t, size_t blk, const char *const *snd, char *const *rcv) {
    NCCL_CHECK(ncclGroupStart());
    for (int m = 0; m < c->C; m++)
        for (int k = 0; m != c->member && k < 2; k++) {
            NCCL_CHECK(ncclSend(snd[2 * m + k], blk, cp_type(t), m, c->comm, st));
            NCCL_CHECK(ncclRecv(rcv[2 * m + k], blk, cp_type(t), m, c->comm, st));
        }
    NCCL_CHECK(ncclGroupEnd());
}

void cp_nccl_allgather_rows(CpNccl *c, cudaStream_t st, const void *local, int ld, int w, int T, void *global,
                            DType t) {
    const int C = c->C, ch = T / (2 * C);
    const size_t es = dtype_size(t), blk = (size_t)ch * w;
    int me[2];
    chunk_starts(T, C, c->member, me);
    // this member's rows (stride ld) into their places
    const long long n = 2LL * ch * w;
    DT_DISPATCH(t, TT, cp_place_kernel<TT><<<(int)((n + 255) / 256), 256, 0, st>>>((TT *)global, (const TT *)local, ld,
                                                                                  ch, w, me[0], me[1]));
    CUDA_CHECK(cudaGetLastError());
    std::vector<const char *> snd(2 * C);
    std::vector<char *> rcv(2 * C);
    for (int m = 0; m < C; m++) {   // to every peer this member's chunks; from it its chunks
        int s[2];
        chunk_starts(T, C, m, s);
        for (int k = 0; k < 2; k++) {
            snd[2 * m + k] = (const char *)global + me[k] * w * es;
            rcv[2 * m + k] = (char *)global + s[k] * w * es;
        }
    }
    exchange(c, st, t, blk, snd.data(), rcv.data());
}

void cp_nccl_reduce_scatter_rows(CpNccl *c, cudaStream_t st, const void *global, int T, int w, void *local, int ld,
                                 DType t) {
    const int C = c->C, ch = T / (2 * C);
    const size_t es = dtype_size(t), blk = (size_t)ch * w, part = 2 * blk;
    if ((size_t)C * part * es > c->cap) die("context parallelism: %zu bytes of partials exceed the %zu reserved", (size_t)C * part * es, c->cap);
    char *parts = (char *)c->parts;
    int me[2];
    chunk_starts(T, C, c->member, me);
    for (int k = 0; k < 2; k++)   // this member's own partial of its rows: block `member`
        CUDA_CHECK(cudaMemcpyAsync(parts + ((size_t)c->member * part + k * blk) * es, (const char *)global + me[k] * w * es,
                                   blk * es, cudaMemcpyDeviceToDevice, st));
    std::vector<const char *> snd(2 * C);
    std::vector<char *> rcv(2 * C);
    for (int m = 0; m < C; m++) {   // to every peer its rows of this partial; from it its partial of ours
        int s[2];
        chunk_starts(T, C, m, s);
        for (int k = 0; k < 2; k++) {
            snd[2 * m + k] = (const char *)global + s[k] * w * es;
            rcv[2 * m + k] = parts + ((size_t)m * part + k * blk) * es;
        }
    }
    exchange(c, st, t, blk, snd.data(), rcv.data());
    const long long n = (long long)part;
    DT_DISPATCH(t, TT, cp_sum_kernel<TT><<<(int)((n + 255) / 256), 256, 0, st>>>((TT *)local, ld, (const TT *)parts, C,
                                                                                2 * ch, w));
    CUDA_CHECK(cudaGetLastError());
}
#else
CpNccl *cp_nccl_create(const void *, int, int, size_t, char *err, size_t errlen) {
    snprintf(err, errlen, "this binary was built without NCCL (context parallelism on CUDA needs it)");
    return nullptr;
}
void cp_nccl_destroy(CpNccl *) {}
void cp_nccl_allgather_rows(CpNccl *, cudaStream_t, const void *, int, int, int, void *, DType) {
    die("context parallelism: this binary was built without NCCL");
}
void cp_nccl_reduce_scatter_rows(CpNccl *, cudaStream_t, const void *, int, int, void *, int, DType) {
    die("context parallelism: this binary was built without NCCL");
}
#endif
