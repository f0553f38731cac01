// test_cuda_ckpt.c: the checkpoint stream of the CUDA backend, without a GPU. A CUDA run
// writes its checkpoints through ckpt_commit_fetch (tensor by tensor from the device,
// src/train/backend.c) instead of a host snapshot; this checks that the stream writes
// byte for byte the files the snapshot writer writes (so CPU <-> GPU resume keeps working),
// that fetch is asked for every tensor once in the documented order, and that the
// result loads back.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/params.h"
#include "train/checkpoint.h"
#include "util/common.h"

#include "check.h"

typedef struct {
    const float *buf[3];   // params, m, v (host stand-ins for the device buffers)
    const ParamTable *t;
    int calls;
    int in_order;
} Src;

static void fetch(void *ctx, int which, size_t offset, size_t n, float *dst) {
    Src *s = ctx;
    const ParamInfo *want = &s->t->p[s->calls % s->t->n];
    if (which != s->calls / s->t->n || offset != want->offset || n != want->numel) s->in_order = 0;
    memcpy(dst, s->buf[which] + offset, n * sizeof(float));
    s->calls++;
}

static int same_file(const char *a, const char *b) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "cmp -s %.600s %.600s", a, b);
    return system(cmd) == 0;
}

int main(void) {
    ModelConfig cfg = model_preset_find("olmo3-tiny")->cfg;
    model_config_derive(&cfg);
    ParamTable t;
    param_table_build(&t, &cfg);
    const size_t n = t.total;
    float *p = xmalloc(4 * n), *m = xmalloc(4 * n), *v = xmalloc(4 * n);
    param_init(&t, p, 7);
    for (size_t i = 0; i < n; i++) {
        m[i] = 1e-3f * (float)(i % 977) - 0.4f;
        v[i] = 1e-6f * (float)(i % 389);
    }
    TrainState st;
    memset(&st, 0, sizeof st);
    st.cfg = cfg;
    st.n_params = n;
    st.step = 7;
    st.tokens = 4242;
    st.adam_step = 6;
    skipstep_init(&st.skip, 8, 6);
    snprintf(st.sched.name, sizeof st.sched.name, "cosine");
    memset(st.loader.fingerprint, 'b', 64);
    st.recipe_yaml = "model:\n  preset: olmo3-tiny\n";
    ckpt_sha256_hex(st.recipe_yaml, strlen(st.recipe_yaml), st.recipe_sha256);

    char a[128], b[128], cmd[400];
    snprintf(a, sizeof a, "/tmp/olmo_test_cuda_ckpt_snap.%d", (int)getpid());
    snprintf(b, sizeof b, "/tmp/olmo_test_cuda_ckpt_fetch.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", a, b);
    if (system(cmd)) {}

    CkptWriter *w = ckpt_writer_create(a, &t, 2, 0, 1);   // the CPU's way: snapshot, async write
    float *P, *M, *V;
    ckpt_snapshot_buffers(w, &P, &M, &V);
    memcpy(P, p, 4 * n);
    memcpy(M, m, 4 * n);
    memcpy(V, v, 4 * n);
    ckpt_commit(w, &st);
    ckpt_writer_free(w);

    Src src = {{p, m, v}, &t, 0, 1};
    w = ckpt_writer_create(b, &t, 2, 0, 1);   // the stream: synchronous even if async is set
    ckpt_commit_fetch(w, &st, fetch, &src);
    CHECK(src.calls == 3 * t.n, "fetch called %d times, want %d (every tensor of 3 buffers once)", src.calls, 3 * t.n);
    CHECK(src.in_order, "fetch order is not params, exp_avg, exp_avg_sq in table order");
    CHECK(strstr(ckpt_last_path(w), "step-00000007") != NULL, "last path %s", ckpt_last_path(w));
    ckpt_writer_free(w);

    const char *files[] = {"model.safetensors", "optim.safetensors", "train_state.json"};
    for (int i = 0; i < 3; i++) {
        char fa[600], fb[600];
        snprintf(fa, sizeof fa, "%s/checkpoints/step-00000007/%s", a, files[i]);
        snprintf(fb, sizeof fb, "%s/checkpoints/step-00000007/%s", b, files[i]);
        CHECK(same_file(fa, fb), "%s: streamed file differs from the snapshot writer's", files[i]);
    }

    char path[512], err[4096];
    CHECK(ckpt_resolve(b, "auto", path, sizeof path, err, sizeof err) == 1, "resolve: %s", err);
    float *q = xcalloc(n, 4), *qm = xcalloc(n, 4), *qv = xcalloc(n, 4);
    TrainState got;
    CHECK(ckpt_load(path, &t, &cfg, q, qm, qv, 0, n, &got, err, sizeof err) == 0, "load: %s", err);
    CHECK(!memcmp(q, p, 4 * n) && !memcmp(qm, m, 4 * n) && !memcmp(qv, v, 4 * n), "loaded state differs");
    CHECK(got.step == 7 && got.adam_step == 6, "state step %ld adam %ld", got.step, got.adam_step);
    ckpt_state_free(&got);

    if (system(cmd)) {}
    free(p), free(m), free(v), free(q), free(qm), free(qv);
    param_table_free(&t);
    if (failures) return 1;
    printf("test_cuda_ckpt: streamed checkpoint == snapshot checkpoint (model, optim, train_state), fetch order ok\n");
    return 0;
}
