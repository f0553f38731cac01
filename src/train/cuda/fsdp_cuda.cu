// fsdp_cuda.cu: dist.shard grads (ZeRO-2) and full (ZeRO-3/FSDP) on CUDA devices over NCCL,
// one GPU per rank (cuda_model.cuh's CudaShard; docs/distributed.md "Sharding on CUDA").
// The parts are the CPU's (train/fsdp.c): the embedding, each block, the final norm + LM head,
// contiguous ranges of the flat table in model order, met by the graph through its two hooks
// (GraphParams.weights, GraphParams.grads; model/graph.h):
// - gradients (grads and full): each part's backward writes one fp32 part buffer (addressed at
//   the table's offsets), and as soon as the part is done its pieces are reduced (ncclReduce,
//   fp32) onto the ranks whose shards they fall in, each owner copying (first micro-batch) or
//   adding (later ones, in micro-batch order) its piece into its shard of the gradient. Only
//   the shard and one part exist: no full-size gradient. Per element the sum is, for each
//   micro-batch in order, NCCL's sum over the ranks, so with one micro-batch per rank it is
//   ZeRO-1's (cuda_grad_reduce: the same ncclReduce of the same values) bit for bit.
// - weights (full): the master, Adam and (bf16) the shard's compute copy exist for the shard
//   only; two part buffers hold the part computing and the next one. A part is all-gathered
//   (each rank's piece copied in, then grouped ncclBroadcast from each owner: the CPU's uneven
//   chunk-aligned shards, which ncclAllGather's equal counts cannot express) on a second
//   stream, posted when the graph starts the part before it, so the transfer overlaps that
//   part's compute; the compute stream waits for it (bounded, nccl_stream_wait) when the graph
//   needs it. Before a gather overwrites a buffer, the gather stream waits for an event the
//   compute stream recorded after the last kernel reading it. The norm weights stay whole in
//   fp32 on every rank (normf, all-gathered after each step, as ZeRO-1 in bf16 does). The
//   backward gathers each block again (the recompute reads it too).
// One GPU (world 1, no communicator) runs the same parts, buffers, streams and events with
// only the local copies: the first real-GPU check of this code (scripts/gpu-check.sh).
// Only one collective is in flight per communicator at a time: a gradient reduce first waits
// for the gather in flight, so the two streams never run NCCL kernels of one communicator
// concurrently (which real NCCL does not order).
#include <string.h>

#include <vector>

#include "train/cuda/cuda_model.cuh"

struct CudaShard {
    CudaModel *b;
    int L, nparts;                 // parts: 0 the embedding, 1..L the blocks, L+1 the head
    std::vector<size_t> lo, hi;    // each part's range of the flat table
    size_t wsz;                    // bytes of a compute weight
    float *gsh, *gpart;            // the shard's reduced gradient (ohi - olo), the part buffer
    int gcur;                      // the part gpart holds (-1 none)
    char *slot[2];                 // full: the two part buffers of compute weights
    int holds[2];                  // the part each holds (-1 none)
    int inflight;                  // the slot whose gather is posted and not yet waited for, -1
    cudaStream_t cst;              // full: the gather stream
    cudaEvent_t freed[2];          // recorded on the compute stream: the slot's last reader is queued before it
    GraphParams *gp;               // the call in progress (its w and grad are moved part by part)
};

static int index_of(const CudaShard *s, int part) {
    return part == GRAPH_PART_EMBED ? 0 : part == GRAPH_PART_HEAD ? s->nparts - 1 : part + 1;
}

__global__ static void add_kernel(float *y, const float *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}

CudaShard *shard_create(CudaModel *b, float *grad, void *slots) {
    CudaShard *s = new CudaShard;
    s->b = b;
    s->L = b->cfg.n_layers;
    s->nparts = s->L + 2;
    for (int i = 0; i < s->nparts; i++) {
        size_t a, e;
        cuda_part_range(&b->cfg, b->table, i, &a, &e);
        s->lo.push_back(a);
        s->hi.push_back(e);
    }
    s->wsz = b->is_bf16 ? 2 : 4;
    s->gsh = grad;
    s->gpart = grad + (b->ohi - b->olo);
    s->gcur = -1;
    size_t part = 0;
    for (int i = 0; i < s->nparts; i++)
        if (s->hi[i] - s->lo[i] > part) part = s->hi[i] - s->lo[i];
    s->slot[0] = (char *)slots;
    s->slot[1] = slots ? (char *)slots + part * s->wsz : nullptr;
    s->holds[0] = s->holds[1] = -1;
    s->inflight = -1;
    s->gp = nullptr;
    if (slots) {
        CUDA_CHECK(cudaStreamCreate(&s->cst));
        for (int k = 0; k < 2; k++) CUDA_CHECK(cudaEventCreate(&s->freed[k]));
    }
    return s;
}

void shard_destroy(CudaShard *s) {
    if (!s) return;
    if (s->slot[0]) {
        cudaStreamSynchronize(s->cst);
        for (int k = 0; k < 2; k++) cudaEventDestroy(s->freed[k]);
        cudaStreamDestroy(s->cst);
    }
    delete s;
}

// The pieces of [a, e) of buffer base (at table offset a) by owner rank.
static void pieces_of(const CudaModel *b, char *base, size_t a, size_t e, size_t esz, DType t,
                      std::vector<NcclPiece> *p) {
    p->clear();
    for (int r = 0; r < b->world; r++) {
        size_t x = a > b->bounds[r] ? a : b->bounds[r], y = e < b->bounds[r + 1] ? e : b->bounds[r + 1];
        if (x < y) p->push_back({base + (x - a) * esz, y - x, t, r});
    }
}

// ---- weights (full) ----------------------------------------------------------------------
static void wait_inflight(CudaShard *s) {
    if (s->inflight < 0) return;
    if (s->b->comm) nccl_stream_wait(s->b->comm, s->cst, "the weight all-gather");
    else CUDA_CHECK(cudaStreamSynchronize(s->cst));
    s->inflight = -1;
}

// Start part i's gather into slot k on the gather stream, once the compute stream is past
// the slot's last reader.
static void post(CudaShard *s, int i, int k) {
    CudaModel *b = s->b;
    CUDA_CHECK(cudaEventRecord(s->freed[k], b->st));
    CUDA_CHECK(cudaStreamWaitEvent(s->cst, s->freed[k], 0));
    const size_t a = s->lo[i] > b->olo ? s->lo[i] : b->olo, e = s->hi[i] < b->ohi ? s->hi[i] : b->ohi;
    const char *mine = b->is_bf16 ? (const char *)b->wshard : (const char *)b->master;   // the shard's compute copy
    if (a < e)
        CUDA_CHECK(cudaMemcpyAsync(s->slot[k] + (a - s->lo[i]) * s->wsz, mine + (a - b->olo) * s->wsz,
                                   (e - a) * s->wsz, cudaMemcpyDeviceToDevice, s->cst));
    if (b->comm) {
        std::vector<NcclPiece> p;
        pieces_of(b, s->slot[k], s->lo[i], s->hi[i], s->wsz, b->is_bf16 ? DT_BF16 : DT_F32, &p);
        nccl_broadcast_pieces_async(b->comm, s->cst, p.data(), (int)p.size());
    }
    s->holds[k] = i;
    s->inflight = k;
}

static int slot_of(const CudaShard *s, int i) { return s->holds[0] == i ? 0 : s->holds[1] == i ? 1 : -1; }

void shard_weights(void *ctx, int part, int next) {
    CudaShard *s = (CudaShard *)ctx;
    if (part == GRAPH_PART_NONE) {   // the call is over: nothing stays resident across calls
        wait_inflight(s);
        s->holds[0] = s->holds[1] = -1;
        return;
    }
    const int i = index_of(s, part), j = next == GRAPH_PART_NONE ? -1 : index_of(s, next);
    int k = slot_of(s, i);
    if (k < 0) {   // not posted ahead (the first part of a call): gather it now
        wait_inflight(s);
        k = s->holds[0] == j && j >= 0 ? 1 : 0;
        post(s, i, k);
    }
    if (s->inflight == k) wait_inflight(s);
    s->gp->w = s->slot[k] - s->lo[i] * s->wsz;   // the graph addresses weights at table offsets
    if (j >= 0 && slot_of(s, j) < 0) {
        wait_inflight(s);
        post(s, j, 1 - k);   // overlaps part i's compute
    }
}

// ---- gradients (grads, full) ---------------------------------------------------------------
// Part gcur's gradient is complete: its pieces onto their owners, the owner's into its shard.
static void reduce_part(CudaShard *s) {
    CudaModel *b = s->b;
    const int i = s->gcur;
    if (b->comm) {
        std::vector<NcclPiece> p;
        pieces_of(b, (char *)s->gpart, s->lo[i], s->hi[i], 4, DT_F32, &p);
        if (s->slot[0]) wait_inflight(s);   // one collective in flight per communicator
        nccl_reduce_pieces(b->comm, b->st, p.data(), (int)p.size(), "the gradient reduce-scatter");
    }
    const size_t a = s->lo[i] > b->olo ? s->lo[i] : b->olo, e = s->hi[i] < b->ohi ? s->hi[i] : b->ohi;
    if (a >= e) return;
    float *dst = s->gsh + (a - b->olo);
    const float *src = s->gpart + (a - s->lo[i]);
    if (b->pushed == 0)   // the step's first micro-batch writes the shard, later ones add in order
        CUDA_CHECK(cudaMemcpyAsync(dst, src, (e - a) * 4, cudaMemcpyDeviceToDevice, b->st));
    else {
        add_kernel<<<nblk(e - a), 256, 0, b->st>>>(dst, src, e - a);
        CUDA_LAUNCH_CHECK();
    }
}

void shard_grads(void *ctx, int done, int next) {
    CudaShard *s = (CudaShard *)ctx;
    if (done != GRAPH_PART_NONE) reduce_part(s);
    s->gcur = next == GRAPH_PART_NONE ? -1 : index_of(s, next);
    if (s->gcur < 0) return;
    // Zeroed: a backward writes every tensor of its part, but not the table's alignment gaps,
    // which would otherwise carry the last part's values into the shard.
    const size_t n = s->hi[s->gcur] - s->lo[s->gcur];
    CUDA_CHECK(cudaMemsetAsync(s->gpart, 0, n * 4, s->b->st));
    s->gp->grad = s->gpart - s->lo[s->gcur];
}

// One call's GraphParams: the hooks of the shard modes, writing (never accumulating) each part.
void shard_bind(CudaShard *s, GraphParams *p) {
    s->gp = p;
    if (s->slot[0]) {
        p->weights = shard_weights;
        p->weights_ctx = s;
    }
    if (p->grad) {
        p->grads = shard_grads;
        p->grads_ctx = s;
        p->acc = 0;
    }
}

// The whole table's fp32 weights from the host, part by part through the part gradient buffer
// (no full-size staging on the device): the master shard, the compute copy (the whole bf16
// table with grads, the shard's bf16 copy with full) and the replicated norm weights.
void shard_upload(CudaShard *s, const float *host) {
    CudaModel *b = s->b;
    for (int i = 0; i < s->nparts; i++) {
        const size_t pl = s->lo[i], ph = s->hi[i];
        CUDA_CHECK(cudaMemcpy(s->gpart, host + pl, (ph - pl) * 4, cudaMemcpyHostToDevice));
        const size_t a = pl > b->mlo ? pl : b->mlo, e = ph < b->mhi ? ph : b->mhi;
        if (a < e)
            CUDA_CHECK(cudaMemcpyAsync(b->master + (a - b->mlo), s->gpart + (a - pl), (e - a) * 4,
                                       cudaMemcpyDeviceToDevice, b->st));
        if (b->is_bf16 && !s->slot[0]) cast_cuda(b->st, (bf16 *)b->w + pl, DT_BF16, s->gpart, ph - pl);
        for (const CudaModel::NormSeg &g : b->norm_segs)
            if (g.off >= pl && g.off < ph)
                CUDA_CHECK(cudaMemcpyAsync(b->normf + g.coff, s->gpart + (g.off - pl), g.n * 4,
                                           cudaMemcpyDeviceToDevice, b->st));
        CUDA_CHECK(cudaStreamSynchronize(b->st));   // gpart is reused by the next part
    }
    if (b->is_bf16 && s->slot[0]) cast_cuda(b->st, b->wshard, DT_BF16, b->master, b->ohi - b->olo);
    CUDA_CHECK(cudaStreamSynchronize(b->st));
}
