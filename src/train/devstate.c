// devstate.c: see devstate.h.
#include "train/devstate.h"

#include <stdlib.h>

#include "util/common.h"

void devstate_sumsq(const DevState *s, double *part) {
    if (s->lo % SUMSQ_CHUNK) die("optimizer range starts at %zu, not a multiple of %d", s->lo, SUMSQ_CHUNK);
    if (s->hi > s->lo) s->be->ops->sumsq(s->be, s->grad, s->hi - s->lo, part + s->lo / SUMSQ_CHUNK);
}

void devstate_scale(const DevState *s, float coef) {
    if (s->hi > s->lo) s->be->ops->scale(s->be, s->grad, coef, s->hi - s->lo);
}

// Tensor i's part of the range (elements [at, at + n) of it) and its weight decay; 0 when
// the tensor lies outside the range.
static int tensor_span(const DevState *s, const AdamW *o, int i, AdamWSpan *sp) {
    const ParamInfo *p = &s->table->p[i];
    size_t a = p->offset > s->lo ? p->offset : s->lo, b = p->offset + p->numel < s->hi ? p->offset + p->numel : s->hi;
    if (a >= b) return 0;
    sp->at = a - s->lo;
    sp->n = b - a;
    sp->wd = (float)((p->kind == PARAM_EMBEDDING && !o->decay_embedding) ? 0.0 : o->weight_decay);
    return 1;
}

void devstate_adamw(const DevState *s, AdamW *o, double lr) {
    o->step++;
    for (int i = 0; i < s->table->n; i++) {
        AdamWSpan sp;
        if (!tensor_span(s, o, i, &sp)) continue;
        void *wc = s->wcopy ? (char *)s->wcopy + sp.at * dtype_size(s->wtype) : NULL;
        s->be->ops->adamw(s->be, s->master + sp.at, s->m + sp.at, s->v + sp.at, s->grad + sp.at, wc, s->wtype, sp.n,
                          (float)lr, (float)o->beta1, (float)o->beta2, (float)o->eps, sp.wd, (int)o->step);
    }
}

void devstate_clip_adamw(const DevState *s, AdamW *o, double lr, double clip) {
    if (!s->be->ops->adamw_spans) {
        if (!(clip >= 1.0)) devstate_scale(s, (float)clip);
        devstate_adamw(s, o, lr);
        return;
    }
    o->step++;
    AdamWSpan *sp = xmalloc(sizeof(AdamWSpan) * (size_t)(s->table->n > 0 ? s->table->n : 1));
    int k = 0;
    for (int i = 0; i < s->table->n; i++) k += tensor_span(s, o, i, &sp[k]);
    s->be->ops->adamw_spans(s->be, s->master, s->m, s->v, s->grad, s->wcopy, s->wtype, sp, k,
                            clip >= 1.0 ? 1.0f : (float)clip, (float)lr, (float)o->beta1, (float)o->beta2,
                            (float)o->eps, (int)o->step);
    free(sp);
}
