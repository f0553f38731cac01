// loader.h: the data loader. OLMo-core fixed-sequence-length semantics: every token file
// is cut into consecutive instances of exactly seq_len tokens (tails dropped); instance i
// is the i-th chunk of the files' concatenation in recipe order (never crossing a file).
// The global order is OLMo-core's: numpy PCG64(seed + epoch).shuffle(arange(N)) (see
// pcg64.h), cut into global batches of global_batch instances. Inside a global batch,
// micro-batch j holds instances j*micro_batch .. j*micro_batch+micro_batch-1 of that order
// and rank r of W owns a contiguous block of micro-batches (loader_rank_block: when W does not
// divide them, the first ones take one more), so the content of every global batch (and of
// every micro-batch) is independent of the world size.
// Mixtures choose the instance set from named sources with target token shares.
// data.packing: packed replaces the FSL cut with OLMo-core's packed instances (packing.h):
// the raw instances are then the packed ones, in group order; the order and the
// accounting above are the same.
// Every served instance is accounted for (coverage, repeats, rank overlap, resume gaps).
#ifndef OLMO_LOADER_H
#define OLMO_LOADER_H

#include <stdint.h>
#include <stdio.h>

#include "data/packing.h"
#include "data/repetition.h"

typedef struct cJSON cJSON;
typedef struct Loader Loader;

#define LOADER_MAX_SOURCES 64
// Targets: a token id, -100 (no next token: an instance's last position), or, for every
// position of an instance the repetition filter drops (LoaderConfig.instance_filter),
// LOADER_TARGET_FILTERED: masked out of the loss like -100, but counted in the loss's
// denominator, as OLMo-core counts a filtered instance's seq_len labels
// (train_module/transformer/train_module.py:368-380 at fa6c5014: "they will count as tokens
// with a zero loss"). train_step_on (train/step.h) counts both.
#define LOADER_TARGET_FILTERED (-101)

typedef struct {
    char name[64];
    int n_files;
    char **files;           // token files (globs already expanded, sorted)
    double share;           // target share of tokens (normalized over sources); <= 0 = natural
    double max_repeat;      // cap on how many times a source may be repeated per epoch (<= 0: 1,
                            // i.e. no upsampling); see docs/loader.md
} LoaderSource;

typedef struct LoaderConfig {
    int n_sources;
    LoaderSource sources[LOADER_MAX_SOURCES];
    int seq_len;
    int global_batch;       // instances per optimizer step (all ranks)
    int micro_batch;        // instances per micro-batch
    int vocab_size;         // ids >= this are an error
    uint64_t seed;          // order seed; epoch e uses seed + e
    int shuffle;            // 0 = sequential order (instance i at position i)
    int world_size, rank;
    int debug_double_shard; // reproduce the double-sharding bug (docs/olmo3.md s.7); tests only
    int prefetch;           // background thread prepares the next batch
    int verbose;            // print the source summary (loader_print_summary) to stderr at create
    int no_open_check;      // skip the full ids < vocab scan at open (done when the data is <= 1 GiB);
                            // every instance is still checked when it is read
    int instance_filter;            // 1: mask instances with a periodic run (OLMo-core InstanceFilterConfig)
    RepetitionFilter filter;        // its periods and count (data/repetition.h)
    int packing;                    // 0: FSL (cut the files); 1: OLMo-core's packed instances
    PackConfig pack;                // packed: its settings (pack.seq_len is set from seq_len)
    const uint64_t *fake_tokens;    // NULL, or each file's size in tokens (all sources' files in order):
                                    // the files are not opened, so only the order and where its
                                    // instances lie can be asked (olmo data order --sizes), never a batch
} LoaderConfig;

typedef struct {
    uint64_t seed;
    uint64_t epoch;
    uint64_t batches_processed;   // global batches served since the start of training
    uint64_t tokens_processed;
    char fingerprint[65];         // hex sha256 over (file names, sizes, seq_len, mixture)
    uint64_t epoch_instances;     // position in the epoch's order where the next batch starts
                                  // (instances, so it survives a change of W or global batch)
} LoaderState;

// Build the instance set (mixture) and open the files. Bad input (missing file, size not
// a multiple of 4, no full instance, unknown source...): message naming it, exit 2.
Loader *loader_create(const LoaderConfig *cfg);
void loader_free(Loader *l);

uint64_t loader_num_instances(const Loader *l);         // instances per epoch (after mixing)
uint64_t loader_batches_per_epoch(const Loader *l);
// Where instance `id` of the epoch order (a mixed id, as loader_peek_ids gives) is read from:
// its file and the offset of its first token in that file (tokens); packed: of its first
// (longest) document.
void loader_instance_where(const Loader *l, uint32_t id, const char **path, uint64_t *token_offset);

// Rank `rank`'s block of a global batch's `micro_batches` micro-batches over `world` ranks:
// micro-batches [first, first + count), contiguous in rank order; the first
// micro_batches % world ranks take one more than the others.
void loader_rank_block(int micro_batches, int world, int rank, int *first, int *count);
// This rank's instances per global batch (its block's micro-batches x micro_batch).
uint64_t loader_rank_instances(const Loader *l);

// This rank's share of the next global batch: loader_rank_instances instances, as
// inputs (n, seq_len) and targets (n, seq_len): targets are inputs shifted by one, the
// last position masked (-100). Advances the state.
void loader_next_batch(Loader *l, int32_t *inputs, int32_t *targets);

void loader_get_state(const Loader *l, LoaderState *s);
// Continue from a saved state. A fingerprint mismatch (changed dataset) is an error (exit 2)
// unless force (the trainer: train.allow_recipe_change lists data, or its files, mix or
// train.seq_len). world_size and global_batch may differ from the run that saved it.
void loader_set_state(Loader *l, const LoaderState *s, int force);

// Accounting: add loader fields to a metrics object (coverage of the epoch, repeats beyond
// what the mixture asked, rank overlaps, resume gaps, loader instances/s) and return the
// number of alarms raised since the last call (each also printed as a warning line).
int loader_metrics(Loader *l, cJSON *obj);

// ---- Additions (beyond the first interface) ----

// Epochs count from 1 (OLMo-core's trainer does): epoch e's order uses seed + e.
const char *loader_fingerprint(const Loader *l);
// This rank's instance ids (mixed-list positions) of the next batch, without advancing.
void loader_peek_ids(Loader *l, uint32_t *ids);

typedef struct {
    uint64_t epoch;               // epoch of the last batch served
    double coverage;              // distinct instances served this epoch / instances per epoch
    uint64_t repeats_epoch, repeats_total, rank_overlaps, off_batch, resume_gaps;
} LoaderTotals;
void loader_totals(const Loader *l, LoaderTotals *t);

// The mixture: per source, instances available (full instances in its files), used per
// epoch (with repetition), and its share of the epoch's instances.
int loader_num_sources(const Loader *l);
void loader_source_info(const Loader *l, int s, const char **name, uint64_t *available, uint64_t *used,
                        double *share);
void loader_print_summary(const Loader *l, FILE *f);
// {"instances", "batches_per_epoch", "seq_len", "fingerprint", "sources": [{name, files,
// instances_available, instances_used, repeat, share}]}; caller owns it.
cJSON *loader_describe(const Loader *l);

// Instance `id` (a mixed id) as served: its ids before any target mask (seq_len), its
// packing group (packed; FSL: its file's index) and padding tokens (FSL: 0).
int loader_instance_ids(const Loader *l, uint32_t id, uint32_t *ids, uint32_t *group);
// The packing (NULL under FSL).
const Packing *loader_packing(const Loader *l);

// LoaderState <-> JSON object for train_state.json (u64 fields as decimal strings).
cJSON *loader_state_to_json(const LoaderState *s);
int loader_state_from_json(const cJSON *o, LoaderState *s);   // 0 ok, -1 missing/bad field

#endif
