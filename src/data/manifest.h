// manifest.h: reader for the manifest.json that `olmo prepare` writes next to its token
// files. Evaluation and data-loading code use it to find the token file of a source and
// split (e.g. "news"/"heldout") and its document/token/byte counts, without knowing the
// manifest's JSON layout. See docs/data.md for the file format.
#ifndef OLMO_MANIFEST_H
#define OLMO_MANIFEST_H

#include <stdint.h>

typedef struct {
    char *source;        // input stem, e.g. "news"
    char *split;         // "train" or "heldout"
    char *path;          // as recorded: relative to the manifest's directory
    char *full_path;     // manifest directory joined with path (ready to open)
    int64_t documents;   // documents in the file (= number of EOS tokens)
    int64_t tokens;      // uint32 tokens in the file, EOS included
    int64_t utf8_bytes;  // UTF-8 bytes of the documents' text (for bits-per-byte)
    double heldout_frac; // held-out fraction the source was split with
    char sha256[65];     // hex sha256 of the file bytes
} ManifestOutput;

typedef struct {
    char *dir;                  // directory holding manifest.json
    char *tokenizer_path;
    char tokenizer_fingerprint[65];
    uint32_t eos_id;
    int n_outputs;
    ManifestOutput *outputs;    // in manifest order (sources sorted, train before heldout)
} Manifest;

// Load OUTDIR/manifest.json (`path` may be the file or its directory). A missing or
// malformed manifest is bad input: a message naming the file and field, exit 2.
Manifest *manifest_load(const char *path);
void manifest_free(Manifest *m);
// The output for (source, split), or NULL.
const ManifestOutput *manifest_find(const Manifest *m, const char *source, const char *split);

#endif
