// hf.c: Hugging Face Olmo3 interchange and a CKPT's model file + shape (hf.h, docs/hf.md;
// which file a CKPT names is ckpt_source_resolve's, io/ckpt_dir.c); the
// commands export-hf and import-hf are src/cli/cmd_export_hf.c and cmd_import_hf.c.
//
//   olmo export-hf CKPT OUT/      config.json (model_type olmo3), model.safetensors (HF
//                                 names, the padded vocab rows kept),
//                                 tokenizer.json + tokenizer_config.json + generation_config.json
//   olmo import-hf HF_DIR OUT/    model.safetensors (OLMo layout: padded vocab rows read,
//                                 trimmed ones padded with zero rows) + recipe.yml with the dims
//
// Our tensor names already are the HF names (src/model/params.h), so the mapping is the
// identity; the only layout difference can be the vocab padding of embed_tokens and lm_head
// (exports keep it; trimmed HF checkpoints get zero rows on import).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "data/tokenizer.h"
#include "io/ckpt_dir.h"
#include "io/ckpt_verify.h"
#include "io/hf.h"
#include "io/params_io.h"
#include "io/safetensors.h"
#include "model/config_json.h"
#include "model/limits.h"
#include "recipe/recipe.h"
#include "util/common.h"

#define DOLMA2_VOCAB 100278
#define DOLMA2_EOS 100257
#define DOLMA2_PAD 100277

static int is_dir(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISDIR(st.st_mode); }
static int is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }

static void dir_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *s = strrchr(out, '/');
    if (!s) snprintf(out, n, ".");
    else if (s == out) out[1] = 0;
    else *s = 0;
}

static cJSON *parse_json_file(const char *path, char *err, size_t errlen) {
    size_t len;
    char *txt = read_file_all(path, &len);
    if (!txt) { snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno)); return NULL; }
    cJSON *o = cJSON_Parse(txt);
    free(txt);
    if (!o) snprintf(err, errlen, "%s: not valid JSON", path);
    else if (!cJSON_IsObject(o)) { snprintf(err, errlen, "%s: expected a JSON object", path); cJSON_Delete(o); o = NULL; }
    return o;
}

static void write_json(const char *path, cJSON *o) {
    char *txt = cJSON_Print(o);
    size_t n = strlen(txt);
    txt = xrealloc(txt, n + 2);
    txt[n] = '\n';
    txt[n + 1] = 0;
    if (write_file_atomic(path, txt, n + 1) != 0) die("cannot write %s: %s", path, strerror(errno));
    free(txt);
}

static void add_id_or_null(cJSON *o, const char *k, int id, int vocab) {
    if (id >= 0 && id < vocab) cJSON_AddNumberToObject(o, k, id);
    else cJSON_AddNullToObject(o, k);
}

// ---- HF rope_scaling <-> RopeScaling -------------------------------------------------------------
// transformers' "yarn" rope_scaling (_compute_yarn_parameters): factor, beta_fast (default
// 32), beta_slow (default 1), original_max_position_embeddings, attention_factor (default
// 0.1 ln(factor) + 1). Versions before the rope_parameters rework replace factor by
// max_position_embeddings / original_max_position_embeddings when the latter is given, so
// export writes max_position_embeddings = factor * original and import insists on it.
static void hf_rope_scaling_write(cJSON *o, const RopeScaling *rs) {
    if (rs->type != ROPE_SCALING_YARN) { cJSON_AddNullToObject(o, "rope_scaling"); return; }
    cJSON *y = cJSON_AddObjectToObject(o, "rope_scaling");
    cJSON_AddStringToObject(y, "rope_type", "yarn");
    cJSON_AddNumberToObject(y, "factor", rs->factor);
    cJSON_AddNumberToObject(y, "beta_fast", rs->beta_fast);
    cJSON_AddNumberToObject(y, "beta_slow", rs->beta_slow);
    cJSON_AddNumberToObject(y, "original_max_position_embeddings", rs->original_context);
    cJSON_AddNumberToObject(y, "attention_factor", rope_attention_factor(rs));
}

static int hf_rope_scaling_read(const cJSON *x, int max_pos, RopeScaling *rs, const char *path, char *err, size_t errlen) {
    memset(rs, 0, sizeof *rs);
    if (!x || cJSON_IsNull(x)) return 0;
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(x, "rope_type");
    if (!ty) ty = cJSON_GetObjectItemCaseSensitive(x, "type");   // the older spelling
    if (!cJSON_IsObject(x) || !cJSON_IsString(ty) || (strcmp(ty->valuestring, "yarn") && strcmp(ty->valuestring, "default"))) {
        snprintf(err, errlen, "%s: rope_scaling: only null, rope_type \"default\" or \"yarn\" are supported", path);
        return -1;
    }
    if (!strcmp(ty->valuestring, "default")) return 0;
    static const char *unsupported[] = {"mscale", "mscale_all_dim", "low_freq_factor", "high_freq_factor"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(x, unsupported[i])) {
            snprintf(err, errlen, "%s: rope_scaling.%s is not supported (OLMo 3's YaRN has none)", path, unsupported[i]);
            return -1;
        }
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(x, "truncate");
    if (tr && !cJSON_IsTrue(tr)) {
        snprintf(err, errlen, "%s: rope_scaling.truncate false is not supported (OLMo-core floors/ceils the ramp ends)", path);
        return -1;
    }
    const char *names[4] = {"factor", "beta_fast", "beta_slow", "original_max_position_embeddings"};
    double v[4] = {0, 32, 1, max_pos};   // HF's defaults
    for (int i = 0; i < 4; i++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(x, names[i]);
        if (!e || cJSON_IsNull(e)) {
            if (i == 0 || v[i] <= 0) {
                snprintf(err, errlen, "%s: rope_scaling (yarn) needs a number \"%s\"", path, names[i]);
                return -1;
            }
            continue;
        }
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0 && e->valuedouble <= 1e9) ||
            (i == 3 && e->valuedouble != (double)(int)e->valuedouble)) {
            snprintf(err, errlen, "%s: rope_scaling.%s must be a positive number%s", path, names[i], i == 3 ? " (an integer)" : "");
            return -1;
        }
        v[i] = e->valuedouble;
    }
    *rs = (RopeScaling){ROPE_SCALING_YARN, v[0], v[1], v[2], (int)v[3]};
    if (max_pos > 0 && fabs((double)max_pos - v[0] * v[3]) > 0.5) {
        snprintf(err, errlen, "%s: max_position_embeddings (%d) must equal rope_scaling.factor x original_max_position_embeddings "
                 "(%g x %d): transformers versions differ on which of the two they use", path, max_pos, v[0], (int)v[3]);
        return -1;
    }
    const cJSON *af = cJSON_GetObjectItemCaseSensitive(x, "attention_factor");
    if (af && !cJSON_IsNull(af) && !(cJSON_IsNumber(af) && fabs(af->valuedouble - rope_attention_factor(rs)) <= 1e-6 * rope_attention_factor(rs))) {
        snprintf(err, errlen, "%s: rope_scaling.attention_factor must be 0.1 ln(factor) + 1 = %.9g (YaRN's; no other is supported)",
                 path, rope_attention_factor(rs));
        return -1;
    }
    return 0;
}

// ---- HF config.json <-> ModelConfig ------------------------------------------------------------
// The writer (export-hf) and the reader (import-hf, CKPT resolution of an HF directory).
static void hf_config_write(const char *dir, const ModelConfig *c, int max_pos) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "architectures", cJSON_CreateStringArray((const char *[]){"Olmo3ForCausalLM"}, 1));
    cJSON_AddStringToObject(o, "model_type", "olmo3");
    // The embedding and LM head keep their padded rows (docs/hf.md): vocab_size counts them,
    // as AI2's OLMo 2 configs do (100352 for dolma2's 100278 tokens).
    cJSON_AddNumberToObject(o, "vocab_size", c->padded_vocab);
    cJSON_AddNumberToObject(o, "hidden_size", c->d_model);
    cJSON_AddNumberToObject(o, "intermediate_size", c->mlp_hidden);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "max_position_embeddings", max_pos);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    hf_rope_scaling_write(o, &c->rope_scaling);
    cJSON_AddNumberToObject(o, "rms_norm_eps", c->rms_eps);
    cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
    cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
    for (int i = 0; i < c->n_layers; i++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(model_layer_is_sliding(c, i) ? "sliding_attention" : "full_attention"));
    cJSON_AddBoolToObject(o, "tie_word_embeddings", 0);
    cJSON_AddBoolToObject(o, "attention_bias", 0);
    cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
    cJSON_AddNumberToObject(o, "initializer_range", 0.02);
    cJSON_AddBoolToObject(o, "use_cache", 1);
    // dolma2 ids; null when outside a (test-sized) vocab, where HF would reject them.
    add_id_or_null(o, "pad_token_id", DOLMA2_PAD, c->vocab_size);
    add_id_or_null(o, "eos_token_id", DOLMA2_EOS, c->vocab_size);
    cJSON_AddNullToObject(o, "bos_token_id");   // dolma2 has no BOS
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char p[4600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_json(p, o);
    cJSON_Delete(o);
}

// Highest token id + 1 of a tokenizer.json (model.vocab and added_tokens), 0 if unreadable.
static int hf_tokenizer_count(const char *path) {
    char err[512];
    cJSON *o = parse_json_file(path, err, sizeof err);
    if (!o) return 0;
    int n = 0;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model"), *e;
    const cJSON *v = m ? cJSON_GetObjectItemCaseSensitive(m, "vocab") : NULL;
    cJSON_ArrayForEach(e, v) if (cJSON_IsNumber(e) && e->valuedouble + 1 > n && e->valuedouble < 1 << 30) n = (int)e->valuedouble + 1;
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(o, "added_tokens");
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsNumber(id) && id->valuedouble + 1 > n && id->valuedouble < 1 << 30) n = (int)id->valuedouble + 1;
    }
    cJSON_Delete(o);
    return n;
}

// The real vocabulary of an HF directory whose config says vocab_size rows: a padded export
// (ours, AI2's OLMo 2) has more rows than tokens. First hit wins: the olmo_config metadata
// of its model.safetensors (our exports), the tokenizer.json's token count when vocab_size
// is that count rounded up to a multiple of 128 (AI2's), else vocab_size itself.
static int hf_real_vocab(const char *dir, int rows) {
    char p[4600], err[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    StFile f;
    int real = 0;
    if (is_file(p) && st_open(&f, p, err, sizeof err) == 0) {
        cJSON *m = f.metadata_json ? cJSON_Parse(f.metadata_json) : NULL;
        const cJSON *oc = m ? cJSON_GetObjectItemCaseSensitive(m, "olmo_config") : NULL;
        cJSON *c = cJSON_IsString(oc) ? cJSON_Parse(oc->valuestring) : NULL;
        const cJSON *v = c ? cJSON_GetObjectItemCaseSensitive(c, "vocab_size") : NULL;
        if (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= rows) real = (int)v->valuedouble;
        cJSON_Delete(c);
        cJSON_Delete(m);
        st_close(&f);
        if (real) return real;
    }
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    int n = is_file(p) ? hf_tokenizer_count(p) : 0;
    if (n > 0 && n < rows && (n + 127) / 128 * 128 == rows) return n;
    return rows;
}

static int hf_config_read(const char *dir, ModelSource *s, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *o = parse_json_file(path, err, errlen);
    if (!o) return -1;
    int rc = -1;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (!cJSON_IsString(mt)) { snprintf(err, errlen, "%s: no \"model_type\" (expected \"olmo3\")", path); goto out; }
    if (strcmp(mt->valuestring, "olmo3") != 0) {
        snprintf(err, errlen, "%s: model_type is \"%s\"; only \"olmo3\" (Olmo3ForCausalLM) is supported", path, mt->valuestring);
        goto out;
    }
    static const char *req[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                "num_attention_heads", "rope_theta", "rms_norm_eps"};
    double v[7];
    for (int i = 0; i < 7; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, req[i]);
        if (!cJSON_IsNumber(x)) { snprintf(err, errlen, "%s: missing number \"%s\"", path, req[i]); goto out; }
        v[i] = x->valuedouble;
    }
    // Counts must be positive integers that fit an int (before any cast).
    static const char *ints[] = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                 "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window",
                                 "max_position_embeddings"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, ints[i]);
        if (!x || cJSON_IsNull(x)) continue;
        if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble > (1 << 30) || x->valuedouble != (double)(long)x->valuedouble) {
            snprintf(err, errlen, "%s: \"%s\" must be a positive integer", path, ints[i]);
            goto out;
        }
    }
    if (!(v[5] > 0) || !(v[6] > 0)) { snprintf(err, errlen, "%s: rope_theta and rms_norm_eps must be > 0", path); goto out; }
    ModelConfig *c = &s->cfg;
    memset(c, 0, sizeof *c);
    c->vocab_size = hf_real_vocab(dir, (int)v[0]); c->d_model = (int)v[1]; c->mlp_hidden = (int)v[2]; c->n_layers = (int)v[3];
    c->n_heads = (int)v[4]; c->rope_theta = v[5]; c->rms_eps = v[6];
    const cJSON *x;
    c->n_kv_heads = cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(o, "num_key_value_heads")) ? (int)x->valuedouble : c->n_heads;
    c->head_dim = cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(o, "head_dim")) ? (int)x->valuedouble : 0;
    s->seq_len = cJSON_IsNumber(x = cJSON_GetObjectItemCaseSensitive(o, "max_position_embeddings")) ? (int)x->valuedouble : 0;
    x = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
    s->hf_tied = cJSON_IsTrue(x);
    x = cJSON_GetObjectItemCaseSensitive(o, "attention_bias");
    if (cJSON_IsTrue(x)) { snprintf(err, errlen, "%s: attention_bias true is not supported (OLMo 3 has no biases)", path); goto out; }
    // YaRN applies to the full-attention layers only, as in OLMo-core's OLMo 3 (some
    // transformers versions apply it to every layer: docs/long-context.md).
    if (hf_rope_scaling_read(cJSON_GetObjectItemCaseSensitive(o, "rope_scaling"), s->seq_len, &c->rope_scaling, path, err,
                             errlen) != 0)
        goto out;
    // layer_types -> full_attn_every: layer i is full iff i % every == every - 1.
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(o, "sliding_window");
    int L = c->n_layers, first_full = -1, any_sliding = 0;
    if (L <= 0 || L > MAX_LAYERS) { snprintf(err, errlen, "%s: num_hidden_layers %d out of range 1..%d", path, L, MAX_LAYERS); goto out; }
    int full[MAX_LAYERS];
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != L) {
            snprintf(err, errlen, "%s: layer_types must be a list of num_hidden_layers (%d) strings", path, L);
            goto out;
        }
        for (int i = 0; i < L; i++) {
            const cJSON *e = cJSON_GetArrayItem(lt, i);
            if (cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")) full[i] = 1;
            else if (cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention")) full[i] = 0;
            else { snprintf(err, errlen, "%s: layer_types[%d] must be \"full_attention\" or \"sliding_attention\"", path, i); goto out; }
        }
    } else {
        for (int i = 0; i < L; i++) full[i] = i % 4 == 3;   // HF Olmo3Config's default pattern
    }
    for (int i = 0; i < L; i++) {
        if (full[i] && first_full < 0) first_full = i;
        if (!full[i]) any_sliding = 1;
    }
    c->full_attn_every = first_full < 0 ? L + 1 : first_full + 1;   // L+1: no layer is full
    for (int i = 0; i < L; i++)
        if (full[i] != (i % c->full_attn_every == c->full_attn_every - 1)) {
            snprintf(err, errlen, "%s: layer_types is not a periodic pattern (full attention exactly at layers i %% N == N-1); "
                     "not supported", path);
            goto out;
        }
    if (any_sliding) {
        if (!cJSON_IsNumber(sw) || sw->valuedouble < 1) {
            snprintf(err, errlen, "%s: sliding layers need a positive number \"sliding_window\"", path);
            goto out;
        }
        c->sliding_window = (int)sw->valuedouble;
    } else {
        c->sliding_window = cJSON_IsNumber(sw) && sw->valuedouble >= 1 ? (int)sw->valuedouble : 4096;
    }
    model_config_derive(c);
    const char *bad = model_config_check(c);
    if (bad) { snprintf(err, errlen, "%s: %s", path, bad); goto out; }
    snprintf(s->config_from, sizeof s->config_from, "%s", path);
    rc = 0;
out:
    cJSON_Delete(o);
    return rc;
}

#define MAX_SHARDS 256   // shard files of one HF directory

// ---- CKPT resolution --------------------------------------------------------------------------
int model_file_check(const char *path, char *err, size_t errlen) {
    struct stat st;
    unsigned char b[9] = {0};
    FILE *f = fopen(path, "rb");
    if (!f || stat(path, &st) != 0) { if (f) fclose(f); return 0; }   // the reader names the error
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
    const uint64_t size = (uint64_t)st.st_size;
    if (got == sizeof b && n >= 2 && n <= size - 8 && b[8] == '{') return 0;
    if (got >= 8 && !memcmp(b, "GGUF", 4)) {   // llama.cpp's format: magic, then a uint32 version
        snprintf(err, errlen, "%s is a GGUF file (llama.cpp's format, version %u), not a checkpoint olmo.c reads: run it "
                 "with llama.cpp (llama-cli -m %s), or give olmo.c the HF directory or checkpoint it was exported "
                 "from (olmo export-gguf writes GGUF; nothing reads it back)", path,
                 (unsigned)(b[4] | b[5] << 8 | b[6] << 16 | (unsigned)b[7] << 24), path);
        return -1;
    }
    if (got >= 6 && !memcmp(b, "\x93NUMPY", 6)) {
        snprintf(err, errlen, "%s is a NumPy .npy array, not a checkpoint: olmo.c's token files are raw uint32 "
                 "(OLMo-core's memmaps, no .npy header); give a run directory, a checkpoint directory, a "
                 "model.safetensors or an HF directory", path);
        return -1;
    }
    if (size % 4 == 0 && size > 0)
        snprintf(err, errlen, "%s is not a checkpoint: it has no safetensors header (its first 8 bytes give %llu, the "
                 "file has %llu bytes); it looks like a token file (raw uint32, %llu tokens, as `olmo prepare` writes). "
                 "A checkpoint is a run directory, a checkpoint directory, a model.safetensors or an HF directory; "
                 "a token file is a held-out set: olmo eval CKPT --set NAME=%s", path, (unsigned long long)n,
                 (unsigned long long)size, (unsigned long long)(size / 4), path);
    else
        snprintf(err, errlen, "%s is not a checkpoint: it has no safetensors header (its first 8 bytes give %llu, the "
                 "file has %llu bytes); give a run directory, a checkpoint directory, a model.safetensors or an HF "
                 "directory", path, (unsigned long long)n, (unsigned long long)size);
    return -1;
}

static int config_from_metadata(const char *st_path, ModelSource *s, char *err, size_t errlen) {
    // A checkpoint's header is checked before it is parsed (all of it: at load).
    if (ckpt_verify_path(st_path, 1, err, errlen) < 0) return -1;
    StFile f;
    if (st_open(&f, st_path, err, errlen) != 0) return -1;
    int rc = 1;   // 1: no olmo_config there
    if (f.metadata_json) {
        cJSON *m = cJSON_Parse(f.metadata_json);
        const cJSON *oc = m ? cJSON_GetObjectItemCaseSensitive(m, "olmo_config") : NULL;
        if (cJSON_IsString(oc)) {
            cJSON *c = cJSON_Parse(oc->valuestring);
            char where[4200];
            snprintf(where, sizeof where, "%s (__metadata__ olmo_config)", st_path);
            rc = c ? model_config_from_json(c, &s->cfg, &s->seq_len, where, err, errlen) : -1;
            if (!c) snprintf(err, errlen, "%s: olmo_config is not valid JSON", where);
            if (rc == 0) snprintf(s->config_from, sizeof s->config_from, "%s", where);
            cJSON_Delete(c);
        }
        cJSON_Delete(m);
    }
    st_close(&f);
    return rc;
}

static int config_from_recipe(const char *recipe, ModelSource *s) {
    // Only the model shape and train.seq_len are read: fill the training-only keys a
    // recipe must have so that any recipe validates (as `olmo eval` does).
    static char *fixed[] = {"data.paths=unused-by-olmo", "train.max_steps=1", "schedule.name=constant"};
    Recipe *r = xcalloc(1, sizeof *r);
    recipe_load(r, recipe, 3, fixed);   // bad recipe: message + exit 2
    s->cfg = recipe_model_config(r);
    s->seq_len = r->seq_len;
    snprintf(s->config_from, sizeof s->config_from, "%s", recipe);
    free(r);
    return 0;
}

// A safetensors file whose shape nothing next to it gives: when config.json or
// model.safetensors.index.json is beside it, it is (one shard of) an HF directory, which is
// what to pass; else the shape is unknown. Always -1 with the message.
static int shard_of_hf_dir(const char *p, const char *d, char *err, size_t errlen) {
    char cj[4700], ix[4700], listed[64] = "";
    snprintf(cj, sizeof cj, "%s/config.json", d);
    snprintf(ix, sizeof ix, "%s/model.safetensors.index.json", d);
    cJSON *o = is_file(ix) ? parse_json_file(ix, err, errlen) : NULL;
    const cJSON *wm = o ? cJSON_GetObjectItemCaseSensitive(o, "weight_map") : NULL, *e;
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    int in_index = 0, nfiles = 0;
    char seen[MAX_SHARDS][256];
    cJSON_ArrayForEach(e, wm) {
        if (!cJSON_IsString(e)) continue;
        if (!strcmp(e->valuestring, base)) in_index = 1;
        int k = 0;
        while (k < nfiles && strcmp(seen[k], e->valuestring)) k++;
        if (k == nfiles && nfiles < MAX_SHARDS) snprintf(seen[nfiles++], sizeof seen[0], "%s", e->valuestring);
    }
    cJSON_Delete(o);
    if (in_index) snprintf(listed, sizeof listed, ", one of the %d shard%s its index lists", nfiles, nfiles > 1 ? "s" : "");
    if (is_file(cj) || is_file(ix))
        snprintf(err, errlen, "%s is a safetensors file of the Hugging Face directory %s (%s beside it%s): a shard holds "
                 "part of the weights and not the shape; pass the directory: %s", p, d,
                 is_file(cj) && is_file(ix) ? "config.json and model.safetensors.index.json" : is_file(cj) ? "config.json"
                 : "model.safetensors.index.json", listed, d);
    else
        snprintf(err, errlen, "%s: cannot tell the model shape: no olmo_config in its __metadata__, and no "
                 "train_state.json, recipe.yml, ../../recipe.yml, config.json or model.safetensors.index.json next to it", p);
    return -1;
}

int model_source_resolve(const char *ckpt, ModelSource *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    char p[4700], d[4600];
    CkptSource src;
    int rc = ckpt_source_resolve(ckpt, CKPT_FOR_WEIGHTS, &src, err, errlen);
    if (rc == CKPT_SRC_MISSING) snprintf(err, errlen, "%s: no such file or directory", ckpt);
    if (rc == CKPT_SRC_EMPTY) snprintf(err, errlen, "%s: no model.safetensors, no HF config.json and no checkpoints/step-* in it", ckpt);
    if (rc != 0) return -1;
    if (src.kind == CKPT_SRC_HF) {
        if (strlen(src.path) >= sizeof s->path) { snprintf(err, errlen, "%s: path too long", src.path); return -1; }
        snprintf(s->path, sizeof s->path, "%s", src.path);
        s->is_hf = 1;
        return hf_config_read(src.path, s, err, errlen);
    }
    if (src.kind == CKPT_SRC_CHECKPOINT) {
        snprintf(p, sizeof p, "%s/model.safetensors", src.path);
        if (!is_file(p)) { snprintf(err, errlen, "%s: checkpoint has no model.safetensors", src.path); return -1; }
    } else {
        if (is_file(ckpt) && model_file_check(ckpt, err, errlen)) return -1;   // a file given as CKPT
        snprintf(p, sizeof p, "%s", src.path);
    }
    if (strlen(p) >= sizeof s->path) { snprintf(err, errlen, "%s: path too long", p); return -1; }
    snprintf(s->path, sizeof s->path, "%s", p);
    dir_of(p, d, sizeof d);

    int r = config_from_metadata(p, s, err, errlen);
    if (r <= 0) return r;
    char q[4700];
    snprintf(q, sizeof q, "%s/train_state.json", d);
    if (is_file(q)) {
        cJSON *o = parse_json_file(q, err, errlen);
        if (!o) return -1;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
        int rc = m ? model_config_from_json(m, &s->cfg, NULL, q, err, errlen) : -1;
        if (!m) snprintf(err, errlen, "%s: no \"model\" object", q);
        const cJSON *sl = cJSON_GetObjectItemCaseSensitive(o, "seq_len");
        if (cJSON_IsNumber(sl)) s->seq_len = (int)sl->valuedouble;
        cJSON_Delete(o);
        if (rc == 0) snprintf(s->config_from, sizeof s->config_from, "%s", q);
        return rc;
    }
    snprintf(q, sizeof q, "%s/recipe.yml", d);
    if (is_file(q)) return config_from_recipe(q, s);
    snprintf(q, sizeof q, "%s/../../recipe.yml", d);
    if (is_file(q)) return config_from_recipe(q, s);
    return shard_of_hf_dir(p, d, err, errlen);
}

int model_source_recipe(const char *ckpt, const ModelSource *s, char *out, size_t n) {
    char d[4600], q[3][4700];
    snprintf(q[0], sizeof q[0], "%s/recipe.yml", ckpt);
    if (s->is_hf) snprintf(d, sizeof d, "%s", s->path);
    else dir_of(s->path, d, sizeof d);
    snprintf(q[1], sizeof q[1], "%s/recipe.yml", d);
    snprintf(q[2], sizeof q[2], "%s/../../recipe.yml", d);
    for (int i = is_dir(ckpt) ? 0 : 1; i < 3; i++)
        if (is_file(q[i]) && strlen(q[i]) < n) {
            snprintf(out, n, "%s", q[i]);
            return 0;
        }
    return -1;
}

// ---- HF weights (single file or shards) --------------------------------------------------------

typedef struct {
    int n;
    StFile f[MAX_SHARDS];
    char *names[MAX_SHARDS];
    cJSON *weight_map;   // name -> shard file name, NULL for a single file
    cJSON *index;
} HfFiles;

static void hf_close(HfFiles *h) {
    for (int i = 0; i < h->n; i++) { st_close(&h->f[i]); free(h->names[i]); }
    cJSON_Delete(h->index);
    memset(h, 0, sizeof *h);
}

static int hf_open(const char *dir, HfFiles *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    char p[4600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (is_file(p)) {
        h->names[0] = xstrdup("model.safetensors");
        if (st_open(&h->f[0], p, err, errlen) != 0) { free(h->names[0]); h->names[0] = NULL; return -1; }
        h->n = 1;
        return 0;
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (!is_file(p)) {
        snprintf(err, errlen, "%s: neither model.safetensors nor model.safetensors.index.json (shards)", dir);
        return -1;
    }
    h->index = parse_json_file(p, err, errlen);
    if (!h->index) return -1;
    h->weight_map = cJSON_GetObjectItemCaseSensitive(h->index, "weight_map");
    if (!cJSON_IsObject(h->weight_map)) { snprintf(err, errlen, "%s: no \"weight_map\" object", p); hf_close(h); return -1; }
    const cJSON *e;
    cJSON_ArrayForEach(e, h->weight_map) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
            snprintf(err, errlen, "%s: weight_map[\"%s\"] must be a file name in the directory", p, e->string);
            hf_close(h);
            return -1;
        }
        int k = 0;
        while (k < h->n && strcmp(h->names[k], e->valuestring)) k++;
        if (k < h->n) continue;
        if (h->n == MAX_SHARDS) { snprintf(err, errlen, "%s: more than %d shards", p, MAX_SHARDS); hf_close(h); return -1; }
        char sp[4700];
        snprintf(sp, sizeof sp, "%s/%s", dir, e->valuestring);
        if (st_open(&h->f[h->n], sp, err, errlen) != 0) { hf_close(h); return -1; }
        h->names[h->n++] = xstrdup(e->valuestring);
    }
    return 0;
}

// The tensor `name` and the file holding it, or NULL.
static const StTensor *hf_find(const HfFiles *h, const char *name, const StFile **file) {
    if (h->weight_map) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(h->weight_map, name);
        if (!cJSON_IsString(e)) return NULL;
        for (int k = 0; k < h->n; k++)
            if (!strcmp(h->names[k], e->valuestring)) { *file = &h->f[k]; return st_find(&h->f[k], name); }
        return NULL;
    }
    *file = &h->f[0];
    return st_find(&h->f[0], name);
}

static int is_vocab_tensor(const ParamInfo *p) { return p->kind == PARAM_EMBEDDING || p->kind == PARAM_LM_HEAD; }

// The weights of a ModelSource opened and checked, read tensor by tensor (model_tensors_*).
struct ModelTensors {
    const ModelSource *s;
    const ParamTable *t;
    int is_hf;
    StFile f;                  // an OLMo-layout file
    HfFiles h;                 // an HF directory
    const StTensor **src;      // HF: tensor of parameter i (NULL: a tied lm_head)
    const StFile **srcf;       // HF: the file holding it
    int emb;                   // HF: index of the embedding (a tied lm_head's source)
};

// Every Olmo3 tensor present with its shape (vocab tensors with the real vocab's rows or
// the padded rows: trimmed and padded exports both read) and a float dtype.
static int hf_check(ModelTensors *m, char *err, size_t errlen) {
    const ModelSource *s = m->s;
    const ParamTable *t = m->t;
    const ModelConfig *c = &s->cfg;
    char msg[3000] = "";
    size_t used = 0;
    int bad = 0;
#define ADD(...) do { if (used < sizeof msg) used += (size_t)snprintf(msg + used, sizeof msg - used, __VA_ARGS__); bad++; } while (0)
    m->src = xcalloc((size_t)t->n, sizeof *m->src);
    m->srcf = xcalloc((size_t)t->n, sizeof *m->srcf);
    m->emb = -1;
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *p = &t->p[i];
        if (p->kind == PARAM_EMBEDDING) m->emb = i;
        m->src[i] = hf_find(&m->h, p->name, &m->srcf[i]);
        if (!m->src[i] && p->kind == PARAM_LM_HEAD && s->hf_tied) continue;   // copied from the embedding
        if (!m->src[i]) { ADD("%s missing tensor %s", bad ? ";" : "", p->name); continue; }
        const StTensor *x = m->src[i];
        int vocab = is_vocab_tensor(p), rows = p->shape[0];
        int rows_ok = x->shape[0] == rows || (vocab && x->shape[0] == c->vocab_size);
        int ok = x->ndim == p->ndim && rows_ok && (p->ndim == 1 || x->shape[1] == p->shape[1]);
        if (!ok) {
            char got[128] = "";
            for (int d = 0, o = 0; d < x->ndim && o < 100; d++) o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)x->shape[d]);
            if (vocab && rows != c->vocab_size)
                ADD("%s %s: expected shape (%d, %d) or (%d, %d) (padded or real vocab), got (%s)", bad ? ";" : "", p->name, rows,
                    p->shape[1], c->vocab_size, p->shape[1], got);
            else if (p->ndim == 2) ADD("%s %s: expected shape (%d, %d), got (%s)", bad ? ";" : "", p->name, rows, p->shape[1], got);
            else ADD("%s %s: expected shape (%d), got (%s)", bad ? ";" : "", p->name, rows, got);
        } else if (strcmp(x->dtype, "F32") && strcmp(x->dtype, "BF16") && strcmp(x->dtype, "F16") && strcmp(x->dtype, "F64")) {
            ADD("%s %s: dtype %s cannot convert to float", bad ? ";" : "", p->name, x->dtype);
        }
    }
    if (bad) {
        snprintf(err, errlen, "%s does not match its config.json (%d problem%s):%s", s->path, bad, bad > 1 ? "s" : "", msg);
        return -1;
    }
#undef ADD
    // Extra tensors (e.g. rotary inv_freq buffers of old exports) are not model weights.
    for (int k = 0; k < m->h.n; k++)
        for (int j = 0; j < m->h.f[k].n; j++)
            if (!param_table_find(t, m->h.f[k].t[j].name)) warnf("import-hf: ignoring tensor %s (not an Olmo3 weight)", m->h.f[k].t[j].name);
    return 0;
}

void model_tensors_close(ModelTensors *m) {
    if (!m) return;
    if (m->is_hf) hf_close(&m->h);
    else if (m->f.path) st_close(&m->f);
    free(m->src);
    free(m->srcf);
    free(m);
}

ModelTensors *model_tensors_open(const ModelSource *s, const ParamTable *t, char *err, size_t errlen) {
    ModelTensors *m = xcalloc(1, sizeof *m);
    m->s = s;
    m->t = t;
    m->is_hf = s->is_hf;
    int rc;
    if (s->is_hf) {
        rc = hf_open(s->path, &m->h, err, errlen);
        if (rc == 0) rc = hf_check(m, err, errlen);
    } else {
        // A checkpoint's weights are checked against the checksums.txt next to them first.
        rc = ckpt_verify_path(s->path, 0, err, errlen) < 0 ? -1 : st_open(&m->f, s->path, err, errlen);
        if (rc == 0) rc = params_check_file(t, &m->f, err, errlen);
    }
    if (rc != 0) { model_tensors_close(m); return NULL; }
    return m;
}

void model_tensors_read(const ModelTensors *m, int i, float *dst) {
    const ParamInfo *p = &m->t->p[i];
    // Each tensor's mapped pages are dropped once read: resident memory stays about one tensor.
    if (!m->is_hf) {
        const StTensor *x = st_find(&m->f, p->name);
        st_read_f32(&m->f, x, dst);
        st_release(&m->f, x);
        return;
    }
    int j = m->src[i] ? i : m->emb;   // a tied lm_head is the embedding
    const StTensor *x = m->src[j];
    st_read_f32(m->srcf[j], x, dst);
    st_release(m->srcf[j], x);
    // A trimmed vocab tensor's padding rows are zero: see docs/hf.md.
    size_t got = st_numel(x);
    if (got < p->numel) memset(dst + got, 0, sizeof(float) * (p->numel - got));
}

// The stored tensor of parameter i and the file holding it (a tied lm_head: the embedding's).
static const StTensor *stored_of(const ModelTensors *m, int i, const StFile **f) {
    if (!m->is_hf) {
        *f = &m->f;
        return st_find(&m->f, m->t->p[i].name);
    }
    const int j = m->src[i] ? i : m->emb;
    *f = m->srcf[j];
    return m->src[j];
}

int model_tensors_stored(const ModelTensors *m, StoredTensor *ten, double *bytes) {
    int nbf16 = 0;
    *bytes = 0;
    for (int i = 0; i < m->t->n; i++) {
        const StFile *f;
        const StTensor *x = stored_of(m, i, &f);
        const int bf = !strcmp(x->dtype, "BF16");
        if (!bf && strcmp(x->dtype, "F32")) return 0;   // F16, F64: converted to fp32 on load
        nbf16 += bf;
        ten[i] = (StoredTensor){f->data + x->begin, bf ? STORED_BF16 : STORED_F32, st_numel(x)};
        if (!m->is_hf || m->src[i]) *bytes += (double)(x->end - x->begin);   // a tied head shares the bytes
    }
    return nbf16;
}

int model_weights_open(const ModelSource *s, int fp32, ModelWeights *w, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    param_table_build(&w->t, &s->cfg);
    w->mt = model_tensors_open(s, &w->t, err, errlen);   // every tensor checked, before anything is allocated
    if (!w->mt) {
        param_table_free(&w->t);
        return -1;
    }
    char a[32], b[32];
    if (!fp32) {
        w->ten = xmalloc(sizeof *w->ten * (size_t)w->t.n);
        double stored;
        const int nbf = model_tensors_stored(w->mt, w->ten, &stored);
        if (nbf > 0) {
            w->bytes = model_stored_weights_bytes(&s->cfg, stored);
            snprintf(w->what, sizeof w->what, "kept as stored (%d of %d tensors bf16): %s mapped from the file + %s fp32 "
                     "scratch of one part, upcast a part at a time (--weights fp32: all in fp32)", nbf, w->t.n,
                     model_fmt_bytes(stored, a, sizeof a), model_fmt_bytes(w->bytes - stored, b, sizeof b));
            return 0;
        }
        free(w->ten);
        w->ten = NULL;
    }
    w->bytes = model_weights_bytes(&s->cfg);
    snprintf(w->what, sizeof w->what, "fp32, %s (%s)", model_fmt_bytes(w->bytes, a, sizeof a),
             fp32 ? "--weights fp32" : "as stored: no bf16 tensor to keep");
    return 0;
}

void model_weights_load(const ModelWeights *w, float *params) {
    for (int i = 0; i < w->t.n; i++) model_tensors_read(w->mt, i, params + w->t.p[i].offset);
}

void model_weights_close(ModelWeights *w) {
    model_tensors_close(w->mt);
    free(w->ten);
    param_table_free(&w->t);
    memset(w, 0, sizeof *w);
}

static int hf_load(const ModelSource *s, const ParamTable *t, float *params, char *err, size_t errlen) {
    ModelTensors *m = model_tensors_open(s, t, err, errlen);
    if (!m) return -1;
    for (int i = 0; i < t->n; i++) model_tensors_read(m, i, params + t->p[i].offset);
    model_tensors_close(m);
    return 0;
}

int model_source_load(const ModelSource *s, const ParamTable *t, float *params, char *err, size_t errlen) {
    if (s->is_hf) return hf_load(s, t, params, err, errlen);
    return params_load_safetensors(t, params, s->path, err, errlen);
}

// import-hf and export-hf stream tensor by tensor (write_streamed): one fp32 buffer of the
// largest tensor. Refused before allocating (or writing) when this machine cannot hold it.
static void check_convert_memory(const char *cmd, const ModelConfig *c) {
    char what[200], err[1200];
    const double need = model_largest_tensor_bytes(c);
    snprintf(what, sizeof what, "one fp32 buffer of the largest tensor, %.4g parameters x 4 bytes: the model is "
             "streamed tensor by tensor", need / 4);
    if (model_check_need(cmd, need, what, "Free memory, or give the process more (a cgroup limit).", err, sizeof err))
        die_input("%s", err);
}

// ---- export-hf ----------------------------------------------------------------------------------
// generation_config.json
static void export_generation_config(const char *out, const ModelConfig *c) {
    char p[4600];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "_from_model_config", 1);
    add_id_or_null(o, "eos_token_id", DOLMA2_EOS, c->vocab_size);
    add_id_or_null(o, "pad_token_id", DOLMA2_PAD, c->vocab_size);
    cJSON_AddNullToObject(o, "bos_token_id");
    snprintf(p, sizeof p, "%s/generation_config.json", out);
    write_json(p, o);
    cJSON_Delete(o);
}

// The opened source's tensors written to path tensor by tensor (F32, the table's names and
// order): st_write_fill's one buffer of the largest tensor is filled by model_tensors_read
// as its turn comes, so no copy of the model is ever in memory (the source is mmap'd).
static void fill_tensor(void *ctx, int i, void *buf) { model_tensors_read(ctx, i, buf); }

static void write_streamed(const char *path, const ParamTable *t, ModelTensors *m, const char *meta) {
    StWrite *w = xcalloc((size_t)t->n, sizeof(StWrite));
    for (int i = 0; i < t->n; i++) {
        const ParamInfo *q = &t->p[i];
        w[i] = (StWrite){q->name, "F32", q->ndim, {q->shape[0], q->shape[1]}, NULL, q->numel * sizeof(float)};
    }
    if (st_write_fill(path, w, t->n, meta, fill_tensor, m) != 0) die("cannot write %s: %s", path, strerror(errno));
    free(w);
}

// model.safetensors: every tensor as trained, the embedding and LM head with their padded
// rows (the trained softmax covers them: docs/hf.md).
static void export_weights(const char *out, const ModelConfig *c, const ParamTable *t, ModelTensors *m, int max_pos) {
    char p[4600];
    char *oc = olmo_config_json(c, max_pos);
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "olmo_config", oc);
    char *meta_txt = cJSON_PrintUnformatted(meta);
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    write_streamed(p, t, m, meta_txt);
    free(meta_txt);
    cJSON_Delete(meta);
    free(oc);
}

// tokenizer.json (copied byte for byte) + tokenizer_config.json; no tokenizer found at the
// default path is a warning, a given --tokenizer that cannot be read is bad input.
static void export_tokenizer(const char *out, const char *tok_path, int max_pos) {
    char p[4600];
    char *tp = tokenizer_resolve_path(tok_path);
    size_t len;
    char *tj = read_file_all(tp, &len);
    if (!tj) {
        if (tok_path) die_input("export-hf: cannot read --tokenizer %s: %s", tp, strerror(errno));
        warnf("export-hf: tokenizer %s not found: no tokenizer.json written (give --tokenizer FILE)", tp);
    } else {
        snprintf(p, sizeof p, "%s/tokenizer.json", out);
        if (write_file_atomic(p, tj, len) != 0) die("cannot write %s: %s", p, strerror(errno));
        free(tj);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "tokenizer_class", "PreTrainedTokenizerFast");
        cJSON_AddStringToObject(o, "eos_token", "<|endoftext|>");
        cJSON_AddStringToObject(o, "pad_token", "<|pad|>");
        cJSON_AddNullToObject(o, "bos_token");
        cJSON_AddNullToObject(o, "unk_token");
        cJSON_AddBoolToObject(o, "add_bos_token", 0);
        cJSON_AddBoolToObject(o, "add_eos_token", 0);
        cJSON_AddBoolToObject(o, "clean_up_tokenization_spaces", 0);
        cJSON_AddNumberToObject(o, "model_max_length", max_pos);
        snprintf(p, sizeof p, "%s/tokenizer_config.json", out);
        write_json(p, o);
        cJSON_Delete(o);
    }
    free(tp);
}

void hf_export(const char *ckpt, const char *out, int max_pos, const char *tok_path) {
    char err[4096];
    ModelSource s;
    if (model_source_resolve(ckpt, &s, err, sizeof err) != 0) die_input("export-hf: %s", err);
    const ModelConfig *c = &s.cfg;
    check_convert_memory("export-hf", c);
    ParamTable t;
    param_table_build(&t, c);
    ModelTensors *m = model_tensors_open(&s, &t, err, sizeof err);   // every tensor checked before OUT is made
    if (!m) die_input("export-hf: %s", err);
    if (c->rope_scaling.type == ROPE_SCALING_YARN) {   // HF reads the factor from this ratio (hf_rope_scaling_write)
        int want = (int)lround(c->rope_scaling.factor * c->rope_scaling.original_context);
        if (max_pos && max_pos != want)
            die_input("export-hf: --max-pos %d: with YaRN max_position_embeddings must be factor x original context = %d", max_pos, want);
        max_pos = want;
    }
    if (!max_pos) max_pos = s.seq_len > 0 ? s.seq_len : HF_DEFAULT_MAX_POS;
    if (mkdir_p(out) != 0) die_input("export-hf: cannot create %s: %s", out, strerror(errno));

    hf_config_write(out, c, max_pos);
    export_generation_config(out, c);
    export_weights(out, c, &t, m, max_pos);
    export_tokenizer(out, tok_path, max_pos);
    fprintf(stderr, "export-hf: %s (shape from %s) -> %s: %d tensors, vocab %d (rows padded to %d, kept)\n", s.path,
            s.config_from, out, t.n, c->vocab_size, c->padded_vocab);
    model_tensors_close(m);
    param_table_free(&t);
}

// ---- import-hf ----------------------------------------------------------------------------------
// recipe.yml: defaults + the model dims; data.paths / train.run_dir are placeholders to
// replace before training from it.
static void import_recipe(const char *in, const char *out, const ModelConfig *cfg, int seq_len) {
    char p[4600];
    Recipe *r = xcalloc(1, sizeof *r);
    recipe_defaults(r);
    recipe_set_model(r, cfg);
    r->seq_len = seq_len;
    if (r->global_batch % r->micro_batch) r->micro_batch = 1;
    if (r->max_steps <= 0 && r->max_tokens <= 0) r->max_steps = 1;
    r->n_paths = 1;
    snprintf(r->paths[0], RECIPE_MAX_STR, "REPLACE_WITH_TOKEN_FILES");
    snprintf(r->run_dir, RECIPE_MAX_STR, "%s", out);
    char *yaml = recipe_to_yaml(r);
    size_t hl = strlen(in) + 200;
    char *txt = xmalloc(hl + strlen(yaml));
    int n = snprintf(txt, hl, "# written by `olmo import-hf %s`: model.* are the imported dims; data.paths and\n"
                     "# train.* are placeholders to set before training from this recipe.\n", in);
    strcpy(txt + n, yaml);
    snprintf(p, sizeof p, "%s/recipe.yml", out);
    if (write_file_atomic(p, txt, strlen(txt)) != 0) die("cannot write %s: %s", p, strerror(errno));
    free(txt);
    free(yaml);
    free(r);
}

void hf_import(const char *in, const char *out) {
    char err[4096], p[4600];
    snprintf(p, sizeof p, "%s/config.json", in);
    if (is_file(in) && model_file_check(in, err, sizeof err)) die_input("import-hf: %s", err);   // GGUF, tokens
    if (is_file(in)) {
        dir_of(in, p, sizeof p);
        die_input("import-hf: %s is a file; import-hf takes a Hugging Face directory (config.json + model.safetensors "
                  "or its shards and index): pass the directory holding it (%s) if it is one", in, p);
    }
    if (!is_dir(in)) die_input("import-hf: %s is not a directory", in);
    if (!is_file(p)) die_input("import-hf: %s has no config.json", in);
    ModelSource s;
    memset(&s, 0, sizeof s);
    snprintf(s.path, sizeof s.path, "%s", in);
    s.is_hf = 1;
    if (hf_config_read(in, &s, err, sizeof err) != 0) die_input("import-hf: %s", err);
    check_convert_memory("import-hf", &s.cfg);
    ParamTable t;
    param_table_build(&t, &s.cfg);
    ModelTensors *m = model_tensors_open(&s, &t, err, sizeof err);   // every tensor checked before OUT is made
    if (!m) die_input("import-hf: %s", err);
    if (mkdir_p(out) != 0) die_input("import-hf: cannot create %s: %s", out, strerror(errno));

    int seq_len = s.seq_len > 0 ? s.seq_len : HF_DEFAULT_MAX_POS;
    char *oc = olmo_config_json(&s.cfg, seq_len);
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "olmo_config", oc);
    cJSON_AddStringToObject(meta, "imported_from", in);
    char *meta_txt = cJSON_PrintUnformatted(meta);
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    write_streamed(p, &t, m, meta_txt);
    free(meta_txt);
    cJSON_Delete(meta);
    free(oc);

    import_recipe(in, out, &s.cfg, seq_len);
    fprintf(stderr, "import-hf: %s -> %s/model.safetensors + recipe.yml: %d layers, d_model %d, vocab %d padded to %d\n",
            in, out, s.cfg.n_layers, s.cfg.d_model, s.cfg.vocab_size, s.cfg.padded_vocab);
    model_tensors_close(m);
    param_table_free(&t);
}
