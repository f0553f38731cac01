// optim.h: the OLMo 3 optimizer: LR schedules, global-norm clipping, AdamW over the
// parameter table (decay on every tensor but the embedding by default) and the
// deterministic gradient accumulator (a fixed pairwise tree over micro-batches).
#ifndef OLMO_OPTIM_H
#define OLMO_OPTIM_H

#include <stddef.h>

#include "model/params.h"
#include "recipe/recipe.h"

// ---- LR schedules; steps count from 1 (the first update is step 1) ------------------------
// As OLMo-core's Scheduler.get_lr(initial_lr, current = global step, t_max) (olmo_core/optim/
// scheduler.py; docs/reproducing-olmo3.md): `max_steps` is the schedule's length t_max, which
// need not be where the run stops (schedule.t_max / schedule.t_max_tokens, train.stop_at).
// warmup (all but wsd, half_cos_with_warmup): step < warmup: peak * step / warmup.
// cosine: eta_min + (peak - eta_min) * (1 + cos(pi * (step-warmup) / (max_steps-warmup))) / 2, eta_min = alpha_f*peak
//         (OLMo-core CosWithWarmup; the argument is rounded as pi * ((step-warmup) / span), one rounding
//         away from OLMo-core's (pi * (step-warmup)) / span: < 1e-15 relative, kept for bitwise continuity)
// linear: peak - (peak - alpha_f*peak) * (step-warmup) / (max_steps-warmup)   (OLMo-core LinearWithWarmup)
// constant: peak
// half_cos_with_warmup: OLMo-core HalfCosWithWarmup, operation for operation: step < warmup:
//         (eta_min + (peak - eta_min) / 2) * step / warmup; then the second half of a cosine from
//         that midpoint to eta_min at max_steps
// wsd: OLMo-core WSD: step <= warmup: peak * step / warmup; peak until max_steps - decay_steps,
//         then decay_min_lr + (peak - decay_min_lr) * (max_steps - step) / decay_steps
// Every schedule holds its end value past max_steps (OLMo-core never runs past t_max).
typedef struct {
    char name[32];
    double peak;
    long warmup, max_steps, decay_steps;
    double alpha_f;
    double decay_min_lr;    // wsd's end (OLMo-core WSD.decay_min_lr)
} Schedule;
double schedule_lr(const Schedule *s, long step);
// The schedule a recipe trains with: schedule.* and optim.lr, its length recipe_schedule_steps.
void schedule_from_recipe(const Recipe *r, Schedule *s);

// ---- AdamW ---------------------------------------------------------------------------------
typedef struct {
    const ParamTable *table;
    float *m, *v;           // flat, table->total floats
    long step;              // updates applied so far (Adam's t before this update)
    double beta1, beta2, eps, weight_decay;
    int decay_embedding;
} AdamW;

void adamw_init(AdamW *o, const ParamTable *t, double beta1, double beta2, double eps, double wd, int decay_embedding);
void adamw_free(AdamW *o);
// The update itself runs on the device state (train/devstate.h: devstate_adamw, the one
// per-tensor loop, through the backend's op table).

// Global L2 norm of the gradients (double, deterministic); if max_norm > 0 scales them by
// min(1, max_norm / (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_. Returns the norm.
double clip_grad_norm(float *grads, size_t n, double max_norm);
// The factor clip_grad_norm scales by: min(1, max_norm / (norm + 1e-6)), 1 when max_norm <= 0.
double clip_coef(double norm, double max_norm);

// ---- deterministic gradient accumulation ------------------------------------------------------
// Micro-batch gradients are computed into fresh buffers and combined in a binary-counter
// tree: two partial sums merge whenever they cover equal spans. For a power-of-two count
// the tree is the same however the micro-batches are spread over ranks.
#define GRADACC_MAX_LEVELS 32
typedef struct {
    size_t n;
    int depth;                          // partial sums on the stack
    float *buf[GRADACC_MAX_LEVELS + 1]; // pool; stack entries point into it
    long span[GRADACC_MAX_LEVELS + 1];
    int nbuf;
} GradAcc;
void gradacc_init(GradAcc *g, size_t n);
void gradacc_free(GradAcc *g);
void gradacc_reset(GradAcc *g);
// Buffer the next micro-batch's gradient is written into (fully overwritten by the model).
float *gradacc_slot(GradAcc *g);
// Commit the slot just written and merge equal spans.
void gradacc_push(GradAcc *g);
// Fold the remaining partial sums (newest into older, fixed order); returns the total.
float *gradacc_finish(GradAcc *g);

// ---- ZeRO-1 shards ------------------------------------------------------------------------------
// AdamW state for the flat range [lo, hi) only: m and v hold hi - lo floats (m[0] is element
// lo), so optimizer memory per rank falls as 1/world. adamw_free releases it.
void adamw_init_range(AdamW *o, const ParamTable *t, size_t lo, size_t hi, double beta1, double beta2, double eps,
                      double wd, int decay_embedding);

#endif
