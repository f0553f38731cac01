// cmd_generate.c: `olmo generate CKPT --prompt TEXT`: continue a prompt with the KV-cache
// forward (model/kv.h) and a sampler (model/generate.h).
//
// The prompt is run through the model in chunks (prefill), then one token per step. Every
// layer keeps K (after k-norm and RoPE at the absolute position) and V of all positions;
// a query at position p on a sliding layer attends keys max(0, p-window+1)..p, on a full
// layer 0..p, exactly the training mask (the same block_forward), so the cached logits
// equal a full forward over the same tokens (checked by --check-kv and
// tests/test_generate.sh).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "data/tokenizer.h"
#include "io/hf.h"
#include "io/safetensors.h"
#include "model/generate.h"
#include "model/kv.h"
#include "model/limits.h"
#include "model/model.h"
#include "util/common.h"

#define DOLMA2_EOS 100257
#define PREFILL_CHUNK 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo generate CKPT (--prompt TEXT | --tokens ID,ID,...) [--max-new N] [--greedy]\n"
            "                     [--temperature T] [--top-p P] [--seed S] [--eos ID] [--tokenizer FILE]\n"
            "                     [--check-kv] [--dump-logits FILE] [--weights auto|stored|fp32]\n"
            "\n"
            "Continue a prompt with a KV-cache forward (docs/hf.md). CKPT: a run directory, a\n"
            "checkpoint directory, a model.safetensors file (shape from olmo_config metadata,\n"
            "train_state.json or a recipe.yml near it) or an HF Olmo3 directory.\n"
            "The completion goes to stdout (text; with --tokens, ids); stats to stderr.\n"
            "\n"
            "  --prompt TEXT      tokenized with dolma2 (no BOS; special-token strings allowed)\n"
            "  --tokens IDS       prompt as comma-separated ids (no tokenizer; output as ids)\n"
            "  --max-new N        tokens to generate at most (default 64); stops at EOS\n"
            "  --greedy           argmax decoding (same as --temperature 0)\n"
            "  --temperature T    softmax temperature (default 1.0)\n"
            "  --top-p P          nucleus sampling mass in (0, 1] (default 0.95)\n"
            "  --seed S           sampling seed (default 0): same seed, same output\n"
            "  --eos ID           stop token (default 100257, dolma2 <|endoftext|>; -1 = none)\n"
            "  --tokenizer FILE   tokenizer.json (default: env OLMO_TOKENIZER, else dolma2)\n"
            "  --check-kv         compare the KV-cache logits at every prompt position with a\n"
            "                     full forward; prints the max relative error, exit 1 above 1e-5\n"
            "  --dump-logits FILE write the KV-cache logits of the prompt positions, real vocab rows,\n"
            "                     as safetensors tensor \"logits\" (T, vocab_size) F32\n"
            "  --weights auto     (default) fp32 where the model fits in memory so, else as stored\n"
            "  --weights stored   keep bf16 weights (AI2's HF shards) in bf16, mapped from the file,\n"
            "                     upcast to fp32 a layer at a time: 2 bytes a parameter, logits bitwise\n"
            "                     those of fp32 weights, but every new token upcasts every weight again\n"
            "  --weights fp32     load every weight in fp32 (4 bytes a parameter)\n");
}

static long parse_long(const char *s, const char *opt, long lo, long hi) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || e == s || v < lo || v > hi) die_input("generate: %s must be an integer in [%ld, %ld], got '%s'", opt, lo, hi, s);
    return v;
}

static double parse_double(const char *s, const char *opt) {
    char *e;
    double v = strtod(s, &e);
    if (*e || e == s || !isfinite(v)) die_input("generate: %s must be a number, got '%s'", opt, s);
    return v;
}

enum { W_AUTO, W_STORED, W_FP32 };

typedef struct {
    const char *ckpt, *prompt, *ids_arg, *tok_path, *dump;
    long max_new, eos;
    double temp, top_p;
    uint64_t seed;
    int greedy, check, weights;   // weights: W_AUTO, W_STORED, W_FP32
} GenArgs;

// Options into a; returns 0, or 2 after the usage when no checkpoint is given.
static int parse_args(GenArgs *a, int argc, char **argv) {
    *a = (GenArgs){.max_new = 64, .eos = DOLMA2_EOS, .temp = 1.0, .top_p = 0.95};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(o, "--prompt") && has) a->prompt = argv[++i];
        else if (!strcmp(o, "--tokens") && has) a->ids_arg = argv[++i];
        else if (!strcmp(o, "--max-new") && has) a->max_new = parse_long(argv[++i], o, 0, 1L << 24);
        else if (!strcmp(o, "--temperature") && has) a->temp = parse_double(argv[++i], o);
        else if (!strcmp(o, "--top-p") && has) a->top_p = parse_double(argv[++i], o);
        else if (!strcmp(o, "--seed") && has) a->seed = (uint64_t)parse_long(argv[++i], o, 0, LONG_MAX);
        else if (!strcmp(o, "--eos") && has) a->eos = parse_long(argv[++i], o, -1, INT_MAX);
        else if (!strcmp(o, "--tokenizer") && has) a->tok_path = argv[++i];
        else if (!strcmp(o, "--dump-logits") && has) a->dump = argv[++i];
        else if (!strcmp(o, "--weights") && has) {
            const char *w = argv[++i];
            a->weights = !strcmp(w, "auto") ? W_AUTO : !strcmp(w, "stored") ? W_STORED : !strcmp(w, "fp32") ? W_FP32 : -1;
            if (a->weights < 0) die_input("generate: --weights takes auto, stored or fp32, got '%s'", w);
        }
        else if (!strcmp(o, "--greedy")) a->greedy = 1;
        else if (!strcmp(o, "--check-kv")) a->check = 1;
        else if (o[0] == '-') { usage(stderr); die_input("generate: unknown or incomplete option '%s'", o); }
        else if (!a->ckpt) a->ckpt = o;
        else die_input("generate: unexpected argument '%s'", o);
    }
    if (!a->ckpt) { usage(stderr); return 2; }
    if (!a->prompt == !a->ids_arg) die_input("generate: give exactly one of --prompt TEXT or --tokens IDS");
    if (a->temp < 0) die_input("generate: --temperature must be >= 0, got %g", a->temp);
    if (!(a->top_p > 0 && a->top_p <= 1)) die_input("generate: --top-p must be in (0, 1], got %g", a->top_p);
    if (a->temp == 0) a->greedy = 1;
    return 0;
}

// The prompt's ids (*T of them, each checked against the vocab). A text prompt loads the
// tokenizer into *tok: an HF directory's own tokenizer.json, else the default (dolma2).
static uint32_t *prompt_ids(const GenArgs *a, const ModelSource *s, Tokenizer **tok, size_t *T) {
    uint32_t *ids = NULL;
    *tok = NULL;
    if (a->prompt) {
        const char *tok_path = a->tok_path;
        char hf_tok[4200];
        snprintf(hf_tok, sizeof hf_tok, "%s/tokenizer.json", s->path);
        FILE *probe = !tok_path && s->is_hf ? fopen(hf_tok, "rb") : NULL;
        if (probe) { fclose(probe); tok_path = hf_tok; }
        char *tp = tokenizer_resolve_path(tok_path);
        *tok = tokenizer_load(tp);
        free(tp);
        size_t cap = 0;
        if (tokenizer_encode(*tok, a->prompt, strlen(a->prompt), 1, &ids, T, &cap) != 0)
            die_input("generate: --prompt is not valid UTF-8 (byte %zu)", tokenizer_utf8_error_offset(a->prompt, strlen(a->prompt)));
    } else {
        ids = gen_parse_ids(a->ids_arg, T);
    }
    if (*T == 0) die_input("generate: the prompt is empty (no tokens)");
    for (size_t i = 0; i < *T; i++)
        if ((int)ids[i] >= s->cfg.vocab_size)
            die_input("generate: prompt token %u at position %zu is outside the model's vocab (%d)", ids[i], i, s->cfg.vocab_size);
    return ids;
}

// The real-vocab rows of the prompt logits (T, Vp) as safetensors tensor "logits" (T, V).
static void dump_logits(const char *path, const float *logits, size_t T, int V, int Vp) {
    float *real = xmalloc(sizeof(float) * T * V);
    for (size_t t = 0; t < T; t++) memcpy(real + t * V, logits + t * Vp, sizeof(float) * V);
    StWrite w = {"logits", "F32", 2, {(int64_t)T, V}, real, sizeof(float) * T * V};
    if (st_write(path, &w, 1, NULL) != 0) die_input("generate: cannot write %s: %s", path, strerror(errno));
    free(real);
}

// The weights (every tensor checked here): as --weights says; auto: bf16 ones kept as stored
// only when the model does not fit in memory in fp32 (the logits are the same bits either
// way, and a token upcasts every weight again: fp32 is the faster where it fits).
static void open_weights(const GenArgs *a, const ModelSource *s, int T, int max_len, ModelWeights *mw) {
    char err[4096];
    if (model_weights_open(s, a->weights == W_FP32, mw, err, sizeof err) != 0) die_input("generate: %s", err);
    if (a->weights != W_AUTO || !mw->ten) return;
    const int keep_all = a->check || a->dump;
    const double fp32 = model_generate_bytes(&s->cfg, a->check ? T : 1, PREFILL_CHUNK, max_len, keep_all ? T : 1,
                                             model_weights_bytes(&s->cfg));
    if (fp32 > model_memory_available(NULL)) return;
    model_weights_close(mw);
    if (model_weights_open(s, 1, mw, err, sizeof err) != 0) die_input("generate: %s", err);
    char b[32];
    snprintf(mw->what, sizeof mw->what, "fp32, %s (--weights auto: the bf16 weights in fp32 fit in memory, and each "
             "token would upcast them again as stored; --weights stored keeps them in bf16)",
             model_fmt_bytes(mw->bytes, b, sizeof b));
}

// Sample up to max_new tokens after seq[0..*len) from the last logits `cur` (Vp, consumed),
// printing each (text with a tokenizer, else ids); stops at eos. seq grows in place.
static void sample_loop(const GenArgs *a, KVModel *kv, Tokenizer *tok, int32_t *seq, size_t *len, float *cur) {
    Sampler smp;
    sampler_init(&smp, kv->cfg.vocab_size, a->greedy, (float)a->temp, (float)a->top_p, a->seed);
    for (long g = 0; g < a->max_new; g++) {
        int next = sampler_next(&smp, cur);
        seq[(*len)++] = next;
        if (tok) {
            size_t nb;
            uint32_t u = (uint32_t)next;
            char *b = tokenizer_decode(tok, &u, 1, &nb);
            if (b && next != a->eos) fwrite(b, 1, nb, stdout);
            free(b);
        } else {
            printf("%s%d", g ? "," : "", next);
        }
        fflush(stdout);
        if (next == a->eos || g + 1 == a->max_new) break;
        kv_forward(kv, &seq[*len - 1], 1, cur, 0);
    }
    printf("\n");
    sampler_free(&smp);
}

int cmd_generate(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    GenArgs a;
    if (parse_args(&a, argc, argv)) return 2;
    char err[4096];
    ModelSource s;
    if (model_source_resolve(a.ckpt, &s, err, sizeof err) != 0) die_input("generate: %s", err);
    const ModelConfig *c = &s.cfg;
    Tokenizer *tok;
    size_t T;
    uint32_t *ids = prompt_ids(&a, &s, &tok, &T);

    size_t max_len = T + (size_t)a.max_new;
    if (max_len > INT_MAX / 2) die_input("generate: prompt + --max-new too long");
    const int keep_all = a.check || a.dump;
    ModelWeights mw;
    open_weights(&a, &s, (int)T, (int)max_len, &mw);
    // What the Model, the KV cache and the logits below take, against this machine's memory.
    {
        const double wb = mw.bytes,
                     need = model_generate_bytes(c, a.check ? (int)T : 1, PREFILL_CHUNK, (int)max_len,
                                                 keep_all ? (int)T : 1, wb);
        char what[400], alt[400], f1[32], f2[32];
        snprintf(what, sizeof what, "%s of %s weights + %s of KV cache, activations and logits for %zu positions",
                 model_fmt_bytes(wb, f1, sizeof f1), mw.ten ? "bf16 (as stored, + one layer's fp32 scratch)" : "fp32",
                 model_fmt_bytes(need - wb, f2, sizeof f2), max_len);
        snprintf(alt, sizeof alt, "%s: olmo export-gguf %s OUT.gguf streams it to bf16 GGUF (docs/hf.md)",
                 wb <= model_memory_available(NULL) ? "A shorter prompt or --max-new shrinks the cache; or run the model "
                 "with llama.cpp" : mw.ten ? "The bf16 weights alone exceed this machine's memory: run "
                 "the model with llama.cpp" : "The fp32 weights alone exceed this machine's memory: run the model with "
                 "llama.cpp",
                 a.ckpt);
        if (model_check_need("generate", need, what, alt, err, sizeof err)) die_input("%s", err);
    }
    // Parameters live in a Model (its full forward serves --check-kv); the KV path views them.
    Model m;
    model_create_eval(&m, c, 1, a.check ? (int)T : 1, mw.ten);
    if (!mw.ten) model_weights_load(&mw, m.params);
    fprintf(stderr, "generate: weights %s\n", mw.what);
    if (s.seq_len > 0 && max_len > (size_t)s.seq_len)
        warnf("generate: %zu positions exceed the training length %d", max_len, s.seq_len);
    KVModel kv;
    if (m.stored) kv_create_stored(&kv, c, &m.table, m.stored, (int)max_len, PREFILL_CHUNK);
    else kv_create(&kv, c, &m.table, m.params, (int)max_len, PREFILL_CHUNK);
    const int Vp = c->padded_vocab;
    int32_t *seq = xmalloc(sizeof(int32_t) * max_len);
    for (size_t i = 0; i < T; i++) seq[i] = (int32_t)ids[i];
    // With --check-kv or --dump-logits the prompt runs token by token (the decode path at
    // every position, logits kept); otherwise in chunks, logits of the last token only.
    float *logits = xmalloc_aligned(sizeof(float) * (keep_all ? T : 1) * Vp);
    int rc = 0;

    double t0 = now_seconds();
    for (size_t i = 0; i < T;) {
        int n = keep_all ? 1 : T - i < PREFILL_CHUNK ? (int)(T - i) : PREFILL_CHUNK;
        kv_forward(&kv, seq + i, n, keep_all ? logits + i * Vp : logits, 0);
        i += n;
    }
    double t_prefill = now_seconds() - t0;
    if (a.check) {
        KVCheck e = gen_check_kv(&m, seq, (int)T, logits);
        printf("check-kv: %zu positions, window %d: decode vs full forward max rel err %.3g, "
               "chunked prefill vs full %.3g (tolerance 1e-5)\n", T, c->sliding_window, e.decode, e.chunked);
        if (!(e.decode <= 1e-5 && e.chunked <= 1e-5)) { fprintf(stderr, "olmo: error: check-kv: KV-cache logits differ from the full forward\n"); rc = 1; }
    }
    if (a.dump) dump_logits(a.dump, logits, T, c->vocab_size, Vp);

    float *cur = xmalloc(sizeof(float) * (size_t)Vp);
    memcpy(cur, logits + (keep_all ? (T - 1) * Vp : 0), sizeof(float) * Vp);
    size_t len = T;
    double t1 = now_seconds();
    sample_loop(&a, &kv, tok, seq, &len, cur);
    double t_gen = now_seconds() - t1;
    fprintf(stderr, "generate: %zu prompt tokens (%.3fs), %zu new (%.3fs, %.1f tok/s)%s; shape from %s\n", T, t_prefill,
            len - T, t_gen, t_gen > 0 ? (double)(len - T) / t_gen : 0.0, len > T && seq[len - 1] == a.eos ? ", stopped at EOS" : "",
            s.config_from);

    free(cur);
    free(seq);
    free(logits);
    free(ids);
    kv_free(&kv);
    model_destroy(&m);
    model_weights_close(&mw);
    if (tok) tokenizer_free(tok);
    return rc;
}
