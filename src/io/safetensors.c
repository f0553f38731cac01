// safetensors.c: see safetensors.h.
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/common.h"
#include "util/crc32c.h"

#define ST_MAX_HEADER (100u << 20)   // safetensors' own limit on the JSON header

size_t st_dtype_size(const char *dt) {
    static const struct { const char *n; size_t s; } T[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
        {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(T[i].n, dt)) return T[i].s;
    return 0;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int cmp_begin(const void *a, const void *b) {
    const StTensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

int st_open(StFile *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) { close(fd); return fail(err, errlen, "%s: cannot stat", path); }
    size_t fsize = (size_t)sb.st_size;
    if (fsize < 8) { close(fd); return fail(err, errlen, "%s: truncated (%zu bytes; a safetensors file starts with an 8-byte header length)", path, fsize); }
    void *map = mmap(NULL, fsize, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return fail(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
    f->map = map;
    f->map_len = fsize;
    f->path = xstrdup(path);
    const uint8_t *base = map;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)base[i] << (8 * i);
    if (hlen > ST_MAX_HEADER || hlen > fsize - 8) {
        st_close(f);
        return fail(err, errlen, "%s: header length %llu exceeds the file (%zu bytes) or the 100 MB limit: truncated or not safetensors",
                    path, (unsigned long long)hlen, fsize);
    }
    char *hjson = xmalloc(hlen + 1);
    memcpy(hjson, base + 8, hlen);
    hjson[hlen] = 0;
    cJSON *root = cJSON_Parse(hjson);
    free(hjson);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        st_close(f);
        return fail(err, errlen, "%s: header is not a JSON object", path);
    }
    size_t data_len = fsize - 8 - hlen;
    f->data = base + 8 + hlen;
    int cap = cJSON_GetArraySize(root);
    f->t = xcalloc((size_t)cap + 1, sizeof(StTensor));
    const cJSON *it;
    int rc = 0;
    cJSON_ArrayForEach(it, root) {
        if (!strcmp(it->string, "__metadata__")) {
            f->metadata_json = cJSON_PrintUnformatted(it);
            continue;
        }
        StTensor *t = &f->t[f->n];
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            rc = fail(err, errlen, "%s: tensor '%s': expected {dtype: string, shape: [ints], data_offsets: [begin, end]}", path, it->string);
            break;
        }
        size_t esize = st_dtype_size(dt->valuestring);
        if (!esize) { rc = fail(err, errlen, "%s: tensor '%s': unknown dtype '%s'", path, it->string, dt->valuestring); break; }
        snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > ST_MAX_DIMS) { rc = fail(err, errlen, "%s: tensor '%s': %d dims (max %d)", path, it->string, t->ndim, ST_MAX_DIMS); break; }
        // numel with overflow checks: a header may claim absurd shapes
        size_t numel = 1;
        int bad = 0;
        for (int d = 0; d < t->ndim; d++) {
            const cJSON *x = cJSON_GetArrayItem(sh, d);
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble != floor(x->valuedouble) || x->valuedouble > 9.0e15) { bad = 1; break; }
            t->shape[d] = (int64_t)x->valuedouble;
            if (t->shape[d] && numel > SIZE_MAX / (size_t)t->shape[d]) { bad = 1; break; }
            numel *= (size_t)t->shape[d];
        }
        const cJSON *b0 = cJSON_GetArrayItem(off, 0), *b1 = cJSON_GetArrayItem(off, 1);
        if (bad || !cJSON_IsNumber(b0) || !cJSON_IsNumber(b1) || b0->valuedouble < 0 || b1->valuedouble < b0->valuedouble ||
            b1->valuedouble > 9.0e15 || b0->valuedouble != floor(b0->valuedouble) ||
            b1->valuedouble != floor(b1->valuedouble)) {   // (size_t) of a huge double is UB (fuzz)
            rc = fail(err, errlen, "%s: tensor '%s': bad shape or data_offsets", path, it->string);
            break;
        }
        t->begin = (size_t)b0->valuedouble;
        t->end = (size_t)b1->valuedouble;
        if (numel > SIZE_MAX / esize || t->end - t->begin != numel * esize) {
            rc = fail(err, errlen, "%s: tensor '%s': data_offsets span %zu bytes but shape x dtype needs %zu", path, it->string,
                      t->end - t->begin, numel * esize);
            break;
        }
        if (t->end > data_len) {
            rc = fail(err, errlen, "%s: tensor '%s': data ends at byte %zu but the file has %zu data bytes (truncated?)", path,
                      it->string, t->end, data_len);
            break;
        }
        t->name = xstrdup(it->string);
        f->n++;
    }
    cJSON_Delete(root);
    if (rc == 0) {
        // Tensors must not overlap (the format requires a dense, ordered data section).
        StTensor *sorted = xmalloc(sizeof(StTensor) * (size_t)(f->n ? f->n : 1));
        memcpy(sorted, f->t, sizeof(StTensor) * (size_t)f->n);
        qsort(sorted, (size_t)f->n, sizeof(StTensor), cmp_begin);
        for (int i = 1; i < f->n; i++)
            if (sorted[i].begin < sorted[i - 1].end) {
                rc = fail(err, errlen, "%s: tensors '%s' and '%s' overlap", path, sorted[i - 1].name, sorted[i].name);
                break;
            }
        free(sorted);
    }
    if (rc != 0) st_close(f);
    return rc;
}

void st_close(StFile *f) {
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->metadata_json);
    free(f->path);
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

size_t st_numel(const StTensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400), (int)e - 25);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits |= s;
    memcpy(&v, &bits, 4);
    return v;
}

void st_release(const StFile *f, const StTensor *t) {
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !f->map) return;
    const uintptr_t lo = (uintptr_t)(f->data + t->begin) / (uintptr_t)pg * (uintptr_t)pg;
    const uintptr_t hi = (uintptr_t)(f->data + t->end);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);   // advice only: a failure changes nothing read
}

int st_read_f32(const StFile *f, const StTensor *t, float *dst) {
    const uint8_t *src = f->data + t->begin;
    size_t n = st_numel(t);
    if (!strcmp(t->dtype, "F32")) {
        memcpy(dst, src, n * 4);
    } else if (!strcmp(t->dtype, "BF16")) {
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            memcpy(&dst[i], &bits, 4);
        }
    } else if (!strcmp(t->dtype, "F16")) {
        for (size_t i = 0; i < n; i++) dst[i] = half_to_float((uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)));
    } else if (!strcmp(t->dtype, "F64")) {
        for (size_t i = 0; i < n; i++) {
            double x;
            memcpy(&x, src + 8 * i, 8);
            dst[i] = (float)x;
        }
    } else {
        return -1;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int st_write(const char *path, const StWrite *ts, int n, const char *metadata) {
    return st_write_fill(path, ts, n, metadata, NULL, NULL);
}

int st_write_fill(const char *path, const StWrite *ts, int n, const char *metadata, StFill fill, void *ctx) {
    return st_write_sums(path, ts, n, metadata, fill, ctx, 0, NULL);
}

static void sums_add(StSums *s, int tensor, size_t begin, size_t end, uint32_t crc) {
    if (s->n == s->cap) s->r = xrealloc(s->r, sizeof(StRegion) * (size_t)(s->cap = s->cap ? 2 * s->cap : 64));
    s->r[s->n++] = (StRegion){tensor, begin, end, crc};
}

char *st_header(const StWrite *ts, int n, const char *metadata, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    if (metadata) {
        cJSON *md = cJSON_Parse(metadata);
        if (md) cJSON_AddItemToObject(root, "__metadata__", md);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", ts[i].dtype);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < ts[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)ts[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + ts[i].nbytes)));
        off += ts[i].nbytes;
        cJSON_AddItemToObject(root, ts[i].name, e);
    }
    char *hjson = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t hlen = strlen(hjson), padded = (hlen + 7) / 8 * 8;   // data section 8-byte aligned
    char *hbuf = xmalloc(padded + 8);
    for (int i = 0; i < 8; i++) hbuf[i] = (char)((uint64_t)padded >> (8 * i));
    memcpy(hbuf + 8, hjson, hlen);
    memset(hbuf + 8 + hlen, ' ', padded - hlen);
    free(hjson);
    *len = padded + 8;
    return hbuf;
}

void st_regions(const StWrite *ts, int n, size_t hlen, size_t chunk, StSums *sums) {
    memset(sums, 0, sizeof *sums);
    sums_add(sums, -1, 0, hlen, 0);
    size_t pos = hlen;
    for (int i = 0; i < n; i++) {
        size_t o = 0, len = ts[i].nbytes;
        do {   // an empty tensor still gets its (empty) region: every tensor is listed
            size_t k = len - o < chunk ? len - o : chunk;
            sums_add(sums, i, pos + o, pos + o + k, 0);
            o += k;
        } while (o < len);
        pos += len;
    }
    sums->file_size = pos;
}

int st_write_sums(const char *path, const StWrite *ts, int n, const char *metadata, StFill fill, void *ctx, size_t chunk,
                  StSums *sums) {
    size_t hl;
    char *hbuf = st_header(ts, n, metadata, &hl);
    if (sums) {   // the layout first; each region's CRC from the bytes as they are written
        st_regions(ts, n, hl, chunk, sums);
        sums->r[0].crc = crc32c(0, hbuf, hl);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { free(hbuf); return -1; }
    int rc = write_all(fd, hbuf, hl);
    size_t pos = hl;
    int reg = 1;   // the next region of sums
    free(hbuf);
    size_t fill_max = 0;
    for (int i = 0; i < n; i++)
        if (!ts[i].data && ts[i].nbytes > fill_max) fill_max = ts[i].nbytes;
    void *fill_buf = fill && fill_max ? xmalloc(fill_max) : NULL;
    for (int i = 0; rc == 0 && i < n; i++) {
        const void *src = ts[i].data;
        if (!src && ts[i].nbytes) {
            if (!fill) { errno = EINVAL; rc = -1; break; }
            fill(ctx, i, fill_buf);
            src = fill_buf;
        }
        // Checksummed from the buffer written, not re-read: a later flip on disk shows.
        for (; sums && reg < sums->n && sums->r[reg].tensor == i; reg++)
            sums->r[reg].crc = crc32c(0, (const uint8_t *)src + (sums->r[reg].begin - pos), sums->r[reg].end - sums->r[reg].begin);
        pos += ts[i].nbytes;
        rc = write_all(fd, src, ts[i].nbytes);
    }
    free(fill_buf);
    if (rc == 0) rc = fsync(fd);
    int e = errno;
    if (close(fd) != 0 && rc == 0) { rc = -1; e = errno; }
    if (rc == 0 && rename(tmp, path) != 0) { rc = -1; e = errno; }
    if (rc != 0) { unlink(tmp); errno = e; return -1; }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { *slash = 0; fsync_dir(dir); } else fsync_dir(".");
    return 0;
}
