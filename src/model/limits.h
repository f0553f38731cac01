// limits.h: resource limits on model shapes that come from untrusted input (recipes,
// config.json, checkpoints): refuse before allocating, with a clear message, instead of
// overflowing a size computation or being OOM-killed (docs/robustness.md).
#ifndef OLMO_LIMITS_H
#define OLMO_LIMITS_H

#include <stddef.h>

#include "model/config.h"

// Largest model any command accepts: 2^38 (2.7e11) parameters, and activations of one
// micro-batch of at most 2^38 floats. Far above every OLMo (32B) and far below where a
// size_t count of floats or bytes could overflow.
#define MODEL_MAX_PARAMS 274877906944.0
#define MODEL_MAX_ACT_FLOATS 274877906944.0

// Training memory of one process in bytes (world size 1), computed in double so that
// absurd shapes cannot overflow: params + grads + Adam m, v (16 bytes per parameter), plus
// activations and scratch of one (B, T) micro-batch (model_activation_bytes' layout), plus
// the bf16 matmul workspaces when prec is PRECISION_BF16.
double model_train_bytes(const ModelConfig *c, int B, int T, Precision prec);
// Size sanity only (no machine-dependent limit): parameters <= MODEL_MAX_PARAMS, activation
// floats <= MODEL_MAX_ACT_FLOATS, B and T positive. Returns 0, or -1 with a message in err.
// Cheap; recipe_validate calls it, so `olmo info` still describes a 7B model on a laptop.
int model_check_size(const ModelConfig *c, int B, int T, char *err, size_t n);
// model_check_size, then model_train_bytes against the physical memory of this machine
// (sysconf; env OLMO_MEM_LIMIT=BYTES overrides, e.g. a cgroup limit). Returns 0, or -1 with
// a message naming the estimate and the limit. Call before model_create when training.
int model_check_memory(const ModelConfig *c, int B, int T, Precision prec, char *err, size_t n);
// The limit model_check_memory uses (bytes).
double model_memory_limit(void);

#endif
