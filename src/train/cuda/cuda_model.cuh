// cuda_model.cuh: the CUDA backend's training state on one device (model.cu): what this
// device holds of the flat parameter table, the graph that runs on it, the communicator.
#pragma once
#include <vector>

extern "C" {
#include "model/graph.h"
}
#include "train/cuda/cuda_model.h"
#include "kernels/cuda/ops.cuh"

struct CudaModel {
    ModelConfig cfg;
    const ParamTable *table;
    int max_B, max_T, is_bf16, recompute = 0;
    size_t total, bytes = 0;
    // What this device holds of the flat table (cuda_model.h): Adam m, v for [olo, ohi)
    // (olo == ohi: none, the host keeps Adam), fp32 master weights for [mlo, mhi) (the
    // whole table, or the optimizer range when bf16 weights are sharded with NCCL).
    size_t olo = 0, ohi = 0, mlo = 0, mhi = 0;
    OpsBackend *be = nullptr;   // the CUDA ops backend: its stream runs everything below
    cudaStream_t st;
    Graph graph;                // activations; graph.bytes of them
    float *master, *m, *v;      // master: mhi - mlo floats; m, v: ohi - olo floats
    // The gradient: one full-size fp32 buffer. The first micro-batch of a step writes it,
    // later ones add to it in place (GEMM beta = 1, norm/embedding kernels +=), in micro-
    // batch order: deterministic, and one buffer whatever the number of micro-batches.
    float *grad;
    int grad_acc = 0;           // 1: a micro-batch was committed, the next backward accumulates
    int pushed = 0;             // micro-batches committed since cuda_grad_reset
    void *w;                    // the compute weights, whole table (== master in fp32 mode)
    // bf16 with a sharded master: fp32 norm weights of the whole model (they are read by
    // the norm kernels on every rank), packed in table order; the segments map them.
    float *normf = nullptr;
    struct NormSeg { size_t off, n, coff; };
    std::vector<NormSeg> norm_segs;
    ModelView nv;               // the fp32 norm weights (master or normf) the graph reads
    // world, rank, bounds, comm: the shard group (all ranks, or HSDP's group of
    // dist.shard_group consecutive ranks); rcomm: HSDP's replicas of this rank's shard (the
    // ranks of the same index in every group), nullptr without HSDP.
    int world = 1, rank = 0;
    std::vector<size_t> bounds;   // world + 1 shard boundaries (dist_shard_bounds), NCCL only
    NcclComm *comm = nullptr;     // NCCL (kernels/cuda/nccl.cu), world > 1 only
    NcclComm *rcomm = nullptr;
    // context parallelism (cuda_model_create_cp): the graph's group and its NCCL collectives
    GraphCP cp = {};
    CpNccl *cpc = nullptr;
    GraphCPColl cpcoll = {};
    std::vector<void *> ptrs;     // the state buffers, for cudaFree
    // dist.shard on the device (fsdp_cuda.cu): 0 optim (ZeRO-1), 1 grads, 2 full. With 1 or 2
    // grad is the shard's reduced gradient followed by one part buffer; with 2 master, m, v
    // are the shard's, w the two part buffers and wshard (bf16) the shard's compute copy.
    int shard = 0;
    void *wshard = nullptr;
    struct CudaShard *sh = nullptr;
};

// ---- fsdp_cuda.cu: the shard modes' hooks and state ------------------------------------------
CudaShard *shard_create(CudaModel *b, float *grad, void *slots);   // slots NULL: grads (weights whole)
void shard_destroy(CudaShard *s);
void shard_bind(CudaShard *s, GraphParams *p);   // the hooks for one graph call over p
void shard_upload(CudaShard *s, const float *host);
