// model.cu: the OLMo 3 model's training state on one CUDA device (see cuda_model.h): the
// fp32 master weights and Adam moments of this device's optimizer range, the one fp32
// gradient buffer, the bf16 compute copy of the weights (bf16 mode), and the model graph
// of model/graph.c run on the CUDA ops backend (kernels/ops.h, ops_cuda.cu) -- the same
// graph the CPU runs; only the ops differ:
//   GEMMs       cuBLASLt, fp32 accumulation; bf16 mode: bf16 operands, activations out in
//               bf16, weight gradients out in fp32 straight into the gradient buffer;
//               fp32 mode: plain fp32 GEMMs (CUBLAS_COMPUTE_32F, no TF32).
//   norms       RMSNorm statistics in fp32 (row sums of squares in double); weight
//               gradients from fixed row chunks (partials in double) summed in chunk order.
//   LM head     chunked over tokens: logits chunk (fp32) by cuBLASLt, one block per row for
//               max / logsumexp / CE / z-loss and dlogits, then the two backward GEMMs.
//   embedding   backward: positions grouped by token on the host; one thread per (token,
//               column) sums its positions in order and adds once (no atomics).
//   optimizer   chunked sum of squares, clip and AdamW on the device (optim.cu).
// Nothing uses float atomics; every reduction has a fixed order, so a run is reproducible
// bit for bit on the same GPU model, driver and library versions.
#include <math.h>
#include <string.h>

#include <vector>

#include "train/cuda/cuda_model.cuh"

template <typename P> static P *state_alloc(CudaModel *b, size_t count, bool *oom) {
    void *p = nullptr;
    size_t bytes = (count ? count : 1) * sizeof(P);
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        *oom = true;
        return nullptr;
    }
    b->bytes += bytes;
    b->ptrs.push_back(p);
    return (P *)p;
}

static void state_free(CudaModel *b) {
    for (void *p : b->ptrs) cudaFree(p);
    b->ptrs.clear();
}

// The fp32 norm weight of the tensor at flat offset o: in the master, or in normf.
static float *norm_w(CudaModel *b, size_t o) {
    if (!b->normf) return b->master + (o - b->mlo);
    for (const CudaModel::NormSeg &s : b->norm_segs)
        if (o >= s.off && o < s.off + s.n) return b->normf + s.coff + (o - s.off);
    die("CUDA model: no norm segment at offset %zu", o);
}

// The state buffers of cuda_state_sizes, the op scratch and the graph's activations.
static bool model_init(CudaModel *b) {
    CudaStateSizes s;
    cuda_state_sizes_shard(&b->cfg, b->table, b->is_bf16, b->shard, b->olo, b->ohi, &s);
    b->mlo = s.mlo;
    b->mhi = s.mhi;
    bool oom = false;
    b->master = state_alloc<float>(b, s.master, &oom);
    b->m = state_alloc<float>(b, s.adam, &oom);
    b->v = state_alloc<float>(b, s.adam, &oom);
    b->grad = state_alloc<float>(b, s.grad, &oom);
    b->w = s.weights ? (void *)state_alloc<char>(b, s.weights * s.wsize, &oom) : (void *)b->master;
    if (s.wshard) b->wshard = state_alloc<bf16>(b, s.wshard, &oom);
    if (s.norms) {
        size_t c = 0;
        for (int i = 0; i < b->table->n; i++)
            if (b->table->p[i].kind == PARAM_NORM) {
                b->norm_segs.push_back({b->table->p[i].offset, b->table->p[i].numel, c});
                c += b->table->p[i].numel;
            }
        b->normf = state_alloc<float>(b, s.norms, &oom);
    }
    b->bytes += CUDA_WORKSPACE_BYTES;   // the ops backend's cuBLASLt workspace
    if (oom) return false;
    if (b->shard) b->sh = shard_create(b, b->grad, b->shard == 2 ? b->w : nullptr);
    const int N = b->max_B * b->max_T, Q = b->cfg.n_heads * b->cfg.head_dim;
    OpsLimits lim = {N, b->cfg.d_model > Q ? b->cfg.d_model : Q, b->cfg.n_heads, b->cfg.padded_vocab, b->total, b->max_T, b->cfg.n_kv_heads};
    size_t sb = ops_cuda_reserve(b->be, &lim);
    if (!sb) return false;
    b->bytes += sb;
    // recompute keeps every layer's attention output and lse when they fit (the recompute then
    // skips attention), else only the block inputs (graph.h)
    if (b->cp.C > 1) {   // context parallelism: the member's T / C rows (no fallback to RECOMPUTE_ALL)
        if (graph_init_cp(&b->graph, b->be, &b->cfg, b->table, b->max_B, b->recompute ? GRAPH_RECOMPUTE_KEEP_ATT : 0,
                          &b->cp))
            return false;
    } else if (graph_init(&b->graph, b->be, &b->cfg, b->table, b->max_B, b->max_T, b->recompute ? GRAPH_RECOMPUTE_KEEP_ATT : 0)) {
        if (!b->recompute ||
            graph_init(&b->graph, b->be, &b->cfg, b->table, b->max_B, b->max_T, GRAPH_RECOMPUTE_ALL))
            return false;
        fprintf(stderr, "olmo: note: CUDA: the attention outputs of every layer do not fit beside the rest; the "
                        "recompute re-runs attention (the memory plan assumed they fit)\n");
    }
    b->bytes += b->graph.bytes;
    if (b->ohi > b->olo) {
        CUDA_CHECK(cudaMemset(b->m, 0, (b->ohi - b->olo) * 4));
        CUDA_CHECK(cudaMemset(b->v, 0, (b->ohi - b->olo) * 4));
    }
    // The graph reads the norm weights in fp32: from the master, or from normf.
    ModelOffsets o;
    model_offsets(&o, b->table, &b->cfg);
    memset(&b->nv, 0, sizeof b->nv);
    for (int l = 0; l < b->cfg.n_layers; l++) {
        LayerView *lv = &b->nv.layers[l];
        lv->q_norm = norm_w(b, o.layers[l].q_norm);
        lv->k_norm = norm_w(b, o.layers[l].k_norm);
        lv->attn_norm = norm_w(b, o.layers[l].attn_norm);
        lv->mlp_norm = norm_w(b, o.layers[l].mlp_norm);
    }
    b->nv.final_norm = norm_w(b, o.final_norm);
    return true;
}

// The whole table from the host: through grad (free between steps) into the master
// range, the compute copy and the norm copy.
static void upload_params(CudaModel *b, const float *host) {
    if (b->sh) {   // dist.shard: no full-size gradient to stage through
        shard_upload(b->sh, host);
        return;
    }
    CUDA_CHECK(cudaMemcpy(b->grad, host, b->total * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b->master, b->grad + b->mlo, (b->mhi - b->mlo) * 4, cudaMemcpyDeviceToDevice));
    if (b->is_bf16) cast_cuda(b->st, b->w, DT_BF16, b->grad, b->total);
    for (const CudaModel::NormSeg &s : b->norm_segs)
        CUDA_CHECK(cudaMemcpyAsync(b->normf + s.coff, b->grad + s.off, s.n * 4, cudaMemcpyDeviceToDevice, b->st));
    CUDA_CHECK(cudaStreamSynchronize(b->st));
}

extern "C" {



int cuda_device_count(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (err) snprintf(err, errlen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        cudaGetLastError();
        return 0;
    }
    return n;
}

void cuda_select_device(int local_rank) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return;
    CUDA_CHECK(cudaSetDevice(local_rank % n));
}

void cuda_device_describe(char *out, size_t outlen) {
    cudaDeviceProp p;
    int dev = 0;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) { snprintf(out, outlen, "unknown CUDA device"); return; }
    snprintf(out, outlen, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor, p.multiProcessorCount,
             p.totalGlobalMem / 1073741824.0);
}

size_t cuda_device_free_bytes(void) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return fr;
}

// ---- context parallelism: the graph's collectives over the group's NCCL communicator -------
static void cp_gather(void *ctx, const void *local, int ld, int w, int T, void *global, DType t) {
    CudaModel *b = (CudaModel *)ctx;
    cp_nccl_allgather_rows(b->cpc, b->st, local, ld, w, T, global, t);
}
static void cp_scatter(void *ctx, const void *global, int T, int w, void *local, int ld, DType t) {
    CudaModel *b = (CudaModel *)ctx;
    cp_nccl_reduce_scatter_rows(b->cpc, b->st, global, T, w, local, ld, t);
}

static CudaModel *create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                         int recompute, int shard, size_t opt_lo, size_t opt_hi, const CudaCP *cp, char *err,
                         size_t errlen);

CudaModel *cuda_model_create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                             int recompute, size_t opt_lo, size_t opt_hi, char *err, size_t errlen) {
    return create(cfg, t, max_B, max_T, use_bf16, recompute, 0, opt_lo, opt_hi, NULL, err, errlen);
}

CudaModel *cuda_model_create_shard(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                                   int recompute, int shard, size_t opt_lo, size_t opt_hi, char *err, size_t errlen) {
    return create(cfg, t, max_B, max_T, use_bf16, recompute, shard, opt_lo, opt_hi, NULL, err, errlen);
}

CudaModel *cuda_model_create_cp(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                                int recompute, size_t opt_lo, size_t opt_hi, const CudaCP *cp, char *err,
                                size_t errlen) {
    return create(cfg, t, max_B, max_T, use_bf16, recompute, 0, opt_lo, opt_hi, cp, err, errlen);
}

static CudaModel *create(const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T, int use_bf16,
                         int recompute, int shard, size_t opt_lo, size_t opt_hi, const CudaCP *cp, char *err,
                         size_t errlen) {
    if (!cuda_device_count(err, errlen)) return NULL;
    if (!attention_head_dim_supported(cfg->head_dim)) {
        snprintf(err, errlen, "CUDA backend: head_dim %d not supported (16, 32, 64, 128)", cfg->head_dim);
        return NULL;
    }
    if (opt_lo > opt_hi || opt_hi > t->total) {
        snprintf(err, errlen, "CUDA backend: optimizer range [%zu, %zu) outside the table (%zu)", opt_lo, opt_hi, t->total);
        return NULL;
    }
    char why[256];
    OpsBackend *be = ops_cuda_create(use_bf16 ? DT_BF16 : DT_F32, why, sizeof why);
    if (!be) {
        snprintf(err, errlen, "CUDA backend: %s", why);
        return NULL;
    }
    CudaModel *b = new CudaModel;
    b->cfg = *cfg;
    b->table = t;
    b->max_B = max_B;
    b->max_T = max_T;
    b->is_bf16 = use_bf16;
    b->recompute = recompute;
    b->shard = shard;
    b->total = t->total;
    b->olo = opt_lo;
    b->ohi = opt_hi;
    b->be = be;
    b->st = ops_cuda_stream(be);
    if (cp && cp->C > 1) {
        const size_t part = (size_t)max_T * cp->head_stride * cfg->head_dim * (use_bf16 ? 2 : 4);
        b->cpc = cp_nccl_create(cp->id, cp->member, cp->C, part, err, errlen);
        if (!b->cpc) {   // nothing else allocated yet (the graph is not initialized)
            ops_destroy(be);
            delete b;
            return NULL;
        }
        b->bytes += part;
        b->cpcoll = GraphCPColl{cp_gather, cp_scatter, b};
        b->cp = GraphCP{cp->C, cp->member, max_T, cp->head_stride, &b->cpcoll};
    }
    if (!model_init(b)) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        snprintf(err, errlen, "CUDA backend: out of device memory (%.2f GiB allocated before failing, %.2f GiB total)",
                 b->bytes / 1073741824.0, tot / 1073741824.0);
        cuda_model_destroy(b);
        return NULL;
    }
    CudaMemPlan plan;
    cuda_mem_plan_shard(cfg, t, max_B, max_T, use_bf16, recompute, shard, opt_lo, opt_hi, &plan);
    if ((double)b->bytes != plan.total && b->graph.recompute != GRAPH_RECOMPUTE_ALL && b->cp.C <= 1)
        fprintf(stderr, "olmo: note: CUDA allocated %zu bytes, the memory plan (olmo info) says %.0f\n", b->bytes,
                plan.total);
    return b;
}

void cuda_model_destroy(CudaModel *b) {
    if (!b) return;
    cudaStreamSynchronize(b->st);
    shard_destroy(b->sh);
    nccl_comm_destroy(b->comm);
    nccl_comm_destroy(b->rcomm);
    cp_nccl_destroy(b->cpc);
    graph_free(&b->graph);
    state_free(b);
    ops_destroy(b->be);
    delete b;
}

size_t cuda_model_bytes(const CudaModel *cm) { return cm->bytes; }

void cuda_sync(CudaModel *cm) { CUDA_CHECK(cudaStreamSynchronize(cm->st)); }

void cuda_upload_params(CudaModel *cm, const float *host) { upload_params(cm, host); }

void cuda_download_range(CudaModel *cm, int which, size_t lo, size_t hi, float *host) {
    CudaModel *b = cm;
    const float *src = which == 0 ? b->master : which == 1 ? b->m : b->v;
    size_t a = which == 0 ? b->mlo : b->olo, e = which == 0 ? b->mhi : b->ohi;
    if (lo > hi || lo < a || hi > e) {
        die("CUDA: download [%zu, %zu) of buffer %d outside its device range [%zu, %zu)", lo,
                hi, which, a, e);
    }
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    if (hi > lo) CUDA_CHECK(cudaMemcpy(host, src + (lo - a), (hi - lo) * 4, cudaMemcpyDeviceToHost));
}

void cuda_upload_adam(CudaModel *cm, const float *m, const float *v) {
    CudaModel *b = cm;
    CUDA_CHECK(cudaMemcpy(b->m, m, (b->ohi - b->olo) * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b->v, v, (b->ohi - b->olo) * 4, cudaMemcpyHostToDevice));
}

void cuda_download_adam(CudaModel *cm, float *m, float *v) {
    CudaModel *b = cm;
    cuda_download_range(cm, 1, b->olo, b->ohi, m);
    cuda_download_range(cm, 2, b->olo, b->ohi, v);
}

LossSums cuda_forward_backward(CudaModel *cm, const int32_t *inputs, const int32_t *targets, int B, int T,
                               float z_coef, float inv_count, int want_grads, float *logits_out, float *tok_ce) {
    GraphParams p = {cm->w, &cm->nv, want_grads ? cm->grad : NULL, cm->grad_acc};
    if (cm->sh) shard_bind(cm->sh, &p);   // dist.shard: weights and gradients part by part
    if (cm->cp.C > 1) {   // whole instances in; this member's rows computed (graph.h)
        if (T != cm->cp.T) die("CUDA context parallelism: T=%d, the group's instances have %d tokens", T, cm->cp.T);
        return graph_forward_backward_cp(&cm->graph, &p, inputs, targets, B, z_coef, inv_count, logits_out, tok_ce);
    }
    return graph_forward_backward(&cm->graph, &p, inputs, targets, B, T, z_coef, inv_count, logits_out, tok_ce);
}

void cuda_grad_reset(CudaModel *cm) {
    cm->grad_acc = 0;
    cm->pushed = 0;
}

void cuda_grad_push(CudaModel *cm) {
    cm->grad_acc = 1;
    cm->pushed++;
}

void cuda_grad_finish(CudaModel *cm) {
    if (cm->pushed == 0) { die("CUDA gradient: no micro-batch pushed"); }
}

void cuda_grad_download(CudaModel *cm, float *host) {
    CudaModel *b = cm;
    if (b->shard) die("CUDA: dist.shard %s keeps only this rank's shard of the gradient", b->shard == 2 ? "full" : "grads");
    CUDA_CHECK(cudaStreamSynchronize(b->st));
    CUDA_CHECK(cudaMemcpy(host, b->grad, b->total * 4, cudaMemcpyDeviceToHost));
}

void cuda_grad_poison(CudaModel *cm) {
    poison_cuda(cm->st, cm->grad);
}

void cuda_devstate(CudaModel *cm, DevState *s) {
    CudaModel *b = cm;
    // dist.shard: grad starts at the shard; full: the shard's own bf16 copy
    void *wc = !b->is_bf16 ? nullptr : b->shard == 2 ? b->wshard : (void *)((bf16 *)b->w + b->olo);
    *s = (DevState){b->be, b->table, b->olo, b->ohi, b->master + (b->olo - b->mlo), b->m, b->v,
                    b->shard ? b->grad : b->grad + b->olo, wc, b->is_bf16 ? DT_BF16 : DT_F32};
}

// bf16 with the master sharded: this device's part of each norm weight (just updated in its
// master) into normf, the fp32 norm weights the graph reads, which the all-gather sends to
// the other ranks.
static void norms_refresh(CudaModel *b) {
    if (!b->normf) return;
    for (const CudaModel::NormSeg &s : b->norm_segs) {
        size_t a = s.off > b->olo ? s.off : b->olo, e = s.off + s.n < b->ohi ? s.off + s.n : b->ohi;
        if (a < e)
            CUDA_CHECK(cudaMemcpyAsync(b->normf + s.coff + (a - s.off), b->master + (a - b->mlo), (e - a) * 4,
                                       cudaMemcpyDeviceToDevice, b->st));
    }
}

// ---- multi-GPU ZeRO-1 over NCCL (kernels/cuda/nccl.cu), and HSDP's replicas ------------------

int cuda_nccl_built(void) { return nccl_built(); }

int cuda_nccl_unique_id(void *id, size_t cap) { return nccl_unique_id(id, cap); }

int cuda_nccl_init(CudaModel *b, const void *id, int rank, int world, const size_t *bounds, char *err, size_t errlen) {
    if (!nccl_built()) {
        snprintf(err, errlen, "this binary was built without NCCL");
        return -1;
    }
    if (b->olo != bounds[rank] || b->ohi != bounds[rank + 1]) {
        snprintf(err, errlen, "NCCL: the device optimizer range [%zu, %zu) is not shard %d [%zu, %zu)", b->olo, b->ohi,
                 rank, bounds[rank], bounds[rank + 1]);
        return -1;
    }
    b->comm = nccl_comm_create(id, rank, world, err, errlen);
    if (!b->comm) return -1;
    b->world = world;
    b->rank = rank;
    b->bounds.assign(bounds, bounds + world + 1);
    return 0;
}

int cuda_nccl_init_replicas(CudaModel *b, const void *id, int replica, int replicas, char *err, size_t errlen) {
    b->rcomm = nccl_comm_create(id, replica, replicas, err, errlen);
    return b->rcomm ? 0 : -1;
}

// Shard r of the summed gradient lands on rank r of the group, in place in grad: one reduce
// per shard (root r), grouped. Shards are the CPU's uneven chunk-aligned bounds, which
// ncclReduceScatter (equal counts) cannot express. HSDP: then the shard summed over its
// replicas (ncclAllReduce over rcomm), so every group's rank r holds the same sum.
void cuda_grad_reduce(CudaModel *b) {
    if (!b->shard) {   // dist.shard grads/full: reduced part by part during the backward (fsdp_cuda.cu)
        std::vector<NcclPiece> p;
        for (int r = 0; r < b->world; r++)
            p.push_back({b->grad + b->bounds[r], b->bounds[r + 1] - b->bounds[r], DT_F32, r});
        nccl_reduce_pieces(b->comm, b->st, p.data(), (int)p.size(), "the gradient reduce");
    }
    if (b->rcomm)
        nccl_allreduce(b->rcomm, b->st, b->shard ? b->grad : b->grad + b->olo, b->ohi - b->olo, DT_F32,
                       "the gradient all-reduce across the HSDP replicas");
}

// After AdamW on every shard: each rank broadcasts its shard of the compute weights (bf16;
// fp32 mode: the master itself) and its pieces of the norm weights (bf16 with a sharded
// master keeps them in fp32 on every rank).
void cuda_params_allgather(CudaModel *b) {
    norms_refresh(b);
    if (!b->comm) return;   // dist.shard on one GPU: only the norm copy to refresh
    const DType wt = b->is_bf16 ? DT_BF16 : DT_F32;
    std::vector<NcclPiece> p;
    for (int r = 0; r < b->world && b->shard != 2; r++)   // full: weights are gathered part by part
        p.push_back({(char *)b->w + b->bounds[r] * dtype_size(wt), b->bounds[r + 1] - b->bounds[r], wt, r});
    for (const CudaModel::NormSeg &s : b->norm_segs)
        for (int r = 0; r < b->world; r++) {
            size_t a = s.off > b->bounds[r] ? s.off : b->bounds[r];
            size_t e = s.off + s.n < b->bounds[r + 1] ? s.off + s.n : b->bounds[r + 1];
            if (a < e) p.push_back({b->normf + s.coff + (a - s.off), e - a, DT_F32, r});
        }
    nccl_broadcast_pieces(b->comm, b->st, p.data(), (int)p.size(), "the weight all-gather");
}

}   // extern "C"
