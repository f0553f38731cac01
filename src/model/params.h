// params.h: the one parameter table. Every tensor of the model is a row: HF name, shape,
// offset into one contiguous fp32 buffer, whether it is weight-decayed. Parameters,
// gradients and Adam m/v are flat buffers with this same layout; init, the optimizer,
// clipping, sharding, checkpoints, HF export/import and the parity tests all walk it.
//
// Layout choices: within a layer q, k, v are adjacent (one fused QKV GEMM reads them as a
// (Q+2KV, C) matrix) and so are gate and up (one (2H, C) GEMM).
#ifndef OLMO_PARAMS_H
#define OLMO_PARAMS_H

#include <stddef.h>

#include "model/config.h"

typedef enum { PARAM_EMBEDDING, PARAM_LINEAR, PARAM_NORM, PARAM_LM_HEAD } ParamKind;

typedef struct {
    char name[96];      // HF name, e.g. model.layers.3.self_attn.q_proj.weight
    int ndim;
    int shape[2];       // HF shape (out, in) for linears
    size_t offset;      // into the flat buffer, in floats
    size_t numel;
    ParamKind kind;
} ParamInfo;

typedef struct {
    int n;
    ParamInfo *p;
    size_t total;       // floats in the flat buffer
} ParamTable;

// Views of one flat buffer (params, grads, m or v) as tensors.
typedef struct {
    float *wqkv;        // (Q + 2KV, C): q_proj, k_proj, v_proj stacked
    float *wo;          // (C, Q)
    float *q_norm;      // (Q)
    float *k_norm;      // (KV)
    float *attn_norm;   // (C) post_attention_layernorm
    float *wgu;         // (2H, C): gate_proj, up_proj stacked
    float *wdown;       // (C, H)
    float *mlp_norm;    // (C) post_feedforward_layernorm
} LayerView;

typedef struct {
    float *embed;       // (Vp, C)
    LayerView layers[MAX_LAYERS];
    float *final_norm;  // (C)
    float *lm_head;     // (Vp, C)
} ModelView;

// The same tensors as offsets (in elements) into the flat layout, for buffers of another
// element type (the bf16 compute copy) or on a device: tensor p of a buffer b is b + off.p.
typedef struct {
    size_t wqkv, wo, q_norm, k_norm, attn_norm, wgu, wdown, mlp_norm;
} LayerOffsets;
typedef struct {
    size_t embed;
    LayerOffsets layers[MAX_LAYERS];
    size_t final_norm, lm_head;
} ModelOffsets;

void param_table_build(ParamTable *t, const ModelConfig *c);
void param_table_free(ParamTable *t);
const ParamInfo *param_table_find(const ParamTable *t, const char *name);
void model_view(ModelView *v, const ParamTable *t, const ModelConfig *c, float *base);
void model_offsets(ModelOffsets *o, const ParamTable *t, const ModelConfig *c);

// OLMo 3 init: every linear and the embedding ~ truncated normal(0, 0.02) cut at +-3 std;
// norm weights 1. Each element comes from a counter-based generator keyed by
// (seed, tensor index, element index), so the values are the same on every machine and
// at any thread count.
void param_init(const ParamTable *t, float *params, unsigned long long seed);


#endif
