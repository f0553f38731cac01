// cmd_eval.c: `olmo eval CKPT [--recipe RECIPE.yml] [key=value ...] [--set name=path ...]
// [--task name=path ...] [--json] [--details FILE]`: evaluates a checkpoint's parameters on
// the recipe's eval sets and tasks (plus any given here) with the same code the trainer
// runs in-loop, prints a table, and with --json writes the metrics record to stdout.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "eval/eval.h"
#include "io/hf.h"
#include "io/params_io.h"
#include "model/model.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo eval CKPT [--recipe RECIPE.yml] [key=value ...] [--set name=path ...]\n"
            "                 [--task name=path ...] [--json] [--details FILE]\n"
            "\n"
            "Evaluate a checkpoint on held-out perplexity sets and multiple-choice tasks\n"
            "(docs/eval.md). CKPT: a run directory (its model.safetensors, else its newest\n"
            "checkpoint), a checkpoint directory, a model.safetensors file or an HF directory.\n"
            "The recipe gives train.seq_len, train.micro_batch and the eval.* keys (eval.sets,\n"
            "eval.tasks, eval.max_docs, eval.max_examples, eval.tokenizer, eval.eos_id);\n"
            "data.*, train.max_* and schedule.* are not used. Its model.* keys must be the\n"
            "checkpoint's own shape: another model or RoPE scaling is refused, key by key.\n"
            "\n"
            "  --recipe FILE     default: the run's own recipe.yml (CKPT/recipe.yml, or next to\n"
            "                    the model file, or RUN/recipe.yml for RUN/checkpoints/step-N)\n"
            "  --set name=path   add a perplexity set (token file, EOS-separated documents)\n"
            "  --task name=path  add a multiple-choice task (JSONL)\n"
            "  --json            write the metrics as one JSON object to stdout (table to stderr)\n"
            "  --allow-rope-scaling  evaluate with the recipe's model.rope_* even where the checkpoint\n"
            "                    was trained with others (an experiment: docs/long-context.md)\n"
            "  --details FILE    append one JSON line per task example (choice log-likelihoods)\n"
            "  key=value         recipe override, e.g. eval.max_docs=10\n"
            "\n"
            "Metric keys: eval/<set>/{ce,ppl,bpb,tokens,bytes,docs}, eval/macro/{ce,ppl,bpb},\n"
            "task/<name>/{acc,len_norm,bpb,examples}, eval/seconds. Bad input exits 2.\n");
}

static void add_spec(char (*list)[RECIPE_MAX_STR], int *n, const char *spec, const char *opt) {
    if (*n >= RECIPE_MAX_PATHS) die_input("%s: at most %d items", opt, RECIPE_MAX_PATHS);
    if (strlen(spec) >= RECIPE_MAX_STR) die_input("%s: '%s' is too long", opt, spec);
    snprintf(list[(*n)++], RECIPE_MAX_STR, "%s", spec);
}

int cmd_eval(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { usage(stdout); return 0; }
    if (argc < 2 || argv[1][0] == '-') { usage(stderr); return 2; }
    const char *ckpt = argv[1], *recipe_path = NULL, *details = NULL;
    int json = 0, allow_rope = 0;
    // olmo eval does not train: fill the training-only keys a recipe must have so that an
    // eval-only recipe validates. The recipe's own values come first and are overridden
    // here; none of these keys is read by the evaluator.
    static char *fixed[] = {"data.paths=unused-by-olmo-eval", "train.max_steps=1", "schedule.name=constant"};
    int nfixed = (int)(sizeof fixed / sizeof fixed[0]);
    char **ov = xmalloc(sizeof(char *) * (size_t)(argc + nfixed));
    int nov = 0;
    for (int i = 0; i < nfixed; i++) ov[nov++] = fixed[i];
    const char **sets = xmalloc(sizeof(char *) * (size_t)argc), **tasks = xmalloc(sizeof(char *) * (size_t)argc);
    int nsets = 0, ntasks = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--recipe")) { if (!has) die_input("--recipe needs a file"); recipe_path = argv[++i]; }
        else if (!strcmp(a, "--set")) { if (!has) die_input("--set needs name=path"); sets[nsets++] = argv[++i]; }
        else if (!strcmp(a, "--task")) { if (!has) die_input("--task needs name=path"); tasks[ntasks++] = argv[++i]; }
        else if (!strcmp(a, "--details")) { if (!has) die_input("--details needs a file"); details = argv[++i]; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--allow-rope-scaling")) allow_rope = 1;
        else if (a[0] != '-' && strchr(a, '=')) ov[nov++] = argv[i];
        else die_input("eval: unknown argument '%s' (olmo eval --help)", a);
    }
    // The checkpoint and its own shape (src/io/hf.h), as export-hf and generate find them.
    ModelSource src;
    char err[4096], own[4800];
    const int have_src = model_source_resolve(ckpt, &src, err, sizeof err) == 0;
    if (!recipe_path) {
        if (!have_src) die_input("eval: %s; give --recipe RECIPE.yml (the model shape and eval.* keys)", err);
        if (model_source_recipe(ckpt, &src, own, sizeof own) != 0)
            die_input("eval: %s: no recipe.yml of its run found (in it, next to the model, or two levels up); give "
                      "--recipe RECIPE.yml (train.seq_len and the eval.* keys)", ckpt);
        recipe_path = own;
        fprintf(stderr, "eval: recipe %s (the run's own)\n", own);
    }

    Recipe *r = xcalloc(1, sizeof *r);
    recipe_load(r, recipe_path, nov, ov);
    for (int i = 0; i < nsets; i++) add_spec(r->eval_sets, &r->n_eval_sets, sets[i], "--set");
    for (int i = 0; i < ntasks; i++) add_spec(r->eval_tasks, &r->n_eval_tasks, tasks[i], "--task");

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

    Evaluator *e = eval_create(r);
    if (!e) die_input("eval: nothing to evaluate: give eval.sets / eval.tasks in the recipe, or --set / --task");
    eval_set_details(e, details);
    if (details) {
        FILE *f = fopen(details, "w");   // --details starts a fresh file; tasks append to it
        if (!f) die_input("eval: cannot write --details %s", details);
        fclose(f);
    }

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
    Model m;
    model_create(&m, &cfg, r->micro_batch, r->seq_len);
    if ((have_src ? model_source_load(&src, &m.table, m.params, err, sizeof err)
                  : params_load_safetensors(&m.table, m.params, path, err, sizeof err)) != 0)
        die_input("eval: %s", err);

    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "checkpoint", path);
    eval_run(e, &m, out);
    eval_print_table(json ? stderr : stdout, e, out);
    if (json) {
        char *s = cJSON_PrintUnformatted(out);
        printf("%s\n", s);
        free(s);
    }
    cJSON_Delete(out);
    model_destroy(&m);
    eval_free(e);
    free(path);
    free(r);
    free(ov);
    free(sets);
    free(tasks);
    return 0;
}
