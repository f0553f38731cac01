// cmd_bench.c: `olmo bench`: training throughput on fixed configs, side by side with the
// PyTorch reference (tests/ref/olmo_ref.py --bench) on the same config and thread count,
// measured in the same run (issue 8). Per (config, precision): tokens/s, MFU (OLMo-core
// count) against this machine's measured GEMM peak of that precision (peak.h), peak RSS,
// loss; PyTorch fp32 and (for bf16) PyTorch bf16 autocast as ratios; optionally 1 vs N
// threads and 1 vs 2 MPI ranks.
//
// Every olmo.c measurement runs in a fresh process (`olmo bench --worker ...`, launched by
// this one, directly or under mpirun), so each has its own peak RSS and allocator state,
// and a 2-rank measurement runs the data-parallel step of `mpirun -np 2 olmo train`
// (train_core_shard + train_step: reduce-scatter, ZeRO-1 AdamW, all-gather), and again
// with dist.shard grads and full (the weights gathered part by part).
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dist/dist.h"
#include "io/params_io.h"
#include "kernels/cpu/ops_profile.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "train/peak.h"
#include "train/backend_cpu.h"
#include "train/step.h"
#include "util/common.h"

typedef struct {
    const char *name, *about;
    ModelConfig cfg;
    int T, batch, micro;
    int in_all;   // run by --config all
} BenchConfig;

// (a) vocab-dominated small model, (b) deeper model at T=1024 (issue 8); smoke: a tiny
// model for tests of bench itself (only by name).
static const BenchConfig CONFIGS[] = {
    {"a", "d 256, 4 layers, 4 heads, MLP 768, dolma2 vocab, T 256, 8 seqs/step",
     {100278, 0, 256, 4, 4, 4, 64, 768, 500000.0, 1e-6, 128, 4, {0}, 0, 0}, 256, 8, 8, 1},
    {"b", "d 512, 8 layers, 8 heads, MLP 1536, dolma2 vocab, T 1024, 4 seqs/step",
     {100278, 0, 512, 8, 8, 8, 64, 1536, 500000.0, 1e-6, 512, 4, {0}, 0, 0}, 1024, 4, 2, 1},
    {"smoke", "d 64, 2 layers, 4 heads, MLP 128, vocab 1000, T 64, 4 seqs/step (tests)",
     {1000, 0, 64, 2, 4, 4, 16, 128, 500000.0, 1e-6, 32, 4, {0}, 0, 0}, 64, 4, 4, 0},
};
#define NCONFIGS (int)(sizeof CONFIGS / sizeof CONFIGS[0])
static const char *const PREC[2] = {"fp32", "bf16"};

// The training run of every measurement, olmo.c and PyTorch alike (olmo_ref.py --bench gets
// these on its command line, the initial parameters as a safetensors file written by
// write_init and the same LCG tokens): as `olmo train` sets up its core (trainer.c).
#define B_SEED 0ULL           // param_init seed
#define B_DATA_SEED 12345ULL  // LCG of the synthetic tokens
#define B_LR 3e-4             // cosine, warmup B_WARMUP, max_steps bench_max_steps()
#define B_WARMUP 2
// steps + 1 (the warmup step included), at least B_WARMUP + 1: the reference's lr_at has no
// cosine of zero length (with --steps 1 the schedule would end where warmup ends)
static int bench_max_steps(int steps) { return steps + 1 > B_WARMUP ? steps + 1 : B_WARMUP + 1; }
#define B_ALPHA_F 0.1
#define B_BETA1 0.9
#define B_BETA2 0.95
#define B_EPS 1e-8
#define B_WD 0.1
#define B_DECAY_EMB 0         // the embedding is not weight-decayed
#define B_CLIP 1.0
#define B_ZLOSS 1e-5

static const BenchConfig *find_config(const char *name) {
    for (int c = 0; c < NCONFIGS; c++)
        if (!strcmp(CONFIGS[c].name, name)) return &CONFIGS[c];
    return NULL;
}

// ---- worker: one measurement in this process ---------------------------------------------
// --profile: the op table of the worker's model timed per op family (ops_profile.h), rates
// against the GEMM peaks of the threads' cores and a triad bandwidth measured here, after
// peak RSS is read (its arrays are not the run's memory).
#define TRIAD_FLOATS ((size_t)16 << 20)   // 3 arrays of 64 MiB
static void profile_attach(Model *m) {
    const ModelConfig *c = &m->cfg;
    ProfileShapes s = {c->d_model, c->n_heads * c->head_dim, c->n_kv_heads * c->head_dim, c->mlp_hidden};
    ops_profile_attach(model_backend(m), &s);
}
static void profile_report(int bf16, double total, int steps) {
    int cores;
    affinity_cpus(&cores);
    const int threads = omp_get_max_threads(), used = threads < cores ? threads : cores;
    CorePeak g;
    core_peak(bf16, 0, &g);
    char about[128];
    snprintf(about, sizeof about, "triad bandwidth (3 x 64 MiB, %d thread%s)", threads, threads > 1 ? "s" : "");
    ProfilePeaks pk = {g.per_core * used, ops_profile_triad_bandwidth(TRIAD_FLOATS, 5),
                       bf16 ? matmul_bf16_engine() : "sgemm", about};
    ops_profile_report(stdout, total, steps, &pk);
}

// `olmo bench --worker CONFIG fp32|bf16 STEPS MICRO [SHARD] [profile]`: trains STEPS steps (after
// one warmup step) on synthetic tokens, as rank dist_rank() of dist_world() when started by
// mpirun, and rank 0 prints the lines of olmo_ref.py --bench: "tokens/s: ", "loss: " and
// "peak RSS GiB: " (the largest over the ranks), and with `profile` the "profile:" lines.
static int worker(int argc, char **argv) {
    if (argc < 6 || argc > 8) die_input("olmo bench --worker CONFIG fp32|bf16 STEPS MICRO [optim|grads|full] [profile]");
    const BenchConfig *bc = find_config(argv[2]);
    const int bf16 = !strcmp(argv[3], "bf16"), steps = atoi(argv[4]), micro = atoi(argv[5]);
    // the optional arguments: a dist.shard mode and/or `profile`, in that order
    const int profile = argc > 6 && !strcmp(argv[argc - 1], "profile");
    const char *mode = argc - profile > 6 ? argv[6] : "optim";
    if (!bc || (!bf16 && strcmp(argv[3], "fp32")) || steps < 1 || micro < 1 || argc - profile > 7)
        die_input("olmo bench --worker: bad arguments");
    dist_init();
    const int W = dist_world(), rank = dist_rank(), T = bc->T, B = bc->batch;
    char err[256];
    const int shard = train_shard_mode(mode, 0, W, err, sizeof err);
    if (shard < 0) die_input("olmo bench --worker: %s", err);
    if (B % micro || (B / micro) % W)
        die_input("olmo bench --worker: %d micro-batches of %d do not split over %d ranks", B / micro, micro, W);
    const int local = B / W;
    ModelConfig cfg = bc->cfg;
    model_config_derive(&cfg);
    Model m;
    model_create(&m, &cfg, micro, T);
    model_set_precision(&m, bf16 ? PRECISION_BF16 : PRECISION_FP32);
    param_init(&m.table, m.params, B_SEED);
    if (profile) profile_attach(&m);
    TrainCore tc = {0};
    tc.model = &m;
    tc.shard_mode = (ShardMode)shard;
    // as `olmo train` sets up its core (trainer.c), also at one rank
    train_core_shard(&tc, W, rank, local / micro, B_BETA1, B_BETA2, B_EPS, B_WD, B_DECAY_EMB);
    train_core_load_master(&tc);   // full: as the CPU backend's sync_from_host
    gradacc_init(&tc.acc, m.table.total);
    tc.max_grad_norm = B_CLIP;
    tc.z_loss = (float)B_ZLOSS;
    snprintf(tc.sched.name, sizeof tc.sched.name, "cosine");
    tc.sched.peak = B_LR;
    tc.sched.warmup = B_WARMUP;
    tc.sched.max_steps = bench_max_steps(steps);
    tc.sched.alpha_f = B_ALPHA_F;
    // the same global batch on every rank; each trains its contiguous block, as the loader gives it
    size_t n = (size_t)B * T;
    int32_t *in = xmalloc(sizeof(int32_t) * n), *tg = xmalloc(sizeof(int32_t) * n);
    unsigned long long s = B_DATA_SEED;   // olmo_ref.py lcg_batch() replicates this stream
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        in[i] = (int32_t)((s >> 33) % (unsigned)cfg.vocab_size);
    }
    for (size_t i = 0; i < n; i++) tg[i] = (i + 1) % T ? in[i + 1] : -100;
    const size_t off = (size_t)rank * local * T;
    double total = 0;
    StepResult r = {0};
    for (int st = 0; st <= steps; st++) {   // step 0 is warmup (page faults, first-touch)
        dist_barrier();
        double t0 = now_seconds();
        r = cpu_train_step(&tc, in + off, tg + off, B, micro, T, st + 1, NULL);
        if (st > 0) total += now_seconds() - t0;
        if (profile && st == 0) ops_profile_reset();
    }
    double rss = (double)peak_rss_bytes(), *all = xmalloc(sizeof(double) * (size_t)W);
    dist_allgather_doubles(&rss, 1, all);
    for (int i = 0; i < W; i++) rss = fmax(rss, all[i]);
    if (rank == 0)
        printf("tokens/s: %.6g\nloss: %.8f\npeak RSS GiB: %.4f\n", (double)n * steps / total, r.loss,
               rss / (1024.0 * 1024 * 1024));
    if (profile && rank == 0) profile_report(bf16, total, steps);
    free(all);
    free(in);
    free(tg);
    train_core_free(&tc);
    model_destroy(&m);
    dist_finalize();
    return 0;
}

// ---- launcher -------------------------------------------------------------------------
// tps <= 0: not measured. other_cpus: CPUs kept busy by anything but the measured process
// tree while it ran (other processes, hypervisor steal): the figures are low when > 0.
// profile: the worker's "profile:" lines (--profile), as printed.
typedef struct { double tps, loss, rss_gib, other_cpus; char probe[512], profile[4096]; } Measure;


// This binary: the workers run /proc/PID/exe, the very file this process runs even if a
// rebuild replaced build/olmo meanwhile; its directory locates tests/ref/olmo_ref.py.
static void self_exe(char *out, size_t len) { snprintf(out, len, "/proc/%d/exe", (int)getpid()); }
static void self_dir(char *out, size_t len) {
    ssize_t k = readlink("/proc/self/exe", out, len - 1);
    if (k <= 0) die("olmo bench: cannot read /proc/self/exe");
    out[k] = 0;
    char *del = strstr(out, " (deleted)");
    if (del) *del = 0;
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
}

// Run `cmd` (a worker or olmo_ref.py --bench) and read its "tokens/s: ", "loss: ",
// "peak RSS GiB: " and "autocast ..." lines; on failure show its last lines.
static Measure run_measure(const char *cmd, const char *label) {
    Measure m = {.tps = -1, .loss = NAN, .rss_gib = NAN};
    const LoadMark mark = load_mark();
    FILE *p = popen(cmd, "r");
    if (!p) return m;
    char line[2048], tail[4][2048] = {{""}};
    int nl = 0;
    while (fgets(line, sizeof line, p)) {
        snprintf(tail[nl++ % 4], sizeof tail[0], "%s", line);
        if (!strncmp(line, "tokens/s:", 9)) m.tps = atof(line + 9);
        else if (!strncmp(line, "loss:", 5)) m.loss = atof(line + 5);
        else if (!strncmp(line, "peak RSS GiB:", 13)) m.rss_gib = atof(line + 13);
        else if (!strncmp(line, "autocast", 8)) snprintf(m.probe, sizeof m.probe, "%.*s", (int)strcspn(line, "\n"), line);
        else if (!strncmp(line, "profile:", 8)) {
            size_t used = strlen(m.profile);
            snprintf(m.profile + used, sizeof m.profile - used, "  %s", line);
        }
    }
    int rc = pclose(p);
    m.other_cpus = other_load(mark);
    if (rc == 0 && isfinite(m.tps) && m.tps > 0) return m;
    fprintf(stderr, "olmo bench: %s failed (exit status %d); last output:\n", label, rc);
    for (int i = nl > 4 ? nl - 4 : 0; i < nl; i++) fprintf(stderr, "    | %s", tail[i % 4]);
    m.tps = -1;
    return m;
}

// olmo.c: `threads` OpenMP threads in one process, or (ranks > 0) `ranks` processes of one
// thread each under mpirun. shard: dist.shard of a ranks > 0 measurement (optim, grads,
// full); profile: with the worker's per-op-family lines.
static Measure measure_c(const BenchConfig *bc, int bf16, int steps, int micro, int threads, int ranks,
                         const char *shard, int profile) {
    char exe[4096], cmd[8192], label[128];
    self_exe(exe, sizeof exe);
    if (ranks > 0)
        snprintf(cmd, sizeof cmd,
                 "mpirun --oversubscribe --allow-run-as-root -np %d -x OMP_NUM_THREADS=1 '%s' bench --worker %s %s %d %d "
                 "%s%s 2>&1",
                 ranks, exe, bc->name, PREC[bf16], steps, micro, shard, profile ? " profile" : "");
    else
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=%d '%s' bench --worker %s %s %d %d%s 2>&1", threads, exe,
                 bc->name, PREC[bf16], steps, micro, profile ? " profile" : "");
    snprintf(label, sizeof label, "olmo.c config (%s) %s, %d %s", bc->name, PREC[bf16], ranks ? ranks : threads,
             ranks ? "rank(s)" : "thread(s)");
    return run_measure(cmd, label);
}

// The PyTorch reference: fp32, or (bf16) fp32 master weights with the forward under
// torch.autocast(cpu, bfloat16). Not measured (tps < 0) without /usr/bin/python3 + torch.
// Same run as the olmo.c worker: init from `init` (write_init), the worker's LCG tokens and
// optimizer settings.
static int torch_script(char *script, size_t len) {
    char dir[4096];
    self_dir(dir, sizeof dir);
    snprintf(script, len, "%s/../tests/ref/olmo_ref.py", dir);
    return !access(script, R_OK) && !access("/usr/bin/python3", X_OK);
}
static Measure measure_torch(const BenchConfig *bc, int bf16, int steps, int threads, const char *init) {
    char script[4200], cmd[16384];
    if (!torch_script(script, sizeof script)) return (Measure){.tps = -1};
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s' --bench --d-model %d --layers %d --heads %d --kv-heads %d "
             "--mlp %d --vocab %d --seq %d --batch %d --micro-batch %d --window %d --steps %d --threads %d "
             "--dtype float32%s --init-safetensors '%s' --data-seed %llu --lr %.17g --warmup %d --max-steps %d "
             "--alpha-f %.17g --weight-decay %.17g --decay-embedding %d --z-loss %.17g --clip %.17g --beta1 %.17g "
             "--beta2 %.17g --eps %.17g 2>&1",
             script, bc->cfg.d_model, bc->cfg.n_layers, bc->cfg.n_heads, bc->cfg.n_kv_heads, bc->cfg.mlp_hidden,
             bc->cfg.vocab_size, bc->T, bc->batch, bc->micro, bc->cfg.sliding_window, steps, threads,
             bf16 ? " --autocast bf16" : "", init, B_DATA_SEED, B_LR, B_WARMUP, bench_max_steps(steps), B_ALPHA_F, B_WD,
             B_DECAY_EMB, (double)(float)B_ZLOSS, B_CLIP, B_BETA1, B_BETA2, B_EPS);
    return run_measure(cmd, bf16 ? "PyTorch bf16 autocast" : "PyTorch fp32");
}

// The worker's initial parameters (param_init, seed B_SEED) as safetensors in a fresh
// temporary directory: `path` gets the file, `dir` the directory (for cleanup). 0 on success.
static int write_init(const BenchConfig *bc, char *dir, size_t dlen, char *path, size_t plen) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dlen, "%s/olmo-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, plen, "%s/init-%s.safetensors", dir, bc->name);
    ModelConfig cfg = bc->cfg;
    model_config_derive(&cfg);
    ParamTable t;
    param_table_build(&t, &cfg);
    float *p = xmalloc_aligned(sizeof(float) * t.total);
    param_init(&t, p, B_SEED);
    params_save_safetensors(&t, p, path, NULL);
    free(p);
    param_table_free(&t);
    return 0;
}
static void remove_init(const char *dir, const char *path) {
    if (path[0]) unlink(path);
    if (dir[0]) rmdir(dir);
}

// "  olmo.c   fp32 sgemm    2 threads:    701.6 tokens/s" (label padded to `pad`)
static void print_c(const char *prec, const char *eng, const char *label, int pad, double tps) {
    printf("  olmo.c   %-4s %-10s %-*s %8.1f tokens/s", prec, eng, pad, label, tps);
}

// Ends a result line: marks it when other processes took CPU meanwhile (counted in *busy).
static void end_line(double other_cpus, int *busy) {
    if (other_cpus > BUSY_CPUS) {
        printf(" | BUSY: other load %.1f CPUs", other_cpus);
        (*busy)++;
    }
    printf("\n");
    fflush(stdout);
}

static void bench_usage(void) {
    printf("usage: olmo bench [--config a|b|all|smoke] [--precision fp32|bf16|both] [--steps N] [--no-torch]\n"
           "                  [--threads-scan] [--ranks-scan] [--profile]\n"
           "Training throughput on fixed configs with synthetic tokens (one warmup step, then N steps):\n"
           "  (a) %s\n  (b) %s\n  (smoke) %s\n"
           "  --config      which config (default: all = a and b)\n"
           "  --precision   matmul precision (default: both): fp32, or bf16 (every matmul's operands\n"
           "                rounded to bf16, fp32 accumulation, on the CPU's engine: amx, avx512bf16 or\n"
           "                emulated; OLMO_BF16_ENGINE=NAME forces one, docs/performance.md)\n"
           "  --steps N     timed steps after the warmup step (default 3)\n"
           "  --no-torch    skip the PyTorch reference (tests/ref/olmo_ref.py --bench, /usr/bin/python3),\n"
           "                otherwise run in the same run at the same thread count: fp32, and for bf16\n"
           "                also fp32 master weights with the forward under torch.autocast(cpu, bfloat16)\n"
           "  --threads-scan  also olmo.c at 1 thread (ratio N threads / 1 thread)\n"
           "  --ranks-scan    also olmo.c data parallel under mpirun: 1 rank x 1 thread vs 2 ranks x 1\n"
           "                thread, the sharded step of `mpirun -np 2 olmo train`, same global batch\n"
           "                and micro-batch (at most half the global batch, so it splits over 2 ranks;\n"
           "                the two losses are then bitwise equal); then 2 ranks with dist.shard grads\n"
           "                (ZeRO-2) and full (ZeRO-3), as ratios to 2 ranks ZeRO-1 (same loss)\n"
           "  --profile     per op family of the olmo.c lines (GEMMs by role, LM head + loss, attention,\n"
           "                norms, RoPE, SwiGLU, embedding, optimizer, copies; the rest of the step is\n"
           "                gradient accumulation and reduction): ms/step, share of the step, and model\n"
           "                GFLOP/s against the run's GEMM peak (attention too) or GB/s of its\n"
           "                minimal traffic against a triad bandwidth measured in the same process\n"
           "  --worker CONFIG fp32|bf16 STEPS MICRO [SHARD] [profile]   internal: one olmo.c measurement in this\n"
           "                process (bench starts one per line, directly or under mpirun)\n"
           "Threads: OMP_NUM_THREADS (default: all cores). Each olmo.c line is a fresh process (its own\n"
           "peak RSS). MFU: OLMo-core FLOP count against the per-core GEMM peak of the same precision\n"
           "(fp32: OpenBLAS sgemm; bf16: bf16 matmul_forward on its engine) x the physical cores the\n"
           "threads use, as in training (docs/performance.md); calibrations cached in ~/.cache/olmo.\n"
           "PyTorch trains the same run as olmo.c: olmo.c's initial parameters (param_init seed 0, handed\n"
           "over as a temporary safetensors file), the same LCG tokens (one batch, every step) and\n"
           "optimizer (AdamW 0.9/0.95/1e-8, wd 0.1 but not the embedding, clip 1.0, z-loss 1e-5, lr 3e-4\n"
           "cosine, warmup 2, to 10%% over max(steps+1, 3) steps); a \"same run\" line gives the relative difference of\n"
           "the final losses. A line marked BUSY ran while other processes kept the CPUs busy: its\n"
           "figures are low.\n",
           CONFIGS[0].about, CONFIGS[1].about, CONFIGS[2].about);
}

// What the measurements of one `olmo bench` share.
typedef struct {
    int want[2];            // precisions measured: fp32, bf16
    int steps, threads, tscan, profile;
    const char *eng[2];     // the GEMM engine of each precision
    double peak[2];         // MFU's ceiling per precision (FLOP/s of the threads' cores)
    char width[32], width1[32];
    int busy, over, failed; // BUSY lines, MFU > 100% lines, failed measurements
} Bench;

// olmo.c on config bc at each precision (and at 1 thread with --threads-scan).
static void bench_olmo(Bench *b, const BenchConfig *bc, Measure mc[2]) {
    for (int p = 0; p < 2; p++) {
        if (!b->want[p]) continue;
        mc[p] = measure_c(bc, p, b->steps, bc->micro, b->threads, 0, NULL, b->profile);
        if (mc[p].tps <= 0) { b->failed = 1; continue; }
        ModelConfig cfg = bc->cfg;
        model_config_derive(&cfg);
        double mfu = mc[p].tps * model_flops_per_token_window(&cfg, bc->T) / b->peak[p];   // MFU's count (performance.md)
        b->over += mfu > 1;
        print_c(PREC[p], b->eng[p], b->width, 11, mc[p].tps);
        printf(" | MFU %5.1f%% of %s peak | peak RSS %.2f GiB | loss %.4f", 100 * mfu, PREC[p], mc[p].rss_gib,
               mc[p].loss);
        end_line(mc[p].other_cpus, &b->busy);
        fputs(mc[p].profile, stdout);
        if (b->tscan && b->threads > 1) {
            Measure m1 = measure_c(bc, p, b->steps, bc->micro, 1, 0, NULL, 0);
            if (m1.tps <= 0) { b->failed = 1; continue; }
            print_c(PREC[p], b->eng[p], b->width1, 11, m1.tps);
            printf(" | %d threads / 1 thread = %.2fx", b->threads, mc[p].tps / m1.tps);
            end_line(m1.other_cpus, &b->busy);
        }
    }
}

// The PyTorch reference on the same run (fp32, and bf16 autocast when bf16 is measured),
// side by side with olmo.c's measurements mc.
static void bench_torch(Bench *b, const BenchConfig *bc, const Measure mc[2]) {
    char script[4200], idir[4200] = "", ipath[4400] = "";
    if (torch_script(script, sizeof script) && write_init(bc, idir, sizeof idir, ipath, sizeof ipath)) {
        printf("  PyTorch: not measured (cannot create a temporary directory for the initial parameters)\n");
        idir[0] = ipath[0] = 0;
        b->failed = 1;
        return;
    }
    Measure mt[2] = {{.tps = -1}, {.tps = -1}};
    for (int p = 0; p < 2 && (p == 0 || b->want[1]); p++) {   // fp32 always: it is the reference
        mt[p] = measure_torch(bc, p, b->steps, b->threads, ipath);
        if (mt[p].tps <= 0) {
            printf("  PyTorch  %s: not measured (needs /usr/bin/python3 with torch)\n", PREC[p]);
            continue;
        }
        printf("  PyTorch  %-15s %-11s %8.1f tokens/s | peak RSS %.2f GiB | loss %.4f", p ? "bf16 autocast" : "fp32",
               b->width, mt[p].tps, mt[p].rss_gib, mt[p].loss);
        for (int q = 0; q < 2; q++)   // olmo.c at precision q against this PyTorch run
            if (mc[q].tps > 0 && (q == p || q == 1))
                printf(" | olmo.c %s / this = %.2fx", PREC[q], mc[q].tps / mt[p].tps);
        end_line(mt[p].other_cpus, &b->busy);
        if (mt[p].probe[0]) printf("           %s\n", mt[p].probe);
        if (mc[p].tps > 0)   // same init, data and optimizer: the losses agree up to rounding
            printf("           same run: loss olmo.c %s %.8f vs PyTorch %s %.8f | rel diff %.1e\n", PREC[p],
                   mc[p].loss, p ? "bf16 autocast" : "fp32", mt[p].loss,
                   fabs(mc[p].loss - mt[p].loss) / fabs(mt[p].loss));
    }
    remove_init(idir, ipath);
}

// --ranks-scan: 1 rank x 1 thread against 2 ranks x 1 thread under mpirun, then 2 ranks with
// dist.shard grads and full.
static void bench_ranks(Bench *b, const BenchConfig *bc) {
    const int micro = bc->micro < bc->batch / 2 ? bc->micro : bc->batch / 2;
    printf("  data parallel (mpirun, 1 thread per rank, global batch %d, micro-batch %d):\n", bc->batch, micro);
    for (int p = 0; p < 2; p++) {
        if (!b->want[p]) continue;
        Measure mr[2];
        for (int w = 0; w < 2; w++) {
            char lab[32];
            snprintf(lab, sizeof lab, "%d rank%s x 1 thread:", w + 1, w ? "s" : "");
            mr[w] = measure_c(bc, p, b->steps, micro, 1, w + 1, "optim", 0);
            if (mr[w].tps <= 0) { b->failed = 1; break; }
            print_c(PREC[p], b->eng[p], lab, 19, mr[w].tps);
            printf(" | peak RSS %.2f GiB/rank | loss %.4f", mr[w].rss_gib, mr[w].loss);
            if (w) printf(" | 2 ranks / 1 rank = %.2fx", mr[1].tps / mr[0].tps);
            end_line(mr[w].other_cpus, &b->busy);
        }
        if (mr[1].tps <= 0) continue;
        // dist.shard grads and full at 2 ranks, against ZeRO-1 (the line above) in this run
        static const char *MODES[2] = {"grads", "full"}, *LABELS[2] = {"2 ranks ZeRO-2:", "2 ranks ZeRO-3:"};
        for (int k = 0; k < 2; k++) {
            Measure ms = measure_c(bc, p, b->steps, micro, 1, 2, MODES[k], 0);
            if (ms.tps <= 0) { b->failed = 1; break; }
            print_c(PREC[p], b->eng[p], LABELS[k], 19, ms.tps);
            printf(" | peak RSS %.2f GiB/rank | loss %.4f | %s / ZeRO-1 = %.2fx", ms.rss_gib, ms.loss, MODES[k],
                   ms.tps / mr[1].tps);
            end_line(ms.other_cpus, &b->busy);
        }
    }
}

// The machine line: threads, cores, and the GEMM peak of each precision measured.
static void bench_machine(Bench *b) {
    b->threads = omp_get_max_threads();
    b->eng[0] = "sgemm", b->eng[1] = matmul_bf16_engine();
    // MFU as in training (peak.h): the per-core GEMM peak x the physical cores a line's
    // threads can use, each core once.
    int cores;
    affinity_cpus(&cores);
    const int used = b->threads < cores ? b->threads : cores;
    CorePeak cp[2];
    LoadMark mark = load_mark();
    for (int p = 0; p < 2; p++)
        if (b->want[p]) {
            core_peak(p, 0, &cp[p]);
            b->peak[p] = cp[p].per_core * used;
        }
    printf("machine: %d threads on %d physical core%s", b->threads, cores, cores > 1 ? "s" : "");
    for (int p = 0; p < 2; p++)
        if (b->want[p]) {
            char d[512];
            core_peak_describe(&cp[p], used, d, sizeof d);
            printf(" | %s GEMM peak %s", PREC[p], d);
        }
    end_line(other_load(mark), &b->busy);
}

int cmd_bench(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--worker")) return worker(argc, argv);
    if (cli_wants_help(argc, argv)) {
        bench_usage();
        return 0;
    }
    const char *which = "all", *prec = "both";
    int steps = 3, torch = 1, tscan = 0, rscan = 0, profile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) prec = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) torch = 0;
        else if (!strcmp(argv[i], "--threads-scan")) tscan = 1;
        else if (!strcmp(argv[i], "--ranks-scan")) rscan = 1;
        else if (!strcmp(argv[i], "--profile")) profile = 1;
        else die_input("olmo bench: unknown argument '%s' (see --help)", argv[i]);
    }
    if (steps < 1) die_input("olmo bench: --steps must be >= 1");
    if (strcmp(which, "all") && !find_config(which)) die_input("olmo bench: --config must be a, b, all or smoke");
    Bench b = {.want = {!strcmp(prec, "fp32") || !strcmp(prec, "both"), !strcmp(prec, "bf16") || !strcmp(prec, "both")},
               .steps = steps, .tscan = tscan, .profile = profile, .width1 = "1 thread:"};
    if (!b.want[0] && !b.want[1]) die_input("olmo bench: --precision must be fp32, bf16 or both");
#ifndef OLMO_MPI
    if (rscan) die_input("olmo bench: --ranks-scan needs a binary built with MPI (make MPI=1)");
#endif
    if (rscan && system("command -v mpirun >/dev/null 2>&1") != 0)
        die_input("olmo bench: --ranks-scan needs mpirun (OpenMPI) on PATH");
    bench_machine(&b);
    snprintf(b.width, sizeof b.width, "%d threads:", b.threads);
    for (int c = 0; c < NCONFIGS; c++) {
        const BenchConfig *bc = &CONFIGS[c];
        if (strcmp(which, bc->name) && (strcmp(which, "all") || !bc->in_all)) continue;
        printf("config (%s): %s\n", bc->name, bc->about);
        fflush(stdout);
        Measure mc[2] = {{.tps = -1}, {.tps = -1}};
        bench_olmo(&b, bc, mc);
        if (torch) bench_torch(&b, bc, mc);
        if (rscan) bench_ranks(&b, bc);
    }
    if (b.busy)
        printf("warning: other processes kept the CPUs busy during %d of these measurements (marked BUSY): those\n"
               "figures are low; rerun on a quiet machine.\n", b.busy);
    if (b.over)
        printf("warning: MFU above 100%%: the GEMM peak was measured low (a BUSY calibration, or a cached one\n"
               "taken while the machine was slowed); delete the peak-*.txt files in ~/.cache/olmo (or\n"
               "$XDG_CACHE_HOME/olmo) to measure it again.\n");
    return b.failed;
}
