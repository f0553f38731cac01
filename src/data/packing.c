// packing.c: OLMo-core's packed instances (packing.h): documents by EOS, the long-document
// strategy, best-fit decreasing over a segment tree of bin spaces, the padded instance.
#include "data/packing.h"

#include <stdlib.h>
#include <string.h>

#include "data/pyrandom.h"
#include "util/common.h"

typedef struct {
    PackDoc *v;
    uint64_t n, cap;
} DocList;

static void doc_push(DocList *l, uint32_t file, uint64_t offset, uint64_t len) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = xrealloc(l->v, l->cap * sizeof(PackDoc));
    }
    l->v[l->n++] = (PackDoc){offset, file, (uint32_t)len};
}

// The group's documents in file order (iter_document_indices_with_max_sequence_length).
static void find_documents(Packing *p, const PackFile *files, uint32_t f, DocList *out) {
    const uint64_t T = (uint64_t)p->cfg.seq_len, n = files[f].n_tokens;
    const uint32_t *t = files[f].tok, eos = p->cfg.eos_id;
    uint64_t start = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (t[i] != eos) continue;
        uint64_t end = i + 1, len = end - start;
        if (len <= T) {
            doc_push(out, f, start, len);
            p->docs_whole++;
        } else if (!p->cfg.fragment) {
            doc_push(out, f, start, T);
            p->docs_long++;
            p->tokens_truncated += len - T;
        } else {
            p->docs_long++;
            for (uint64_t s = start; s < end; s += T) {
                doc_push(out, f, s, end - s < T ? end - s : T);
                p->fragments++;
            }
        }
        start = end;
    }
    p->tokens_tail += n - start;
}

// Documents by decreasing length; equal lengths in document order (the tie rule): a
// counting sort over lengths 1..T, stable by construction.
static uint64_t *sort_decreasing(const DocList *d, int T) {
    uint64_t *cnt = xcalloc((size_t)T + 2, sizeof(uint64_t)), *order = xmalloc((d->n + 1) * sizeof(uint64_t));
    for (uint64_t i = 0; i < d->n; i++) cnt[T - d->v[i].len]++;   // bucket 0 = the longest
    uint64_t acc = 0;
    for (int b = 0; b <= T; b++) {
        uint64_t c = cnt[b];
        cnt[b] = acc;
        acc += c;
    }
    for (uint64_t i = 0; i < d->n; i++) order[cnt[T - d->v[i].len]++] = i;
    free(cnt);
    return order;
}

// InstancePacker._pack_document over all documents (sorted): the bin of each. tree[] is
// OLMo-core's SegmentTree as a heap (node k's children 2k, 2k+1; leaf c-1 at T + c - 1)
// holding c at leaf c-1 when some bin has space c (space T: always, a new bin); a query
// walks to the leftmost leaf whose weight holds the document: the smallest fitting space.
static uint64_t obfd(const DocList *d, const uint64_t *order, int T, uint64_t *bin_of) {
    uint32_t *tree = xcalloc(2 * (size_t)T, sizeof(uint32_t));
    int64_t *head = xmalloc(((size_t)T + 1) * sizeof(int64_t)), *tail = xmalloc(((size_t)T + 1) * sizeof(int64_t));
    for (int c = 0; c <= T; c++) head[c] = tail[c] = -1;
    uint64_t n_bins = 0, cap = 1024;
    int64_t *next = xmalloc(cap * sizeof(int64_t));   // FIFO of bins per space: bin -> next bin
#define SET_LEAF(c, w)                                                                          \
    do {                                                                                        \
        size_t k_ = (size_t)T + (size_t)(c) - 1;                                                \
        tree[k_] = (w);                                                                         \
        for (k_ /= 2; k_ >= 1; k_ /= 2) tree[k_] = tree[2 * k_] > tree[2 * k_ + 1] ? tree[2 * k_] : tree[2 * k_ + 1]; \
    } while (0)
    SET_LEAF(T, (uint32_t)T);
    for (uint64_t r = 0; r < d->n; r++) {
        uint32_t len = d->v[order[r]].len;
        size_t k = 1;
        while (k < (size_t)T) k = tree[2 * k] >= len ? 2 * k : 2 * k + 1;
        int space = (int)(k - (size_t)T) + 1;
        int64_t bin;
        if (space == T) {   // a new bin
            if (n_bins == cap) next = xrealloc(next, (cap *= 2) * sizeof(int64_t));
            bin = (int64_t)n_bins++;
        } else {            // the first bin that reached this space
            bin = head[space];
            head[space] = next[bin];
            if (head[space] < 0) {
                tail[space] = -1;
                SET_LEAF(space, 0u);
            }
        }
        bin_of[r] = (uint64_t)bin;
        int left = space - (int)len;
        if (left > 0) {
            if (head[left] < 0) {
                SET_LEAF(left, (uint32_t)left);
                head[left] = bin;
            } else {
                next[tail[left]] = bin;
            }
            tail[left] = bin;
            next[bin] = -1;
        }
    }
#undef SET_LEAF
    free(tree);
    free(head);
    free(tail);
    free(next);
    return n_bins;
}

// Pack one group: its instances appended to p (docs, inst_first).
static void pack_group(Packing *p, const PackFile *files, const uint32_t *group, int n, DocList *all) {
    DocList d = {0};
    for (int k = 0; k < n; k++) find_documents(p, files, group[k], &d);
    const int T = p->cfg.seq_len;
    uint64_t *order = sort_decreasing(&d, T), *bin_of = xmalloc((d.n + 1) * sizeof(uint64_t));
    uint64_t n_bins = obfd(&d, order, T, bin_of);
    // Each bin's documents in the order they were placed: a counting sort by bin.
    uint64_t *first = xcalloc(n_bins + 1, sizeof(uint64_t));
    for (uint64_t r = 0; r < d.n; r++) first[bin_of[r] + 1]++;
    for (uint64_t b = 0; b < n_bins; b++) first[b + 1] += first[b];
    uint64_t base = all->n;
    for (uint64_t r = 0; r < d.n; r++) doc_push(all, 0, 0, 0);
    uint64_t *fill = xmalloc((n_bins + 1) * sizeof(uint64_t));
    memcpy(fill, first, (n_bins + 1) * sizeof(uint64_t));
    for (uint64_t r = 0; r < d.n; r++) {
        all->v[base + fill[bin_of[r]]++] = d.v[order[r]];
        p->tokens_packed += d.v[order[r]].len;
    }
    p->inst_first = xrealloc(p->inst_first, (p->n_inst + n_bins + 1) * sizeof(uint64_t));
    for (uint64_t b = 0; b < n_bins; b++) p->inst_first[p->n_inst + b] = base + first[b];
    p->n_inst += n_bins;
    p->inst_first[p->n_inst] = all->n;
    free(first);
    free(fill);
    free(order);
    free(bin_of);
    free(d.v);
}

Packing *packing_build(const PackConfig *cfg, const PackFile *files, uint32_t n_files) {
    if (cfg->seq_len < 2 || (cfg->seq_len & (cfg->seq_len - 1)))
        die_input("data.packing: packed needs train.seq_len a power of two (OLMo-core's InstancePacker builds a "
                  "SegmentTree that asserts it), got %d", cfg->seq_len);
    if (cfg->group_size < 1) die_input("data.source_group_size must be >= 1, got %d", cfg->group_size);
    if (!n_files) die_input("data.packing: no token files");
    Packing *p = xcalloc(1, sizeof *p);
    p->cfg = *cfg;
    p->n_files = n_files;
    p->file_order = xmalloc(n_files * sizeof(uint32_t));
    for (uint32_t i = 0; i < n_files; i++) p->file_order[i] = i;
    if (cfg->permute) {
        PyRandom r;
        pyrandom_seed(&r, cfg->perm_seed);
        pyrandom_shuffle_u32(&r, p->file_order, n_files);
    }
    uint32_t G = cfg->group_size;
    p->n_groups = (n_files + G - 1) / G;
    p->group_first = xmalloc(((size_t)p->n_groups + 1) * sizeof(uint64_t));
    p->inst_first = xmalloc(sizeof(uint64_t));
    p->inst_first[0] = 0;
    DocList all = {0};
    for (uint32_t g = 0; g < p->n_groups; g++) {
        p->group_first[g] = p->n_inst;
        uint32_t lo = g * G, n = n_files - lo < G ? n_files - lo : G;
        pack_group(p, files, p->file_order + lo, (int)n, &all);
    }
    p->group_first[p->n_groups] = p->n_inst;
    p->docs = all.v;
    p->n_docs = all.n;
    p->tokens_padding = p->n_inst * (uint64_t)cfg->seq_len - p->tokens_packed;
    return p;
}

void packing_free(Packing *p) {
    if (!p) return;
    free(p->file_order);
    free(p->group_first);
    free(p->inst_first);
    free(p->docs);
    free(p);
}

uint32_t packing_group_of(const Packing *p, uint64_t i) {
    uint32_t lo = 0, hi = p->n_groups - 1;
    while (lo < hi) {   // the last group whose first instance is <= i
        uint32_t mid = (lo + hi + 1) / 2;
        if (p->group_first[mid] <= i) lo = mid; else hi = mid - 1;
    }
    return lo;
}

int packing_read(const Packing *p, const PackFile *files, uint64_t i, uint32_t *out) {
    uint64_t n = 0;
    for (uint64_t k = p->inst_first[i]; k < p->inst_first[i + 1]; k++) {
        const PackDoc *d = &p->docs[k];
        memcpy(out + n, files[d->file].tok + d->offset, (size_t)d->len * sizeof(uint32_t));
        n += d->len;
    }
    for (uint64_t k = n; k < (uint64_t)p->cfg.seq_len; k++) out[k] = p->cfg.pad_id;
    return p->cfg.seq_len - (int)n;
}

int packing_doc_lengths(const uint32_t *ids, int n, uint32_t eos_id, uint32_t *lens) {
    int m = 0, start = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] == eos_id) {
            lens[m++] = (uint32_t)(i + 1 - start);
            start = i + 1;
        }
    if (start < n) lens[m++] = (uint32_t)(n - start);
    return m;
}
