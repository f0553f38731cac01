// test_loader.c: the data loader (src/data/loader.c) end to end on small token files:
// instance cutting and targets, the order (= olmo_global_order(seed + epoch)), global
// batches identical for W = 1, 2, 3 (W loaders with ranks 0..W-1 in one process, their
// shares concatenated), zero repeats/overlaps over whole epochs, resume with another W and
// with the global batch x2, fingerprint refusal, the double-sharding bug flagged within the
// first steps, mixture shares, and every bad input (forked children must exit 2).
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/blas_core.h"
#include "data/loader.h"
#include "data/pcg64.h"

#include "check.h"

static char dir[200];
enum { T = 16, VOCAB = 1 << 20 };

// Token file `name` with n tokens, token i = base + i.
static char *make_file(const char *name, uint32_t base, uint64_t n) {
    char *p = malloc(512);
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    for (uint64_t i = 0; i < n; i++) { uint32_t v = base + (uint32_t)i; fwrite(&v, 4, 1, f); }
    fclose(f);
    return p;
}

static char *fa0, *fa1, *fa2, *fb;   // source a: 3 files (one too short), source b: 1 file

// Source a: fa0 (40 instances + tail 5), fa1 (3 tokens: none), fa2 (60 instances + tail 1);
// source b: 53 instances. Natural total 153.
static LoaderConfig base_cfg(int n_sources) {
    LoaderConfig c;
    memset(&c, 0, sizeof c);
    c.n_sources = n_sources;
    snprintf(c.sources[0].name, 64, "a");
    static char *af[3];
    af[0] = fa0; af[1] = fa1; af[2] = fa2;
    c.sources[0].files = af;
    c.sources[0].n_files = 3;
    snprintf(c.sources[1].name, 64, "b");
    static char *bf[1];
    bf[0] = fb;
    c.sources[1].files = bf;
    c.sources[1].n_files = 1;
    c.seq_len = T;
    c.global_batch = 12;
    c.micro_batch = 2;
    c.vocab_size = VOCAB;
    c.seed = 34521;
    c.shuffle = 1;
    c.world_size = 1;
    c.rank = 0;
    c.prefetch = 1;
    return c;
}

// Token value -> mixed-free raw instance id (a's files first, then b), from how files are made.
static int64_t raw_of_token(uint32_t tok) {
    if (tok < 100000) return tok / T;                         // fa0: instances 0..39
    if (tok >= 200000 && tok < 300000) return 40 + (tok - 200000) / T;   // fa2: 40..99
    if (tok >= 300000) return 100 + (tok - 300000) / T;       // fb: 100..152
    return -1;
}

// Serve `steps` global batches from W loaders (ranks 0..W-1) and write the concatenated
// first tokens of each instance (identifies it) to out[steps*gb]. Checks targets.
static void run_world(LoaderConfig c, int W, int steps, const LoaderState *resume, uint32_t *out,
                      LoaderState *end_state, LoaderTotals *tot, int *alarms) {
    c.world_size = W;
    int per = c.global_batch;   // buffers for the largest block (uneven W: loader_rank_block)
    Loader *L[8];
    for (int r = 0; r < W; r++) {
        c.rank = r;
        L[r] = loader_create(&c);
        if (resume) loader_set_state(L[r], resume, 0);
    }
    int32_t *in = malloc(sizeof(int32_t) * (size_t)per * T), *tg = malloc(sizeof(int32_t) * (size_t)per * T);
    int al = 0;
    for (int s = 0; s < steps; s++)
        for (int r = 0; r < W; r++) {
            loader_next_batch(L[r], in, tg);
            int first, count;
            loader_rank_block(c.global_batch / c.micro_batch, W, r, &first, &count);
            CHECK((uint64_t)count * (uint64_t)c.micro_batch == loader_rank_instances(L[r]), "W=%d rank %d block", W, r);
            for (int k = 0; k < count * c.micro_batch; k++) {
                out[(size_t)s * c.global_batch + (size_t)first * c.micro_batch + k] = (uint32_t)in[k * T];
                for (int i = 0; i + 1 < T; i++)
                    if (tg[k * T + i] != in[k * T + i + 1] || in[k * T + i + 1] != in[k * T + i] + 1) {
                        CHECK(0, "instance tokens/targets wrong at step %d rank %d k %d pos %d", s, r, k, i);
                        break;
                    }
                CHECK(tg[k * T + T - 1] == -100, "last target not masked");
            }
            cJSON *m = cJSON_CreateObject();
            al += loader_metrics(L[r], m);
            cJSON_Delete(m);
        }
    if (end_state) loader_get_state(L[0], end_state);
    if (tot) loader_totals(L[0], tot);
    if (alarms) *alarms = al;
    for (int r = 0; r < W; r++) loader_free(L[r]);
    free(in);
    free(tg);
}

// Run fn in a child with stderr captured; returns the exit status and the text in buf.
static int in_child(void (*fn)(void *), void *arg, char *buf, size_t n) {
    int fd[2];
    if (pipe(fd)) exit(1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn(arg);
        _exit(0);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < n && (got = read(fd[0], buf + len, n - 1 - len)) > 0) len += (size_t)got;
    buf[len] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void create_and_read(void *arg) {
    LoaderConfig *c = arg;
    Loader *L = loader_create(c);
    int32_t *in = malloc(sizeof(int32_t) * (size_t)c->global_batch * T), *tg = malloc(sizeof(int32_t) * (size_t)c->global_batch * T);
    for (uint64_t s = 0; s < loader_batches_per_epoch(L); s++) loader_next_batch(L, in, tg);
    loader_free(L);
}

static void expect_bad(LoaderConfig c, const char *want, const char *what) {
    char buf[4096];
    int rc = in_child(create_and_read, &c, buf, sizeof buf);
    CHECK(rc == 2 && strstr(buf, want), "%s: rc %d, want exit 2 and '%s' in: %s", what, rc, want, buf);
}

typedef struct { LoaderConfig c; LoaderState s; int force; } SetArg;
static void set_state_child(void *arg) {
    SetArg *a = arg;
    Loader *L = loader_create(&a->c);
    loader_set_state(L, &a->s, a->force);
    loader_free(L);
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    snprintf(dir, sizeof dir, "%s/test_loader_XXXXXX", test_tmpdir());
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    fa0 = make_file("a0.npy", 0, 40 * T + 5);
    fa1 = make_file("a1.npy", 100000, 3);
    fa2 = make_file("a2.npy", 200000, 60 * T + 1);
    fb = make_file("b.npy", 300000, 53 * T);

    // 1. Instance cutting + sequential order: batch b slot k is raw instance b*gb + k.
    {
        LoaderConfig c = base_cfg(2);
        c.shuffle = 0;
        Loader *L = loader_create(&c);
        CHECK(loader_num_instances(L) == 153, "N = %" PRIu64 ", want 153", loader_num_instances(L));
        CHECK(loader_batches_per_epoch(L) == 12, "batches/epoch %" PRIu64, loader_batches_per_epoch(L));
        loader_free(L);
        uint32_t got[12 * 12];
        run_world(c, 1, 12, NULL, got, NULL, NULL, NULL);
        for (int i = 0; i < 144; i++) CHECK(raw_of_token(got[i]) == i, "sequential instance %d holds raw %" PRId64, i, raw_of_token(got[i]));
        // every instance starts at a multiple of T inside its file
        CHECK(got[40] == 200000 && got[39] == 39 * T && got[100] == 300000, "file boundaries");
    }

    // 2. Shuffled order = olmo_global_order(seed + epoch) over 2 epochs, and 3. identical
    // global batches for W = 1, 2, 3, zero repeats/overlaps/off-batch over whole epochs.
    LoaderConfig c = base_cfg(2);
    enum { STEPS = 24 };   // two epochs of 12 batches
    static uint32_t ref[STEPS * 12], got[STEPS * 12];
    {
        uint32_t perm[153];
        for (int e = 1; e <= 2; e++) {
            olmo_global_order(c.seed + (uint64_t)e, perm, 153);
            for (int i = 0; i < 144; i++) ref[(e - 1) * 144 + i] = perm[i];
        }
        for (int W = 1; W <= 5; W++) {   // 6 micro-batches: W = 4 and 5 split them unevenly
            LoaderTotals tot;
            int alarms;
            LoaderConfig cw = c;
            cw.prefetch = W != 2;   // both paths
            run_world(cw, W, STEPS, NULL, got, NULL, &tot, &alarms);
            int bad = 0;
            for (int i = 0; i < STEPS * 12; i++) bad += raw_of_token(got[i]) != (int64_t)ref[i];
            CHECK(bad == 0, "W=%d: %d instances differ from olmo_global_order(seed+epoch)", W, bad);
            CHECK(alarms == 0 && tot.repeats_total == 0 && tot.rank_overlaps == 0 && tot.off_batch == 0,
                  "W=%d clean loader: alarms %d repeats %" PRIu64 " overlaps %" PRIu64 " off %" PRIu64, W, alarms,
                  tot.repeats_total, tot.rank_overlaps, tot.off_batch);
            CHECK(tot.epoch == 2, "W=%d: the last batch served belongs to epoch %" PRIu64, W, tot.epoch);
        }
        // coverage at the end of epoch 1 = 144/153
        LoaderTotals tot;
        run_world(c, 2, 12 - 1, NULL, got, NULL, &tot, NULL);
        CHECK(fabs(tot.coverage - 132.0 / 153) < 1e-12, "coverage %g", tot.coverage);
        run_world(c, 1, 12, NULL, got, NULL, &tot, NULL);
        CHECK(tot.epoch == 1 && fabs(tot.coverage - 144.0 / 153) < 1e-12, "after epoch 1: epoch %" PRIu64 " coverage %g", tot.epoch, tot.coverage);
    }

    // 4. Resume: W=2 for 4 steps, then W=3 continues; then W=3 -> W=1 with global batch x2.
    {
        LoaderState st, st2;
        run_world(c, 2, 4, NULL, got, &st, NULL, NULL);
        CHECK(st.epoch_instances == 48 && st.tokens_processed == 48 * T && st.batches_processed == 4, "state after 4 steps");
        // JSON round trip (what train_state.json holds)
        cJSON *j = loader_state_to_json(&st);
        LoaderState back;
        CHECK(loader_state_from_json(j, &back) == 0 && !memcmp(&back, &st, sizeof st), "state JSON round trip");
        cJSON_Delete(j);
        int alarms;
        run_world(c, 3, 6, &st, got, &st2, NULL, &alarms);
        int bad = 0;
        for (int i = 0; i < 6 * 12; i++) bad += raw_of_token(got[i]) != (int64_t)ref[48 + i];
        CHECK(bad == 0 && alarms == 0, "resume W=2 -> W=3: %d instances differ, %d alarms", bad, alarms);
        // 10 batches of 12 = 120 instances in; global batch 24 (micro 2 -> 12 micro-batches)
        LoaderConfig c2 = c;
        c2.global_batch = 24;
        LoaderTotals tot;
        run_world(c2, 1, 7, &st2, got, NULL, &tot, &alarms);   // crosses into epoch 2
        bad = 0;
        for (int i = 0; i < 7 * 24; i++) bad += raw_of_token(got[i]) != (int64_t)ref[120 + i];
        CHECK(bad == 0 && alarms == 0, "resume with global batch x2: %d instances differ, %d alarms", bad, alarms);
        CHECK(tot.repeats_total == 0, "resume: repeats %" PRIu64, tot.repeats_total);
        // a position that the new batch size cannot start from: refused
        SetArg a = {c2, st, 0};
        a.s.epoch_instances = 36;
        char buf[4096];
        int rc = in_child(set_state_child, &a, buf, sizeof buf);
        CHECK(rc == 2 && strstr(buf, "multiple of the global batch"), "non-integer batch factor: rc %d %s", rc, buf);
        // 5. Fingerprint mismatch: another seq_len (and another mixture) refuses; force accepts.
        a.c = c;
        a.c.seq_len = 8;
        a.s = st;
        rc = in_child(set_state_child, &a, buf, sizeof buf);
        CHECK(rc == 2 && strstr(buf, "fingerprint"), "fingerprint mismatch: rc %d %s", rc, buf);
        a.c = base_cfg(1);   // source b dropped
        rc = in_child(set_state_child, &a, buf, sizeof buf);
        CHECK(rc == 2 && strstr(buf, "fingerprint"), "fingerprint mismatch (sources): rc %d %s", rc, buf);
        a.force = 1;
        rc = in_child(set_state_child, &a, buf, sizeof buf);
        CHECK(rc == 0 && strstr(buf, "forced"), "forced resume: rc %d %s", rc, buf);
    }

    // 6. The double-sharding bug is flagged within the first steps at W = 1, 2, 3, and
    // a bugged resume raises the resume alarm.
    for (int W = 1; W <= 3; W++) {
        LoaderConfig cb = c;
        cb.debug_double_shard = 1;
        LoaderTotals tot;
        int alarms;
        run_world(cb, W, 2, NULL, got, NULL, &tot, &alarms);
        CHECK(alarms > 0 && tot.off_batch > 0, "double shard W=%d not flagged in 2 steps (alarms %d)", W, alarms);
        run_world(cb, W, 12, NULL, got, NULL, &tot, &alarms);
        CHECK(tot.repeats_total > 0, "double shard W=%d: no repeats within an epoch", W);
        LoaderState st;
        run_world(c, W, 3, NULL, got, &st, NULL, NULL);
        run_world(cb, W, 1, &st, got, NULL, &tot, &alarms);
        CHECK(tot.resume_gaps == 1, "double shard W=%d: resume gap not flagged", W);
    }

    // 7. Mixtures. a:0.5 b:0.5 max_repeat 2: a 100 once, b 53 -> 100 (1 full copy + 47).
    {
        LoaderConfig cm = base_cfg(2);
        cm.sources[0].share = 0.5;
        cm.sources[1].share = 0.5;
        cm.sources[1].max_repeat = 2;
        Loader *L = loader_create(&cm);
        const char *name;
        uint64_t av, used;
        double share;
        loader_source_info(L, 1, &name, &av, &used, &share);
        CHECK(loader_num_instances(L) == 200 && av == 53 && used == 100 && share == 0.5, "mix 50/50: N %" PRIu64 " b used %" PRIu64,
              loader_num_instances(L), used);
        loader_free(L);
        static uint32_t mg[16 * 12];
        LoaderTotals tot;
        int alarms;
        run_world(cm, 2, 16, NULL, mg, NULL, &tot, &alarms);   // one epoch: 192 of 200
        int nb = 0, times[153] = {0};
        for (int i = 0; i < 192; i++) {
            int64_t r = raw_of_token(mg[i]);
            nb += r >= 100;
            times[r]++;
        }
        CHECK(fabs(nb / 192.0 - 0.5) < 0.06, "mix 50/50: source b share %g", nb / 192.0);
        int over = 0;
        for (int i = 0; i < 153; i++) over += times[i] > (i >= 100 ? 2 : 1);
        CHECK(over == 0, "mix: %d instances beyond their repeat cap", over);
        CHECK(alarms == 0 && tot.repeats_total == 0, "mixture repetition must not count as repeats (%d alarms)", alarms);
        // a:0.2 b:0.8, no upsampling: b is the bound (53 = 0.8 T), a downsampled to 13.
        cm.sources[0].share = 0.2;
        cm.sources[1].share = 0.8;
        cm.sources[1].max_repeat = 0;
        L = loader_create(&cm);
        loader_source_info(L, 0, &name, &av, &used, &share);
        CHECK(used == 13 && loader_num_instances(L) == 66, "mix 20/80: a used %" PRIu64 " N %" PRIu64, used, loader_num_instances(L));
        loader_free(L);
    }

    // 8. Bad input: exit 2 with a message naming the file.
    {
        char *odd = make_file("odd.npy", 0, 100);
        FILE *f = fopen(odd, "ab");
        fputc(7, f);
        fclose(f);
        LoaderConfig cb = base_cfg(2);
        cb.sources[0].files[1] = odd;
        expect_bad(cb, "odd.npy': size 401 bytes is not a multiple of 4", "size not multiple of 4");
        free(odd);
        cb = base_cfg(2);
        cb.vocab_size = 250000;   // fa2 holds 200000 + ...: fine; b (not used) not checked
        cb.sources[0].files[1] = fb;
        expect_bad(cb, "b.npy': token id 300000 at token offset 0 is >= vocab_size 250000", "id >= vocab at open");
        cb.no_open_check = 1;     // the per-instance check when read
        expect_bad(cb, "b.npy': token id 3", "id >= vocab when read");
        cb = base_cfg(2);
        cb.sources[0].files[0] = fa1;
        cb.sources[0].files[2] = fa1;
        expect_bad(cb, "data source 'a'", "source without a full instance");
        cb = base_cfg(2);
        char missing[600];
        snprintf(missing, sizeof missing, "%s/nope.npy", dir);
        cb.sources[0].files[1] = missing;
        expect_bad(cb, "nope.npy': cannot open", "missing file");
        cb = base_cfg(2);
        cb.global_batch = 10;
        cb.micro_batch = 4;
        expect_bad(cb, "multiple of train.micro_batch", "global batch not a multiple of the micro-batch");
        cb = base_cfg(2);
        cb.global_batch = 4;
        cb.world_size = 3;
        expect_bad(cb, "2 micro-batches for 3 ranks: every rank needs at least one", "ranks");
        cb = base_cfg(2);
        cb.world_size = 4;
        cb.debug_double_shard = 1;
        expect_bad(cb, "do not split evenly over 4 ranks", "double-shard bug, uneven");
        cb = base_cfg(2);
        cb.global_batch = 200;
        cb.micro_batch = 1;
        expect_bad(cb, "fewer than one global batch", "too little data");
    }

    // Throughput of the loader's own production (prefetch on): instances/s.
    {
        LoaderConfig cp = base_cfg(2);
        Loader *L = loader_create(&cp);
        int32_t *in = malloc(sizeof(int32_t) * 12 * T), *tg = malloc(sizeof(int32_t) * 12 * T);
        for (int s = 0; s < 200; s++) loader_next_batch(L, in, tg);
        cJSON *m = cJSON_CreateObject();
        loader_metrics(L, m);
        char *js = cJSON_PrintUnformatted(m);
        printf("metrics: %s\n", js);
        free(js);
        CHECK(cJSON_GetObjectItem(m, "loader_instances_per_s")->valuedouble > 0, "instances/s");
        cJSON_Delete(m);
        free(in);
        free(tg);
        loader_free(L);
    }

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    printf("test_loader: all ok\n");
    return 0;
}
