// optim.c: see optim.h.
#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/common.h"

// OLMo-core HalfCosWithWarmup.get_lr (olmo_core/optim/scheduler.py), in its operation order.
static double half_cos_lr(const Schedule *s, long step) {
    const double eta_min = s->peak * s->alpha_f;
    if (step < s->warmup) {
        const double max_lr = eta_min + (s->peak - eta_min) / 2;
        return max_lr * (double)step / (double)s->warmup;
    }
    if (step >= s->max_steps) return eta_min;
    const double t_max = (double)(s->max_steps - s->warmup);
    const double current = (double)(step - s->warmup) + t_max;
    return eta_min + (s->peak - eta_min) * (1 + cos(M_PI * current / (t_max * 2))) / 2;
}

// OLMo-core WSD.get_lr with warmup_min_lr 0, in its operation order; held at decay_min_lr past t_max.
static double wsd_lr(const Schedule *s, long step) {
    if (s->warmup > 0 && step <= s->warmup) return s->peak * (double)step / (double)s->warmup;
    if (step >= s->max_steps) return s->decay_min_lr;
    if (step >= s->max_steps - s->decay_steps) {
        const long from_end = s->max_steps - step;
        return s->decay_min_lr + (s->peak - s->decay_min_lr) * (double)from_end / (double)s->decay_steps;
    }
    return s->peak;
}

double schedule_lr(const Schedule *s, long step) {
    if (!strcmp(s->name, "half_cos_with_warmup")) return half_cos_lr(s, step);
    if (!strcmp(s->name, "wsd")) return wsd_lr(s, step);
    if (step < s->warmup) return s->peak * (double)step / (double)s->warmup;
    double end = s->alpha_f * s->peak;
    if (!strcmp(s->name, "constant")) return s->peak;
    long span = s->max_steps - s->warmup;
    double frac = span > 0 ? (double)(step - s->warmup) / (double)span : 1.0;
    if (frac > 1) frac = 1;
    if (!strcmp(s->name, "linear")) return s->peak - (s->peak - end) * frac;
    // cosine
    return end + (s->peak - end) * (1.0 + cos(M_PI * frac)) / 2.0;
}

void schedule_from_recipe(const Recipe *r, Schedule *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", r->schedule);
    s->peak = r->lr;
    s->warmup = r->warmup_steps;
    s->max_steps = recipe_schedule_steps(r);
    s->alpha_f = r->alpha_f;
    s->decay_steps = r->decay_steps;
    s->decay_min_lr = r->decay_min_lr;
}

void adamw_init(AdamW *o, const ParamTable *t, double beta1, double beta2, double eps, double wd, int decay_embedding) {
    memset(o, 0, sizeof *o);
    o->table = t;
    o->m = xmalloc_aligned(sizeof(float) * t->total);
    o->v = xmalloc_aligned(sizeof(float) * t->total);
    memset(o->m, 0, sizeof(float) * t->total);
    memset(o->v, 0, sizeof(float) * t->total);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = wd;
    o->decay_embedding = decay_embedding;
}

void adamw_free(AdamW *o) {
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

double clip_coef(double norm, double max_norm) {
    double coef = max_norm > 0 ? max_norm / (norm + 1e-6) : 1.0;
    return coef < 1.0 ? coef : 1.0;
}

double clip_grad_norm(float *grads, size_t n, double max_norm) {
    double norm = sqrt(sumsq(grads, n)), coef = clip_coef(norm, max_norm);
    if (coef < 1.0) scale_inplace(grads, (float)coef, n);
    return norm;
}

void gradacc_init(GradAcc *g, size_t n) {
    memset(g, 0, sizeof *g);
    g->n = n;
}

void gradacc_free(GradAcc *g) {
    for (int i = 0; i < g->nbuf; i++) free(g->buf[i]);
    memset(g, 0, sizeof *g);
}

void gradacc_reset(GradAcc *g) { g->depth = 0; }

float *gradacc_slot(GradAcc *g) {
    // The stack uses buf[0..depth-1]; the slot is buf[depth] (allocated on first use).
    if (g->depth >= GRADACC_MAX_LEVELS) die("gradient accumulation: too many micro-batches");
    while (g->nbuf <= g->depth) g->buf[g->nbuf++] = xmalloc_aligned(sizeof(float) * g->n);
    return g->buf[g->depth];
}

void gradacc_push(GradAcc *g) {
    g->span[g->depth] = 1;
    g->depth++;
    while (g->depth >= 2 && g->span[g->depth - 1] == g->span[g->depth - 2]) {
        add_inplace(g->buf[g->depth - 2], g->buf[g->depth - 1], g->n);
        g->span[g->depth - 2] *= 2;
        g->depth--;
    }
}

float *gradacc_finish(GradAcc *g) {
    if (g->depth == 0) die("gradient accumulation: no micro-batch pushed");
    for (int i = g->depth - 1; i >= 1; i--) {
        add_inplace(g->buf[i - 1], g->buf[i], g->n);
        g->span[i - 1] += g->span[i];
    }
    g->depth = 1;
    return g->buf[0];
}

void adamw_init_range(AdamW *o, const ParamTable *t, size_t lo, size_t hi, double beta1, double beta2, double eps,
                      double wd, int decay_embedding) {
    memset(o, 0, sizeof *o);
    o->table = t;
    size_t n = hi > lo ? hi - lo : 0;
    o->m = xmalloc_aligned(sizeof(float) * (n ? n : 1));
    o->v = xmalloc_aligned(sizeof(float) * (n ? n : 1));
    memset(o->m, 0, sizeof(float) * n);
    memset(o->v, 0, sizeof(float) * n);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = wd;
    o->decay_embedding = decay_embedding;
}
