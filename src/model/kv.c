// kv.c: the KV-cache forward (see kv.h): the document bookkeeping of a growing sequence,
// then graph_forward_kv, which runs every layer's block_forward (model/graph.c) with the
// layer's cache, so the logits equal a full forward over the same tokens up to summation
// order (checked by `olmo generate --check-kv` and tests/test_generate.sh).
#include "model/kv.h"

#include <stdlib.h>
#include <string.h>

#include "util/common.h"

void kv_create(KVModel *k, const ModelConfig *cfg, const ParamTable *t, float *params, int max_len, int max_n) {
    memset(k, 0, sizeof *k);
    k->cfg = *cfg;
    k->params = params;
    if (params) model_view(&k->w, t, cfg, params);
    k->max_len = max_len;
    k->max_n = max_n;
    k->be = ops_cpu_create(PRECISION_FP32);
    if (graph_init_kv(&k->graph, k->be, cfg, t, max_n, max_len))
        die("generate: out of memory for a KV cache of %d positions", max_len);
    if (cfg->document_mask) k->doc_start = xmalloc(sizeof(int32_t) * (size_t)max_len);
}

void kv_create_stored(KVModel *k, const ModelConfig *cfg, const ParamTable *t, StoredWeights *sw, int max_len,
                      int max_n) {
    kv_create(k, cfg, t, NULL, max_len, max_n);
    k->stored = sw;
}

void kv_free(KVModel *k) {
    graph_free(&k->graph);
    ops_destroy(k->be);
    free(k->doc_start);
    memset(k, 0, sizeof *k);
}

void kv_forward(KVModel *k, const int32_t *tokens, int n, float *logits, int all_logits) {
    const ModelConfig *c = &k->cfg;
    if (n <= 0 || n > k->max_n || k->len + n > k->max_len) die("kv_forward: %d tokens at position %d exceed the cache", n, k->len);
    const int p0 = k->len;
    if (k->doc_start)   // doc_starts_from_tokens, continued: an EOS closes its own document
        for (int i = 0; i < n; i++) {
            k->doc_start[p0 + i] = k->doc_next;
            if (tokens[i] == c->eos_id) k->doc_next = p0 + i + 1;
        }
    GraphParams p = {k->params, &k->w, NULL, 0, NULL, NULL, NULL, NULL};
    if (k->stored) stored_bind(k->stored, &p);   // each part upcast as the graph reaches it
    graph_forward_kv(&k->graph, &p, tokens, n, p0, k->doc_start ? k->doc_start + p0 : NULL, logits, all_logits);
    k->len += n;
}
