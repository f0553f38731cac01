// ckpt_save.c: the run's checkpoints (run.h): every ckpt.interval steps and at the end,
// the state a resume needs (weights, Adam moments, counters, skip-step history, loader
// position, schedule, the resolved recipe), and a "checkpoint" record of what it cost the
// loop. Three writers:
// - world > 1: sharded (src/train/ckpt_shard.h): each rank snapshots its own shard
//   (backend_snapshot_range: host memory, or a device-to-host copy) and writes its byte
//   ranges of the same files; published at a later step boundary (ckpt_save_poll);
// - one rank, the state on the host or ckpt.async with the state on a device: the host
//   snapshot, written by the gathering writer (src/train/checkpoint.h), in the background
//   with ckpt.async;
// - one device, ckpt.async off: streamed from the device tensor by tensor (no host snapshot;
//   backend_save_checkpoint).
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "dist/dist.h"
#include "model/limits.h"
#include "train/run.h"
#include "util/common.h"

static void fill_state(const Run *u, long step, double lr, TrainState *st) {
    memset(st, 0, sizeof *st);
    st->step = step;
    st->tokens = u->tokens;
    st->skipped_total = u->skipped_total;
    st->adam_step = u->tc.opt.step;
    st->world_size = u->W;
    st->global_batch = u->r->global_batch;
    st->micro_batch = u->r->micro_batch;
    st->seq_len = u->r->seq_len;
    loader_get_state(u->loader, &st->loader);
    st->skip = u->tc.skip;
    st->sched = u->tc.sched;
    st->lr = lr;
    st->cfg = u->m.cfg;
    st->n_params = u->m.table.total;
    snprintf(st->recipe_sha256, sizeof st->recipe_sha256, "%s", u->yaml_sha);
    st->recipe_yaml = (char *)u->yaml;
}

// [lo, hi) of the weights, m and v into the snapshot buffers (this rank's own state).
static void snapshot(Run *u, size_t lo, size_t hi, float *P, float *M, float *V) {
    backend_snapshot_range(u->be, &u->tc, 0, lo, hi, P);
    backend_snapshot_range(u->be, &u->tc, 1, lo, hi, M);
    backend_snapshot_range(u->be, &u->tc, 2, lo, hi, V);
}

// One device with ckpt.async: the snapshot takes 12 B/param of host RAM beside the host
// Model's 4 B/param. Where the machine has less than that (model_memory_limit: physical
// memory, or OLMO_MEM_LIMIT), the device stream's one tensor-sized buffer instead (said once).
static int device_snapshot_fits(const Run *u) {
    static int said;
    const double need = 16.0 * (double)u->m.table.total, have = model_memory_limit();
    if (need <= 0.9 * have) return 1;
    if (!said++ && u->rank == 0)
        warnf("ckpt.async: the host snapshot of the device state and the host weights need %.3g GiB, this machine has "
              "%.3g GiB: checkpoints stream from the device synchronously instead", need / 1073741824.0,
              have / 1073741824.0);
    return 0;
}

// Collective: every rank calls it.
void save_checkpoint(Run *u, long step, double lr) {
    double t0 = now_seconds();
    TrainState st;
    fill_state(u, step, lr, &st);
    const int stream = backend_streams_checkpoint(u->be);
    const int background = u->r->ckpt_async && (!stream || u->sw || device_snapshot_fits(u));
    if (u->sw) {
        float *P, *M, *V;
        ckpt_shard_buffers(u->sw, &P, &M, &V);   // publishes the previous write first
        if (P) {   // shard group 0 writes; the other groups hold copies of the same shards
            size_t lo, hi;
            train_core_range(&u->tc, &lo, &hi);
            snapshot(u, lo, hi, P, M, V);
        }
        ckpt_shard_commit(u->sw, &st);
    } else if (stream && !background) {
        backend_save_checkpoint(u->be, &u->tc, u->w, &st);
    } else {
        float *P = NULL, *M = NULL, *V = NULL;
        ckpt_snapshot_buffers(u->w, &P, &M, &V);   // waits for the previous write
        if (stream) {   // one device: its whole state to host memory, the write in the background
            snapshot(u, 0, u->m.table.total, P, M, V);
        } else {
            backend_sync_to_host(u->be, &u->tc, 1);   // cpu: no-op but for dist.shard: full at W = 1
            memcpy(P, u->m.params, sizeof(float) * u->m.table.total);
            dist_gather_shards(u->tc.opt.m, M, u->tc.bounds);
            dist_gather_shards(u->tc.opt.v, V, u->tc.bounds);
        }
        ckpt_commit(u->w, &st);
    }
    if (u->rank != 0) return;
    // What the checkpoint cost the loop: waiting for the previous write, the snapshot (and
    // rank 0's part of the files when sync), or the whole write (sync).
    double blocking = now_seconds() - t0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "checkpoint");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "blocking_s", blocking);
    cJSON_AddBoolToObject(o, "async", background);
    cJSON_AddBoolToObject(o, "sharded", u->sw != NULL);
    metrics_write(&u->log, o);
    cJSON_Delete(o);
    printf("checkpoint: step %ld -> %s/checkpoints/step-%08ld (loop blocked %.3fs%s%s)\n", step, u->r->run_dir, step,
           blocking, u->sw ? ", each rank its part" : "", background ? ", writing in the background" : "");
    fflush(stdout);
}

void ckpt_save_poll(Run *u, int block) {
    double sec = -1;
    if (u->sw) ckpt_shard_poll(u->sw, block, &sec);
    else if (block && u->rank == 0) sec = ckpt_wait(u->w);
    if (u->rank == 0 && sec > 0)
        printf("checkpoint: %s complete (%s %.2fs)\n", u->sw ? ckpt_shard_last_path(u->sw) : ckpt_last_path(u->w),
               u->sw ? "published; the ranks' parts took" : "last write", sec);
}
