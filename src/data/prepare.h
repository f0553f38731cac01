// prepare.h: JSONL / plain-text corpora to OLMo-core token files plus manifest.json, the
// work of `olmo prepare` (src/cli/cmd_prepare.c; docs/data.md). prepare.c's header
// comment says what is written, and why it is deterministic and atomic.
#ifndef OLMO_PREPARE_H
#define OLMO_PREPARE_H

#include <stdint.h>

// How a file's source is named (olmo prepare --source-from): its stem (news.jsonl.gz ->
// news), its directory's name, or its path under the input argument with '/' -> '_'
// (Dolma's layout: dolma/cc/a/part-0000.json.gz given as dolma/cc -> a_part-0000).
typedef enum { SOURCE_FROM_STEM, SOURCE_FROM_DIR, SOURCE_FROM_PATH } PrepareSourceFrom;

typedef struct {
    const char *outdir;         // output directory (created)
    const char *tokenizer;      // tokenizer.json; NULL = $OLMO_TOKENIZER or the default
    double heldout_frac;        // fraction of documents held out, by hash of their bytes
    uint64_t heldout_seed;      // seed of that hash
    int nthreads;               // tokenizer threads (the output does not depend on it)
    int skip_bad;               // skip (and count) malformed records instead of failing
    int force;                  // redo sources whose outputs are up to date
    PrepareSourceFrom source_from;  // how sources are named (default: file stems)
} PrepareOptions;

// Prepare every input (files, or directories walked recursively; each file is one source
// named after its stem) into OUTDIR/<source>.npy, OUTDIR/<source>.heldout.npy and
// OUTDIR/manifest.json, with progress on stderr. Bad input (a missing input, two inputs
// with one source name, a malformed record without skip_bad...): a message naming the
// file, exit 2, and no new output left behind.
void prepare_run(const PrepareOptions *o, char **paths, int npaths);

#endif
