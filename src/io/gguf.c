// gguf.c: the streaming GGUF v3 writer (gguf.h). Metadata and the tensor table live in
// memory (the tokenizer's 100k strings are the largest part, a few MB); tensor data is
// converted and written one piece at a time as the caller hands it over.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf.h"
#include "util/common.h"

enum { GGUF_T_U32 = 4, GGUF_T_I32 = 5, GGUF_T_F32 = 6, GGUF_T_BOOL = 7, GGUF_T_STR = 8, GGUF_T_ARR = 9 };

typedef struct {
    char *name;
    GgmlType type;
    int64_t rows, cols;
    uint64_t offset, nbytes;
} GgufTensor;

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

struct GgufWriter {
    Buf kv;             // the encoded kv pairs
    uint64_t n_kv;
    GgufTensor *t;
    int n_t, cap_t;
    uint64_t data_bytes;    // data section size so far (aligned)
    char *path, *tmp;
    FILE *f;
    int cur;                // tensor being written
    int64_t cur_rows;       // its rows written so far
    uint8_t *conv;          // conversion buffer
    size_t conv_cap;
};

static void buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0) return;   // src may be NULL then (no kv pairs yet): memcpy must not see it
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 4096;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void buf_u32(Buf *b, uint32_t v) { buf_put(b, &v, 4); }   // little-endian hosts only (x86-64, arm64)
static void buf_u64(Buf *b, uint64_t v) { buf_put(b, &v, 8); }
static void buf_str(Buf *b, const char *s) {
    size_t n = strlen(s);
    buf_u64(b, n);
    buf_put(b, s, n);
}

GgufWriter *gguf_new(void) { return xcalloc(1, sizeof(GgufWriter)); }

static void kv_key(GgufWriter *g, const char *key, uint32_t type) {
    buf_str(&g->kv, key);
    buf_u32(&g->kv, type);
    g->n_kv++;
}
void gguf_kv_str(GgufWriter *g, const char *key, const char *v) { kv_key(g, key, GGUF_T_STR); buf_str(&g->kv, v); }
void gguf_kv_u32(GgufWriter *g, const char *key, uint32_t v) { kv_key(g, key, GGUF_T_U32); buf_u32(&g->kv, v); }
void gguf_kv_f32(GgufWriter *g, const char *key, float v) { kv_key(g, key, GGUF_T_F32); buf_put(&g->kv, &v, 4); }
void gguf_kv_bool(GgufWriter *g, const char *key, int v) {
    kv_key(g, key, GGUF_T_BOOL);
    uint8_t b = v != 0;
    buf_put(&g->kv, &b, 1);
}
void gguf_kv_str_array(GgufWriter *g, const char *key, const char *const *v, size_t n) {
    kv_key(g, key, GGUF_T_ARR);
    buf_u32(&g->kv, GGUF_T_STR);
    buf_u64(&g->kv, n);
    for (size_t i = 0; i < n; i++) buf_str(&g->kv, v[i]);
}
void gguf_kv_i32_array(GgufWriter *g, const char *key, const int32_t *v, size_t n) {
    kv_key(g, key, GGUF_T_ARR);
    buf_u32(&g->kv, GGUF_T_I32);
    buf_u64(&g->kv, n);
    buf_put(&g->kv, v, 4 * n);
}

size_t gguf_row_bytes(GgmlType t, int64_t n) {
    switch (t) {
    case GGML_F32: return (size_t)n * 4;
    case GGML_F16:
    case GGML_BF16: return (size_t)n * 2;
    case GGML_Q8_0: return (size_t)(n / GGUF_Q8_0_BLOCK) * (2 + GGUF_Q8_0_BLOCK);
    }
    return 0;
}

static uint64_t align_up(uint64_t x) { return (x + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN; }

int gguf_add_tensor(GgufWriter *g, const char *name, GgmlType type, int64_t rows, int64_t cols) {
    if (g->n_t == g->cap_t) {
        g->cap_t = g->cap_t ? 2 * g->cap_t : 64;
        g->t = xrealloc(g->t, sizeof(GgufTensor) * (size_t)g->cap_t);
    }
    GgufTensor *t = &g->t[g->n_t];
    *t = (GgufTensor){xstrdup(name), type, rows, cols, g->data_bytes, (uint64_t)rows * gguf_row_bytes(type, cols)};
    g->data_bytes = align_up(g->data_bytes + t->nbytes);
    return g->n_t++;
}

static void header(const GgufWriter *g, Buf *h) {
    buf_put(h, "GGUF", 4);
    buf_u32(h, 3);
    buf_u64(h, (uint64_t)g->n_t);
    buf_u64(h, g->n_kv);
    buf_put(h, g->kv.p, g->kv.n);
    for (int i = 0; i < g->n_t; i++) {
        const GgufTensor *t = &g->t[i];
        buf_str(h, t->name);
        int ndim = t->rows == 1 ? 1 : 2;
        buf_u32(h, (uint32_t)ndim);
        buf_u64(h, (uint64_t)t->cols);
        if (ndim == 2) buf_u64(h, (uint64_t)t->rows);
        buf_u32(h, (uint32_t)t->type);
        buf_u64(h, t->offset);
    }
    static const uint8_t zero[GGUF_ALIGN];
    buf_put(h, zero, align_up(h->n) - h->n);
}

uint64_t gguf_file_size(const GgufWriter *g) {
    Buf h = {0};
    header(g, &h);
    uint64_t n = h.n;
    free(h.p);
    return n + g->data_bytes;
}

int gguf_begin(GgufWriter *g, const char *path) {
    g->path = xstrdup(path);
    g->tmp = xmalloc(strlen(path) + 32);
    sprintf(g->tmp, "%s.tmp.%d", path, (int)getpid());
    g->f = fopen(g->tmp, "wb");
    if (!g->f) return -1;
    Buf h = {0};
    header(g, &h);
    size_t w = fwrite(h.p, 1, h.n, g->f);
    free(h.p);
    return w == h.n ? 0 : -1;
}

// ---- conversions (ggml's rounding) ------------------------------------------------------------
uint16_t gguf_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);   // NaN stays a quiet NaN
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

uint16_t gguf_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);                   // NaN
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);                  // rounds past 65504: inf
    if (a < 0x38800000) {                                                   // f16 subnormal or zero
        // value = a_float; f16 subnormal unit 2^-24: round(value * 2^24) to nearest even
        float v;
        memcpy(&v, &a, 4);
        float q = v * 16777216.0f;   // exact (power of two)
        float r = nearbyintf(q);     // default rounding mode: nearest even
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t m = a + 0xc8000000u;   // rebias exponent 127 -> 15 (a - (112 << 23))
    m += 0x0fff + ((m >> 13) & 1);  // round to nearest even on the 13 dropped bits
    return (uint16_t)(sign | (m >> 13));
}

void gguf_quantize_q8_0(const float *x, int64_t n, uint8_t *out) {
    for (int64_t b = 0; b < n / GGUF_Q8_0_BLOCK; b++, x += GGUF_Q8_0_BLOCK, out += 2 + GGUF_Q8_0_BLOCK) {
        float amax = 0;
        for (int j = 0; j < GGUF_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        uint16_t h = gguf_f32_to_f16(d);
        memcpy(out, &h, 2);
        for (int j = 0; j < GGUF_Q8_0_BLOCK; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

static size_t convert(GgmlType t, const float *src, int64_t n, uint8_t *dst) {
    switch (t) {
    case GGML_F32: memcpy(dst, src, (size_t)n * 4); break;
    case GGML_F16:
        for (int64_t i = 0; i < n; i++) { uint16_t h = gguf_f32_to_f16(src[i]); memcpy(dst + 2 * i, &h, 2); }
        break;
    case GGML_BF16:
        for (int64_t i = 0; i < n; i++) { uint16_t h = gguf_f32_to_bf16(src[i]); memcpy(dst + 2 * i, &h, 2); }
        break;
    case GGML_Q8_0: gguf_quantize_q8_0(src, n, dst); break;
    }
    return gguf_row_bytes(t, n);
}

static int pad_to(FILE *f, uint64_t have, uint64_t want) {
    static const uint8_t zero[GGUF_ALIGN];
    return have < want && fwrite(zero, 1, want - have, f) != want - have ? -1 : 0;
}

int gguf_write_rows(GgufWriter *g, const float *src, int64_t n_rows) {
    if (g->cur >= g->n_t) { errno = EINVAL; return -1; }
    GgufTensor *t = &g->t[g->cur];
    if (g->cur_rows + n_rows > t->rows) { errno = EINVAL; return -1; }
    size_t rb = gguf_row_bytes(t->type, t->cols);
    const int64_t step = 256;   // rows per conversion piece
    if (g->conv_cap < rb * step) { g->conv_cap = rb * step; g->conv = xrealloc(g->conv, g->conv_cap); }
    for (int64_t r = 0; r < n_rows; r += step) {
        int64_t k = n_rows - r < step ? n_rows - r : step;
        size_t nb = 0;
        for (int64_t i = 0; i < k; i++) nb += convert(t->type, src + (size_t)(r + i) * (size_t)t->cols, t->cols, g->conv + nb);
        if (fwrite(g->conv, 1, nb, g->f) != nb) return -1;
    }
    g->cur_rows += n_rows;
    if (g->cur_rows == t->rows) {   // tensor done: pad to the next one's aligned offset
        if (pad_to(g->f, t->offset + t->nbytes, align_up(t->offset + t->nbytes)) != 0) return -1;
        g->cur++;
        g->cur_rows = 0;
    }
    return 0;
}

static char *dir_name(const char *path) {
    char *d = xstrdup(path), *s = strrchr(d, '/');
    if (!s) { free(d); return xstrdup("."); }
    if (s == d) s[1] = 0;
    else *s = 0;
    return d;
}

int gguf_finish(GgufWriter *g) {
    if (g->cur != g->n_t) { errno = EINVAL; return -1; }
    int rc = fflush(g->f) == 0 && fsync(fileno(g->f)) == 0 ? 0 : -1;
    int e = errno;
    if (fclose(g->f) != 0 && rc == 0) { rc = -1; e = errno; }
    g->f = NULL;
    if (rc == 0 && rename(g->tmp, g->path) != 0) { rc = -1; e = errno; }
    if (rc == 0) {
        char *d = dir_name(g->path);
        fsync_dir(d);
        free(d);
        free(g->tmp);
        g->tmp = NULL;   // nothing left to remove
    }
    errno = e;
    return rc;
}

void gguf_free(GgufWriter *g) {
    if (!g) return;
    if (g->f) fclose(g->f);
    if (g->tmp) unlink(g->tmp);
    for (int i = 0; i < g->n_t; i++) free(g->t[i].name);
    free(g->t);
    free(g->kv.p);
    free(g->path);
    free(g->tmp);
    free(g->conv);
    free(g);
}
