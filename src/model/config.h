// config.h: the shape of an OLMo 3-family model, its presets, parameter and FLOP counts.
#ifndef OLMO_CONFIG_H
#define OLMO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"   // RopeScaling

#define MAX_LAYERS 256

typedef struct {
    int vocab_size;     // real vocab (100278 for dolma2)
    int padded_vocab;   // rows of embedding / LM head: vocab rounded up to a multiple of 128
    int d_model;
    int n_layers;
    int n_heads;
    int n_kv_heads;     // divides n_heads (GQA); == n_heads is plain MHA
    int head_dim;
    int mlp_hidden;     // SwiGLU hidden size
    double rope_theta;
    double rms_eps;
    int sliding_window; // tokens a sliding layer sees (query i sees keys i-window+1..i)
    int full_attn_every;// layer i is full when i % full_attn_every == full_attn_every - 1
    // Long-context stage (docs/olmo3.md s.1): YaRN on the full-attention layers only (sliding
    // layers keep plain RoPE); type ROPE_SCALING_NONE (zero) = plain RoPE everywhere.
    RopeScaling rope_scaling;
    // Not a weight shape: how packed instances are masked. document_mask: a query attends
    // only to keys of its own document (documents end with eos_id; model/docmask.h).
    int document_mask;
    int32_t eos_id;
} ModelConfig;

typedef struct {
    const char *name;
    const char *about;
    ModelConfig cfg;
} ModelPreset;

// Look a preset up by name; returns NULL if unknown.
const ModelPreset *model_preset_find(const char *name);
// All presets (for help texts); *n receives the count.
const ModelPreset *model_presets(int *n);

// Fill padded_vocab (multiple of 128) and head_dim (d_model / n_heads) when they are 0.
void model_config_derive(ModelConfig *c);
// Check dims; returns NULL if fine, else a static message naming what is wrong.
const char *model_config_check(const ModelConfig *c);

// 1 if layer i uses a sliding window, 0 if full causal attention.
int model_layer_is_sliding(const ModelConfig *c, int layer);
// Window (in keys, including the query itself) layer i uses at sequence length T.
int model_layer_window(const ModelConfig *c, int layer, int T);
// 1 if layer i applies the rope_scaling (YaRN) tables: full-attention layers of a model
// with rope_scaling set.
int model_layer_rope_scaled(const ModelConfig *c, int layer);
// Two rope scalings equal (every field that changes the tables)?
int rope_scaling_equal(const RopeScaling *a, const RopeScaling *b);
// "none" or "yarn(factor 8, beta_fast 32, beta_slow 1, original_context 8192)" into buf.
const char *rope_scaling_describe(const RopeScaling *s, char *buf, size_t n);

size_t model_num_params(const ModelConfig *c);            // total, padded vocab
size_t model_num_params_embedding(const ModelConfig *c);  // the embedding table only
// FLOPs per token for training (fwd+bwd), docs/olmo3.md section 8:
// OLMo-core v2.3 count (TransformerConfig.num_flops_per_token there): 6 * N_nonembedding (LM
// head included) + 12 * L * H * Dh * T. Logged beside MFU as mfu_olmo_core_v2_3.
double model_flops_per_token_olmo_core(const ModelConfig *c, int seq_len);
// Sliding-window-aware count, MFU's (current OLMo-core: Attention.num_flops_per_token uses
// min(window_size, T)): per layer min(window, T) instead of T in the attention term.
double model_flops_per_token_window(const ModelConfig *c, int seq_len);

#endif
