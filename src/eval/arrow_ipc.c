// arrow_ipc.c: a minimal, bounds-checked reader of Apache Arrow IPC data (arrow_ipc.h).
//
// The format (arrow.apache.org/docs/format/Columnar.html, "Serialization and Interprocess
// Communication"): a stream is a sequence of messages, each an optional 0xFFFFFFFF
// continuation marker, an int32 metadata length, a flatbuffer `Message` (Schema.fbs,
// Message.fbs) and a body of Message.bodyLength bytes; a length of 0 ends the stream. The
// file format is "ARROW1\0\0", the same messages, a footer, its int32 length and "ARROW1":
// its messages are read in order up to the footer (the footer only indexes them). The
// first message is the Schema; each RecordBatch then gives, in a depth-first walk of the
// fields, one FieldNode (length, null count) per field and its buffers (validity bitmap,
// then offsets / data) as (offset, length) into the body. All little-endian.
//
// Flatbuffers are read by hand: a table at position t starts with an int32 soffset to its
// vtable (at t - soffset: uint16 vtable size, uint16 table size, a uint16 offset per
// field, 0 = absent); references (tables, vectors, strings) are uint32 offsets from where
// they are stored; vectors and strings start with a uint32 count.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/arrow_ipc.h"
#include "util/common.h"

// Arrow's Type union ids (Schema.fbs) this reader knows.
enum {
    T_NULL = 1, T_INT = 2, T_FLOAT = 3, T_BINARY = 4, T_UTF8 = 5, T_BOOL = 6, T_DECIMAL = 7, T_DATE = 8,
    T_TIME = 9, T_TIMESTAMP = 10, T_INTERVAL = 11, T_LIST = 12, T_STRUCT = 13, T_FIXED_BINARY = 15,
    T_FIXED_LIST = 16, T_MAP = 17, T_DURATION = 18, T_LARGE_BINARY = 19, T_LARGE_UTF8 = 20, T_LARGE_LIST = 21
};
enum { H_SCHEMA = 1, H_DICTIONARY = 2, H_RECORD_BATCH = 3 };

typedef struct {
    const unsigned char *b;
    size_t n;
    const char *path;
} Fb;   // one flatbuffer (a message's metadata) or the body, with the file for messages

__attribute__((format(printf, 2, 3), noreturn)) static void bad(const char *path, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die_input("%s: malformed Arrow IPC data: %s", path, msg);
}

static uint64_t le(const Fb *f, size_t at, int bytes, const char *what) {
    if (at > f->n || (size_t)bytes > f->n - at) bad(f->path, "%s at byte %zu runs past its %zu bytes", what, at, f->n);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | f->b[at + (size_t)i];
    return v;
}

// The field `id` of the table at t: its position, or 0 when absent.
static size_t fb_field(const Fb *f, size_t t, int id) {
    int64_t vt = (int64_t)t - (int32_t)le(f, t, 4, "table");
    if (vt < 0 || (uint64_t)vt >= f->n) bad(f->path, "a flatbuffer vtable offset points outside the metadata");
    size_t vsize = (size_t)le(f, (size_t)vt, 2, "vtable"), tsize = (size_t)le(f, (size_t)vt + 2, 2, "vtable");
    if (vsize < 4 || tsize < 4 || t + tsize > f->n) bad(f->path, "a flatbuffer table overruns the metadata");
    if ((size_t)(4 + 2 * id) + 2 > vsize) return 0;
    size_t off = (size_t)le(f, (size_t)vt + 4 + 2 * (size_t)id, 2, "vtable");
    if (off && off >= tsize) bad(f->path, "a flatbuffer field lies outside its table");
    return off ? t + off : 0;
}

static int64_t fb_int(const Fb *f, size_t t, int id, int bytes, int64_t dflt) {
    size_t p = fb_field(f, t, id);
    if (!p) return dflt;
    uint64_t v = le(f, p, bytes, "scalar");
    if (bytes < 8 && (v >> (8 * bytes - 1)) & 1) v |= ~0ull << (8 * bytes);   // sign-extend
    return (int64_t)v;
}

// The table, vector or string referenced by field `id`: its position, or 0 when absent.
static size_t fb_ref(const Fb *f, size_t t, int id) {
    size_t p = fb_field(f, t, id);
    if (!p) return 0;
    uint64_t to = p + le(f, p, 4, "reference");
    if (to >= f->n) bad(f->path, "a flatbuffer reference points outside the metadata");
    return (size_t)to;
}

// A vector at v of count elements of `size` bytes: its count, elements at v + 4.
static size_t fb_vec(const Fb *f, size_t v, size_t size, const char *what) {
    size_t count = (size_t)le(f, v, 4, what);
    if (count > (f->n - v - 4) / (size ? size : 1)) bad(f->path, "%s: %zu elements overrun the metadata", what, count);
    return count;
}

// Element i of a vector of tables at v.
static size_t fb_vec_table(const Fb *f, size_t v, size_t i) {
    size_t p = v + 4 + 4 * i;
    uint64_t to = p + le(f, p, 4, "reference");
    if (to >= f->n) bad(f->path, "a flatbuffer reference points outside the metadata");
    return (size_t)to;
}

// ---- the schema ----------------------------------------------------------------------------

typedef struct {
    ArrowKind kind;
    int width;          // INT: bytes; STRING: offset bytes; STRING_LIST: the list's offset bytes
    int sign;           // INT
    int child_width;    // STRING_LIST: the strings' offset bytes
    int nodes, buffers; // the field's FieldNodes and buffers, children included
} Layout;

// The nodes and buffers of the field at fld (recursively); its kind where it is one we read.
static Layout field_layout(const Fb *f, size_t fld, const char *name, int depth) {
    Layout L = {ARROW_OTHER, 0, 0, 0, 1, 0};
    if (depth > 32) bad(f->path, "column %s: types nested deeper than 32 levels", name);
    if (fb_ref(f, fld, 4)) bad(f->path, "column %s is dictionary-encoded (not supported)", name);
    int type = (int)fb_int(f, fld, 2, 1, 0);
    size_t ty = fb_ref(f, fld, 3), ch = fb_ref(f, fld, 5);
    size_t nch = ch ? fb_vec(f, ch, 4, "Field.children") : 0;
    switch (type) {
    case T_NULL: return L;
    case T_INT: {
        int bits = ty ? (int)fb_int(f, ty, 0, 4, 0) : 0;
        if (bits != 8 && bits != 16 && bits != 32 && bits != 64) bad(f->path, "column %s: Int of %d bits", name, bits);
        L.kind = ARROW_INT;
        L.width = bits / 8;
        L.sign = ty && fb_int(f, ty, 1, 1, 0);
        L.buffers = 2;
        return L;
    }
    case T_FLOAT: case T_BOOL: case T_DECIMAL: case T_DATE: case T_TIME: case T_TIMESTAMP: case T_INTERVAL:
    case T_FIXED_BINARY: case T_DURATION:
        L.buffers = 2;
        return L;
    case T_UTF8: case T_LARGE_UTF8: case T_BINARY: case T_LARGE_BINARY:
        if (type == T_UTF8 || type == T_LARGE_UTF8) L.kind = ARROW_STRING;
        L.width = type == T_UTF8 || type == T_BINARY ? 4 : 8;
        L.buffers = 3;
        return L;
    case T_LIST: case T_LARGE_LIST: case T_MAP: case T_FIXED_LIST: case T_STRUCT: {
        if (type != T_STRUCT && nch != 1) bad(f->path, "column %s: a list type with %zu children (want 1)", name, nch);
        L.buffers = type == T_STRUCT || type == T_FIXED_LIST ? 1 : 2;
        for (size_t i = 0; i < nch; i++) {
            Layout c = field_layout(f, fb_vec_table(f, ch, i), name, depth + 1);
            L.nodes += c.nodes;
            L.buffers += c.buffers;
            if ((type == T_LIST || type == T_LARGE_LIST) && c.kind == ARROW_STRING) {
                L.kind = ARROW_STRING_LIST;
                L.width = type == T_LIST ? 4 : 8;
                L.child_width = c.width;
            }
        }
        return L;
    }
    default: bad(f->path, "column %s: Arrow type id %d is not supported by this reader", name, type);
    }
}

typedef struct {
    ArrowTable *t;
    Layout *lay;
    int nodes, buffers;   // in a record batch, over all columns
    int have_schema, appending;
} Reader;

static void read_schema(Reader *r, const Fb *f, size_t sch) {
    if (r->have_schema++) bad(f->path, "a second Schema message");
    if (fb_int(f, sch, 0, 2, 0) != 0) bad(f->path, "big-endian data (only little-endian is read)");
    size_t fields = fb_ref(f, sch, 1);
    int n = fields ? (int)fb_vec(f, fields, 4, "Schema.fields") : 0;
    if (r->appending && n != r->t->ncols) bad(f->path, "%d columns, the first file had %d", n, r->t->ncols);
    r->lay = xcalloc((size_t)(n ? n : 1), sizeof(Layout));
    if (!r->appending) {
        r->t->ncols = n;
        r->t->cols = xcalloc((size_t)(n ? n : 1), sizeof(ArrowColumn));
    }
    for (int i = 0; i < n; i++) {
        size_t fld = fb_vec_table(f, fields, (size_t)i), nm = fb_ref(f, fld, 0);
        size_t len = nm ? fb_vec(f, nm, 1, "Field.name") : 0;
        char *name = xmalloc(len + 1);
        if (len) memcpy(name, f->b + nm + 4, len);
        name[len] = 0;
        r->lay[i] = field_layout(f, fld, name, 0);
        r->nodes += r->lay[i].nodes;
        r->buffers += r->lay[i].buffers;
        ArrowColumn *c = &r->t->cols[i];
        if (r->appending) {
            if (strcmp(c->name, name) || c->kind != r->lay[i].kind)
                bad(f->path, "column %d is %s, the first file's is %s (or of another type)", i, name, c->name);
            free(name);
        } else {
            c->name = name;
            c->kind = r->lay[i].kind;
        }
    }
}

// ---- record batches ------------------------------------------------------------------------

typedef struct {
    const Fb *meta;
    size_t nodes, bufs;   // the vectors' element positions
    int node, buf;        // the next ones to take
    Fb body;
} Batch;

static void take_node(Batch *b, int64_t *len, int64_t *nulls) {
    size_t p = b->nodes + 16 * (size_t)b->node++;
    *len = (int64_t)le(b->meta, p, 8, "FieldNode");
    *nulls = (int64_t)le(b->meta, p + 8, 8, "FieldNode");
    if (*len < 0 || *nulls < 0 || *nulls > *len || (uint64_t)*len > b->body.n * 8 + 64)
        bad(b->meta->path, "a FieldNode's length %lld / null count %lld is impossible", (long long)*len, (long long)*nulls);
}

// The next buffer: its bytes in the body and their number.
static const unsigned char *take_buf(Batch *b, size_t *len) {
    size_t p = b->bufs + 16 * (size_t)b->buf++;
    uint64_t off = le(b->meta, p, 8, "Buffer"), n = le(b->meta, p + 8, 8, "Buffer");
    if (off > b->body.n || n > b->body.n - off)
        bad(b->meta->path, "a buffer (offset %llu, %llu bytes) overruns its message body of %zu bytes",
            (unsigned long long)off, (unsigned long long)n, b->body.n);
    *len = (size_t)n;
    return b->body.b + off;
}

// The validity bitmap of a field of len rows (NULL when it has no nulls).
static const unsigned char *take_validity(Batch *b, int64_t len, int64_t nulls, const char *col) {
    size_t n;
    const unsigned char *v = take_buf(b, &n);
    if (!nulls) return NULL;
    if (n < (size_t)(len + 7) / 8) bad(b->meta->path, "column %s: a validity bitmap of %zu bytes for %lld rows", col, n, (long long)len);
    return v;
}

static int is_null(const unsigned char *valid, int64_t i) { return valid && !((valid[i / 8] >> (i % 8)) & 1); }

// len + 1 offsets of `width` bytes, non-decreasing, within [0, limit] (limit < 0: unchecked).
static int64_t *take_offsets(Batch *b, int64_t len, int width, int64_t limit, const char *col) {
    size_t n;
    const unsigned char *p = take_buf(b, &n);
    int64_t *o = xmalloc(sizeof(int64_t) * (size_t)(len + 1));
    if (len == 0 && n == 0) { o[0] = 0; return o; }
    if (n / (size_t)width < (size_t)len + 1) bad(b->meta->path, "column %s: %zu bytes of offsets for %lld rows", col, n, (long long)len);
    Fb buf = {p, n, b->meta->path};
    for (int64_t i = 0; i <= len; i++) {
        uint64_t v = le(&buf, (size_t)i * (size_t)width, width, "offsets");
        o[i] = width == 4 ? (int64_t)(int32_t)v : (int64_t)v;
        if (o[i] < 0 || (i && o[i] < o[i - 1]) || (limit >= 0 && o[i] > limit))
            bad(b->meta->path, "column %s: offset %lld at row %lld is out of order or past its data", col, (long long)o[i], (long long)i);
    }
    return o;
}

// len strings (a validity bitmap, offsets, bytes) appended to *dst from index *n.
static void take_strings(Batch *b, int64_t len, int64_t nulls, int width, const char *col, char ***dst, int64_t *n) {
    const unsigned char *valid = take_validity(b, len, nulls, col);
    size_t dn;
    int64_t *o = take_offsets(b, len, width, -1, col);
    const unsigned char *data = take_buf(b, &dn);
    if ((uint64_t)o[len] > dn) bad(b->meta->path, "column %s: offsets reach byte %lld of %zu bytes of text", col, (long long)o[len], dn);
    *dst = xrealloc(*dst, sizeof(char *) * (size_t)(*n + len + 1));
    for (int64_t i = 0; i < len; i++) {
        char *s = NULL;
        if (!is_null(valid, i)) {
            size_t k = (size_t)(o[i + 1] - o[i]);
            if (memchr(data + o[i], 0, k)) bad(b->meta->path, "column %s: string %lld holds a NUL byte", col, (long long)(*n + i));
            s = xmalloc(k + 1);
            memcpy(s, data + o[i], k);
            s[k] = 0;
        }
        (*dst)[*n + i] = s;
    }
    *n += len;
    free(o);
}

static void take_ints(Batch *b, const Layout *L, int64_t len, int64_t nulls, ArrowColumn *c, int64_t row0, const char *col) {
    const unsigned char *valid = take_validity(b, len, nulls, col);
    size_t n;
    const unsigned char *p = take_buf(b, &n);
    if (n / (size_t)L->width < (size_t)len) bad(b->meta->path, "column %s: %zu bytes for %lld integers", col, n, (long long)len);
    Fb buf = {p, n, b->meta->path};
    for (int64_t i = 0; i < len; i++) {
        uint64_t v = le(&buf, (size_t)i * (size_t)L->width, L->width, "integers");
        if (L->sign && L->width < 8 && (v >> (8 * L->width - 1)) & 1) v |= ~0ull << (8 * L->width);
        if (!L->sign && L->width == 8 && v > (uint64_t)INT64_MAX) bad(b->meta->path, "column %s: %llu does not fit int64", col, (unsigned long long)v);
        c->i64[row0 + i] = (int64_t)v;
        c->null[row0 + i] = is_null(valid, i);
    }
}

static void take_list(Batch *b, const Layout *L, int64_t len, int64_t nulls, ArrowColumn *c, int64_t row0, const char *col) {
    const unsigned char *valid = take_validity(b, len, nulls, col);
    int64_t clen, cnulls;
    take_node(b, &clen, &cnulls);   // the child's node first: the list's offsets must stay within it
    int64_t *o = take_offsets(b, len, L->width, clen, col);
    char **child = NULL;
    int64_t nchild = 0;
    take_strings(b, clen, cnulls, L->child_width, col, &child, &nchild);
    int64_t base = c->off[row0];
    c->str = xrealloc(c->str, sizeof(char *) * (size_t)(base + o[len] - o[0] + 1));
    for (int64_t i = 0; i < len; i++) {
        c->null[row0 + i] = is_null(valid, i);
        c->off[row0 + i + 1] = c->off[row0 + i];
        for (int64_t k = o[i]; k < o[i + 1]; k++)
            if (!c->null[row0 + i]) c->str[c->off[row0 + i + 1]++] = child[k], child[k] = NULL;
    }
    for (int64_t k = 0; k < clen; k++) free(child[k]);
    free(child);
    free(o);
}

static void read_batch(Reader *r, const Fb *f, size_t rb, Fb body) {
    if (!r->have_schema) bad(f->path, "a RecordBatch before the Schema");
    if (fb_ref(f, rb, 3)) bad(f->path, "a compressed record batch (not supported: write it uncompressed)");
    int64_t rows = fb_int(f, rb, 0, 8, 0);
    size_t nv = fb_ref(f, rb, 1), bv = fb_ref(f, rb, 2);
    size_t nn = nv ? fb_vec(f, nv, 16, "RecordBatch.nodes") : 0, nb = bv ? fb_vec(f, bv, 16, "RecordBatch.buffers") : 0;
    if (nn != (size_t)r->nodes || nb != (size_t)r->buffers)
        bad(f->path, "a record batch with %zu field nodes and %zu buffers; its schema has %d and %d", nn, nb, r->nodes, r->buffers);
    if (rows < 0 || (uint64_t)rows > body.n * 8 + 64) bad(f->path, "a record batch of %lld rows", (long long)rows);
    Batch b = {f, nv + 4, bv + 4, 0, 0, body};
    ArrowTable *t = r->t;
    int64_t row0 = t->nrows;
    for (int i = 0; i < t->ncols; i++) {
        ArrowColumn *c = &t->cols[i];
        const Layout *L = &r->lay[i];
        int node0 = b.node, buf0 = b.buf;
        int64_t len = rows, nulls = 0;
        if (L->kind != ARROW_OTHER) {
            take_node(&b, &len, &nulls);
            if (len != rows) bad(f->path, "column %s: %lld values in a batch of %lld rows", c->name, (long long)len, (long long)rows);
            c->null = xrealloc(c->null, (size_t)(row0 + rows + 1));
        }
        if (L->kind == ARROW_STRING) {
            int64_t n = row0;
            take_strings(&b, len, nulls, L->width, c->name, &c->str, &n);
            for (int64_t k = 0; k < rows; k++) c->null[row0 + k] = c->str[row0 + k] == NULL;
        } else if (L->kind == ARROW_INT) {
            c->i64 = xrealloc(c->i64, sizeof(int64_t) * (size_t)(row0 + rows + 1));
            take_ints(&b, L, len, nulls, c, row0, c->name);
        } else if (L->kind == ARROW_STRING_LIST) {
            c->off = xrealloc(c->off, sizeof(int64_t) * (size_t)(row0 + rows + 1));
            if (row0 == 0) c->off[0] = 0;
            take_list(&b, L, len, nulls, c, row0, c->name);
        }
        b.node = node0 + L->nodes;   // past the column, whatever it held
        b.buf = buf0 + L->buffers;
    }
    t->nrows += rows;
}

// One message at *p (of the file's bytes before end): a Schema or a RecordBatch, read into
// r; *p moves past it. Returns 0 at the end-of-stream marker (or end).
static int read_message(Reader *r, const Fb *file, size_t *p, size_t end) {
    if (*p >= end) return 0;
    Fb whole = {file->b, end, file->path};
    int64_t mlen = (int32_t)le(&whole, *p, 4, "message length");
    *p += 4;
    if ((uint32_t)mlen == 0xFFFFFFFFu) {   // the continuation marker, then the length
        mlen = (int32_t)le(&whole, *p, 4, "message length");
        *p += 4;
    }
    if (mlen == 0) return 0;   // end of stream
    if (mlen < 8 || (size_t)mlen > end - *p)
        bad(file->path, "a message of %lld metadata bytes at byte %zu overruns the file", (long long)mlen, *p);
    Fb m = {file->b + *p, (size_t)mlen, file->path};
    size_t root = (size_t)le(&m, 0, 4, "Message");
    if (root >= m.n) bad(file->path, "a Message's root offset points outside it");
    int64_t version = fb_int(&m, root, 0, 2, 0), htype = fb_int(&m, root, 1, 1, 0), blen = fb_int(&m, root, 3, 8, 0);
    size_t hdr = fb_ref(&m, root, 2);
    *p += (size_t)mlen;
    if (version < 3) bad(file->path, "metadata version V%lld (V4 or later is read)", (long long)version + 1);
    if (blen < 0 || (uint64_t)blen > end - *p)
        bad(file->path, "a message body of %lld bytes at byte %zu overruns the file", (long long)blen, *p);
    Fb body = {file->b + *p, (size_t)blen, file->path};
    *p += (size_t)blen;
    if (!hdr && (htype == H_SCHEMA || htype == H_RECORD_BATCH)) bad(file->path, "a message without its header");
    if (htype == H_SCHEMA) read_schema(r, &m, hdr);
    else if (htype == H_RECORD_BATCH) read_batch(r, &m, hdr, body);
    else if (htype == H_DICTIONARY) bad(file->path, "a dictionary batch (dictionary-encoded columns are not supported)");
    else bad(file->path, "a message of header type %lld (want Schema or RecordBatch)", (long long)htype);
    return 1;
}

// The file format: the schema from the footer (Footer: version, schema, dictionaries,
// recordBatches; a Block is {int64 offset, int32 metadata length, pad, int64 body length}),
// then each record batch where its block says (a writer need not repeat the schema as a
// message: Arrow's JavaScript writer does not).
static void read_file_format(Reader *r, const Fb *file) {
    size_t n = file->n;
    if (n < 18 || memcmp(file->b + n - 6, "ARROW1", 6)) bad(file->path, "starts with ARROW1 but does not end with it (a truncated file?)");
    int64_t flen = (int32_t)le(file, n - 10, 4, "footer length");
    if (flen < 8 || (uint64_t)flen > n - 18) bad(file->path, "a footer of %lld bytes does not fit the file", (long long)flen);
    size_t fstart = n - 10 - (size_t)flen;
    Fb foot = {file->b + fstart, (size_t)flen, file->path};
    size_t root = (size_t)le(&foot, 0, 4, "Footer");
    if (root >= foot.n) bad(file->path, "the Footer's root offset points outside it");
    size_t sch = fb_ref(&foot, root, 1), dicts = fb_ref(&foot, root, 2), rbs = fb_ref(&foot, root, 3);
    if (!sch) bad(file->path, "a footer without a schema");
    if (dicts && fb_vec(&foot, dicts, 24, "Footer.dictionaries")) bad(file->path, "dictionary batches (not supported)");
    read_schema(r, &foot, sch);
    size_t nb = rbs ? fb_vec(&foot, rbs, 24, "Footer.recordBatches") : 0;
    for (size_t i = 0; i < nb; i++) {
        uint64_t off = le(&foot, rbs + 4 + 24 * i, 8, "Block");
        if (off < 8 || off >= fstart) bad(file->path, "record batch %zu's block offset %llu is outside the file's messages", i, (unsigned long long)off);
        size_t p = (size_t)off;   // (a Schema there: "a second Schema message")
        if (!read_message(r, file, &p, fstart)) bad(file->path, "record batch %zu's block points at an end-of-stream marker", i);
    }
}

void arrow_read_append(const char *path, ArrowTable *t) {
    size_t n;
    char *data = read_file_all(path, &n);
    if (!data) die_input("%s: cannot read", path);
    Fb file = {(const unsigned char *)data, n, path};
    Reader r = {t, NULL, 0, 0, 0, t->path != NULL};
    if (!t->path) t->path = xstrdup(path);
    if (n >= 6 && !memcmp(data, "ARROW1", 6)) read_file_format(&r, &file);
    else {   // the stream format: a Schema message, then record batches
        size_t p = 0;
        while (read_message(&r, &file, &p, n)) {}
        if (!r.have_schema) bad(path, "no Schema message");
    }
    free(r.lay);
    free(data);
}

void arrow_read(const char *path, ArrowTable *t) {
    memset(t, 0, sizeof *t);
    arrow_read_append(path, t);
}

const ArrowColumn *arrow_column(const ArrowTable *t, const char *name) {
    for (int i = 0; i < t->ncols; i++)
        if (!strcmp(t->cols[i].name, name)) return &t->cols[i];
    return NULL;
}

void arrow_free(ArrowTable *t) {
    for (int i = 0; i < t->ncols; i++) {
        ArrowColumn *c = &t->cols[i];
        int64_t ns = c->kind == ARROW_STRING ? t->nrows : c->kind == ARROW_STRING_LIST && c->off ? c->off[t->nrows] : 0;
        for (int64_t k = 0; k < ns; k++) free(c->str[k]);
        free(c->str);
        free(c->off);
        free(c->i64);
        free(c->null);
        free(c->name);
    }
    free(t->cols);
    free(t->path);
    memset(t, 0, sizeof *t);
}
