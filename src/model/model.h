// model.h: the OLMo 3 model: forward and backward of one micro-batch on the kernels of
// src/kernels (the backend). Activations are allocated once for a maximum (B, T) and
// saved per layer only as backward needs them; attention keeps its lse, not (T, T).
#ifndef OLMO_MODEL_H
#define OLMO_MODEL_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "model/config.h"
#include "model/params.h"

// ---- one OLMo 3 block, shared by the training forward and the KV-cache forward (kv.h) ----

// A block's intermediates for its N = B*T new rows. The training forward points them at
// layer l's saved activations (the backward reads them); the KV-cache forward at scratch
// that every layer reuses.
typedef struct {
    float *qkv;              // (N, Q+2KV) fused projection before QK-norm
    float *q_rstd, *k_rstd;  // (N)
    float *q;                // (N, Q) after QK-norm + RoPE
    float *att;              // (N, Q) attention output (heads concatenated)
    float *lse;              // (B, NH, T)
    float *a;                // (N, C) o_proj output (before post-attention norm)
    float *a_rstd;           // (N)
    float *h;                // (N, C) x + norm_attn(a)
    float *gu;               // (N, 2H)
    float *act;              // (N, H)
    float *m;                // (N, C) down_proj output (before post-feedforward norm)
    float *m_rstd;           // (N)
} BlockActs;

// RoPE tables for positions 0..n-1: plain ones, and cfg.rope_scaling's for full layers.
typedef struct {
    float *cos, *sin;            // (n, head_dim/2)
    float *yarn_cos, *yarn_sin;  // (n, head_dim/2) with YaRN scaling; else NULL
} ModelRope;

// Where a block's attention gets its keys and values. The B sequences' T new rows sit at
// positions p0..p0+T-1 (training: p0 = 0, the micro-batch itself; generation: p0 = the
// cache length) and attend to positions 0..p0+T-1 under the causal, window and document
// rules. The block writes the new rows' keys and values at rows p0.. of k and v.
typedef struct {
    int B, T, p0;                // p0 > 0 needs B = 1 (new rows of one sequence are contiguous)
    float *k, *v;                // (B, p0+T, NKV, D) after k-norm + RoPE, and V
    const int32_t *doc_start;    // (B, p0+T) each position's document start, or NULL (no mask)
    const ModelRope *rope;       // tables covering positions 0..p0+T-1
} AttnCtx;

// y (N, C) = block l of x (N, C) (the formula at the top of model.c); y may alias x.
void block_forward(float *y, const float *x, const ModelConfig *c, const ModelView *w, int l, const BlockActs *ba,
                   const AttnCtx *ctx);
// Every BlockActs buffer for `rows` rows, and its view at row r0 (a layer's slice).
void block_acts_alloc(BlockActs *ba, const ModelConfig *c, size_t rows);
BlockActs block_acts_at(const BlockActs *all, const ModelConfig *c, size_t r0);
void block_acts_free(BlockActs *ba);
void model_rope_create(ModelRope *r, const ModelConfig *c, int n);
void model_rope_free(ModelRope *r);

typedef struct {
    float *res;         // (L+1, N, C) residual stream: res[0] = embeddings, res[l+1] = block l output
    BlockActs blk;      // every buffer (L, N, ...): layer l's at row l*N (block_acts_at)
    float *k, *v;       // (L, N, KV) after k-norm + RoPE, and V
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
    ModelRope rope;     // (max_T) tables
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
