// tfevents.c: see tfevents.h.
#include "train/tfevents.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/common.h"
#include "util/crc32c.h"

struct TfEvents {
    FILE *f;
};

static uint32_t masked_crc(const void *p, size_t n) {
    uint32_t c = crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

// Protobuf wire format: a growing byte buffer (an eval record of the OLMo 3 suite, ~250
// scalars with tags of up to ~60 bytes, is over 16 KiB).
typedef struct {
    uint8_t *b;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
    if (!n) return;
    if (b->n + n > b->cap) {
        b->cap = b->n + n > 2 * b->cap ? b->n + n : 2 * b->cap;
        b->b = xrealloc(b->b, b->cap);
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void varint(Buf *b, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}
static void key(Buf *b, int field, int wire) { varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void bytes_field(Buf *b, int field, const void *p, size_t n) {
    key(b, field, 2);
    varint(b, n);
    put(b, p, n);
}

static void write_record(TfEvents *t, const Buf *data) {
    uint64_t len = data->n;   // little-endian on every machine this builds for (x86-64, arm64)
    uint32_t lc = masked_crc(&len, 8), dc = masked_crc(data->b, data->n);
    fwrite(&len, 8, 1, t->f);
    fwrite(&lc, 4, 1, t->f);
    fwrite(data->b, 1, data->n, t->f);
    fwrite(&dc, 4, 1, t->f);
    fflush(t->f);
}

// Event{wall_time, step} and its tail (file_version or summary), already encoded in tail.
static void write_event(TfEvents *t, long step, const Buf *tail) {
    Buf e = {0};
    double wt = wall_time();
    key(&e, 1, 1);
    put(&e, &wt, 8);
    key(&e, 2, 0);
    varint(&e, (uint64_t)step);
    put(&e, tail->b, tail->n);
    write_record(t, &e);
    free(e.b);
}

TfEvents *tfevents_open(const char *dir) {
    if (mkdir_p(dir) != 0) {
        warnf("tensorboard: cannot create %s; no event file", dir);
        return NULL;
    }
    char host[256] = "host", path[4400];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/events.out.tfevents.%ld.%s.%ld", dir, (long)wall_time(), host, (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) {
        warnf("tensorboard: cannot create %s: %s; no event file", path, strerror(errno));
        return NULL;
    }
    TfEvents *t = xcalloc(1, sizeof *t);
    t->f = f;
    Buf tail = {0};
    bytes_field(&tail, 3, "brain.Event:2", 13);
    write_event(t, 0, &tail);
    free(tail.b);
    return t;
}

void tfevents_scalars(TfEvents *t, long step, int n, const char *const *tag, const double *value) {
    if (!t || n == 0) return;
    Buf v = {0}, s = {0}, tail = {0};
    for (int i = 0; i < n; i++) {
        float f = (float)value[i];
        v.n = 0;
        bytes_field(&v, 1, tag[i], strlen(tag[i]));
        key(&v, 2, 5);
        put(&v, &f, 4);
        bytes_field(&s, 1, v.b, v.n);    // Summary.value, repeated
    }
    bytes_field(&tail, 5, s.b, s.n);     // Event.summary
    write_event(t, step, &tail);
    free(v.b); free(s.b); free(tail.b);
}

void tfevents_close(TfEvents *t) {
    if (!t) return;
    fclose(t->f);
    free(t);
}
