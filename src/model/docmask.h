// docmask.h: document boundaries inside packed instances (intra-document attention mask,
// OLMo 3 long-context stage; OLMo-core `get_document_lengths` semantics).
#ifndef OLMO_DOCMASK_H
#define OLMO_DOCMASK_H

#include <stdint.h>

// inputs (B, T) token ids; doc_start (B, T) out: the first position of the document that
// holds position t of row b. A document ends WITH its EOS (the EOS belongs to the document
// it closes, as in OLMo-core, where lengths run from one EOS+1 through the next EOS); the
// position after an EOS starts a new one; row b's first document starts at 0 (it may be
// the tail of a document cut at the instance boundary). RoPE positions are not reset:
// they stay absolute within the instance (docs/olmo3.md s.1).
void doc_starts_from_tokens(const int32_t *inputs, int B, int T, int32_t eos_id, int32_t *doc_start);

#endif
