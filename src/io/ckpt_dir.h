// ckpt_dir.h: the checkpoint directories of a run on disk, RUN_DIR/checkpoints/step-NNNNNNNN/
// and RUN_DIR/checkpoints/latest (their contents: src/train/checkpoint.h, their checksums:
// ckpt_verify.h): what the trainer resumes from, and what a CKPT argument names
// (ckpt_source_resolve: the one resolver behind train.load_path, olmo eval, generate,
// export-hf and export-gguf).
#ifndef OLMO_CKPT_DIR_H
#define OLMO_CKPT_DIR_H

#include <stddef.h>

// A sharded checkpoint's write in progress (src/train/ckpt_shard.h): rank 0 puts this file
// into checkpoints/.tmp-step-N first and removes it only once every rank's part is in, just
// before the rename. A directory holding it is incomplete whatever else it holds.
#define CKPT_INCOMPLETE_NAME "incomplete"
// 1 if dir holds CKPT_INCOMPLETE_NAME.
int ckpt_is_incomplete(const char *dir);

// "step-00001000" -> 1000; -1 if name is not a checkpoint directory name.
long ckpt_step_of_name(const char *name);
// Steps of every step-* directory under ckdir, newest first (malloc'd); *n gets the count.
long *ckpt_list_steps(const char *ckdir, int *n);
// Resolve train.resume: "never" -> 0; "auto" -> 1 with the newest step-* directory of
// RUN_DIR/checkpoints in out, or 0 when there is none; any other value is a checkpoint
// directory (1). A `latest` file naming a missing directory, or a PATH that does not
// exist: -1 with a message in err.
int ckpt_resolve(const char *run_dir, const char *resume, char *out, size_t outlen, char *err, size_t errlen);

// What a CKPT argument (or train.load_path) names, once resolved.
typedef enum {
    CKPT_SRC_CHECKPOINT,   // a checkpoint directory (train_state.json, model.safetensors, optim.safetensors)
    CKPT_SRC_WEIGHTS,      // a weights file: the path as given, or a directory's model.safetensors
    CKPT_SRC_HF,           // a Hugging Face directory (config.json with a model_type)
} CkptSourceKind;

// What the caller wants from a run directory, which decides the order a directory is tried in:
//   CKPT_FOR_WEIGHTS  (eval, generate, export-hf, export-gguf: model_source_resolve, io/hf.h):
//     an HF directory; a checkpoint directory; DIR/model.safetensors (a finished run's final
//     weights); the newest DIR/checkpoints/step-*.
//   CKPT_FOR_TRAINING (train.load_path, src/train/resume.c): a checkpoint directory; the
//     newest DIR/checkpoints/step-* (its Adam moments and trainer state can be loaded);
//     DIR/model.safetensors (an import-hf output, or an HF export's file); an HF directory.
// A file is a weights file either way (its contents are the reader's to check). Both uses
// accept the union of what each accepted before this resolver was shared: train.load_path
// now also recognizes an HF directory (the trainer refuses it by name: import-hf converts
// it), and eval & co. now also take a checkpoint directory first (one lacking its
// model.safetensors is reported as such).
typedef enum { CKPT_FOR_WEIGHTS, CKPT_FOR_TRAINING } CkptUse;

typedef struct {
    CkptSourceKind kind;
    char path[4600];   // the checkpoint directory, the weights file or the HF directory
} CkptSource;

// Returns 0 with s filled; CKPT_SRC_MISSING: ckpt does not exist; CKPT_SRC_EMPTY: a
// directory that is none of the above (each caller words these two: their messages name
// their own key or command); -1 with a message in err (a `latest` naming no checkpoint
// directory, a path too long).
#define CKPT_SRC_MISSING (-2)
#define CKPT_SRC_EMPTY (-3)
int ckpt_source_resolve(const char *ckpt, CkptUse use, CkptSource *s, char *err, size_t errlen);

#endif
