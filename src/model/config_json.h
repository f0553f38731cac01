// config_json.h: a ModelConfig as a JSON object with the field names of config.h. Used by
// checkpoints (train_state.json "model") and by HF export/import ("olmo_config"), so the
// two describe a model in the same words.
#ifndef OLMO_CONFIG_JSON_H
#define OLMO_CONFIG_JSON_H

#include "model/config.h"

typedef struct cJSON cJSON;

// Includes "rope_scaling": {"type": "none"} or {"type": "yarn", "factor", "beta_fast",
// "beta_slow", "original_context"}.
cJSON *model_config_to_json(const ModelConfig *c);
// Read "rope_scaling" of such an object into *out (absent = none: checkpoints written
// before it existed). Returns 0, or -1 with a message naming the bad field.
int model_rope_scaling_from_json(const cJSON *model, RopeScaling *out, char *err, size_t errlen);

#endif
