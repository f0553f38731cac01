// model.c: forward/backward of the OLMo 3 block stack (see model.h and OLMO3.md s.1):
//   qkv = x Wqkv^T; q = rope(norm_q(qkv_q)); k = rope(norm_k(qkv_k)); v = qkv_v
//   att = attention(q, k, v) (causal, window on sliding layers, optionally within the
//   token's document); a = att Wo^T. Full layers use the YaRN tables when cfg.rope_scaling.
//   h = x + norm_attn(a); m = Wdown(silu(Wgate h) * Wup h); y = h + norm_mlp(m)
// then the final norm and the fused LM head + loss. block_forward is the one copy of the
// block's forward: the training forward runs it over a micro-batch, the KV-cache forward
// (kv.c) over new tokens against cached keys and values.
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "model/docmask.h"
#include "util/common.h"

#define LM_CHUNK 128

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

// The BlockActs buffers and their floats per row, in one list: allocation, a layer's
// view, freeing and the memory estimate all walk it. c NULL: the pointers only (w unset).
enum { BLOCK_NBUF = 13 };
static int block_fields(BlockActs *ba, float **f[BLOCK_NBUF], size_t w[BLOCK_NBUF], const ModelConfig *c) {
    Dims d = {0};
    if (c) d = dims(c, 1, 1);
    int n = 0;
#define FIELD(name, width) (w[n] = (size_t)(width), f[n++] = &ba->name)
    FIELD(qkv, d.QKV); FIELD(q_rstd, 1); FIELD(k_rstd, 1); FIELD(q, d.Q); FIELD(att, d.Q); FIELD(lse, d.NH);
    FIELD(a, d.C); FIELD(a_rstd, 1); FIELD(h, d.C); FIELD(gu, 2 * d.H); FIELD(act, d.H); FIELD(m, d.C);
    FIELD(m_rstd, 1);
#undef FIELD
    return n;
}

// Per-token float counts of each saved activation and scratch buffer, so that
// allocation and the memory estimate share one definition.
static size_t act_floats(const ModelConfig *c, int B, int T) {
    Dims d = dims(c, B, T);
    BlockActs ba;
    float **f[BLOCK_NBUF];
    size_t w[BLOCK_NBUF], block = 0;
    for (int i = 0, n = block_fields(&ba, f, w, c); i < n; i++) block += w[i];
    // Per layer: the block's buffers, its residual slice (C), k and v (KV each). Plus one
    // more res slice, xf (C) and xf_rstd.
    size_t per_layer = block + d.C + 2 * (size_t)d.KV;
    return (size_t)d.N * (per_layer * d.L + 2 * (size_t)d.C + 1);
}

static size_t scratch_floats(const ModelConfig *c, int B, int T) {
    Dims d = dims(c, B, T);
    return (size_t)d.N * (3 * d.C + d.Q + d.Q + 2 * d.KV + d.QKV + 2 * d.H + d.H + d.C + d.C);
}

size_t model_activation_bytes(const ModelConfig *cfg, int B, int T, int lm_chunk) {
    if (lm_chunk <= 0) lm_chunk = LM_CHUNK;
    size_t rope_tables = (cfg->rope_scaling.type == ROPE_SCALING_YARN ? 2 : 1) * (size_t)T * cfg->head_dim;
    return sizeof(float) * (act_floats(cfg, B, T) + scratch_floats(cfg, B, T) +
                            (size_t)lm_chunk * cfg->padded_vocab + rope_tables) +
           sizeof(int32_t) * (size_t)B * T * (cfg->document_mask ? 2 : 1);
}

void model_create_lazy(Model *m, const ModelConfig *cfg, int max_B, int max_T) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    model_config_derive(&m->cfg);
    param_table_build(&m->table, &m->cfg);
    m->params = xmalloc_aligned(sizeof(float) * m->table.total);
    model_view(&m->w, &m->table, &m->cfg, m->params);
    m->max_B = max_B;
    m->max_T = max_T;
}

void model_rope_create(ModelRope *r, const ModelConfig *c, int n) {
    const size_t half = (size_t)n * c->head_dim / 2;
    memset(r, 0, sizeof *r);
    r->cos = xmalloc_aligned(sizeof(float) * half);
    r->sin = xmalloc_aligned(sizeof(float) * half);
    rope_tables(r->cos, r->sin, n, c->head_dim, c->rope_theta, NULL);
    if (c->rope_scaling.type == ROPE_SCALING_YARN) {
        r->yarn_cos = xmalloc_aligned(sizeof(float) * half);
        r->yarn_sin = xmalloc_aligned(sizeof(float) * half);
        rope_tables(r->yarn_cos, r->yarn_sin, n, c->head_dim, c->rope_theta, &c->rope_scaling);
    }
}

void model_rope_free(ModelRope *r) {
    free(r->cos);
    free(r->sin);
    free(r->yarn_cos);
    free(r->yarn_sin);
    memset(r, 0, sizeof *r);
}

void block_acts_alloc(BlockActs *ba, const ModelConfig *c, size_t rows) {
    float **f[BLOCK_NBUF];
    size_t w[BLOCK_NBUF];
    for (int i = 0, n = block_fields(ba, f, w, c); i < n; i++) *f[i] = xmalloc_aligned(sizeof(float) * rows * w[i]);
}

BlockActs block_acts_at(const BlockActs *all, const ModelConfig *c, size_t r0) {
    BlockActs v = *all;
    float **f[BLOCK_NBUF];
    size_t w[BLOCK_NBUF];
    for (int i = 0, n = block_fields(&v, f, w, c); i < n; i++) *f[i] += r0 * w[i];
    return v;
}

void block_acts_free(BlockActs *ba) {
    float **f[BLOCK_NBUF];
    size_t w[BLOCK_NBUF];
    for (int i = 0, n = block_fields(ba, f, w, NULL); i < n; i++) {
        free(*f[i]);
        *f[i] = NULL;
    }
}

// Activations, scratch, RoPE tables and the LM-head chunk for (max_B, max_T).
static void alloc_activations(Model *m) {
    const int max_T = m->max_T;
    Dims d = dims(&m->cfg, m->max_B, max_T);
    size_t N = (size_t)d.N, L = (size_t)d.L;
    Activations *a = &m->acts;
    // One allocation per buffer keeps the layout obvious; all are sized for (max_B, max_T).
    a->res = xmalloc_aligned(sizeof(float) * (L + 1) * N * d.C);
    block_acts_alloc(&a->blk, &m->cfg, L * N);
    a->k = xmalloc_aligned(sizeof(float) * L * N * d.KV);
    a->v = xmalloc_aligned(sizeof(float) * L * N * d.KV);
    a->xf = xmalloc_aligned(sizeof(float) * N * d.C);
    a->xf_rstd = xmalloc_aligned(sizeof(float) * N);
    BackwardScratch *s = &m->bw;
    s->dres = xmalloc_aligned(sizeof(float) * N * d.C);
    s->dxf = xmalloc_aligned(sizeof(float) * N * d.C);
    s->da = xmalloc_aligned(sizeof(float) * N * d.C);
    s->datt = xmalloc_aligned(sizeof(float) * N * d.Q);
    s->dq = xmalloc_aligned(sizeof(float) * N * d.Q);
    s->dk = xmalloc_aligned(sizeof(float) * N * d.KV);
    s->dv = xmalloc_aligned(sizeof(float) * N * d.KV);
    s->dqkv = xmalloc_aligned(sizeof(float) * N * d.QKV);
    s->dgu = xmalloc_aligned(sizeof(float) * N * 2 * d.H);
    s->dact = xmalloc_aligned(sizeof(float) * N * d.H);
    s->dm = xmalloc_aligned(sizeof(float) * N * d.C);
    s->tmp = xmalloc_aligned(sizeof(float) * N * d.C);
    model_rope_create(&m->rope, &m->cfg, max_T);
    if (m->cfg.document_mask) m->doc_start = xmalloc(sizeof(int32_t) * N);
    m->lm_chunk = LM_CHUNK;
    m->lm_scratch = xmalloc_aligned(sizeof(float) * (size_t)m->lm_chunk * m->cfg.padded_vocab);
    m->targets_flat = xmalloc(sizeof(int32_t) * N);
}

void model_create(Model *m, const ModelConfig *cfg, int max_B, int max_T) {
    model_create_lazy(m, cfg, max_B, max_T);
    alloc_activations(m);
}

void model_destroy(Model *m) {
    float **bufs[] = {&m->params, &m->acts.res, &m->acts.k, &m->acts.v, &m->acts.xf, &m->acts.xf_rstd, &m->bw.dres,
                      &m->bw.dxf, &m->bw.da, &m->bw.datt, &m->bw.dq, &m->bw.dk, &m->bw.dv, &m->bw.dqkv, &m->bw.dgu,
                      &m->bw.dact, &m->bw.dm, &m->bw.tmp, &m->lm_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    block_acts_free(&m->acts.blk);
    model_rope_free(&m->rope);
    free(m->targets_flat);
    free(m->doc_start);
    m->doc_start = NULL;
    param_table_free(&m->table);
}

// Copy a column slice [col, col+width) of (N, stride) rows into/out of a contiguous (N, width).
static void gather_cols(float *dst, const float *src, int N, int stride, int col, int width) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memcpy(dst + (size_t)n * width, src + (size_t)n * stride + col, sizeof(float) * width);
}

static void scatter_cols(float *dst, const float *src, int N, int stride, int col, int width) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memcpy(dst + (size_t)n * stride + col, src + (size_t)n * width, sizeof(float) * width);
}

// Layer l's RoPE tables, from position p0 on: rope_forward rotates row t by table row t,
// so offsetting the tables puts new rows at their absolute positions.
static void layer_rope(const ModelRope *r, const ModelConfig *c, int l, int p0, const float **cos_t,
                       const float **sin_t) {
    const int scaled = model_layer_rope_scaled(c, l);
    const size_t off = (size_t)p0 * c->head_dim / 2;
    *cos_t = (scaled ? r->yarn_cos : r->cos) + off;
    *sin_t = (scaled ? r->yarn_sin : r->sin) + off;
}

void block_forward(float *y, const float *x, const ModelConfig *c, const ModelView *w, int l, const BlockActs *ba,
                   const AttnCtx *ctx) {
    const int B = ctx->B, T = ctx->T, p0 = ctx->p0;
    if (p0 > 0 && B != 1) die("block_forward: cached positions (p0 = %d) need B = 1, got B = %d", p0, B);
    const Dims d = dims(c, B, T);
    const size_t N = (size_t)d.N;
    const float eps = (float)c->rms_eps;
    const LayerView *lw = &w->layers[l];
    const int window = model_layer_window(c, l, p0 + T);   // full layers: every earlier position
    const float *rcos, *rsin;
    layer_rope(ctx->rope, c, l, p0, &rcos, &rsin);
    float *k = ctx->k + (size_t)p0 * d.KV, *v = ctx->v + (size_t)p0 * d.KV;   // the new rows' keys, values

    matmul_forward(ba->qkv, x, lw->wqkv, d.N, d.C, d.QKV);                                 // (N, Q+2KV)
    rmsnorm_forward(ba->q, ba->q_rstd, ba->qkv, lw->q_norm, d.N, d.Q, d.QKV, d.Q, eps);     // (N, Q)
    rmsnorm_forward(k, ba->k_rstd, ba->qkv + d.Q, lw->k_norm, d.N, d.KV, d.QKV, d.KV, eps);  // (N, KV)
    gather_cols(v, ba->qkv, d.N, d.QKV, d.Q + d.KV, d.KV);                                   // (N, KV)
    rope_forward(ba->q, rcos, rsin, B, T, d.NH, d.D);
    rope_forward(k, rcos, rsin, B, T, d.NKV, d.D);
    attention_forward_kv(ba->att, ba->lse, ba->q, ctx->k, ctx->v, B, T, p0, d.NH, d.NKV, d.D, window,
                         ctx->doc_start);                                                     // (B, T, NH, D)
    matmul_forward(ba->a, ba->att, lw->wo, d.N, d.Q, d.C);                                   // (N, C)
    // The norms write into h and y, and the residual is added in place: no scratch, and
    // y may alias x (x is last read by the first residual).
    rmsnorm_forward(ba->h, ba->a_rstd, ba->a, lw->attn_norm, d.N, d.C, d.C, d.C, eps);
    residual_forward(ba->h, x, ba->h, N * d.C);                                              // h = x + norm(a)
    matmul_forward(ba->gu, ba->h, lw->wgu, d.N, d.C, 2 * d.H);                               // (N, 2H)
    swiglu_forward(ba->act, ba->gu, d.N, d.H);                                               // (N, H)
    matmul_forward(ba->m, ba->act, lw->wdown, d.N, d.H, d.C);                                // (N, C)
    rmsnorm_forward(y, ba->m_rstd, ba->m, lw->mlp_norm, d.N, d.C, d.C, d.C, eps);
    residual_forward(y, ba->h, y, N * d.C);                                                  // y = h + norm(m)
}

// Embedding, the blocks and the final norm over a micro-batch, saving what backward needs.
static void model_forward(Model *m, const int32_t *inputs, int B, int T) {
    const ModelConfig *c = &m->cfg;
    const Dims d = dims(c, B, T);
    const size_t N = (size_t)d.N;
    Activations *a = &m->acts;
    // Document mask: each token's document start, from the EOS tokens of the inputs.
    const int32_t *doc_start = NULL;
    if (c->document_mask) {
        doc_starts_from_tokens(inputs, B, T, c->eos_id, m->doc_start);   // (B, T)
        doc_start = m->doc_start;
    }
    embedding_forward(a->res, inputs, m->w.embed, d.N, d.C);  // (N, C)
    for (int l = 0; l < d.L; l++) {
        const BlockActs ba = block_acts_at(&a->blk, c, l * N);
        const AttnCtx ctx = {B, T, 0, a->k + l * N * d.KV, a->v + l * N * d.KV, doc_start, &m->rope};
        block_forward(a->res + (l + 1) * N * d.C, a->res + l * N * d.C, c, &m->w, l, &ba, &ctx);   // (N, C)
    }
    float *xL = a->res + (size_t)d.L * N * d.C;
    rmsnorm_forward(a->xf, a->xf_rstd, xL, m->w.final_norm, d.N, d.C, d.C, d.C, (float)c->rms_eps);
}

// Evaluation: only positions with a target need the LM head. Multiple-choice scoring masks
// whole contexts, so compact those rows first (order kept, so the sums are the same as over
// the full rows).
static LossSums eval_head(Model *m, const int32_t *targets, int N, float z_coef, float inv_count, float *tok_ce) {
    const int C = m->cfg.d_model;
    float *xc = m->bw.dxf;   // free during a forward-only call
    int32_t *tc = m->targets_flat;
    int *pos = (int *)m->bw.tmp;
    int nv = 0;
    for (int n = 0; n < N; n++)
        if (targets[n] >= 0) {
            memcpy(xc + (size_t)nv * C, m->acts.xf + (size_t)n * C, sizeof(float) * C);
            tc[nv] = targets[n];
            pos[nv++] = n;
        }
    float *ce_c = tok_ce ? m->bw.da : NULL;
    LossSums sums = lmhead_loss_forward_backward(NULL, NULL, xc, m->w.lm_head, tc, nv, C, m->cfg.padded_vocab, z_coef,
                                                 inv_count, m->lm_scratch, m->lm_chunk, NULL, ce_c);
    if (tok_ce) {
        memset(tok_ce, 0, sizeof(float) * (size_t)N);
        for (int i = 0; i < nv; i++) tok_ce[pos[i]] = ce_c[i];
    }
    return sums;
}

// Backward of the final norm and the blocks (the LM head's left dxf in bw.dxf), then the
// embedding; every gradient in gw overwritten.
static void model_backward(Model *m, const ModelView *gw, const int32_t *inputs, int B, int T) {
    const ModelConfig *c = &m->cfg;
    const Dims d = dims(c, B, T);
    const size_t N = (size_t)d.N;
    Activations *a = &m->acts;
    BackwardScratch *s = &m->bw;
    const ModelView *w = &m->w;
    const int32_t *doc_start = c->document_mask ? m->doc_start : NULL;   // set by model_forward
    float *dres = s->dres;  // gradient w.r.t. the residual stream, walking down the layers
    float *xL = a->res + (size_t)d.L * N * d.C;
    rmsnorm_backward(dres, gw->final_norm, s->dxf, xL, w->final_norm, a->xf_rstd, d.N, d.C, d.C, d.C, d.C);
    for (int l = d.L - 1; l >= 0; l--) {
        const LayerView *lw = &w->layers[l];
        const LayerView *lg = &gw->layers[l];
        const int window = model_layer_window(c, l, T);
        const float *rcos, *rsin;
        layer_rope(&m->rope, c, l, 0, &rcos, &rsin);
        const BlockActs ba = block_acts_at(&a->blk, c, l * N);
        float *x = a->res + l * N * d.C;
        float *k = a->k + l * N * d.KV, *v = a->v + l * N * d.KV;

        // y = h + norm_mlp(m): dh = dy (kept in dres), dm via the norm
        rmsnorm_backward(s->dm, lg->mlp_norm, dres, ba.m, lw->mlp_norm, ba.m_rstd, d.N, d.C, d.C, d.C, d.C);
        matmul_backward(s->dact, lg->wdown, s->dm, ba.act, lw->wdown, d.N, d.H, d.C, 0, 0);
        swiglu_backward(s->dgu, s->dact, ba.gu, d.N, d.H);
        matmul_backward(dres, lg->wgu, s->dgu, ba.h, lw->wgu, d.N, d.C, 2 * d.H, 1, 0);  // dres = dh
        // h = x + norm_attn(a): dx = dh (kept in dres), da via the norm
        rmsnorm_backward(s->da, lg->attn_norm, dres, ba.a, lw->attn_norm, ba.a_rstd, d.N, d.C, d.C, d.C, d.C);
        matmul_backward(s->datt, lg->wo, s->da, ba.att, lw->wo, d.N, d.Q, d.C, 0, 0);
        attention_backward(s->dq, s->dk, s->dv, s->datt, ba.q, k, v, ba.att, ba.lse, B, T, d.NH, d.NKV, d.D, window,
                           doc_start);
        rope_backward(s->dq, rcos, rsin, B, T, d.NH, d.D);
        rope_backward(s->dk, rcos, rsin, B, T, d.NKV, d.D);
        rmsnorm_backward(s->dqkv, lg->q_norm, s->dq, ba.qkv, lw->q_norm, ba.q_rstd, d.N, d.Q, d.Q, d.QKV, d.QKV);
        rmsnorm_backward(s->dqkv + d.Q, lg->k_norm, s->dk, ba.qkv + d.Q, lw->k_norm, ba.k_rstd, d.N, d.KV, d.KV,
                         d.QKV, d.QKV);
        scatter_cols(s->dqkv, s->dv, d.N, d.QKV, d.Q + d.KV, d.KV);
        matmul_backward(dres, lg->wqkv, s->dqkv, x, lw->wqkv, d.N, d.C, d.QKV, 1, 0);  // dres = dx
    }
    memset(gw->embed, 0, sizeof(float) * (size_t)c->padded_vocab * d.C);
    embedding_backward(gw->embed, dres, inputs, d.N, d.C);
}

LossSums model_forward_backward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count, float *grads, float *logits_out,
                                float *tok_ce) {
    if (B > m->max_B || T > m->max_T) die("model_forward_backward: (B=%d, T=%d) exceeds the allocated (%d, %d)", B, T, m->max_B, m->max_T);
    if (!m->acts.res) alloc_activations(m);   // model_create_lazy: on first use
    const ModelConfig *c = &m->cfg;
    const int N = B * T;
    model_forward(m, inputs, B, T);
    if (!grads && !logits_out) return eval_head(m, targets, N, z_coef, inv_count, tok_ce);
    ModelView gw;
    if (grads) model_view(&gw, &m->table, c, grads);
    LossSums sums = lmhead_loss_forward_backward(grads ? m->bw.dxf : NULL, grads ? gw.lm_head : NULL, m->acts.xf,
                                                 m->w.lm_head, targets, N, c->d_model, c->padded_vocab, z_coef,
                                                 inv_count, m->lm_scratch, m->lm_chunk, logits_out, tok_ce);
    if (grads) model_backward(m, &gw, inputs, B, T);
    return sums;
}
