// graph.h: the OLMo 3 model written once, over the op-level backend interface
// (kernels/ops.h): the forward and backward of one micro-batch, recompute, in-place
// micro-batch accumulation and the evaluation forward, on whichever backend owns the
// buffers (the CPU's Model in model.c, the CUDA backend in train/cuda/model.cu):
//   qkv = x Wqkv^T; q = rope(norm_q(qkv_q)); k = rope(norm_k(qkv_k)); v = qkv_v
//   att = attention(q, k, v) (causal, window on sliding layers, optionally within the
//   token's document); a = att Wo^T. Full layers use the YaRN tables when cfg.rope_scaling.
//   h = x + norm_attn(a); m = Wdown(silu(Wgate h) * Wup h); y = h + norm_mlp(m)
// then the final norm and the fused LM head + loss (docs/olmo3.md s.1).
// Types: the residual stream, row statistics and gradients are fp32; the other activations
// and the compute weights are of the backend's activation type (fp32, or bf16 on CUDA).
// The activations are allocated once, through the backend, for a maximum (B, T); the
// memory plan (graph_plan_bytes) is the same allocation walked with a counter.
#ifndef OLMO_GRAPH_H
#define OLMO_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/params.h"

#define GRAPH_MAX_BUFS 48   // the buffers alloc_buffers may take (46 at most today: context parallelism)

// Context parallelism (dist/dist_cp.h): this graph holds member `member` of C's two chunks
// of each T-token instance; K/V are all-gathered in groups of head_stride KV heads.
// coll: the group's collectives over the backend's memory (CUDA: NCCL, cp_cuda.h); NULL:
// dist_cp's host MPI ones (the CPU backend). Both sum a reduce-scatter in member order.
typedef struct {
    void (*allgather)(void *ctx, const void *local, int ld, int w, int T, void *global, DType t);
    void (*reduce_scatter)(void *ctx, const void *global, int T, int w, void *local, int ld, DType t);
    void *ctx;
} GraphCPColl;
typedef struct {
    int C, member, T, head_stride;   // C <= 1: off
    const GraphCPColl *coll;         // NULL: dist_cp's host collectives
} GraphCP;

// Activation recompute: keep each block's input only and recompute its forward before its
// backward (ALL), or keep each layer's attention output and lse too (KEEP_ATT: (Q + NH)
// values a token a layer, 2 GiB for OLMo 3 7B at T 8192) so that the recompute skips
// attention, the costliest part of the forward. Results are bitwise those of no recompute.
#define GRAPH_RECOMPUTE_ALL 1
#define GRAPH_RECOMPUTE_KEEP_ATT 2
// A graph that only runs forwards (olmo eval, generate: model_create_eval, the KV cache):
// one slot of every per-layer buffer, two of the residual stream (block l reads slot l % 2,
// writes the other), no backward scratch. The forward's ops and values are those of the
// other modes (only where they are kept differs); a backward on it is refused.
#define GRAPH_FORWARD_ONLY 3

typedef struct {
    OpsBackend *be;
    ModelConfig cfg;
    ModelOffsets off;     // tensor offsets of the flat table (weights and gradients)
    int max_B, max_T;
    int recompute;        // 0, or GRAPH_RECOMPUTE_ALL / _KEEP_ATT / GRAPH_FORWARD_ONLY (below)
    DType t;              // be->act
    size_t bytes;         // allocated through be
    // activations (device), (max_B * max_T) rows; per-layer buffers hold L slots, or 1 with recompute
    float *res;           // (L+1, N, C) residual stream: res[0] embeddings, res[l+1] block l's output
                          // (GRAPH_FORWARD_ONLY: (2, N, C), res[l % 2] for res[l])
    float *hf;            // (N, C) fp32 h of the block being computed (bf16 only; fp32 keeps h in mid)
    void *xb;             // (Ls, N, C) the bf16 GEMM operand of each block's input (bf16 only)
    void *mid;            // (Ls, N, C) h = x + norm(attn out)
    void *qkv;            // (Ls, N, Q+2KV) fused projection before QK-norm
    void *q, *k, *v;      // (Ls, N, Q), (Ls, N, KV) x2: after QK-norm + RoPE
    void *att;            // (Ls, N, Q) attention output
    void *ao;             // (Ls, N, C) o_proj output
    void *gu, *act, *mo;  // (Ls, N, 2H), (Ls, N, H), (Ls, N, C)
    void *xf;             // (N, C) after the final norm
    float *q_rstd, *k_rstd, *a_rstd, *m_rstd;   // (Ls, N)
    float *lse;           // (Ls, B, NH, T)
    float *xf_rstd;       // (N)
    // backward scratch
    float *dres;          // (N, C) residual gradient
    void *dxf, *da, *datt, *dq, *dk, *dv, *dqkv, *dgu, *dact, *dm;
    float *rope_cos, *rope_sin, *yarn_cos, *yarn_sin;   // (max_T, D/2); yarn_* NULL without YaRN
    int32_t *tok, *tgt, *doc;   // (N) on the device; doc NULL without the document mask
    int32_t *host_i32;    // (2N) host scratch: document starts, eval row positions
    // KV-cache mode (graph_init_kv; generation): per layer K (after k-norm and RoPE at the
    // absolute position) and V of every position so far, their document starts, logits
    int kv_len;           // positions the cache holds (0: training mode)
    int rope_len;         // rows of the RoPE tables: max(max_T, kv_len)
    void *kcache, *vcache;   // (L, kv_len, NKV*D) each
    int32_t *kv_doc;      // (kv_len) document starts with cfg.document_mask; else NULL
    float *kv_logits;     // (max_N, Vp)
    GraphCP cp;           // context parallelism (graph_init_cp); cp.C <= 1: off
    void *kg, *vg, *dkg, *dvg;    // (T, head_stride*D): one head group's K, V of the instance, their gradients
    int32_t *cp_doc;      // (max_B, T) the instance's document starts (with cfg.document_mask)
    void *bufs[GRAPH_MAX_BUFS];   // every allocation, for graph_free
    int nbufs;
} Graph;

// The weights a call reads and the gradient it writes.
typedef struct {
    const void *w;          // the whole table in the compute type (the offsets of off)
    const ModelView *norms; // fp32 norm weights: only q_norm, k_norm, attn_norm, mlp_norm, final_norm are read
    float *grad;            // the whole table's fp32 gradient, or NULL (forward only)
    int acc;                // 1: add this micro-batch's gradient to grad instead of writing it
    // Sharded weights (dist.shard: full, train/fsdp.h) or weights kept as stored (bf16,
    // model/stored.h), or NULL: w holds the whole table.
    // Called before a part of the model first reads its weights in w (and norms): part
    // GRAPH_PART_EMBED, a block 0..L-1, or GRAPH_PART_HEAD (final norm + LM head), in the
    // order of use: the forward E, 0, .., L-1, H, the backward L-1, .., 0 (the KV-cache
    // forward: E, 0, .., L-1, and H when it computes logits); `next` is the part used after
    // it (its gather can start now), GRAPH_PART_NONE at the end, where the call
    // (GRAPH_PART_NONE, GRAPH_PART_NONE) says no part is needed any more.
    void (*weights)(void *ctx, int part, int next);
    void *weights_ctx;
    // Sharded gradients (dist.shard: grads/full on CUDA, train/cuda/fsdp_cuda.cu), or NULL:
    // grad is the whole table's. Called with (GRAPH_PART_NONE, GRAPH_PART_HEAD) before the
    // backward writes its first gradient, then each time a part's gradient is complete:
    // (HEAD, L-1), (l, l-1), .., (0, EMBED), (EMBED, NONE). The hook may move grad (and w)
    // of the GraphParams it was given (a part buffer addressed at the table's offsets);
    // the graph reads p->grad again after each call.
    void (*grads)(void *ctx, int done, int next);
    void *grads_ctx;
} GraphParams;
#define GRAPH_PART_EMBED (-1)
#define GRAPH_PART_HEAD (-3)
#define GRAPH_PART_NONE (-2)

// Allocate the activations for (max_B, max_T) on be and compute the RoPE tables. 0, or -1
// when the backend is out of memory (everything allocated so far is freed).
int graph_init(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T,
               int recompute);
void graph_free(Graph *g);
// KV-cache mode: activations for max_n new tokens of one sequence (one block slot, no
// backward), a cache of max_len positions, RoPE tables for all of them. 0 or -1 (memory).
int graph_init_kv(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_n, int max_len);
// n new tokens (host) at positions p0..p0+n-1 of the one sequence, through every block with
// the same block_forward as training, attending to the cached positions 0..p0+n-1; their K
// and V join the cache. doc_new (n, host): the new positions' document starts (with
// cfg.document_mask; else NULL). logits (host): (n, Vp) with all_logits, else the last
// token's (1, Vp); NULL: none.
void graph_forward_kv(Graph *g, const GraphParams *p, const int32_t *tokens, int n, int p0, const int32_t *doc_new,
                      float *logits, int all_logits);
// Bytes graph_init_kv allocates for these sizes (no backend needed).
size_t graph_plan_bytes_kv(const ModelConfig *cfg, int max_n, int max_len);
// Bytes graph_init allocates for these sizes (no backend needed).
size_t graph_plan_bytes(const ModelConfig *cfg, int max_B, int max_T, DType act, int recompute);
// Bytes graph_init_cp allocates on one member for T-token instances (cp NULL or C <= 1:
// graph_plan_bytes).
size_t graph_plan_bytes_cp(const ModelConfig *cfg, int max_B, int T, DType act, int recompute, const GraphCP *cp);
// Context parallelism: activations for member cp->member's T / C rows of max_B instances of
// cp->T tokens, the RoPE tables at its global positions, the gathered K/V scratch. The
// backend must have the _at attention ops (else an error naming it, exit 1); the group
// (dist_cp_init) must exist. 0, or -1 (memory).
int graph_init_cp(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_B, int recompute,
                  const GraphCP *cp);
// One micro-batch of whole instances, inputs and targets (B, cp->T) on the host (the same
// on every member of the group): the member's rows go through the model, attention sees
// the group's keys. Returns this member's loss sums (its rows; inv_count: 1 / the global
// target count); logits_out (B * T / C, Vp) and tok_ce are of its rows, in its order
// (dist_cp_local_ids). The weight gradient is this member's part of the sum.
LossSums graph_forward_backward_cp(Graph *g, const GraphParams *p, const int32_t *inputs, const int32_t *targets,
                                   int B, float z_coef, float inv_count, float *logits_out, float *tok_ce);

// One micro-batch: inputs, targets (B, T) on the host, targets < 0 masked. Returns the
// loss sums. With p->grad also the backward of loss = (ce + z_coef * z) * inv_count.
// logits_out (B*T, Vp) and tok_ce (B*T) are optional host outputs. Without a gradient or
// logits, only the rows with a target go through the LM head (evaluation).
LossSums graph_forward_backward(Graph *g, const GraphParams *p, const int32_t *inputs, const int32_t *targets, int B,
                                int T, float z_coef, float inv_count, float *logits_out, float *tok_ce);

#endif
