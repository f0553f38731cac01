// config.c: OLMo 3-family presets, derived dims, validation, parameter and FLOP counts.
#include "model/config.h"

#include <stdio.h>
#include <string.h>

// Presets. olmo3-7b and olmo3-32b are OLMo 3 7B and 32B exactly (docs/olmo3.md section 1;
// OLMo-core TransformerConfig.olmo3_7B / olmo3_32B). The small ones keep every
// feature of the family on (QK-norm, 3:1 sliding/full pattern with a window shorter than
// their training sequence, GQA) so tests and CPU runs exercise the general case.
static const ModelPreset PRESETS[] = {
    {"olmo3-7b", "OLMo 3 7B: 32 layers, d 4096, 32 heads (MHA), SwiGLU 11008, window 4096",
     {100278, 0, 4096, 32, 32, 32, 128, 11008, 500000.0, 1e-6, 4096, 4, {0}, 0, 0}},
    {"olmo3-32b", "OLMo 3 32B: 64 layers, d 5120, 40 heads / 8 kv heads (GQA), SwiGLU 27648, window 4096",
     {100278, 0, 5120, 64, 40, 8, 128, 27648, 500000.0, 1e-6, 4096, 4, {0}, 0, 0}},
    {"olmo3-60m", "~56M params (51M of them embedding + LM head): d 256, 6 layers, 8 heads / 4 kv heads, window 256",
     {100278, 0, 256, 6, 8, 4, 32, 768, 500000.0, 1e-6, 256, 4, {0}, 0, 0}},
    {"olmo3-20m", "~20M params (19M of them embedding + LM head): d 96, 4 layers, 6 heads / 2 kv heads, window 64",
     {100278, 0, 96, 4, 6, 2, 16, 256, 500000.0, 1e-6, 64, 4, {0}, 0, 0}},
    {"olmo3-tiny", "unit tests only: vocab 1000, d 64, 4 layers, 4 heads / 2 kv heads, window 8",
     {1000, 0, 64, 4, 4, 2, 16, 128, 500000.0, 1e-6, 8, 4, {0}, 0, 0}},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

const ModelPreset *model_preset_find(const char *name) {
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(PRESETS[i].name, name)) return &PRESETS[i];
    return NULL;
}

const ModelPreset *model_presets(int *n) {
    *n = NPRESETS;
    return PRESETS;
}

void model_config_derive(ModelConfig *c) {
    if (c->padded_vocab <= 0) c->padded_vocab = (c->vocab_size + 127) / 128 * 128;
    if (c->head_dim <= 0 && c->n_heads > 0) c->head_dim = c->d_model / c->n_heads;
    if (c->full_attn_every <= 0) c->full_attn_every = 1;
}

const char *model_config_check(const ModelConfig *c) {
    if (c->vocab_size <= 0) return "model.vocab_size must be > 0";
    if (c->padded_vocab < c->vocab_size) return "model.padded_vocab must be >= vocab_size";
    if (c->d_model <= 0) return "model.d_model must be > 0";
    if (c->n_layers <= 0 || c->n_layers > MAX_LAYERS) return "model.n_layers must be in 1..256";
    if (c->n_heads <= 0) return "model.n_heads must be > 0";
    if (c->n_kv_heads <= 0) return "model.n_kv_heads must be > 0";
    if (c->d_model % c->n_heads != 0) return "model.d_model must be divisible by model.n_heads";
    if (c->n_heads % c->n_kv_heads != 0) return "model.n_heads must be a multiple of model.n_kv_heads";
    if (c->head_dim <= 0 || c->head_dim % 2 != 0) return "model.head_dim must be a positive even number (RoPE rotates halves)";
    if (c->mlp_hidden <= 0) return "model.mlp_hidden must be > 0";
    if (!(c->rope_theta > 0)) return "model.rope_theta must be > 0";
    if (!(c->rms_eps > 0)) return "model.rms_eps must be > 0";
    if (c->sliding_window <= 0) return "model.sliding_window must be > 0";
    if (c->full_attn_every <= 0) return "model.full_attn_every must be > 0";
    const RopeScaling *rs = &c->rope_scaling;
    if (rs->type != ROPE_SCALING_NONE && rs->type != ROPE_SCALING_YARN) return "model.rope_scaling must be none or yarn";
    if (rs->type == ROPE_SCALING_YARN) {
        if (!(rs->factor >= 1 && rs->factor <= 1e6)) return "model.rope_scaling_factor must be in [1, 1e6] with yarn";
        if (!(rs->beta_slow > 0)) return "model.rope_beta_slow must be > 0 with yarn";
        if (!(rs->beta_fast > rs->beta_slow && rs->beta_fast <= 1e6))
            return "model.rope_beta_fast must be > model.rope_beta_slow (and <= 1e6) with yarn";
        if (rs->original_context <= 0) return "model.rope_original_context must be > 0 with yarn";
        // HF export writes factor x original as max_position_embeddings (an int)
        if (rs->factor * rs->original_context > (double)(1 << 30))
            return "model.rope_scaling_factor x model.rope_original_context must be <= 2^30 with yarn";
    }
    return NULL;
}

int model_layer_is_sliding(const ModelConfig *c, int layer) {
    return layer % c->full_attn_every != c->full_attn_every - 1;
}

int model_layer_window(const ModelConfig *c, int layer, int T) {
    if (!model_layer_is_sliding(c, layer)) return T;
    return c->sliding_window < T ? c->sliding_window : T;
}

int model_layer_rope_scaled(const ModelConfig *c, int layer) {
    return c->rope_scaling.type == ROPE_SCALING_YARN && !model_layer_is_sliding(c, layer);
}

int rope_scaling_equal(const RopeScaling *a, const RopeScaling *b) {
    if (a->type != b->type) return 0;
    if (a->type == ROPE_SCALING_NONE) return 1;
    return a->factor == b->factor && a->beta_fast == b->beta_fast && a->beta_slow == b->beta_slow &&
           a->original_context == b->original_context;
}

const char *rope_scaling_describe(const RopeScaling *s, char *buf, size_t n) {
    if (s->type != ROPE_SCALING_YARN) snprintf(buf, n, "none");
    else
        snprintf(buf, n, "yarn(factor %g, beta_fast %g, beta_slow %g, original_context %d)", s->factor, s->beta_fast,
                 s->beta_slow, s->original_context);
    return buf;
}

static size_t block_params(const ModelConfig *c) {
    size_t C = c->d_model, q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t attn = C * q + 2 * C * kv + q * C;
    size_t mlp = 3 * C * (size_t)c->mlp_hidden;
    size_t norms = q + kv + 2 * C;
    return attn + mlp + norms;
}

size_t model_num_params_embedding(const ModelConfig *c) {
    return (size_t)c->padded_vocab * c->d_model;
}

size_t model_num_params(const ModelConfig *c) {
    size_t emb = model_num_params_embedding(c);
    return emb + (size_t)c->n_layers * block_params(c) + c->d_model + emb;  // embed, blocks, final norm, lm head
}

double model_flops_per_token_olmo_core(const ModelConfig *c, int seq_len) {
    double n_nonemb = (double)(model_num_params(c) - model_num_params_embedding(c));
    return 6.0 * n_nonemb + 12.0 * c->n_layers * c->n_heads * c->head_dim * (double)seq_len;
}

double model_flops_per_token_window(const ModelConfig *c, int seq_len) {
    double n_nonemb = (double)(model_num_params(c) - model_num_params_embedding(c));
    double attn = 0;
    for (int l = 0; l < c->n_layers; l++)
        attn += 12.0 * c->n_heads * c->head_dim * (double)model_layer_window(c, l, seq_len);
    return 6.0 * n_nonemb + attn;
}
