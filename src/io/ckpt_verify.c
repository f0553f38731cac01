// ckpt_verify.c: see ckpt_verify.h.
#include "io/ckpt_verify.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/ckpt_dir.h"
#include "util/common.h"
#include "util/crc32c.h"

#define SUMS_MAGIC "olmo.c checkpoint checksums 1 crc32c\n"
#define SUMS_MAX_REGIONS (1 << 22)   // 32 TiB of 8 MiB regions: a bound for hostile files

void ckpt_sums_free(CkptSums *s) {
    for (int i = 0; i < s->n; i++) {
        for (int k = 0; k < s->f[i].n; k++) free(s->f[i].r[k].name);
        free(s->f[i].r);
        free(s->f[i].name);
    }
    memset(s, 0, sizeof *s);
}

static CkptSumFile *add_file(CkptSums *s, const char *fname, size_t size) {
    if (s->n == CKPT_SUMS_MAX_FILES) return NULL;
    CkptSumFile *f = &s->f[s->n++];
    memset(f, 0, sizeof *f);
    f->name = xstrdup(fname);
    f->size = size;
    return f;
}

static void add_region(CkptSumFile *f, const char *name, size_t begin, size_t end, uint32_t crc) {
    if (f->n == f->cap) f->r = xrealloc(f->r, sizeof(CkptRegion) * (size_t)(f->cap = f->cap ? 2 * f->cap : 64));
    f->r[f->n++] = (CkptRegion){xstrdup(name), begin, end, crc};
}

// ---- writing ------------------------------------------------------------------------------
void ckpt_sums_add_st(CkptSums *s, const char *fname, const StWrite *ts, const StSums *st) {
    CkptSumFile *f = add_file(s, fname, st->file_size);
    if (!f) die("checkpoint checksums: more than %d files", CKPT_SUMS_MAX_FILES);
    for (int i = 0; i < st->n; i++)
        add_region(f, st->r[i].tensor < 0 ? "header" : ts[st->r[i].tensor].name, st->r[i].begin, st->r[i].end,
                   st->r[i].crc);
}

void ckpt_sums_add_buf(CkptSums *s, const char *fname, const void *data, size_t len) {
    CkptSumFile *f = add_file(s, fname, len);
    if (!f) die("checkpoint checksums: more than %d files", CKPT_SUMS_MAX_FILES);
    size_t o = 0;
    do {
        size_t k = len - o < CKPT_SUM_CHUNK ? len - o : CKPT_SUM_CHUNK;
        add_region(f, "json", o, o + k, crc32c(0, (const uint8_t *)data + o, k));
        o += k;
    } while (o < len);
}

int ckpt_sums_write(const char *dir, const CkptSums *s) {
    size_t cap = 4096, len = 0;
    char *txt = xmalloc(cap);
#define PUT(...)                                                                         \
    do {                                                                                 \
        int k_;                                                                          \
        while ((k_ = snprintf(txt + len, cap - len, __VA_ARGS__)) >= (int)(cap - len)) \
            txt = xrealloc(txt, cap *= 2);                                               \
        len += (size_t)k_;                                                               \
    } while (0)
    PUT("%s", SUMS_MAGIC);
    for (int i = 0; i < s->n; i++) {
        PUT("file %s %zu\n", s->f[i].name, s->f[i].size);
        for (int k = 0; k < s->f[i].n; k++) {
            const CkptRegion *r = &s->f[i].r[k];
            PUT("region %zu %zu %s %08x\n", r->begin, r->end, r->name, r->crc);
        }
    }
    PUT("end %08x\n", crc32c(0, txt, len));
#undef PUT
    // Written in place and fsync'd, without write_file_atomic's rename and directory fsync:
    // dir is the checkpoint's .tmp-step-N directory, published whole by its own rename after
    // the directory fsync (a rename + fsync fewer per checkpoint on the write path).
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_SUMS_NAME);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), rc = fd < 0 ? -1 : 0;
    for (size_t o = 0; rc == 0 && o < len;) {
        ssize_t w = write(fd, txt + o, len - o);
        if (w < 0 && errno != EINTR) rc = -1;
        if (w > 0) o += (size_t)w;
    }
    int e = errno;
    if (fd >= 0) {
        if (rc == 0 && fsync(fd) != 0) rc = -1, e = errno;
        if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    }
    free(txt);
    errno = e;
    return rc;
}

// ---- reading ------------------------------------------------------------------------------
static int failf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

// A decimal size_t with nothing else: strtoull alone takes "-1" and " 1".
static int parse_size(const char *s, size_t *out) {
    if (*s < '0' || *s > '9' || strlen(s) > 19) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (size_t)v;
    return 0;
}

int ckpt_sums_parse(const char *path, const char *txt, size_t len, CkptSums *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    // The last line "end XXXXXXXX\n" holds the CRC of everything before it: checked first,
    // so a flip anywhere in this file is reported as such, not as a data mismatch.
    size_t ml = strlen(SUMS_MAGIC);
    if (len < ml + 13 || memcmp(txt, SUMS_MAGIC, ml) != 0)
        return failf(err, errlen, "%s: not a checkpoint checksum file (first line is not '%.*s')", path, (int)ml - 1, SUMS_MAGIC);
    const char *tail = txt + len - 13;
    char want[16];   // compared as bytes: sscanf would read "A" for "a" (a flipped case bit)
    snprintf(want, sizeof want, "end %08x\n", crc32c(0, txt, len - 13));
    if (memcmp(tail, want, 13) != 0 || tail[-1] != '\n')
        return failf(err, errlen, "%s is corrupt: its last line is '%.12s', its own CRC-32C gives '%.12s' (changed or "
                     "truncated)", path, tail, want);
    // Every line: "file NAME SIZE" or "region BEGIN END NAME CRC". NAME has no spaces.
    size_t lineno = 1;
    CkptSumFile *f = NULL;
    const char *p = txt + ml, *stop = tail;
    char line[512], a[5][256];
    int nreg = 0;
    while (p < stop) {
        lineno++;
        const char *e = memchr(p, '\n', (size_t)(stop - p));
        size_t ll = (size_t)(e - p);
        if (ll >= sizeof line) { ckpt_sums_free(s); return failf(err, errlen, "%s:%zu: line too long", path, lineno); }
        memcpy(line, p, ll);
        line[ll] = 0;
        p = e + 1;
        int nf = 0;
        for (char *tok = strtok(line, " "); tok; tok = strtok(NULL, " ")) {
            if (nf == 5 || strlen(tok) >= sizeof a[0]) { nf = 6; break; }
            strcpy(a[nf++], tok);
        }
        size_t x, y;
        unsigned crc;
        if (nf == 3 && !strcmp(a[0], "file") && !parse_size(a[2], &x) && !strchr(a[1], '/') && strcmp(a[1], "..")) {
            if (f && (f->n == 0 || f->r[f->n - 1].end != f->size)) break;   // previous file not covered
            for (int i = 0; i < s->n; i++)
                if (!strcmp(s->f[i].name, a[1])) goto bad;
            if (!(f = add_file(s, a[1], x))) goto bad;
        } else if (nf == 5 && !strcmp(a[0], "region") && f && !parse_size(a[1], &x) && !parse_size(a[2], &y) &&
                   strlen(a[4]) == 8 && sscanf(a[4], "%8x", &crc) == 1 && ++nreg <= SUMS_MAX_REGIONS) {
            // Regions are consecutive from byte 0 and end inside the file.
            size_t at = f->n ? f->r[f->n - 1].end : 0;
            if (x != at || y < x || y > f->size) goto bad;
            add_region(f, a[3], x, y, crc);
        } else {
            goto bad;
        }
    }
    if (!f || p < stop || f->n == 0 || f->r[f->n - 1].end != f->size) {
        ckpt_sums_free(s);
        return failf(err, errlen, "%s: some file's regions do not cover it (or it lists no file)", path);
    }
    return 0;
bad:
    ckpt_sums_free(s);
    return failf(err, errlen, "%s:%zu: expected 'file NAME SIZE' or 'region BEGIN END NAME CRC32C' continuing the "
                 "previous region of a new file name", path, lineno);
}

int ckpt_sums_read(const char *dir, CkptSums *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_SUMS_NAME);
    size_t len;
    char *txt = read_file_all(path, &len);
    if (!txt) {
        if (errno == ENOENT) return 1;
        return failf(err, errlen, "%s: cannot read (%s)", path, strerror(errno));
    }
    int rc = ckpt_sums_parse(path, txt, len, s, err, errlen);
    free(txt);
    return rc;
}

const CkptSumFile *ckpt_sums_find(const CkptSums *s, const char *fname) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->f[i].name, fname)) return &s->f[i];
    return NULL;
}

// ---- checking ------------------------------------------------------------------------------
#define BLOCK ((size_t)256 << 10)   // checked then copied while still in L2

// memcpy with streaming stores where AVX-512 is there: the destination (parameters, moments)
// is not read back soon, and plain stores would first read every destination line (RFO),
// a third of the memory traffic of a load. Callers fence (_mm_sfence) before the data is used.
static void copy_stream(void *dst, const void *src, size_t n) {
#ifdef __AVX512F__
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) _mm512_stream_si512((void *)d, _mm512_loadu_si512(s));
    memcpy(d, s, n);
#else
    memcpy(dst, src, n);
#endif
}

// CRC of data[a, b), copying the parts of the spans that fall in it (spans from index *k).
static uint32_t crc_copy(const uint8_t *data, size_t a, size_t b, int do_crc, const CkptSpan *sp, int ns) {
    int lo = 0, hi = ns;   // first span ending after a
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (sp[mid].end <= a) lo = mid + 1;
        else hi = mid;
    }
    uint32_t c = 0;
    for (size_t x = a; x < b || (x == a && a == b); x += BLOCK) {
        size_t y = b - x < BLOCK ? b : x + BLOCK;
        if (do_crc) c = crc32c(c, data + x, y - x);
        for (int k = lo; k < ns && sp[k].begin < y; k++) {
            size_t u = sp[k].begin > x ? sp[k].begin : x, v = sp[k].end < y ? sp[k].end : y;
            if (u < v) copy_stream((uint8_t *)sp[k].dst + (u - sp[k].begin), data + u, v - u);
            if (sp[k].end <= y) lo = k + 1;
        }
        if (a == b) break;
    }
    return c;
}

int ckpt_sums_check(const CkptSumFile *f, int regions_max, const char *path, const uint8_t *data, size_t len,
                    const CkptSpan *spans, int nspans, char *err, size_t errlen) {
    if (f && f->size != len)
        return failf(err, errlen, "%s: %zu bytes, but %s records %zu (truncated or appended to after it was written)", path,
                     len, CKPT_SUMS_NAME, f->size);
    // Pieces: the recorded regions, or (nothing to check) the spans themselves.
    int n = f ? (regions_max >= 0 && regions_max < f->n ? regions_max : f->n) : nspans;
    int bad = n;   // lowest mismatching region: the same message whatever the thread count
    uint32_t bad_crc = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        size_t a = f ? f->r[i].begin : spans[i].begin, b = f ? f->r[i].end : spans[i].end;
        uint32_t c = crc_copy(data, a, b, f != NULL, spans, nspans);
        if (f && c != f->r[i].crc) {
#pragma omp critical(ckpt_sums_bad)
            if (i < bad) bad = i, bad_crc = c;
        }
    }
#ifdef __AVX512F__
    _mm_sfence();   // the streaming stores of copy_stream are visible from here on
#endif
    if (bad == n) return 0;
    const CkptRegion *r = &f->r[bad];
    const char *what = !strcmp(r->name, "header") ? "the safetensors header" : !strcmp(r->name, "json") ? "the text" : NULL;
    return failf(err, errlen, "%s: checksum mismatch in %s%s, bytes %zu-%zu of the file (CRC-32C %08x, %s records %08x): "
                 "the file changed after it was written", path, what ? what : "tensor ", what ? "" : r->name, r->begin,
                 r->end, bad_crc, CKPT_SUMS_NAME, r->crc);
}

// mmap a whole file read-only (an empty file: a non-NULL dummy). NULL with errno on failure.
static const uint8_t *map_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) { close(fd); return NULL; }
    *len = (size_t)sb.st_size;
    void *m = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : (void *)"";
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}
static void unmap_file(const uint8_t *m, size_t len) {
    if (len) munmap((void *)m, len);
}

static void split_path(const char *path, char *dir, size_t dirlen, const char **base) {
    const char *sl = strrchr(path, '/');
    *base = sl ? sl + 1 : path;
    if (sl) snprintf(dir, dirlen, "%.*s", (int)(sl - path), path);
    else snprintf(dir, dirlen, ".");
    if (!dir[0]) snprintf(dir, dirlen, "/");
}

int ckpt_verify_path(const char *path, int header_only, char *err, size_t errlen) {
    char dir[4200], p[4400];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    if (ckpt_is_incomplete(dir)) {   // a sharded write that never finished: no checksums to check against yet
        failf(err, errlen, "%s: in an incomplete sharded checkpoint (%s/%s: not every rank finished writing its part)",
              path, dir, CKPT_INCOMPLETE_NAME);
        ckpt_verify_hint(dir, err, errlen);
        return -1;
    }
    CkptSums s;
    int rc = ckpt_sums_read(dir, &s, err, errlen);
    if (rc < 0) {
        ckpt_verify_hint(dir, err, errlen);
        return -1;
    }
    const CkptSumFile *f = rc == 0 ? ckpt_sums_find(&s, base) : NULL;
    if (!f) {
        snprintf(p, sizeof p, "%s/train_state.json", dir);
        if (!header_only && access(p, F_OK) == 0)
            warnf("%s has no %s entry for %s (a checkpoint written before checksums): loading it unverified", dir,
                  CKPT_SUMS_NAME, base);
        ckpt_sums_free(&s);
        return 1;
    }
    size_t len;
    const uint8_t *m = map_file(path, &len);
    if (!m) {
        failf(err, errlen, "%s: cannot read (%s)", path, strerror(errno));
        ckpt_sums_free(&s);
        return -1;
    }
    rc = ckpt_sums_check(f, header_only ? 1 : -1, path, m, len, NULL, 0, err, errlen);
    unmap_file(m, len);
    ckpt_sums_free(&s);
    if (rc) ckpt_verify_hint(dir, err, errlen);
    return rc;
}

int ckpt_verify_dir(const char *dir, FILE *out, char *err, size_t errlen) {
    if (ckpt_is_incomplete(dir)) {
        snprintf(err, errlen, "%s: an incomplete sharded checkpoint (it holds %s: not every rank finished writing its "
                 "part)", dir, CKPT_INCOMPLETE_NAME);
        if (out) fprintf(out, "BAD %s\n", err);
        return -1;
    }
    CkptSums s;
    int rc = ckpt_sums_read(dir, &s, err, errlen);
    if (rc == 1) {
        snprintf(err, errlen, "%s: no %s (a checkpoint written before checksums): cannot be verified", dir, CKPT_SUMS_NAME);
        if (out) fprintf(out, "UNVERIFIED %s: no %s (written before checkpoints carried checksums)\n", dir, CKPT_SUMS_NAME);
        return 1;
    }
    if (rc < 0) {
        if (out) fprintf(out, "BAD %s\n", err);
        return -1;
    }
    // The files a checkpoint must have are all listed (a checksums.txt from elsewhere would not be).
    static const char *const need[] = {"model.safetensors", "optim.safetensors", "train_state.json"};
    for (int i = 0; i < 3; i++)
        if (!ckpt_sums_find(&s, need[i])) {
            snprintf(err, errlen, "%s/%s does not list %s", dir, CKPT_SUMS_NAME, need[i]);
            if (out) fprintf(out, "BAD %s\n", err);
            ckpt_sums_free(&s);
            return -1;
        }
    rc = 0;
    char path[4400], e[2048];
    for (int i = 0; i < s.n; i++) {
        const CkptSumFile *f = &s.f[i];
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        double t0 = now_seconds();
        size_t len = 0;
        const uint8_t *m = map_file(path, &len);
        int r = m ? ckpt_sums_check(f, -1, path, m, len, NULL, 0, e, sizeof e) : failf(e, sizeof e, "%s: cannot read (%s)", path, strerror(errno));
        if (m) unmap_file(m, len);
        double dt = now_seconds() - t0;
        if (out) {
            if (r == 0 && len < 100000000)
                fprintf(out, "ok  %s  %zu bytes, %d region%s\n", path, len, f->n, f->n > 1 ? "s" : "");
            else if (r == 0)
                fprintf(out, "ok  %s  %.2f GB, %d regions, %.2f GB/s\n", path, (double)len / 1e9, f->n,
                        dt > 0 ? (double)len / dt / 1e9 : 0.0);
            else
                fprintf(out, "BAD %s\n", e);
        }
        if (r && rc == 0) {
            snprintf(err, errlen, "%s", e);
            rc = -1;
        }
    }
    ckpt_sums_free(&s);
    return rc;
}

void ckpt_verify_hint(const char *dir, char *err, size_t errlen) {
    char d[4200], ck[4200], p[4400], e[2048];
    snprintf(d, sizeof d, "%s", dir);
    for (size_t l = strlen(d); l > 1 && d[l - 1] == '/'; l--) d[l - 1] = 0;
    const char *base;
    split_path(d, ck, sizeof ck, &base);
    long step = ckpt_step_of_name(base);
    if (step < 0) return;   // not a step-N directory of a run: nothing to point at
    int n;
    long *steps = ckpt_list_steps(ck, &n);
    size_t used = strlen(err);
    for (int i = 0; i < n; i++) {
        if (steps[i] >= step) continue;
        snprintf(p, sizeof p, "%s/step-%08ld", ck, steps[i]);
        if (ckpt_verify_dir(p, NULL, e, sizeof e) == 0) {
            snprintf(err + used, errlen - used, ". The newest earlier checkpoint that verifies is %s: resume from it with "
                     "train.resume=%s (for a stage transition: train.load_path=%s; nothing was written)", p, p, p);
            free(steps);
            return;
        }
    }
    free(steps);
    snprintf(err + used, errlen - used, ". No earlier checkpoint in %s verifies (nothing was written)", ck);
}
