// config_json.c: see config_json.h.
#include "model/config_json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
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
