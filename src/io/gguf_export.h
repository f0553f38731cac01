// gguf_export.h: `olmo export-gguf`: an OLMo 3 checkpoint as the GGUF file llama.cpp
// loads as its `olmo2` architecture (gguf_export.c, docs/gguf.md).
#ifndef OLMO_GGUF_EXPORT_H
#define OLMO_GGUF_EXPORT_H

#include "io/gguf.h"

// CKPT (as model_source_resolve takes it: run, checkpoint, .safetensors, HF directory) to
// the GGUF v3 file out: 2-D weights in `type` (F32, F16, BF16 or Q8_0; norms stay F32),
// the padded vocab rows kept, the tokenizer (tok_path; NULL = $OLMO_TOKENIZER or dolma2)
// as a gpt2/dbrx BPE vocabulary, YaRN and the sliding-window pattern as llama.cpp reads
// them. Streams tensor by tensor (memory: the largest tensor in fp32), written atomically,
// with a progress bar on stderr. What llama.cpp cannot represent is refused before
// anything is written (exit 2, naming the key): head_dim x heads != d_model, YaRN betas
// other than 32/1 or a ramp OLMo-core clips differently, Q8_0 with rows not a multiple
// of 32, a tokenizer that is not byte-level BPE with the cl100k pre-tokenizer.
// max_pos 0: the run's train.seq_len (with YaRN: factor x original context).
void gguf_export(const char *ckpt, const char *out, GgmlType type, const char *tok_path, int max_pos);

#endif
