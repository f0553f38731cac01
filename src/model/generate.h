// generate.h: what `olmo generate` (src/cli/cmd_generate.c) needs around the KV-cache
// forward (kv.h): the prompt as an id list, sampling, and --check-kv's comparison of the
// cached logits with a full forward.
#ifndef OLMO_GENERATE_H
#define OLMO_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

// Sampling: greedy (argmax, lowest id on ties) or temperature + top-p (nucleus) with a
// seeded splitmix64 stream, so a (checkpoint, prompt, seed) triple always gives the same
// text. Only the V real-vocab rows are candidates: the LM head's padding rows never are.
typedef struct { float p; int id; } SampleCand;
typedef struct {
    int V, greedy;
    float temperature, top_p;
    uint64_t rng;
    SampleCand *cand;   // (V) scratch
} Sampler;
void sampler_init(Sampler *s, int V, int greedy, float temperature, float top_p, uint64_t seed);
void sampler_free(Sampler *s);
// The next token from logits (>= V entries); advances the stream unless greedy.
int sampler_next(Sampler *s, const float *logits);

// "ID,ID,..." as ids (malloc'd), their count in *n; a malformed list exits with an input error.
uint32_t *gen_parse_ids(const char *arg, size_t *n);

// --check-kv: the KV-cache logits of the T prompt positions against a full forward
// (model_forward_backward over m, allocated for (1, >= T)): decode_logits (T, Vp) from
// the token-by-token path, and a chunked prefill in chunks of 5 (odd, so chunks straddle
// the window) run here. Each error: the max over positions of max|a - b| / max|b| over
// the real-vocab row.
typedef struct { double decode, chunked; } KVCheck;
KVCheck gen_check_kv(Model *m, const int32_t *seq, int T, const float *decode_logits);

#endif
