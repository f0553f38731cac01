// config_json.h: a ModelConfig as a JSON object with the field names of config.h. Used by
// checkpoints (train_state.json "model") and by HF export/import ("olmo_config"), so the
// two describe a model in the same words.
#ifndef OLMO_CONFIG_JSON_H
#define OLMO_CONFIG_JSON_H

#include "model/config.h"

typedef struct cJSON cJSON;

cJSON *model_config_to_json(const ModelConfig *c);

#endif
