// tokenizer.c: byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json
// (dolma2 = cl100k_base + OLMo special tokens), byte-for-byte compatible with OpenAI's
// tiktoken.
//
// Pipeline of tokenizer_encode:
//   1. (allow_special) cut the text at special-token strings, which map to their ids;
//   2. pre-tokenize each ordinary segment with the Split regex read from the file
//      (PCRE2, UTF + UCP, JIT compiled): each regex match is one "piece";
//   3. each piece (raw UTF-8 bytes; the GPT-2 byte<->unicode mapping only matters for
//      the vocab strings in the file, which we decode to raw bytes at load time) is
//      looked up whole; if it is not a token, it is BPE-merged like tiktoken's
//      _byte_pair_merge: repeatedly merge the adjacent pair whose concatenation has the
//      lowest rank (leftmost on ties) until no adjacent pair forms a token.
//
// Ranks: a token's rank is the index of the merge in model.merges that creates it (the
// 256 single bytes have no rank; they are never the result of a merge). That is
// tiktoken's rule "rank(bytes(a)+bytes(b))", which for cl100k equals the token id.
// Lookups go through one open-addressing hash table from byte string to (rank, id).
//
// Thread safety: the Tokenizer is read-only after load. Per-thread PCRE2 state (match
// data, JIT stack) lives in thread-specific storage created on first use.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/common.h"

#define NO_RANK UINT32_MAX
#define NO_ID UINT32_MAX

// One entry of the byte-string hash table: 16 bytes, four per 64-byte cache line. The
// first 8 key bytes live in the slot itself, so most lookups (tokens are mostly <= 8
// bytes) compare one integer and never touch the byte arena.
typedef struct {
    uint64_t k8;     // first min(len, 8) key bytes, little-endian, zero-padded
    uint32_t len;    // key length (0 = empty slot)
    uint32_t id;     // key bytes: tok->bytes + tok_off[id]
} Slot;

typedef struct {
    const char *str;
    uint32_t len, id;
} Special;

struct Tokenizer {
    char *path;
    // Token bytes for decode: id -> tok->bytes[tok_off[id] .. + tok_len[id]].
    uint8_t *bytes;
    size_t bytes_len;
    uint32_t *tok_off, *tok_len;
    uint32_t *rank;          // id -> merge rank (NO_RANK: single byte or special)
    uint32_t nvocab;         // highest id + 1
    // byte string -> id, for ordinary (non-special) tokens.
    Slot *slots;
    uint32_t slot_mask;
    uint32_t byte_id[256];   // the token of each single byte
    // Special tokens (added_tokens): matched in text only with allow_special.
    Special *specials;
    int nspecials;
    uint8_t special_first[256];  // 1 if some special string starts with this byte
    uint32_t eos_id, pad_id;
    // Pre-tokenizer.
    pcre2_code *re;
    int jit;                 // 1 if JIT compilation succeeded
    int keep_gaps;           // Split behavior "Isolated": text between matches is a piece too
    uint64_t uid;            // unique per load: tags the per-thread piece caches
    char fingerprint[65];
};

// ---------------------------------------------------------------------------------
// Hashing

// First min(n, 8) bytes of p as a zero-padded little-endian integer. A byte loop
// rather than memcpy: n is small and variable, and p + 8 may be past the text.
static inline uint64_t prefix8(const uint8_t *p, size_t n) {
    if (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 32;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 32;
    return h;
}

// Hash of a byte string whose prefix8 is k8: one multiply round per further 8 bytes.
static inline uint64_t hash_bytes(const uint8_t *p, size_t n, uint64_t k8) {
    uint64_t h = k8 ^ (n * 0x9E3779B97F4A7C15ull);
    for (size_t i = 8; i < n; i += 8) {
        uint64_t v = prefix8(p + i, n - i);
        h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull ^ v;
    }
    return mix64(h);
}

static inline int slot_matches(const Tokenizer *t, const Slot *s, const uint8_t *p, size_t n, uint64_t k8) {
    return s->len == n && s->k8 == k8 && (n <= 8 || memcmp(t->bytes + t->tok_off[s->id] + 8, p + 8, n - 8) == 0);
}

// Token id of the byte string p[0..n) with prefix8 k8 and hash h, or NO_ID.
static inline uint32_t lookup_h(const Tokenizer *t, const uint8_t *p, size_t n, uint64_t k8, uint64_t h) {
    uint32_t i = (uint32_t)h & t->slot_mask;
    for (;;) {
        const Slot *s = &t->slots[i];
        if (s->len == 0) return NO_ID;
        if (slot_matches(t, s, p, n, k8)) return s->id;
        i = (i + 1) & t->slot_mask;
    }
}

// Token id of the byte string p[0..n), or NO_ID.
static inline uint32_t lookup(const Tokenizer *t, const uint8_t *p, size_t n) {
    uint64_t k8 = prefix8(p, n);
    return lookup_h(t, p, n, k8, hash_bytes(p, n, k8));
}

// Rank of the byte string p[0..n) (NO_RANK if it is not a mergeable token).
static inline uint32_t rank_of(const Tokenizer *t, const uint8_t *p, size_t n) {
    uint32_t id = lookup(t, p, n);
    return id == NO_ID ? NO_RANK : t->rank[id];
}

// Insert token `id` (its bytes already in the arena). Returns 0 if the bytes are
// already present.
static int insert(Tokenizer *t, uint32_t id) {
    const uint8_t *p = t->bytes + t->tok_off[id];
    size_t n = t->tok_len[id];
    uint64_t k8 = prefix8(p, n);
    uint32_t i = (uint32_t)hash_bytes(p, n, k8) & t->slot_mask;
    for (;;) {
        Slot *s = &t->slots[i];
        if (s->len == 0) {
            *s = (Slot){k8, (uint32_t)n, id};
            return 1;
        }
        if (slot_matches(t, s, p, n, k8)) return 0;
        i = (i + 1) & t->slot_mask;
    }
}

// ---------------------------------------------------------------------------------
// UTF-8

size_t tokenizer_utf8_error_offset(const char *text, size_t len) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < len) {
        // ASCII fast path, 8 bytes at a time.
        if (i + 8 <= len) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ull)) { i += 8; continue; }
        }
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (i + n > len) return i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n;
    }
    return len;
}

// Decode one UTF-8 code point of a vocab string (already validated by cJSON's output
// being our own parse; we still bounds-check). Returns bytes consumed, 0 on error.
static int utf8_next(const uint8_t *s, size_t len, uint32_t *cp) {
    if (len == 0) return 0;
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    int n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (n == 0 || (size_t)n > len) return 0;
    uint32_t c = s[0] & (0x3F >> (n - 1));
    for (int k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[k] & 0x3F);
    }
    *cp = c;
    return n;
}

// GPT-2's bytes_to_unicode, inverted: code point (< 324) -> byte, or -1. Printable
// Latin-1 bytes map to themselves; the other 68 bytes map to 256, 257, ... in order.
static void byte_level_inverse(int16_t inv[324]) {
    for (int i = 0; i < 324; i++) inv[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if (printable) inv[b] = (int16_t)b;
        else inv[256 + n++] = (int16_t)b;
    }
}

// Decode a byte-level vocab string s[0..slen) to raw bytes (out has room for slen).
// Returns 0 if a character is not in the byte-level alphabet.
static int byte_level_decode(const int16_t inv[324], const char *s, size_t slen, uint8_t *out, size_t *n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = 0;
    for (size_t i = 0; i < slen;) {
        uint32_t cp;
        int c = utf8_next(u + i, slen - i, &cp);
        if (c == 0 || cp >= 324 || inv[cp] < 0) return 0;
        out[k++] = (uint8_t)inv[cp];
        i += (size_t)c;
    }
    *n = k;
    return 1;
}

// ---------------------------------------------------------------------------------
// Loading

// Look up a child of a JSON object or fail with the file and dotted field name.
static cJSON *need(const char *path, const cJSON *obj, const char *key, const char *field) {
    cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!c) die_input("%s: missing field '%s'", path, field);
    return c;
}

// Find the Split pre-tokenizer: either the pre_tokenizer itself or an element of a
// Sequence. Returns NULL if there is none.
static const cJSON *find_split(const cJSON *pre) {
    if (!cJSON_IsObject(pre)) return NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "Split")) return pre;
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *el;
    cJSON_ArrayForEach(el, seq) {
        const cJSON *s = find_split(el);
        if (s) return s;
    }
    return NULL;
}

// Append a vocab string (GPT-2 byte-level encoded) as raw bytes to the arena.
static uint32_t append_bytes(Tokenizer *t, size_t *cap, const uint8_t *b, size_t n) {
    if (t->bytes_len + n + 1 > *cap) {
        while (t->bytes_len + n + 1 > *cap) *cap *= 2;
        t->bytes = xrealloc(t->bytes, *cap);
    }
    uint32_t off = (uint32_t)t->bytes_len;
    memcpy(t->bytes + off, b, n);
    t->bytes_len += n;
    return off;
}

static void compile_regex(Tokenizer *t, const char *pattern) {
    int err;
    PCRE2_SIZE erroff;
    t->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                          &erroff, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        die_input("%s: pre_tokenizer Split regex does not compile at offset %zu: %s", t->path,
                  (size_t)erroff, (char *)msg);
    }
    // JIT makes pre-tokenization several times faster; the interpreter is the fallback.
    t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
}

// What tokenizer_load's passes share while the tables are built.
typedef struct {
    const char *path;
    size_t cap;             // the byte arena's capacity (t->bytes)
    uint8_t *is_special;    // (nvocab) added tokens
    uint8_t *have;          // (nvocab) ids given bytes so far
    int16_t inv[324];       // byte_level_inverse
    uint8_t *buf;           // a decoded vocab string or merge
    size_t bufcap;
} Loading;

// The highest id over model.vocab and added_tokens (every id a non-negative integer, every
// added token with a string), refused when far beyond the number of entries: the tables
// are indexed by id, and a tiny file must not allocate gigabytes (id 99999999: ~1.4 GB).
// Real vocabularies are dense.
static long max_token_id(const char *path, const cJSON *vocab, const cJSON *added, int *nvocab_entries) {
    long maxid = -1;
    int nv = 0;
    const cJSON *el;
    cJSON_ArrayForEach(el, vocab) {
        if (!cJSON_IsNumber(el) || el->valuedouble < 0 || el->valuedouble > 1e8)
            die_input("%s: field 'model.vocab' entry \"%s\": id must be a non-negative integer",
                      path, el->string);
        if (el->valueint > maxid) maxid = el->valueint;
        nv++;
    }
    cJSON_ArrayForEach(el, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(el, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(el, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e8 || !cJSON_IsString(content))
            die_input("%s: field 'added_tokens': each entry needs an integer 'id' and a string 'content'", path);
        if (id->valueint > maxid) maxid = id->valueint;
    }
    if (nv == 0) die_input("%s: field 'model.vocab' is empty", path);
    long nentries = (long)nv + cJSON_GetArraySize(added);
    if (maxid >= 2 * nentries + 1024)
        die_input("%s: token ids go up to %ld but model.vocab + added_tokens have only %ld entries: ids must be "
                  "(nearly) dense, refusing to allocate tables for %ld ids", path, maxid, nentries, maxid + 1);
    *nvocab_entries = nv;
    return maxid;
}

// Special tokens (added_tokens), before the vocab pass so that it can leave them out of the
// BPE table; <|endoftext|> is the EOS, <|pad|> the padding.
static void load_added_tokens(Tokenizer *t, Loading *ld, const cJSON *added) {
    int nadded = cJSON_GetArraySize(added);
    t->specials = xcalloc(nadded > 0 ? nadded : 1, sizeof(Special));
    t->eos_id = t->pad_id = NO_ID;
    const cJSON *el;
    cJSON_ArrayForEach(el, added) {
        uint32_t id = (uint32_t)cJSON_GetObjectItemCaseSensitive(el, "id")->valueint;
        const char *s = cJSON_GetObjectItemCaseSensitive(el, "content")->valuestring;
        size_t n = strlen(s);
        if (n == 0) die_input("%s: field 'added_tokens': empty 'content' for id %u", ld->path, id);
        uint32_t off = append_bytes(t, &ld->cap, (const uint8_t *)s, n);
        t->tok_off[id] = off;
        t->tok_len[id] = (uint32_t)n;
        ld->is_special[id] = ld->have[id] = 1;
        t->specials[t->nspecials++] = (Special){NULL, (uint32_t)n, id};
        t->special_first[(uint8_t)s[0]] = 1;
        if (!strcmp(s, "<|endoftext|>")) t->eos_id = id;
        if (!strcmp(s, "<|pad|>")) t->pad_id = id;
    }
}

// Vocab: decode the byte-level strings to raw bytes; every single byte needs its token.
static void load_vocab(Tokenizer *t, Loading *ld, const cJSON *vocab) {
    const char *path = ld->path;
    const cJSON *el;
    cJSON_ArrayForEach(el, vocab) {
        uint32_t id = (uint32_t)el->valueint;
        if (ld->is_special[id]) continue;   // added tokens are listed in the vocab too
        size_t slen = strlen(el->string), n;
        if (slen > ld->bufcap) { ld->bufcap = slen; ld->buf = xrealloc(ld->buf, ld->bufcap); }
        if (!byte_level_decode(ld->inv, el->string, slen, ld->buf, &n))
            die_input("%s: field 'model.vocab' entry \"%s\" is not a byte-level (GPT-2) string",
                      path, el->string);
        if (n == 0) die_input("%s: field 'model.vocab' has an empty token (id %u)", path, id);
        if (ld->have[id]) die_input("%s: field 'model.vocab': id %u appears twice", path, id);
        ld->have[id] = 1;
        t->tok_off[id] = append_bytes(t, &ld->cap, ld->buf, n);
        t->tok_len[id] = (uint32_t)n;
        if (n == 1) t->byte_id[ld->buf[0]] = id;
    }
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] == NO_ID)
            die_input("%s: field 'model.vocab' lacks the single-byte token for byte 0x%02x", path, b);
}

// Hash table over ordinary tokens, load factor <= 0.5 (short probe chains).
static void build_hash(Tokenizer *t, const Loading *ld, int nvocab_entries) {
    uint32_t nslots = 1;
    while (nslots < 2u * (uint32_t)nvocab_entries) nslots <<= 1;
    t->slots = xcalloc(nslots, sizeof(Slot));
    t->slot_mask = nslots - 1;
    for (uint32_t id = 0; id < t->nvocab; id++)
        if (ld->have[id] && !ld->is_special[id])
            if (!insert(t, id))
                die_input("%s: field 'model.vocab': two ids for the same bytes (id %u)", ld->path, id);
}

// Merges: rank of the token each merge creates. Entries are "left right" strings (older
// files) or ["left", "right"] pairs (newer files).
static void load_merges(Tokenizer *t, Loading *ld, const cJSON *merges) {
    const char *path = ld->path;
    int r = 0;
    const cJSON *el;
    cJSON_ArrayForEach(el, merges) {
        const char *a, *b;
        size_t alen, blen;
        char *sp;
        if (cJSON_IsString(el) && (sp = strchr(el->valuestring, ' '))) {
            a = el->valuestring; alen = (size_t)(sp - a);
            b = sp + 1; blen = strlen(b);
        } else if (cJSON_IsArray(el) && cJSON_GetArraySize(el) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(el, 0)) && cJSON_IsString(cJSON_GetArrayItem(el, 1))) {
            a = cJSON_GetArrayItem(el, 0)->valuestring; alen = strlen(a);
            b = cJSON_GetArrayItem(el, 1)->valuestring; blen = strlen(b);
        } else {
            die_input("%s: field 'model.merges' entry %d is not \"left right\" or [left, right]", path, r);
        }
        // The result token: decode both halves to bytes and look the concatenation up
        // in the hash table (cJSON's object lookup is a linear scan).
        if (alen + blen > ld->bufcap) { ld->bufcap = alen + blen; ld->buf = xrealloc(ld->buf, ld->bufcap); }
        size_t na, nb;
        if (!byte_level_decode(ld->inv, a, alen, ld->buf, &na) || !byte_level_decode(ld->inv, b, blen, ld->buf + na, &nb))
            die_input("%s: field 'model.merges' entry %d is not a byte-level (GPT-2) string", path, r);
        uint32_t id = lookup(t, ld->buf, na + nb);
        if (id == NO_ID)
            die_input("%s: field 'model.merges' entry %d: result \"%.*s%.*s\" is not in model.vocab", path, r,
                      (int)alen, a, (int)blen, b);
        if (t->rank[id] == NO_RANK) t->rank[id] = (uint32_t)r;
        r++;
    }
}

// The pre-tokenizer: the Split regex and whether the gaps between matches are pieces too.
static void load_pre_tokenizer(Tokenizer *t, const char *path, const cJSON *root) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *split = find_split(pre);
    if (!split) die_input("%s: field 'pre_tokenizer' has no Split pre-tokenizer (regex)", path);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    if (!cJSON_IsString(rx)) die_input("%s: field 'pre_tokenizer.pattern.Regex' missing or not a string", path);
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    const cJSON *invert = cJSON_GetObjectItemCaseSensitive(split, "invert");
    const char *b = cJSON_IsString(beh) ? beh->valuestring : "";
    if (!strcmp(b, "Removed") && cJSON_IsTrue(invert)) t->keep_gaps = 0;          // matches are the pieces
    else if (!strcmp(b, "Isolated") && !cJSON_IsTrue(invert)) t->keep_gaps = 1;   // matches and gaps
    else die_input("%s: field 'pre_tokenizer.behavior' \"%s\" (invert %s) is not supported", path, b,
                   cJSON_IsTrue(invert) ? "true" : "false");
    compile_regex(t, rx->valuestring);
}

Tokenizer *tokenizer_load(const char *path) {
    size_t flen;
    char *text = read_file_all(path, &flen);
    if (!text) {
        // The default file missing means the binary runs outside its repository: say where
        // the file is expected and how to point at another one.
        if (strcmp(path, TOKENIZER_DEFAULT_PATH) == 0)
            die_input("cannot read tokenizer file %s: %s (the dolma2 tokenizer ships in the repository's "
                      "tokenizers/ folder: run from the repository root, or pass --tokenizer FILE or set "
                      "OLMO_TOKENIZER)", path, strerror(errno));
        die_input("cannot read tokenizer file %s: %s", path, strerror(errno));
    }

    Tokenizer *t = xcalloc(1, sizeof *t);
    t->path = xstrdup(path);
    static _Atomic uint64_t next_uid = 1;
    t->uid = next_uid++;

    // Fingerprint: sha256 of the exact file bytes.
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(text, flen, md, &mdlen, EVP_sha256(), NULL)) die("sha256 failed");
    for (unsigned i = 0; i < mdlen && i < 32; i++) sprintf(t->fingerprint + 2 * i, "%02x", md[i]);

    cJSON *root = cJSON_ParseWithLength(text, flen);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        die_input("%s: not valid JSON (truncated or malformed) near byte %zu", path,
                  at ? (size_t)(at - text) : flen);
    }
    const cJSON *model = need(path, root, "model", "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE")))
        die_input("%s: field 'model.type' is %s, expected \"BPE\"", path,
                  cJSON_IsString(type) ? type->valuestring : "not a string");
    const cJSON *vocab = need(path, model, "vocab", "model.vocab");
    const cJSON *merges = need(path, model, "merges", "model.merges");
    if (!cJSON_IsObject(vocab)) die_input("%s: field 'model.vocab' must be an object", path);
    if (!cJSON_IsArray(merges)) die_input("%s: field 'model.merges' must be an array", path);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added)) die_input("%s: field 'added_tokens' must be an array", path);

    int nvocab_entries;
    long maxid = max_token_id(path, vocab, added, &nvocab_entries);
    t->nvocab = (uint32_t)(maxid + 1);
    uint32_t V = t->nvocab;
    t->tok_off = xcalloc(V, sizeof(uint32_t));
    t->tok_len = xcalloc(V, sizeof(uint32_t));
    t->rank = xmalloc(V * sizeof(uint32_t));
    for (uint32_t i = 0; i < V; i++) t->rank[i] = NO_RANK;
    Loading ld = {.path = path, .is_special = xcalloc(V, 1), .have = xcalloc(V, 1)};
    for (int b = 0; b < 256; b++) t->byte_id[b] = NO_ID;

    ld.cap = flen + 1024;
    t->bytes = xmalloc(ld.cap);
    load_added_tokens(t, &ld, added);
    byte_level_inverse(ld.inv);
    ld.bufcap = 4096;
    ld.buf = xmalloc(ld.bufcap);
    load_vocab(t, &ld, vocab);
    build_hash(t, &ld, nvocab_entries);
    load_merges(t, &ld, merges);
    free(ld.buf);
    free(ld.is_special);
    free(ld.have);

    // Special strings point into the arena (stable now that it no longer grows).
    for (int i = 0; i < t->nspecials; i++) {
        Special *s = &t->specials[i];
        s->str = (const char *)t->bytes + t->tok_off[s->id];
    }
    if (t->eos_id == NO_ID) die_input("%s: field 'added_tokens' has no <|endoftext|> token", path);
    if (t->pad_id == NO_ID) t->pad_id = t->eos_id;
    load_pre_tokenizer(t, path, root);

    cJSON_Delete(root);
    free(text);
    return t;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    pcre2_code_free(t->re);
    free(t->path);
    free(t->bytes);
    free(t->tok_off);
    free(t->tok_len);
    free(t->rank);
    free(t->slots);
    free(t->specials);
    free(t);
}

uint32_t tokenizer_vocab_size(const Tokenizer *t) { return t->nvocab; }
uint32_t tokenizer_eos_id(const Tokenizer *t) { return t->eos_id; }
uint32_t tokenizer_pad_id(const Tokenizer *t) { return t->pad_id; }
const char *tokenizer_fingerprint(const Tokenizer *t) { return t->fingerprint; }

char *tokenizer_resolve_path(const char *cli_path) {
    if (cli_path) return xstrdup(cli_path);
    const char *env = getenv("OLMO_TOKENIZER");
    if (env && *env) return xstrdup(env);
    if (access(TOKENIZER_DEFAULT_PATH, R_OK) == 0) return xstrdup(TOKENIZER_DEFAULT_PATH);
    // Run from elsewhere: try relative to the repository holding the binary
    // (build/olmo or build/tests/test_x).
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        for (int up = 1; slash && up <= 2; up++) {
            *slash = 0;
            slash = strrchr(exe, '/');
            if (!slash) break;
            size_t len = (size_t)(slash - exe) + 1 + sizeof TOKENIZER_DEFAULT_PATH;
            char *p = xmalloc(len);
            snprintf(p, len, "%.*s/%s", (int)(slash - exe), exe, TOKENIZER_DEFAULT_PATH);
            if (access(p, R_OK) == 0) return p;
            free(p);
        }
    }
    return xstrdup(TOKENIZER_DEFAULT_PATH);
}

// ---------------------------------------------------------------------------------
// BPE

// Append to the output array, growing it.
static inline void push_id(uint32_t **ids, size_t *n, size_t *cap, uint32_t id) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        *ids = xrealloc(*ids, *cap * sizeof(uint32_t));
    }
    (*ids)[(*n)++] = id;
}

// Small pieces: tiktoken's _byte_pair_merge on arrays. O(n^2) but tiny n and no
// allocation. start[i] is the first byte of part i; pr[i] the rank of parts i+i+1.
#define SMALL_PIECE 128
static void bpe_small(const Tokenizer *t, const uint8_t *p, size_t n, uint32_t **ids, size_t *nid,
                      size_t *cap) {
    uint32_t start[SMALL_PIECE + 1], pr[SMALL_PIECE + 1];
    size_t m = n;  // number of parts
    for (size_t i = 0; i <= n; i++) start[i] = (uint32_t)i;
    for (size_t i = 0; i + 1 < n; i++) pr[i] = rank_of(t, p + i, 2);
    pr[n - 1] = NO_RANK;
    for (;;) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (pr[i] < best) { best = pr[i]; bi = i; }
        if (best == NO_RANK) break;
        // Merge parts bi and bi+1: remove start[bi+1].
        memmove(start + bi + 1, start + bi + 2, (m - bi - 1) * sizeof start[0]);
        memmove(pr + bi + 1, pr + bi + 2, (m - bi - 2) * sizeof pr[0]);
        m--;
        pr[bi] = bi + 1 < m ? rank_of(t, p + start[bi], start[bi + 2] - start[bi]) : NO_RANK;
        if (bi > 0) pr[bi - 1] = rank_of(t, p + start[bi - 1], start[bi + 1] - start[bi - 1]);
    }
    for (size_t i = 0; i < m; i++) {
        uint32_t id = lookup(t, p + start[i], start[i + 1] - start[i]);
        push_id(ids, nid, cap, id);
    }
}

// Long pieces (e.g. a 100 KB "word" or a long run of spaces): the same merge order,
// O(n log n). Parts form a doubly-linked list indexed by their first byte; candidate
// merges sit in a binary min-heap keyed by (rank, left position), which reproduces
// tiktoken's "lowest rank, leftmost on ties". Stale heap entries (a side was merged
// since) are detected by remembering the pair's end and skipped.
typedef struct {
    uint64_t key;   // rank << 32 | left part start
    uint32_t end;   // end of the pair's bytes when pushed
} HeapItem;

static void heap_push(HeapItem *h, size_t *hn, HeapItem it) {
    size_t i = (*hn)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent].key <= it.key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = it;
}

static HeapItem heap_pop(HeapItem *h, size_t *hn) {
    HeapItem top = h[0], last = h[--(*hn)];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1].key < h[c].key) c++;
        if (last.key <= h[c].key) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

static void bpe_large(const Tokenizer *t, const uint8_t *p, size_t n, uint32_t **ids, size_t *nid,
                      size_t *cap) {
    // next[i]: start of the part after the part starting at i (n at the end);
    // prev[i]: start of the part before (UINT32_MAX at the front); dead parts: next = 0.
    uint32_t *next = xmalloc(n * sizeof(uint32_t)), *prev = xmalloc(n * sizeof(uint32_t));
    HeapItem *heap = xmalloc(2 * n * sizeof(HeapItem));  // <= n-1 initial + 2 per merge
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        next[i] = (uint32_t)(i + 1);
        prev[i] = i ? (uint32_t)(i - 1) : UINT32_MAX;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = rank_of(t, p + i, 2);
        if (r != NO_RANK) heap_push(heap, &hn, (HeapItem){(uint64_t)r << 32 | i, (uint32_t)(i + 2)});
    }
    while (hn) {
        HeapItem it = heap_pop(heap, &hn);
        uint32_t i = (uint32_t)it.key, j = next[i];
        if (j == 0 || j >= n || next[j] != it.end) continue;  // stale
        // Merge i with j.
        next[i] = next[j];
        if (next[j] < n) prev[next[j]] = i;
        next[j] = 0;
        if (prev[i] != UINT32_MAX) {
            uint32_t a = prev[i];
            uint32_t r = rank_of(t, p + a, next[i] - a);
            if (r != NO_RANK) heap_push(heap, &hn, (HeapItem){(uint64_t)r << 32 | a, next[i]});
        }
        if (next[i] < n) {
            uint32_t e = next[next[i]];
            uint32_t r = rank_of(t, p + i, e - i);
            if (r != NO_RANK) heap_push(heap, &hn, (HeapItem){(uint64_t)r << 32 | i, e});
        }
    }
    for (uint32_t i = 0; i < n; i = next[i]) push_id(ids, nid, cap, lookup(t, p + i, next[i] - i));
    free(next);
    free(prev);
    free(heap);
}

// ---------------------------------------------------------------------------------
// Pre-tokenization and encode

// Per-thread state. PCRE2: match data with one ovector pair is enough (we only need the
// whole match); the JIT stack grows to 8 MB for pathological inputs.
// Piece cache: BPE results of short pieces that are not single tokens. Such pieces
// repeat a lot (in the tagged Brown files "/nn" alone is 7% of all pieces), and a hit
// costs one compare instead of a BPE run. Direct-mapped by the piece hash; it belongs
// to one Tokenizer (owner uid) and is cleared when the thread switches tokenizers.
#define CACHE_SLOTS 4096
#define CACHE_KEY 16    // longest cached piece, bytes
#define CACHE_IDS 7     // most ids a cached piece may have
typedef struct {
    uint8_t key[CACHE_KEY];
    uint8_t len, nids;   // len 0: empty
    uint32_t ids[CACHE_IDS];
} CacheEntry;            // 48 bytes

typedef struct {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    uint64_t cache_owner;
    CacheEntry cache[CACHE_SLOTS];
} ThreadState;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p) {
    ThreadState *s = p;
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mc);
    pcre2_jit_stack_free(s->js);
    free(s);
}
static void tls_init(void) {
    if (pthread_key_create(&tls_key, tls_free)) die("pthread_key_create failed");
}
static ThreadState *thread_state(void) {
    pthread_once(&tls_once, tls_init);
    ThreadState *s = pthread_getspecific(tls_key);
    if (!s) {
        s = xcalloc(1, sizeof *s);
        s->md = pcre2_match_data_create(1, NULL);
        s->mc = pcre2_match_context_create(NULL);
        s->js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!s->md || !s->mc || !s->js) die("out of memory (pcre2 state)");
        pcre2_jit_stack_assign(s->mc, NULL, s->js);
        pthread_setspecific(tls_key, s);
    }
    return s;
}

// The calling thread's state, with its piece cache emptied if it held another
// tokenizer's pieces.
static ThreadState *thread_state_for(const Tokenizer *t) {
    ThreadState *s = thread_state();
    if (s->cache_owner != t->uid) {
        memset(s->cache, 0, sizeof s->cache);
        s->cache_owner = t->uid;
    }
    return s;
}

static void encode_piece(const Tokenizer *t, ThreadState *ts, const uint8_t *p, size_t n, uint32_t **ids,
                         size_t *nid, size_t *cap) {
    if (n == 0) return;
    if (n == 1) { push_id(ids, nid, cap, t->byte_id[p[0]]); return; }
    // Most pieces are one token (tiktoken checks the whole piece first too).
    uint64_t k8 = prefix8(p, n), h = hash_bytes(p, n, k8);
    uint32_t id = lookup_h(t, p, n, k8, h);
    if (id != NO_ID) { push_id(ids, nid, cap, id); return; }
    if (n > CACHE_KEY) {
        if (n <= SMALL_PIECE) bpe_small(t, p, n, ids, nid, cap);
        else bpe_large(t, p, n, ids, nid, cap);
        return;
    }
    CacheEntry *e = &ts->cache[(h >> 40) & (CACHE_SLOTS - 1)];
    if (e->len == n && memcmp(e->key, p, n) == 0) {
        for (int i = 0; i < e->nids; i++) push_id(ids, nid, cap, e->ids[i]);
        return;
    }
    size_t first = *nid;
    bpe_small(t, p, n, ids, nid, cap);
    size_t m = *nid - first;
    if (m <= CACHE_IDS) {
        memcpy(e->key, p, n);
        e->len = (uint8_t)n;
        e->nids = (uint8_t)m;
        memcpy(e->ids, *ids + first, m * sizeof(uint32_t));
    }
}

// Split an ordinary (no specials) segment into pieces and BPE each.
static void encode_ordinary(const Tokenizer *t, ThreadState *ts, const uint8_t *s, size_t len,
                            uint32_t **ids, size_t *nid, size_t *cap) {
    size_t pos = 0;
    while (pos < len) {
        // The text was UTF-8 checked once up front: skip PCRE2's per-call check, which
        // would rescan the rest of the subject on every match (quadratic).
        int rc = t->jit ? pcre2_jit_match(t->re, s, len, pos, PCRE2_NO_UTF_CHECK, ts->md, ts->mc)
                        : pcre2_match(t->re, s, len, pos, PCRE2_NO_UTF_CHECK, ts->md, ts->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            die("pre-tokenizer regex failed at byte %zu: %s", pos, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(ts->md);
        size_t a = ov[0], b = ov[1];
        if (t->keep_gaps && a > pos) encode_piece(t, ts, s + pos, a - pos, ids, nid, cap);
        if (b == a) {
            // Empty match (not possible with cl100k's pattern): step one code point.
            b = a + 1;
            while (b < len && (s[b] & 0xC0) == 0x80) b++;
            if (t->keep_gaps) encode_piece(t, ts, s + a, b - a, ids, nid, cap);
        } else {
            encode_piece(t, ts, s + a, b - a, ids, nid, cap);
        }
        pos = b;
    }
    // tiktoken drops text no match covers; "Isolated" keeps it.
    if (t->keep_gaps && pos < len) encode_piece(t, ts, s + pos, len - pos, ids, nid, cap);
}

// Earliest special-token occurrence in s[from..len): returns its start and sets *sp;
// len if none. Longest special wins at the same position.
static size_t find_special(const Tokenizer *t, const uint8_t *s, size_t from, size_t len,
                           const Special **sp) {
    for (size_t i = from; i < len; i++) {
        if (!t->special_first[s[i]]) continue;
        const Special *best = NULL;
        for (int k = 0; k < t->nspecials; k++) {
            const Special *c = &t->specials[k];
            if (c->len <= len - i && (!best || c->len > best->len) && memcmp(s + i, c->str, c->len) == 0)
                best = c;
        }
        if (best) { *sp = best; return i; }
    }
    return len;
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int allow_special,
                     uint32_t **ids, size_t *n, size_t *cap) {
    if (tokenizer_utf8_error_offset(text, len) != len) return -1;
    ThreadState *ts = thread_state_for(t);
    const uint8_t *s = (const uint8_t *)text;
    if (!allow_special || t->nspecials == 0) {
        encode_ordinary(t, ts, s, len, ids, n, cap);
        return 0;
    }
    size_t pos = 0;
    while (pos < len) {
        const Special *sp = NULL;
        size_t at = find_special(t, s, pos, len, &sp);
        // Each segment is matched on its own, as tiktoken does: the regex never sees
        // across a special token.
        if (at > pos) encode_ordinary(t, ts, s + pos, at - pos, ids, n, cap);
        if (!sp) break;
        push_id(ids, n, cap, sp->id);
        pos = at + sp->len;
    }
    return 0;
}

char *tokenizer_decode(const Tokenizer *t, const uint32_t *ids, size_t n, size_t *len_out) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= t->nvocab || t->tok_len[ids[i]] == 0) return NULL;
        total += t->tok_len[ids[i]];
    }
    char *out = xmalloc(total + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        memcpy(o, t->bytes + t->tok_off[ids[i]], t->tok_len[ids[i]]);
        o += t->tok_len[ids[i]];
    }
    *o = 0;
    if (len_out) *len_out = total;
    return out;
}
