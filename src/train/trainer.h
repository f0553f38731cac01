// trainer.h: a training run, the work of `olmo train` (src/cli/cmd_train.c; docs/recipes.md,
// docs/checkpoints.md, docs/distributed.md).
#ifndef OLMO_TRAINER_H
#define OLMO_TRAINER_H

#include "recipe/recipe.h"

// Train the recipe r (loaded and validated; recipe_path names it in the first line),
// on every rank of the job (dist_init done): the recipe, the data, the evaluation sets and
// any checkpoint to resume from are checked before anything is written (bad input: every
// rank exits 2), then the steps run, with metrics.jsonl, checkpoints and in-loop
// evaluation as trainer.c's header says. SIGTERM / SIGINT / SIGUSR1 stop it after the
// current step with a checkpoint. Returns the exit status: 0, or 1 when 16 steps in a row
// had a non-finite loss or gradient norm.
int train_run(const Recipe *r, const char *recipe_path);

#endif
