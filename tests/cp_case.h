// cp_case.h: the context-parallel test case shared by tool_cp_exact.c (CPU) and
// tool_cuda_cp_exact.c (CUDA): olmo3-tiny with window 100 < T, full attention every 2nd
// layer, the document mask on (EOS 7), and B instances of T tokens with documents of random
// lengths 1..300 (some longer than the window, many crossing the chunk boundaries) and some
// targets masked. Header-only: each tool is one translation unit.
#ifndef OLMO_TESTS_CP_CASE_H
#define OLMO_TESTS_CP_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

static inline ModelConfig cp_case_config(void) {
    ModelConfig cfg = model_preset_find("olmo3-tiny")->cfg;
    cfg.sliding_window = 100;
    cfg.full_attn_every = 2;
    cfg.document_mask = 1;
    cfg.eos_id = 7;
    return cfg;
}

// in, tg (B x T) filled; returns the number of unmasked targets.
static inline long cp_case_instances(int B, int T, int32_t *in, int32_t *tg) {
    uint64_t s = 88172645463325252ull;
    long count = 0;
    for (int b = 0; b < B; b++) {
        int left = 0;
        for (int t = 0; t < T; t++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            if (left-- <= 0) left = (int)(s % 300);   // document lengths 1..300
            in[(size_t)b * T + t] = left == 0 ? 7 : 8 + (int)((s >> 20) % 990);
        }
        for (int t = 0; t < T; t++) {
            int32_t y = t + 1 < T ? in[(size_t)b * T + t + 1] : -100;
            if ((t * 2654435761u >> 7) % 9 == 0) y = -100;   // some masked positions
            tg[(size_t)b * T + t] = y;
            count += y >= 0;
        }
    }
    return count;
}

#endif
