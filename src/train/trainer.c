// trainer.c: `olmo train RECIPE.yml [key=value ...]`: the training loop. Validates the
// recipe and the data before writing anything, then per step: loader batch -> train_step
// -> one progress line and one metrics.jsonl record.
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data/loader.h"
#include "model/model.h"
#include "train/metrics.h"
#include "train/peak.h"
#include "train/recipe.h"
#include "train/step.h"
#include "util/common.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo train RECIPE.yml [key=value ...]\n"
            "  Trains the recipe's model. Overrides use dotted keys (optim.lr=1e-3 model.n_layers=2).\n"
            "  Writes RUN_DIR/recipe.yml (resolved), RUN_DIR/metrics.jsonl, RUN_DIR/model.safetensors.\n"
            "  MFU uses the OLMo-core FLOP count (6N + 12 L H Dh T) against perf.peak_flops or a\n"
            "  cached fp32 GEMM calibration of this machine.\n\nrecipe keys:\n");
}

int cmd_train(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        recipe_print_keys();
        return 0;
    }
    const char *recipe_path = NULL;
    char **ov = xcalloc((size_t)argc, sizeof(char *));
    int nov = 0;
    for (int i = 1; i < argc; i++) {
        if (strchr(argv[i], '=')) ov[nov++] = argv[i];
        else if (!recipe_path) recipe_path = argv[i];
        else die_input("unexpected argument '%s' (give one recipe file, then key=value overrides)", argv[i]);
    }
    if (!recipe_path) {
        usage(stderr);
        return 2;
    }
    Recipe r;
    recipe_load(&r, recipe_path, nov, ov);
    ModelConfig cfg = recipe_model_config(&r);
    const long total_steps = recipe_total_steps(&r);
    const int T = r.seq_len, GB = r.global_batch, MB = r.micro_batch;

    // Open the data before anything is written: a bad file stops the run with nothing on disk.
    LoaderConfig lc;
    recipe_loader_config(&r, &lc, 1, 0);
    Loader *loader = loader_create(&lc);

    if (mkdir_p(r.run_dir) != 0) die("cannot create run_dir %s", r.run_dir);
    char path[4096];
    char *yaml = recipe_to_yaml(&r);
    snprintf(path, sizeof path, "%s/recipe.yml", r.run_dir);
    if (write_file_atomic(path, yaml, strlen(yaml)) != 0) die("cannot write %s", path);
    free(yaml);

    Model m;
    model_create(&m, &cfg, MB, T);
    param_init(&m.table, m.params, r.seed);
    TrainCore tc = {0};
    tc.model = &m;
    adamw_init(&tc.opt, &m.table, r.beta1, r.beta2, r.eps, r.weight_decay, r.decay_embedding);
    gradacc_init(&tc.acc, m.table.total);
    skipstep_init(&tc.skip, r.skip_step_window, r.skip_step_sigma);
    tc.use_skip = r.skip_step;
    tc.max_grad_norm = r.max_grad_norm;
    tc.z_loss = (float)r.z_loss;
    snprintf(tc.sched.name, sizeof tc.sched.name, "%s", r.schedule);
    tc.sched.peak = r.lr;
    tc.sched.warmup = r.warmup_steps;
    tc.sched.max_steps = total_steps;
    tc.sched.alpha_f = r.alpha_f;
    tc.sched.decay_steps = r.decay_steps;

    const char *peak_src = "";
    double peak = peak_flops(r.peak_flops, &peak_src);
    double fpt = model_flops_per_token_olmo_core(&cfg, T), fpt_w = model_flops_per_token_window(&cfg, T);
    printf("olmo train: %s | %zu params | %ld steps x %d instances x %d tokens | %d threads\n", recipe_path,
           model_num_params(&cfg), total_steps, GB, T, omp_get_max_threads());
    printf("MFU: OLMo-core count %.4g GFLOP/token (window-aware %.4g) vs peak %.1f GFLOP/s (%s)\n", fpt / 1e9, fpt_w / 1e9,
           peak / 1e9, peak_src);
    fflush(stdout);

    MetricsLog log;
    metrics_open(&log, r.run_dir, "w");
    int32_t *inputs = xmalloc(sizeof(int32_t) * (size_t)GB * T), *targets = xmalloc(sizeof(int32_t) * (size_t)GB * T);
    long tokens = 0, skipped_total = 0;
    double t_start = now_seconds(), t_train = 0;
    for (long step = 1; step <= total_steps; step++) {
        double t0 = now_seconds();
        loader_next_batch(loader, inputs, targets);
        StepResult res = train_step(&tc, inputs, targets, GB, MB, T, step, NULL);
        double dt = now_seconds() - t0;
        t_train += dt;
        tokens += (long)GB * T;
        skipped_total += res.skipped;
        double tps = (double)GB * T / dt;
        double mfu = tps * fpt / peak;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", "train");
        cJSON_AddNumberToObject(o, "step", (double)step);
        cJSON_AddNumberToObject(o, "loss", res.loss);
        cJSON_AddNumberToObject(o, "ce", res.ce);
        cJSON_AddNumberToObject(o, "z_loss", res.z_loss);
        cJSON_AddNumberToObject(o, "lr", res.lr);
        cJSON_AddNumberToObject(o, "grad_norm", res.grad_norm);
        cJSON_AddNumberToObject(o, "tokens", (double)tokens);
        cJSON_AddNumberToObject(o, "tokens_per_s", tps);
        cJSON_AddNumberToObject(o, "mfu", mfu);
        cJSON_AddNumberToObject(o, "skipped", res.skipped);
        cJSON_AddNumberToObject(o, "skipped_total", (double)skipped_total);
        cJSON_AddNumberToObject(o, "step_time", dt);
        loader_metrics(loader, o);
        metrics_write(&log, o);
        cJSON_Delete(o);
        if (step % r.log_every == 0 || step == total_steps || step == 1) {
            char eta[32];
            format_duration(eta, sizeof eta, t_train / step * (total_steps - step));
            printf("step %6ld/%ld | loss %.4f (ce %.4f z %.2e) | lr %.3e | gnorm %.3f | %6.0f tok/s | MFU %4.1f%% | ETA %s%s\n",
                   step, total_steps, res.loss, res.ce, res.z_loss, res.lr, res.grad_norm, tps, 100 * mfu, eta,
                   res.skipped ? " | SKIPPED" : "");
            fflush(stdout);
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", r.run_dir);
    params_save_safetensors(&m.table, m.params, path, NULL);
    double wall = now_seconds() - t_start;
    printf("done: %ld steps, %ld tokens in %.1fs (%.0f tok/s), %ld skipped; model: %s\n", total_steps, tokens, wall,
           tokens / (t_train > 0 ? t_train : 1), skipped_total, path);
    metrics_close(&log);
    free(inputs);
    free(targets);
    loader_free(loader);
    gradacc_free(&tc.acc);
    adamw_free(&tc.opt);
    model_destroy(&m);
    free(ov);
    return 0;
}
