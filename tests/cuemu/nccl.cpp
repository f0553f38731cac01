// nccl.cpp: the emulated NCCL (include/nccl.h), over MPI between the ranks' processes.
// Each rank is one process with one emulated device (CUEMU_DEVICES of them per machine,
// cudaSetDevice picks one); like NCCL, two ranks on one device are refused.
//   ncclGetUniqueId      random bytes (the project sends them to the others over MPI)
//   ncclCommInitRank     MPI_Comm_split of MPI_COMM_WORLD by the id; checks size, rank, devices
//   ncclReduce / ncclBroadcast / ncclAllReduce
//                        issued (at ncclGroupEnd when grouped) as non-blocking MPI transfers
//                        that stay pending on the stream; the reduction sums the ranks'
//                        buffers in rank order (fp32 accumulation), so a rerun with the same
//                        world size repeats bit for bit; the all-reduce is every rank
//                        receiving every other's buffer and summing them in that order
//   ncclSend / ncclRecv  the same, point to point (one MPI tag of their own, 31000, outside
//                        the collectives' 0..29999): MPI keeps one pair's messages in posting
//                        order, which is NCCL's matching rule
//   ncclCommGetAsyncError
//                        ncclRemoteError once a peer process of a pending transfer is gone
//   ncclCommAbort        says what the rank was still waiting for, and from whom
// Without mpirun (MPI not initialized) a communicator of one rank works without MPI.
#include <errno.h>
#define OMPI_SKIP_MPICXX 1   // the C API only
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cuemu_internal.h"
#include "cuda_bf16.h"
#include "nccl.h"

struct ncclComm {
    MPI_Comm mc = MPI_COMM_NULL;
    int rank = 0, nranks = 1, device = 0;
    int seq = 0;                  // operation counter: the MPI tag of the next one
    ncclResult_t async = ncclSuccess;
    std::vector<int> pids;        // each rank's process id (one machine)
    int pending = 0;              // operations issued and not complete
};

namespace {

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

ncclResult_t fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cuemu::diag("NCCL: %s", cuemu::vformat(fmt, ap).c_str());
    va_end(ap);
    return r;
}

bool mpi_on() {
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    return on && !off;
}

struct Coll;
std::vector<Coll *> g_live;   // issued and not yet complete, for async-error and abort reports

// One collective on one rank: its MPI requests, and what to do when they are done.
struct Coll : cuemu::PendingOp {
    ncclComm *comm;
    const char *what;
    int root;
    std::vector<MPI_Request> reqs;
    std::vector<int> req_peer;              // the rank each request talks to
    std::vector<std::vector<char>> bufs;    // reduce root: each rank's contribution
    const void *send = nullptr;
    void *recv = nullptr;
    size_t count = 0;
    ncclDataType_t type = ncclFloat32;
    bool finished = false;
    ~Coll() override;

    // Reduce at the root (all-reduce: at every rank): the ranks' buffers summed in rank order.
    void finish() {
        if (finished) return;
        finished = true;
        comm->pending--;
        if (!(!strcmp(what, "ncclReduce") && comm->rank == root) && strcmp(what, "ncclAllReduce")) return;
        auto part = [&](int r) -> const char * { return bufs[r].data(); };
        if (type == ncclFloat32) {
            std::vector<float> acc(count);
            memcpy(acc.data(), part(0), count * 4);
            for (int r = 1; r < comm->nranks; r++) {
                const float *p = (const float *)part(r);
                for (size_t i = 0; i < count; i++) acc[i] += p[i];
            }
            memcpy(recv, acc.data(), count * 4);
        } else if (type == ncclFloat64) {
            std::vector<double> acc(count);
            memcpy(acc.data(), part(0), count * 8);
            for (int r = 1; r < comm->nranks; r++) {
                const double *p = (const double *)part(r);
                for (size_t i = 0; i < count; i++) acc[i] += p[i];
            }
            memcpy(recv, acc.data(), count * 8);
        } else {   // bf16: fp32 accumulation, one rounding
            std::vector<float> acc(count, 0.0f);
            for (int r = 0; r < comm->nranks; r++) {
                const __nv_bfloat16 *p = (const __nv_bfloat16 *)part(r);
                for (size_t i = 0; i < count; i++) acc[i] += __bfloat162float(p[i]);
            }
            for (size_t i = 0; i < count; i++) ((__nv_bfloat16 *)recv)[i] = __float2bfloat16(acc[i]);
        }
    }
    bool progress(bool wait) override {
        if (finished) return true;
        if (comm->async != ncclSuccess) return true;   // aborted: nothing more will come
        if (!reqs.empty()) {
            if (wait) {
                const double t0 = now();
                for (;;) {
                    int done = 0;
                    MPI_Testall((int)reqs.size(), reqs.data(), &done, MPI_STATUSES_IGNORE);
                    if (done) break;
                    if (now() - t0 > 600) {
                        cuemu::diag("NCCL: %s (rank %d) waited 600 s on a stream synchronization; %s", what, comm->rank,
                                    waiting_for().c_str());
                        _exit(86);
                    }
                    usleep(50);
                }
            } else {
                int done = 0;
                MPI_Testall((int)reqs.size(), reqs.data(), &done, MPI_STATUSES_IGNORE);
                if (!done) return false;
            }
        }
        finish();
        return true;
    }
    std::string waiting_for() {
        std::string s;
        for (size_t i = 0; i < reqs.size(); i++) {
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            int done = 0;
            MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
            if (done) continue;
            char b[128];
            snprintf(b, sizeof b, "%srank %d", s.empty() ? "waiting for " : ", ", req_peer[i]);
            if (s.find(b + (s.empty() ? 12 : 2)) == std::string::npos) s += b;
        }
        return s.empty() ? "nothing outstanding" : s;
    }
};

Coll::~Coll() {
    for (size_t i = 0; i < g_live.size(); i++)
        if (g_live[i] == this) { g_live.erase(g_live.begin() + (long)i); break; }
}

struct Queued {
    Coll *c;
    cudaStream_t st;
};
int g_group = 0;
std::vector<Queued> g_queue;

// Post the MPI transfers of one collective (messages above 1 GiB go in pieces).
void post(Coll *c) {
    ncclComm *cm = c->comm;
    const size_t es = type_size(c->type), bytes = c->count * es;
    const int tag = cm->seq++ % 30000;
    auto xfer = [&](bool send, void *buf, int peer) {
        const size_t piece = (size_t)1 << 30;
        for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += piece) {
            const int n = (int)(bytes - off < piece ? bytes - off : piece);
            MPI_Request r;
            if (send) MPI_Isend((char *)buf + off, n, MPI_BYTE, peer, tag, cm->mc, &r);
            else MPI_Irecv((char *)buf + off, n, MPI_BYTE, peer, tag, cm->mc, &r);
            c->reqs.push_back(r);
            c->req_peer.push_back(peer);
            if (bytes == 0) break;
        }
    };
    cm->pending++;
    if (!strcmp(c->what, "ncclSend") || !strcmp(c->what, "ncclRecv")) {
        // Point to point: one tag of its own outside the collectives' 0..29999; MPI keeps the
        // messages of one pair in posting order, which is NCCL's matching rule.
        const size_t piece = (size_t)1 << 30;
        const bool snd = !strcmp(c->what, "ncclSend");
        for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += piece) {
            const int n = (int)(bytes - off < piece ? bytes - off : piece);
            MPI_Request r;
            if (snd) MPI_Isend((char *)c->send + off, n, MPI_BYTE, c->root, 31000, cm->mc, &r);
            else MPI_Irecv((char *)c->recv + off, n, MPI_BYTE, c->root, 31000, cm->mc, &r);
            c->reqs.push_back(r);
            c->req_peer.push_back(c->root);
            if (bytes == 0) break;
        }
        return;
    }
    if (!strcmp(c->what, "ncclReduce")) {
        if (cm->rank == c->root) {
            c->bufs.resize(cm->nranks);
            for (int r = 0; r < cm->nranks; r++) {
                c->bufs[r].resize(bytes);
                if (r == cm->rank) memcpy(c->bufs[r].data(), c->send, bytes);
                else if (cm->nranks > 1) xfer(false, c->bufs[r].data(), r);
            }
        } else xfer(true, (void *)c->send, c->root);
    } else if (!strcmp(c->what, "ncclAllReduce")) {   // every rank a root of its own copy
        c->bufs.resize(cm->nranks);
        for (int r = 0; r < cm->nranks; r++) {
            c->bufs[r].resize(bytes);
            if (r == cm->rank) memcpy(c->bufs[r].data(), c->send, bytes);
            else xfer(false, c->bufs[r].data(), r);
        }
        for (int r = 0; r < cm->nranks; r++)
            if (r != cm->rank) xfer(true, (void *)c->send, r);
    } else {   // broadcast
        if (cm->rank == c->root) {
            if (c->recv != c->send) memcpy(c->recv, c->send, bytes);
            for (int r = 0; r < cm->nranks; r++)
                if (r != cm->rank) xfer(true, (void *)c->send, r);
        } else xfer(false, c->recv, c->root);
    }
}

// Post a collective; the stream's earlier work was completed by ncclGroupEnd (or here
// for an ungrouped one): the operations of one group must not wait for each other.
void issue(Coll *c, cudaStream_t st) {
    post(c);
    g_live.push_back(c);
    cuemu::stream_add_pending(st, c);
}

ncclResult_t enqueue(Coll *c, cudaStream_t st) {
    ncclComm *cm = c->comm;
    const size_t bytes = c->count * type_size(c->type);
    if (c->root < 0 || c->root >= cm->nranks) return fail(ncclInvalidArgument, "%s: root %d of %d ranks", c->what, c->root, cm->nranks);
    const bool root = cm->rank == c->root, p2p = !strncmp(c->what, "ncclSend", 8) || !strcmp(c->what, "ncclRecv");
    const bool reads = p2p ? !strcmp(c->what, "ncclSend") : !strcmp(c->what, "ncclBroadcast") ? root : true;
    const bool writes = p2p ? !strcmp(c->what, "ncclRecv") : strcmp(c->what, "ncclReduce") ? true : root;
    if (p2p && c->root == cm->rank) return fail(ncclInvalidArgument, "%s: peer %d is this rank", c->what, c->root);
    if (bytes && reads && !cuemu::is_device_range(c->send, bytes, nullptr))
        return fail(ncclInvalidArgument, "%s: send buffer %p + %zu bytes is not device memory", c->what, c->send, bytes);
    if (bytes && writes && !cuemu::is_device_range(c->recv, bytes, nullptr))
        return fail(ncclInvalidArgument, "%s: receive buffer %p + %zu bytes is not device memory", c->what, c->recv, bytes);
    if (g_group > 0) g_queue.push_back({c, st});
    else {
        cudaStreamSynchronize(st);
        issue(c, st);
    }
    return ncclSuccess;
}

}   // namespace

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(id->internal, 1, 64, f) : 0;
    if (f) fclose(f);
    if (got != 64) {
        uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)now();
        memcpy(id->internal, &x, 8);
    }
    memcpy(id->internal + 64, "cuemu-nccl", 10);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    *comm = nullptr;
    if (memcmp(id.internal + 64, "cuemu-nccl", 10)) return fail(ncclInvalidArgument, "ncclCommInitRank: not a unique id from ncclGetUniqueId");
    if (nranks < 1 || rank < 0 || rank >= nranks) return fail(ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    ncclComm *c = new ncclComm();
    c->rank = rank;
    c->nranks = nranks;
    c->device = cuemu::current_device();
    c->pids.assign(nranks, getpid());
    if (!mpi_on()) {
        if (nranks != 1) {
            delete c;
            return fail(ncclInvalidUsage, "ncclCommInitRank: %d ranks need mpirun (the emulated NCCL runs over MPI)", nranks);
        }
        *comm = c;
        return ncclSuccess;
    }
    uint32_t color = 2166136261u;
    for (int i = 0; i < 64; i++) color = (color ^ (unsigned char)id.internal[i]) * 16777619u;
    MPI_Comm_split(MPI_COMM_WORLD, (int)(color & 0x3fffffff), rank, &c->mc);
    int size = 0, me = 0;
    MPI_Comm_size(c->mc, &size);
    MPI_Comm_rank(c->mc, &me);
    if (size != nranks || me != rank) {
        MPI_Comm_free(&c->mc);
        delete c;
        return fail(ncclInvalidArgument, "ncclCommInitRank: %d ranks joined with this id, %d expected (rank %d is %d)", size,
                    nranks, rank, me);
    }
    // (device, pid) of every rank; two ranks on one device are refused as NCCL does
    std::vector<int> info(2 * nranks), mine = {c->device, (int)getpid()};
    MPI_Allgather(mine.data(), 2, MPI_INT, info.data(), 2, MPI_INT, c->mc);
    for (int r = 0; r < nranks; r++) c->pids[r] = info[2 * r + 1];
    for (int r = 0; r < nranks; r++)
        for (int s = r + 1; s < nranks; s++)
            if (info[2 * r] == info[2 * s]) {
                MPI_Comm_free(&c->mc);
                delete c;
                return fail(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d", r, s, info[2 * r]);
            }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
    if (!comm) return ncclInvalidArgument;
    if (comm->async == ncclSuccess && comm->pending > 0) {
        // a pending transfer with a peer whose process is gone will never complete
        for (Coll *c : g_live) {
            if (c->comm != comm || c->finished) continue;
            for (size_t i = 0; i < c->reqs.size(); i++) {
                int p = c->req_peer[i], done = 0;
                if (c->reqs[i] == MPI_REQUEST_NULL) continue;
                MPI_Test(&c->reqs[i], &done, MPI_STATUS_IGNORE);
                if (!done && kill(comm->pids[p], 0) != 0 && errno == ESRCH) {
                    cuemu::diag("NCCL: rank %d: peer rank %d (pid %d) has exited during %s", comm->rank, p, comm->pids[p], c->what);
                    comm->async = ncclRemoteError;
                }
            }
        }
    }
    *err = comm->async;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    for (Coll *c : g_live)
        if (c->comm == comm && !c->finished)
            cuemu::diag("NCCL: rank %d aborts %s (root %d): %s", comm->rank, c->what, c->root, c->waiting_for().c_str());
    if (comm->async == ncclSuccess) comm->async = ncclInternalError;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    cudaDeviceSynchronize();
    if (comm->mc != MPI_COMM_NULL && mpi_on()) MPI_Comm_free(&comm->mc);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
    g_group++;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    if (g_group == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g_group == 0) {
        std::vector<Queued> q;
        q.swap(g_queue);
        for (Queued &e : q) cudaStreamSynchronize(e.st);   // earlier work on the streams first
        for (Queued &e : q) issue(e.c, e.st);
    }
    return ncclSuccess;
}

static ncclResult_t collective(const char *what, const void *send, void *recv, size_t count, ncclDataType_t type,
                               int root, ncclComm_t comm, cudaStream_t st) {
    if (!comm) return fail(ncclInvalidArgument, "%s: null communicator", what);
    Coll *c = new Coll();
    c->comm = comm;
    c->what = what;
    c->root = root;
    c->send = send;
    c->recv = recv;
    c->count = count;
    c->type = type;
    return enqueue(c, st);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t st) {
    if (op != ncclSum) return fail(ncclInvalidArgument, "ncclReduce: only ncclSum is emulated");
    if (type != ncclFloat32 && type != ncclFloat64 && type != ncclBfloat16)
        return fail(ncclInvalidArgument, "ncclReduce: type %d not emulated", (int)type);
    return collective("ncclReduce", send, recv, count, type, root, comm, st);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st) {
    if (op != ncclSum) return fail(ncclInvalidArgument, "ncclAllReduce: only ncclSum is emulated");
    if (type != ncclFloat32 && type != ncclFloat64 && type != ncclBfloat16)
        return fail(ncclInvalidArgument, "ncclAllReduce: type %d not emulated", (int)type);
    return collective("ncclAllReduce", send, recv, count, type, 0, comm, st);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t st) {
    return collective("ncclBroadcast", send, recv, count, type, root, comm, st);
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t st) {
    return collective("ncclSend", send, nullptr, count, type, peer, comm, st);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t st) {
    return collective("ncclRecv", nullptr, recv, count, type, peer, comm, st);
}
