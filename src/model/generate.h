// generate.h: inference with a KV cache (`olmo generate`). The forward of new tokens
// reuses the keys and values of all earlier positions, stored per layer after QK-norm and
// RoPE at their absolute positions; sliding layers read only the last `window` of them.
// Same kernels as training (matmul, rmsnorm, rope, swiglu), its own attention loop over
// the cache.
#ifndef OLMO_GENERATE_H
#define OLMO_GENERATE_H

#include <stdint.h>

#include "model/config.h"
#include "model/params.h"

typedef struct {
    ModelConfig cfg;
    ModelView w;        // views into parameters owned by the caller
    int max_len;        // positions the cache holds
    int max_n;          // tokens per kv_forward call
    int len;            // positions filled so far
    float *kcache, *vcache;     // (L, max_len, NKV*D) each
    float *rope_cos, *rope_sin; // (max_len, D/2)
    float *yarn_cos, *yarn_sin; // (max_len, D/2) full layers' tables with cfg.rope_scaling; NULL when none
    // scratch for max_n tokens
    float *x, *qkv, *q, *att, *a, *an, *gu, *act, *mo, *rstd, *xf;
} KVModel;

void kv_create(KVModel *k, const ModelConfig *cfg, const ParamTable *t, float *params, int max_len, int max_n);
void kv_free(KVModel *k);
// Run n (<= max_n) new tokens at positions k->len .. k->len+n-1 and append them to the
// cache. logits (n, padded_vocab) for every new token when all_logits, else (1, padded_vocab)
// for the last one only.
void kv_forward(KVModel *k, const int32_t *tokens, int n, float *logits, int all_logits);

#endif
