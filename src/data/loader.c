// loader.c: the data loader (see loader.h and docs/loader.md).
//
// Layers, bottom up:
//   files    raw little-endian uint32 token arrays, mmap'd; file f holds
//            floor(tokens / seq_len) instances ("raw" instances, numbered over all files
//            of all sources in recipe order).
//   packing  (data.packing: packed) the raw instances are OLMo-core's packed instances
//            instead (packing.h), numbered in group order; a natural mixture only.
//   mixture  the list of raw instances one epoch draws from (mixed[] below), built once
//            from the sources' token shares; without a mixture it is the identity.
//   order    epoch e: perm = PCG64(seed + e).shuffle(arange(N)) over mixed positions,
//            truncated to whole global batches; global batch b = perm[b*gb .. (b+1)*gb).
//   ranks    rank r of W takes positions r*gb/W .. (r+1)*gb/W - 1 of the global batch
//            (a contiguous block of micro-batches), so batches do not depend on W.
//   prefetch a background thread produces batch k+1 (ids + tokens) while the trainer
//            consumes batch k.
//   account  every step the loader recomputes what *every* rank gets (cheap: only
//            ids) and checks: each instance belongs to this step's global batch, no two
//            ranks share an instance, no instance is served twice in an epoch, the first
//            step after a resume starts where the saved state said. Failures are alarms.
#include "data/loader.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "data/pcg64.h"
#include "util/common.h"

// Token files bigger than this in total are not scanned for ids >= vocab at open (the
// per-instance check when an instance is read still catches them).
#define OPEN_CHECK_MAX_BYTES ((uint64_t)1 << 30)
// Alarm warning lines printed before going quiet (the counts keep going).
#define MAX_ALARM_LINES 20

typedef struct {
    const char *path;        // points into cfg copy
    const uint32_t *tok;     // mmap'd tokens (NULL when the file is empty)
    size_t map_len;
    uint64_t n_tokens, n_inst;
    uint64_t first;          // raw id of its first instance
    int src;
} TokFile;

// One produced batch: the ids every rank gets (for accounting) and this rank's tokens.
typedef struct {
    uint64_t epoch, pos;     // which batch: epoch and its first position in the order
    uint64_t start_pos;      // lowest order position actually served (resume check)
    uint32_t *all_ids;       // gb mixed ids: rank 0's block, rank 1's, ...
    uint32_t *expected;      // the global batch by the specification: perm[pos..pos+gb)
    int32_t *inputs, *targets;
} Batch;

struct Loader {
    LoaderConfig cfg;        // deep copy (file lists owned)
    int n_files;
    TokFile *files;
    uint64_t n_raw;
    uint64_t src_avail[LOADER_MAX_SOURCES], src_used[LOADER_MAX_SOURCES];
    Packing *pack;           // packed instances (NULL: FSL)
    PackFile *pfiles;        // the files as the packing reads them (recipe order)
    uint64_t *pack_src;      // packed: instances per source (attributed to their first document's file)
    uint32_t *mixed;         // mixed position -> raw id; NULL = identity
    uint64_t N, gb, nb;      // instances/epoch, global batch, batches/epoch
    uint64_t *blk;           // world + 1: rank q holds positions [blk[q], blk[q+1]) of a global batch
    uint64_t per_rank;       // this rank's instances per batch: blk[rank+1] - blk[rank]
    char fingerprint[65];

    // stream state (main thread)
    uint64_t seed, epoch, pos, batches_processed, tokens_processed;

    // the epoch order; owned by whoever runs produce() (never both at once)
    uint32_t *perm;
    uint64_t perm_epoch;     // 0 = none (epochs start at 1)

    // accounting (main thread)
    uint8_t *served;         // per mixed id: times served this epoch (saturating)
    uint64_t served_epoch, distinct, repeats_epoch, repeats_total;
    uint64_t overlaps_total, offbatch_total, resume_gaps, alarms_pending, alarm_lines;
    char alarm_msg[512];
    int resume_check;
    uint64_t resume_epoch, resume_pos;
    uint64_t *sortbuf;       // 2*gb scratch
    double last_pad_frac;    // packed: padding share of the last global batch served

    // prefetch
    Batch slot;
    int slot_valid;
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int req, busy, stop;     // a request is pending / being served; shutting down
    double prod_seconds;     // time spent producing batches (either thread)
    uint64_t prod_instances;
};

// ---------------------------------------------------------------------------------------
// Small helpers

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// Seed of source s's private instance order (mixture subsets); independent of the epoch.
static uint64_t mix_seed(uint64_t seed, int s) { return splitmix64(seed ^ splitmix64(0x6d6978ull + (uint64_t)s)); }

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

// ---------------------------------------------------------------------------------------
// Files and instances

static void open_file(TokFile *f, int vocab, int *full_check) {
    int fd = open(f->path, O_RDONLY);
    if (fd < 0) die_input("token file '%s': cannot open (%s)", f->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) die_input("token file '%s': not a regular file", f->path);
    if (st.st_size % 4)
        die_input("token file '%s': size %lld bytes is not a multiple of 4 (expected raw uint32 tokens)",
                  f->path, (long long)st.st_size);
    f->n_tokens = (uint64_t)st.st_size / 4;
    f->map_len = (size_t)st.st_size;
    f->tok = NULL;
    if (f->map_len) {
        void *p = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) die_input("token file '%s': mmap failed (%s)", f->path, strerror(errno));
        f->tok = p;
    }
    close(fd);
    if (*full_check && f->tok) {
        // One pass for the max, a second only to locate a bad id (error path).
        uint32_t mx = 0;
        for (uint64_t i = 0; i < f->n_tokens; i++) mx = f->tok[i] > mx ? f->tok[i] : mx;
        if (mx >= (uint32_t)vocab)
            for (uint64_t i = 0; i < f->n_tokens; i++)
                if (f->tok[i] >= (uint32_t)vocab)
                    die_input("token file '%s': token id %u at token offset %" PRIu64 " is >= vocab_size %d",
                              f->path, f->tok[i], i, vocab);
    }
}

// A token file truncated (or its storage lost) while mapped: touching a page past the new
// end raises SIGBUS. The handler names the file and exits 1 with a clear message instead of
// a bare "Bus error" (checkpoints already written are complete; see docs/robustness.md).
// Faults outside the loaders' maps get the default action. Loaders register themselves.
#define MAX_LIVE_LOADERS 16
static Loader *volatile live_loaders[MAX_LIVE_LOADERS];

static void sigbus_write(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const char *a = si ? (const char *)si->si_addr : NULL;
    for (int k = 0; k < MAX_LIVE_LOADERS; k++) {
        Loader *L = live_loaders[k];
        if (!L) continue;
        for (int i = 0; i < L->n_files; i++) {
            const char *b = (const char *)L->files[i].tok;
            if (b && a >= b && a < b + L->files[i].map_len) {
                sigbus_write("olmo: error: token file '");
                sigbus_write(L->files[i].path);
                sigbus_write("' can no longer be read (truncated or its storage failed while the run was using "
                             "it: SIGBUS); the checkpoints written so far are complete: restore the file and "
                             "rerun to resume\n");
                _exit(1);
            }
        }
    }
    signal(sig, SIG_DFL);   // not ours: the default action when the access repeats
}

static void sigbus_register(Loader *L, int on) {
    static int installed;
    for (int k = 0; k < MAX_LIVE_LOADERS; k++)
        if (on ? live_loaders[k] == NULL : live_loaders[k] == L) {
            live_loaders[k] = on ? L : NULL;
            break;
        }
    if (on && !installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
        installed = 1;
    }
}

// File holding raw instance id (binary search over first[]).
static const TokFile *file_of(const Loader *L, uint64_t raw) {
    int lo = 0, hi = L->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (L->files[mid].first <= raw) lo = mid; else hi = mid - 1;
    }
    // skip files with no instances that share `first` with the next one
    while (lo < L->n_files - 1 && L->files[lo].n_inst == 0) lo++;
    return &L->files[lo];
}

void loader_instance_where(const Loader *L, uint32_t id, const char **path, uint64_t *token_offset) {
    uint64_t raw = L->mixed ? L->mixed[id] : id;
    if (L->pack) {   // where its first (longest) document lies
        const PackDoc *d = &L->pack->docs[L->pack->inst_first[raw]];
        *path = L->files[d->file].path;
        *token_offset = d->offset;
        return;
    }
    const TokFile *f = file_of(L, raw);
    *path = f->path;
    *token_offset = (raw - f->first) * (uint64_t)L->cfg.seq_len;
}

// Packed instance `raw`: its padded ids; the target of a position whose next token is
// padding is masked (OLMo-core's label_mask, shifted as get_labels shifts the labels).
static void read_packed(const Loader *L, uint64_t raw, int32_t *in, int32_t *tg) {
    const uint64_t T = (uint64_t)L->cfg.seq_len;
    int n_pad = packing_read(L->pack, L->pfiles, raw, (uint32_t *)in);
    uint64_t real = T - (uint64_t)n_pad;
    uint32_t V = (uint32_t)L->cfg.vocab_size;
    for (uint64_t i = 0; i < real; i++)
        if ((uint32_t)in[i] >= V) {
            const PackDoc *d = &L->pack->docs[L->pack->inst_first[raw]];
            die_input("token file '%s': packed instance %" PRIu64 " holds token id %u >= vocab_size %u (its first "
                      "document at token offset %" PRIu64 ")", L->files[d->file].path, raw, (uint32_t)in[i], V, d->offset);
        }
    for (uint64_t i = 0; i + 1 < T; i++) tg[i] = i + 1 < real ? in[i + 1] : -100;
    tg[T - 1] = -100;
    if (L->cfg.instance_filter && repetition_filtered(in, (int)T, &L->cfg.filter))
        for (uint64_t i = 0; i < T; i++) tg[i] = LOADER_TARGET_FILTERED;
}

// Copy instance `mixed_id` into inputs/targets rows; ids checked against the vocab.
static void read_instance(const Loader *L, uint32_t mixed_id, int32_t *in, int32_t *tg) {
    uint64_t raw = L->mixed ? L->mixed[mixed_id] : mixed_id;
    if (L->pack) {
        read_packed(L, raw, in, tg);
        return;
    }
    const TokFile *f = file_of(L, raw);
    uint64_t T = (uint64_t)L->cfg.seq_len, off = (raw - f->first) * T;
    if (!f->tok) die("loader: '%s' was not opened (fake sizes): its instances cannot be read", f->path);
    const uint32_t *t = f->tok + off;
    uint32_t V = (uint32_t)L->cfg.vocab_size;
    for (uint64_t i = 0; i < T; i++) {
        if (t[i] >= V)
            die_input("token file '%s': token id %u at token offset %" PRIu64 " is >= vocab_size %u",
                      f->path, t[i], off + i, V);
        in[i] = (int32_t)t[i];
    }
    for (uint64_t i = 0; i + 1 < T; i++) tg[i] = in[i + 1];
    tg[T - 1] = -100;   // no next token inside the instance
    if (L->cfg.instance_filter && repetition_filtered(in, (int)T, &L->cfg.filter))
        for (uint64_t i = 0; i < T; i++) tg[i] = LOADER_TARGET_FILTERED;
}

// ---------------------------------------------------------------------------------------
// Mixture: which raw instances one epoch draws from (docs/loader.md, "Mixtures").

static void build_mixture(Loader *L) {
    LoaderConfig *c = &L->cfg;
    int S = c->n_sources, any_share = 0;
    double sum = 0;
    for (int s = 0; s < S; s++)
        if (c->sources[s].share > 0) { any_share = 1; sum += c->sources[s].share; }
    uint64_t first_raw[LOADER_MAX_SOURCES];
    uint64_t acc = 0;
    for (int s = 0, fi = 0; s < S; s++) {
        first_raw[s] = acc;
        L->src_avail[s] = 0;
        for (int k = 0; k < c->sources[s].n_files; k++, fi++) L->src_avail[s] += L->files[fi].n_inst;
        if (L->pack) L->src_avail[s] = L->pack_src[s];
        acc += L->src_avail[s];
    }
    if (L->pack && any_share)   // a group mixes sources' files: a share of one has no instances of its own
        die_input("data.mix: shares (source:share) need data.packing: fsl; packed instances mix the files of "
                  "data.source_group_size files, so a source has no instances of its own");
    if (!any_share) {   // natural: every instance once, identity order
        for (int s = 0; s < S; s++) L->src_used[s] = L->src_avail[s];
        L->mixed = NULL;
        L->N = L->n_raw;
        return;
    }
    if (fabs(sum - 1.0) > 1e-6)
        warnf("data.mix: shares sum to %g, not 1; normalized (each share divided by %g)", sum, sum);
    // The largest total T at which no source exceeds its cap: T = min_s A_s*cap_s / p_s.
    double T = INFINITY;
    for (int s = 0; s < S; s++) {
        LoaderSource *src = &c->sources[s];
        if (src->share <= 0) {
            warnf("data.sources: source '%s' has no share in data.mix; not used", src->name);
            continue;
        }
        src->share /= sum;
        if (src->max_repeat <= 0) src->max_repeat = 1;
        double t = floor((double)L->src_avail[s] * src->max_repeat) / src->share;
        if (t < T) T = t;
    }
    uint64_t total = 0;
    for (int s = 0; s < S; s++) {
        LoaderSource *src = &c->sources[s];
        if (src->share <= 0) { L->src_used[s] = 0; continue; }
        double cap = floor((double)L->src_avail[s] * src->max_repeat + 1e-9);
        double want = floor(src->share * T + 0.5);
        L->src_used[s] = (uint64_t)(want < cap ? want : cap);
        total += L->src_used[s];
    }
    if (total == 0) die_input("data.mix: the mixture selects no instance");
    if (total >= (1ull << 32)) die_input("data.mix: %" PRIu64 " instances; at most 2^32-1 are supported", total);
    L->mixed = xmalloc(total * sizeof(uint32_t));
    uint64_t n = 0;
    for (int s = 0; s < S; s++) {
        uint64_t A = L->src_avail[s], used = L->src_used[s];
        if (!used) continue;
        // Whole copies of the source in file order, then a remainder taken from the
        // front of the source's own seeded order (a deterministic random subset).
        for (uint64_t k = 0; k < used / A; k++)
            for (uint64_t i = 0; i < A; i++) L->mixed[n++] = (uint32_t)(first_raw[s] + i);
        uint64_t rem = used % A;
        if (rem) {
            uint32_t *ord = xmalloc(A * sizeof(uint32_t));
            olmo_global_order(mix_seed(c->seed, s), ord, A);
            for (uint64_t i = 0; i < rem; i++) L->mixed[n++] = (uint32_t)(first_raw[s] + ord[i]);
            free(ord);
        }
    }
    L->N = n;
}

static const char *c_strategy(const PackConfig *p) { return p->fragment ? "fragment" : "truncate"; }

static void compute_fingerprint(Loader *L) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("out of memory (fingerprint)");
    fprintf(f, "olmo-loader-v1\nseq_len=%d\n", L->cfg.seq_len);
    for (int s = 0, fi = 0; s < L->cfg.n_sources; s++) {
        const LoaderSource *src = &L->cfg.sources[s];
        fprintf(f, "source=%s share=%.17g max_repeat=%.17g used=%" PRIu64 "\n", src->name,
                src->share, src->max_repeat, L->src_used[s]);
        for (int k = 0; k < src->n_files; k++, fi++)
            fprintf(f, "file=%s bytes=%" PRIu64 "\n", base_name(L->files[fi].path), L->files[fi].n_tokens * 4);
    }
    if (L->pack)   // FSL's fingerprint stays what it was
        fprintf(f, "packing=packed long_doc_strategy=%s group_size=%d permute=%d seed=%" PRIu64 " pad=%u eos=%u\n",
                c_strategy(&L->cfg.pack), L->cfg.pack.group_size, L->cfg.pack.permute, L->cfg.pack.perm_seed,
                L->cfg.pack.pad_id, L->cfg.pack.eos_id);
    fprintf(f, "N=%" PRIu64 "\n", L->N);
    fclose(f);
    unsigned char h[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)buf, len, h);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(L->fingerprint + 2 * i, 3, "%02x", h[i]);
    free(buf);
}

// ---------------------------------------------------------------------------------------
// Producing a batch

void loader_rank_block(int micro_batches, int world, int rank, int *first, int *count) {
    const int base = micro_batches / world, extra = micro_batches % world;
    *count = base + (rank < extra);
    *first = rank * base + (rank < extra ? rank : extra);
}

uint64_t loader_rank_instances(const Loader *l) { return l->per_rank; }

static void ensure_perm(Loader *L, uint64_t epoch) {
    if (L->perm_epoch == epoch) return;
    if (L->cfg.shuffle) olmo_global_order(L->seed + epoch, L->perm, L->N);
    else for (uint64_t i = 0; i < L->N; i++) L->perm[i] = (uint32_t)i;
    L->perm_epoch = epoch;
}

// Order position of rank q's k-th instance of the global batch starting at `pos`.
static uint64_t rank_position(const Loader *L, uint64_t pos, int q, uint64_t k) {
    if (!L->cfg.debug_double_shard) return pos + L->blk[q] + k;
    // The bug (docs/olmo3.md s.7): a sampler gives rank q the stream P_q = order[q::W], and
    // the data loader shards that again, taking P_q[q::S]. S = W, except that at W = 1
    // a second "shard" still skips (the loader and the sampler each advance the cursor
    // once per item), S = 2. The rank's j-th item of the epoch is order[q + W*(q + S*j)];
    // the sampler cycles, so positions wrap at the end of the epoch's order.
    uint64_t W = (uint64_t)L->cfg.world_size, S = W < 2 ? 2 : W;
    uint64_t j = pos / W + k;   // items this rank took before: batch index * per_rank + k
    return ((uint64_t)q + W * ((uint64_t)q + S * j)) % (L->nb * L->gb);
}

static void produce(Loader *L, uint64_t epoch, uint64_t pos, Batch *b) {
    double t0 = now_seconds();
    ensure_perm(L, epoch);
    int W = L->cfg.world_size;
    uint64_t start = UINT64_MAX;
    for (int q = 0; q < W; q++)
        for (uint64_t k = 0; k < L->blk[q + 1] - L->blk[q]; k++) {
            uint64_t p = rank_position(L, pos, q, k);
            if (p < start) start = p;
            b->all_ids[L->blk[q] + k] = L->perm[p];
        }
    memcpy(b->expected, L->perm + pos, L->gb * sizeof(uint32_t));
    const uint32_t *mine = b->all_ids + L->blk[L->cfg.rank];
    size_t T = (size_t)L->cfg.seq_len;
    for (uint64_t k = 0; k < L->per_rank; k++)
        read_instance(L, mine[k], b->inputs + k * T, b->targets + k * T);
    b->epoch = epoch;
    b->pos = pos;
    b->start_pos = start;
    double dt = now_seconds() - t0;
    pthread_mutex_lock(&L->mu);
    L->prod_seconds += dt;
    L->prod_instances += L->per_rank;
    pthread_mutex_unlock(&L->mu);
}

static void *prefetch_main(void *arg) {
    Loader *L = arg;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        while (!L->req && !L->stop) pthread_cond_wait(&L->cv, &L->mu);
        if (L->stop) break;
        uint64_t e = L->slot.epoch, p = L->slot.pos;
        L->busy = 1;
        pthread_mutex_unlock(&L->mu);
        produce(L, e, p, &L->slot);
        pthread_mutex_lock(&L->mu);
        L->busy = 0;
        L->req = 0;
        L->slot_valid = 1;
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

// Wait until the prefetch thread is idle (its slot and the perm are then ours).
static void wait_idle(Loader *L) {
    if (!L->have_thread) return;
    pthread_mutex_lock(&L->mu);
    while (L->req || L->busy) pthread_cond_wait(&L->cv, &L->mu);
    pthread_mutex_unlock(&L->mu);
}

static void request(Loader *L, uint64_t epoch, uint64_t pos) {
    if (!L->have_thread) return;
    pthread_mutex_lock(&L->mu);
    L->slot.epoch = epoch;
    L->slot.pos = pos;
    L->slot_valid = 0;
    L->req = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

// ---------------------------------------------------------------------------------------
// Packed instances (data.packing: packed)

static void build_packing(Loader *L) {
    LoaderConfig *c = &L->cfg;
    if (c->debug_double_shard) die_input("loader.debug_double_shard reproduces an FSL bug; it needs data.packing: fsl");
    c->pack.seq_len = c->seq_len;
    if (c->pack.pad_id >= (uint32_t)c->vocab_size)
        die_input("data.pad_id must be a token id in [0, model.vocab_size = %d), got %u", c->vocab_size, c->pack.pad_id);
    L->pfiles = xcalloc((size_t)L->n_files, sizeof(PackFile));
    for (int i = 0; i < L->n_files; i++) L->pfiles[i] = (PackFile){L->files[i].tok, L->files[i].n_tokens};
    L->pack = packing_build(&c->pack, L->pfiles, (uint32_t)L->n_files);
    if (!L->pack->n_inst)
        die_input("data.packing: the %d token file(s) hold no document ending with data.eos_id %u (first file '%s')",
                  L->n_files, c->pack.eos_id, L->files[0].path);
    L->n_raw = L->pack->n_inst;
    L->pack_src = xcalloc((size_t)c->n_sources, sizeof(uint64_t));
    for (uint64_t i = 0; i < L->pack->n_inst; i++) L->pack_src[L->files[L->pack->docs[L->pack->inst_first[i]].file].src]++;
}

const Packing *loader_packing(const Loader *L) { return L->pack; }

int loader_instance_ids(const Loader *L, uint32_t id, uint32_t *ids, uint32_t *group) {
    uint64_t raw = L->mixed ? L->mixed[id] : id;
    if (L->pack) {
        *group = packing_group_of(L->pack, raw);
        return packing_read(L->pack, L->pfiles, raw, ids);
    }
    const TokFile *f = file_of(L, raw);
    if (!f->tok) die("loader: '%s' was not opened (fake sizes): its instances cannot be read", f->path);
    memcpy(ids, f->tok + (raw - f->first) * (uint64_t)L->cfg.seq_len, (size_t)L->cfg.seq_len * sizeof(uint32_t));
    *group = (uint32_t)(f - L->files);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Create / free

Loader *loader_create(const LoaderConfig *cfg) {
    Loader *L = xcalloc(1, sizeof *L);
    L->cfg = *cfg;
    LoaderConfig *c = &L->cfg;
    if (c->n_sources <= 0 || c->n_sources > LOADER_MAX_SOURCES)
        die_input("data: give between 1 and %d sources (data.paths or data.sources)", LOADER_MAX_SOURCES);
    if (c->seq_len < 2) die_input("train.seq_len must be >= 2, got %d", c->seq_len);
    if (c->vocab_size <= 0) die_input("model.vocab_size must be > 0, got %d", c->vocab_size);
    if (c->world_size < 1 || c->rank < 0 || c->rank >= c->world_size)
        die_input("loader: rank %d of world size %d is invalid", c->rank, c->world_size);
    if (c->micro_batch < 1 || c->global_batch < 1 || c->global_batch % c->micro_batch)
        die_input("train.global_batch (%d) must be a positive multiple of train.micro_batch (%d)",
                  c->global_batch, c->micro_batch);
    if (c->debug_double_shard && (c->global_batch / c->micro_batch) % c->world_size)
        die_input("loader.debug_double_shard: train.global_batch / train.micro_batch = %d micro-batches do not split "
                  "evenly over %d ranks (the bug it reproduces needs an even split)",
                  c->global_batch / c->micro_batch, c->world_size);
    if (c->global_batch / c->micro_batch < c->world_size)
        die_input("train.global_batch / train.micro_batch = %d micro-batches for %d ranks: every rank needs at least one",
                  c->global_batch / c->micro_batch, c->world_size);

    if (c->packing && c->fake_tokens)
        die_input("data.packing: packed instances are found from the documents in the token files: --sizes "
                  "(fake file sizes) cannot give them");

    // Own the file lists and open everything.
    for (int s = 0; s < c->n_sources; s++) {
        LoaderSource *src = &c->sources[s];
        if (src->n_files <= 0) die_input("data source '%s' has no token files", src->name);
        char **fl = xmalloc((size_t)src->n_files * sizeof(char *));
        for (int k = 0; k < src->n_files; k++) fl[k] = xstrdup(src->files[k]);
        src->files = fl;
        L->n_files += src->n_files;
    }
    L->files = xcalloc((size_t)L->n_files, sizeof(TokFile));
    uint64_t total_bytes = 0;
    for (int s = 0; s < c->n_sources; s++)
        for (int k = 0; k < c->sources[s].n_files; k++) {
            struct stat st;
            if (!stat(c->sources[s].files[k], &st)) total_bytes += (uint64_t)st.st_size;
        }
    int full_check = !c->no_open_check && total_bytes <= OPEN_CHECK_MAX_BYTES;
    for (int s = 0, fi = 0; s < c->n_sources; s++) {
        uint64_t src_tokens = 0, src_inst = 0;
        for (int k = 0; k < c->sources[s].n_files; k++, fi++) {
            TokFile *f = &L->files[fi];
            f->path = c->sources[s].files[k];
            f->src = s;
            if (c->fake_tokens) f->n_tokens = c->fake_tokens[fi];   // nothing opened (olmo data order --sizes)
            else open_file(f, c->vocab_size, &full_check);
            f->n_inst = f->n_tokens / (uint64_t)c->seq_len;
            f->first = L->n_raw;
            L->n_raw += f->n_inst;
            src_tokens += f->n_tokens;
            src_inst += f->n_inst;
        }
        if (!src_inst && !c->packing)
            die_input("data source '%s': its %d file(s) hold %" PRIu64 " tokens, no full instance of seq_len %d "
                      "(first file '%s')", c->sources[s].name, c->sources[s].n_files, src_tokens, c->seq_len,
                      c->sources[s].files[0]);
    }
    if (c->fake_tokens && c->prefetch) die("loader: fake file sizes and prefetch (nothing can be read)");
    c->fake_tokens = NULL;   // the caller's array: not kept
    if (c->packing) build_packing(L);
    if (L->n_raw >= (1ull << 32)) die_input("data: %" PRIu64 " instances; at most 2^32-1 are supported", L->n_raw);

    build_mixture(L);
    L->gb = (uint64_t)c->global_batch;
    L->blk = xmalloc(sizeof(uint64_t) * ((size_t)c->world_size + 1));
    for (int q = 0; q <= c->world_size; q++) {
        int first = c->global_batch / c->micro_batch, count = 0;
        if (q < c->world_size) loader_rank_block(c->global_batch / c->micro_batch, c->world_size, q, &first, &count);
        L->blk[q] = (uint64_t)first * (uint64_t)c->micro_batch;
    }
    L->per_rank = L->blk[c->rank + 1] - L->blk[c->rank];
    L->nb = L->N / L->gb;
    if (L->nb == 0)
        die_input("data: %" PRIu64 " instances per epoch, fewer than one global batch of %d", L->N, c->global_batch);
    compute_fingerprint(L);

    L->seed = c->seed;
    L->epoch = 1;   // OLMo-core's trainer counts epochs from 1; epoch e uses seed + e
    L->perm = xmalloc(L->N * sizeof(uint32_t));
    L->served = xcalloc(L->N, 1);
    L->served_epoch = L->epoch;
    L->sortbuf = xmalloc(2 * L->gb * sizeof(uint64_t));
    size_t tok = (size_t)L->per_rank * (size_t)c->seq_len;
    L->slot.all_ids = xmalloc(L->gb * sizeof(uint32_t));
    L->slot.expected = xmalloc(L->gb * sizeof(uint32_t));
    L->slot.inputs = xmalloc(tok * sizeof(int32_t));
    L->slot.targets = xmalloc(tok * sizeof(int32_t));
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    sigbus_register(L, 1);
    if (c->prefetch) {
        if (pthread_create(&L->thread, NULL, prefetch_main, L)) die("loader: cannot start the prefetch thread");
        L->have_thread = 1;
        request(L, L->epoch, L->pos);
    }
    if (c->verbose) loader_print_summary(L, stderr);
    return L;
}

void loader_free(Loader *L) {
    if (!L) return;
    if (L->have_thread) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        pthread_join(L->thread, NULL);
    }
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    sigbus_register(L, 0);
    for (int i = 0; i < L->n_files; i++)
        if (L->files[i].tok) munmap((void *)L->files[i].tok, L->files[i].map_len);
    for (int s = 0; s < L->cfg.n_sources; s++) {
        for (int k = 0; k < L->cfg.sources[s].n_files; k++) free(L->cfg.sources[s].files[k]);
        free(L->cfg.sources[s].files);
    }
    free(L->files);
    packing_free(L->pack);
    free(L->pfiles);
    free(L->pack_src);
    free(L->mixed);
    free(L->perm);
    free(L->served);
    free(L->sortbuf);
    free(L->blk);
    free(L->slot.all_ids);
    free(L->slot.expected);
    free(L->slot.inputs);
    free(L->slot.targets);
    free(L);
}

uint64_t loader_num_instances(const Loader *L) { return L->N; }
uint64_t loader_batches_per_epoch(const Loader *L) { return L->nb; }
const char *loader_fingerprint(const Loader *L) { return L->fingerprint; }

// ---------------------------------------------------------------------------------------
// Accounting

static void alarm_raise(Loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void alarm_raise(Loader *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->alarm_msg, sizeof L->alarm_msg, fmt, ap);
    va_end(ap);
    L->alarms_pending++;
    if (L->alarm_lines < MAX_ALARM_LINES) {
        fprintf(stderr, "olmo: warning: loader alarm: %s\n", L->alarm_msg);
        if (++L->alarm_lines == MAX_ALARM_LINES)
            fprintf(stderr, "olmo: warning: loader alarm: further alarms are counted in metrics, not printed\n");
    }
}

static void account(Loader *L, const Batch *b) {
    uint64_t gb = L->gb, bidx = b->pos / gb;
    if (b->epoch != L->served_epoch) {
        memset(L->served, 0, L->N);
        L->served_epoch = b->epoch;
        L->distinct = L->repeats_epoch = 0;
    }
    // Rank overlap: the same id given to two ranks in this step. Key = id*W + rank.
    uint64_t W = (uint64_t)L->cfg.world_size, *key = L->sortbuf, *exp = L->sortbuf + gb;
    for (uint64_t q = 0, i = 0; q < W; q++)
        for (; i < L->blk[q + 1]; i++) key[i] = (uint64_t)b->all_ids[i] * W + q;
    qsort(key, gb, sizeof *key, cmp_u64);
    uint64_t overlaps = 0;
    for (uint64_t i = 1; i < gb; i++)
        if (key[i] / W == key[i - 1] / W && key[i] % W != key[i - 1] % W) overlaps++;
    // Off-batch: served ids that are not in this step's global batch (multiset compare).
    for (uint64_t i = 0; i < gb; i++) { key[i] /= W; exp[i] = b->expected[i]; }
    qsort(exp, gb, sizeof *exp, cmp_u64);
    uint64_t off = 0;
    for (uint64_t i = 0, j = 0; i < gb; i++) {
        while (j < gb && exp[j] < key[i]) j++;
        if (j < gb && exp[j] == key[i]) j++; else off++;
    }
    // Repeats: an id served before in this epoch (the mixture's own repetition uses
    // distinct ids, so it never counts here).
    uint64_t rep = 0;
    for (uint64_t i = 0; i < gb; i++) {
        uint32_t id = b->all_ids[i];
        if (L->served[id]) rep++; else L->distinct++;
        if (L->served[id] < 255) L->served[id]++;
    }
    if (L->pack) {   // padding of the global batch: seq_len less each instance's documents
        uint64_t real = 0;
        for (uint64_t i = 0; i < gb; i++) {
            uint64_t raw = L->mixed ? L->mixed[b->all_ids[i]] : b->all_ids[i];
            for (uint64_t k = L->pack->inst_first[raw]; k < L->pack->inst_first[raw + 1]; k++) real += L->pack->docs[k].len;
        }
        L->last_pad_frac = 1.0 - (double)real / (double)(gb * (uint64_t)L->cfg.seq_len);
    }
    L->repeats_epoch += rep;
    L->repeats_total += rep;
    L->overlaps_total += overlaps;
    L->offbatch_total += off;
    if (rep) alarm_raise(L, "epoch %" PRIu64 " batch %" PRIu64 ": %" PRIu64 " instance(s) served again within the epoch "
                            "(%" PRIu64 " so far this epoch)", b->epoch, bidx, rep, L->repeats_epoch);
    if (overlaps) alarm_raise(L, "epoch %" PRIu64 " batch %" PRIu64 ": %" PRIu64 " instance(s) given to two ranks",
                              b->epoch, bidx, overlaps);
    if (off) alarm_raise(L, "epoch %" PRIu64 " batch %" PRIu64 ": %" PRIu64 " of %" PRIu64
                            " instance(s) served are not in this step's global batch", b->epoch, bidx, off, gb);
    if (L->resume_check) {
        L->resume_check = 0;
        if (b->epoch != L->resume_epoch || b->start_pos != L->resume_pos) {
            L->resume_gaps++;
            alarm_raise(L, "resume: next served position is epoch %" PRIu64 " position %" PRIu64
                           ", the saved state says epoch %" PRIu64 " position %" PRIu64 " (%s)",
                        b->epoch, b->start_pos, L->resume_epoch, L->resume_pos,
                        b->start_pos < L->resume_pos ? "replay" : "skip");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The stream

void loader_next_batch(Loader *L, int32_t *inputs, int32_t *targets) {
    wait_idle(L);
    if (!(L->slot_valid && L->slot.epoch == L->epoch && L->slot.pos == L->pos))
        produce(L, L->epoch, L->pos, &L->slot);
    L->slot_valid = 0;
    account(L, &L->slot);
    size_t n = (size_t)L->per_rank * (size_t)L->cfg.seq_len;
    memcpy(inputs, L->slot.inputs, n * sizeof(int32_t));
    memcpy(targets, L->slot.targets, n * sizeof(int32_t));
    L->batches_processed++;
    L->tokens_processed += L->gb * (uint64_t)L->cfg.seq_len;
    L->pos += L->gb;
    if (L->pos >= L->nb * L->gb) { L->epoch++; L->pos = 0; }
    request(L, L->epoch, L->pos);
}

void loader_peek_ids(Loader *L, uint32_t *ids) {
    wait_idle(L);
    if (!(L->slot_valid && L->slot.epoch == L->epoch && L->slot.pos == L->pos))
        produce(L, L->epoch, L->pos, &L->slot);
    L->slot_valid = 1;
    memcpy(ids, L->slot.all_ids + L->blk[L->cfg.rank], L->per_rank * sizeof(uint32_t));
}

void loader_get_state(const Loader *L, LoaderState *s) {
    memset(s, 0, sizeof *s);
    s->seed = L->seed;
    s->epoch = L->epoch;
    s->batches_processed = L->batches_processed;
    s->tokens_processed = L->tokens_processed;
    s->epoch_instances = L->pos;
    memcpy(s->fingerprint, L->fingerprint, sizeof s->fingerprint);
}

void loader_set_state(Loader *L, const LoaderState *s, int force) {
    if (strcmp(s->fingerprint, L->fingerprint)) {
        if (!force)
            die_input("loader state: dataset fingerprint %.16s... does not match this recipe's data %.16s... "
                      "(files, sizes, seq_len or mixture changed); refusing to resume (if the new data is meant: "
                      "train.allow_recipe_change=data; docs/checkpoints.md)",
                      s->fingerprint, L->fingerprint);
        warnf("loader state: dataset fingerprint differs from the saved one; resuming anyway (forced by train.allow_recipe_change)");
    }
    if (s->seed != L->seed) warnf("loader state: saved data seed %" PRIu64 " replaces the recipe's %" PRIu64, s->seed, L->seed);
    uint64_t T = (uint64_t)L->cfg.seq_len;
    if (s->tokens_processed % T)
        die_input("loader state: tokens_processed %" PRIu64 " is not a whole number of instances of seq_len %" PRIu64,
                  s->tokens_processed, T);
    // The position inside the epoch is in instances, so it survives a change of world
    // size or global batch; it must fall on a batch boundary of the new batch size.
    if (s->epoch_instances % L->gb)
        die_input("loader state: %" PRIu64 " instances into epoch %" PRIu64 " is not a multiple of the global batch %"
                  PRIu64 " (the batch size may change only by a factor that divides the saved position)",
                  s->epoch_instances, s->epoch, L->gb);
    wait_idle(L);
    L->seed = s->seed;
    L->perm_epoch = 0;   // the seed may have changed
    L->epoch = s->epoch ? s->epoch : 1;
    L->pos = s->epoch_instances;
    L->tokens_processed = s->tokens_processed;
    L->batches_processed = s->tokens_processed / (T * L->gb);   // in this run's batch size
    if (L->pos >= L->nb * L->gb) { L->epoch++; L->pos = 0; }
    // Coverage continues: what the clean stream served before the saved position.
    ensure_perm(L, L->epoch);
    memset(L->served, 0, L->N);
    for (uint64_t i = 0; i < L->pos; i++) L->served[L->perm[i]] = 1;
    L->served_epoch = L->epoch;
    L->distinct = L->pos;
    L->repeats_epoch = 0;
    L->resume_check = 1;
    L->resume_epoch = L->epoch;
    L->resume_pos = L->pos;
    L->slot_valid = 0;
    request(L, L->epoch, L->pos);
}

int loader_metrics(Loader *L, cJSON *obj) {
    pthread_mutex_lock(&L->mu);
    double rate = L->prod_seconds > 0 ? (double)L->prod_instances / L->prod_seconds : 0;
    pthread_mutex_unlock(&L->mu);
    cJSON_AddNumberToObject(obj, "loader_epoch", (double)L->served_epoch);   // epoch of the last batch served
    cJSON_AddNumberToObject(obj, "loader_coverage", (double)L->distinct / (double)L->N);
    cJSON_AddNumberToObject(obj, "loader_repeats", (double)L->repeats_epoch);
    cJSON_AddNumberToObject(obj, "loader_rank_overlaps", (double)L->overlaps_total);
    cJSON_AddNumberToObject(obj, "loader_off_batch", (double)L->offbatch_total);
    cJSON_AddNumberToObject(obj, "loader_resume_gaps", (double)L->resume_gaps);
    cJSON_AddNumberToObject(obj, "loader_instances_per_s", rate);
    if (L->pack) {   // packed: what the packing kept, cut and dropped; the last global batch's padding
        const Packing *p = L->pack;
        cJSON_AddNumberToObject(obj, "loader_docs_whole", (double)p->docs_whole);
        cJSON_AddNumberToObject(obj, "loader_docs_fragmented", p->cfg.fragment ? (double)p->docs_long : 0.0);
        cJSON_AddNumberToObject(obj, "loader_docs_truncated", p->cfg.fragment ? 0.0 : (double)p->docs_long);
        cJSON_AddNumberToObject(obj, "loader_tokens_dropped", (double)(p->tokens_truncated + p->tokens_tail));
        cJSON_AddNumberToObject(obj, "loader_padding_frac", L->last_pad_frac);
    }
    int n = (int)L->alarms_pending;
    cJSON_AddNumberToObject(obj, "loader_alarms", n);
    if (n) cJSON_AddStringToObject(obj, "loader_alarm", L->alarm_msg);
    L->alarms_pending = 0;
    return n;
}

void loader_totals(const Loader *L, LoaderTotals *t) {
    t->epoch = L->served_epoch;
    t->coverage = (double)L->distinct / (double)L->N;
    t->repeats_epoch = L->repeats_epoch;
    t->repeats_total = L->repeats_total;
    t->rank_overlaps = L->overlaps_total;
    t->off_batch = L->offbatch_total;
    t->resume_gaps = L->resume_gaps;
}

// ---------------------------------------------------------------------------------------
// Description

int loader_num_sources(const Loader *L) { return L->cfg.n_sources; }

void loader_source_info(const Loader *L, int s, const char **name, uint64_t *available, uint64_t *used,
                        double *share) {
    *name = L->cfg.sources[s].name;
    *available = L->src_avail[s];
    *used = L->src_used[s];
    *share = L->N ? (double)L->src_used[s] / (double)L->N : 0;
}

void loader_print_summary(const Loader *L, FILE *f) {
    fprintf(f, "loader: %d source(s), %d file(s), seq_len %d, %" PRIu64 " instances/epoch, %" PRIu64
               " batches/epoch of %" PRIu64 ", fingerprint %.16s\n",
            L->cfg.n_sources, L->n_files, L->cfg.seq_len, L->N, L->nb, L->gb, L->fingerprint);
    for (int s = 0; s < L->cfg.n_sources; s++) {
        const LoaderSource *src = &L->cfg.sources[s];
        uint64_t a = L->src_avail[s], u = L->src_used[s];
        fprintf(f, "  source %-16s files %4d  instances available %10" PRIu64 "  used %10" PRIu64
                   "  repeat %.4f  share %.4f\n",
                src->name, src->n_files, a, u, a ? (double)u / (double)a : 0.0, L->N ? (double)u / (double)L->N : 0.0);
    }
    if (L->pack) {
        const Packing *p = L->pack;
        fprintf(f, "  packed (%s, %u group(s) of up to %d files%s): documents kept whole %" PRIu64 ", %s %" PRIu64
                   " (into %" PRIu64 " pieces), tokens dropped %" PRIu64 " (%" PRIu64 " cut by truncate, %" PRIu64
                   " after a file's last EOS), padding %" PRIu64 " of %" PRIu64 " tokens (%.2f%%)\n",
                c_strategy(&p->cfg), p->n_groups, p->cfg.group_size, p->cfg.permute ? ", files permuted" : "",
                p->docs_whole, p->cfg.fragment ? "fragmented" : "truncated", p->docs_long,
                p->cfg.fragment ? p->fragments : p->docs_long, p->tokens_truncated + p->tokens_tail,
                p->tokens_truncated, p->tokens_tail, p->tokens_padding, p->n_inst * (uint64_t)p->cfg.seq_len,
                100.0 * (double)p->tokens_padding / (double)(p->n_inst * (uint64_t)p->cfg.seq_len));
    }
}

cJSON *loader_describe(const Loader *L) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "instances", (double)L->N);
    cJSON_AddNumberToObject(o, "batches_per_epoch", (double)L->nb);
    cJSON_AddNumberToObject(o, "seq_len", L->cfg.seq_len);
    cJSON_AddStringToObject(o, "fingerprint", L->fingerprint);
    cJSON *arr = cJSON_AddArrayToObject(o, "sources");
    for (int s = 0; s < L->cfg.n_sources; s++) {
        cJSON *x = cJSON_CreateObject();
        uint64_t a = L->src_avail[s], u = L->src_used[s];
        cJSON_AddStringToObject(x, "name", L->cfg.sources[s].name);
        cJSON_AddNumberToObject(x, "files", L->cfg.sources[s].n_files);
        cJSON_AddNumberToObject(x, "instances_available", (double)a);
        cJSON_AddNumberToObject(x, "instances_used", (double)u);
        cJSON_AddNumberToObject(x, "repeat", a ? (double)u / (double)a : 0.0);
        cJSON_AddNumberToObject(x, "share", L->N ? (double)u / (double)L->N : 0.0);
        cJSON_AddItemToArray(arr, x);
    }
    if (L->pack) {
        const Packing *p = L->pack;
        cJSON *x = cJSON_AddObjectToObject(o, "packing");
        cJSON_AddStringToObject(x, "long_doc_strategy", c_strategy(&p->cfg));
        cJSON_AddNumberToObject(x, "source_group_size", p->cfg.group_size);
        cJSON_AddNumberToObject(x, "groups", p->n_groups);
        cJSON *fo = cJSON_AddArrayToObject(x, "file_order");   // recipe indices of the files in packing order
        for (uint32_t i = 0; i < p->n_files; i++) cJSON_AddItemToArray(fo, cJSON_CreateNumber(p->file_order[i]));
        if (p->cfg.permute) cJSON_AddNumberToObject(x, "source_permutation_seed", (double)p->cfg.perm_seed);
        cJSON_AddNumberToObject(x, "docs_whole", (double)p->docs_whole);
        cJSON_AddNumberToObject(x, "docs_fragmented", p->cfg.fragment ? (double)p->docs_long : 0.0);
        cJSON_AddNumberToObject(x, "docs_truncated", p->cfg.fragment ? 0.0 : (double)p->docs_long);
        cJSON_AddNumberToObject(x, "fragments", (double)p->fragments);
        cJSON_AddNumberToObject(x, "tokens_dropped", (double)(p->tokens_truncated + p->tokens_tail));
        cJSON_AddNumberToObject(x, "tokens_truncated", (double)p->tokens_truncated);
        cJSON_AddNumberToObject(x, "tokens_after_last_eos", (double)p->tokens_tail);
        cJSON_AddNumberToObject(x, "tokens_packed", (double)p->tokens_packed);
        cJSON_AddNumberToObject(x, "tokens_padding", (double)p->tokens_padding);
    }
    return o;
}

// ---------------------------------------------------------------------------------------
// State <-> JSON (for train_state.json)

cJSON *loader_state_to_json(const LoaderState *s) {
    cJSON *o = cJSON_CreateObject();
    char b[32];
    // u64 as strings: JSON numbers are doubles and lose bits above 2^53.
    snprintf(b, sizeof b, "%" PRIu64, s->seed); cJSON_AddStringToObject(o, "seed", b);
    snprintf(b, sizeof b, "%" PRIu64, s->epoch); cJSON_AddStringToObject(o, "epoch", b);
    snprintf(b, sizeof b, "%" PRIu64, s->batches_processed); cJSON_AddStringToObject(o, "batches_processed", b);
    snprintf(b, sizeof b, "%" PRIu64, s->tokens_processed); cJSON_AddStringToObject(o, "tokens_processed", b);
    snprintf(b, sizeof b, "%" PRIu64, s->epoch_instances); cJSON_AddStringToObject(o, "epoch_instances", b);
    cJSON_AddStringToObject(o, "fingerprint", s->fingerprint);
    return o;
}

static int get_u64(const cJSON *o, const char *k, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) {
        char *end;
        *out = strtoull(v->valuestring, &end, 10);
        return *end == '\0' && end != v->valuestring;
    }
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 18446744073709551616.0) { *out = (uint64_t)v->valuedouble; return 1; }
    return 0;
}

int loader_state_from_json(const cJSON *o, LoaderState *s) {
    memset(s, 0, sizeof *s);
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
    if (!get_u64(o, "seed", &s->seed) || !get_u64(o, "epoch", &s->epoch) ||
        !get_u64(o, "tokens_processed", &s->tokens_processed) || !cJSON_IsString(fp) ||
        strlen(fp->valuestring) != 64)
        return -1;
    get_u64(o, "batches_processed", &s->batches_processed);
    if (!get_u64(o, "epoch_instances", &s->epoch_instances)) return -1;
    memcpy(s->fingerprint, fp->valuestring, 65);
    return 0;
}
