// limits.h: resource limits on model shapes that come from untrusted input (recipes,
// config.json, checkpoints): refuse before allocating, with a clear message, instead of
// overflowing a size computation or being OOM-killed (docs/robustness.md); and the memory
// of each command that loads a model, checked against this machine before it allocates
// (docs/hf.md, "Memory").
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

// ---- memory of the commands that load a model (eval, generate, import-hf, export-hf) ----
// What this machine can give a new process now: OLMO_MEM_LIMIT=BYTES when set (tests, a
// cgroup), else MemAvailable of /proc/meminfo, else model_memory_limit(). *src (may be
// NULL) gets a word for where the figure came from ("OLMO_MEM_LIMIT", "MemAvailable", ...).
double model_memory_available(const char **src);
// The fp32 parameter table of cfg in bytes (what eval and generate hold: the whole model
// in fp32).
double model_weights_bytes(const ModelConfig *cfg);
// The largest tensor of cfg's parameter table in fp32 bytes (import-hf and export-hf stream
// through one buffer of it).
double model_largest_tensor_bytes(const ModelConfig *cfg);
// Weights kept as stored (model/stored.h): `stored` bytes of them (mapped from the file)
// + the fp32 scratch of the largest part. model_bf16_weights_bytes: all of cfg's in bf16.
double model_stored_weights_bytes(const ModelConfig *cfg, double stored);
double model_bf16_weights_bytes(const ModelConfig *cfg);
// olmo eval: `weights` (model_weights_bytes in fp32, or model_stored_weights_bytes) + the
// forward-only activations for (B, T) (model_create_eval's: one block's buffers) + the LM
// head's logits scratch (it runs in chunks of CPU_LM_CHUNK rows, no (T, vocab) logits).
double model_eval_bytes(const ModelConfig *cfg, int B, int T, double weights);
// olmo generate: `weights` + the full forward's activations for (1, full_T) (1, or the
// prompt with --check-kv) + the KV-cache graph of max_len positions (max_n new tokens at a
// time) + logits_rows rows of padded-vocab logits.
double model_generate_bytes(const ModelConfig *cfg, int full_T, int max_n, int max_len, int logits_rows,
                            double weights);
// need <= model_memory_available(): 0. Else -1 with the refusal in err: "<cmd> needs about
// X GiB (<what>) but this machine has Y GiB available (<source>; OLMO_MEM_LIMIT overrides);
// refusing before allocating or writing anything", then `alternatives` (the caller's: a
// shorter train.seq_len, export-gguf + llama.cpp, ...).
// b bytes as "12.34 GiB", "5.67 MiB" or "8.9 KiB" in buf; returns buf.
const char *model_fmt_bytes(double b, char *buf, size_t n);
int model_check_need(const char *cmd, double need, const char *what, const char *alternatives, char *err, size_t n);

#endif
