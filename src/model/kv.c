// kv.c: the KV-cache forward (see kv.h). Each call embeds its new tokens and runs every
// layer's block_forward with an attention context on that layer's cache at offset len,
// so the logits equal a full forward over the same tokens up to summation order (checked
// by `olmo generate --check-kv` and tests/test_generate.sh).
#include "model/kv.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/common.h"

void kv_create(KVModel *k, const ModelConfig *cfg, const ParamTable *t, float *params, int max_len, int max_n) {
    memset(k, 0, sizeof *k);
    k->cfg = *cfg;
    model_view(&k->w, t, cfg, params);
    k->max_len = max_len;
    k->max_n = max_n;
    const size_t C = (size_t)cfg->d_model, KV = (size_t)cfg->n_kv_heads * cfg->head_dim, n = (size_t)max_n;
    k->kcache = xmalloc_aligned(sizeof(float) * cfg->n_layers * (size_t)max_len * KV);
    k->vcache = xmalloc_aligned(sizeof(float) * cfg->n_layers * (size_t)max_len * KV);
    if (cfg->document_mask) k->doc_start = xmalloc(sizeof(int32_t) * (size_t)max_len);
    model_rope_create(&k->rope, cfg, max_len);
    block_acts_alloc(&k->acts, cfg, n);
    k->x = xmalloc_aligned(sizeof(float) * n * C);
    k->xf = xmalloc_aligned(sizeof(float) * n * C);
    k->xf_rstd = xmalloc_aligned(sizeof(float) * n);
}

void kv_free(KVModel *k) {
    free(k->kcache);
    free(k->vcache);
    free(k->doc_start);
    model_rope_free(&k->rope);
    block_acts_free(&k->acts);
    free(k->x);
    free(k->xf);
    free(k->xf_rstd);
    memset(k, 0, sizeof *k);
}

void kv_forward(KVModel *k, const int32_t *tokens, int n, float *logits, int all_logits) {
    const ModelConfig *c = &k->cfg;
    if (n <= 0 || n > k->max_n || k->len + n > k->max_len) die("kv_forward: %d tokens at position %d exceed the cache", n, k->len);
    const int C = c->d_model, p0 = k->len;
    const size_t KV = (size_t)c->n_kv_heads * c->head_dim, layer = (size_t)k->max_len * KV;
    if (k->doc_start)   // doc_starts_from_tokens, continued: an EOS closes its own document
        for (int i = 0; i < n; i++) {
            k->doc_start[p0 + i] = k->doc_next;
            if (tokens[i] == c->eos_id) k->doc_next = p0 + i + 1;
        }
    embedding_forward(k->x, tokens, k->w.embed, n, C);                                    // (n, C)
    for (int l = 0; l < c->n_layers; l++) {
        const AttnCtx ctx = {1, n, p0, k->kcache + l * layer, k->vcache + l * layer, k->doc_start, &k->rope};
        block_forward(k->x, k->x, c, &k->w, l, &k->acts, &ctx);                             // (n, C)
    }
    k->len += n;
    if (!logits) return;
    const int first = all_logits ? 0 : n - 1, rows = n - first;
    rmsnorm_forward(k->xf, k->xf_rstd, k->x + (size_t)first * C, k->w.final_norm, rows, C, C, C, (float)c->rms_eps);
    matmul_forward(logits, k->xf, k->w.lm_head, rows, C, c->padded_vocab);                // (rows, Vp)
}
