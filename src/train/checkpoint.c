// checkpoint.c: see checkpoint.h.
#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/ckpt_verify.h"
#include "io/safetensors.h"
#include "model/config_json.h"
#include "util/common.h"

void ckpt_test_pause(void) {
    // Test hook: widen the window in which a kill lands mid-checkpoint.
    const char *pause = getenv("OLMO_TEST_CKPT_PAUSE");
    if (pause) usleep((useconds_t)(atof(pause) * 1e6));
}

void ckpt_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char h[SHA256_DIGEST_LENGTH];
    SHA256(data, len, h);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) sprintf(out + 2 * i, "%02x", h[i]);
    out[64] = 0;
}

void ckpt_state_free(TrainState *st) {
    free(st->recipe_yaml);
    st->recipe_yaml = NULL;
}

// ---- small file-system helpers ----------------------------------------------------------------
static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static int rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0;
    return nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}
static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}
void ckpt_clean_temp(const char *run_dir) {
    char ckdir[4096], p[4600];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", run_dir);
    DIR *d = opendir(ckdir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, ".tmp-", 5)) {
            snprintf(p, sizeof p, "%s/%s", ckdir, e->d_name);
            printf("checkpoint: removing incomplete %s (left by an interrupted run)\n", p);
            rm_rf(p);
        }
    closedir(d);
}

// ---- train_state.json ---------------------------------------------------------------------------
// Doubles of the skip-step history as C99 hex floats: exact, and inf/nan survive.
static cJSON *hex_array(const double *x, int n) {
    cJSON *a = cJSON_CreateArray();
    char b[64];
    for (int i = 0; i < n; i++) {
        snprintf(b, sizeof b, "%a", x[i]);
        cJSON_AddItemToArray(a, cJSON_CreateString(b));
    }
    return a;
}


char *ckpt_state_json(const TrainState *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "format", CKPT_FORMAT);
    cJSON_AddStringToObject(o, "olmo_version", OLMO_VERSION_STRING);
    cJSON_AddNumberToObject(o, "step", (double)st->step);
    cJSON_AddNumberToObject(o, "tokens", (double)st->tokens);
    cJSON_AddNumberToObject(o, "skipped_total", (double)st->skipped_total);
    cJSON_AddNumberToObject(o, "adam_step", (double)st->adam_step);
    cJSON_AddNumberToObject(o, "world_size", st->world_size);
    cJSON_AddNumberToObject(o, "global_batch", st->global_batch);
    cJSON_AddNumberToObject(o, "micro_batch", st->micro_batch);
    cJSON_AddNumberToObject(o, "seq_len", st->seq_len);
    cJSON_AddItemToObject(o, "loader", loader_state_to_json(&st->loader));
    cJSON *s = cJSON_AddObjectToObject(o, "schedule");
    cJSON_AddStringToObject(s, "name", st->sched.name);
    cJSON_AddNumberToObject(s, "position", (double)st->step);
    cJSON_AddNumberToObject(s, "lr", st->lr);
    cJSON_AddNumberToObject(s, "peak", st->sched.peak);
    cJSON_AddNumberToObject(s, "warmup", (double)st->sched.warmup);
    cJSON_AddNumberToObject(s, "max_steps", (double)st->sched.max_steps);
    cJSON_AddNumberToObject(s, "alpha_f", st->sched.alpha_f);
    cJSON_AddNumberToObject(s, "decay_steps", (double)st->sched.decay_steps);
    cJSON *k = cJSON_AddObjectToObject(o, "skip_step");
    cJSON_AddNumberToObject(k, "window", st->skip.window);
    cJSON_AddNumberToObject(k, "sigma", st->skip.sigma);
    cJSON_AddItemToObject(k, "loss", hex_array(st->skip.loss, st->skip.n));
    cJSON_AddItemToObject(k, "grad_norm", hex_array(st->skip.gnorm, st->skip.n));
    cJSON_AddItemToObject(o, "model", model_config_to_json(&st->cfg));
    cJSON_AddNumberToObject(o, "n_params", (double)st->n_params);
    cJSON_AddStringToObject(o, "recipe_sha256", st->recipe_sha256);
    cJSON_AddStringToObject(o, "recipe", st->recipe_yaml ? st->recipe_yaml : "");
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    return txt;
}

// Appends "; what" to a bounded message (problem lists).
static void addf(char *msg, size_t cap, int *bad, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void addf(char *msg, size_t cap, int *bad, const char *fmt, ...) {
    size_t used = strlen(msg);
    if (used + 8 >= cap) return;
    if ((*bad)++) used += (size_t)snprintf(msg + used, cap - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + used, cap - used, fmt, ap);
    va_end(ap);
}

static int get_num(const cJSON *o, const char *k, double *out) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(x)) return -1;
    *out = x->valuedouble;
    return 0;
}

static int state_from_json(const char *path, const char *txt, TrainState *st, const ModelConfig *cfg, char *err,
                           size_t errlen) {
    memset(st, 0, sizeof *st);
    cJSON *o = cJSON_Parse(txt);
    if (!o || !cJSON_IsObject(o)) {
        snprintf(err, errlen, "%s: not valid JSON (near byte %ld)", path,
                 cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - txt) : 0L);
        cJSON_Delete(o);
        return -1;
    }
    double v;
    char miss[512] = "";
    int nmiss = 0;
    // Non-negative counts that fit their field: casting an out-of-range double is undefined
    // behaviour (found by fuzz/ckpt_state.c).
#define NUM(key, dst)                                       \
    do {                                                    \
        double lim_ = sizeof(dst) < 8 ? 2147483647.0 : 9.0e15; \
        if (get_num(o, key, &v) || !(v >= 0 && v <= lim_)) \
            addf(miss, sizeof miss, &nmiss, "%s", key);     \
        else dst = v;                                       \
    } while (0)
    NUM("format", v);
    NUM("step", st->step);
    NUM("tokens", st->tokens);
    NUM("skipped_total", st->skipped_total);
    NUM("adam_step", st->adam_step);
    NUM("world_size", st->world_size);
    NUM("global_batch", st->global_batch);
    NUM("micro_batch", st->micro_batch);
    NUM("seq_len", st->seq_len);
    NUM("n_params", st->n_params);
    const cJSON *ld = cJSON_GetObjectItemCaseSensitive(o, "loader");
    if (!ld || loader_state_from_json(ld, &st->loader) != 0) addf(miss, sizeof miss, &nmiss, "loader");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "schedule");
    const cJSON *sn = cJSON_GetObjectItemCaseSensitive(sc, "name");
    if (!cJSON_IsString(sn)) addf(miss, sizeof miss, &nmiss, "schedule.name");
    else snprintf(st->sched.name, sizeof st->sched.name, "%s", sn->valuestring);
    if (get_num(sc, "lr", &st->lr)) addf(miss, sizeof miss, &nmiss, "schedule.lr");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "skip_step");
    const cJSON *kl = cJSON_GetObjectItemCaseSensitive(k, "loss"), *kg = cJSON_GetObjectItemCaseSensitive(k, "grad_norm");
    if (get_num(k, "window", &v) || v < 1 || v > SKIP_MAX_WINDOW) addf(miss, sizeof miss, &nmiss, "skip_step.window");
    else st->skip.window = (int)v;
    if (get_num(k, "sigma", &st->skip.sigma)) addf(miss, sizeof miss, &nmiss, "skip_step.sigma");
    int n = cJSON_GetArraySize(kl);
    if (!cJSON_IsArray(kl) || !cJSON_IsArray(kg) || n != cJSON_GetArraySize(kg) || n > SKIP_MAX_WINDOW + 1)
        addf(miss, sizeof miss, &nmiss, "skip_step.loss/grad_norm");
    else {
        st->skip.n = n;
        for (int i = 0; i < n; i++) {
            const cJSON *a = cJSON_GetArrayItem(kl, i), *b = cJSON_GetArrayItem(kg, i);
            if (!cJSON_IsString(a) || !cJSON_IsString(b)) {
                addf(miss, sizeof miss, &nmiss, "skip_step values");
                break;
            }
            st->skip.loss[i] = strtod(a->valuestring, NULL);
            st->skip.gnorm[i] = strtod(b->valuestring, NULL);
        }
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "recipe_sha256"), *ry = cJSON_GetObjectItemCaseSensitive(o, "recipe");
    if (!cJSON_IsString(rs) || !cJSON_IsString(ry)) addf(miss, sizeof miss, &nmiss, "recipe/recipe_sha256");
    else {
        snprintf(st->recipe_sha256, sizeof st->recipe_sha256, "%s", rs->valuestring);
        st->recipe_yaml = xstrdup(ry->valuestring);
    }
    // The model shape: every field compared, every mismatch named.
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(o, "model");
    char mm[1024] = "";
    int nmm = 0;
    if (!cJSON_IsObject(mo)) addf(miss, sizeof miss, &nmiss, "model");
    else {
        for (int i = 0; i < model_config_json_nfields(); i++) {
            double want;
            const char *name = model_config_json_field(cfg, i, &want);
            if (get_num(mo, name, &v)) addf(miss, sizeof miss, &nmiss, "model.%s", name);
            else if (v != want) addf(mm, sizeof mm, &nmm, "%s %.10g in the checkpoint, %.10g in the recipe", name, v, want);
            else model_config_json_set(&st->cfg, i, want);
        }
        // RoPE scaling is read, not compared: it has no weights, and load_path may change it
        // on purpose (stage 2 -> 3); the trainer refuses a change on resume.
        char rerr[160];
        if (model_rope_scaling_from_json(mo, &st->cfg.rope_scaling, rerr, sizeof rerr))
            addf(miss, sizeof miss, &nmiss, "model.%s", rerr);
    }
#undef NUM
    cJSON_Delete(o);
    if (nmiss) {
        snprintf(err, errlen, "%s: missing or bad field%s: %s", path, nmiss > 1 ? "s" : "", miss);
        ckpt_state_free(st);
        return -1;
    }
    if (nmm) {
        snprintf(err, errlen, "%s: checkpoint of a different model (%d field%s differ): %s", path, nmm,
                 nmm > 1 ? "s" : "", mm);
        ckpt_state_free(st);
        return -1;
    }
    return 0;
}

// ---- safetensors validation -------------------------------------------------------------------
// The file must hold exactly one F32 tensor per table row, named name+suffix[j] for each
// of the nsuf suffixes, with the row's shape. Every problem is listed in err.
static int check_tensors(const StFile *f, const ParamTable *t, const char *const *suf, int nsuf, char *err,
                         size_t errlen) {
    char msg[3000] = "";
    int bad = 0;
    char name[160];
    for (int j = 0; j < nsuf; j++)
        for (int i = 0; i < t->n; i++) {
            const ParamInfo *p = &t->p[i];
            snprintf(name, sizeof name, "%s%s", p->name, suf[j]);
            const StTensor *s = st_find(f, name);
            if (!s) {
                addf(msg, sizeof msg, &bad, "missing tensor %s", name);
                continue;
            }
            int shape_ok = s->ndim == p->ndim && s->shape[0] == p->shape[0] && (p->ndim == 1 || s->shape[1] == p->shape[1]);
            if (!shape_ok || strcmp(s->dtype, "F32") != 0) {
                char got[128] = "";
                for (int d = 0, o = 0; d < s->ndim && o < 100; d++)
                    o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)s->shape[d]);
                if (p->ndim == 2)
                    addf(msg, sizeof msg, &bad, "%s: expected F32 (%d, %d), got %s (%s)", name, p->shape[0], p->shape[1],
                         s->dtype, got);
                else
                    addf(msg, sizeof msg, &bad, "%s: expected F32 (%d), got %s (%s)", name, p->shape[0], s->dtype, got);
            }
        }
    for (int k = 0; k < f->n; k++) {
        int known = 0;
        for (int j = 0; j < nsuf && !known; j++) {
            size_t ls = strlen(suf[j]), ln = strlen(f->t[k].name);
            if (ln < ls || strcmp(f->t[k].name + ln - ls, suf[j])) continue;
            snprintf(name, sizeof name, "%.*s", (int)(ln - ls), f->t[k].name);
            if (param_table_find(t, name)) known = 1;
        }
        if (!known) addf(msg, sizeof msg, &bad, "unexpected tensor %s", f->t[k].name);
    }
    if (bad) {
        snprintf(err, errlen, "%s does not match the model (%d problem%s): %s", f->path, bad, bad > 1 ? "s" : "", msg);
        return -1;
    }
    return 0;
}

// The copies of elements [lo, hi) of the flat layout out of a validated file (tensors
// name+suffix) into dst, as byte spans of the file, appended to sp[*n].
static void add_spans(const StFile *f, const ParamTable *t, const char *suffix, float *dst, size_t lo, size_t hi,
                      CkptSpan *sp, int *n) {
    char name[160];
    const size_t data0 = (size_t)(f->data - (const uint8_t *)f->map);
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        size_t a = p->offset > lo ? p->offset : lo, b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a >= b) continue;
        snprintf(name, sizeof name, "%s%s", p->name, suffix);
        const size_t at = data0 + st_find(f, name)->begin;   // the tensor's first byte in the file
        sp[(*n)++] = (CkptSpan){at + sizeof(float) * (a - p->offset), at + sizeof(float) * (b - p->offset), dst + (a - lo)};
    }
}
static int cmp_span(const void *a, const void *b) {
    const CkptSpan *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// Open dir/name as safetensors. With checksums (sums != NULL) the file size and the header
// bytes are checked before the header is trusted, so a flipped header byte is reported as
// a checksum mismatch, not as whatever the parser makes of it. *fs: the file's checksums
// (NULL without). 0, -1 (bad file), or -2 (its checksum fails).
static int open_checked(const char *dir, const char *name, const CkptSums *sums, StFile *f, const CkptSumFile **fs,
                        char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *fs = NULL;
    if (!sums) return st_open(f, path, err, errlen);
    if (!(*fs = ckpt_sums_find(sums, name))) {
        snprintf(err, errlen, "%s/%s does not list %s", dir, CKPT_SUMS_NAME, name);
        return -2;
    }
    if (st_open(f, path, err, errlen) == 0) {
        if (ckpt_sums_check(*fs, 1, path, f->map, f->map_len, NULL, 0, err, errlen) == 0) return 0;
        st_close(f);
        return -2;
    }
    // Unparseable: if the header's checksum (or the size) fails, that is the better message.
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat sb;
    size_t hl = (*fs)->r[0].end;
    uint8_t *h = xmalloc(hl + 1);
    int rc = -1;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size != (*fs)->size)
        rc = ckpt_sums_check(*fs, 1, path, h, (size_t)sb.st_size, NULL, 0, err, errlen) ? -2 : -1;
    else if (pread(fd, h, hl, 0) == (ssize_t)hl)
        rc = ckpt_sums_check(*fs, 1, path, h, (*fs)->size, NULL, 0, err, errlen) ? -2 : -1;
    close(fd);
    free(h);
    return rc;
}

int ckpt_load(const char *dir, const ParamTable *t, const ModelConfig *cfg, float *params, float *m, float *v,
              size_t lo, size_t hi, TrainState *st, char *err, size_t errlen) {
    CkptSums sums;
    int nosums = ckpt_sums_read(dir, &sums, err, errlen);
    if (nosums < 0) {
        ckpt_verify_hint(dir, err, errlen);
        return -1;
    }
    if (nosums)
        warnf("%s has no %s (written before checkpoints carried checksums): loading it unverified", dir, CKPT_SUMS_NAME);
    const CkptSums *sp = nosums ? NULL : &sums;
    int corrupt = 0;   // a checksum failed: point at an earlier checkpoint
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    size_t len;
    char *txt = read_file_all(path, &len);
    if (!txt) {
        snprintf(err, errlen, "%s: cannot read (%s)", path, strerror(errno));
        ckpt_sums_free(&sums);
        return -1;
    }
    if (sp) {
        const CkptSumFile *fj = ckpt_sums_find(sp, "train_state.json");
        if (!fj) snprintf(err, errlen, "%s/%s does not list train_state.json", dir, CKPT_SUMS_NAME);
        corrupt = !fj || ckpt_sums_check(fj, -1, path, (const uint8_t *)txt, len, NULL, 0, err, errlen);
    }
    TrainState s;
    int rc = corrupt ? -1 : state_from_json(path, txt, &s, cfg, err, errlen);
    free(txt);
    if (rc) goto fail_sums;
    if (s.n_params != t->total) {
        snprintf(err, errlen, "%s: %zu parameters in the checkpoint, %zu in the model", path, s.n_params, t->total);
        goto fail_state;
    }
    StFile fm, fo;
    const CkptSumFile *sm, *so;
    static const char *const none[] = {""}, *const adam[] = {".exp_avg", ".exp_avg_sq"};
    if ((rc = open_checked(dir, "model.safetensors", sp, &fm, &sm, err, errlen))) goto fail_state;
    if (check_tensors(&fm, t, none, 1, err, errlen)) goto fail_model;
    if ((rc = open_checked(dir, "optim.safetensors", sp, &fo, &so, err, errlen))) goto fail_model;
    if (check_tensors(&fo, t, adam, 2, err, errlen)) goto fail_optim;
    // Structure validated: now every byte of both files is checked (without checksums: just
    // copied) in one pass that copies what this rank loads. Each rank also checks the
    // moments it does not load, so that every rank reaches the same verdict. On a mismatch
    // the outputs hold part of the checkpoint (the callers stop).
    CkptSpan *spans = xmalloc(sizeof(CkptSpan) * 2 * (size_t)t->n);
    int ns = 0;
    add_spans(&fm, t, "", params, 0, t->total, spans, &ns);
    rc = ckpt_sums_check(sm, -1, fm.path, fm.map, fm.map_len, spans, ns, err, errlen);
    ns = 0;
    if (m) add_spans(&fo, t, ".exp_avg", m, lo, hi, spans, &ns);   // NULL: weights only (stage transition)
    if (v) add_spans(&fo, t, ".exp_avg_sq", v, lo, hi, spans, &ns);
    qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
    if (rc == 0) rc = ckpt_sums_check(so, -1, fo.path, fo.map, fo.map_len, spans, ns, err, errlen);
    free(spans);
    st_close(&fm);
    st_close(&fo);
    if (rc) {
        rc = -2;
        goto fail_state;
    }
    ckpt_sums_free(&sums);
    *st = s;
    return 0;
fail_optim:
    st_close(&fo);
fail_model:
    st_close(&fm);
fail_state:
    ckpt_state_free(&s);
fail_sums:
    if (corrupt || rc == -2) ckpt_verify_hint(dir, err, errlen);
    ckpt_sums_free(&sums);
    return -1;
}

// ---- writer ---------------------------------------------------------------------------------------
struct CkptWriter {
    CkptPolicy pol;
    const ParamTable *t;
    float *p, *m, *v;           // snapshot
    CkptFetch fetch;            // ckpt_commit_fetch: tensors come from here instead
    void *fetch_ctx;
    TrainState st;              // copy (recipe text owned)
    pthread_t th;
    int threaded;               // the write in flight runs on th
    int running;
    int failed;
    char errmsg[10000];
    double seconds;
    char last[4800];
};

CkptWriter *ckpt_writer_create(const char *run_dir, const ParamTable *t, int keep_last, int keep_every, int async) {
    CkptWriter *w = xcalloc(1, sizeof *w);
    ckpt_policy_init(&w->pol, run_dir, keep_last, keep_every, async);
    w->t = t;
    return w;
}

void ckpt_policy_init(CkptPolicy *p, const char *run_dir, int keep_last, int keep_every, int async) {
    snprintf(p->ckdir, sizeof p->ckdir, "%s/checkpoints", run_dir);
    p->keep_last = keep_last < 1 ? 1 : keep_last;
    p->keep_every = keep_every;
    p->async = async;
}

void ckpt_retention(const char *ckdir, int keep_last, int keep_every) {
    int n;
    long *steps = ckpt_list_steps(ckdir, &n);
    char p[4600], q[4600];
    for (int i = keep_last; i < n; i++) {
        if (keep_every > 0 && steps[i] % keep_every == 0) continue;
        snprintf(p, sizeof p, "%s/step-%08ld", ckdir, steps[i]);
        snprintf(q, sizeof q, "%s/.tmp-del-step-%08ld", ckdir, steps[i]);
        // Renamed first so no step-* directory is ever half deleted.
        if (rename(p, q) == 0) rm_rf(q);
    }
    free(steps);
}

typedef struct {
    CkptWriter *w;
    int which0;   // model.safetensors: 0 (parameters); optim: 1 (exp_avg), then 2 (exp_avg_sq)
    // (ckpt_commit_fetch: tensor i of the file fetched into st_write_fill's buffer in turn)
} FillCtx;

static void fill_tensor(void *ctx, int i, void *buf) {
    FillCtx *f = ctx;
    const ParamTable *t = f->w->t;
    const ParamInfo *q = &t->p[i % t->n];
    f->w->fetch(f->w->fetch_ctx, f->which0 + i / t->n, q->offset, q->numel, buf);
}

int ckpt_file_tensors(const ParamTable *t, int file, const TrainState *st, StWrite *ws, char **names, char *meta,
                      size_t metalen) {
    if (file == 0) {
        for (int i = 0; i < t->n; i++) {
            const ParamInfo *q = &t->p[i];
            ws[i] = (StWrite){q->name, "F32", q->ndim, {q->shape[0], q->shape[1]}, NULL, q->numel * sizeof(float)};
        }
        snprintf(meta, metalen, "{\"format\": \"pt\", \"step\": \"%ld\"}", st->step);
        return t->n;
    }
    // optim.safetensors: exp_avg for every tensor, then exp_avg_sq.
    for (int i = 0; i < 2 * t->n; i++) {
        const ParamInfo *q = &t->p[i % t->n];
        names[i] = xmalloc(strlen(q->name) + 16);
        sprintf(names[i], "%s.%s", q->name, i < t->n ? "exp_avg" : "exp_avg_sq");
        ws[i] = (StWrite){names[i], "F32", q->ndim, {q->shape[0], q->shape[1]}, NULL, q->numel * sizeof(float)};
    }
    snprintf(meta, metalen, "{\"format\": \"olmo.c adamw\", \"step\": \"%ld\", \"adam_step\": \"%ld\"}", st->step,
             st->adam_step);
    return 2 * t->n;
}

int ckpt_publish(const char *ckdir, const char *tmp, const TrainState *st, CkptSums *sums, int keep_last, int keep_every,
                 char *last, size_t lastlen, char *errmsg, size_t errlen) {
    char fin[4600], p[4800];
    snprintf(fin, sizeof fin, "%s/step-%08ld", ckdir, st->step);
    char *js = ckpt_state_json(st);
    snprintf(p, sizeof p, "%s/train_state.json", tmp);
    int rc = write_file_atomic(p, js, strlen(js));
    if (rc == 0) ckpt_sums_add_buf(sums, "train_state.json", js, strlen(js));
    free(js);
    if (rc != 0) goto ioerr;
    // Last, so a directory with checksums.txt has every file it lists (and a kill before
    // the rename below leaves only a .tmp-* directory anyway).
    snprintf(p, sizeof p, "%s/%s", tmp, CKPT_SUMS_NAME);
    if (ckpt_sums_write(tmp, sums) != 0) goto ioerr;
    // A sharded write's marker goes only now that every part is in (ckpt_dir.h).
    snprintf(p, sizeof p, "%s/%s", tmp, CKPT_INCOMPLETE_NAME);
    if (unlink(p) != 0 && errno != ENOENT) goto ioerr;
    // Complete and durable: publish it.
    if (fsync_dir(tmp) != 0) goto ioerr;
    if (is_dir(fin)) {   // same step written before (e.g. a run restarted with resume=never)
        snprintf(p, sizeof p, "%s/.tmp-del-step-%08ld", ckdir, st->step);
        if (rename(fin, p) == 0) rm_rf(p);
    }
    snprintf(p, sizeof p, "%s", tmp);
    if (rename(tmp, fin) != 0 || fsync_dir(ckdir) != 0) goto ioerr;
    snprintf(p, sizeof p, "%s/latest", ckdir);
    char name[64];
    int nl = snprintf(name, sizeof name, "step-%08ld\n", st->step);
    if (write_file_atomic(p, name, (size_t)nl) != 0) goto ioerr;
    snprintf(last, lastlen, "%s", fin);
    ckpt_retention(ckdir, keep_last, keep_every);
    return 0;
ioerr:
    snprintf(errmsg, errlen, "writing checkpoint %s: %s (%s)", fin, strerror(errno), p);
    return -1;
}

int ckpt_temp_dir(const char *ckdir, long step, char *tmp, size_t tmplen, char *errmsg, size_t errlen) {
    if (mkdir_p(ckdir) != 0) return snprintf(errmsg, errlen, "cannot create %s", ckdir), -1;
    snprintf(tmp, tmplen, "%s/.tmp-step-%08ld", ckdir, step);
    rm_rf(tmp);
    if (mkdir(tmp, 0755) != 0) return snprintf(errmsg, errlen, "cannot create %s: %s", tmp, strerror(errno)), -1;
    return 0;
}

static int write_all(CkptWriter *w) {
    const ParamTable *t = w->t;
    const TrainState *st = &w->st;
    char tmp[4600], p[4800];
    if (ckpt_temp_dir(w->pol.ckdir, st->step, tmp, sizeof tmp, w->errmsg, sizeof w->errmsg) != 0) return -1;
    StWrite *ws = xcalloc(2 * (size_t)t->n, sizeof(StWrite));
    char **names = xcalloc(2 * (size_t)t->n, sizeof(char *));
    char meta[256];
    // Content checksums (ckpt_verify.h), taken from the bytes as they are written.
    CkptSums sums = {0};
    StSums ss;
    int rc = 0;
    for (int file = 0; file < 2 && rc == 0; file++) {
        const int n = ckpt_file_tensors(t, file, st, ws, names, meta, sizeof meta);
        const float *base[3] = {w->p, w->m, w->v};
        if (!w->fetch)   // from the snapshot; ckpt_commit_fetch: fetched by fill_tensor in turn
            for (int i = 0; i < n; i++) ws[i].data = base[file + i / t->n] + t->p[i % t->n].offset;
        FillCtx fc = {w, file};
        const char *fname = file == 0 ? "model.safetensors" : "optim.safetensors";
        snprintf(p, sizeof p, "%s/%s", tmp, fname);
        rc = st_write_sums(p, ws, n, meta, fill_tensor, &fc, CKPT_SUM_CHUNK, &ss);
        if (rc == 0) ckpt_sums_add_st(&sums, fname, ws, &ss);
        free(ss.r);
        if (file == 0) ckpt_test_pause();
    }
    for (int i = 0; i < 2 * t->n; i++) free(names[i]);
    free(names);
    free(ws);
    if (rc != 0) {
        snprintf(w->errmsg, sizeof w->errmsg, "writing checkpoint %s/step-%08ld: %s (%s)", w->pol.ckdir, st->step,
                 strerror(errno), p);
        ckpt_sums_free(&sums);
        return -1;
    }
    rc = ckpt_publish(w->pol.ckdir, tmp, st, &sums, w->pol.keep_last, w->pol.keep_every, w->last, sizeof w->last, w->errmsg,
                      sizeof w->errmsg);
    ckpt_sums_free(&sums);
    return rc;
}

static void *writer_main(void *arg) {
    CkptWriter *w = arg;
    double t0 = now_seconds();
    w->failed = write_all(w) != 0;
    w->seconds = now_seconds() - t0;
    return NULL;
}

double ckpt_wait(CkptWriter *w) {
    if (!w->running) return 0;
    if (w->threaded) pthread_join(w->th, NULL);
    w->running = 0;
    if (w->failed) die("%s", w->errmsg);
    return w->seconds;
}

void ckpt_snapshot_buffers(CkptWriter *w, float **params, float **m, float **v) {
    ckpt_wait(w);
    if (!w->p) {
        w->p = xmalloc_aligned(sizeof(float) * w->t->total);
        w->m = xmalloc_aligned(sizeof(float) * w->t->total);
        w->v = xmalloc_aligned(sizeof(float) * w->t->total);
    }
    *params = w->p;
    *m = w->m;
    *v = w->v;
}

static void commit(CkptWriter *w, const TrainState *st, int async) {
    ckpt_wait(w);
    free(w->st.recipe_yaml);
    w->st = *st;
    w->st.recipe_yaml = xstrdup(st->recipe_yaml ? st->recipe_yaml : "");
    w->running = 1;
    w->failed = 0;
    w->threaded = async;
    if (async) {
        if (pthread_create(&w->th, NULL, writer_main, w) != 0) die("cannot start the checkpoint thread");
    } else {
        writer_main(w);
    }
}

void ckpt_commit(CkptWriter *w, const TrainState *st) { commit(w, st, w->pol.async); }

void ckpt_commit_fetch(CkptWriter *w, const TrainState *st, CkptFetch fetch, void *ctx) {
    ckpt_wait(w);
    w->fetch = fetch;
    w->fetch_ctx = ctx;
    commit(w, st, 0);
    ckpt_wait(w);   // dies if the write failed
    w->fetch = NULL;
    w->fetch_ctx = NULL;
}

const char *ckpt_last_path(const CkptWriter *w) { return w->last; }

void ckpt_writer_free(CkptWriter *w) {
    if (!w) return;
    ckpt_wait(w);
    free(w->p);
    free(w->m);
    free(w->v);
    free(w->st.recipe_yaml);
    free(w);
}
