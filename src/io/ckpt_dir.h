// ckpt_dir.h: the checkpoint directories of a run on disk, RUN_DIR/checkpoints/step-NNNNNNNN/
// and RUN_DIR/checkpoints/latest (their contents: src/train/checkpoint.h, their checksums:
// ckpt_verify.h): what the trainer resumes from, and what a CKPT argument names.
#ifndef OLMO_CKPT_DIR_H
#define OLMO_CKPT_DIR_H

#include <stddef.h>

// "step-00001000" -> 1000; -1 if name is not a checkpoint directory name.
long ckpt_step_of_name(const char *name);
// Steps of every step-* directory under ckdir, newest first (malloc'd); *n gets the count.
long *ckpt_list_steps(const char *ckdir, int *n);
// Resolve train.resume: "never" -> 0; "auto" -> 1 with the newest step-* directory of
// RUN_DIR/checkpoints in out, or 0 when there is none; any other value is a checkpoint
// directory (1). A `latest` file naming a missing directory, or a PATH that does not
// exist: -1 with a message in err.
int ckpt_resolve(const char *run_dir, const char *resume, char *out, size_t outlen, char *err, size_t errlen);

#endif
