// ckpt_save.c: the run's checkpoints (run.h): every ckpt.interval steps and at the end,
// the state a resume needs (weights, the gathered Adam shards, counters, skip-step history,
// loader position, schedule, the resolved recipe) through the checkpoint writer
// (src/train/checkpoint.h), and a "checkpoint" record of what it cost the loop.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "dist/dist.h"
#include "train/run.h"
#include "util/common.h"

// Snapshot (params + gathered Adam shards) to host memory on rank 0, then write there
// in the background. Collective: every rank calls it. A CUDA backend that holds the state
// on the device streams it to rank 0's files tensor by tensor instead (synchronous, no
// host snapshot; backend_save_checkpoint).
void save_checkpoint(Run *u, long step, double lr) {
    double t0 = now_seconds();
    float *P = NULL, *M = NULL, *V = NULL;
    const int stream = backend_streams_checkpoint(u->be);
    if (!stream) {
        backend_sync_to_host(u->be, &u->tc, 1);   // cpu and the host-MPI fallback: no-op (host is authoritative)
        if (u->rank == 0) {
            ckpt_snapshot_buffers(u->w, &P, &M, &V);   // waits for the previous write
            memcpy(P, u->m.params, sizeof(float) * u->m.table.total);
        }
        dist_gather_shards(u->tc.opt.m, M, u->tc.bounds);
        dist_gather_shards(u->tc.opt.v, V, u->tc.bounds);
        if (u->rank != 0) return;
    }
    TrainState st;
    memset(&st, 0, sizeof st);
    st.step = step;
    st.tokens = u->tokens;
    st.skipped_total = u->skipped_total;
    st.adam_step = u->tc.opt.step;
    st.world_size = u->W;
    st.global_batch = u->r->global_batch;
    st.micro_batch = u->r->micro_batch;
    st.seq_len = u->r->seq_len;
    loader_get_state(u->loader, &st.loader);
    st.skip = u->tc.skip;
    st.sched = u->tc.sched;
    st.lr = lr;
    st.cfg = u->m.cfg;
    st.n_params = u->m.table.total;
    snprintf(st.recipe_sha256, sizeof st.recipe_sha256, "%s", u->yaml_sha);
    st.recipe_yaml = (char *)u->yaml;
    if (stream) {
        backend_save_checkpoint(u->be, &u->tc, u->w, &st);
        if (u->rank != 0) return;
    } else {
        ckpt_commit(u->w, &st);
    }
    const int background = u->r->ckpt_async && !stream;
    // What the checkpoint cost the loop: waiting for the previous write, the snapshot and
    // the shard gathers (async), or the whole write (sync).
    double blocking = now_seconds() - t0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "checkpoint");
    cJSON_AddNumberToObject(o, "step", (double)step);
    cJSON_AddNumberToObject(o, "blocking_s", blocking);
    cJSON_AddBoolToObject(o, "async", background);
    metrics_write(&u->log, o);
    cJSON_Delete(o);
    printf("checkpoint: step %ld -> %s/checkpoints/step-%08ld (loop blocked %.3fs%s)\n", step, u->r->run_dir, step,
           blocking, background ? ", writing in the background" : "");
    fflush(stdout);
}
