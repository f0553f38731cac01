// cmd_tokenize.c: `olmo tokenize`: UTF-8 text on stdin -> token ids on stdout (one line,
// space-separated), or with --decode ids -> text bytes. The round trip is exact.
// --lines encodes each input line on its own (one output line per input line), which
// lets tests compare many short texts without starting the binary once per text.
// --bench N encodes stdin N times and reports the best encode speed on stderr, and
// that of the first run, before the per-thread piece cache has seen the text (the
// figures scripts/bench_tokenizer.sh compares with tiktoken; load and output excluded).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "data/tokenizer.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo tokenize [--decode] [--allow-special] [--lines] [--tokenizer PATH]\n"
            "\n"
            "Reads stdin, writes stdout.\n"
            "  (default)        UTF-8 text -> token ids, space-separated, on one line\n"
            "  --decode         whitespace-separated token ids -> the text bytes\n"
            "  --allow-special  special-token strings in the text (e.g. <|endoftext|>)\n"
            "                   become their ids; otherwise they are encoded as plain text\n"
            "  --lines          encode each line (without its \\n) separately: one output\n"
            "                   line of ids per input line\n"
            "  --bench N        encode stdin N times, print the best time, tokens/s and\n"
            "                   MB/s to stderr (single thread; load and output excluded)\n"
            "  --tokenizer PATH tokenizer.json (default: env OLMO_TOKENIZER, else\n"
            "                   " TOKENIZER_DEFAULT_PATH ")\n"
            "Invalid UTF-8 input exits with status 2 and the byte offset of the bad byte.\n");
}

// Read all of stdin.
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) { cap *= 2; buf = xrealloc(buf, cap + 1); }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got == 0) {
            if (ferror(stdin)) die("reading stdin: %s", strerror(errno));
            break;
        }
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

// Write ids space-separated plus a newline, through a local buffer (printf per id is
// the bottleneck otherwise).
static void write_ids(const uint32_t *ids, size_t n) {
    char buf[1 << 16];
    size_t b = 0;
    for (size_t i = 0; i < n; i++) {
        if (b > sizeof buf - 16) { fwrite(buf, 1, b, stdout); b = 0; }
        b += (size_t)snprintf(buf + b, 16, i ? " %u" : "%u", ids[i]);
    }
    buf[b++] = '\n';
    fwrite(buf, 1, b, stdout);
}

static int encode_checked(const Tokenizer *tok, const char *text, size_t len, size_t base, int allow_special,
                          uint32_t **ids, size_t *n, size_t *cap) {
    if (tokenizer_encode(tok, text, len, allow_special, ids, n, cap) != 0) {
        size_t off = tokenizer_utf8_error_offset(text, len);
        fprintf(stderr, "olmo: error: stdin: invalid UTF-8 at byte offset %zu\n", base + off);
        return -1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    int decode = 0, allow_special = 0, lines = 0, bench = 0;
    const char *tok_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--decode")) decode = 1;
        else if (!strcmp(argv[i], "--allow-special")) allow_special = 1;
        else if (!strcmp(argv[i], "--lines")) lines = 1;
        else if (!strcmp(argv[i], "--bench") && i + 1 < argc && atoi(argv[i + 1]) > 0) bench = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (!strncmp(argv[i], "--tokenizer=", 12)) tok_path = argv[i] + 12;
        else {
            fprintf(stderr, "olmo tokenize: error: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    char *path = tokenizer_resolve_path(tok_path);
    Tokenizer *tok = tokenizer_load(path);
    size_t len;
    char *in = read_stdin(&len);
    int status = 0;

    if (decode) {
        size_t n = 0, cap = 1024;
        uint32_t *ids = xmalloc(cap * sizeof *ids);
        char *p = in;
        for (;;) {
            while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
            if (!*p) break;
            char *end;
            errno = 0;
            unsigned long v = strtoul(p, &end, 10);
            if (end == p || errno || v >= tokenizer_vocab_size(tok) ||
                (*end && *end != ' ' && *end != '\n' && *end != '\t' && *end != '\r')) {
                int w = 0;
                while (p[w] && p[w] != ' ' && p[w] != '\n' && p[w] != '\t' && w < 40) w++;
                fprintf(stderr, "olmo: error: stdin: '%.*s' at byte offset %zu is not a token id (0..%u)\n",
                        w, p, (size_t)(p - in), tokenizer_vocab_size(tok) - 1);
                status = 2;
                break;
            }
            if (n == cap) { cap *= 2; ids = xrealloc(ids, cap * sizeof *ids); }
            ids[n++] = (uint32_t)v;
            p = end;
        }
        if (status == 0) {
            size_t outlen;
            char *out = tokenizer_decode(tok, ids, n, &outlen);
            if (!out) { fprintf(stderr, "olmo: error: stdin: token id out of range\n"); status = 2; }
            else { fwrite(out, 1, outlen, stdout); free(out); }
        }
        free(ids);
    } else if (lines) {
        size_t cap = 1024, n;
        uint32_t *ids = xmalloc(cap * sizeof *ids);
        size_t pos = 0;
        while (pos < len) {
            char *nl = memchr(in + pos, '\n', len - pos);
            size_t end = nl ? (size_t)(nl - in) : len;
            n = 0;
            if (encode_checked(tok, in + pos, end - pos, pos, allow_special, &ids, &n, &cap)) { status = 2; break; }
            write_ids(ids, n);
            pos = end + 1;
        }
        free(ids);
    } else if (bench) {
        size_t cap = len / 3 + 16, n = 0;
        uint32_t *ids = xmalloc(cap * sizeof *ids);
        double best = 1e30, first = 0;
        for (int r = 0; r < bench && status == 0; r++) {
            n = 0;
            double t0 = now_seconds();
            if (encode_checked(tok, in, len, 0, allow_special, &ids, &n, &cap)) status = 2;
            double dt = now_seconds() - t0;
            if (dt < best) best = dt;
            if (r == 0) first = dt;
        }
        if (status == 0)
            fprintf(stderr,
                    "olmo tokenize --bench: %zu bytes, %zu tokens, best of %d: %.3f s, %.0f tokens/s, %.2f MB/s "
                    "(first run, cold piece cache: %.3f s, %.0f tokens/s, %.2f MB/s)\n",
                    len, n, bench, best, n / best, len / best / 1e6, first, n / first, len / first / 1e6);
        free(ids);
    } else {
        size_t cap = len / 3 + 16, n = 0;
        uint32_t *ids = xmalloc(cap * sizeof *ids);
        if (encode_checked(tok, in, len, 0, allow_special, &ids, &n, &cap)) status = 2;
        else write_ids(ids, n);
        free(ids);
    }
    if (fflush(stdout) != 0) die("writing stdout: %s", strerror(errno));
    free(in);
    free(path);
    tokenizer_free(tok);
    return status;
}
