// ckpt_verify.h: content checksums of checkpoints, checked wherever a checkpoint is read.
//
// A flipped bit in weeks-old weights or Adam moments must stop a resume, not be trained
// on. Every step-N directory holds checksums.txt, written with the other files before the
// directory is renamed into place (so atomically with them), CRC-32C (src/util/crc32c.h)
// per region:
//
//   olmo.c checkpoint checksums 1 crc32c
//   file model.safetensors 224417032
//   region 0 7288 header 1f0e2d3c                       (8-byte length + JSON + padding)
//   region 7288 8395864 model.embed_tokens.weight 9a8b7c6d   (tensors in <= 8 MiB pieces)
//   ...
//   file train_state.json 2931
//   region 0 2931 json 01234567
//   end 89abcdef                                         (CRC-32C of every byte above)
//
// A sidecar rather than the safetensors __metadata__: the header itself is checked (a flip
// in a tensor's offsets or in the padding is caught too), the files stay byte-for-byte what
// HF tools read, and train_state.json is covered by the same file. The regions of a file
// cover it exactly, so any single changed byte (or a truncation) is found and located.
// Checkpoints written before this file existed load with a warning.
#ifndef OLMO_CKPT_VERIFY_H
#define OLMO_CKPT_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "io/safetensors.h"

#define CKPT_SUMS_NAME "checksums.txt"
#define CKPT_SUM_CHUNK ((size_t)8 << 20)   // largest region: locates a flip, balances threads
#define CKPT_SUMS_MAX_FILES 8

typedef struct {
    char *name;             // "header", a tensor name, or "json"
    size_t begin, end;      // bytes of the file
    uint32_t crc;
} CkptRegion;
typedef struct {
    char *name;             // file name inside the checkpoint directory
    size_t size;
    int n, cap;
    CkptRegion *r;
} CkptSumFile;
typedef struct {
    int n;
    CkptSumFile f[CKPT_SUMS_MAX_FILES];
} CkptSums;

void ckpt_sums_free(CkptSums *s);

// ---- writing ------------------------------------------------------------------------------
// Add a safetensors file's sums (st_write_sums over ts) / a buffer written as file fname.
void ckpt_sums_add_st(CkptSums *s, const char *fname, const StWrite *ts, const StSums *st);
void ckpt_sums_add_buf(CkptSums *s, const char *fname, const void *data, size_t len);
// Write DIR/checksums.txt and fsync it (DIR: a checkpoint's temporary directory, renamed into
// place as a whole afterwards). 0, or -1 with errno set.
int ckpt_sums_write(const char *dir, const CkptSums *s);

// ---- reading ------------------------------------------------------------------------------
// Parse checksums.txt text (path only for messages): every line, the final CRC and the
// regions' exact cover of each file are checked. 0, or -1 with a message naming path.
int ckpt_sums_parse(const char *path, const char *txt, size_t len, CkptSums *s, char *err, size_t errlen);
// Read DIR/checksums.txt: 0 read, 1 absent (a checkpoint from before checksums), -1 bad.
int ckpt_sums_read(const char *dir, CkptSums *s, char *err, size_t errlen);
const CkptSumFile *ckpt_sums_find(const CkptSums *s, const char *fname);

// Copy file bytes [begin, end) to dst: what a loader wants out of a file.
typedef struct {
    size_t begin, end;
    void *dst;
} CkptSpan;
// Check data[0, len), the bytes of file `path`, against f (NULL: nothing to check) and copy
// the spans (sorted by begin, non-overlapping, inside the file) in the same pass, on all
// OpenMP threads: each piece is checked while it is in cache, then copied. Checking only
// the header region: regions_max = 1 (all: -1). 0, or -1 with the file, the region (tensor)
// and its byte range in err; the spans' destinations then hold part of the file.
int ckpt_sums_check(const CkptSumFile *f, int regions_max, const char *path, const uint8_t *data, size_t len,
                    const CkptSpan *spans, int nspans, char *err, size_t errlen);

// Verify one file against the checksums.txt next to it (the weights `olmo eval`, `export-hf`
// and `generate` read). 0 verified, 1 nothing to verify against (a warning is printed when
// the directory is a checkpoint without checksums and header_only is 0), -1 mismatch
// (message + ckpt_verify_hint). header_only: just the header region and the file size.
int ckpt_verify_path(const char *path, int header_only, char *err, size_t errlen);
// Verify every file of checkpoint directory dir; one line per file on out (NULL: quiet).
// 0 all verified, 1 no checksums.txt, -1 a mismatch (the first one in err).
int ckpt_verify_dir(const char *dir, FILE *out, char *err, size_t errlen);
// Append to err the newest checkpoint older than dir (a step-N directory) that verifies,
// and the key that resumes from it, or that none does.
void ckpt_verify_hint(const char *dir, char *err, size_t errlen);

#endif
