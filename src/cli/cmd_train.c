// cmd_train.c: `olmo train RECIPE.yml [key=value ...]`, also as `mpirun -np W olmo train ...`:
// the arguments and the recipe; src/train/trainer.c (train_run) trains it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "dist/dist.h"
#include "recipe/recipe.h"
#include "train/trainer.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo train RECIPE.yml [key=value ...]\n"
            "       mpirun -np W olmo train RECIPE.yml [key=value ...]   (data parallel, ZeRO-1)\n"
            "  Trains the recipe's model. Overrides use dotted keys (optim.lr=1e-3 model.n_layers=2).\n"
            "  Writes RUN_DIR/recipe.yml (resolved), RUN_DIR/metrics.jsonl, RUN_DIR/checkpoints/step-N/\n"
            "  (see docs/checkpoints.md) and RUN_DIR/model.safetensors at the end. train.resume=auto\n"
            "  (default) continues from the newest checkpoint, with any world size up to\n"
            "  global_batch / micro_batch (uneven blocks when W does not divide it: docs/distributed.md).\n"
            "  SIGTERM/SIGINT/SIGUSR1/SIGHUP: checkpoint after this step, exit 0 (to mpirun itself only\n"
            "  SIGUSR1 does: launch with scripts/olmo-mpirun, which turns the others into it).\n"
            "  Across hosts: OLMO_RUN_LEASE (s, default 60: the run lock's lease; a crashed run's lock is\n"
            "  taken over from any host after it), OLMO_DIST_TIMEOUT (s, default 600: the deadline on\n"
            "  MPI collectives, naming the rank and host that stopped answering; docs/cluster.md).\n"
            "  On resume the recipe is compared with the checkpoint's, key by key (`optim.lr: 0.003 ->\n"
            "  0.001`): harmless keys (log_every, eval.*, ckpt.*, paths of the same data) pass; keys that\n"
            "  change the training (optim, schedule, steps, batch, seq_len, data, precision) exit 2\n"
            "  unless train.allow_recipe_change lists them (e.g. train.allow_recipe_change=optim.lr);\n"
            "  the model never changes (a new train.run_dir with train.load_path). Every recipe a run\n"
            "  trained under stays in RUN_DIR/recipes/step-N.yml (docs/checkpoints.md).\n"
            "  MFU: the job's model FLOP/s (window-aware count: 6N + 12 H Dh sum over layers of min(window, T),\n"
            "  x the global tokens/s; the OLMo-core v2.3 count 6N + 12 L H Dh T in mfu_olmo_core_v2_3)\n"
            "  over the peak of the hardware it uses: the per-core GEMM peak of the run's precision\n"
            "  (perf.peak_flops, else a cached calibration) x the physical cores the ranks use, each\n"
            "  counted once; on CUDA the sum of the devices' peaks (docs/performance.md).\n\nrecipe keys:\n");
}

int cmd_train(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        recipe_print_keys();
        return 0;
    }
    const char *recipe_path = NULL;
    char **ov = xcalloc((size_t)argc, sizeof(char *));
    int nov = 0;
    for (int i = 1; i < argc; i++) {
        if (strchr(argv[i], '=')) ov[nov++] = argv[i];
        else if (!recipe_path) recipe_path = argv[i];
        else die_input("unexpected argument '%s' (give one recipe file, then key=value overrides)", argv[i]);
    }
    if (!recipe_path) {
        usage(stderr);
        return 2;
    }
    dist_init();
    Recipe *r = xmalloc(sizeof(Recipe));   // large (path lists): not on the stack
    recipe_load(r, recipe_path, nov, ov);
    recipe_require_heldout(r, recipe_path);
    const int rc = train_run(r, recipe_path);
    free(r);
    free(ov);
    dist_finalize();
    return rc;
}
