// config_json.h: a ModelConfig as a JSON object with the field names of config.h. Used by
// checkpoints (train_state.json "model") and by HF export/import ("olmo_config"), so the
// two describe a model in the same words. The writer, the reader and the list of fields
// are all in config_json.c.
#ifndef OLMO_CONFIG_JSON_H
#define OLMO_CONFIG_JSON_H

#include <stddef.h>

#include "model/config.h"

typedef struct cJSON cJSON;

// Includes "rope_scaling": {"type": "none"} or {"type": "yarn", "factor", "beta_fast",
// "beta_slow", "original_context"}.
cJSON *model_config_to_json(const ModelConfig *c);
// Read "rope_scaling" of such an object into *out (absent = none: checkpoints written
// before it existed). Returns 0, or -1 with a message naming the bad field.
int model_rope_scaling_from_json(const cJSON *model, RopeScaling *out, char *err, size_t errlen);

// The "olmo_config" JSON text of a config (malloc'd): model_config_to_json's object plus
// "seq_len" when seq_len > 0 (safetensors __metadata__ of import-hf and export-hf outputs).
char *olmo_config_json(const ModelConfig *c, int seq_len);
// The reader of both: a ModelConfig from such an object (every count a positive integer,
// rope_scaling as above), derived and checked (model_config_check); *seq_len gets "seq_len"
// when seq_len is not NULL and the object has one. Returns 0, or -1 with a message that
// starts with `where`.
int model_config_from_json(const cJSON *o, ModelConfig *c, int *seq_len, const char *where, char *err, size_t errlen);

// The object's numeric fields, i = 0 .. model_config_json_nfields() - 1 in the writer's
// order, for a reader that compares instead of building (a checkpoint against the
// recipe's shape, src/train/checkpoint.c): field i's name, with c's value in *value; and
// field i of c set from a value.
int model_config_json_nfields(void);
const char *model_config_json_field(const ModelConfig *c, int i, double *value);
void model_config_json_set(ModelConfig *c, int i, double v);

#endif
