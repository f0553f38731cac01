// cmd_ckpt.c: `olmo ckpt verify PATH`: the content checksums (src/io/ckpt_verify.h) of
// one checkpoint or of every checkpoint of a run, checked without loading anything.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/ckpt_verify.h"
#include "train/checkpoint.h"

static void ckpt_usage(FILE *f) {
    fprintf(f, "usage: olmo ckpt verify PATH\n\n"
               "Check the content checksums (%s, CRC-32C) of a checkpoint directory (step-N), or of\n"
               "every checkpoint of a run directory (RUN_DIR or RUN_DIR/checkpoints), newest first.\n"
               "One line per file: 'ok PATH  size, regions, GB/s', or 'BAD' with the file, the tensor\n"
               "and the byte range that changed; 'UNVERIFIED' for a checkpoint written before checksums.\n"
               "Exit 0 when nothing is BAD, 2 otherwise (or when PATH holds no checkpoint).\n",
            CKPT_SUMS_NAME);
}

int cmd_ckpt(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        ckpt_usage(stdout);
        return 0;
    }
    if (argc != 3 || strcmp(argv[1], "verify") != 0) {
        ckpt_usage(stderr);
        return 2;
    }
    const char *path = argv[2];
    char p[4600], ck[4400], err[4096];
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "olmo: error: ckpt verify: %s is not a directory\n", path);
        return 2;
    }
    snprintf(p, sizeof p, "%s/train_state.json", path);
    int bad = 0, checked = 0;
    if (access(p, F_OK) == 0 || ckpt_is_incomplete(path)) {   // one checkpoint (or an unfinished sharded one: BAD)
        bad = ckpt_verify_dir(path, stdout, err, sizeof err) < 0;
        checked = 1;
    } else {
        snprintf(ck, sizeof ck, "%s/checkpoints", path);
        if (stat(ck, &sb) != 0) snprintf(ck, sizeof ck, "%s", path);   // PATH is the checkpoints directory
        int n;
        long *steps = ckpt_list_steps(ck, &n);
        for (int i = 0; i < n; i++) {
            snprintf(p, sizeof p, "%s/step-%08ld", ck, steps[i]);
            bad += ckpt_verify_dir(p, stdout, err, sizeof err) < 0;
        }
        checked = n;
        free(steps);
    }
    if (!checked) {
        fprintf(stderr, "olmo: error: ckpt verify: %s holds no checkpoint (no train_state.json, no step-* directories)\n", path);
        return 2;
    }
    fflush(stdout);
    if (bad) fprintf(stderr, "olmo: error: ckpt verify: %d checkpoint%s of %d failed\n", bad, bad > 1 ? "s" : "", checked);
    return bad ? 2 : 0;
}
