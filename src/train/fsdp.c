// fsdp.c: see fsdp.h.
#include "train/fsdp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dist/dist.h"
#include "util/common.h"

typedef enum { PART_FREE, PART_POSTED, PART_READY } PartState;

struct Fsdp {
    TrainCore *tc;
    int nparts;        // L + 2: index 0 the embedding, 1..L the blocks, L+1 the head
    size_t *lo, *hi;   // each part's range of the flat table
    PartState *state;
    DistReq **req;
    int current;       // index of the part in use, -1 none
};

void pages_release(void *p, size_t bytes) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + pg - 1) / pg * pg,
                    b = ((uintptr_t)p + bytes) / pg * pg;
    // Only pages wholly inside: a neighbour's bytes on a shared page stay as they are.
    if (b > a && madvise((void *)a, b - a, MADV_DONTNEED) != 0) die("madvise(MADV_DONTNEED) failed");
}

static int index_of(const Fsdp *f, int part) {
    return part == GRAPH_PART_EMBED ? 0 : part == GRAPH_PART_HEAD ? f->nparts - 1 : part + 1;
}

Fsdp *fsdp_create(TrainCore *tc) {
    const Model *m = tc->model;
    const int L = m->cfg.n_layers;
    ModelOffsets off;
    model_offsets(&off, &m->table, &m->cfg);
    Fsdp *f = xcalloc(1, sizeof *f);
    f->tc = tc;
    f->nparts = L + 2;
    f->lo = xcalloc((size_t)f->nparts, sizeof(size_t));
    f->hi = xcalloc((size_t)f->nparts, sizeof(size_t));
    f->state = xcalloc((size_t)f->nparts, sizeof(PartState));
    f->req = xcalloc((size_t)f->nparts, sizeof(DistReq *));
    f->current = -1;
    f->lo[0] = off.embed;
    for (int l = 0; l < L; l++) f->lo[l + 1] = off.layers[l].wqkv;
    f->lo[L + 1] = off.final_norm;
    for (int i = 0; i < f->nparts; i++) f->hi[i] = i + 1 < f->nparts ? f->lo[i + 1] : m->table.total;
    // The graph reads each part's tensors inside its range only if the table is laid out in
    // that order (params.c: embedding, the blocks' tensors block by block, final norm, head).
    if (f->lo[0] != 0 || off.lm_head < off.final_norm) die("fsdp: the parameter table is not in model order");
    for (int i = 0; i < f->nparts; i++)
        if (f->hi[i] < f->lo[i]) die("fsdp: part %d of the parameter table is not contiguous", i);
    return f;
}

void fsdp_free(Fsdp *f) {
    if (!f) return;
    for (int i = 0; i < f->nparts; i++) dist_wait(f->req[i]);
    free(f->lo);
    free(f->hi);
    free(f->state);
    free(f->req);
    free(f);
}

// Copy this rank's shard's part of part i from the master into the buffer, then start the
// in-place all-gather of the rest.
static void post(Fsdp *f, int i) {
    if (f->state[i] != PART_FREE) return;
    TrainCore *tc = f->tc;
    size_t lo, hi;
    train_core_range(tc, &lo, &hi);
    const size_t a = f->lo[i] > lo ? f->lo[i] : lo, b = f->hi[i] < hi ? f->hi[i] : hi;
    if (b > a) memcpy(tc->model->params + a, tc->master + (a - lo), sizeof(float) * (b - a));
    f->req[i] = dist_iallgather_range(tc->model->params, f->lo[i], f->hi[i], tc->bounds);
    f->state[i] = PART_POSTED;
}

static void release(Fsdp *f, int i) {
    dist_wait(f->req[i]);   // a posted gather still writing into the pages (only at the end)
    f->req[i] = NULL;
    pages_release(f->tc->model->params + f->lo[i], sizeof(float) * (f->hi[i] - f->lo[i]));
    f->state[i] = PART_FREE;
}

void fsdp_weights(void *ctx, int part, int next) {
    Fsdp *f = ctx;
    const int i = part == GRAPH_PART_NONE ? -1 : index_of(f, part), j = next == GRAPH_PART_NONE ? -1 : index_of(f, next);
    if (f->current >= 0 && f->current != i && f->current != j) release(f, f->current);
    if (i < 0) {
        fsdp_release_all(f);
        return;
    }
    post(f, i);
    if (f->state[i] == PART_POSTED) {
        dist_wait(f->req[i]);
        f->req[i] = NULL;
        f->state[i] = PART_READY;
    }
    if (j >= 0) post(f, j);   // overlaps the compute of part i
    f->current = i;
}

void fsdp_release_all(Fsdp *f) {
    for (int i = 0; i < f->nparts; i++)
        if (f->state[i] != PART_FREE) release(f, i);
    f->current = -1;
}
