// params.c: the parameter table (see params.h) and OLMo 3 initialization.
#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"

static void add(ParamTable *t, int *cap, ParamKind kind, int d0, int d1, const char *fmt, int layer) {
    if (t->n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        t->p = xrealloc(t->p, sizeof(ParamInfo) * (size_t)*cap);
    }
    ParamInfo *p = &t->p[t->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, fmt, layer);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (d1 > 0 ? d1 : 1);
    p->offset = t->total;
    p->kind = kind;
    t->total += p->numel;
}

void param_table_build(ParamTable *t, const ModelConfig *c) {
    memset(t, 0, sizeof *t);
    int cap = 0;
    const int C = c->d_model, Q = c->n_heads * c->head_dim, KV = c->n_kv_heads * c->head_dim, H = c->mlp_hidden;
    add(t, &cap, PARAM_EMBEDDING, c->padded_vocab, C, "model.embed_tokens.weight", 0);
    for (int l = 0; l < c->n_layers; l++) {
        add(t, &cap, PARAM_LINEAR, Q, C, "model.layers.%d.self_attn.q_proj.weight", l);
        add(t, &cap, PARAM_LINEAR, KV, C, "model.layers.%d.self_attn.k_proj.weight", l);
        add(t, &cap, PARAM_LINEAR, KV, C, "model.layers.%d.self_attn.v_proj.weight", l);
        add(t, &cap, PARAM_LINEAR, C, Q, "model.layers.%d.self_attn.o_proj.weight", l);
        add(t, &cap, PARAM_NORM, Q, 0, "model.layers.%d.self_attn.q_norm.weight", l);
        add(t, &cap, PARAM_NORM, KV, 0, "model.layers.%d.self_attn.k_norm.weight", l);
        add(t, &cap, PARAM_NORM, C, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        add(t, &cap, PARAM_LINEAR, H, C, "model.layers.%d.mlp.gate_proj.weight", l);
        add(t, &cap, PARAM_LINEAR, H, C, "model.layers.%d.mlp.up_proj.weight", l);
        add(t, &cap, PARAM_LINEAR, C, H, "model.layers.%d.mlp.down_proj.weight", l);
        add(t, &cap, PARAM_NORM, C, 0, "model.layers.%d.post_feedforward_layernorm.weight", l);
    }
    add(t, &cap, PARAM_NORM, C, 0, "model.norm.weight", 0);
    add(t, &cap, PARAM_LM_HEAD, c->padded_vocab, C, "lm_head.weight", 0);
}

void param_table_free(ParamTable *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

const ParamInfo *param_table_find(const ParamTable *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->p[i].name, name)) return &t->p[i];
    return NULL;
}

void model_offsets(ModelOffsets *o, const ParamTable *t, const ModelConfig *c) {
    memset(o, 0, sizeof *o);
    const int per_layer = 11;   // param_table_build's rows per layer
    o->embed = t->p[0].offset;
    for (int l = 0; l < c->n_layers; l++) {
        const ParamInfo *p = &t->p[1 + l * per_layer];
        LayerOffsets *L = &o->layers[l];
        L->wqkv = p[0].offset;
        L->wo = p[3].offset;
        L->q_norm = p[4].offset;
        L->k_norm = p[5].offset;
        L->attn_norm = p[6].offset;
        L->wgu = p[7].offset;
        L->wdown = p[9].offset;
        L->mlp_norm = p[10].offset;
    }
    o->final_norm = t->p[t->n - 2].offset;
    o->lm_head = t->p[t->n - 1].offset;
}

void model_view(ModelView *v, const ParamTable *t, const ModelConfig *c, float *base) {
    ModelOffsets o;
    model_offsets(&o, t, c);
    memset(v, 0, sizeof *v);
    v->embed = base + o.embed;
    for (int l = 0; l < c->n_layers; l++) {
        const LayerOffsets *p = &o.layers[l];
        LayerView *L = &v->layers[l];
        L->wqkv = base + p->wqkv;
        L->wo = base + p->wo;
        L->q_norm = base + p->q_norm;
        L->k_norm = base + p->k_norm;
        L->attn_norm = base + p->attn_norm;
        L->wgu = base + p->wgu;
        L->wdown = base + p->wdown;
        L->mlp_norm = base + p->mlp_norm;
    }
    v->final_norm = base + o.final_norm;
    v->lm_head = base + o.lm_head;
}

// splitmix64: a well-known 64-bit mixer; the init stream is a pure function of the key.
static unsigned long long mix64(unsigned long long z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform01(unsigned long long seed, unsigned long long tensor, unsigned long long idx,
                        unsigned long long draw) {
    unsigned long long h = mix64(seed ^ mix64(tensor * 0x100000001b3ULL ^ mix64(idx * 4 + draw)));
    return ((h >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
}

// Standard normal by Box-Muller from two counter-keyed uniforms; truncation by redrawing
// (attempt k uses draws 2k, 2k+1), which is exactly the truncated normal distribution.
static float trunc_normal(unsigned long long seed, unsigned long long tensor, unsigned long long idx,
                          double std, double cut) {
    for (unsigned long long k = 0;; k++) {
        double u1 = uniform01(seed, tensor, idx, 2 * k), u2 = uniform01(seed, tensor, idx, 2 * k + 1);
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        if (fabs(z) <= cut) return (float)(z * std);
    }
}

void param_init(const ParamTable *t, float *params, unsigned long long seed) {
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        float *w = params + p->offset;
        if (p->kind == PARAM_NORM) {
            for (size_t j = 0; j < p->numel; j++) w[j] = 1.0f;
            continue;
        }
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < p->numel; j++) w[j] = trunc_normal(seed, (unsigned long long)i, j, 0.02, 3.0);
    }
}
