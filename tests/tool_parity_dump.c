// tool_parity_dump.c: runs the C model and trainer step on the tiny config and writes
// what tests/ref/check_parity.py compares against the independent PyTorch reference:
// config.json, init.safetensors, batch.safetensors, step0.safetensors (logits and
// gradients of the first batch), final.safetensors (parameters after `steps` updates),
// steps.safetensors (after every step k = 1..steps: the gradient of step k before
// clipping, the parameters and AdamW's m and v: check_parity.py checks each step's
// update from the state before it, see tests/ref/README.md) and metrics.json. Usage: tool_parity_dump OUTDIR [key=value ...] (keys below).
// Long-context keys: rope_scaling=yarn (YaRN on the full layers, rope_factor,
// rope_beta_fast, rope_beta_slow, rope_original_context), document_mask=1 with eos_id=N
// (then about one token in 8 of the random batches is replaced by that EOS).
// backend=cuda precision=fp32|bf16: the same dump from the CUDA backend (its logits, every
// step through train_step_on on the device, the gradient, parameters and Adam moments
// downloaded after each): scripts/gpu-check.sh's one-step parity against the reference
// (check_parity.py, --bf16 for the bf16 mode's tolerances). Without a device: "SKIP: ...",
// exit 0. The default (backend=cpu) is the CPU path it always was.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/blas_core.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "train/backend.h"
#include "train/backend_cpu.h"
#include "train/step.h"
#include "util/common.h"

// Fills w[0..t->n) with one tensor per parameter of the flat buffer base, named
// prefix + parameter name (names: t->n slots of 128 bytes, kept until written).
static void param_entries(StWrite *w, char (*names)[128], const ParamTable *t, const float *base, const char *prefix) {
    for (int i = 0; i < t->n; i++) {
        if (snprintf(names[i], 128, "%s%s", prefix, t->p[i].name) >= 128) die("tool_parity_dump: name too long: %s%s", prefix, t->p[i].name);
        w[i] = (StWrite){names[i], "F32", t->p[i].ndim, {t->p[i].shape[0], t->p[i].shape[1]},
                         base + t->p[i].offset, t->p[i].numel * sizeof(float)};
    }
}

static void write_params(const char *path, const ParamTable *t, const float *base, const char *prefix) {
    StWrite *w = xcalloc((size_t)t->n, sizeof(StWrite));
    char (*names)[128] = xcalloc((size_t)t->n, 128);
    param_entries(w, names, t, base, prefix);
    if (st_write(path, w, t->n, NULL) != 0) die("cannot write %s", path);
    free(w);
    free(names);
}

// steps.safetensors: step<k>.{grad,param,m,v}.<name> for k = 1..steps; state holds, per
// step, 4 flat copies of table->total floats in that order.
enum { STATE_GRAD, STATE_PARAM, STATE_M, STATE_V, STATE_KINDS };
static void write_steps(const char *path, const ParamTable *t, const float *state, int steps) {
    static const char *const kind[STATE_KINDS] = {"grad", "param", "m", "v"};
    int n = t->n * STATE_KINDS * steps;
    StWrite *w = xcalloc((size_t)n, sizeof(StWrite));
    char (*names)[128] = xcalloc((size_t)n, 128);
    for (int k = 0; k < steps; k++)
        for (int j = 0; j < STATE_KINDS; j++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "step%d.%s.", k + 1, kind[j]);
            size_t at = ((size_t)k * STATE_KINDS + j) * t->n;
            param_entries(w + at, names + at, t, state + ((size_t)k * STATE_KINDS + j) * t->total, prefix);
        }
    if (st_write(path, w, n, NULL) != 0) die("cannot write %s", path);
    free(w);
    free(names);
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    if (argc < 2) {
        fprintf(stderr, "usage: tool_parity_dump OUTDIR [z_loss=X max_grad_norm=X schedule=S micro_batch=N steps=N lr=X seed=N "
                        "rope_scaling=yarn rope_factor=X rope_beta_fast=X rope_beta_slow=X rope_original_context=N "
                        "document_mask=0|1 eos_id=N backend=cpu|cuda precision=fp32|bf16]\n");
        return 2;
    }
    const char *out = argv[1];
    const ModelPreset *pre = model_preset_find("olmo3-tiny");
    ModelConfig cfg = pre->cfg;
    model_config_derive(&cfg);
    int T = 32, GB = 4, MB = 2, steps = 5;
    double z_loss = 1e-5, lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, clip = 4.0, alpha_f = 0.1;  // clip 4.0: clips some steps, not all (a wrong clip factor must show)
    long warmup = 2;
    char sched[16] = "cosine";
    unsigned long long seed = 1234;
    RopeScaling yarn = {ROPE_SCALING_YARN, 8.0, 32.0, 1.0, 8192};
    char backend[16] = "cpu", precision[16] = "";
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) die_input("bad argument '%s' (expected key=value)", argv[i]);
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "z_loss")) z_loss = atof(v);
        else if (!strcmp(k, "max_grad_norm")) clip = atof(v);
        else if (!strcmp(k, "schedule")) snprintf(sched, sizeof sched, "%s", v);
        else if (!strcmp(k, "micro_batch")) MB = atoi(v);
        else if (!strcmp(k, "steps")) steps = atoi(v);
        else if (!strcmp(k, "lr")) lr = atof(v);
        else if (!strcmp(k, "seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "rope_scaling")) cfg.rope_scaling.type = !strcmp(v, "yarn") ? ROPE_SCALING_YARN : ROPE_SCALING_NONE;
        else if (!strcmp(k, "rope_factor")) yarn.factor = atof(v);
        else if (!strcmp(k, "rope_beta_fast")) yarn.beta_fast = atof(v);
        else if (!strcmp(k, "rope_beta_slow")) yarn.beta_slow = atof(v);
        else if (!strcmp(k, "rope_original_context")) yarn.original_context = atoi(v);
        else if (!strcmp(k, "document_mask")) cfg.document_mask = atoi(v);
        else if (!strcmp(k, "eos_id")) cfg.eos_id = atoi(v);
        else if (!strcmp(k, "backend")) snprintf(backend, sizeof backend, "%s", v);
        else if (!strcmp(k, "precision")) snprintf(precision, sizeof precision, "%s", v);
        else die_input("unknown key '%s'", k);
    }
    if (cfg.rope_scaling.type == ROPE_SCALING_YARN) cfg.rope_scaling = yarn;
    const char *cerr = model_config_check(&cfg);
    if (cerr) die_input("%s", cerr);
    const int on_cpu = !strcmp(backend, "cpu");
    const BackendIface *impl = NULL;
    Precision prec = PRECISION_FP32;
    if (!on_cpu) {
        char err[512];
        if (backend_resolve(backend, precision, &impl, &prec, err, sizeof err) != 0) {
            if (!strcmp(backend, "cuda") && strstr(err, "no CUDA device")) {
                printf("SKIP: %s\n", err);
                return 0;
            }
            die_input("%s", err);
        }
    } else if (*precision && strcmp(precision, "fp32")) die_input("backend=cpu: precision=%s (only fp32)", precision);
    mkdir_p(out);

    Model m;
    model_create(&m, &cfg, GB, T);
    param_init(&m.table, m.params, seed);
    char path[4096];
    snprintf(path, sizeof path, "%s/init.safetensors", out);
    write_params(path, &m.table, m.params, "");

    // Batches: random tokens (seeded LCG), labels = next token, last position and a few
    // others masked with -100.
    size_t per = (size_t)GB * T;
    int32_t *inputs = xmalloc(sizeof(int32_t) * per * steps), *labels = xmalloc(sizeof(int32_t) * per * steps);
    unsigned long long s = seed * 2654435761ULL + 1;
    for (size_t i = 0; i < per * steps; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        inputs[i] = (int32_t)((s >> 33) % (unsigned)cfg.vocab_size);
        if (cfg.document_mask && (s >> 20) % 8 == 0) inputs[i] = cfg.eos_id;   // documents of ~8 tokens
    }
    for (size_t i = 0; i < per * steps; i++) {
        size_t t = i % T;
        labels[i] = t + 1 < (size_t)T ? inputs[i + 1] : -100;
        if ((i * 7) % 23 == 0) labels[i] = -100;
    }
    StWrite bw[2] = {{"input_ids", "I32", 3, {steps, GB, T}, inputs, sizeof(int32_t) * per * steps},
                     {"labels", "I32", 3, {steps, GB, T}, labels, sizeof(int32_t) * per * steps}};
    snprintf(path, sizeof path, "%s/batch.safetensors", out);
    if (st_write(path, bw, 2, NULL) != 0) die("cannot write %s", path);

    float *logits = xmalloc(sizeof(float) * per * cfg.padded_vocab);
    TrainCore tc = {0};
    tc.model = &m;
    adamw_init(&tc.opt, &m.table, b1, b2, eps, wd, 0);
    gradacc_init(&tc.acc, m.table.total);
    tc.max_grad_norm = clip;
    tc.z_loss = (float)z_loss;
    snprintf(tc.sched.name, sizeof tc.sched.name, "%s", sched);
    tc.sched.peak = lr;
    tc.sched.warmup = warmup;
    tc.sched.max_steps = steps;
    tc.sched.alpha_f = alpha_f;
    // Step-0 logits over the whole global batch (forward only).
    Backend *be = NULL;
    if (on_cpu) model_forward_backward(&m, inputs, labels, GB, T, (float)z_loss, 1.0f, NULL, logits, NULL);
    else {
        char err[512];
        be = backend_create(impl, prec, &tc, GB, T, RECOMPUTE_AUTO, err, sizeof err);
        if (!be) die("backend_create: %s", err);
        backend_sync_from_host(be, &tc);
        backend_forward_backward(be, &tc, inputs, labels, GB, T, (float)z_loss, 1.0f, NULL, logits, NULL);
    }
    size_t total = m.table.total;
    float *state = xmalloc(sizeof(float) * total * STATE_KINDS * (size_t)steps);
    const float *grads0 = state + STATE_GRAD * total;
    cJSON *metrics = cJSON_CreateArray();
    for (int st = 0; st < steps; st++) {
        float *at = state + (size_t)st * STATE_KINDS * total;
        StepResult r = on_cpu ? cpu_train_step(&tc, inputs + per * st, labels + per * st, GB, MB, T, st + 1, at + STATE_GRAD * total)
                              : train_step_on(backend_step_device(be), inputs + per * st, labels + per * st, GB, MB, T,
                                              st + 1, at + STATE_GRAD * total);
        if (be) backend_sync_to_host(be, &tc, 1);   // parameters, m and v after the step
        memcpy(at + STATE_PARAM * total, m.params, sizeof(float) * total);
        memcpy(at + STATE_M * total, tc.opt.m, sizeof(float) * total);
        memcpy(at + STATE_V * total, tc.opt.v, sizeof(float) * total);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", st + 1);
        cJSON_AddNumberToObject(o, "loss", r.loss);
        cJSON_AddNumberToObject(o, "ce", r.ce);
        cJSON_AddNumberToObject(o, "z_loss", r.z_loss);
        cJSON_AddNumberToObject(o, "grad_norm", r.grad_norm);
        cJSON_AddNumberToObject(o, "lr", r.lr);
        cJSON_AddItemToArray(metrics, o);
    }

    // step0.safetensors: logits + grad.<name>
    StWrite *w = xcalloc((size_t)m.table.n + 1, sizeof(StWrite));
    char (*names)[128] = xcalloc((size_t)m.table.n, 128);
    w[0] = (StWrite){"logits", "F32", 3, {GB, T, cfg.padded_vocab}, logits, sizeof(float) * per * cfg.padded_vocab};
    param_entries(w + 1, names, &m.table, grads0, "grad.");
    snprintf(path, sizeof path, "%s/step0.safetensors", out);
    if (st_write(path, w, m.table.n + 1, NULL) != 0) die("cannot write %s", path);
    snprintf(path, sizeof path, "%s/final.safetensors", out);
    write_params(path, &m.table, m.params, "");
    snprintf(path, sizeof path, "%s/steps.safetensors", out);
    write_steps(path, &m.table, state, steps);

    char *mj = cJSON_Print(metrics);
    snprintf(path, sizeof path, "%s/metrics.json", out);
    write_file_atomic(path, mj, strlen(mj));

    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "vocab_size", cfg.vocab_size);
    cJSON_AddNumberToObject(c, "padded_vocab", cfg.padded_vocab);
    cJSON_AddNumberToObject(c, "d_model", cfg.d_model);
    cJSON_AddNumberToObject(c, "n_layers", cfg.n_layers);
    cJSON_AddNumberToObject(c, "n_heads", cfg.n_heads);
    cJSON_AddNumberToObject(c, "n_kv_heads", cfg.n_kv_heads);
    cJSON_AddNumberToObject(c, "head_dim", cfg.head_dim);
    cJSON_AddNumberToObject(c, "mlp_hidden", cfg.mlp_hidden);
    cJSON_AddNumberToObject(c, "rope_theta", cfg.rope_theta);
    cJSON_AddNumberToObject(c, "rms_eps", cfg.rms_eps);
    cJSON *lt = cJSON_AddArrayToObject(c, "layer_types");
    for (int l = 0; l < cfg.n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(model_layer_is_sliding(&cfg, l) ? "sliding_attention" : "full_attention"));
    cJSON_AddNumberToObject(c, "sliding_window", cfg.sliding_window);
    cJSON_AddNumberToObject(c, "seq_len", T);
    cJSON_AddNumberToObject(c, "global_batch", GB);
    cJSON_AddNumberToObject(c, "micro_batch", MB);
    cJSON_AddNumberToObject(c, "steps", steps);
    cJSON_AddNumberToObject(c, "z_loss", z_loss);
    cJSON_AddNumberToObject(c, "lr", lr);
    cJSON_AddNumberToObject(c, "beta1", b1);
    cJSON_AddNumberToObject(c, "beta2", b2);
    cJSON_AddNumberToObject(c, "eps", eps);
    cJSON_AddNumberToObject(c, "weight_decay", wd);
    cJSON_AddBoolToObject(c, "decay_embedding", 0);
    cJSON_AddNumberToObject(c, "max_grad_norm", clip);
    cJSON_AddStringToObject(c, "schedule", sched);
    cJSON_AddNumberToObject(c, "warmup_steps", (double)warmup);
    cJSON_AddNumberToObject(c, "max_steps", steps);
    cJSON_AddNumberToObject(c, "alpha_f", alpha_f);
    if (cfg.rope_scaling.type == ROPE_SCALING_YARN) {   // HF's rope_scaling keys
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "yarn");
        cJSON_AddNumberToObject(rs, "factor", cfg.rope_scaling.factor);
        cJSON_AddNumberToObject(rs, "beta_fast", cfg.rope_scaling.beta_fast);
        cJSON_AddNumberToObject(rs, "beta_slow", cfg.rope_scaling.beta_slow);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", cfg.rope_scaling.original_context);
    }
    if (cfg.document_mask) {
        cJSON_AddBoolToObject(c, "document_mask", 1);
        cJSON_AddNumberToObject(c, "eos_id", cfg.eos_id);
    }
    char *cj = cJSON_Print(c);
    snprintf(path, sizeof path, "%s/config.json", out);
    write_file_atomic(path, cj, strlen(cj));
    if (be) backend_free(be);
    printf("wrote %s (%s%s%s, loss step1 %.6f)\n", out, backend, on_cpu ? "" : " ", on_cpu ? "" : (prec == PRECISION_BF16 ? "bf16" : "fp32"), cJSON_GetObjectItem(cJSON_GetArrayItem(metrics, 0), "loss")->valuedouble);
    return 0;
}
