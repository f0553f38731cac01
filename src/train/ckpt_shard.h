// ckpt_shard.h: sharded checkpoint writing. Every rank writes its own byte ranges of the
// SAME files the gathering writer (checkpoint.h) produces, byte for byte: no gather to rank 0,
// no full-size snapshot on one rank. The flat layout [0, total) of the parameter table is
// the order of the tensors in model.safetensors (and twice over, exp_avg then exp_avg_sq, in
// optim.safetensors), so a rank's shard [lo, hi) is one contiguous byte range of model and
// two of optim: data0 + 4 lo .. data0 + 4 hi.
//
// The protocol (ckpt_shard_commit, then ckpt_shard_poll):
//  1. rank 0 creates checkpoints/.tmp-step-N with the marker CKPT_INCOMPLETE_NAME
//     (io/ckpt_dir.h), both files preallocated at their final size (fallocate) and their
//     headers written (st_header: the same bytes as st_write's); every rank learns whether
//     that worked;
//  2. each rank of shard group 0 (the others hold copies of the same shards) pwrites its
//     ranges and fsyncs, taking the CRC-32C of its part of every checksum region
//     (st_regions) from the bytes it writes; with ckpt.async on a background thread from its
//     host snapshot, while training goes on;
//  3. at a later step boundary (ckpt_shard_poll, collective) once every rank is done, the
//     statuses and partial CRCs are all-gathered; rank 0 checks both files still have their
//     laid-out size, combines each region's CRC from the parts in rank order (crc32c_combine), writes train_state.json and checksums.txt,
//     removes the marker and renames the directory (ckpt_publish: the gathering writer's
//     commit). A rank that failed: nobody publishes, every rank exits 1, the directory stays
//     .tmp-* with its marker. A rank killed mid-write: the job dies with the same directory.
// Either way no step-* directory is ever incomplete: resume picks the last complete one,
// and train.resume naming the incomplete one is refused (ckpt_resolve).
//
// Test hooks (tests/test_ckpt_shard.sh): OLMO_TEST_CKPT_SHARD_PAUSE=RANK:SECONDS[:STEP], that
// rank sleeps between its part of model.safetensors and its part of optim (and prints its
// pid); OLMO_TEST_CKPT_SHARD_FAIL=RANK[:STEP], that rank reports its optim part as failed
// (EIO); in checkpoint STEP only, or without it in every one.
#ifndef OLMO_CKPT_SHARD_H
#define OLMO_CKPT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "train/checkpoint.h"

// The two safetensors files of one checkpoint as every rank computes them alike.
typedef struct {
    int n[2];              // tensors of model.safetensors, optim.safetensors
    StWrite *ws[2];        // their tensors (data NULL)
    char **names;          // optim's tensor names (2 t->n, malloc'd)
    char *header[2];       // the header bytes (st_header)
    size_t hlen[2];
    StSums reg[2];         // the checksum regions of each file (st_regions; crc unset)
    int nreg;              // reg[0].n + reg[1].n: one partial CRC per region per rank
    size_t total;          // the table's floats
} CkptLayout;

void ckpt_layout_init(CkptLayout *L, const ParamTable *t, const TrainState *st);
void ckpt_layout_free(CkptLayout *L);

// The steps of the protocol without the collectives (the unit test runs ranks one after
// another): 0, or -1 with a message in err (errno kept).
// 1. rank 0: the temporary directory `tmp` (created by ckpt_temp_dir) gets the marker and
//    both files at full size with their headers.
int ckpt_shard_prepare(const CkptLayout *L, const char *tmp, int world, long step, char *err, size_t errlen);
// 2. one rank's part of file `file` (0 model, 1 optim): elements [lo, hi) of src (file 0:
//    parameters; file 1: src = m, src2 = v; indexed from lo), CRCs of its parts of the
//    regions into crc[L->nreg] (regions it has no bytes of: left as they are).
int ckpt_shard_write_part(const CkptLayout *L, const char *tmp, int file, size_t lo, size_t hi, const float *src,
                          const float *src2, uint32_t *crc, char *err, size_t errlen);
// 3. rank 0: each region's CRC from the parts of ranks 0..G-1 in order (crcs: G x nreg,
//    rank-major; bounds: G+1 shard boundaries), as the checksums of both files.
void ckpt_shard_sums(const CkptLayout *L, int G, const size_t *bounds, const uint32_t *crcs, CkptSums *sums);

// ---- the run's sharded writer (collective: every rank calls each function) ----------------
typedef struct CkptShard CkptShard;
// lo, hi: this rank's shard; G, bounds: the shard group's size and boundaries (G+1); writes:
// this rank belongs to shard group 0 (the one that writes); async: write in the background.
CkptShard *ckpt_shard_create(const char *run_dir, const ParamTable *t, int keep_last, int keep_every, int async,
                             size_t lo, size_t hi, int G, const size_t *bounds, int writes);
// Waits for the write in flight (publishing it), then this rank's snapshot buffers of
// hi - lo floats each (params, m, v) for the caller to fill; NULL where the rank does not write.
void ckpt_shard_buffers(CkptShard *s, float **p, float **m, float **v);
// Write the snapshot as checkpoint st->step (steps 1 and 2; async: 2 in the background).
void ckpt_shard_commit(CkptShard *s, const TrainState *st);
// The write in flight: with block 0 returns 0 while some rank is still writing its part,
// else publishes it (step 3) and returns 1 (1 also when nothing is in flight). Its wall
// seconds (from the commit to the publish) into *seconds when published (may be NULL).
int ckpt_shard_poll(CkptShard *s, int block, double *seconds);
const char *ckpt_shard_last_path(const CkptShard *s);   // rank 0: the last checkpoint published
void ckpt_shard_free(CkptShard *s);   // ckpt_shard_poll(s, 1) first
// The host memory of one rank's snapshot: 12 bytes per parameter of its shard.
size_t ckpt_shard_snapshot_bytes(size_t lo, size_t hi);

#endif
