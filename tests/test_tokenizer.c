// test_tokenizer.c: unit tests of the tokenizer API (src/data/tokenizer.h) on the real
// dolma2 tokenizer.json: ids of the special tokens, known encodings, UTF-8 rejection,
// decode, round trip, 100 KB words (the O(n log n) merge path must be quick), appending
// to a non-empty id array, and many threads encoding at once with one Tokenizer.
// Parity with tiktoken over large texts is tests/test_tokenizer_parity.mjs.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/blas_core.h"
#include "data/tokenizer.h"
#include "util/common.h"

#include "check.h"

static const Tokenizer *g_tok;
static const char *g_text;
static size_t g_len;

// Encode and check decode(encode(x)) == x.
static size_t roundtrip(const Tokenizer *tok, const char *text, size_t len, int special, const char *what) {
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = tokenizer_encode(tok, text, len, special, &ids, &n, &cap);
    CHECK(rc == 0, "%s: encode failed", what);
    size_t outlen = 0;
    char *out = tokenizer_decode(tok, ids, n, &outlen);
    CHECK(out && outlen == len && memcmp(out, text, len) == 0, "%s: round trip differs", what);
    free(out);
    free(ids);
    return n;
}

static void *thread_main(void *arg) {
    uint32_t **result = arg;
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    for (int rep = 0; rep < 3; rep++) {
        n = 0;
        if (tokenizer_encode(g_tok, g_text, g_len, 0, &ids, &n, &cap)) return NULL;
    }
    ids = xrealloc(ids, (n + 1) * sizeof *ids);
    ids[n] = UINT32_MAX;  // terminator for comparison
    *result = ids;
    return NULL;
}

int main(int argc, char **argv) {
    (void)argc;
    blas_core_init(argv);
    char *path = tokenizer_resolve_path(NULL);
    double t0 = now_seconds();
    Tokenizer *tok = tokenizer_load(path);
    double load_s = now_seconds() - t0;
    printf("loaded %s in %.3f s\n", path, load_s);
    CHECK(load_s < 1.0, "load took %.3f s", load_s);

    CHECK(tokenizer_vocab_size(tok) == 100278, "vocab size %u", tokenizer_vocab_size(tok));
    CHECK(tokenizer_eos_id(tok) == 100257, "eos %u", tokenizer_eos_id(tok));
    CHECK(tokenizer_pad_id(tok) == 100277, "pad %u", tokenizer_pad_id(tok));
    const char *fp = tokenizer_fingerprint(tok);
    CHECK(strlen(fp) == 64 && strspn(fp, "0123456789abcdef") == 64, "fingerprint '%s'", fp);
    Tokenizer *tok2 = tokenizer_load(path);
    CHECK(!strcmp(fp, tokenizer_fingerprint(tok2)), "fingerprint not stable");
    tokenizer_free(tok2);

    // Known encodings (ids from tiktoken cl100k_base).
    {
        const char *s = "Hello world, it's  a test!! 12345   ok";
        static const uint32_t want[] = {9906, 1917, 11, 433, 596, 220, 264, 1296, 3001, 220, 4513, 1774, 256, 5509};
        uint32_t *ids = NULL;
        size_t n = 0, cap = 0;
        CHECK(tokenizer_encode(tok, s, strlen(s), 0, &ids, &n, &cap) == 0, "encode");
        CHECK(n == sizeof want / sizeof want[0] && !memcmp(ids, want, sizeof want), "known encoding differs (n=%zu)", n);
        // Appending after existing ids, with specials: EOS between two texts.
        size_t before = n;
        const char *s2 = "<|endoftext|>Hello<|pad|>";
        CHECK(tokenizer_encode(tok, s2, strlen(s2), 1, &ids, &n, &cap) == 0, "encode special");
        CHECK(n == before + 3 && ids[before] == 100257 && ids[before + 1] == 9906 && ids[before + 2] == 100277,
              "special encoding / append");
        // Without allow_special the same string is plain text.
        n = 0;
        tokenizer_encode(tok, s2, strlen(s2), 0, &ids, &n, &cap);
        int any_special = 0;
        for (size_t i = 0; i < n; i++) any_special |= ids[i] >= 100256;
        CHECK(n > 3 && !any_special, "specials must be text without allow_special");
        free(ids);
    }

    // Invalid UTF-8: -1, nothing appended; offsets of the first bad byte.
    {
        static const struct { const char *s; size_t len, off; } bad[] = {
            {"ab\x80", 3, 2},              // lone continuation byte
            {"a\xc0\x80", 3, 1},           // overlong NUL
            {"a\xe0\x80\xaf", 4, 1},       // overlong '/'
            {"\xed\xa0\x80", 3, 0},        // UTF-16 surrogate
            {"xy\xf4\x90\x80\x80", 6, 2},  // above U+10FFFF
            {"\xf5\x80\x80\x80", 4, 0},    // invalid lead byte
            {"ok \xe2\x82", 5, 3},         // truncated sequence
            {"0123456789\xff", 11, 10},    // after the 8-byte ASCII fast path
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            uint32_t *ids = NULL;
            size_t n = 0, cap = 0;
            CHECK(tokenizer_encode(tok, bad[i].s, bad[i].len, 0, &ids, &n, &cap) == -1 && n == 0,
                  "invalid UTF-8 case %zu accepted", i);
            CHECK(tokenizer_utf8_error_offset(bad[i].s, bad[i].len) == bad[i].off, "case %zu offset %zu", i,
                  tokenizer_utf8_error_offset(bad[i].s, bad[i].len));
            free(ids);
        }
        const char *good = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf";  // é € 😀 U+10FFFF
        CHECK(tokenizer_utf8_error_offset(good, strlen(good)) == strlen(good), "valid UTF-8 rejected");
    }

    // Decode: out-of-range ids fail; specials decode to their text.
    {
        uint32_t bad_ids[] = {1, 100278};
        CHECK(tokenizer_decode(tok, bad_ids, 2, NULL) == NULL, "out-of-range id decoded");
        uint32_t sp[] = {100257, 100277};
        size_t len;
        char *s = tokenizer_decode(tok, sp, 2, &len);
        CHECK(s && !strcmp(s, "<|endoftext|><|pad|>") && len == 20, "special decode '%s'", s ? s : "(null)");
        free(s);
        char *e = tokenizer_decode(tok, NULL, 0, &len);
        CHECK(e && len == 0 && e[0] == 0, "empty decode");
        free(e);
    }

    // 100 KB words: random letters, one letter repeated, spaces, digits.
    {
        size_t L = 100 * 1000;
        char *w = xmalloc(L + 1);
        uint64_t x = 88172645463325252ull;
        const char *kinds[] = {"random letters", "aaaa...", "spaces", "digits", "punctuation"};
        for (int k = 0; k < 5; k++) {
            for (size_t i = 0; i < L; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                w[i] = k == 0 ? (char)('a' + x % 26) : k == 1 ? 'a' : k == 2 ? ' ' : k == 3 ? (char)('0' + x % 10) : "!?.,;:"[x % 6];
            }
            double t = now_seconds();
            size_t n = roundtrip(tok, w, L, 0, kinds[k]);
            double dt = now_seconds() - t;
            printf("100 KB of %s: %zu tokens in %.3f s\n", kinds[k], n, dt);
            CHECK(dt < 2.0, "100 KB of %s took %.3f s", kinds[k], dt);
        }
        free(w);
    }

    // Threads: the stress file encoded by 8 threads at once equals the 1-thread result.
    {
        size_t len;
        char *text = read_file_all("tests/data/tokenizer_stress.txt", &len);
        CHECK(text != NULL, "cannot read tests/data/tokenizer_stress.txt (run from the repo root)");
        if (text) {
            size_t nref = roundtrip(tok, text, len, 0, "stress file");
            roundtrip(tok, text, len, 1, "stress file, specials");
            g_tok = tok; g_text = text; g_len = len;
            uint32_t *ref = NULL;
            size_t n = 0, cap = 0;
            tokenizer_encode(tok, text, len, 0, &ref, &n, &cap);
            enum { NT = 8 };
            pthread_t th[NT];
            uint32_t *res[NT] = {0};
            for (int i = 0; i < NT; i++) pthread_create(&th[i], NULL, thread_main, &res[i]);
            for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
            for (int i = 0; i < NT; i++) {
                CHECK(res[i] && !memcmp(res[i], ref, n * sizeof *ref) && res[i][n] == UINT32_MAX,
                      "thread %d result differs", i);
                free(res[i]);
            }
            printf("stress file: %zu tokens, identical across %d threads\n", nref, NT);
            free(ref);
            free(text);
        }
    }

    tokenizer_free(tok);
    free(path);
    if (failures) { fprintf(stderr, "%d failure(s)\n", failures); return 1; }
    printf("all tokenizer unit tests passed\n");
    return 0;
}
