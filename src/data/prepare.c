// prepare.c: the work of `olmo prepare` (prepare.h; the command is src/cli/cmd_prepare.c):
// turns JSONL / plain-text corpora into OLMo-core token files.
//
// Each input file is one *source* (named after its stem: news.jsonl.gz -> news). Its
// documents are tokenized, each followed by one EOS, and written as raw little-endian
// uint32 to OUTDIR/<source>.npy (train split) and OUTDIR/<source>.heldout.npy (held-out
// split), plus OUTDIR/manifest.json describing every output (read it with manifest.h).
//
// Determinism: the held-out decision is a hash of the document's bytes and the seed, so
// it does not depend on threads or input order; documents keep their input order; threads
// only tokenize documents of a batch in parallel, and the batch is written in order.
// So the output bytes are identical at any thread count.
//
// Atomicity: outputs are written to "<path>.tmp.<pid>" and renamed only after every
// source succeeded; the manifest is written last. On any error the temp files are removed
// (atexit), so a failed run leaves no new file that looks complete.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <omp.h>
#include <zlib.h>
#include <zstd.h>

#include "data/manifest.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "util/common.h"

#define PREPARE_FORMAT "olmo-prepare-v1"
// Documents are tokenized in batches of about this many text bytes, which bounds the
// memory held in token arrays while keeping every thread busy.
#define BATCH_BYTES (16u << 20)

enum { COMP_NONE, COMP_GZ, COMP_ZST };
enum { KIND_JSONL, KIND_TEXT };
enum { SPLIT_TRAIN, SPLIT_HELDOUT, NSPLITS };
static const char *SPLIT_NAME[NSPLITS] = {"train", "heldout"};
static const char *SPLIT_SUFFIX[NSPLITS] = {".npy", ".heldout.npy"};

typedef struct {
    char *path;       // as given / found (used in messages and the manifest)
    char *source;     // file stem
    int kind, comp;
    int64_t size, mtime_s, mtime_nsec;
} Input;

typedef struct {
    int64_t documents, tokens, utf8_bytes;
    char sha256[65];
    char *tmp_path, *final_path, *rel_path;
    FILE *f;
    EVP_MD_CTX *md;
} SplitOut;

typedef struct {
    const char *opts_hash;
    double frac;
    uint64_t seed;
    int skip_bad, nthreads;
    const char *outdir;
    const Tokenizer *tok;
} Options;

// Document status after parsing / tokenizing.
enum { DOC_OK, DOC_EMPTY, DOC_BAD_JSON, DOC_BAD_TEXT, DOC_BAD_UTF8 };

typedef struct {
    const char *text;   // points into the input buffer (text files) or `owned`
    char *owned;        // unescaped JSON string
    size_t len;
    int line;           // 1-based line of the JSONL record (1 for text files)
    int status;
    int split;
    size_t utf8_err;    // offset of the first invalid byte (DOC_BAD_UTF8)
    uint32_t *ids;
    size_t n, cap;
} Doc;

// ---------------------------------------------------------------------------------------
// Temp files: removed at exit unless renamed into place.

static char **g_tmp;
static int g_ntmp;

static void remove_temps(void) {
    for (int i = 0; i < g_ntmp; i++)
        if (g_tmp[i]) { unlink(g_tmp[i]); free(g_tmp[i]); g_tmp[i] = NULL; }
}

static void register_temp(const char *path) {
    static int registered = 0;
    if (!registered) { atexit(remove_temps); registered = 1; }
    g_tmp = xrealloc(g_tmp, (g_ntmp + 1) * sizeof *g_tmp);
    g_tmp[g_ntmp++] = xstrdup(path);
}

static void forget_temp(const char *path) {
    for (int i = 0; i < g_ntmp; i++)
        if (g_tmp[i] && !strcmp(g_tmp[i], path)) { free(g_tmp[i]); g_tmp[i] = NULL; }
}

// ---------------------------------------------------------------------------------------
// Inputs: files and directories (walked recursively in sorted order).

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

// Fills kind/comp/source from the file name. Returns 1 if the name has a known corpus
// extension (.jsonl/.json/.txt, optionally .gz/.zst), 0 otherwise (still usable as text).
static int classify(Input *in) {
    const char *base = strrchr(in->path, '/');
    base = base ? base + 1 : in->path;
    char *stem = xstrdup(base);
    in->comp = COMP_NONE;
    if (ends_with(stem, ".gz")) { in->comp = COMP_GZ; stem[strlen(stem) - 3] = 0; }
    else if (ends_with(stem, ".zst")) { in->comp = COMP_ZST; stem[strlen(stem) - 4] = 0; }
    int known = 1;
    in->kind = KIND_TEXT;
    if (ends_with(stem, ".jsonl")) { in->kind = KIND_JSONL; stem[strlen(stem) - 6] = 0; }
    else if (ends_with(stem, ".json")) { in->kind = KIND_JSONL; stem[strlen(stem) - 5] = 0; }
    else if (ends_with(stem, ".txt")) stem[strlen(stem) - 4] = 0;
    else known = 0;
    in->source = stem;
    return known;
}

// --source-from (PrepareOptions.source_from): how a file's source is named.
static PrepareSourceFrom g_source_from;

// The source name of `path`, found under the input argument `root`, by g_source_from:
// its stem (classify's), its directory's name, or its path under root with '/' -> '_'
// (a/part-0000.json.gz under dolma/cc -> a_part-0000). Replaces in->source.
static void name_source(Input *in, const char *path, const char *root) {
    if (g_source_from == SOURCE_FROM_STEM) return;
    size_t rl = strlen(root);
    const char *rel = strncmp(path, root, rl) ? path : path + rl;
    while (*rel == '/') rel++;
    if (!*rel) rel = path;   // the file itself was the argument
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    char *name;
    if (g_source_from == SOURCE_FROM_DIR) {
        if (slash) *slash = 0;
        const char *d = slash ? strrchr(dir, '/') : NULL;
        d = slash ? (d ? d + 1 : dir) : "";
        if (!*d || !strcmp(d, ".") || !strcmp(d, ".."))
            die_input("input %s: --source-from dir: the file has no directory to name its source", path);
        name = xstrdup(d);
    } else {
        const char *rs = strrchr(rel, '/');
        size_t dl = rs ? (size_t)(rs - rel) + 1 : 0;
        name = xmalloc(dl + strlen(in->source) + 1);
        memcpy(name, rel, dl);
        strcpy(name + dl, in->source);
        for (char *c = name; *c; c++)
            if (*c == '/') *c = '_';
    }
    free(dir);
    free(in->source);
    in->source = name;
}

static void add_input(Input **ins, int *n, const char *path, const char *root, const struct stat *st, int from_dir) {
    Input in = {0};
    in.path = xstrdup(path);
    int known = classify(&in);
    if (from_dir && !known) { free(in.path); free(in.source); return; }
    name_source(&in, path, root);
    if (in.source[0] == 0) die_input("input %s: empty source name", path);
    in.size = (int64_t)st->st_size;
    in.mtime_s = (int64_t)st->st_mtim.tv_sec;   // two fields: ns since 1970 do not fit a double
    in.mtime_nsec = (int64_t)st->st_mtim.tv_nsec;
    *ins = xrealloc(*ins, (*n + 1) * sizeof **ins);
    (*ins)[(*n)++] = in;
}

static int name_cmp(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);   // byte order: independent of locale
}

// Real path of OUTDIR if it exists: a directory walk skips it, so `olmo prepare data -o
// data/tokens` does not read its own manifest.json as input.
static char *g_outdir_real;

static void collect(Input **ins, int *n, const char *path, const char *root, int from_dir) {
    struct stat st;
    if (stat(path, &st) != 0) die_input("input %s: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode)) { add_input(ins, n, path, root, &st, from_dir); return; }
    if (!S_ISDIR(st.st_mode)) die_input("input %s: not a regular file or directory", path);
    if (g_outdir_real) {
        char *rp = realpath(path, NULL);
        int same = rp && !strcmp(rp, g_outdir_real);
        free(rp);
        if (same) return;
    }
    struct dirent **ents;
    int k = scandir(path, &ents, NULL, name_cmp);
    if (k < 0) die_input("input %s: %s", path, strerror(errno));
    for (int i = 0; i < k; i++) {
        if (ents[i]->d_name[0] != '.') {
            size_t len = strlen(path) + strlen(ents[i]->d_name) + 2;
            char *child = xmalloc(len);
            snprintf(child, len, "%s%s%s", path, ends_with(path, "/") ? "" : "/", ents[i]->d_name);
            collect(ins, n, child, root, 1);
            free(child);
        }
        free(ents[i]);
    }
    free(ents);
}

// ---------------------------------------------------------------------------------------
// Reading (and decompressing) one input into a NUL-terminated buffer.

static char *read_input(const Input *in, size_t *len_out) {
    if (in->comp == COMP_NONE) {
        char *buf = read_file_all(in->path, len_out);
        if (!buf) die_input("input %s: %s", in->path, strerror(errno));
        return buf;
    }
    if (in->comp == COMP_GZ) {
        gzFile gz = gzopen(in->path, "rb");
        if (!gz) die_input("input %s: cannot open", in->path);
        gzbuffer(gz, 1 << 20);
        // zlib passes non-gzip files through unchanged; a .gz that is not gzip is an error.
        if (gzdirect(gz)) die_input("input %s: not gzip data", in->path);
        size_t cap = 1 << 20, len = 0;
        char *buf = xmalloc(cap + 1);
        for (;;) {
            if (cap - len < (1 << 20)) { cap *= 2; buf = xrealloc(buf, cap + 1); }
            int got = gzread(gz, buf + len, (unsigned)(cap - len));
            if (got < 0) {
                int err;
                const char *msg = gzerror(gz, &err);
                die_input("input %s: corrupt gzip data (%s)", in->path, msg);
            }
            if (got == 0) break;
            len += (size_t)got;
        }
        // zlib reports a stream cut short only through gzerror after EOF.
        int err = Z_OK;
        const char *msg = gzerror(gz, &err);
        if (err != Z_OK && err != Z_STREAM_END) die_input("input %s: corrupt gzip data (%s)", in->path, msg);
        gzclose(gz);
        buf[len] = 0;
        *len_out = len;
        return buf;
    }
    size_t clen = 0;
    char *cbuf = read_file_all(in->path, &clen);
    if (!cbuf) die_input("input %s: %s", in->path, strerror(errno));
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    size_t cap = clen * 4 + (1 << 20), len = 0;
    char *buf = xmalloc(cap + 1);
    ZSTD_inBuffer zin = {cbuf, clen, 0};
    size_t ret = 0;
    while (zin.pos < zin.size) {
        if (cap - len < (1 << 20)) { cap *= 2; buf = xrealloc(buf, cap + 1); }
        ZSTD_outBuffer zout = {buf + len, cap - len, 0};
        ret = ZSTD_decompressStream(dctx, &zout, &zin);
        if (ZSTD_isError(ret)) die_input("input %s: corrupt zstd data (%s)", in->path, ZSTD_getErrorName(ret));
        len += zout.pos;
        if (zout.pos == 0 && ret != 0 && zin.pos == zin.size) break;
    }
    // Flush what the decoder still holds (output buffer may have been full).
    while (ret != 0) {
        if (cap - len < (1 << 20)) { cap *= 2; buf = xrealloc(buf, cap + 1); }
        ZSTD_outBuffer zout = {buf + len, cap - len, 0};
        ret = ZSTD_decompressStream(dctx, &zout, &zin);
        if (ZSTD_isError(ret)) die_input("input %s: corrupt zstd data (%s)", in->path, ZSTD_getErrorName(ret));
        len += zout.pos;
        if (zout.pos == 0 && ret != 0) die_input("input %s: truncated zstd data", in->path);
    }
    ZSTD_freeDCtx(dctx);
    free(cbuf);
    buf[len] = 0;
    *len_out = len;
    return buf;
}

// ---------------------------------------------------------------------------------------
// Held-out split: FNV-1a-64 over the 8 little-endian bytes of the seed followed by the
// document's text bytes, then the splitmix64 finalizer (FNV alone mixes its last bytes
// poorly into the high bits). Held out iff (h >> 11) * 2^-53 < frac.

static int is_heldout(const char *text, size_t len, uint64_t seed, double frac) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 8; i++) { h ^= (seed >> (8 * i)) & 0xff; h *= 0x100000001b3ULL; }
    for (size_t i = 0; i < len; i++) { h ^= (unsigned char)text[i]; h *= 0x100000001b3ULL; }
    h ^= h >> 30; h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27; h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return (double)(h >> 11) * (1.0 / 9007199254740992.0) < frac;
}

// ---------------------------------------------------------------------------------------
// Manifest helpers.

static void sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", md[i]);
    out[64] = 0;
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static const cJSON *find_by_source(const cJSON *arr, const char *source) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const char *s = jstr(e, "source");
        if (s && !strcmp(s, source)) return e;
    }
    return NULL;
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

// A source is up to date when the previous manifest recorded the same input (path, size,
// mtime) and options, and every output it listed still has the recorded size.
static int source_up_to_date(const cJSON *old, const Input *in, const Options *o) {
    if (!old) return 0;
    const cJSON *src = find_by_source(cJSON_GetObjectItemCaseSensitive(old, "sources"), in->source);
    if (!src) return 0;
    const char *oh = jstr(src, "options_hash");
    if (!oh || strcmp(oh, o->opts_hash)) return 0;
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(src, "inputs");
    if (cJSON_GetArraySize(ins) != 1) return 0;
    const cJSON *i0 = cJSON_GetArrayItem(ins, 0);
    const char *p = jstr(i0, "path");
    if (!p || strcmp(p, in->path) || jnum(i0, "size", -1) != (double)in->size ||
        jnum(i0, "mtime_s", -1) != (double)in->mtime_s || jnum(i0, "mtime_nsec", -1) != (double)in->mtime_nsec)
        return 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(old, "outputs")) {
        const char *s = jstr(e, "source"), *rel = jstr(e, "path");
        if (!s || strcmp(s, in->source)) continue;
        if (!rel) return 0;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", o->outdir, rel);
        if (file_size(full) != (int64_t)jnum(e, "tokens", -1) * 4) return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------
// Processing one source.

typedef struct {
    int64_t docs_seen, empty, bad, text_bytes;
    double t0;
} Progress;

static int g_tty;

static void progress_line(const char *source, int idx, int nsrc, const Progress *pr, int final) {
    double dt = now_seconds() - pr->t0;
    double mb = pr->text_bytes / 1e6;
    if (g_tty || final)
        fprintf(stderr, "%sprepare [%d/%d] %s: %lld docs, %.1f MB, %.1f MB/s%s", g_tty ? "\r\033[K" : "",
                idx + 1, nsrc, source, (long long)pr->docs_seen, mb, dt > 0 ? mb / dt : 0.0, final ? "\n" : "");
}

static void report_bad(const Input *in, const Doc *d, int skip_bad) {
    const char *what = d->status == DOC_BAD_JSON ? "malformed JSON"
                     : d->status == DOC_BAD_TEXT ? "missing or non-string \"text\" field"
                     : "invalid UTF-8";
    int line = d->line;
    char extra[64] = "";
    if (d->status == DOC_BAD_UTF8) {
        if (in->kind == KIND_TEXT)   // a text file is one document: find the line itself
            for (size_t i = 0; i < d->utf8_err; i++) line += d->text[i] == '\n';
        snprintf(extra, sizeof extra, " (text byte %zu)", d->utf8_err);
    }
    if (!skip_bad)
        die_input("%s:%d: %s%s (use --skip-bad to skip such records)", in->path, line, what, extra);
    warnf("%s:%d: %s%s: skipped", in->path, line, what, extra);
}

static void tokenize_batch(Doc *docs, int n, const Options *o) {
    uint32_t eos = tokenizer_eos_id(o->tok);
    #pragma omp parallel for schedule(dynamic, 1) num_threads(o->nthreads)
    for (int i = 0; i < n; i++) {
        Doc *d = &docs[i];
        if (d->status != DOC_OK) continue;
        if (tokenizer_encode(o->tok, d->text, d->len, 0, &d->ids, &d->n, &d->cap) != 0) {
            d->status = DOC_BAD_UTF8;
            d->utf8_err = tokenizer_utf8_error_offset(d->text, d->len);
            continue;
        }
        if (d->n == d->cap) { d->cap = d->cap * 2 + 1; d->ids = xrealloc(d->ids, d->cap * sizeof *d->ids); }
        d->ids[d->n++] = eos;
        d->split = is_heldout(d->text, d->len, o->seed, o->frac) ? SPLIT_HELDOUT : SPLIT_TRAIN;
    }
}

static void write_batch(const Input *in, Doc *docs, int n, SplitOut *outs, const Options *o, Progress *pr) {
    for (int i = 0; i < n; i++) {
        Doc *d = &docs[i];
        pr->docs_seen++;
        if (d->status == DOC_EMPTY) { pr->empty++; continue; }
        if (d->status != DOC_OK) { report_bad(in, d, o->skip_bad); pr->bad++; continue; }
        SplitOut *s = &outs[d->split];
        if (!s->f) {
            s->f = fopen(s->tmp_path, "wb");
            if (!s->f) die("cannot create %s: %s", s->tmp_path, strerror(errno));
            register_temp(s->tmp_path);
            setvbuf(s->f, NULL, _IOFBF, 1 << 20);
            s->md = EVP_MD_CTX_new();
            EVP_DigestInit_ex(s->md, EVP_sha256(), NULL);
        }
        // Token files are little-endian; every platform we build for is.
        if (fwrite(d->ids, sizeof(uint32_t), d->n, s->f) != d->n) die("write %s: %s", s->tmp_path, strerror(errno));
        EVP_DigestUpdate(s->md, d->ids, d->n * sizeof(uint32_t));
        s->documents++;
        s->tokens += (int64_t)d->n;
        s->utf8_bytes += (int64_t)d->len;
        pr->text_bytes += (int64_t)d->len;
    }
    for (int i = 0; i < n; i++) { free(docs[i].ids); free(docs[i].owned); }
}

// Parse one JSONL line (NUL-terminated in place) into a document.
static void parse_jsonl_line(char *line, size_t len, Doc *d) {
    cJSON *j = cJSON_ParseWithLengthOpts(line, len + 1, NULL, 1);
    if (!j || !cJSON_IsObject(j)) { d->status = DOC_BAD_JSON; cJSON_Delete(j); return; }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
    if (!cJSON_IsString(t)) { d->status = DOC_BAD_TEXT; cJSON_Delete(j); return; }
    d->len = strlen(t->valuestring);
    d->owned = xmalloc(d->len + 1);
    memcpy(d->owned, t->valuestring, d->len + 1);
    d->text = d->owned;
    d->status = d->len == 0 ? DOC_EMPTY : DOC_OK;
    cJSON_Delete(j);
}

static void process_source(const Input *in, SplitOut outs[NSPLITS], const Options *o, Progress *pr,
                           int idx, int nsrc) {
    size_t len = 0;
    char *buf = read_input(in, &len);
    int cap = 1024, n = 0;
    Doc *docs = xcalloc(cap, sizeof *docs);
    if (in->kind == KIND_TEXT) {
        docs[0] = (Doc){.text = buf, .len = len, .line = 1, .status = len ? DOC_OK : DOC_EMPTY};
        tokenize_batch(docs, 1, o);
        write_batch(in, docs, 1, outs, o, pr);
    } else {
        // Env OLMO_PREPARE_BATCH_DOCS shrinks batches so tests can cross batch boundaries.
        const char *bd = getenv("OLMO_PREPARE_BATCH_DOCS");
        int batch_docs = bd && atoi(bd) > 0 ? atoi(bd) : 65536;
        size_t pos = 0, batch_bytes = 0;
        int line_no = 0;
        while (pos < len) {
            char *line = buf + pos;
            char *nl = memchr(line, '\n', len - pos);
            size_t ll = nl ? (size_t)(nl - line) : len - pos;
            pos += ll + 1;
            line_no++;
            line[ll] = 0;   // in place: cJSON wants a NUL-terminated record
            size_t k = 0;
            while (k < ll && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
            if (k == ll) continue;   // blank lines (e.g. a trailing newline) are not records
            if (n == cap) { cap *= 2; docs = xrealloc(docs, cap * sizeof *docs); }
            docs[n] = (Doc){.line = line_no};
            parse_jsonl_line(line, ll, &docs[n]);
            batch_bytes += docs[n].len;
            n++;
            if (batch_bytes >= BATCH_BYTES || n >= batch_docs) {
                tokenize_batch(docs, n, o);
                write_batch(in, docs, n, outs, o, pr);
                progress_line(in->source, idx, nsrc, pr, 0);
                n = 0; batch_bytes = 0;
            }
        }
        tokenize_batch(docs, n, o);
        write_batch(in, docs, n, outs, o, pr);
    }
    free(docs);
    free(buf);
    for (int s = 0; s < NSPLITS; s++) {
        if (!outs[s].f) continue;
        if (fflush(outs[s].f) != 0 || fsync(fileno(outs[s].f)) != 0 || fclose(outs[s].f) != 0)
            die("write %s: %s", outs[s].tmp_path, strerror(errno));
        outs[s].f = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdn = 0;
        EVP_DigestFinal_ex(outs[s].md, md, &mdn);
        EVP_MD_CTX_free(outs[s].md);
        for (unsigned i = 0; i < mdn; i++) sprintf(outs[s].sha256 + 2 * i, "%02x", md[i]);
    }
}

// ---------------------------------------------------------------------------------------
// The run: inputs, the old manifest, each source, then the outputs and the new manifest.

static int cmp_input(const void *a, const void *b) {
    return strcmp(((const Input *)a)->source, ((const Input *)b)->source);
}

// Every input file of the given paths, sorted by source; a missing input or two inputs
// with one source name is bad input, reported before any slow work.
static Input *collect_inputs(char **paths, int npaths, int *nin_out) {
    Input *ins = NULL;
    int nin = 0;
    for (int i = 0; i < npaths; i++) {
        int before = nin;
        collect(&ins, &nin, paths[i], paths[i], 0);
        if (nin == before) die_input("input %s: no .jsonl/.json/.txt files (optionally .gz/.zst) found", paths[i]);
    }
    qsort(ins, nin, sizeof *ins, cmp_input);
    for (int i = 1; i < nin; i++)
        if (!strcmp(ins[i].source, ins[i - 1].source))
            die_input("inputs %s and %s both map to source '%s' (sources are named by --source-from %s and must be "
                      "unique; --source-from path names them by their path under the input, e.g. a/part-0000.json.gz "
                      "-> a_part-0000)", ins[i - 1].path, ins[i].path, ins[i].source,
                      g_source_from == SOURCE_FROM_DIR ? "dir" : g_source_from == SOURCE_FROM_PATH ? "path" : "stem "
                      "(the default: file stems)");
    *nin_out = nin;
    return ins;
}

// The manifest.json already in OUTDIR, or NULL when there is none or it was written with
// another tokenizer or format (then nothing in it can be reused or kept).
static cJSON *read_old_manifest(const char *manifest_path, const char *fp) {
    size_t mlen = 0;
    char *mtext = read_file_all(manifest_path, &mlen);
    if (!mtext) return NULL;
    cJSON *old = cJSON_ParseWithLength(mtext, mlen);
    free(mtext);
    const char *f = old ? jstr(old, "format") : NULL;
    const cJSON *t = old ? cJSON_GetObjectItemCaseSensitive(old, "tokenizer") : NULL;
    const char *ofp = t ? jstr(t, "fingerprint") : NULL;
    if (!f || strcmp(f, PREPARE_FORMAT) || !ofp || strcmp(ofp, fp)) {
        if (old) warnf("%s: written with another tokenizer or format; its entries are dropped", manifest_path);
        cJSON_Delete(old);
        old = NULL;
    }
    return old;
}

// Totals over the sources of a run (the last line of output).
typedef struct {
    int64_t empty, bad, docs, tokens;
} Totals;

// The manifest entries of a source just prepared: its "sources" record and one "outputs"
// record per non-empty split.
static void manifest_add_source(cJSON *new_sources, cJSON *new_outputs, const Input *in, const SplitOut *outs,
                                const Options *o, const Progress *pr) {
    cJSON *src = cJSON_CreateObject();
    cJSON_AddStringToObject(src, "source", in->source);
    cJSON *arr = cJSON_AddArrayToObject(src, "inputs");
    cJSON *ij = cJSON_CreateObject();
    cJSON_AddStringToObject(ij, "path", in->path);
    cJSON_AddNumberToObject(ij, "size", (double)in->size);
    cJSON_AddNumberToObject(ij, "mtime_s", (double)in->mtime_s);
    cJSON_AddNumberToObject(ij, "mtime_nsec", (double)in->mtime_nsec);
    cJSON_AddItemToArray(arr, ij);
    cJSON_AddStringToObject(src, "options_hash", o->opts_hash);
    cJSON_AddNumberToObject(src, "heldout_frac", o->frac);
    cJSON_AddNumberToObject(src, "heldout_seed", (double)o->seed);
    cJSON_AddNumberToObject(src, "skipped_empty", (double)pr->empty);
    cJSON_AddNumberToObject(src, "skipped_bad", (double)pr->bad);
    cJSON_AddItemToArray(new_sources, src);
    for (int s = 0; s < NSPLITS; s++) {
        const SplitOut *so = &outs[s];
        if (so->documents == 0) continue;   // an empty split gets no file
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "source", in->source);
        cJSON_AddStringToObject(e, "split", SPLIT_NAME[s]);
        cJSON_AddStringToObject(e, "path", so->rel_path);
        cJSON_AddNumberToObject(e, "documents", (double)so->documents);
        cJSON_AddNumberToObject(e, "tokens", (double)so->tokens);
        cJSON_AddNumberToObject(e, "utf8_bytes", (double)so->utf8_bytes);
        cJSON_AddStringToObject(e, "sha256", so->sha256);
        cJSON_AddNumberToObject(e, "heldout_frac", o->frac);
        cJSON *ia = cJSON_AddArrayToObject(e, "inputs");
        cJSON_AddItemToArray(ia, cJSON_CreateString(in->path));
        cJSON_AddItemToArray(new_outputs, e);
    }
}

// Prepare source i of nin into its temp files (outs) and add its manifest entries.
static void prepare_source(const Input *in, int i, int nin, SplitOut *outs, const Options *o, Progress *total,
                           Totals *tot, cJSON *new_sources, cJSON *new_outputs) {
    for (int s = 0; s < NSPLITS; s++) {
        SplitOut *so = &outs[s];
        size_t l = strlen(o->outdir) + strlen(in->source) + 64;
        so->rel_path = xmalloc(l);
        snprintf(so->rel_path, l, "%s%s", in->source, SPLIT_SUFFIX[s]);
        so->final_path = xmalloc(l);
        snprintf(so->final_path, l, "%s/%s", o->outdir, so->rel_path);
        so->tmp_path = xmalloc(l + 32);
        snprintf(so->tmp_path, l + 32, "%s.tmp.%d", so->final_path, (int)getpid());
    }
    Progress pr = {.t0 = now_seconds()};
    process_source(in, outs, o, &pr, i, nin);
    progress_line(in->source, i, nin, &pr, 1);
    if (pr.empty || pr.bad)
        fprintf(stderr, "prepare [%d/%d] %s: skipped %lld empty and %lld bad documents\n", i + 1, nin,
                in->source, (long long)pr.empty, (long long)pr.bad);
    total->text_bytes += pr.text_bytes;
    tot->empty += pr.empty; tot->bad += pr.bad;
    for (int s = 0; s < NSPLITS; s++) { tot->docs += outs[s].documents; tot->tokens += outs[s].tokens; }
    manifest_add_source(new_sources, new_outputs, in, outs, o, &pr);
}

// Every source succeeded: move the outputs into place (removing a stale file of a split
// that is now empty).
static void commit_outputs(SplitOut (*outs)[NSPLITS], const int *redo, int nin, const char *outdir) {
    for (int i = 0; i < nin; i++) {
        if (!redo[i]) continue;
        for (int s = 0; s < NSPLITS; s++) {
            SplitOut *so = &outs[i][s];
            if (so->documents == 0) { unlink(so->final_path); continue; }
            if (rename(so->tmp_path, so->final_path) != 0)
                die("rename %s -> %s: %s", so->tmp_path, so->final_path, strerror(errno));
            forget_temp(so->tmp_path);
        }
    }
    fsync_dir(outdir);
}

// Carry over the old manifest's entries of sources not redone: sources skipped as up to
// date, and sources of earlier runs with other inputs (so several `olmo prepare` calls
// can fill one directory), while their files are still there.
static void keep_old_sources(const cJSON *old, cJSON *new_sources, cJSON *new_outputs, const char *outdir,
                             const char *manifest_path) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(old, "sources")) {
        const char *s = jstr(e, "source");
        if (!s || find_by_source(new_sources, s)) continue;
        int ok = 1;
        const cJSON *oe;
        cJSON_ArrayForEach(oe, cJSON_GetObjectItemCaseSensitive(old, "outputs")) {
            const char *os = jstr(oe, "source"), *rel = jstr(oe, "path");
            if (!os || strcmp(os, s)) continue;
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", outdir, rel ? rel : "");
            if (!rel || file_size(full) != (int64_t)jnum(oe, "tokens", -1) * 4) ok = 0;
        }
        if (!ok) { warnf("%s: outputs of source '%s' changed or missing; dropped from the manifest", manifest_path, s); continue; }
        cJSON_AddItemToArray(new_sources, cJSON_Duplicate(e, 1));
        cJSON_ArrayForEach(oe, cJSON_GetObjectItemCaseSensitive(old, "outputs")) {
            const char *os = jstr(oe, "source");
            if (os && !strcmp(os, s)) cJSON_AddItemToArray(new_outputs, cJSON_Duplicate(oe, 1));
        }
    }
}

// Sorted by source, train before heldout: the manifest does not depend on which run
// produced which entry.
static void sort_manifest(cJSON *new_sources, cJSON *new_outputs) {
    int ns = cJSON_GetArraySize(new_sources), no = cJSON_GetArraySize(new_outputs);
    cJSON **sv = xmalloc((ns + 1) * sizeof *sv), **ov = xmalloc((no + 1) * sizeof *ov);
    for (int i = 0; i < ns; i++) sv[i] = cJSON_DetachItemFromArray(new_sources, 0);
    for (int i = 0; i < no; i++) ov[i] = cJSON_DetachItemFromArray(new_outputs, 0);
    for (int i = 1; i < ns; i++)   // insertion sorts: a few hundred entries at most
        for (int j = i; j > 0 && strcmp(jstr(sv[j - 1], "source"), jstr(sv[j], "source")) > 0; j--) {
            cJSON *t = sv[j]; sv[j] = sv[j - 1]; sv[j - 1] = t;
        }
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0; j--) {
            int c = strcmp(jstr(ov[j - 1], "source"), jstr(ov[j], "source"));
            if (c == 0) c = strcmp(jstr(ov[j], "split"), jstr(ov[j - 1], "split"));   // "train" > "heldout"
            if (c <= 0) break;
            cJSON *t = ov[j]; ov[j] = ov[j - 1]; ov[j - 1] = t;
        }
    for (int i = 0; i < ns; i++) cJSON_AddItemToArray(new_sources, sv[i]);
    for (int i = 0; i < no; i++) cJSON_AddItemToArray(new_outputs, ov[i]);
    free(sv); free(ov);
}

// Write OUTDIR/manifest.json (atomically; it takes ownership of the two arrays).
static void write_manifest(const char *manifest_path, const char *tok_path, const Tokenizer *tok, const char *fp,
                           const Options *o, cJSON *new_sources, cJSON *new_outputs) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", PREPARE_FORMAT);
    cJSON_AddStringToObject(root, "dtype", "uint32");
    cJSON *tj = cJSON_AddObjectToObject(root, "tokenizer");
    cJSON_AddStringToObject(tj, "path", tok_path);
    cJSON_AddStringToObject(tj, "fingerprint", fp);
    cJSON_AddNumberToObject(tj, "eos_id", tokenizer_eos_id(tok));
    cJSON_AddNumberToObject(tj, "vocab_size", tokenizer_vocab_size(tok));
    cJSON_AddStringToObject(root, "heldout_hash",
                            "fnv1a64(seed as 8 LE bytes + text bytes) -> splitmix64 finalizer; held out iff (h>>11)/2^53 < heldout_frac");
    cJSON_AddNumberToObject(root, "heldout_frac", o->frac);
    cJSON_AddNumberToObject(root, "heldout_seed", (double)o->seed);
    cJSON_AddItemToObject(root, "sources", new_sources);
    cJSON_AddItemToObject(root, "outputs", new_outputs);
    char *mj = cJSON_Print(root);
    size_t mjl = strlen(mj);
    mj = xrealloc(mj, mjl + 2);
    mj[mjl] = '\n'; mj[mjl + 1] = 0;
    if (write_file_atomic(manifest_path, mj, mjl + 1) != 0) die("cannot write %s: %s", manifest_path, strerror(errno));
    free(mj);
    cJSON_Delete(root);
}

void prepare_run(const PrepareOptions *po, char **paths, int npaths) {
    const char *outdir = po->outdir;
    int nin = 0;
    g_outdir_real = realpath(outdir, NULL);
    g_source_from = po->source_from;
    Input *ins = collect_inputs(paths, npaths, &nin);

    char *tok_path = tokenizer_resolve_path(po->tokenizer);
    Tokenizer *tok = tokenizer_load(tok_path);
    const char *fp = tokenizer_fingerprint(tok);

    // Options that change output bytes (or which records are kept) are hashed: a rerun
    // with a different hash redoes the source.
    char optbuf[512], opts_hash[65];
    snprintf(optbuf, sizeof optbuf, "%s|%s|frac=%.17g|seed=%llu|skip_bad=%d", PREPARE_FORMAT, fp, po->heldout_frac,
             (unsigned long long)po->heldout_seed, po->skip_bad);
    sha256_hex(optbuf, strlen(optbuf), opts_hash);
    Options o = {.opts_hash = opts_hash, .frac = po->heldout_frac, .seed = po->heldout_seed, .skip_bad = po->skip_bad,
                 .nthreads = po->nthreads, .outdir = outdir, .tok = tok};

    if (mkdir_p(outdir) != 0) die_input("cannot create output directory %s: %s", outdir, strerror(errno));
    char manifest_path[4096];
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", outdir);
    cJSON *old = read_old_manifest(manifest_path, fp);

    g_tty = isatty(2);
    cJSON *new_sources = cJSON_CreateArray(), *new_outputs = cJSON_CreateArray();
    SplitOut (*outs)[NSPLITS] = xcalloc(nin, sizeof *outs);
    int *redo = xcalloc(nin, sizeof *redo);
    Progress total = {.t0 = now_seconds()};
    Totals tot = {0};
    int n_up_to_date = 0;
    for (int i = 0; i < nin; i++) {
        if (!po->force && source_up_to_date(old, &ins[i], &o)) {
            fprintf(stderr, "prepare [%d/%d] %s: up to date, skipped (--force to redo)\n", i + 1, nin, ins[i].source);
            n_up_to_date++;
            continue;
        }
        redo[i] = 1;
        prepare_source(&ins[i], i, nin, outs[i], &o, &total, &tot, new_sources, new_outputs);
    }

    commit_outputs(outs, redo, nin, outdir);
    if (old) keep_old_sources(old, new_sources, new_outputs, outdir, manifest_path);
    sort_manifest(new_sources, new_outputs);
    write_manifest(manifest_path, tok_path, tok, fp, &o, new_sources, new_outputs);
    cJSON_Delete(old);

    double dt = now_seconds() - total.t0;
    fprintf(stderr, "prepare: %d sources prepared, %d up to date: %lld documents, %lld tokens, %.2f MB text in %.2f s (%.2f MB/s, %d threads)%s -> %s\n",
            nin - n_up_to_date, n_up_to_date, (long long)tot.docs, (long long)tot.tokens, total.text_bytes / 1e6, dt,
            dt > 0 ? total.text_bytes / 1e6 / dt : 0.0, po->nthreads,
            tot.empty || tot.bad ? " (some documents skipped, see above)" : "", manifest_path);
    for (int i = 0; i < nin; i++) {
        for (int s = 0; s < NSPLITS; s++) { free(outs[i][s].tmp_path); free(outs[i][s].final_path); free(outs[i][s].rel_path); }
        free(ins[i].path); free(ins[i].source);
    }
    free(outs); free(redo); free(ins); free(tok_path); free(g_outdir_real);
    tokenizer_free(tok);
}
