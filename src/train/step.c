// step.c: see step.h.
#include "train/step.h"

#include <string.h>

StepResult train_step(TrainCore *tc, const int32_t *inputs, const int32_t *targets, int global_batch,
                      int micro_batch, int T, long step, float *grads_out) {
    StepResult r = {0};
    Model *m = tc->model;
    const size_t n = m->table.total;
    // OLMo 3: loss = sum of token losses / non-masked tokens in the whole global batch.
    long count = 0;
    for (size_t i = 0; i < (size_t)global_batch * T; i++) count += targets[i] >= 0;
    float inv_count = count > 0 ? 1.0f / (float)count : 0.0f;
    double ce = 0, z = 0;
    gradacc_reset(&tc->acc);
    for (int b0 = 0; b0 < global_batch; b0 += micro_batch) {
        float *g = gradacc_slot(&tc->acc);
        size_t off = (size_t)b0 * T;
        LossSums s = model_forward_backward(m, inputs + off, targets + off, micro_batch, T, tc->z_loss, inv_count, g,
                                            NULL, NULL);
        gradacc_push(&tc->acc);
        ce += s.ce_sum;
        z += s.z_sum;
    }
    float *grads = gradacc_finish(&tc->acc);
    if (grads_out) memcpy(grads_out, grads, sizeof(float) * n);
    r.n_valid = count;
    r.ce = count ? ce / count : 0;
    r.z_loss = count ? tc->z_loss * z / count : 0;
    r.loss = r.ce + r.z_loss;
    r.grad_norm = clip_grad_norm(grads, n, tc->max_grad_norm);
    r.lr = schedule_lr(&tc->sched, step);
    r.skipped = tc->use_skip ? skipstep_check(&tc->skip, r.loss, r.grad_norm) : 0;
    if (!r.skipped) adamw_apply(&tc->opt, m->params, grads, r.lr);
    return r;
}
