// limits.c: see limits.h.
#include "model/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "model/graph.h"
#include "model/params.h"
#include "model/stored.h"

static double params_d(const ModelConfig *c) {
    double C = c->d_model, q = (double)c->n_heads * c->head_dim, kv = (double)c->n_kv_heads * c->head_dim;
    double block = C * q + 2 * C * kv + q * C + 3 * C * (double)c->mlp_hidden + q + kv + 2 * C;
    return 2.0 * (double)c->padded_vocab * C + (double)c->n_layers * block + C;
}

// Saved activations + scratch per token and layer, as model_create lays them out (res, mid,
// qkv, q, k, v, att, norms, the three MLP buffers ...): a slight over-estimate is fine.
static double act_floats_d(const ModelConfig *c, int B, int T) {
    double N = (double)B * T, C = c->d_model, Q = (double)c->n_heads * c->head_dim,
           KV = (double)c->n_kv_heads * c->head_dim, H = c->mlp_hidden;
    double per_layer = N * (3 * C + 2 * (Q + 2 * KV) + Q + 4 + c->n_heads + 3 * H);
    return (double)c->n_layers * per_layer + N * (2 * C + 8) + 2048.0 * c->padded_vocab + (double)T * c->head_dim;
}

// PRECISION_BF16 workspaces (src/kernels/cpu/bf16*.c, lmhead.c), an upper estimate over both
// engines: the LM head weight packed twice in bf16 (AMX) or copied once in fp32 (emulated),
// x packed twice, 6 dx partials, per-block row stats, per-thread logits/dlogits blocks, and
// the two packed (or rounded) operands of the largest layer matmul.
static double bf16_extra_bytes(const ModelConfig *c, int B, int T) {
    double N = (double)B * T, C = c->d_model, V = c->padded_vocab, H = c->mlp_hidden;
    double Q = (double)c->n_heads * c->head_dim, KV = (double)c->n_kv_heads * c->head_dim;
    double widest = 2 * H > Q + 2 * KV ? 2 * H : Q + 2 * KV;
    double threads = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? (double)sysconf(_SC_NPROCESSORS_ONLN) : 1.0;
    double lmhead = 4 * V * C + 4 * N * C + 24 * N * C + 12 * N * (V / 1024 + 2) + threads * (2 << 20);
    double layer = 4 * (N * widest + widest * C);
    return lmhead + layer;
}

double model_train_bytes(const ModelConfig *c, int B, int T, Precision prec) {
    double extra = prec == PRECISION_BF16 ? bf16_extra_bytes(c, B, T) : 0.0;
    return 16.0 * params_d(c) + 4.0 * act_floats_d(c, B, T) + extra;
}

int model_check_size(const ModelConfig *c, int B, int T, char *err, size_t n) {
    if (B <= 0 || T <= 0) { snprintf(err, n, "micro-batch %d x seq_len %d: both must be > 0", B, T); return -1; }
    double p = params_d(c), a = act_floats_d(c, B, T);
    if (!(p <= MODEL_MAX_PARAMS)) {
        snprintf(err, n, "model has %.3g parameters; at most %.3g are supported (check model.d_model, "
                 "model.n_layers, model.mlp_hidden, model.vocab_size)", p, MODEL_MAX_PARAMS);
        return -1;
    }
    if (!(a <= MODEL_MAX_ACT_FLOATS)) {
        snprintf(err, n, "activations of one micro-batch (%d x %d tokens) would take %.3g floats; at most %.3g "
                 "are supported (lower train.micro_batch or train.seq_len)", B, T, a, MODEL_MAX_ACT_FLOATS);
        return -1;
    }
    return 0;
}

double model_memory_limit(void) {
    const char *e = getenv("OLMO_MEM_LIMIT");
    if (e && *e) {
        double v = strtod(e, NULL);
        if (v > 0) return v;
    }
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psz <= 0) return 1e300;   // unknown: no limit
    return (double)pages * (double)psz;
}

int model_check_memory(const ModelConfig *c, int B, int T, Precision prec, char *err, size_t n) {
    if (model_check_size(c, B, T, err, n)) return -1;
    double need = model_train_bytes(c, B, T, prec), have = model_memory_limit();
    if (need > have) {
        snprintf(err, n, "training this model needs about %.2f GiB (%.3g parameters x 16 bytes + activations of "
                 "%d x %d tokens) but this machine has %.2f GiB of memory (OLMO_MEM_LIMIT overrides); refusing "
                 "before allocating", need / 1073741824.0, params_d(c), B, T, have / 1073741824.0);
        return -1;
    }
    return 0;
}

double model_memory_available(const char **src) {
    const char *e = getenv("OLMO_MEM_LIMIT");
    if (e && *e && strtod(e, NULL) > 0) {
        if (src) *src = "OLMO_MEM_LIMIT";
        return strtod(e, NULL);
    }
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (src) *src = kb > 0 ? "MemAvailable of /proc/meminfo" : "physical memory";
    return kb > 0 ? kb * 1024.0 : model_memory_limit();
}

double model_weights_bytes(const ModelConfig *cfg) { return 4.0 * params_d(cfg); }

double model_largest_tensor_bytes(const ModelConfig *cfg) {
    ParamTable t;
    param_table_build(&t, cfg);
    size_t big = 0;
    for (int i = 0; i < t.n; i++)
        if (t.p[i].numel > big) big = t.p[i].numel;
    param_table_free(&t);
    return 4.0 * (double)big;
}

double model_stored_weights_bytes(const ModelConfig *cfg, double stored) {
    return stored + 4.0 * ((double)stored_scratch_floats(cfg) + 16);
}

double model_bf16_weights_bytes(const ModelConfig *cfg) { return model_stored_weights_bytes(cfg, 2.0 * params_d(cfg)); }

// The CPU LM head's logits scratch: (CPU_LM_CHUNK, padded vocab) floats (kernels/cpu/ops_cpu.c).
static double lmhead_scratch(const ModelConfig *cfg) { return 4.0 * CPU_LM_CHUNK * (double)cfg->padded_vocab; }

double model_eval_bytes(const ModelConfig *cfg, int B, int T, double weights) {
    return weights + (double)graph_plan_bytes(cfg, B, T, DT_F32, GRAPH_FORWARD_ONLY) + lmhead_scratch(cfg);
}

double model_generate_bytes(const ModelConfig *cfg, int full_T, int max_n, int max_len, int logits_rows, double weights) {
    return weights + (double)graph_plan_bytes(cfg, 1, full_T, DT_F32, GRAPH_FORWARD_ONLY) +
           (double)graph_plan_bytes_kv(cfg, max_n, max_len) + 4.0 * logits_rows * cfg->padded_vocab;
}

int model_check_need(const char *cmd, double need, const char *what, const char *alternatives, char *err, size_t n) {
    const char *src;
    double have = model_memory_available(&src);
    if (need <= have) return 0;
    char a[32], b[32];
    snprintf(err, n, "%s needs about %s (%.0f bytes: %s) but this machine has %s available (%.0f bytes, %s%s); "
             "refusing before allocating or writing anything. %s", cmd, model_fmt_bytes(need, a, sizeof a), need, what,
             model_fmt_bytes(have, b, sizeof b), have, src, strcmp(src, "OLMO_MEM_LIMIT") ? "; OLMO_MEM_LIMIT=BYTES "
             "overrides" : "", alternatives);
    return -1;
}

const char *model_fmt_bytes(double b, char *buf, size_t n) {
    if (b >= 1073741824.0) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
    return buf;
}
