// test_checkpoint.c: unit checks under the checkpoint and ZeRO-1 code: shard bounds,
// AdamW applied shard by shard == AdamW on the whole table (bitwise), checkpoint write +
// load of a shard range (bitwise, train state exact incl. non-finite skip-step history),
// retention, a load refusing a checkpoint of another model without touching outputs, and
// the streamed write of a CUDA run (ckpt_commit_fetch: tensor by tensor from the device
// instead of a host snapshot) giving byte for byte the snapshot writer's files, with fetch
// asked for every tensor once in the documented order (checksums.txt included: a CUDA
// run's checksums come from the fetched tensors). Content checksums (ckpt_verify.h): CRC-32C
// against its check value and the bytewise reference, the fused check-and-copy against
// plain copies, checksums.txt refusing a changed byte, a flipped moment refusing a load of
// a shard that does not contain it, and a checkpoint without checksums loading the same.
// The sharded writer (ckpt_shard.h): crc32c_combine against the direct CRC, and W = 1 and 4
// ranks' parts giving the gathering writer's files byte for byte (its marker refused by
// train.resume until it is published).
// What a CKPT names (ckpt_source_resolve, io/ckpt_dir.h): both probe orders, for weights
// (eval, generate, export) and for training (train.load_path), on a fake run, checkpoint,
// import and HF directories.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/blas_core.h"
#include "dist/dist.h"
#include "model/params.h"
#include "train/checkpoint.h"
#include "train/ckpt_shard.h"
#include "io/ckpt_dir.h"
#include "io/ckpt_verify.h"
#include "train/devstate.h"
#include "train/optim.h"
#include "util/common.h"
#include "util/crc32c.h"

#include "check.h"

typedef struct {
    const float *buf[3];   // params, m, v (host stand-ins for the device buffers)
    const ParamTable *t;
    int calls, in_order;
} Src;

static void fetch(void *ctx, int which, size_t offset, size_t n, float *dst) {
    Src *s = ctx;
    const ParamInfo *want = &s->t->p[s->calls % s->t->n];
    if (which != s->calls / s->t->n || offset != want->offset || n != want->numel) s->in_order = 0;
    memcpy(dst, s->buf[which] + offset, n * sizeof(float));
    s->calls++;
}

// Checkpoint st->step of (p, m, v) written by ckpt_commit_fetch into its own run dir: the
// same three files, byte for byte, as snap_dir's snapshot write of that step.
static void check_streamed(const char *snap_dir, const ParamTable *t, const TrainState *st, const float *p,
                           const float *m, const float *v) {
    char dir[200], cmd[256];
    snprintf(dir, sizeof dir, "%s/olmo_test_checkpoint_fetch.%d", test_tmpdir(), (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    Src src = {{p, m, v}, t, 0, 1};
    CkptWriter *w = ckpt_writer_create(dir, t, 2, 0, 1);   // synchronous even though async is set
    ckpt_commit_fetch(w, st, fetch, &src);
    ckpt_writer_free(w);
    CHECK(src.calls == 3 * t->n, "fetch called %d times, want %d (every tensor of 3 buffers once)", src.calls, 3 * t->n);
    CHECK(src.in_order, "fetch order is not params, exp_avg, exp_avg_sq in table order");
    const char *files[] = {"model.safetensors", "optim.safetensors", "train_state.json", "checksums.txt"};
    for (int i = 0; i < 4; i++) {
        char c2[1400];
        snprintf(c2, sizeof c2, "cmp -s %s/checkpoints/step-%08ld/%s %s/checkpoints/step-%08ld/%s", snap_dir, st->step,
                 files[i], dir, st->step, files[i]);
        CHECK(system(c2) == 0, "%s: streamed file differs from the snapshot writer's", files[i]);
    }
    if (system(cmd)) {}
}

// The sharded writer's steps (ckpt_shard.h) run for W ranks one after another: rank 0's
// layout, each rank's part of both files from its shard only, the CRCs combined from the
// parts: the same four files, byte for byte, as snap_dir's gathering write of that step;
// and while the marker is there train.resume naming the directory is refused.
static void check_sharded(const char *snap_dir, const ParamTable *t, const TrainState *st, const float *p,
                          const float *m, const float *v, int W) {
    char dir[200], cmd[256], ck[300], tmp[4600], err[4096], out[600];
    snprintf(dir, sizeof dir, "%s/olmo_test_checkpoint_shard.%d", test_tmpdir(), (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    snprintf(ck, sizeof ck, "%s/checkpoints", dir);
    size_t b[9];
    dist_shard_bounds(t->total, W, b);
    CkptLayout L;
    ckpt_layout_init(&L, t, st);
    CHECK(ckpt_temp_dir(ck, st->step, tmp, sizeof tmp, err, sizeof err) == 0, "%s", err);
    CHECK(ckpt_shard_prepare(&L, tmp, W, st->step, err, sizeof err) == 0, "prepare: %s", err);
    uint32_t *crcs = xcalloc((size_t)W * L.nreg, sizeof(uint32_t));
    for (int r = W - 1; r >= 0; r--) {   // any order: each rank writes only its own ranges
        CHECK(ckpt_shard_write_part(&L, tmp, 0, b[r], b[r + 1], p + b[r], NULL, crcs + (size_t)r * L.nreg, err,
                                    sizeof err) == 0, "rank %d model: %s", r, err);
        CHECK(ckpt_shard_write_part(&L, tmp, 1, b[r], b[r + 1], m + b[r], v + b[r], crcs + (size_t)r * L.nreg, err,
                                    sizeof err) == 0, "rank %d optim: %s", r, err);
    }
    CHECK(ckpt_is_incomplete(tmp), "no marker in %s", tmp);
    CHECK(ckpt_resolve(dir, tmp, out, sizeof out, err, sizeof err) == -1 &&
              strstr(err, "an incomplete sharded checkpoint") && strstr(err, "holds no complete checkpoint"),
          "train.resume of an incomplete sharded checkpoint: %s", err);
    CkptSums sums;
    ckpt_shard_sums(&L, W, b, crcs, &sums);
    char last[4800];
    CHECK(ckpt_publish(ck, tmp, st, &sums, 2, 0, last, sizeof last, err, sizeof err) == 0, "publish: %s", err);
    ckpt_sums_free(&sums);
    CHECK(!ckpt_is_incomplete(last), "published %s still marked incomplete", last);
    const char *files[] = {"model.safetensors", "optim.safetensors", "train_state.json", "checksums.txt"};
    for (int i = 0; i < 4; i++) {
        char c2[6400];
        snprintf(c2, sizeof c2, "cmp -s %s/checkpoints/step-%08ld/%s %s/%s", snap_dir, st->step, files[i], last, files[i]);
        CHECK(system(c2) == 0, "%s: sharded (W=%d) file differs from the gathering writer's", files[i], W);
    }
    CHECK(ckpt_verify_dir(last, NULL, err, sizeof err) == 0, "sharded checkpoint does not verify: %s", err);
    free(crcs);
    ckpt_layout_free(&L);
    if (system(cmd)) {}
}

// XOR byte `at` of a file (at < 0: from the end) with x.
static void flip_byte(const char *path, long at, int x) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
    long pos = ftell(f);
    int c = fgetc(f);
    fseek(f, pos, SEEK_SET);
    fputc(c ^ x, f);
    fclose(f);
}

// CRC-32C: check value, hardware == bytewise at odd offsets and lengths, CRCs chain; and
// ckpt_sums_check's fused copy == memcpy for spans crossing its blocks and regions.
static void check_crc_and_spans(void) {
    CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c check value: %08x", crc32c(0, "123456789", 9));
    size_t N = (size_t)3 << 20;
    uint8_t *buf = xmalloc(N), *dst = xcalloc(N, 1), *ref = xcalloc(N, 1);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < N; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, buf[i] = (uint8_t)x;
    for (int k = 0; k < 200; k++) {
        size_t off = (size_t)(k * 7919) % 4096, len = (size_t)(k * 104729) % (k < 100 ? 5000 : 200000), cut = len / 3;
        uint32_t a = crc32c(0, buf + off, len);
        CHECK(a == crc32c_sw(0, buf + off, len), "crc32c hw != sw at offset %zu length %zu", off, len);
        CHECK(a == crc32c(crc32c(0, buf + off, cut), buf + off + cut, len - cut), "crc32c does not chain (%zu)", len);
        // the sharded writer's merge: the CRC of a||b from the CRCs of a and b (any split)
        CHECK(a == crc32c_combine(crc32c(0, buf + off, cut), crc32c(0, buf + off + cut, len - cut), len - cut),
              "crc32c_combine != the direct CRC (length %zu cut at %zu)", len, cut);
    }
    // regions of 1 MiB + 5 bytes (the last shorter), spans straddling blocks and regions
    CkptSumFile f = {"synthetic", N, 0, 0, NULL};
    CkptRegion r[3];
    f.r = r;
    for (size_t a = 0; a < N; f.n++) {
        size_t b = a + ((size_t)1 << 20) + 5 < N ? a + ((size_t)1 << 20) + 5 : N;
        r[f.n] = (CkptRegion){"t", a, b, crc32c(0, buf + a, b - a)};
        a = b;
    }
    CkptSpan sp[] = {{3, 300000, dst + 3}, {300001, 1048580, dst + 300001}, {1048581, 1048590, dst + 1048581},
                     {2000000, N, dst + 2000000}};
    char err[512];
    CHECK(ckpt_sums_check(&f, -1, "synthetic", buf, N, sp, 4, err, sizeof err) == 0, "fused check: %s", err);
    for (int i = 0; i < 4; i++) memcpy(ref + sp[i].begin, buf + sp[i].begin, sp[i].end - sp[i].begin);
    CHECK(memcmp(dst, ref, N) == 0, "fused check-and-copy differs from memcpy");
    buf[2500000] ^= 8;   // region 2 (from 2097162)
    CHECK(ckpt_sums_check(&f, -1, "synthetic", buf, N, sp, 4, err, sizeof err) != 0 &&
              strstr(err, "checksum mismatch in tensor t, bytes 2097162-3145728") != NULL, "flip not located: %s", err);
    free(buf);
    free(dst);
    free(ref);
}

static void touch(const char *dir, const char *name, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "create %s", p);
    if (f) fputs(text, f), fclose(f);
}

// resolve CKPT for use: want the status, and on success the kind and path (under root).
static void want_source(const char *root, const char *ckpt, CkptUse use, int rc, CkptSourceKind kind, const char *path) {
    char c[700], err[1024] = "";
    snprintf(c, sizeof c, "%s/%s", root, ckpt);
    CkptSource s;
    int got = ckpt_source_resolve(c, use, &s, err, sizeof err);
    CHECK(got == rc, "%s (use %d): status %d, want %d (%s)", ckpt, (int)use, got, rc, err);
    if (got != 0 || rc != 0) return;
    char w[700];
    snprintf(w, sizeof w, "%s/%s", root, path);
    CHECK(s.kind == kind && !strcmp(s.path, w), "%s (use %d): kind %d %s, want kind %d %s", ckpt, (int)use, (int)s.kind,
          s.path, (int)kind, w);
}

static void check_source_resolve(void) {
    char root[600], cmd[8192];
    snprintf(root, sizeof root, "%s/olmo_src_%d", test_tmpdir(), (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/run/checkpoints/step-00000003 %s/run/checkpoints/step-00000007 "
             "%s/imp %s/hf %s/hfshard %s/empty %s/bad/checkpoints/step-00000002", root, root, root, root, root, root, root, root);
    CHECK(system(cmd) == 0, "%s", cmd);
    char d[700];
    for (int st = 3; st <= 7; st += 4) {
        snprintf(d, sizeof d, "%s/run/checkpoints/step-%08d", root, st);
        touch(d, "train_state.json", "{}");
        touch(d, "model.safetensors", "x");
    }
    snprintf(d, sizeof d, "%s/run", root);
    touch(d, "model.safetensors", "x");
    snprintf(d, sizeof d, "%s/imp", root);
    touch(d, "model.safetensors", "x");
    snprintf(d, sizeof d, "%s/hf", root);
    touch(d, "config.json", "{\"model_type\": \"olmo3\"}");
    touch(d, "model.safetensors", "x");
    snprintf(d, sizeof d, "%s/hfshard", root);
    touch(d, "config.json", "{\"model_type\": \"olmo3\"}");
    touch(d, "model.safetensors.index.json", "{}");
    snprintf(d, sizeof d, "%s/bad/checkpoints", root);
    touch(d, "latest", "step-00000009\n");
    // Per CKPT, what it names for weights and for training: status, kind, path (status 0).
    enum { WT = CKPT_SRC_WEIGHTS, CK = CKPT_SRC_CHECKPOINT, HF = CKPT_SRC_HF };
    static const struct {
        const char *ckpt;
        int rc[2], kind[2];
        const char *path[2];
    } cases[] = {
        // a finished run: its final model for weights, its newest checkpoint for training
        {"run", {0, 0}, {WT, CK}, {"run/model.safetensors", "run/checkpoints/step-00000007"}},
        {"run/checkpoints/step-00000003", {0, 0}, {CK, CK}, {"run/checkpoints/step-00000003", "run/checkpoints/step-00000003"}},
        {"run/model.safetensors", {0, 0}, {WT, WT}, {"run/model.safetensors", "run/model.safetensors"}},
        {"imp", {0, 0}, {WT, WT}, {"imp/model.safetensors", "imp/model.safetensors"}},
        // an HF export: HF for weights, its OLMo-layout model.safetensors for training
        {"hf", {0, 0}, {HF, WT}, {"hf", "hf/model.safetensors"}},
        {"hfshard", {0, 0}, {HF, HF}, {"hfshard", "hfshard"}},
        {"empty", {CKPT_SRC_EMPTY, CKPT_SRC_EMPTY}, {0, 0}, {NULL, NULL}},
        {"nowhere", {CKPT_SRC_MISSING, CKPT_SRC_MISSING}, {0, 0}, {NULL, NULL}},
        // a `latest` naming a missing checkpoint: ckpt_resolve's message, either way
        {"bad", {-1, -1}, {0, 0}, {NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int u = 0; u < 2; u++)
            want_source(root, cases[i].ckpt, u ? CKPT_FOR_TRAINING : CKPT_FOR_WEIGHTS, cases[i].rc[u],
                        (CkptSourceKind)cases[i].kind[u], cases[i].path[u]);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "%s", cmd);
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    check_crc_and_spans();
    check_source_resolve();
    // shard bounds
    size_t b[9];
    size_t ns[] = {1, 65536, 65537, 279488, 1000000};
    for (int i = 0; i < 5; i++)
        for (int w = 1; w <= 8; w++) {
            dist_shard_bounds(ns[i], w, b);
            CHECK(b[0] == 0 && b[w] == ns[i], "bounds ends n=%zu w=%d", ns[i], w);
            for (int r = 0; r < w; r++) {
                CHECK(b[r] <= b[r + 1], "monotone");
                CHECK(b[r] % SUMSQ_CHUNK == 0 || b[r] == ns[i], "chunk aligned");
            }
        }
    // AdamW by shards == AdamW whole
    ModelConfig cfg = model_preset_find("olmo3-tiny")->cfg;
    model_config_derive(&cfg);
    ParamTable t;
    param_table_build(&t, &cfg);
    size_t n = t.total;
    float *p1 = xmalloc(4 * n), *p2 = xmalloc(4 * n), *g = xmalloc(4 * n);
    param_init(&t, p1, 5);
    memcpy(p2, p1, 4 * n);
    for (size_t i = 0; i < n; i++) g[i] = sinf((float)i) * 0.01f;
    AdamW whole;
    adamw_init(&whole, &t, 0.9, 0.95, 1e-8, 0.1, 0);
    const int W = 3;
    dist_shard_bounds(n, W, b);
    AdamW sh[3];
    for (int r = 0; r < W; r++) adamw_init_range(&sh[r], &t, b[r], b[r + 1], 0.9, 0.95, 1e-8, 0.1, 0);
    OpsBackend *cpu = ops_cpu_create(PRECISION_FP32);
    for (int s = 0; s < 3; s++) {   // the device state's AdamW over the whole table and over each shard
        DevState ds = {cpu, &t, 0, n, p1, whole.m, whole.v, g, NULL, DT_F32};
        devstate_adamw(&ds, &whole, 1e-3);
        for (int r = 0; r < W; r++) {
            DevState dr = {cpu, &t, b[r], b[r + 1], p2 + b[r], sh[r].m, sh[r].v, g + b[r], NULL, DT_F32};
            devstate_adamw(&dr, &sh[r], 1e-3);
        }
    }
    ops_destroy(cpu);
    CHECK(memcmp(p1, p2, 4 * n) == 0, "sharded AdamW differs from whole-table AdamW");
    for (int r = 0; r < W; r++)
        CHECK(memcmp(whole.m + b[r], sh[r].m, 4 * (b[r + 1] - b[r])) == 0, "shard %d m differs", r);

    // write a checkpoint (sync), load rank 1's shard
    char dir[200];
    snprintf(dir, sizeof dir, "%s/olmo_test_checkpoint.%d", test_tmpdir(), (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    CkptWriter *w = ckpt_writer_create(dir, &t, 2, 0, 1);
    TrainState st;
    memset(&st, 0, sizeof st);
    st.cfg = cfg;
    st.n_params = n;
    st.tokens = 12345;
    st.adam_step = 3;
    skipstep_init(&st.skip, 8, 6);
    st.skip.n = 3;
    st.skip.loss[0] = 1.0 / 3.0, st.skip.loss[1] = INFINITY, st.skip.loss[2] = 2.5;
    st.skip.gnorm[0] = 0.1, st.skip.gnorm[1] = NAN, st.skip.gnorm[2] = 1e-300;
    snprintf(st.sched.name, sizeof st.sched.name, "wsd");
    memset(st.loader.fingerprint, 'a', 64);
    st.recipe_yaml = "model:\n  preset: olmo3-tiny\n";
    ckpt_sha256_hex(st.recipe_yaml, strlen(st.recipe_yaml), st.recipe_sha256);
    for (long step = 1; step <= 4; step++) {
        float *P, *M, *V;
        ckpt_snapshot_buffers(w, &P, &M, &V);
        memcpy(P, p1, 4 * n);
        memcpy(M, whole.m, 4 * n);
        memcpy(V, whole.v, 4 * n);
        st.step = step;
        ckpt_commit(w, &st);
    }
    ckpt_writer_free(w);
    st.step = 4;
    check_streamed(dir, &t, &st, p1, whole.m, whole.v);
    for (int ws = 1; ws <= 4; ws += 3) check_sharded(dir, &t, &st, p1, whole.m, whole.v, ws);
    char path[512], err[4096];
    CHECK(ckpt_resolve(dir, "auto", path, sizeof path, err, sizeof err) == 1, "resolve: %s", err);
    CHECK(strstr(path, "step-00000004") != NULL, "newest is %s", path);
    snprintf(cmd, sizeof cmd, "test ! -e %s/checkpoints/step-00000002 && test -d %s/checkpoints/step-00000003", dir, dir);
    CHECK(system(cmd) == 0, "retention keep_last=2");
    float *q = xcalloc(n, 4), *m = xcalloc(b[2] - b[1] + 1, 4), *v = xcalloc(b[2] - b[1] + 1, 4);
    TrainState got;
    CHECK(ckpt_load(path, &t, &cfg, q, m, v, b[1], b[2], &got, err, sizeof err) == 0, "load: %s", err);
    CHECK(memcmp(q, p1, 4 * n) == 0, "params differ after load");
    CHECK(memcmp(m, whole.m + b[1], 4 * (b[2] - b[1])) == 0, "m shard differs");
    CHECK(memcmp(v, whole.v + b[1], 4 * (b[2] - b[1])) == 0, "v shard differs");
    CHECK(got.step == 4 && got.tokens == 12345 && got.adam_step == 3, "state scalars");
    CHECK(got.skip.n == 3 && got.skip.loss[0] == 1.0 / 3.0 && isinf(got.skip.loss[1]) && isnan(got.skip.gnorm[1]) &&
              got.skip.gnorm[2] == 1e-300, "skip history not exact");
    CHECK(!strcmp(got.recipe_yaml, st.recipe_yaml) && !strcmp(got.recipe_sha256, st.recipe_sha256), "recipe");
    ckpt_state_free(&got);
    // A flipped exp_avg byte in rank 0's part refuses rank 1's load too (every rank checks
    // every byte: one verdict), naming the file and the tensor; restored, it loads again.
    char op[700], sp[700];
    snprintf(op, sizeof op, "%s/optim.safetensors", path);
    StFile sf;
    CHECK(st_open(&sf, op, err, sizeof err) == 0, "%s", err);
    long at = (long)(sf.data - (const uint8_t *)sf.map) + 100;
    st_close(&sf);
    flip_byte(op, at, 0x40);
    CHECK(ckpt_load(path, &t, &cfg, q, m, v, b[1], b[2], &got, err, sizeof err) != 0, "flipped moment accepted");
    CHECK(strstr(err, "optim.safetensors: checksum mismatch in tensor model.embed_tokens.weight.exp_avg, bytes ") != NULL,
          "message: %s", err);
    CHECK(strstr(err, "newest earlier checkpoint that verifies is ") && strstr(err, "step-00000003"), "no earlier named: %s", err);
    flip_byte(op, at, 0x40);
    // checksums.txt itself changed: refused as such
    snprintf(sp, sizeof sp, "%s/checksums.txt", path);
    flip_byte(sp, 60, 0x01);
    CHECK(ckpt_load(path, &t, &cfg, q, m, v, b[1], b[2], &got, err, sizeof err) != 0 && strstr(err, "checksums.txt is corrupt"),
          "changed checksums.txt: %s", err);
    // without checksums.txt (a checkpoint from before them): loads, the same values
    CHECK(unlink(sp) == 0, "rm checksums.txt");
    memset(q, 0, 4 * n);
    CHECK(ckpt_load(path, &t, &cfg, q, m, v, b[1], b[2], &got, err, sizeof err) == 0, "load without checksums: %s", err);
    CHECK(memcmp(q, p1, 4 * n) == 0 && memcmp(v, whole.v + b[1], 4 * (b[2] - b[1])) == 0, "unchecked load differs");
    ckpt_state_free(&got);
    // another model: refused, outputs untouched
    ModelConfig c2 = cfg;
    c2.mlp_hidden = 96;
    ParamTable t2;
    param_table_build(&t2, &c2);
    float *q2 = xcalloc(t2.total, 4);
    CHECK(ckpt_load(path, &t2, &c2, q2, q2, q2, 0, t2.total, &got, err, sizeof err) != 0, "other model accepted");
    CHECK(strstr(err, "mlp_hidden 128 in the checkpoint, 96 in the recipe") != NULL, "message: %s", err);
    int zero = 1;
    for (size_t i = 0; i < t2.total; i++) zero &= q2[i] == 0;
    CHECK(zero, "outputs touched by a refused load");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    printf("%s\n", failures ? "test_checkpoint: FAILED" : "test_checkpoint: ok");
    return failures != 0;
}
