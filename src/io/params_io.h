// params_io.h: a model's parameter table to and from a safetensors file (HF names): the
// weights of checkpoints, exports and imports, train.load_path and bench's initial weights.
#ifndef OLMO_PARAMS_IO_H
#define OLMO_PARAMS_IO_H

#include <stddef.h>

#include "io/safetensors.h"
#include "model/params.h"

// Load every tensor of the table from a safetensors file (HF names; F32/BF16/F16/F64
// converted). A missing tensor, a wrong shape or an unknown extra tensor is an error
// naming the file and the tensors; returns 0, or -1 with a message in err (nothing is
// half-loaded into params: data is read into a staging buffer first). A checkpoint's file
// is checked against the checksums.txt next to it first (ckpt_verify.h).
int params_load_safetensors(const ParamTable *t, float *params, const char *path, char *err, size_t errlen);
// The checks of params_load_safetensors on an opened file (every tensor present with its
// shape and a float dtype, nothing extra). Returns 0, or -1 with a message naming f->path.
int params_check_file(const ParamTable *t, const StFile *f, char *err, size_t errlen);
// Save the table's tensors (F32, HF names) atomically; metadata may be NULL.
void params_save_safetensors(const ParamTable *t, const float *params, const char *path, const char *metadata);

#endif
