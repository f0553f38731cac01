// config_json.c: a ModelConfig to and from JSON (config_json.h): the writer and the reader of
// train_state.json's "model" object and of the "olmo_config" safetensors metadata.
#include "model/config_json.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The numeric fields of the object (ModelConfig's names), in the order the writer emits
// them. A derived field (padded_vocab: model_config_derive) is written and compared, not
// read.
typedef struct {
    const char *name;
    size_t off;
    int is_double, derived;
} Field;
static const Field FIELDS[] = {
    {"vocab_size", offsetof(ModelConfig, vocab_size), 0, 0},
    {"padded_vocab", offsetof(ModelConfig, padded_vocab), 0, 1},
    {"d_model", offsetof(ModelConfig, d_model), 0, 0},
    {"n_layers", offsetof(ModelConfig, n_layers), 0, 0},
    {"n_heads", offsetof(ModelConfig, n_heads), 0, 0},
    {"n_kv_heads", offsetof(ModelConfig, n_kv_heads), 0, 0},
    {"head_dim", offsetof(ModelConfig, head_dim), 0, 0},
    {"mlp_hidden", offsetof(ModelConfig, mlp_hidden), 0, 0},
    {"rope_theta", offsetof(ModelConfig, rope_theta), 1, 0},
    {"rms_eps", offsetof(ModelConfig, rms_eps), 1, 0},
    {"sliding_window", offsetof(ModelConfig, sliding_window), 0, 0},
    {"full_attn_every", offsetof(ModelConfig, full_attn_every), 0, 0},
};
#define NFIELDS ((int)(sizeof FIELDS / sizeof FIELDS[0]))

static double field_get(const ModelConfig *c, const Field *f) {
    const char *p = (const char *)c + f->off;
    return f->is_double ? *(const double *)p : (double)*(const int *)p;
}

static void field_set(ModelConfig *c, const Field *f, double v) {
    char *p = (char *)c + f->off;
    if (f->is_double) *(double *)p = v;
    else *(int *)p = (int)v;
}

int model_config_json_nfields(void) { return NFIELDS; }

const char *model_config_json_field(const ModelConfig *c, int i, double *value) {
    *value = field_get(c, &FIELDS[i]);
    return FIELDS[i].name;
}

void model_config_json_set(ModelConfig *c, int i, double v) { field_set(c, &FIELDS[i], v); }

cJSON *model_config_to_json(const ModelConfig *c) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < NFIELDS; i++) cJSON_AddNumberToObject(o, FIELDS[i].name, field_get(c, &FIELDS[i]));
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
    double v[NFIELDS];
    for (int i = 0; i < NFIELDS; i++) {
        const Field *f = &FIELDS[i];
        if (f->derived) continue;
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, f->name);
        if (!cJSON_IsNumber(x)) { snprintf(err, errlen, "%s: model config lacks number '%s'", where, f->name); return -1; }
        v[i] = x->valuedouble;
        // Counts must be positive integers that fit an int before the casts below (casting
        // 1e20 is undefined behaviour: found by fuzz/hf_config.c).
        if (!f->is_double && !(v[i] >= 1 && v[i] <= (1 << 30) && v[i] == (double)(int)v[i])) {
            snprintf(err, errlen, "%s: model config '%s' must be a positive integer", where, f->name);
            return -1;
        }
    }
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NFIELDS; i++)
        if (!FIELDS[i].derived) field_set(c, &FIELDS[i], v[i]);
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
