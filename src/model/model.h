// model.h: the OLMo 3 model: forward and backward of one micro-batch on the kernels of
// src/kernels (the backend). Activations are allocated once for a maximum (B, T) and
// saved per layer only as backward needs them; attention keeps its lse, not (T, T).
#ifndef OLMO_MODEL_H
#define OLMO_MODEL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "model/config.h"
#include "model/params.h"

typedef struct {
    float *res;         // (L+1, N, C) residual stream: res[0] = embeddings, res[l+1] = block l output
    float *mid;         // (L, N, C) h = x + norm(attn out)
    float *qkv;         // (L, N, Q+2KV) fused projection before QK-norm
    float *q_rstd, *k_rstd;  // (L, N)
    float *q, *k, *v;   // (L, N, Q), (L, N, KV) x2: after QK-norm + RoPE
    float *att;         // (L, N, Q) attention output (heads concatenated)
    float *lse;         // (L, B, NH, T)
    float *a;           // (L, N, C) o_proj output (before post-attention norm)
    float *a_rstd;      // (L, N)
    float *gu;          // (L, N, 2H)
    float *act;         // (L, N, H)
    float *m;           // (L, N, C) down_proj output (before post-feedforward norm)
    float *m_rstd;      // (L, N)
    float *xf;          // (N, C) after the final norm
    float *xf_rstd;     // (N)
} Activations;

typedef struct {
    float *dres, *dxf, *da, *datt, *dq, *dk, *dv, *dqkv, *dgu, *dact, *dm, *tmp;
} BackwardScratch;

typedef struct {
    ModelConfig cfg;
    ParamTable table;
    float *params;      // flat (table.total)
    ModelView w;        // views into params
    int max_B, max_T;
    Activations acts;
    BackwardScratch bw;
    float *rope_cos, *rope_sin;   // (max_T, head_dim/2) plain RoPE
    float *yarn_cos, *yarn_sin;   // (max_T, head_dim/2) cfg.rope_scaling's tables for full layers; NULL when none
    int32_t *doc_start;           // (max_B, max_T) per-token document start when cfg.document_mask; else NULL
    float *lm_scratch;  // (lm_chunk, Vp)
    int lm_chunk;
    int32_t *targets_flat;
} Model;

// Allocate parameters (uninitialized), activations for (max_B, max_T) and scratch.
void model_create(Model *m, const ModelConfig *cfg, int max_B, int max_T);
// As model_create, but activations and scratch are allocated by the first
// model_forward_backward: for a trainer whose step runs on another backend (CUDA), where
// this host copy serves checkpoints and evaluation and may never run a forward.
void model_create_lazy(Model *m, const ModelConfig *cfg, int max_B, int max_T);
void model_destroy(Model *m);
// Bytes of activations + scratch for (B, T) (what model_create allocates besides params).
size_t model_activation_bytes(const ModelConfig *cfg, int B, int T, int lm_chunk);

// Forward one micro-batch: inputs, targets (B, T), targets < 0 masked. Returns the loss
// sums. With grads != NULL also the backward of loss = (ce + z_coef * z) * inv_count,
// writing (overwriting) every parameter's gradient into the flat buffer `grads`.
// logits_out (B, T, Vp) and tok_ce (B, T) are optional outputs.
LossSums model_forward_backward(Model *m, const int32_t *inputs, const int32_t *targets, int B, int T,
                                float z_coef, float inv_count, float *grads, float *logits_out,
                                float *tok_ce);

#endif
