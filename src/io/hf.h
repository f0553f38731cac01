// hf.h: Hugging Face interchange (`olmo export-hf`, `olmo import-hf`) and the one place
// that turns a user's CKPT argument into a model file + model shape (docs/hf.md), for
// eval, generate, export-hf and export-gguf. Which file or directory CKPT names is decided
// by ckpt_source_resolve (io/ckpt_dir.h, CKPT_FOR_WEIGHTS), the resolver train.load_path
// uses too. CKPT may be
//   - an HF directory (config.json with a model_type; model.safetensors or shards),
//   - a checkpoint directory (step-NNNNNNNN/, train_state.json) holding model.safetensors,
//   - a run directory (RUN_DIR/model.safetensors, else the newest RUN_DIR/checkpoints/step-*),
//     or any directory holding model.safetensors (an import-hf output),
//   - a model.safetensors file,
// tried in that order.
// The shape of an OLMo-layout file comes from, in order: the "olmo_config" entry of its
// safetensors __metadata__ (written by import-hf and export-hf), train_state.json next to
// it, recipe.yml next to it, ../../recipe.yml (a run's checkpoint directory).
#ifndef OLMO_HF_H
#define OLMO_HF_H

#include <stddef.h>

#include "model/config.h"
#include "model/params.h"
#include "model/stored.h"

typedef struct {
    char path[4096];    // the OLMo-layout .safetensors file, or the HF directory
    int is_hf;          // 1: HF directory (vocab rows padded or trimmed, maybe sharded, maybe tied)
    int hf_tied;        // HF: tie_word_embeddings (lm_head = embed_tokens)
    ModelConfig cfg;    // derived (padded_vocab, head_dim filled)
    int seq_len;        // training / max_position length when known, else 0
    char config_from[4800];  // where the shape came from (for messages)
} ModelSource;

// Resolve CKPT. Returns 0, or -1 with a message in err (bad input: callers exit 2).
int model_source_resolve(const char *ckpt, ModelSource *s, char *err, size_t errlen);
// A file given as a checkpoint that cannot be a safetensors file (its first 8 bytes are the
// header length, then the JSON header): -1 with a message that says what it is by its bytes
// and what to do instead (GGUF: llama.cpp; a NumPy .npy; a token file: raw uint32, which
// `olmo eval --set` takes), else 0 (model_source_resolve checks every file CKPT with it). A
// safetensors file with no shape of its own beside an HF config.json or
// model.safetensors.index.json (one of AI2's shards) is refused by model_source_resolve:
// pass the directory.
int model_file_check(const char *path, char *err, size_t errlen);
// The recipe of the run a CKPT belongs to: CKPT/recipe.yml for a directory, else
// recipe.yml next to the model file or two levels up (RUN/checkpoints/step-N/). Returns 0
// with its path in out, or -1 when there is none (olmo eval then needs --recipe).
int model_source_recipe(const char *ckpt, const ModelSource *s, char *out, size_t n);
// Read the parameters into params (layout of table t, built from s->cfg). HF sources
// trimmed to the real vocab get zero padding rows (docs/hf.md). Returns 0, or -1 with a message.
int model_source_load(const ModelSource *s, const ParamTable *t, float *params, char *err, size_t errlen);
// The same weights one tensor at a time, so a writer can stream a large model without a
// copy of it in memory (export-gguf). open checks every tensor (names, shapes, dtypes, a
// checkpoint's checksums) and returns NULL with a message in err; read(m, i, dst) fills
// t->p[i].numel floats (the table's layout, as model_source_load).
typedef struct ModelTensors ModelTensors;
ModelTensors *model_tensors_open(const ModelSource *s, const ParamTable *t, char *err, size_t errlen);
void model_tensors_read(const ModelTensors *m, int i, float *dst);
void model_tensors_close(ModelTensors *m);
// The weights as stored, for a model that keeps them so (model/stored.h, `olmo eval` and
// `olmo generate`): ten (one per table row) points into the open files' mappings, valid
// until model_tensors_close; *bytes: the bytes of the stored tensors. Returns how many
// tensors are BF16; 0 when none is, or when one is neither BF16 nor F32 (F16, F64: the
// caller loads the model in fp32 instead).
int model_tensors_stored(const ModelTensors *m, StoredTensor *ten, double *bytes);

// `olmo eval` and `olmo generate`: CKPT's weights for model_create_eval (model/model.h).
// Unless fp32 is asked for, BF16 tensors stay as stored, mapped from the files (ten set,
// pointing into mt's mappings), upcast a part at a time; otherwise, and for files with no
// BF16 tensor (or an F16/F64 one), ten is NULL and the caller loads fp32 with
// model_weights_load (the values model_source_load gives). bytes: what the weights take in memory (stored + one part's fp32
// scratch, or 4 bytes a parameter); what: a phrase for the line that says what was loaded.
typedef struct {
    ParamTable t;         // the table mt reads through
    ModelTensors *mt;
    StoredTensor *ten;    // (t.n), or NULL: fp32
    double bytes;
    char what[300];
} ModelWeights;
// Returns 0, or -1 with a message (a file that does not match its shape).
int model_weights_open(const ModelSource *s, int fp32, ModelWeights *w, char *err, size_t errlen);
void model_weights_load(const ModelWeights *w, float *params);   // ten NULL: all tensors in fp32
void model_weights_close(ModelWeights *w);   // after the model that uses ten

// max_position_embeddings of an export when neither YaRN nor the run says otherwise:
// OLMo 3's pretraining sequence length (docs/olmo3.md s.1).
#define HF_DEFAULT_MAX_POS 8192
// train.seq_len of `olmo eval` on a checkpoint without a recipe (an HF directory, an
// import-hf output) whose own length is longer: OLMo 3's pretraining length, not an HF
// max_position_embeddings of 65,536 (key=value train.seq_len=N overrides it).
#define EVAL_DEFAULT_SEQ_LEN HF_DEFAULT_MAX_POS

// `olmo export-hf`: CKPT (as model_source_resolve takes it) to the Hugging Face Olmo3
// directory OUT: config.json (model_type olmo3), generation_config.json, model.safetensors
// (HF names, the padded vocab rows kept as trained, the olmo_config metadata) and a copy of
// the tokenizer (tok_path; NULL = $OLMO_TOKENIZER or dolma2) with tokenizer_config.json.
// max_pos 0: the run's seq_len, else HF_DEFAULT_MAX_POS (with YaRN: factor x original
// context, which a given max_pos must equal). Bad input: a message, exit 2.
void hf_export(const char *ckpt, const char *out, int max_pos, const char *tok_path);
// `olmo import-hf`: the Hugging Face Olmo3 directory IN (config.json + model.safetensors
// or shards; vocab tensors padded or trimmed, the latter padded with zero rows) to
// OUT/model.safetensors in the OLMo layout and OUT/recipe.yml with its model dims. Bad input: a message, exit 2.
void hf_import(const char *in, const char *out);

#endif
