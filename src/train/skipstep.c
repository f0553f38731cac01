// skipstep.c: see skipstep.h. OLMo-core references are to allenai/OLMo-core at fa6c5014
// (skip: src/olmo_core/optim/skip_step_optimizer.py, adamw: src/olmo_core/optim/adamw.py,
// tm: src/olmo_core/train/train_module/transformer/train_module.py).
#include "train/skipstep.h"

#include <math.h>
#include <string.h>

#include "train/optim.h"

void skipstep_init(SkipStep *s, int window, double sigma) {
    memset(s, 0, sizeof *s);
    s->window = window < 1 ? 1 : (window > SKIP_MAX_WINDOW ? SKIP_MAX_WINDOW : window);
    s->sigma = sigma;
    s->rule = SKIP_RULE_OLMO_C;
    s->test_gnorm = 1;
}

int skipstep_rule_of(const char *name) {
    if (!strcmp(name, "olmo_c")) return SKIP_RULE_OLMO_C;
    if (!strcmp(name, "olmo_core")) return SKIP_RULE_OLMO_CORE;
    return -1;
}

void skipstep_from_recipe(SkipStep *s, const Recipe *r) {
    skipstep_init(s, r->skip_step_window, r->skip_step_sigma);
    s->rule = (SkipRule)skipstep_rule_of(r->skip_step_compat);
    // tm:514-523: latest_grad_norm is set only when max_grad_norm is; with no norm recorded
    // get_step_factor tests the loss alone (skip:99-107). olmo.c's rule tests the norm anyway.
    s->test_gnorm = s->rule == SKIP_RULE_OLMO_C || r->max_grad_norm > 0;
}

// Mean and Bessel-corrected std of n values (torch.std_mean's default, correction 1): the
// std of one value is NaN, as torch's.
static void mean_std(const double *x, int n, double *mean, double *std) {
    double m = 0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    double v = 0;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *std = n > 1 ? sqrt(v / (n - 1)) : NAN;
}

// skip:66-83: append, then drop the oldest beyond window + 1.
static void push(SkipStep *s, double ce, double grad_norm) {
    if (s->n == s->window + 1) {
        memmove(s->loss, s->loss + 1, sizeof(double) * (size_t)s->window);
        memmove(s->gnorm, s->gnorm + 1, sizeof(double) * (size_t)s->window);
        s->n--;
    }
    s->loss[s->n] = ce;
    s->gnorm[s->n] = grad_norm;
    s->n++;
}

// 1 unless (x - mean) <= sigma * std of the n earlier values: a NaN anywhere is "not <=".
static int exceeds(const double *earlier, int n, double x, double sigma) {
    double mean, std;
    mean_std(earlier, n, &mean, &std);
    return !((x - mean) <= sigma * std);
}

// skip:94-109, exactly: step factor 1 while fewer than max(2, window // 2) values are held
// (the current one included), else 0 unless both values are within sigma std of the others.
static int check_olmo_core(SkipStep *s, double ce, double grad_norm) {
    push(s, ce, grad_norm);
    int need = s->window / 2 > 2 ? s->window / 2 : 2;
    if (s->n < need) return 0;
    return exceeds(s->loss, s->n - 1, ce, s->sigma) || (s->test_gnorm && exceeds(s->gnorm, s->n - 1, grad_norm, s->sigma));
}

// olmo.c: a non-finite step is a real skip and leaves no trace (in the window its NaN would
// make every later comparison false for window steps); the test starts with
// max(2, window/2 - 1) earlier values, as OLMo-core's for windows >= 6, never on one value.
static int check_olmo_c(SkipStep *s, double ce, double grad_norm) {
    if (!isfinite(ce) || !isfinite(grad_norm)) return 1;
    push(s, ce, grad_norm);
    int earlier = s->n - 1, need = s->window / 2 - 1 > 2 ? s->window / 2 - 1 : 2;
    if (earlier < need) return 0;
    return exceeds(s->loss, earlier, ce, s->sigma) || exceeds(s->gnorm, earlier, grad_norm, s->sigma);
}

int skipstep_check(SkipStep *s, double ce, double grad_norm) {
    return s->rule == SKIP_RULE_OLMO_CORE ? check_olmo_core(s, ce, grad_norm) : check_olmo_c(s, ce, grad_norm);
}

int skipstep_decide(SkipStep *s, int enabled, double ce, double loss, double grad_norm) {
    if (enabled && s->rule == SKIP_RULE_OLMO_CORE) return skipstep_check(s, ce, grad_norm);
    // olmo.c, and skip-step off: a non-finite total loss (a z-loss overflow with a finite CE
    // included) or norm is skipped before the rule sees it, so it never enters the history.
    if (!isfinite(loss) || !isfinite(grad_norm)) return 1;
    return enabled ? skipstep_check(s, ce, grad_norm) : 0;
}

double skipstep_clip_coef(const SkipStep *s, double norm, double max_norm) {
    if (s->rule == SKIP_RULE_OLMO_CORE && max_norm > 0 && isnan(norm)) return NAN;
    return clip_coef(norm, max_norm);
}

// adamw:29-47 with step_factor 0: p *= 1 - 0 * lr * wd; m += 0 * (g - m); v = v * 1 + 0 * g * g;
// p += 0 * update; step += 0. Where g is finite every term added is a zero and nothing
// changes; where it is not, 0 * g is NaN and so are m, v and p. g *= 0 then m, v, p += g is
// that: NaN exactly where g is not finite, +-0 added elsewhere.
int skipstep_zero_factor(const SkipStep *s, const DevState *d, double grad_norm) {
    if (s->rule != SKIP_RULE_OLMO_CORE || isfinite(grad_norm)) return 0;
    const size_t n = d->hi - d->lo;
    if (n == 0) return 1;
    const Ops *o = d->be->ops;
    o->scale(d->be, d->grad, 0.0f, n);
    o->add(d->be, d->m, d->grad, n);
    o->add(d->be, d->v, d->grad, n);
    o->add(d->be, d->master, d->grad, n);
    if (d->wcopy) o->cast(d->be, d->wcopy, d->wtype, d->master, n);
    return 1;
}

void skipstep_restore(SkipStep *dst, const SkipStep *src) {
    // OLMo-core's checkpoint holds the optimizer's state dict, which has no history (skip:43-44
    // are plain attributes): after a resume get_step_factor starts from an empty list.
    if (dst->rule == SKIP_RULE_OLMO_CORE) {
        dst->n = 0;
        return;
    }
    // Non-finite values only in checkpoints written before olmo_c kept them out: dropped.
    dst->n = 0;
    for (int i = 0; i < src->n; i++)
        if (isfinite(src->loss[i]) && isfinite(src->gnorm[i])) push(dst, src->loss[i], src->gnorm[i]);
}
