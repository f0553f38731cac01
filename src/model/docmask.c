// docmask.c: see docmask.h.
#include "model/docmask.h"

#include <stddef.h>

void doc_starts_from_tokens(const int32_t *inputs, int B, int T, int32_t eos_id, int32_t *doc_start) {
    for (int b = 0; b < B; b++) {
        const int32_t *in = inputs + (size_t)b * T;
        int32_t *ds = doc_start + (size_t)b * T;
        int32_t start = 0;
        for (int t = 0; t < T; t++) {
            ds[t] = start;
            if (in[t] == eos_id) start = t + 1;   // the EOS closes its own document
        }
    }
}
