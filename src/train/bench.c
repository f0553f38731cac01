// bench.c: `olmo bench`: training throughput on fixed configs, side by side with the
// PyTorch reference (tests/ref/olmo_ref.py --bench) on the same config and thread count,
// measured in the same run. Prints tokens/s, MFU (OLMo-core count) against this machine's
// measured fp32 GEMM peak, peak RSS, and the ratio to PyTorch.
#include <libgen.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "model/model.h"
#include "train/peak.h"
#include "train/step.h"
#include "util/common.h"

typedef struct {
    const char *name, *about;
    ModelConfig cfg;
    int T, batch, micro;
} BenchConfig;

// (a) vocab-dominated small model, (b) deeper model at T=1024 (issue 8).
static const BenchConfig CONFIGS[] = {
    {"a", "d 256, 4 layers, 4 heads, MLP 768, dolma2 vocab, T 256, 8 seqs/step",
     {100278, 0, 256, 4, 4, 4, 64, 768, 500000.0, 1e-6, 128, 4}, 256, 8, 8},
    {"b", "d 512, 8 layers, 8 heads, MLP 1536, dolma2 vocab, T 1024, 4 seqs/step",
     {100278, 0, 512, 8, 8, 8, 64, 1536, 500000.0, 1e-6, 512, 4}, 1024, 4, 2},
};

typedef struct { double tps, mfu, rss_gib, loss; } BenchResult;

static BenchResult run_c(const BenchConfig *bc, int steps, double peak) {
    ModelConfig cfg = bc->cfg;
    model_config_derive(&cfg);
    Model m;
    model_create(&m, &cfg, bc->micro, bc->T);
    param_init(&m.table, m.params, 0);
    TrainCore tc = {0};
    tc.model = &m;
    adamw_init(&tc.opt, &m.table, 0.9, 0.95, 1e-8, 0.1, 0);
    gradacc_init(&tc.acc, m.table.total);
    tc.max_grad_norm = 1.0;
    tc.z_loss = 1e-5f;
    snprintf(tc.sched.name, sizeof tc.sched.name, "cosine");
    tc.sched.peak = 3e-4;
    tc.sched.warmup = 2;
    tc.sched.max_steps = steps + 1;
    tc.sched.alpha_f = 0.1;
    size_t n = (size_t)bc->batch * bc->T;
    int32_t *in = xmalloc(sizeof(int32_t) * n), *tg = xmalloc(sizeof(int32_t) * n);
    unsigned long long s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        in[i] = (int32_t)((s >> 33) % (unsigned)cfg.vocab_size);
    }
    for (size_t i = 0; i < n; i++) tg[i] = (i + 1) % bc->T ? in[i + 1] : -100;
    double total = 0;
    StepResult r = {0};
    for (int st = 0; st <= steps; st++) {   // step 0 is warmup (page faults, first-touch)
        double t0 = now_seconds();
        r = train_step(&tc, in, tg, bc->batch, bc->micro, bc->T, st + 1, NULL);
        if (st > 0) total += now_seconds() - t0;
    }
    BenchResult br;
    br.tps = (double)n * steps / total;
    br.mfu = br.tps * model_flops_per_token_olmo_core(&cfg, bc->T) / peak;
    br.rss_gib = peak_rss_bytes() / (1024.0 * 1024 * 1024);
    br.loss = r.loss;
    free(in);
    free(tg);
    gradacc_free(&tc.acc);
    adamw_free(&tc.opt);
    model_destroy(&m);
    return br;
}

// Locate tests/ref/olmo_ref.py next to the binary (build/olmo -> ../tests/ref).
static int ref_script(char *out, size_t len) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    char *dir = dirname(exe);
    snprintf(out, len, "%s/../tests/ref/olmo_ref.py", dir);
    return access(out, R_OK);
}

static double run_torch(const BenchConfig *bc, int steps, int threads) {
    char script[4096];
    if (ref_script(script, sizeof script) != 0) return -1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s --bench --d-model %d --layers %d --heads %d --kv-heads %d --mlp %d --vocab %d --seq %d "
             "--batch %d --micro-batch %d --window %d --steps %d --threads %d --dtype float32 2>&1",
             script, bc->cfg.d_model, bc->cfg.n_layers, bc->cfg.n_heads, bc->cfg.n_kv_heads, bc->cfg.mlp_hidden,
             bc->cfg.vocab_size, bc->T, bc->batch, bc->micro, bc->cfg.sliding_window, steps, threads);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[1024];
    double tps = -1;
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, "tokens/s:", 9)) tps = atof(line + 9);
    pclose(p);
    return tps;
}

int cmd_bench(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        printf("usage: olmo bench [--config a|b|all] [--steps N] [--no-torch] [--threads-scan]\n"
               "  (a) %s\n  (b) %s\n"
               "  Threads: OMP_NUM_THREADS (default: all cores). --threads-scan also runs 1 thread.\n"
               "  MFU uses the OLMo-core FLOP count against the measured fp32 GEMM peak.\n",
               CONFIGS[0].about, CONFIGS[1].about);
        return 0;
    }
    const char *which = "all";
    int steps = 3, torch = 1, scan = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) torch = 0;
        else if (!strcmp(argv[i], "--threads-scan")) scan = 1;
        else die_input("olmo bench: unknown argument '%s' (see --help)", argv[i]);
    }
    if (steps < 1) die_input("olmo bench: --steps must be >= 1");
    int threads = omp_get_max_threads();
    const char *src;
    double peak = peak_flops(0, &src);
    printf("machine: %d threads, fp32 GEMM peak %.1f GFLOP/s (%s)\n", threads, peak / 1e9, src);
    for (size_t c = 0; c < sizeof CONFIGS / sizeof CONFIGS[0]; c++) {
        const BenchConfig *bc = &CONFIGS[c];
        if (strcmp(which, "all") && strcmp(which, bc->name)) continue;
        printf("config (%s): %s\n", bc->name, bc->about);
        fflush(stdout);
        BenchResult r = run_c(bc, steps, peak);
        printf("  olmo.c   %d threads: %8.1f tokens/s | MFU %5.1f%% | peak RSS %.2f GiB | loss %.4f\n", threads, r.tps,
               100 * r.mfu, r.rss_gib, r.loss);
        fflush(stdout);
        if (scan && threads > 1) {
            omp_set_num_threads(1);
            BenchResult r1 = run_c(bc, steps, peak_flops_calibrate(1024));
            omp_set_num_threads(threads);
            printf("  olmo.c   1 thread:  %8.1f tokens/s (%.2fx from 1 to %d threads)\n", r1.tps, r.tps / r1.tps, threads);
        }
        if (torch) {
            double t = run_torch(bc, steps, threads);
            if (t > 0)
                printf("  PyTorch  %d threads: %8.1f tokens/s | olmo.c / PyTorch = %.2fx\n", threads, t, r.tps / t);
            else
                printf("  PyTorch: not measured (tests/ref/olmo_ref.py or /usr/bin/python3 with torch missing)\n");
        }
        fflush(stdout);
    }
    return 0;
}
