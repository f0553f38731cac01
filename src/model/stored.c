// stored.c: weights kept as stored, upcast a part at a time (see stored.h).
#include "model/stored.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"

// Parts of the table in model order (params.c): 0 the embedding, 1..L the blocks, L+1 the
// final norm + LM head. Rows of the table: the embedding, 11 a block, then norm, head.
#define ROWS_PER_BLOCK 11

struct StoredWeights {
    const ParamTable *t;
    ModelConfig cfg;
    StoredTensor *ten;       // (t->n)
    int nparts;
    int *row0, *row1;        // each part's rows [row0, row1) of the table
    float *scratch;          // (stored_scratch_floats + 16), 64-byte aligned
    float *part;             // the part in fp32 in scratch, tensor at (offset - the part's first offset)
    ModelView norms;         // fp32 norm weights of the part in scratch (the graph reads p->norms)
    GraphParams *gp;         // the call's parameters (stored_bind)
    int cur;                 // the part in scratch, -1 none
};

static void part_rows(const ParamTable *t, int L, int part, int *r0, int *r1) {
    if (part == 0) { *r0 = 0; *r1 = 1; }
    else if (part <= L) { *r0 = 1 + (part - 1) * ROWS_PER_BLOCK; *r1 = *r0 + ROWS_PER_BLOCK; }
    else { *r0 = t->n - 2; *r1 = t->n; }
}

size_t stored_scratch_floats(const ModelConfig *cfg) {
    ModelConfig c = *cfg;
    model_config_derive(&c);
    ParamTable t;
    param_table_build(&t, &c);
    size_t big = 0;
    for (int part = 0; part < c.n_layers + 2; part++) {
        int r0, r1;
        part_rows(&t, c.n_layers, part, &r0, &r1);
        const size_t n = t.p[r1 - 1].offset + t.p[r1 - 1].numel - t.p[r0].offset;
        if (n > big) big = n;
    }
    param_table_free(&t);
    return big;
}

StoredWeights *stored_create(const ModelConfig *cfg, const ParamTable *t, const StoredTensor *ten) {
    StoredWeights *s = xcalloc(1, sizeof *s);
    s->t = t;
    s->cfg = *cfg;
    const int L = cfg->n_layers;
    if (t->n != 1 + L * ROWS_PER_BLOCK + 2) die("stored: the parameter table has %d rows, not %d", t->n, 3 + 11 * L);
    s->ten = xmalloc(sizeof *s->ten * (size_t)t->n);
    memcpy(s->ten, ten, sizeof *s->ten * (size_t)t->n);
    s->nparts = L + 2;
    s->row0 = xmalloc(sizeof(int) * (size_t)s->nparts);
    s->row1 = xmalloc(sizeof(int) * (size_t)s->nparts);
    for (int i = 0; i < s->nparts; i++) part_rows(t, L, i, &s->row0[i], &s->row1[i]);
    void *buf = NULL;
    if (posix_memalign(&buf, 64, sizeof(float) * (stored_scratch_floats(cfg) + 16)) != 0) buf = NULL;
    s->scratch = buf;
    if (!s->scratch) {
        stored_free(s);
        return NULL;
    }
    s->cur = -1;
    return s;
}

void stored_free(StoredWeights *s) {
    if (!s) return;
    free(s->ten);
    free(s->row0);
    free(s->row1);
    free(s->scratch);
    free(s);
}

// Tensor values into fp32 (bf16: the bits shifted up, exact), zeros after the stored ones.
static void upcast(const StoredTensor *x, float *dst, size_t numel) {
    const uint8_t *b = x->data;
    const long n = (long)x->n;
    if (x->type == STORED_F32) memcpy(dst, b, sizeof(float) * (size_t)n);
    else {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, b + 2 * (size_t)i, 2);   // unaligned-safe: a tensor may start at any even byte
            const uint32_t bits = (uint32_t)h << 16;
            memcpy(&dst[i], &bits, 4);
        }
    }
    if ((size_t)n < numel) memset(dst + n, 0, sizeof(float) * (numel - (size_t)n));
}

// Part i into the scratch; p->w then addresses it at the table's offsets, as the graph
// reads every part (the CUDA shard modes do the same, train/cuda/fsdp_cuda.cu). Each tensor
// lands at the address modulo 64 bytes it has in a 64-byte-aligned whole table (the fp32
// path's), so no kernel can take another path for alignment's sake.
static void materialise(StoredWeights *s, int i) {
    const ParamTable *t = s->t;
    const size_t lo = t->p[s->row0[i]].offset;
    s->part = s->scratch + lo % 16;
    for (int r = s->row0[i]; r < s->row1[i]; r++) upcast(&s->ten[r], s->part + (t->p[r].offset - lo), t->p[r].numel);
    float *base = s->part - lo;
    const int L = s->cfg.n_layers;
    if (i >= 1 && i <= L) {   // the block's norm weights, where the graph reads them
        ModelView v;
        model_view(&v, t, &s->cfg, base);
        s->norms.layers[i - 1] = v.layers[i - 1];
    } else if (i == L + 1)
        s->norms.final_norm = base + t->p[t->n - 2].offset;
    s->cur = i;
}

static void weights_hook(void *ctx, int part, int next) {
    (void)next;
    StoredWeights *s = ctx;
    if (part == GRAPH_PART_NONE) return;   // the call is over; the scratch keeps its part
    const int i = part == GRAPH_PART_EMBED ? 0 : part == GRAPH_PART_HEAD ? s->nparts - 1 : part + 1;
    if (i != s->cur) materialise(s, i);
    s->gp->w = s->part - s->t->p[s->row0[i]].offset;
}

void stored_bind(StoredWeights *s, GraphParams *p) {
    s->gp = p;
    p->w = NULL;   // set by the hook before any part is read
    p->norms = &s->norms;
    p->weights = weights_hook;
    p->weights_ctx = s;
}
