// graph.c: the OLMo 3 model over kernels/ops.h (see graph.h): allocation (and its plan),
// the block forward, the backward, and the forward-backward of one micro-batch.
#include "model/graph.h"

#include <stdlib.h>
#include <string.h>

#include "dist/dist_cp.h"
#include "model/docmask.h"
#include "util/common.h"

typedef struct { int N, C, Q, KV, QKV, H, NH, NKV, D, L; } Dims;

static Dims dims(const ModelConfig *c, int B, int T) {
    Dims d;
    d.N = B * T;
    d.C = c->d_model;
    d.NH = c->n_heads;
    d.NKV = c->n_kv_heads;
    d.D = c->head_dim;
    d.Q = d.NH * d.D;
    d.KV = d.NKV * d.D;
    d.QKV = d.Q + 2 * d.KV;
    d.H = c->mlp_hidden;
    d.L = c->n_layers;
    return d;
}

// ---- allocation: one walk over the buffers, with the backend or with a counter -----------
typedef struct {
    OpsBackend *be;   // NULL: count only
    size_t bytes;
    int oom;
    void **ptrs;      // the graph's bufs
    int n;
} Alloc;

static void *take(Alloc *a, size_t bytes) {
    if (bytes == 0) bytes = 1;
    bytes = (bytes + 255) / 256 * 256;   // every buffer 256-byte aligned in the plan, as on a device
    a->bytes += bytes;
    if (!a->be) return NULL;
    if (a->n == GRAPH_MAX_BUFS) die("graph: more than %d buffers; raise GRAPH_MAX_BUFS", GRAPH_MAX_BUFS);
    void *p = a->oom ? NULL : a->be->ops->alloc(a->be, bytes);
    if (!p) a->oom = 1;
    else a->ptrs[a->n++] = p;
    return p;
}

// The backward's scratch after dxf (dres comes before it), in the order they always had.
static void backward_buffers(Graph *g, Alloc *a, const Dims *d, size_t es) {
    const size_t N = (size_t)d->N;
    g->da = take(a, es * N * d->C);
    g->datt = take(a, es * N * d->Q);
    g->dq = take(a, es * N * d->Q);
    g->dk = take(a, es * N * d->KV);
    g->dv = take(a, es * N * d->KV);
    g->dqkv = take(a, es * N * d->QKV);
    g->dgu = take(a, es * N * 2 * d->H);
    g->dact = take(a, es * N * d->H);
    g->dm = take(a, es * N * d->C);
}

static void alloc_buffers(Graph *g, Alloc *a, const ModelConfig *cfg, int max_B, int max_T, DType t, int recompute,
                          int kv_len) {
    const Dims d = dims(cfg, max_B, max_T);
    const size_t N = (size_t)d.N, Ls = recompute ? 1 : (size_t)d.L, es = dtype_size(t), f = sizeof(float);
    const int fwd = recompute == GRAPH_FORWARD_ONLY, bf = t == DT_BF16;
    const size_t La = recompute == GRAPH_RECOMPUTE_ALL || fwd ? 1 : (size_t)d.L;   // att, lse
    g->res = take(a, f * (fwd ? 2 : (size_t)d.L + 1) * N * d.C);
    g->hf = bf ? take(a, f * N * d.C) : NULL;
    g->xb = bf ? take(a, es * Ls * N * d.C) : NULL;
    g->mid = take(a, es * Ls * N * d.C);
    g->qkv = take(a, es * Ls * N * d.QKV);
    g->q = take(a, es * Ls * N * d.Q);
    g->k = take(a, es * Ls * N * d.KV);
    g->v = take(a, es * Ls * N * d.KV);
    g->att = take(a, es * La * N * d.Q);
    g->ao = take(a, es * Ls * N * d.C);
    g->gu = take(a, es * Ls * N * 2 * d.H);
    g->act = take(a, es * Ls * N * d.H);
    g->mo = take(a, es * Ls * N * d.C);
    g->xf = take(a, es * N * d.C);
    g->q_rstd = take(a, f * Ls * N);
    g->k_rstd = take(a, f * Ls * N);
    g->a_rstd = take(a, f * Ls * N);
    g->m_rstd = take(a, f * Ls * N);
    g->lse = take(a, f * La * N * d.NH);
    g->xf_rstd = take(a, f * N);
    if (!fwd) g->dres = take(a, f * N * d.C);
    g->dxf = take(a, es * N * d.C);   // also the evaluation's gathered rows (eval_head)
    if (!fwd) backward_buffers(g, a, &d, es);
    g->rope_len = kv_len > max_T ? kv_len : max_T;
    const size_t half = (size_t)g->rope_len * d.D / 2;
    g->rope_cos = take(a, f * half);
    g->rope_sin = take(a, f * half);
    const int yarn = cfg->rope_scaling.type == ROPE_SCALING_YARN;
    g->yarn_cos = yarn ? take(a, f * half) : NULL;
    g->yarn_sin = yarn ? take(a, f * half) : NULL;
    g->tok = take(a, sizeof(int32_t) * N);
    g->tgt = take(a, sizeof(int32_t) * N);
    const int cp = g->cp.C > 1;
    g->doc = cfg->document_mask && !cp ? take(a, sizeof(int32_t) * N) : NULL;
    if (cp) {   // context parallelism: one head group's K/V of the whole instance, their gradients
        const size_t kvg = (size_t)g->cp.T * g->cp.head_stride * d.D;
        g->kg = take(a, es * kvg);
        g->vg = take(a, es * kvg);
        g->dkg = take(a, es * kvg);
        g->dvg = take(a, es * kvg);
        g->cp_doc = cfg->document_mask ? take(a, sizeof(int32_t) * max_B * (size_t)g->cp.T) : NULL;
    }
    if (kv_len) {
        g->kcache = take(a, es * (size_t)d.L * kv_len * d.KV);
        g->vcache = take(a, es * (size_t)d.L * kv_len * d.KV);
        g->kv_doc = cfg->document_mask ? take(a, sizeof(int32_t) * kv_len) : NULL;
        g->kv_logits = take(a, f * N * cfg->padded_vocab);
    }
}

size_t graph_plan_bytes(const ModelConfig *cfg, int max_B, int max_T, DType act, int recompute) {
    return graph_plan_bytes_cp(cfg, max_B, max_T, act, recompute, NULL);
}

size_t graph_plan_bytes_cp(const ModelConfig *cfg, int max_B, int T, DType act, int recompute, const GraphCP *cp) {
    static Graph g;   // only g.cp is read
    Alloc a = {0};
    memset(&g.cp, 0, sizeof g.cp);
    if (cp && cp->C > 1) g.cp = *cp;
    alloc_buffers(&g, &a, cfg, max_B, g.cp.C > 1 ? T / g.cp.C : T, act, recompute, 0);
    return a.bytes;
}

size_t graph_plan_bytes_kv(const ModelConfig *cfg, int max_n, int max_len) {
    static Graph g;   // only g.cp is read (none here)
    Alloc a = {0};
    memset(&g.cp, 0, sizeof g.cp);
    alloc_buffers(&g, &a, cfg, 1, max_n, DT_F32, GRAPH_FORWARD_ONLY, max_len);
    return a.bytes;
}

static void upload_rope_tables(Graph *g) {
    const size_t half = (size_t)g->rope_len * g->cfg.head_dim / 2;
    float *c = xmalloc(sizeof(float) * half), *s = xmalloc(sizeof(float) * half);
    OpsBackend *be = g->be;
    // The CPU's function computes the tables for every backend, so all rotate by the same floats.
    // Context parallelism: the rows of the instance's global positions this member holds, in
    // its row order (the rope op then rotates local row t by table row t, unchanged).
    const int cp = g->cp.C > 1, D = g->cfg.head_dim;
    const size_t ghalf = cp ? (size_t)g->cp.T * D / 2 : 0;   // the whole instance's tables
    float *gc = cp ? xmalloc(sizeof(float) * ghalf) : c, *gs = cp ? xmalloc(sizeof(float) * ghalf) : s;
    for (int y = 0; y < (g->yarn_cos ? 2 : 1); y++) {
        rope_tables(gc, gs, cp ? g->cp.T : g->rope_len, D, g->cfg.rope_theta, y ? &g->cfg.rope_scaling : NULL);
        if (cp) {
            const int ch = g->cp.T / (2 * g->cp.C);
            int st[2];
            dist_cp_chunk_starts(g->cp.T, g->cp.C, g->cp.member, st);
            for (int k = 0; k < 2; k++) {
                memcpy(c + (size_t)k * ch * D / 2, gc + (size_t)st[k] * D / 2, sizeof(float) * ch * D / 2);
                memcpy(s + (size_t)k * ch * D / 2, gs + (size_t)st[k] * D / 2, sizeof(float) * ch * D / 2);
            }
        }
        be->ops->upload(be, y ? g->yarn_cos : g->rope_cos, c, sizeof(float) * half);
        be->ops->upload(be, y ? g->yarn_sin : g->rope_sin, s, sizeof(float) * half);
    }
    if (cp) {
        free(gc);
        free(gs);
    }
    free(c);
    free(s);
}

static int init(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T,
                int recompute, int kv_len, const GraphCP *cp) {
    memset(g, 0, sizeof *g);
    if (cp) g->cp = *cp;
    g->be = be;
    g->cfg = *cfg;
    model_offsets(&g->off, t, cfg);
    g->max_B = max_B;
    g->max_T = max_T;
    g->recompute = recompute;
    g->t = be->act;
    Alloc a = {0};
    a.be = be;
    a.ptrs = g->bufs;
    alloc_buffers(g, &a, cfg, max_B, max_T, g->t, recompute, kv_len);
    g->bytes = a.bytes;
    g->kv_len = kv_len;
    g->nbufs = a.n;
    if (a.oom) {
        for (int i = 0; i < a.n; i++) be->ops->free(be, a.ptrs[i]);
        memset(g, 0, sizeof *g);
        return -1;
    }
    // Context parallelism also keeps the instance's document starts and the member's own
    // inputs and targets here, after the 2 * max_B * max_T the micro-batch itself uses.
    g->host_i32 = xmalloc(sizeof(int32_t) * (size_t)max_B * (g->cp.C > 1 ? 4 * (size_t)g->cp.T : 2 * (size_t)max_T));
    upload_rope_tables(g);
    return 0;
}

int graph_init(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_B, int max_T,
               int recompute) {
    return init(g, be, cfg, t, max_B, max_T, recompute, 0, NULL);
}

int graph_init_cp(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_B, int recompute,
                  const GraphCP *cp) {
    if (!be->ops->attention_forward_at || !be->ops->attention_backward_at)
        die("dist.context_parallel: the %s backend has no context-parallel attention (the CPU has)", be->name);
    if (cp->C < 2 || cp->T % (2 * cp->C) || cp->head_stride < 1 || cfg->n_kv_heads % cp->head_stride)
        die("graph_init_cp: C=%d, T=%d, head_stride=%d do not fit (T %% 2C == 0, head_stride | n_kv_heads %d)", cp->C,
            cp->T, cp->head_stride, cfg->n_kv_heads);
    return init(g, be, cfg, t, max_B, cp->T / cp->C, recompute, 0, cp);
}

int graph_init_kv(Graph *g, OpsBackend *be, const ModelConfig *cfg, const ParamTable *t, int max_n, int max_len) {
    return init(g, be, cfg, t, 1, max_n, GRAPH_FORWARD_ONLY, max_len, NULL);
}

void graph_free(Graph *g) {
    if (!g->be) return;
    for (int i = 0; i < g->nbufs; i++) g->be->ops->free(g->be, g->bufs[i]);
    free(g->host_i32);
    memset(g, 0, sizeof *g);
}

// ---- the block -----------------------------------------------------------------------------
// Pointers of layer l's activations (slot 0 with recompute; att and lse keep layer l's slot
// under GRAPH_RECOMPUTE_KEEP_ATT).
typedef struct {
    void *qkv, *q, *k, *v, *att, *ao, *h, *gu, *act, *mo;
    float *q_rstd, *k_rstd, *a_rstd, *m_rstd, *lse;
    void *xg;            // the GEMM operand of the block's input: its bf16 copy, or the fp32 row itself
    float *x, *y, *h32;  // fp32 block input, output, h
} LayerBufs;

// The slot of res[l]: l, or l % 2 in a forward-only graph.
static size_t res_slot(const Graph *g, int l) { return g->recompute == GRAPH_FORWARD_ONLY ? (size_t)(l & 1) : (size_t)l; }

static void *at(void *base, size_t elems, DType t) { return (char *)base + elems * dtype_size(t); }

static LayerBufs layer_bufs(const Graph *g, int l, const Dims *d) {
    const int fwd = g->recompute == GRAPH_FORWARD_ONLY;
    const size_t N = d->N, sl = g->recompute ? 0 : (size_t)l, sa = g->recompute == GRAPH_RECOMPUTE_ALL || fwd ? 0 : (size_t)l;
    const DType t = g->t;
    LayerBufs b;
    b.qkv = at(g->qkv, sl * N * d->QKV, t);
    b.q = at(g->q, sl * N * d->Q, t);
    b.k = at(g->k, sl * N * d->KV, t);
    b.v = at(g->v, sl * N * d->KV, t);
    b.att = at(g->att, sa * N * d->Q, t);
    b.ao = at(g->ao, sl * N * d->C, t);
    b.h = at(g->mid, sl * N * d->C, t);
    b.gu = at(g->gu, sl * N * 2 * d->H, t);
    b.act = at(g->act, sl * N * d->H, t);
    b.mo = at(g->mo, sl * N * d->C, t);
    b.q_rstd = g->q_rstd + sl * N;
    b.k_rstd = g->k_rstd + sl * N;
    b.a_rstd = g->a_rstd + sl * N;
    b.m_rstd = g->m_rstd + sl * N;
    b.lse = g->lse + sa * N * d->NH;
    b.x = g->res + res_slot(g, l) * N * d->C;
    b.y = g->res + res_slot(g, l + 1) * N * d->C;
    b.xg = t == DT_BF16 ? at(g->xb, sl * N * d->C, t) : (void *)b.x;
    b.h32 = t == DT_BF16 ? g->hf : (float *)b.h;
    return b;
}

static const void *W(const GraphParams *p, size_t off, DType t) { return (const char *)p->w + off * dtype_size(t); }

// Layer l's rotation tables from position p0 on (the rope op rotates row t by table row t):
// YaRN's on the full-attention layers when the config has them.
static void rope_of(const Graph *g, int l, int p0, const float **c, const float **s) {
    const int scaled = g->yarn_cos && model_layer_rope_scaled(&g->cfg, l);
    const size_t off = (size_t)p0 * g->cfg.head_dim / 2;
    *c = (scaled ? g->yarn_cos : g->rope_cos) + off;
    *s = (scaled ? g->yarn_sin : g->rope_sin) + off;
}

// Where block l's attention finds its keys: NULL for training (the micro-batch itself);
// generation: the layer's cache, the new rows at positions p0.. of one sequence.
typedef struct {
    int p0;
    void *k, *v;   // layer l's cache (kv_len, NKV*D)
} KVCtx;

// Context parallelism (graph_init_cp): block attention over this member's two chunks of each
// instance, at their global positions. Per row b and per group of head_stride KV heads (and
// their query heads), the group's K and V rows are all-gathered into the whole instance's
// (T, head_stride*D); each chunk's queries attend to keys 0..its end (causal, window,
// document mask from the instance's EOS positions). The backward gathers K, V again, adds
// both chunks' dK, dV over the whole instance, and reduce-scatters them to their owners.
// lse: per (row, chunk) an (NH, chunk) block. Collectives: g->cp.coll's (CUDA: NCCL), else
// dist_cp's host MPI ones (the CPU).
static void cp_gather(const Graph *g, const void *local, int ld, int w, void *global) {
    const GraphCPColl *c = g->cp.coll;
    if (c) c->allgather(c->ctx, local, ld, w, g->cp.T, global, g->t);
    else dist_cp_allgather_rows(local, ld, w, g->cp.T, global);
}
static void cp_scatter(const Graph *g, const void *global, int w, void *local, int ld) {
    const GraphCPColl *c = g->cp.coll;
    if (c) c->reduce_scatter(c->ctx, global, g->cp.T, w, local, ld, g->t);
    else dist_cp_reduce_scatter_rows(global, g->cp.T, w, local, ld);
}

static void cp_attention(Graph *g, const LayerBufs *lb, int B, int window, int backward) {
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const DType t = g->t;
    const int C = g->cp.C, T = g->cp.T, Tl = T / C, ch = Tl / 2, hs = g->cp.head_stride;
    const Dims d = dims(&g->cfg, B, Tl);
    const int group = d.NH / d.NKV, w = hs * d.D;
    int st[2];
    dist_cp_chunk_starts(T, C, g->cp.member, st);
    for (int b = 0; b < B; b++) {
        const int32_t *ds = g->cp_doc ? g->cp_doc + (size_t)b * T : NULL;
        for (int g0 = 0; g0 < d.NKV; g0 += hs) {
            const size_t kcol = (size_t)b * Tl * d.KV + (size_t)g0 * d.D;
            cp_gather(g, at(lb->k, kcol, t), d.KV, w, g->kg);
            cp_gather(g, at(lb->v, kcol, t), d.KV, w, g->vg);
            if (backward) {
                o->zero(be, g->dkg, dtype_size(t) * (size_t)T * w);
                o->zero(be, g->dvg, dtype_size(t) * (size_t)T * w);
            }
            const int h0 = g0 * group;
            for (int c = 0; c < 2; c++) {
                const size_t qo = ((size_t)b * Tl + (size_t)c * ch) * d.Q + (size_t)h0 * d.D;
                float *lse = lb->lse + ((size_t)(2 * b + c) * d.NH + h0) * ch;
                if (!backward)
                    o->attention_forward_at(be, at(lb->att, qo, t), lse, at(lb->q, qo, t), g->kg, g->vg, t, ch, st[c],
                                            hs * group, hs, d.D, d.Q, w, window, ds);
                else
                    o->attention_backward_at(be, at(g->dq, qo, t), g->dkg, g->dvg, at(g->datt, qo, t),
                                             at(lb->q, qo, t), g->kg, g->vg, lse, t, ch, st[c], hs * group, hs, d.D,
                                             d.Q, w, window, ds);
            }
            if (backward) {
                cp_scatter(g, g->dkg, w, at(g->dk, kcol, t), d.KV);
                cp_scatter(g, g->dvg, w, at(g->dv, kcol, t), d.KV);
            }
        }
    }
}

// Forward of block l (activations into the layer's buffers, or slot 0 with recompute);
// again: the recompute before the backward, which under GRAPH_RECOMPUTE_KEEP_ATT finds the
// attention output and lse where the forward left them and skips attention.
static void block_forward(Graph *g, const GraphParams *p, int l, int B, int T, const KVCtx *kv, int again) {
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const Dims d = dims(&g->cfg, B, T);
    const DType t = g->t;
    const LayerOffsets *lw = &g->off.layers[l];
    const LayerView *nl = &p->norms->layers[l];
    const LayerBufs b = layer_bufs(g, l, &d);
    const float eps = (float)g->cfg.rms_eps;
    const int p0 = kv ? kv->p0 : 0, window = model_layer_window(&g->cfg, l, g->cp.C > 1 ? g->cp.T : p0 + T);
    const float *rc, *rs;
    rope_of(g, l, p0, &rc, &rs);
    // the new rows' K and V: the layer's buffers, or their rows p0.. of the cache
    void *k = kv ? at(kv->k, (size_t)p0 * d.KV, t) : b.k, *v = kv ? at(kv->v, (size_t)p0 * d.KV, t) : b.v;
    // x (fp32) -> its bf16 copy, unless the previous block's MLP norm wrote it (next_xg below):
    // the first block, the recompute (which runs the blocks last to first) and the KV path
    if (t == DT_BF16 && (l == 0 || again || kv)) o->cast(be, b.xg, t, b.x, (size_t)d.N * d.C);
    o->matmul_forward(be, b.qkv, b.xg, W(p, lw->wqkv, t), t, d.N, d.C, d.QKV);                          // (N, Q+2KV)
    if (o->qkv_split_forward)   // QK-norm + RoPE + V split in one pass, bitwise the chain below
        o->qkv_split_forward(be, b.q, k, v, b.q_rstd, b.k_rstd, b.qkv, t, nl->q_norm, nl->k_norm, rc, rs, B, T, d.NH,
                             d.NKV, d.D, eps);
    else {
        o->rmsnorm_forward(be, b.q, t, NULL, b.q_rstd, b.qkv, t, nl->q_norm, NULL, d.N, d.Q, d.QKV, d.Q, eps);  // (N, Q)
        o->rmsnorm_forward(be, k, t, NULL, b.k_rstd, at(b.qkv, d.Q, t), t, nl->k_norm, NULL, d.N, d.KV, d.QKV, d.KV,
                           eps);                                                                             // (N, KV)
        o->copy_cols(be, v, b.qkv, t, d.N, d.KV, d.KV, 0, d.QKV, d.Q + d.KV);                               // (N, KV)
        o->rope_forward(be, b.q, t, rc, rs, B, T, d.NH, d.D);
        o->rope_forward(be, k, t, rc, rs, B, T, d.NKV, d.D);
    }
    if (kv)
        o->attention_forward_kv(be, b.att, b.lse, b.q, kv->k, kv->v, t, B, T, p0, d.NH, d.NKV, d.D, window, g->kv_doc);
    else if (again && g->recompute == GRAPH_RECOMPUTE_KEEP_ATT) {
        // the recompute under KEEP_ATT: att and lse are this layer's from the forward, bitwise
        // what attention would give again
    } else if (g->cp.C > 1)
        cp_attention(g, &b, B, window, 0);   // global positions: the group's keys of the instance
    else
        o->attention_forward(be, b.att, b.lse, b.q, b.k, b.v, t, B, T, d.NH, d.NKV, d.D, window, g->doc);  // (B, T, NH, D)
    o->matmul_forward(be, b.ao, b.att, W(p, lw->wo, t), t, d.N, d.Q, d.C);                              // (N, C)
    o->rmsnorm_forward(be, b.h32, DT_F32, t == DT_BF16 ? b.h : NULL, b.a_rstd, b.ao, t, nl->attn_norm, b.x, d.N, d.C,
                       d.C, d.C, eps);                                                                   // h = x + norm(a)
    o->matmul_forward(be, b.gu, b.h, W(p, lw->wgu, t), t, d.N, d.C, 2 * d.H);                           // (N, 2H)
    o->swiglu_forward(be, b.act, b.gu, t, d.N, d.H);                                                     // (N, H)
    o->matmul_forward(be, b.mo, b.act, W(p, lw->wdown, t), t, d.N, d.H, d.C);                           // (N, C)
    // The next block's bf16 input straight from the norm (bitwise the cast of y it replaces,
    // without its pass over y). Not in the recompute: there slot 0's copy is this block's own
    // GEMM operand, which its backward still reads.
    void *next_xg = t == DT_BF16 && !again && !kv && l + 1 < g->cfg.n_layers ? layer_bufs(g, l + 1, &d).xg : NULL;
    o->rmsnorm_forward(be, b.y, DT_F32, next_xg, b.m_rstd, b.mo, t, nl->mlp_norm, b.h32, d.N, d.C, d.C, d.C,
                       eps);                                                                             // y = h + norm(m)
}

// Backward of block l: dres holds dL/dy on entry and dL/dx on return; the block's weight
// gradients are written (or added with p->acc).
static void block_backward(Graph *g, const GraphParams *p, int l, int B, int T) {
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const Dims d = dims(&g->cfg, B, T);
    const DType t = g->t;
    const LayerOffsets *lw = &g->off.layers[l];
    const LayerView *nl = &p->norms->layers[l];
    const LayerBufs b = layer_bufs(g, l, &d);
    const int window = model_layer_window(&g->cfg, l, g->cp.C > 1 ? g->cp.T : T), acc = p->acc;
    float *gr = p->grad;
    const float *rc, *rs;
    rope_of(g, l, 0, &rc, &rs);
    // y = h + norm_mlp(m): dh = dy (kept in dres), dm via the norm
    o->rmsnorm_backward(be, g->dm, t, gr + lw->mlp_norm, acc, g->dres, DT_F32, b.mo, t, nl->mlp_norm, b.m_rstd, d.N,
                        d.C, d.C, d.C, d.C);
    o->matmul_backward(be, g->dact, t, gr + lw->wdown, g->dm, b.act, W(p, lw->wdown, t), t, d.N, d.H, d.C, 0, acc);
    o->swiglu_backward(be, g->dgu, g->dact, b.gu, t, d.N, d.H);
    o->matmul_backward(be, g->dres, DT_F32, gr + lw->wgu, g->dgu, b.h, W(p, lw->wgu, t), t, d.N, d.C, 2 * d.H, 1,
                       acc);   // dres = dh
    // h = x + norm_attn(a): dx = dh (kept in dres), da via the norm
    o->rmsnorm_backward(be, g->da, t, gr + lw->attn_norm, acc, g->dres, DT_F32, b.ao, t, nl->attn_norm, b.a_rstd, d.N,
                        d.C, d.C, d.C, d.C);
    o->matmul_backward(be, g->datt, t, gr + lw->wo, g->da, b.att, W(p, lw->wo, t), t, d.N, d.Q, d.C, 0, acc);
    if (g->cp.C > 1) cp_attention(g, &b, B, window, 1);
    else
        o->attention_backward(be, g->dq, g->dk, g->dv, g->datt, b.q, b.k, b.v, b.att, b.lse, t, B, T, d.NH, d.NKV,
                              d.D, window, g->doc);
    if (o->qkv_split_backward)   // bitwise the chain below, in one pass over dq and dk
        o->qkv_split_backward(be, g->dqkv, gr + lw->q_norm, gr + lw->k_norm, acc, g->dq, g->dk, g->dv, b.qkv, t,
                              nl->q_norm, nl->k_norm, b.q_rstd, b.k_rstd, rc, rs, B, T, d.NH, d.NKV, d.D);
    else {
        o->rope_backward(be, g->dq, t, rc, rs, B, T, d.NH, d.D);
        o->rope_backward(be, g->dk, t, rc, rs, B, T, d.NKV, d.D);
        o->rmsnorm_backward(be, g->dqkv, t, gr + lw->q_norm, acc, g->dq, t, b.qkv, t, nl->q_norm, b.q_rstd, d.N, d.Q,
                            d.Q, d.QKV, d.QKV);
        o->rmsnorm_backward(be, at(g->dqkv, d.Q, t), t, gr + lw->k_norm, acc, g->dk, t, at(b.qkv, d.Q, t), t,
                            nl->k_norm, b.k_rstd, d.N, d.KV, d.KV, d.QKV, d.QKV);
        o->copy_cols(be, g->dqkv, g->dv, t, d.N, d.KV, d.QKV, d.Q + d.KV, d.KV, 0);
    }
    o->matmul_backward(be, g->dres, DT_F32, gr + lw->wqkv, g->dqkv, b.xg, W(p, lw->wqkv, t), t, d.N, d.C, d.QKV, 1,
                       acc);   // dres = dx
}

// ---- the micro-batch -------------------------------------------------------------------------
// Evaluation: only positions with a target need the LM head. Multiple-choice scoring masks
// whole contexts, so those rows are gathered first (order kept: the same sums as over all rows).
static LossSums eval_head(Graph *g, const GraphParams *p, const int32_t *targets, int N, float z_coef,
                          float inv_count, float *tok_ce) {
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const ModelConfig *c = &g->cfg;
    int32_t *pos = g->host_i32, *tc = g->host_i32 + N;
    int nv = 0;
    for (int n = 0; n < N; n++)
        if (targets[n] >= 0) {
            tc[nv] = targets[n];
            pos[nv++] = n;
        }
    o->gather_rows(be, g->dxf, g->xf, g->t, pos, nv, c->d_model);
    o->upload(be, g->tgt, tc, sizeof(int32_t) * nv);
    float *ce_c = tok_ce ? xmalloc(sizeof(float) * (nv ? nv : 1)) : NULL;
    LossSums sums = o->lmhead_loss(be, NULL, NULL, 0, g->dxf, W(p, g->off.lm_head, g->t), g->t, g->tgt, nv, c->d_model,
                                   c->padded_vocab, z_coef, inv_count, NULL, ce_c);
    if (tok_ce) {
        memset(tok_ce, 0, sizeof(float) * N);
        for (int i = 0; i < nv; i++) tok_ce[pos[i]] = ce_c[i];
        free(ce_c);
    }
    return sums;
}

// The weights of `part` are needed now, `next`'s soon (GraphParams.weights; no-op without).
static void need(const GraphParams *p, int part, int next) {
    if (p->weights) p->weights(p->weights_ctx, part, next);
}

// Part `done`'s gradient is complete, `next`'s is written now (GraphParams.grads; no-op without).
static void grads_done(const GraphParams *p, int done, int next) {
    if (p->grads) p->grads(p->grads_ctx, done, next);
}

static LossSums forward_backward(Graph *g, const GraphParams *p, const int32_t *inputs, const int32_t *targets, int B,
                                 int T, float z_coef, float inv_count, float *logits_out, float *tok_ce) {
    if (B > g->max_B || T > g->max_T)
        die("model: micro-batch (B=%d, T=%d) exceeds the allocated (%d, %d)", B, T, g->max_B, g->max_T);
    if (p->grad && g->recompute == GRAPH_FORWARD_ONLY) die("model: a backward on a forward-only graph");
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const ModelConfig *c = &g->cfg;
    const Dims d = dims(c, B, T);
    const size_t N = (size_t)d.N;
    const DType t = g->t;
    o->upload(be, g->tok, inputs, sizeof(int32_t) * N);
    if (g->doc) {   // each token's document start, from the EOS tokens of the inputs (model/docmask.h)
        doc_starts_from_tokens(inputs, B, T, c->eos_id, g->host_i32);   // (B, T)
        o->upload(be, g->doc, g->host_i32, sizeof(int32_t) * N);
    }
    // The targets beside the inputs, where the device queue is drained anyway: an upload waits
    // for the queue (the host buffer may be reused at once), so after the forward it would
    // stall the host until the forward finished.
    const int head_on_device = p->grad || logits_out;
    if (head_on_device) o->upload(be, g->tgt, targets, sizeof(int32_t) * N);

    // ---- forward ----
    need(p, GRAPH_PART_EMBED, 0);
    o->embedding_forward(be, g->res, g->tok, W(p, g->off.embed, t), t, d.N, d.C);   // (N, C)
    for (int l = 0; l < d.L; l++) {
        need(p, l, l + 1 < d.L ? l + 1 : GRAPH_PART_HEAD);
        block_forward(g, p, l, B, T, NULL, 0);
    }
    need(p, GRAPH_PART_HEAD, p->grad ? d.L - 1 : GRAPH_PART_NONE);
    float *xL = g->res + res_slot(g, d.L) * N * d.C;
    o->rmsnorm_forward(be, g->xf, t, NULL, g->xf_rstd, xL, DT_F32, p->norms->final_norm, NULL, d.N, d.C, d.C, d.C,
                       (float)c->rms_eps);
    if (!head_on_device) return eval_head(g, p, targets, d.N, z_coef, inv_count, tok_ce);
    if (p->grad) grads_done(p, GRAPH_PART_NONE, GRAPH_PART_HEAD);
    float *gr = p->grad;
    LossSums sums = o->lmhead_loss(be, gr ? g->dxf : NULL, gr ? gr + g->off.lm_head : NULL, p->acc, g->xf,
                                   W(p, g->off.lm_head, t), t, g->tgt, d.N, d.C, c->padded_vocab, z_coef, inv_count,
                                   logits_out, tok_ce);
    if (!gr) return sums;

    // ---- backward ----
    o->rmsnorm_backward(be, g->dres, DT_F32, gr + g->off.final_norm, p->acc, g->dxf, t, xL, DT_F32,
                        p->norms->final_norm, g->xf_rstd, d.N, d.C, d.C, d.C, d.C);
    grads_done(p, GRAPH_PART_HEAD, d.L - 1);
    for (int l = d.L - 1; l >= 0; l--) {
        // Recompute: the block's activations again, bitwise the same (slot 0 still holds the
        // last block's from the forward).
        need(p, l, l > 0 ? l - 1 : GRAPH_PART_NONE);
        if (g->recompute && l != d.L - 1) block_forward(g, p, l, B, T, NULL, 1);
        block_backward(g, p, l, B, T);
        grads_done(p, l, l > 0 ? l - 1 : GRAPH_PART_EMBED);
    }
    float *gE = p->grad + g->off.embed;   // p->grad again: the hook may have moved it
    if (!p->acc) o->zero(be, gE, sizeof(float) * (size_t)c->padded_vocab * d.C);
    o->embedding_backward(be, gE, g->dres, inputs, d.N, d.C);   // reads no weights
    grads_done(p, GRAPH_PART_EMBED, GRAPH_PART_NONE);
    return sums;
}

LossSums graph_forward_backward(Graph *g, const GraphParams *p, const int32_t *inputs, const int32_t *targets, int B,
                                int T, float z_coef, float inv_count, float *logits_out, float *tok_ce) {
    LossSums s = forward_backward(g, p, inputs, targets, B, T, z_coef, inv_count, logits_out, tok_ce);
    need(p, GRAPH_PART_NONE, GRAPH_PART_NONE);
    return s;
}

LossSums graph_forward_backward_cp(Graph *g, const GraphParams *p, const int32_t *inputs, const int32_t *targets,
                                   int B, float z_coef, float inv_count, float *logits_out, float *tok_ce) {
    const int C = g->cp.C, T = g->cp.T, Tl = T / C;
    if (C < 2 || B > g->max_B) die("graph_forward_backward_cp: not a context-parallel graph, or B=%d > %d", B, g->max_B);
    if (g->cp_doc) {   // document starts from the whole instance's EOS positions (global)
        doc_starts_from_tokens(inputs, B, T, g->cfg.eos_id, g->host_i32);
        g->be->ops->upload(g->be, g->cp_doc, g->host_i32, sizeof(int32_t) * B * (size_t)T);
    }
    int32_t *in = g->host_i32 + 2 * (size_t)B * T, *tg = in + (size_t)B * Tl;
    dist_cp_local_ids(inputs, in, B, T, C, g->cp.member);
    dist_cp_local_ids(targets, tg, B, T, C, g->cp.member);
    return graph_forward_backward(g, p, in, tg, B, Tl, z_coef, inv_count, logits_out, tok_ce);
}

// ---- generation: the KV-cache forward -------------------------------------------------------
void graph_forward_kv(Graph *g, const GraphParams *p, const int32_t *tokens, int n, int p0, const int32_t *doc_new,
                      float *logits, int all_logits) {
    const ModelConfig *c = &g->cfg;
    if (!g->kv_len || n <= 0 || n > g->max_T || p0 + n > g->kv_len)
        die("graph_forward_kv: %d tokens at position %d exceed the cache (%d tokens per call, %d positions)", n, p0,
            g->max_T, g->kv_len);
    const Ops *o = g->be->ops;
    OpsBackend *be = g->be;
    const DType t = g->t;
    if (!o->attention_forward_kv || t != DT_F32)
        die("the %s backend has no KV-cache forward (generation runs on the CPU)", be->name);
    const size_t C = c->d_model, KV = (size_t)c->n_kv_heads * c->head_dim, layer = (size_t)g->kv_len * KV;
    o->upload(be, g->tok, tokens, sizeof(int32_t) * n);
    if (g->kv_doc) o->upload(be, g->kv_doc + p0, doc_new, sizeof(int32_t) * n);
    const int L = c->n_layers;
    need(p, GRAPH_PART_EMBED, 0);
    o->embedding_forward(be, g->res, g->tok, W(p, g->off.embed, t), t, n, (int)C);   // (n, C)
    for (int l = 0; l < L; l++) {
        const KVCtx kv = {p0, at(g->kcache, l * layer, t), at(g->vcache, l * layer, t)};
        need(p, l, l + 1 < L ? l + 1 : logits ? GRAPH_PART_HEAD : GRAPH_PART_NONE);
        block_forward(g, p, l, 1, n, &kv, 0);
    }
    if (!logits) {
        need(p, GRAPH_PART_NONE, GRAPH_PART_NONE);
        return;
    }
    need(p, GRAPH_PART_HEAD, GRAPH_PART_NONE);
    const int first = all_logits ? 0 : n - 1, rows = n - first;
    const float *xL = g->res + (res_slot(g, c->n_layers) * n + first) * C;
    o->rmsnorm_forward(be, g->xf, t, NULL, g->xf_rstd, xL, DT_F32, p->norms->final_norm, NULL, rows, (int)C, (int)C,
                       (int)C, (float)c->rms_eps);
    o->matmul_forward(be, g->kv_logits, g->xf, W(p, g->off.lm_head, t), t, rows, (int)C, c->padded_vocab);   // (rows, Vp)
    o->download(be, logits, g->kv_logits, sizeof(float) * (size_t)rows * c->padded_vocab);
    need(p, GRAPH_PART_NONE, GRAPH_PART_NONE);
}
