// config_json.c: a ModelConfig to and from JSON (config_json.h): the writer and the reader of
// train_state.json's "model" object and of the "olmo_config" safetensors metadata.
#include "model/config_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *model_config_to_json(const ModelConfig *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "padded_vocab", c->padded_vocab);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "n_kv_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "mlp_hidden", c->mlp_hidden);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(o, "rms_eps", c->rms_eps);
    cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    cJSON_AddNumberToObject(o, "full_attn_every", c->full_attn_every);
    cJSON *rs = cJSON_AddObjectToObject(o, "rope_scaling");
    if (c->rope_scaling.type == ROPE_SCALING_YARN) {
        cJSON_AddStringToObject(rs, "type", "yarn");
        cJSON_AddNumberToObject(rs, "factor", c->rope_scaling.factor);
        cJSON_AddNumberToObject(rs, "beta_fast", c->rope_scaling.beta_fast);
        cJSON_AddNumberToObject(rs, "beta_slow", c->rope_scaling.beta_slow);
        cJSON_AddNumberToObject(rs, "original_context", c->rope_scaling.original_context);
    } else {
        cJSON_AddStringToObject(rs, "type", "none");
    }
    return o;
}

int model_rope_scaling_from_json(const cJSON *model, RopeScaling *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(model, "rope_scaling");
    if (!rs) return 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsObject(rs) || !cJSON_IsString(ty) || (strcmp(ty->valuestring, "none") && strcmp(ty->valuestring, "yarn"))) {
        snprintf(err, errlen, "rope_scaling: expected an object with \"type\": \"none\" or \"yarn\"");
        return -1;
    }
    if (!strcmp(ty->valuestring, "none")) return 0;
    const char *names[4] = {"factor", "beta_fast", "beta_slow", "original_context"};
    double v[4];
    for (int i = 0; i < 4; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(rs, names[i]);
        if (!cJSON_IsNumber(x) || !(x->valuedouble > 0 && x->valuedouble <= 1e9)) {
            snprintf(err, errlen, "rope_scaling.%s: expected a number in (0, 1e9]", names[i]);
            return -1;
        }
        v[i] = x->valuedouble;
    }
    *out = (RopeScaling){ROPE_SCALING_YARN, v[0], v[1], v[2], (int)v[3]};
    return 0;
}

char *olmo_config_json(const ModelConfig *c, int seq_len) {
    cJSON *o = model_config_to_json(c);
    if (seq_len > 0) cJSON_AddNumberToObject(o, "seq_len", seq_len);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int model_config_from_json(const cJSON *o, ModelConfig *c, int *seq_len, const char *where, char *err, size_t errlen) {
    static const char *keys[] = {"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
                                 "mlp_hidden", "rope_theta", "rms_eps", "sliding_window", "full_attn_every"};
    double v[11];
    for (int i = 0; i < 11; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (!cJSON_IsNumber(x)) { snprintf(err, errlen, "%s: model config lacks number '%s'", where, keys[i]); return -1; }
        v[i] = x->valuedouble;
        // Counts must be positive integers that fit an int before the casts below (casting
        // 1e20 is undefined behaviour: found by fuzz/hf_config.c).
        if (i != 7 && i != 8 && !(v[i] >= 1 && v[i] <= (1 << 30) && v[i] == (double)(int)v[i])) {
            snprintf(err, errlen, "%s: model config '%s' must be a positive integer", where, keys[i]);
            return -1;
        }
    }
    memset(c, 0, sizeof *c);
    c->vocab_size = (int)v[0]; c->d_model = (int)v[1]; c->n_layers = (int)v[2]; c->n_heads = (int)v[3];
    c->n_kv_heads = (int)v[4]; c->head_dim = (int)v[5]; c->mlp_hidden = (int)v[6]; c->rope_theta = v[7];
    c->rms_eps = v[8]; c->sliding_window = (int)v[9]; c->full_attn_every = (int)v[10];
    char rerr[200];
    if (model_rope_scaling_from_json(o, &c->rope_scaling, rerr, sizeof rerr)) {
        snprintf(err, errlen, "%s: model config %s", where, rerr);
        return -1;
    }
    model_config_derive(c);
    const char *bad = model_config_check(c);
    if (bad) { snprintf(err, errlen, "%s: %s", where, bad); return -1; }
    const cJSON *sl = cJSON_GetObjectItemCaseSensitive(o, "seq_len");
    if (seq_len && cJSON_IsNumber(sl) && sl->valuedouble >= 0 && sl->valuedouble <= (1 << 30)) *seq_len = (int)sl->valuedouble;
    return 0;
}
