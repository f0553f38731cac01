// skipstep.h: the skip-step guard: which optimizer steps are not applied, decided from the
// recent history of the batch's cross-entropy and pre-clip gradient norm (OLMo-core's
// SkipStepOptimizer, olmo_core/optim/skip_step_optimizer.py), in olmo.c's rule or in
// OLMo-core's exactly (optim.skip_step_compat: olmo_core), and what a skipped step does to
// the optimizer state under each rule. docs/recipes.md, "Skip-step", states both rules.
//
// Both rules keep the last window+1 values (the current one included), test the current CE
// and norm against the mean and Bessel-corrected std of the earlier ones, and skip when
// either exceeds its mean by more than sigma std. They differ in:
//   olmo_c     a step with a non-finite loss or norm is always skipped and never enters the
//              history; the test needs max(2, window/2 - 1) earlier values (two at least: the
//              std of one value is undefined); the history is kept across resume.
//   olmo_core  the test needs max(2, window/2) values counting the current one; with one
//              earlier value the std is NaN, every comparison false: skipped; a non-finite
//              value enters the history and, while it is in the window, skips every step;
//              before the history fills even a non-finite step is applied; a skipped step is
//              OLMo-core's update times 0 (NaN where the gradient is not finite); clipping off
//              (optim.max_grad_norm 0) tests the CE only; the history restarts on resume.
#ifndef OLMO_SKIPSTEP_H
#define OLMO_SKIPSTEP_H

#include "recipe/recipe.h"
#include "train/devstate.h"

#define SKIP_MAX_WINDOW SKIP_STEP_MAX_WINDOW

typedef enum { SKIP_RULE_OLMO_C = 0, SKIP_RULE_OLMO_CORE = 1 } SkipRule;

typedef struct {
    int window;
    double sigma;
    SkipRule rule;
    int test_gnorm;         // olmo_core: 0 when clipping is off (OLMo-core records no norm then)
    int n;                  // values held (<= window+1), oldest first
    double loss[SKIP_MAX_WINDOW + 1], gnorm[SKIP_MAX_WINDOW + 1];   // loss: the CE
} SkipStep;

// The olmo_c rule, this window and sigma, an empty history.
void skipstep_init(SkipStep *s, int window, double sigma);
// optim.skip_step_window / _sigma / _compat of a validated recipe (compat: its rule, and the
// norm tested only with clipping on).
void skipstep_from_recipe(SkipStep *s, const Recipe *r);
// "olmo_c" / "olmo_core" -> the rule; -1 for any other name.
int skipstep_rule_of(const char *name);
// Record this step's CE and pre-clip gradient norm; 1 if the rule skips the update.
int skipstep_check(SkipStep *s, double ce, double grad_norm);
// The step's decision: enabled (optim.skip_step) -> the rule; whatever it says, the olmo_c
// rule (and skip-step off) never applies a step whose total loss or norm is non-finite.
int skipstep_decide(SkipStep *s, int enabled, double ce, double loss, double grad_norm);
// The clip factor: clip_coef (optim.c), except that the olmo_core rule with clipping on gives
// NaN for a NaN norm, as torch.clamp(max_norm / (norm + 1e-6), max=1) does, and every
// gradient becomes NaN (clip_grads_with_norm_ always multiplies).
double skipstep_clip_coef(const SkipStep *s, double norm, double max_norm);
// A skipped step under the olmo_core rule, on the range of d: OLMo-core multiplies the AdamW
// update by 0 (adamw.py), so m, v and the weights become NaN where the (clipped) gradient is
// not finite and stay bit for bit elsewhere. Returns 1 when it changed anything (grad_norm
// non-finite: the caller then all-gathers the weights), 0 otherwise (nothing to do).
int skipstep_zero_factor(const SkipStep *s, const DevState *d, double grad_norm);
// The history a checkpoint saved, continued under dst's window (the newest window+1 values);
// the olmo_core rule restarts empty, as OLMo-core does not save it.
void skipstep_restore(SkipStep *dst, const SkipStep *src);

#endif
