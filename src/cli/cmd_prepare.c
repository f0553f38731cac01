// cmd_prepare.c: `olmo prepare INPUT... -o OUTDIR [options]` and `olmo prepare --list
// OUTDIR`: the options, then src/data/prepare.c does the work (docs/data.md).
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "data/manifest.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: olmo prepare INPUT... -o OUTDIR [options]\n"
        "  Tokenize JSONL (`text` field; .jsonl/.json, optionally .gz/.zst) or plain-text files\n"
        "  (one document per file), or directories of them, into OLMo-core token files:\n"
        "  OUTDIR/<source>.npy (train) and OUTDIR/<source>.heldout.npy, raw uint32 with one\n"
        "  EOS after every document, plus OUTDIR/manifest.json.\n"
        "options:\n"
        "  -o, --output DIR      output directory (created)\n"
        "  --heldout-frac F      fraction of documents held out, by hash (default 0.05)\n"
        "  --heldout-seed S      seed of the held-out hash (default 0)\n"
        "  --threads N           tokenizer threads (default: all cores; output is identical)\n"
        "  --tokenizer PATH      tokenizer.json (default: $OLMO_TOKENIZER or %s)\n"
        "  --skip-bad            skip (and count) malformed records instead of failing\n"
        "  --force               redo sources whose outputs are up to date\n"
        "  --source-from WHAT    how sources are named: stem (default: news.jsonl.gz -> news), dir (the\n"
        "                        file's directory), path (its path under the INPUT given, '/' -> '_':\n"
        "                        Dolma's dolma/cc/a/part-0000.json.gz given as dolma/cc -> a_part-0000)\n"
        "or:    olmo prepare --list OUTDIR   (the outputs recorded in OUTDIR/manifest.json)\n",
        TOKENIZER_DEFAULT_PATH);
}

// `olmo prepare --list OUTDIR`: prints the manifest through the reader API (manifest.h).
static int list_manifest(const char *dir) {
    Manifest *m = manifest_load(dir);
    printf("# tokenizer %s (sha256 %.16s...), eos %u\n", m->tokenizer_path, m->tokenizer_fingerprint, m->eos_id);
    printf("%-20s %-8s %10s %12s %12s  %s\n", "source", "split", "documents", "tokens", "utf8_bytes", "path");
    for (int i = 0; i < m->n_outputs; i++) {
        const ManifestOutput *o = &m->outputs[i];
        printf("%-20s %-8s %10lld %12lld %12lld  %s\n", o->source, o->split, (long long)o->documents,
               (long long)o->tokens, (long long)o->utf8_bytes, o->full_path);
    }
    manifest_free(m);
    return 0;
}

int cmd_prepare(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    if (argc >= 2 && !strcmp(argv[1], "--list")) {
        if (argc != 3) die_input("usage: olmo prepare --list OUTDIR");
        return list_manifest(argv[2]);
    }
    const char *outdir = NULL, *tok_arg = NULL;
    double frac = 0.05;
    uint64_t seed = 0;
    int nthreads = omp_get_max_threads(), skip_bad = 0, force = 0;
    PrepareSourceFrom source_from = SOURCE_FROM_STEM;
    char **paths = xmalloc((argc + 1) * sizeof *paths);
    int npaths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        char *end = NULL;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!has_val) die_input("%s needs a directory", a);
            outdir = argv[++i];
        } else if (!strcmp(a, "--heldout-frac")) {
            if (!has_val) die_input("--heldout-frac needs a value");
            frac = strtod(argv[++i], &end);
            if (*end || !(frac >= 0 && frac <= 1)) die_input("--heldout-frac: '%s' is not in [0, 1]", argv[i]);
        } else if (!strcmp(a, "--heldout-seed")) {
            if (!has_val) die_input("--heldout-seed needs a value");
            seed = strtoull(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-' || !argv[i][0]) die_input("--heldout-seed: '%s' is not a non-negative integer", argv[i]);
        } else if (!strcmp(a, "--threads")) {
            if (!has_val) die_input("--threads needs a value");
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 4096) die_input("--threads: '%s' is not a positive integer", argv[i]);
            nthreads = (int)t;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!has_val) die_input("--tokenizer needs a path");
            tok_arg = argv[++i];
        } else if (!strcmp(a, "--source-from")) {
            if (!has_val) die_input("--source-from needs stem, dir or path");
            const char *v = argv[++i];
            if (!strcmp(v, "stem")) source_from = SOURCE_FROM_STEM;
            else if (!strcmp(v, "dir")) source_from = SOURCE_FROM_DIR;
            else if (!strcmp(v, "path")) source_from = SOURCE_FROM_PATH;
            else die_input("--source-from: '%s' is not stem, dir or path", v);
        } else if (!strcmp(a, "--skip-bad")) skip_bad = 1;
        else if (!strcmp(a, "--force")) force = 1;
        else if (a[0] == '-' && a[1]) die_input("prepare: unknown option '%s' (see olmo prepare --help)", a);
        else paths[npaths++] = argv[i];
    }
    if (!outdir) { usage(stderr); die_input("prepare: -o OUTDIR is required"); }
    if (npaths == 0) { usage(stderr); die_input("prepare: no inputs given"); }

    PrepareOptions po = {.outdir = outdir, .tokenizer = tok_arg, .heldout_frac = frac, .heldout_seed = seed,
                         .nthreads = nthreads, .skip_bad = skip_bad, .force = force, .source_from = source_from};
    prepare_run(&po, paths, npaths);
    free(paths);
    return 0;
}
