// gguf_export.c: `olmo export-gguf` (gguf_export.h, docs/gguf.md): an OLMo 3 model as the
// GGUF file llama.cpp reads as architecture `olmo2` (llama.cpp's src/models/olmo2.cpp:
// QK-norm over the whole projection, post-norms, SwiGLU, NEOX RoPE; Olmo 3's sliding
// layers through `sliding_window` + a scalar `sliding_window_pattern`; YaRN on the full
// layers only, as in OLMo-core).
//
// What llama.cpp's loader takes, and so what we write or refuse:
//   - sliding pattern: layer i slides iff i % P < P - 1, the same rule as our
//     full_attn_every = P (i % P == P - 1 is full), for any P, including P > n_layers
//     (every layer slides) and P = 1 (none; then no sliding_window key at all);
//   - head size: olmo2 takes n_embd / n_head, so n_heads x head_dim must be d_model;
//   - YaRN: rope.scaling.{type,factor,original_context_length,attn_factor}; the betas are
//     not read (llama.cpp's defaults 32 / 1 are used), so others are refused. ggml's rope
//     multiplies cos/sin by attn_factor x (1 + 0.1 ln factor) when YaRN is on (after
//     llama_context cancels its own get_mscale), so attn_factor = OLMo's attention factor
//     / (1 + 0.1 ln factor) = 1. The ramp's upper end is clipped at D - 1 by llama.cpp and
//     at D/2 - 1 by OLMo-core: a model where that clip binds is refused;
//   - vocabulary: embedding rows = tokens, so the padded rows get "[PAD<id>]" tokens of
//     type UNUSED (as llama.cpp's convert_hf_to_gguf.py pads); dolma2's pre-tokenizer is
//     cl100k's regex, which llama.cpp calls `dbrx`; no BOS is added; every added token is
//     CONTROL (vocab_build says why).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "data/tokenizer.h"
#include "io/gguf.h"
#include "io/gguf_export.h"
#include "io/hf.h"
#include "model/params.h"
#include "util/common.h"
#include "util/progress.h"

#define DOLMA2_EOS 100257
#define DOLMA2_PAD 100277
// cl100k_base's pre-tokenizer (OLMO3.md s.3), llama.cpp's LLAMA_VOCAB_PRE_TYPE_DBRX.
static const char CL100K_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5 };

// ---- the tokenizer as GGUF arrays --------------------------------------------------------------
typedef struct {
    char **tokens;      // rows entries
    int32_t *types;
    char **merges;
    size_t n_merges;
    int rows;
} GgufVocab;

typedef struct {
    const char *s;
    int id;
} TokId;
static int tokid_cmp(const void *a, const void *b) { return strcmp(((const TokId *)a)->s, ((const TokId *)b)->s); }

// tokenizer.json -> tokens[rows] (ids past the model's real vocab and gaps: "[PAD<id>]",
// UNUSED), token types, and the merges whose result is a kept token (a test model's
// smaller vocabulary keeps dolma2's first vocab_size ids and the merges among them).
static void vocab_build(GgufVocab *v, const char *path, int vocab_size, int rows) {
    size_t len;
    char *txt = read_file_all(path, &len);
    if (!txt) die_input("export-gguf: cannot read tokenizer %s: %s (give --tokenizer FILE)", path, strerror(errno));
    cJSON *o = cJSON_Parse(txt);
    free(txt);
    if (!o) die_input("export-gguf: %s: not valid JSON", path);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
    const cJSON *ty = m ? cJSON_GetObjectItemCaseSensitive(m, "type") : NULL;
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "BPE"))
        die_input("export-gguf: %s: model.type must be \"BPE\" (byte-level BPE, llama.cpp's gpt2 vocabulary)", path);
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(o, "pre_tokenizer");
    const cJSON *seq = pre ? cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers") : NULL;
    const cJSON *split = seq ? cJSON_GetArrayItem(seq, 0) : NULL;
    const cJSON *pat = split ? cJSON_GetObjectItemCaseSensitive(split, "pattern") : NULL;
    const cJSON *rx = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    if (!cJSON_IsString(rx) || strcmp(rx->valuestring, CL100K_REGEX))
        die_input("export-gguf: %s: pre_tokenizer.pretokenizers[0].pattern.Regex must be cl100k's (dolma2's), the one "
                  "llama.cpp knows as \"dbrx\"; other pre-tokenizers are not supported", path);
    v->rows = rows;
    v->tokens = xcalloc((size_t)rows, sizeof(char *));
    v->types = xcalloc((size_t)rows, sizeof(int32_t));
    const cJSON *e, *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= vocab_size) continue;
        int id = (int)e->valuedouble;
        free(v->tokens[id]);
        v->tokens[id] = xstrdup(e->string);
        v->types[id] = TOK_NORMAL;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "added_tokens")) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c) || id->valuedouble < 0 || id->valuedouble >= vocab_size) continue;
        int i = (int)id->valuedouble;
        free(v->tokens[i]);
        v->tokens[i] = xstrdup(c->valuestring);
        // Every added token is CONTROL, also dolma2's non-special ones (|||PHONE_NUMBER|||,
        // <|extra_id_N|>) that llama.cpp's converter marks USER_DEFINED: llama.cpp splits
        // USER_DEFINED tokens out of any text, CONTROL ones only when asked to parse special
        // tokens, and olmo.c's dolma2 (tiktoken's cl100k, `olmo tokenize`) splits added
        // tokens only with --allow-special. So both tokenize every text alike.
        v->types[i] = TOK_CONTROL;
    }
    for (int i = 0; i < rows; i++)
        if (!v->tokens[i]) {
            char b[32];
            snprintf(b, sizeof b, "[PAD%d]", i);
            v->tokens[i] = xstrdup(b);
            v->types[i] = TOK_UNUSED;
        }
    // token -> id, sorted for bsearch (cJSON's object lookup is a linear scan)
    int nv = cJSON_GetArraySize(vocab), k = 0;
    TokId *byname = xcalloc((size_t)nv + 1, sizeof *byname);
    cJSON_ArrayForEach(e, vocab) if (cJSON_IsNumber(e)) byname[k++] = (TokId){e->string, (int)e->valuedouble};
    qsort(byname, (size_t)k, sizeof *byname, tokid_cmp);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    v->merges = xcalloc((size_t)cJSON_GetArraySize(merges) + 1, sizeof(char *));
    cJSON_ArrayForEach(e, merges) {
        char a[1024];
        if (cJSON_IsString(e)) snprintf(a, sizeof a, "%s", e->valuestring);
        else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                 cJSON_IsString(cJSON_GetArrayItem(e, 1)))
            snprintf(a, sizeof a, "%s %s", cJSON_GetArrayItem(e, 0)->valuestring, cJSON_GetArrayItem(e, 1)->valuestring);
        else die_input("export-gguf: %s: model.merges entries must be \"a b\" strings or [a, b] pairs", path);
        // Keep a merge only when its result is a token of the model's vocabulary.
        char joined[1024], *sp = strchr(a, ' ');
        if (!sp) die_input("export-gguf: %s: merge \"%s\" has no space", path, a);
        snprintf(joined, sizeof joined, "%.*s%s", (int)(sp - a), a, sp + 1);
        const TokId *r = bsearch(&(TokId){joined, 0}, byname, (size_t)k, sizeof *byname, tokid_cmp);
        if (r && r->id < vocab_size) v->merges[v->n_merges++] = xstrdup(a);
    }
    free(byname);
    cJSON_Delete(o);
}

static void vocab_free(GgufVocab *v) {
    for (int i = 0; i < v->rows; i++) free(v->tokens[i]);
    for (size_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
}

// ---- refusals: what llama.cpp's olmo2 cannot represent ---------------------------------------
static void check_representable(const char *ckpt, const ModelConfig *c, GgmlType type) {
    if (c->n_heads * c->head_dim != c->d_model)
        die_input("export-gguf: %s: model.head_dim %d x model.n_heads %d != model.d_model %d: llama.cpp's olmo2 takes the "
                  "head size as d_model / n_heads", ckpt, c->head_dim, c->n_heads, c->d_model);
    const RopeScaling *rs = &c->rope_scaling;
    if (rs->type == ROPE_SCALING_YARN) {
        if (rs->beta_fast != 32 || rs->beta_slow != 1)
            die_input("export-gguf: %s: model.rope_beta_fast %g / rope_beta_slow %g: llama.cpp's olmo2 reads no YaRN betas "
                      "(it uses 32 / 1)", ckpt, rs->beta_fast, rs->beta_slow);
        int D = c->head_dim;
        double h = ceil(D * log(rs->original_context / (rs->beta_slow * 2.0 * M_PI)) / (2.0 * log(c->rope_theta)));
        if (h > D / 2 - 1)
            die_input("export-gguf: %s: YaRN ramp end %g > head_dim/2 - 1 = %d: OLMo-core clips it there, llama.cpp at "
                      "head_dim - 1, so the two would compute different frequencies", ckpt, h, D / 2 - 1);
    }
    if (type == GGML_Q8_0 && (c->d_model % GGUF_Q8_0_BLOCK || c->mlp_hidden % GGUF_Q8_0_BLOCK))
        die_input("export-gguf: %s: --type q8_0 needs rows that are whole blocks of %d: model.d_model %d, model.mlp_hidden %d",
                  ckpt, GGUF_Q8_0_BLOCK, c->d_model, c->mlp_hidden);
}

// ---- metadata -----------------------------------------------------------------------------------
static uint32_t file_type(GgmlType t) {   // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_BF16 32
    return t == GGML_F16 ? 1 : t == GGML_Q8_0 ? 7 : t == GGML_BF16 ? 32 : 0;
}

static void write_metadata(GgufWriter *g, const ModelConfig *c, GgmlType type, int max_pos, const GgufVocab *v) {
    gguf_kv_str(g, "general.architecture", "olmo2");
    gguf_kv_str(g, "general.name", "OLMo 3 (olmo.c export)");
    gguf_kv_u32(g, "general.file_type", file_type(type));
    gguf_kv_u32(g, "general.quantization_version", 2);
    gguf_kv_u32(g, "general.alignment", GGUF_ALIGN);
    gguf_kv_u32(g, "olmo2.vocab_size", (uint32_t)c->padded_vocab);
    gguf_kv_u32(g, "olmo2.context_length", (uint32_t)max_pos);
    gguf_kv_u32(g, "olmo2.embedding_length", (uint32_t)c->d_model);
    gguf_kv_u32(g, "olmo2.block_count", (uint32_t)c->n_layers);
    gguf_kv_u32(g, "olmo2.feed_forward_length", (uint32_t)c->mlp_hidden);
    gguf_kv_u32(g, "olmo2.attention.head_count", (uint32_t)c->n_heads);
    gguf_kv_u32(g, "olmo2.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    gguf_kv_u32(g, "olmo2.attention.key_length", (uint32_t)c->head_dim);
    gguf_kv_u32(g, "olmo2.attention.value_length", (uint32_t)c->head_dim);
    gguf_kv_u32(g, "olmo2.rope.dimension_count", (uint32_t)c->head_dim);
    gguf_kv_f32(g, "olmo2.attention.layer_norm_rms_epsilon", (float)c->rms_eps);
    gguf_kv_f32(g, "olmo2.rope.freq_base", (float)c->rope_theta);
    int any_sliding = 0;
    for (int i = 0; i < c->n_layers; i++) any_sliding |= model_layer_is_sliding(c, i);
    if (any_sliding) {
        gguf_kv_u32(g, "olmo2.attention.sliding_window", (uint32_t)c->sliding_window);
        gguf_kv_u32(g, "olmo2.attention.sliding_window_pattern", (uint32_t)c->full_attn_every);
    }
    const RopeScaling *rs = &c->rope_scaling;
    if (rs->type == ROPE_SCALING_YARN) {
        gguf_kv_str(g, "olmo2.rope.scaling.type", "yarn");
        gguf_kv_f32(g, "olmo2.rope.scaling.factor", (float)rs->factor);
        gguf_kv_u32(g, "olmo2.rope.scaling.original_context_length", (uint32_t)rs->original_context);
        gguf_kv_f32(g, "olmo2.rope.scaling.attn_factor", (float)(rope_attention_factor(rs) / (1.0 + 0.1 * log(rs->factor))));
    }
    gguf_kv_str(g, "tokenizer.ggml.model", "gpt2");
    gguf_kv_str(g, "tokenizer.ggml.pre", "dbrx");
    gguf_kv_str_array(g, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (size_t)v->rows);
    gguf_kv_i32_array(g, "tokenizer.ggml.token_type", v->types, (size_t)v->rows);
    gguf_kv_str_array(g, "tokenizer.ggml.merges", (const char *const *)v->merges, v->n_merges);
    // dolma2's ids where the vocabulary has them (a test model's smaller one may not).
    if (DOLMA2_EOS < c->vocab_size) {
        gguf_kv_u32(g, "tokenizer.ggml.eos_token_id", DOLMA2_EOS);
        gguf_kv_u32(g, "tokenizer.ggml.bos_token_id", DOLMA2_EOS);   // never added (add_bos_token false)
    }
    if (DOLMA2_PAD < c->vocab_size) gguf_kv_u32(g, "tokenizer.ggml.padding_token_id", DOLMA2_PAD);
    gguf_kv_bool(g, "tokenizer.ggml.add_bos_token", 0);
    gguf_kv_bool(g, "tokenizer.ggml.add_eos_token", 0);
}

// ---- tensors ------------------------------------------------------------------------------------
// Our (HF) name -> llama.cpp's. Returns 0 if the name is not a model weight.
static int gguf_name(const char *hf, char *out, size_t n) {
    static const char *const map[][2] = {
        {"self_attn.q_proj.weight", "attn_q.weight"}, {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"}, {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"}, {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"}, {"mlp.down_proj.weight", "ffn_down.weight"},
        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    };
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, n, "token_embd.weight") > 0;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, n, "output_norm.weight") > 0;
    if (!strcmp(hf, "lm_head.weight")) return snprintf(out, n, "output.weight") > 0;
    int layer, off = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &off) != 1 || off == 0) return 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf + off, map[i][0])) return snprintf(out, n, "blk.%d.%s", layer, map[i][1]) > 0;
    return 0;
}

static const char *type_name(GgmlType t) {
    return t == GGML_F16 ? "F16" : t == GGML_BF16 ? "BF16" : t == GGML_Q8_0 ? "Q8_0" : "F32";
}

void gguf_export(const char *ckpt, const char *out, GgmlType type, const char *tok_path, int max_pos) {
    char err[4096];
    ModelSource s;
    if (model_source_resolve(ckpt, &s, err, sizeof err) != 0) die_input("export-gguf: %s", err);
    const ModelConfig *c = &s.cfg;
    check_representable(ckpt, c, type);
    if (c->rope_scaling.type == ROPE_SCALING_YARN) {
        int want = (int)lround(c->rope_scaling.factor * c->rope_scaling.original_context);
        if (max_pos && max_pos != want)
            die_input("export-gguf: --max-pos %d: with YaRN the context length is factor x original context = %d", max_pos, want);
        max_pos = want;
    }
    if (!max_pos) max_pos = s.seq_len > 0 ? s.seq_len : HF_DEFAULT_MAX_POS;
    ParamTable t;
    param_table_build(&t, c);
    ModelTensors *mt = model_tensors_open(&s, &t, err, sizeof err);
    if (!mt) die_input("export-gguf: %s", err);
    char *tp = tokenizer_resolve_path(tok_path);
    GgufVocab v = {0};
    vocab_build(&v, tp, c->vocab_size, c->padded_vocab);

    GgufWriter *g = gguf_new();
    write_metadata(g, c, type, max_pos, &v);
    size_t biggest = 0;
    for (int i = 0; i < t.n; i++) {
        const ParamInfo *p = &t.p[i];
        char name[128];
        if (!gguf_name(p->name, name, sizeof name)) die("export-gguf: no GGUF name for tensor %s", p->name);
        int rows = p->ndim == 2 ? p->shape[0] : 1, cols = p->ndim == 2 ? p->shape[1] : p->shape[0];
        gguf_add_tensor(g, name, p->ndim == 2 ? type : GGML_F32, rows, cols);   // norms stay F32, as llama.cpp's converter
        if (p->numel > biggest) biggest = p->numel;
    }
    Progress pr = {.total = gguf_file_size(g), .t0 = now_seconds(), .bar = 1};
    if (gguf_begin(g, out) != 0) die_input("export-gguf: cannot write %s: %s", out, strerror(errno));
    float *buf = xmalloc_aligned(sizeof(float) * biggest);
    for (int i = 0; i < t.n; i++) {
        const ParamInfo *p = &t.p[i];
        model_tensors_read(mt, i, buf);
        int rows = p->ndim == 2 ? p->shape[0] : 1, cols = p->ndim == 2 ? p->shape[1] : p->shape[0];
        GgmlType ty = p->ndim == 2 ? type : GGML_F32;
        const int64_t piece = 1024;   // rows per progress update
        for (int64_t r = 0; r < rows; r += piece) {
            int64_t k = rows - r < piece ? rows - r : piece;
            if (gguf_write_rows(g, buf + (size_t)r * (size_t)cols, k) != 0) {
                int e = errno;
                gguf_free(g);
                die("export-gguf: writing %s: %s", out, strerror(e));
            }
            pr.done += (uint64_t)k * gguf_row_bytes(ty, cols);
            progress_draw(&pr, 0);
        }
    }
    if (gguf_finish(g) != 0) {
        int e = errno;
        gguf_free(g);
        die("export-gguf: finishing %s: %s", out, strerror(e));
    }
    pr.done = pr.total;
    progress_draw(&pr, 1);
    fprintf(stderr, "export-gguf: %s (shape from %s) -> %s: %s, %d tensors, %d tokens (%d real, %d padding rows), "
            "%zu merges, %.1f MB\n", s.path, s.config_from, out, type_name(type), t.n, v.rows, c->vocab_size,
            c->padded_vocab - c->vocab_size, v.n_merges, (double)pr.total / 1e6);
    gguf_free(g);
    free(buf);
    vocab_free(&v);
    free(tp);
    model_tensors_close(mt);
    param_table_free(&t);
}
