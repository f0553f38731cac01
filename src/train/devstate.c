// devstate.c: see devstate.h.
#include "train/devstate.h"

#include "util/common.h"

void devstate_sumsq(const DevState *s, double *part) {
    if (s->lo % SUMSQ_CHUNK) die("optimizer range starts at %zu, not a multiple of %d", s->lo, SUMSQ_CHUNK);
    if (s->hi > s->lo) s->be->ops->sumsq(s->be, s->grad, s->hi - s->lo, part + s->lo / SUMSQ_CHUNK);
}

void devstate_scale(const DevState *s, float coef) {
    if (s->hi > s->lo) s->be->ops->scale(s->be, s->grad, coef, s->hi - s->lo);
}

void devstate_adamw(const DevState *s, AdamW *o, double lr) {
    o->step++;
    for (int i = 0; i < s->table->n; i++) {
        const ParamInfo *p = &s->table->p[i];
        // the tensor's part of the range: [a, b) of the flat table
        size_t a = p->offset > s->lo ? p->offset : s->lo, b = p->offset + p->numel < s->hi ? p->offset + p->numel : s->hi;
        if (a >= b) continue;
        double wd = (p->kind == PARAM_EMBEDDING && !o->decay_embedding) ? 0.0 : o->weight_decay;
        size_t at = a - s->lo;
        void *wc = s->wcopy ? (char *)s->wcopy + at * dtype_size(s->wtype) : NULL;
        s->be->ops->adamw(s->be, s->master + at, s->m + at, s->v + at, s->grad + at, wc, s->wtype, b - a, (float)lr,
                          (float)o->beta1, (float)o->beta2, (float)o->eps, (float)wd, (int)o->step);
    }
}
