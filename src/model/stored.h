// stored.h: a model's weights kept in the precision they are stored in (bf16 in AI2's HF
// shards), usually memory-mapped from the file itself, and upcast to fp32 one part at a
// time (the embedding, block l, the final norm + LM head) into one scratch buffer just
// before the graph reads that part, through GraphParams.weights (the hook a fully sharded
// CPU rank gathers its parts with, train/fsdp.c). `olmo eval` and `olmo generate` then hold
// 2 bytes a parameter plus the largest part in fp32, not 4 bytes a parameter.
// Upcasting bf16 to fp32 is exact, and the graph's fp32 ops read the same values at the same
// table offsets, so the results are bitwise those of the whole model loaded in fp32
// (tests/test_eval_bf16.sh checks it).
#ifndef OLMO_STORED_H
#define OLMO_STORED_H

#include <stddef.h>

#include "model/config.h"
#include "model/graph.h"
#include "model/params.h"

typedef enum { STORED_F32, STORED_BF16 } StoredType;

// One parameter's stored values: n of them (little-endian, any alignment); the tensor's
// remaining numel - n values are zero (the padding rows of a vocab tensor trimmed to the
// real vocabulary, docs/hf.md). The data must outlive the StoredWeights (a mapping).
typedef struct {
    const void *data;
    StoredType type;
    size_t n;
} StoredTensor;

typedef struct StoredWeights StoredWeights;

// ten: one entry per row of t (a tied lm_head may share the embedding's data). The fp32
// scratch (stored_scratch_floats) is allocated here; NULL if it cannot be.
StoredWeights *stored_create(const ModelConfig *cfg, const ParamTable *t, const StoredTensor *ten);
void stored_free(StoredWeights *s);
// Point p at the stored weights for one graph call: p->w and p->norms follow the part the
// graph is in (the hook moves them); p must stay alive for the call.
void stored_bind(StoredWeights *s, GraphParams *p);
// The fp32 scratch of one part, in floats: the largest of the embedding, a block, the
// final norm + LM head (the parts of the table in model order, params.c).
size_t stored_scratch_floats(const ModelConfig *cfg);

#endif
