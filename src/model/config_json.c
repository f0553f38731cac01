// config_json.c: see config_json.h.
#include "model/config_json.h"

#include <cjson/cJSON.h>

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
    return o;
}
