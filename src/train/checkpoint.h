// checkpoint.h: training checkpoints: RUN_DIR/checkpoints/step-NNNNNNNN/ with
//   model.safetensors  fp32 parameters, HF names (loadable by any HF-style reader)
//   optim.safetensors  fp32 AdamW state: "<hf name>.exp_avg" and "<hf name>.exp_avg_sq";
//                      __metadata__ {"step": Adam's step count, "format": ...}
//   train_state.json   step, tokens, loader state, schedule, skip-step history, model
//                      shape, world size at save, recipe YAML + sha256, olmo version
// and RUN_DIR/checkpoints/latest naming the newest. Nothing depends on the backend,
// the precision or the world size: at W > 1 each rank writes its own shard's byte ranges of
// the same files (src/train/ckpt_shard.h; this file's writer is the one-rank case and the
// pieces both share), and a run may resume with any world size.
//
// Crash safety: a checkpoint is written into checkpoints/.tmp-step-N/, every file is
// fsync'd, then the directory is renamed to step-N and the parent fsync'd; `latest` is
// replaced atomically afterwards. So a step-* directory is always complete; a kill at
// any moment leaves at worst a .tmp-* directory, removed by the next run. Old
// checkpoints are renamed to .tmp-del-* before deletion for the same reason.
#ifndef OLMO_CHECKPOINT_H
#define OLMO_CHECKPOINT_H

#include <stddef.h>

#include "data/loader.h"
#include "io/ckpt_dir.h"
#include "io/ckpt_verify.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/params.h"
#include "train/optim.h"
#include "train/skipstep.h"

#define OLMO_VERSION_STRING "olmo.c 0.1"
#define CKPT_FORMAT 1

typedef struct {
    long step;              // optimizer steps done
    long tokens;            // training tokens consumed
    long skipped_total;     // skipped updates so far
    long adam_step;         // AdamW's step count (steps minus skipped ones)
    int world_size;         // ranks of the run that saved it (information; resume may differ)
    int global_batch, micro_batch, seq_len;
    LoaderState loader;
    SkipStep skip;          // skip-step history (exact: doubles stored as hex floats)
    Schedule sched;
    double lr;              // lr of the last step
    ModelConfig cfg;
    size_t n_params;
    char recipe_sha256[65];
    char *recipe_yaml;      // save: borrowed; load: malloc'd (ckpt_state_free)
} TrainState;

void ckpt_state_free(TrainState *st);

// ---- writing ------------------------------------------------------------------------------
typedef struct CkptWriter CkptWriter;

// keep_last: newest checkpoints kept (>= 1); keep_every: also keep steps divisible by it
// (0 = none); async: write on a background thread after the host snapshot.
CkptWriter *ckpt_writer_create(const char *run_dir, const ParamTable *t, int keep_last, int keep_every, int async);
// Waits for the previous write, then returns the host snapshot buffers (table->total
// floats each) for the caller to fill: params, Adam m, Adam v (full, gathered).
void ckpt_snapshot_buffers(CkptWriter *w, float **params, float **m, float **v);
// Write the snapshot as checkpoint st->step (state copied; recipe text copied).
void ckpt_commit(CkptWriter *w, const TrainState *st);
// Fetch n floats of buffer `which` (0 parameters, 1 Adam m, 2 Adam v) at flat offset
// `offset` into dst (a backend streaming its device state, e.g. src/train/backend.c).
typedef void (*CkptFetch)(void *ctx, int which, size_t offset, size_t n, float *dst);
// Write checkpoint st->step synchronously, tensor by tensor through fetch (called once per
// tensor in file order: every parameter, then every exp_avg, then every exp_avg_sq), with
// one tensor-sized host buffer instead of the snapshot. Dies if the write fails.
void ckpt_commit_fetch(CkptWriter *w, const TrainState *st, CkptFetch fetch, void *ctx);
// Wait for the write in flight (dies if it failed); returns its wall seconds (0 if none).
double ckpt_wait(CkptWriter *w);
void ckpt_writer_free(CkptWriter *w);   // waits first
// Path of the last checkpoint committed (after ckpt_wait: complete on disk).
const char *ckpt_last_path(const CkptWriter *w);

// ---- the pieces both writers share (this one and the sharded one, src/train/ckpt_shard.h) ----
// The tensors of checkpoint file `file` (0 model.safetensors, 1 optim.safetensors) in file
// order, data NULL, and its __metadata__ text: model t->n tensors (names borrowed from t),
// optim 2 t->n (exp_avg of each, then exp_avg_sq; names[i] malloc'd, for the caller to
// free). ws and names hold 2 t->n entries. Returns the count.
int ckpt_file_tensors(const ParamTable *t, int file, const TrainState *st, StWrite *ws, char **names, char *meta,
                      size_t metalen);
// checkpoints/.tmp-step-N, created empty (ckdir too). 0, or -1 with a message.
int ckpt_temp_dir(const char *ckdir, long step, char *tmp, size_t tmplen, char *errmsg, size_t errlen);
// tmp holds both safetensors files (their sums in sums): add train_state.json and
// checksums.txt, drop the sharded write's marker, fsync, rename tmp to step-N, update
// `latest`, apply retention; the final path into last. 0, or -1 with a message.
int ckpt_publish(const char *ckdir, const char *tmp, const TrainState *st, CkptSums *sums, int keep_last, int keep_every,
                 char *last, size_t lastlen, char *errmsg, size_t errlen);
// Where and how a run's checkpoints are written: RUN_DIR/checkpoints, retention, ckpt.async.
typedef struct {
    char ckdir[4096];
    int keep_last, keep_every, async;   // keep_last >= 1
} CkptPolicy;
void ckpt_policy_init(CkptPolicy *p, const char *run_dir, int keep_last, int keep_every, int async);
// Keep the newest keep_last step-* directories of ckdir (and steps divisible by keep_every).
void ckpt_retention(const char *ckdir, int keep_last, int keep_every);
char *ckpt_state_json(const TrainState *st);   // train_state.json's text (malloc'd)
// Test hook OLMO_TEST_CKPT_PAUSE=SECONDS: sleep between the two safetensors files.
void ckpt_test_pause(void);

// ---- reading ------------------------------------------------------------------------------
// Remove stale .tmp-* directories under RUN_DIR/checkpoints (left by a killed run).
void ckpt_clean_temp(const char *run_dir);
// Validate a checkpoint completely, then load it: train_state.json parses and its model
// shape equals cfg (mismatched fields listed), both safetensors files open, hold exactly
// the table's tensors as F32 with the right shapes (every problem listed). Only then:
// params (whole table), m and v for elements [lo, hi) (indexed from lo; NULL skips), st. Returns 0,
// or -1 with a message in err and the outputs untouched.
int ckpt_load(const char *dir, const ParamTable *t, const ModelConfig *cfg, float *params, float *m, float *v,
              size_t lo, size_t hi, TrainState *st, char *err, size_t errlen);

// sha256 of a buffer as 64 hex chars + NUL.
void ckpt_sha256_hex(const void *data, size_t len, char out[65]);

#endif
