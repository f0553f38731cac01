// packing.h: OLMo-core's packed instances (NumpyPackedFSLDataset, olmo_core/data/
// numpy_dataset.py, and pack_documents_into_instances / InstancePacker, data/utils.py, at
// fa6c5014): documents packed whole into instances of seq_len tokens by optimized best-fit
// decreasing (OBFD), padded with pad_id, instead of cut from the token stream (FSL).
//
// 1. Files: in the recipe's order, or, with a permutation seed, permuted by Python's
//    random.Random(seed).shuffle (pyrandom.h), then chunked into groups of group_size
//    consecutive files (the last group may be shorter). Each group is packed alone.
// 2. Documents: a document ends with its EOS (inclusive); tokens after a file's last EOS
//    are no document (dropped). A document longer than seq_len is cut to its first seq_len
//    tokens (truncate: the rest, its EOS included, dropped) or split into seq_len pieces
//    and a remainder (fragment: nothing dropped).
// 3. OBFD per group: documents by decreasing length; TIE RULE: equal lengths keep their
//    document order (position in the group's files), where OLMo-core's np.argsort
//    (quicksort, not stable) leaves ties to the numpy build. Each document goes to the bin
//    whose remaining space is the smallest that holds it (a new bin when none does), among
//    bins of that space the one that reached it first (FIFO); a bin's documents in the
//    order they were placed. Instances: the group's bins in creation order; the groups'
//    instances concatenated in group order give the dataset's instance index.
// 4. An instance: its documents' tokens, then pad_id up to seq_len (those positions are no
//    target: OLMo-core's label_mask); its document lengths (OLMo-core doc_lens with
//    generate_doc_lengths) count the padding as a last document, as the EOS-delimited
//    document mask sees it.
#ifndef OLMO_PACKING_H
#define OLMO_PACKING_H

#include <stdint.h>

typedef struct {
    const uint32_t *tok;   // the file's tokens (mmap'd)
    uint64_t n_tokens;
} PackFile;

typedef struct {
    int seq_len;           // a power of two (OLMo-core's SegmentTree requires it)
    uint32_t eos_id, pad_id;
    int fragment;          // long_doc_strategy: 0 truncate, 1 fragment
    int group_size;        // >= 1
    int permute;           // 1: permute the files with perm_seed first
    uint64_t perm_seed;
} PackConfig;

typedef struct {
    uint64_t offset;       // first token in its file
    uint32_t file;         // index into the PackFile array (recipe order)
    uint32_t len;
} PackDoc;

typedef struct {
    PackConfig cfg;
    uint32_t n_files;
    uint32_t *file_order;  // packing order: file_order[k] = recipe index of the k-th file
    uint32_t n_groups;
    uint64_t *group_first; // n_groups + 1: first instance of each group
    uint64_t n_inst;
    uint64_t *inst_first;  // n_inst + 1: first document of each instance in docs[]
    PackDoc *docs;         // every packed document, instance by instance
    uint64_t n_docs;
    // accounting
    uint64_t docs_whole;       // documents of at most seq_len tokens
    uint64_t docs_long;        // documents longer than seq_len (truncated or fragmented)
    uint64_t fragments;        // pieces the long documents became (fragment)
    uint64_t tokens_truncated; // tokens dropped by truncate
    uint64_t tokens_tail;      // tokens after a file's last EOS (no document)
    uint64_t tokens_packed, tokens_padding;
} Packing;

// Find the documents of the files and pack them. files: in recipe order. Bad config
// (seq_len not a power of two, group_size < 1): die_input naming the data.* key.
Packing *packing_build(const PackConfig *cfg, const PackFile *files, uint32_t n_files);
void packing_free(Packing *p);

// Group of instance i (binary search over group_first).
uint32_t packing_group_of(const Packing *p, uint64_t i);
// Instance i's padded ids (seq_len) into out; returns its number of padding tokens.
int packing_read(const Packing *p, const PackFile *files, uint64_t i, uint32_t *out);
// Document lengths of padded ids as OLMo-core's get_document_lengths (no BOS): lengths up
// to and including each EOS, plus what follows the last EOS. Returns the count.
int packing_doc_lengths(const uint32_t *ids, int n, uint32_t eos_id, uint32_t *lens);

#endif
