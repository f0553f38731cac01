// kv.h: the KV-cache forward (`olmo generate`): new tokens run through the model graph
// (model/graph.h, the same block_forward as training), attending to the keys and values of
// all earlier positions, stored per layer after k-norm and RoPE at their absolute
// positions. Sliding layers read only the last `window` of them, full layers all; with
// cfg.document_mask a position sees only its own document, as in training.
#ifndef OLMO_KV_H
#define OLMO_KV_H

#include <stdint.h>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/graph.h"
#include "model/params.h"
#include "model/stored.h"

typedef struct {
    ModelConfig cfg;
    OpsBackend *be;              // the CPU backend (fp32)
    Graph graph;                 // KV-cache mode: the cache, one block's buffers for max_n tokens
    const float *params;         // the caller's parameters (the compute weights on the CPU)
    ModelView w;                 // views into them (the graph reads the norm weights here)
    StoredWeights *stored;       // weights kept as stored (model/stored.h; params NULL), else NULL
    int max_len;                 // positions the cache holds
    int max_n;                   // tokens per kv_forward call
    int len;                     // positions filled so far
    int32_t *doc_start;          // (max_len) each position's document start with cfg.document_mask; else NULL
    int32_t doc_next;            // the document start of position len
} KVModel;

void kv_create(KVModel *k, const ModelConfig *cfg, const ParamTable *t, float *params, int max_len, int max_n);
// The same over weights kept as stored (stored.h; the caller's, outliving k).
void kv_create_stored(KVModel *k, const ModelConfig *cfg, const ParamTable *t, StoredWeights *sw, int max_len,
                      int max_n);
void kv_free(KVModel *k);
// Run n (<= max_n) new tokens at positions k->len .. k->len+n-1 and append them to the
// cache. logits (n, padded_vocab) for every new token when all_logits, else (1, padded_vocab)
// for the last one only; logits NULL: none (cache fill only).
void kv_forward(KVModel *k, const int32_t *tokens, int n, float *logits, int all_logits);

#endif
