// model.c: forward/backward of the OLMo 3 block stack (see model.h and OLMO3.md s.1):
//   qkv = x Wqkv^T; q = rope(norm_q(qkv_q)); k = rope(norm_k(qkv_k)); v = qkv_v
//   att = attention(q, k, v) (causal, window on sliding layers, optionally within the
//   token's document); a = att Wo^T. Full layers use the YaRN tables when cfg.rope_scaling.
//   h = x + norm_attn(a); m = Wdown(silu(Wgate h) * Wup h); y = h + norm_mlp(m)
// then the final norm and the fused LM head + loss.
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

// Per-token float counts of each saved activation and scratch buffer, so that
// allocation and the memory estimate share one definition.
static size_t act_floats(const ModelConfig *c, int B, int T) {
    Dims d = dims(c, B, T);
    // res, mid, a, m (C each); qkv; q, att (Q each); k, v (KV each); lse (NH); gu (2H),
    // act (H); four rstd rows. Plus one more res slice, xf (C) and xf_rstd.
    size_t per_layer = 4 * (size_t)d.C + d.QKV + 2 * d.Q + 2 * d.KV + d.NH + 3 * (size_t)d.H + 4;
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

// Activations, scratch, RoPE tables and the LM-head chunk for (max_B, max_T).
static void alloc_activations(Model *m) {
    const int max_T = m->max_T;
    Dims d = dims(&m->cfg, m->max_B, max_T);
    size_t N = (size_t)d.N, L = (size_t)d.L;
    Activations *a = &m->acts;
    // One allocation per buffer keeps the layout obvious; all are sized for (max_B, max_T).
    a->res = xmalloc_aligned(sizeof(float) * (L + 1) * N * d.C);
    a->mid = xmalloc_aligned(sizeof(float) * L * N * d.C);
    a->qkv = xmalloc_aligned(sizeof(float) * L * N * d.QKV);
    a->q_rstd = xmalloc_aligned(sizeof(float) * L * N);
    a->k_rstd = xmalloc_aligned(sizeof(float) * L * N);
    a->q = xmalloc_aligned(sizeof(float) * L * N * d.Q);
    a->k = xmalloc_aligned(sizeof(float) * L * N * d.KV);
    a->v = xmalloc_aligned(sizeof(float) * L * N * d.KV);
    a->att = xmalloc_aligned(sizeof(float) * L * N * d.Q);
    a->lse = xmalloc_aligned(sizeof(float) * L * N * d.NH);
    a->a = xmalloc_aligned(sizeof(float) * L * N * d.C);
    a->a_rstd = xmalloc_aligned(sizeof(float) * L * N);
    a->gu = xmalloc_aligned(sizeof(float) * L * N * 2 * d.H);
    a->act = xmalloc_aligned(sizeof(float) * L * N * d.H);
    a->m = xmalloc_aligned(sizeof(float) * L * N * d.C);
    a->m_rstd = xmalloc_aligned(sizeof(float) * L * N);
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
    m->rope_cos = xmalloc_aligned(sizeof(float) * (size_t)max_T * d.D / 2);
    m->rope_sin = xmalloc_aligned(sizeof(float) * (size_t)max_T * d.D / 2);
    rope_tables(m->rope_cos, m->rope_sin, max_T, d.D, m->cfg.rope_theta, NULL);
    if (m->cfg.rope_scaling.type == ROPE_SCALING_YARN) {
        m->yarn_cos = xmalloc_aligned(sizeof(float) * (size_t)max_T * d.D / 2);
        m->yarn_sin = xmalloc_aligned(sizeof(float) * (size_t)max_T * d.D / 2);
        rope_tables(m->yarn_cos, m->yarn_sin, max_T, d.D, m->cfg.rope_theta, &m->cfg.rope_scaling);
    }
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
    float **bufs[] = {&m->params, &m->acts.res, &m->acts.mid, &m->acts.qkv, &m->acts.q_rstd, &m->acts.k_rstd,
                      &m->acts.q, &m->acts.k, &m->acts.v, &m->acts.att, &m->acts.lse, &m->acts.a,
                      &m->acts.a_rstd, &m->acts.gu, &m->acts.act, &m->acts.m, &m->acts.m_rstd, &m->acts.xf,
                      &m->acts.xf_rstd, &m->bw.dres, &m->bw.dxf, &m->bw.da, &m->bw.datt, &m->bw.dq, &m->bw.dk,
                      &m->bw.dv, &m->bw.dqkv, &m->bw.dgu, &m->bw.dact, &m->bw.dm, &m->bw.tmp, &m->rope_cos,
                      &m->rope_sin, &m->yarn_cos, &m->yarn_sin, &m->lm_scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
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

LossSums model_forward_backward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count, float *grads, float *logits_out,
                                float *tok_ce) {
    if (B > m->max_B || T > m->max_T) die("model_forward_backward: (B=%d, T=%d) exceeds the allocated (%d, %d)", B, T, m->max_B, m->max_T);
    if (!m->acts.res) alloc_activations(m);   // model_create_lazy: on first use
    const ModelConfig *c = &m->cfg;
    const Dims d = dims(c, B, T);
    const size_t N = (size_t)d.N;
    const float eps = (float)c->rms_eps;
    Activations *a = &m->acts;
    ModelView *w = &m->w;

    // Document mask: each token's document start, from the EOS tokens of the inputs.
    const int32_t *doc_start = NULL;
    if (c->document_mask) {
        doc_starts_from_tokens(inputs, B, T, c->eos_id, m->doc_start);   // (B, T)
        doc_start = m->doc_start;
    }

    // ---- forward ----
    embedding_forward(a->res, inputs, w->embed, d.N, d.C);  // (N, C)
    for (int l = 0; l < d.L; l++) {
        const LayerView *lw = &w->layers[l];
        const int window = model_layer_window(c, l, T);
        const int scaled = model_layer_rope_scaled(c, l);
        const float *rcos = scaled ? m->yarn_cos : m->rope_cos, *rsin = scaled ? m->yarn_sin : m->rope_sin;
        float *x = a->res + l * N * d.C, *y = a->res + (l + 1) * N * d.C;
        float *qkv = a->qkv + l * N * d.QKV;
        float *q = a->q + l * N * d.Q, *k = a->k + l * N * d.KV, *v = a->v + l * N * d.KV;
        float *att = a->att + l * N * d.Q, *lse = a->lse + l * N * d.NH;
        float *ao = a->a + l * N * d.C, *h = a->mid + l * N * d.C;
        float *gu = a->gu + l * N * 2 * d.H, *act = a->act + l * N * d.H, *mo = a->m + l * N * d.C;
        float *tmp = m->bw.tmp;

        matmul_forward(qkv, x, lw->wqkv, d.N, d.C, d.QKV);                                   // (N, Q+2KV)
        rmsnorm_forward(q, a->q_rstd + l * N, qkv, lw->q_norm, d.N, d.Q, d.QKV, d.Q, eps);       // (N, Q)
        rmsnorm_forward(k, a->k_rstd + l * N, qkv + d.Q, lw->k_norm, d.N, d.KV, d.QKV, d.KV, eps);  // (N, KV)
        gather_cols(v, qkv, d.N, d.QKV, d.Q + d.KV, d.KV);                                     // (N, KV)
        rope_forward(q, rcos, rsin, B, T, d.NH, d.D);
        rope_forward(k, rcos, rsin, B, T, d.NKV, d.D);
        attention_forward(att, lse, q, k, v, B, T, d.NH, d.NKV, d.D, window, doc_start);       // (B, T, NH, D)
        matmul_forward(ao, att, lw->wo, d.N, d.Q, d.C);                                        // (N, C)
        rmsnorm_forward(tmp, a->a_rstd + l * N, ao, lw->attn_norm, d.N, d.C, d.C, d.C, eps);
        residual_forward(h, x, tmp, N * d.C);                                                  // h = x + norm(a)
        matmul_forward(gu, h, lw->wgu, d.N, d.C, 2 * d.H);                                     // (N, 2H)
        swiglu_forward(act, gu, d.N, d.H);                                                     // (N, H)
        matmul_forward(mo, act, lw->wdown, d.N, d.H, d.C);                                     // (N, C)
        rmsnorm_forward(tmp, a->m_rstd + l * N, mo, lw->mlp_norm, d.N, d.C, d.C, d.C, eps);
        residual_forward(y, h, tmp, N * d.C);                                                  // y = h + norm(m)
    }
    float *xL = a->res + (size_t)d.L * N * d.C;
    rmsnorm_forward(a->xf, a->xf_rstd, xL, w->final_norm, d.N, d.C, d.C, d.C, eps);

    if (!grads && !logits_out) {
        // Evaluation: only positions with a target need the LM head. Multiple-choice
        // scoring masks whole contexts, so compact those rows first (order kept, so the
        // sums are the same as over the full rows).
        float *xc = m->bw.dxf;   // free during a forward-only call
        int32_t *tc = m->targets_flat;
        int *pos = (int *)m->bw.tmp;
        int nv = 0;
        for (int n = 0; n < d.N; n++)
            if (targets[n] >= 0) {
                memcpy(xc + (size_t)nv * d.C, a->xf + (size_t)n * d.C, sizeof(float) * d.C);
                tc[nv] = targets[n];
                pos[nv++] = n;
            }
        float *ce_c = tok_ce ? m->bw.da : NULL;
        LossSums sums = lmhead_loss_forward_backward(NULL, NULL, xc, w->lm_head, tc, nv, d.C, c->padded_vocab, z_coef,
                                                     inv_count, m->lm_scratch, m->lm_chunk, NULL, ce_c);
        if (tok_ce) {
            memset(tok_ce, 0, sizeof(float) * N);
            for (int i = 0; i < nv; i++) tok_ce[pos[i]] = ce_c[i];
        }
        return sums;
    }
    ModelView gw;
    if (grads) model_view(&gw, &m->table, c, grads);
    LossSums sums = lmhead_loss_forward_backward(grads ? m->bw.dxf : NULL, grads ? gw.lm_head : NULL, a->xf,
                                                 w->lm_head, targets, d.N, d.C, c->padded_vocab, z_coef,
                                                 inv_count, m->lm_scratch, m->lm_chunk, logits_out, tok_ce);
    if (!grads) return sums;

    // ---- backward ----
    BackwardScratch *s = &m->bw;
    float *dres = s->dres;  // gradient w.r.t. the residual stream, walking down the layers
    rmsnorm_backward(dres, gw.final_norm, s->dxf, xL, w->final_norm, a->xf_rstd, d.N, d.C, d.C, d.C, d.C);
    for (int l = d.L - 1; l >= 0; l--) {
        const LayerView *lw = &w->layers[l];
        LayerView *lg = &gw.layers[l];
        const int window = model_layer_window(c, l, T);
        const int scaled = model_layer_rope_scaled(c, l);
        const float *rcos = scaled ? m->yarn_cos : m->rope_cos, *rsin = scaled ? m->yarn_sin : m->rope_sin;
        float *x = a->res + l * N * d.C;
        float *qkv = a->qkv + l * N * d.QKV;
        float *q = a->q + l * N * d.Q, *k = a->k + l * N * d.KV, *v = a->v + l * N * d.KV;
        float *att = a->att + l * N * d.Q, *lse = a->lse + l * N * d.NH;
        float *ao = a->a + l * N * d.C, *h = a->mid + l * N * d.C;
        float *gu = a->gu + l * N * 2 * d.H, *act = a->act + l * N * d.H, *mo = a->m + l * N * d.C;

        // y = h + norm_mlp(m): dh = dy (kept in dres), dm via the norm
        rmsnorm_backward(s->dm, lg->mlp_norm, dres, mo, lw->mlp_norm, a->m_rstd + l * N, d.N, d.C, d.C, d.C, d.C);
        matmul_backward(s->dact, lg->wdown, s->dm, act, lw->wdown, d.N, d.H, d.C, 0, 0);
        swiglu_backward(s->dgu, s->dact, gu, d.N, d.H);
        matmul_backward(dres, lg->wgu, s->dgu, h, lw->wgu, d.N, d.C, 2 * d.H, 1, 0);  // dres = dh
        // h = x + norm_attn(a): dx = dh (kept in dres), da via the norm
        rmsnorm_backward(s->da, lg->attn_norm, dres, ao, lw->attn_norm, a->a_rstd + l * N, d.N, d.C, d.C, d.C, d.C);
        matmul_backward(s->datt, lg->wo, s->da, att, lw->wo, d.N, d.Q, d.C, 0, 0);
        attention_backward(s->dq, s->dk, s->dv, s->datt, q, k, v, att, lse, B, T, d.NH, d.NKV, d.D, window, doc_start);
        rope_backward(s->dq, rcos, rsin, B, T, d.NH, d.D);
        rope_backward(s->dk, rcos, rsin, B, T, d.NKV, d.D);
        rmsnorm_backward(s->dqkv, lg->q_norm, s->dq, qkv, lw->q_norm, a->q_rstd + l * N, d.N, d.Q, d.Q, d.QKV, d.QKV);
        rmsnorm_backward(s->dqkv + d.Q, lg->k_norm, s->dk, qkv + d.Q, lw->k_norm, a->k_rstd + l * N, d.N, d.KV,
                         d.KV, d.QKV, d.QKV);
        scatter_cols(s->dqkv, s->dv, d.N, d.QKV, d.Q + d.KV, d.KV);
        matmul_backward(dres, lg->wqkv, s->dqkv, x, lw->wqkv, d.N, d.C, d.QKV, 1, 0);  // dres = dx
    }
    memset(gw.embed, 0, sizeof(float) * (size_t)c->padded_vocab * d.C);
    embedding_backward(gw.embed, dres, inputs, d.N, d.C);
    return sums;
}
