// cmd_info.c: `olmo info CKPT` (an HF directory, a run, a checkpoint: its shape, parameters
// and the memory of eval, generate, import/export and training against this machine) and
// `olmo info PRESET|RECIPE [key=value ...] [--world W] [--backend cpu|cuda]
// [--context-parallel C] [--shard optim|grads|full] [--shard-group G] [--lr-at S1,S2,...]`: parameter counts, FLOPs per token by both counts of docs/olmo3.md s.8, the
// memory a rank needs (with --backend cuda: per GPU, from the CUDA allocator's own plan), and
// the recipe's learning rate at the given steps.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "dist/dist.h"
#include "train/cuda/cuda_backend.h"
#include "io/hf.h"
#include "kernels/kernels.h"
#include "model/limits.h"
#include "model/graph.h"
#include "model/model.h"
#include "recipe/recipe.h"
#include "train/ckpt_shard.h"
#include "train/optim.h"
#include "train/peak.h"
#include "util/blas_core.h"
#include "util/common.h"

static void print_bytes(const char *what, double b) {
    printf("  %-46s %10.2f GiB\n", what, b / (1024.0 * 1024 * 1024));
}

static void print_gib(const char *what, double b) {
    printf("  %-46s %10.2f GiB  %15.0f bytes\n", what, b / (1024.0 * 1024 * 1024), b);
}

// Per GPU for train.backend=cuda in bf16 (cuda_mem_plan: what cuda_model_create requests).
// W > 1: the NCCL ZeRO-1 layout; the largest shard of dist_shard_bounds is the worst rank.
// Context parallelism (C > 1): the plan of one GPU holding T / C tokens of each instance,
// plus the graph's context-parallel buffers (graph_plan_bytes_cp: one head group's gathered
// K, V and their gradients over the whole instance, its document starts).
// shard 1, 2 (dist.shard: grads, full): cuda_mem_plan_shard's layout (train/cuda/fsdp_cuda.cu
// allocates it), sharded over groups of G ranks (HSDP when G < W: the same per-GPU layout as
// W = G, the replicas' all-reduce being in place).
static void print_cuda(const ModelConfig *cfg, int world, int group, int shard, int micro, int seq_len, int C,
                       int head_stride) {
    ParamTable t;
    param_table_build(&t, cfg);
    const int G = group ? group : world;
    size_t *b = xmalloc(sizeof(size_t) * ((size_t)G + 1)), lo = 0, hi = 0;
    dist_shard_bounds(t.total, G, b);
    for (int r = 0; r < G; r++)
        if (b[r + 1] - b[r] > hi - lo) lo = b[r], hi = b[r + 1];
    CudaMemPlan pl, rec;
    const int Tl = seq_len / C;
    const int full = shard == 2;
    cuda_mem_plan_shard(cfg, &t, micro, Tl, 1, 0, shard, lo, hi, &pl);
    cuda_mem_plan_shard(cfg, &t, micro, Tl, 1, 1, shard, lo, hi, &rec);
    char mode[160] = "", hsdp[80] = "";
    // HSDP: the replicas' all-reduce runs in place on the shard's gradient, no buffer of its own
    if (G < world) snprintf(hsdp, sizeof hsdp, ", shard groups of %d: HSDP, %d replicas all-reduced", G, world / G);
    if (shard) snprintf(mode, sizeof mode, " (dist.shard: %s%s)", full ? "full" : "grads", hsdp);
    else if (world > 1) snprintf(mode, sizeof mode, " (NCCL ZeRO-1%s)", hsdp);
    printf("per GPU, train.backend=cuda (bf16), world size %d%s, micro-batch %d x %d tokens:\n", world, mode, micro,
           seq_len);
    if (C > 1) {
        const GraphCP cp = {C, 0, seq_len, head_stride, NULL};
        for (int r = 0; r < 2; r++) {
            CudaMemPlan *q = r ? &rec : &pl;
            // + the group's NCCL reduce-scatter buffer (kernels/cuda/cp_nccl.cu: T x head_stride x D bf16)
            const double extra = (double)graph_plan_bytes_cp(cfg, micro, seq_len, DT_BF16, r, &cp) -
                                 (double)graph_plan_bytes(cfg, micro, Tl, DT_BF16, r) +
                                 (double)seq_len * head_stride * cfg->head_dim * 2;
            q->activations += extra;
            q->total += extra;
        }
        printf("  context parallel %d (%d groups of %d GPUs, data parallel over the groups): each GPU holds %d of "
               "each instance's %d tokens; activations / %d, plus the K/V of %d KV head%s over the whole instance "
               "(all-gathered per layer over the group's NCCL communicator) and its reduce-scatter buffer%s\n",
               C, world / C, C, Tl, seq_len, C, head_stride, head_stride > 1 ? "s" : "",
               shard ? "; with dist.shard grads/full not built on cuda (refused): this is its layout" : "");
    }
    printf("  %s shard: %zu of %zu parameters (largest rank)\n", shard ? "state" : "optimizer", hi - lo, t.total);
    if (shard) {
        CudaStateSizes s;
        cuda_state_sizes_shard(cfg, &t, 1, shard, lo, hi, &s);
        printf("  largest model part (embedding, block or head): %zu parameters\n", s.part);
        if (full) print_gib("bf16 weights (2 gathered parts + the shard's copy)", pl.weights);
        else print_gib("bf16 weights (whole table, 2 B/param)", pl.weights);
        print_gib("fp32 gradient (shard + 1 part buffer)", pl.grad);
    } else {
        print_gib("bf16 weights (whole table, 2 B/param)", pl.weights);
        print_gib("fp32 gradient (one buffer, 4 B/param)", pl.grad);
    }
    print_gib(G > 1 ? "fp32 master weights (shard, 4 B/param)" : "fp32 master weights (4 B/param)", pl.master);
    print_gib(G > 1 ? "Adam m, v (shard, 8 B/param)" : "Adam m, v (8 B/param)", pl.adam);
    print_gib("fp32 norm weights (replicated, sharded master)", pl.norms);
    print_gib("activations saved, no recompute", pl.activations);
    print_gib("activations saved, recompute (block + att out)", rec.activations);
    print_gib("scratch (LM-head chunk, op scratch, workspace)", pl.scratch);
    print_gib("total, no recompute", pl.total);
    print_gib("total, recompute (train.recompute=on)", rec.total);
    free(b);
    param_table_free(&t);
}

// The per-core GEMM peaks MFU uses on this machine, per instruction set this CPU has (peak.h),
// from the calibration cache: info measures nothing (a run or `olmo bench` calibrates).
static void print_peaks(void) {
    int cores;
    affinity_cpus(&cores);
    printf("GEMM peak per physical core (MFU's unit; this process may use %d core%s; cached calibrations; "
           "OpenBLAS kernels %s):\n", cores, cores > 1 ? "s" : "", blas_core_name());
    const char *eng[] = {"sgemm", "amx", "avx512bf16", "emulated"};
    for (int i = 0; i < 4; i++) {
        if (i && !matmul_bf16_engine_on_cpu(eng[i])) continue;
        int on = 0;
        double v = core_peak_cached(eng[i], &on);
        char what[64];
        snprintf(what, sizeof what, "%s %s%s", i ? "bf16" : "fp32", eng[i],
                 i && !strcmp(eng[i], matmul_bf16_engine()) ? " (default here)" : "");
        if (v > 0) printf("  %-46s %10.1f GFLOP/s (measured on %d core%s)\n", what, v / 1e9, on, on > 1 ? "s" : "");
        else {
            char env[64] = "";
            if (i && strcmp(eng[i], matmul_bf16_engine())) snprintf(env, sizeof env, "OLMO_BF16_ENGINE=%s ", eng[i]);
            printf("  %-46s not calibrated yet (%solmo bench --precision %s)\n", what, env, i ? "bf16" : "fp32");
        }
    }
}

// --lr-at: the recipe's LR at each step of a comma-separated list (bad list: exit 2).
static void print_lr_at(const Recipe *r, const char *list) {
    Schedule s;
    schedule_from_recipe(r, &s);
    printf("lr schedule %s: peak %.17g, warmup %ld, t_max %ld steps, alpha_f %g, decay_steps %ld, decay_min_lr %g\n",
           s.name, s.peak, s.warmup, s.max_steps, s.alpha_f, s.decay_steps, s.decay_min_lr);
    const char *p = list;
    do {
        char *end;
        long step = strtol(p, &end, 10);
        if (end == p || step < 0 || (*end && *end != ','))
            die_input("--lr-at: expected comma-separated steps >= 0, got '%s'", list);
        printf("  lr at step %ld: %.17g\n", step, schedule_lr(&s, step));
        p = *end ? end + 1 : end;
    } while (*p);
}

// The memory of the commands that load this model (model/limits.h: what each allocates)
// against this machine: eval at T tokens (and at 512), generate with a T-position KV
// cache, each with fp32 weights and with bf16 ones (as AI2's shards store them and eval
// and generate keep them, model/stored.h), import-hf / export-hf, training at 1 x T (fp32 and bf16, train's own check).
static void print_load_memory(const ModelConfig *c, int T) {
    const char *src;
    const double avail = model_memory_available(&src), phys = model_memory_limit();
    const double wbf = model_bf16_weights_bytes(c), wf = model_weights_bytes(c);
    char a[32], b[32];
    printf("memory of the commands that load it, against this machine: %s available (%s), %s physical:\n",
           model_fmt_bytes(avail, a, sizeof a), src, model_fmt_bytes(phys, b, sizeof b));
    struct { const char *what; double need, have; } row[] = {
        {"eval, fp32 weights + activations 1 x T", model_eval_bytes(c, 1, T, wf), avail},
        {"generate, fp32 weights + KV cache of T", model_generate_bytes(c, 1, 64, T, 1, wf), avail},
        {"eval, bf16 weights + activations 1 x T", model_eval_bytes(c, 1, T, wbf), avail},
        {"generate, bf16 weights + KV cache of T", model_generate_bytes(c, 1, 64, T, 1, wbf), avail},
        {"import-hf / export-hf (largest tensor, fp32)", model_largest_tensor_bytes(c), avail},
        {"train fp32, 1 x T (params, grads, Adam)", model_train_bytes(c, 1, T, PRECISION_FP32), phys},
        {"train bf16, 1 x T", model_train_bytes(c, 1, T, PRECISION_BF16), phys},
    };
    printf("  (T = %d tokens%s; eval's activations grow with its longest document, %s more per 512 tokens)\n", T,
           T == EVAL_DEFAULT_SEQ_LEN ? ": eval's train.seq_len without a recipe" : "",
           model_fmt_bytes(model_eval_bytes(c, 1, 1024, 0) - model_eval_bytes(c, 1, 512, 0), a, sizeof a));
    for (size_t i = 0; i < sizeof row / sizeof row[0]; i++)
        printf("  %-46s %12s %15.0f bytes  %s\n", row[i].what, model_fmt_bytes(row[i].need, a, sizeof a), row[i].need,
               row[i].need <= row[i].have ? "fits" : "does not fit (refused with exit 2)");
}

// `olmo info CKPT`: an HF directory, a run, a checkpoint or a model file (io/hf.h's
// model_source_resolve): its shape, parameters and the memory of what loads it.
static int info_model_source(const char *what) {
    ModelSource s;
    char err[4096];
    if (model_source_resolve(what, &s, err, sizeof err) != 0) die_input("info: %s", err);
    const ModelConfig *c = &s.cfg;
    printf("%s %s (shape from %s)\n", s.is_hf ? "Hugging Face directory" : "checkpoint", s.path, s.config_from);
    printf("model: d_model %d, layers %d, heads %d / kv heads %d, head_dim %d, mlp %d, vocab %d (padded %d), window %d, "
           "full every %d, RoPE theta %g%s, length %d\n", c->d_model, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
           c->mlp_hidden, c->vocab_size, c->padded_vocab, c->sliding_window, c->full_attn_every, c->rope_theta,
           c->rope_scaling.type == ROPE_SCALING_YARN ? ", YaRN" : "", s.seq_len);
    size_t n = model_num_params(c), emb = model_num_params_embedding(c);
    printf("parameters: %zu total (padded vocab), %zu non-embedding, %zu embedding\n", n, n - emb, emb);
    const int T = s.seq_len > 0 && s.seq_len < EVAL_DEFAULT_SEQ_LEN ? s.seq_len : EVAL_DEFAULT_SEQ_LEN;
    print_load_memory(c, T);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: olmo info CKPT\n"
            "       olmo info PRESET|RECIPE.yml [key=value ...] [--world W] [--backend cpu|cuda]\n"
            "  key=value: recipe keys over the recipe, or over a preset's defaults (model.*,\n"
            "  train.seq_len, train.micro_batch, ...).\n"
            "                 [--context-parallel C] [--shard optim|grads|full] [--shard-group G] [--lr-at S,...]\n"
            "  CKPT (an HF directory, a run, a checkpoint, a model file): its shape, parameters and the\n"
            "  memory of eval, generate, import-hf/export-hf and training against this machine's memory\n"
            "  (MemAvailable; OLMO_MEM_LIMIT=BYTES overrides), each marked fits or does not fit.\n"
            "  Prints parameter counts (total, non-embedding), FLOPs/token (the sliding-window-aware count\n"
            "  MFU uses and the OLMo-core v2.3 count, docs/performance.md) at the recipe's sequence length, and the memory\n"
            "  one rank needs for fp32 training and for bf16 mixed precision at world size W (ZeRO-1:\n"
            "  Adam state sharded over W). --backend cuda: the memory per GPU of train.backend=cuda\n"
            "  (bf16; with W > 1 NCCL ZeRO-1: fp32 master and Adam sharded), with and without\n"
            "  activation recompute (train.recompute=on), exactly what the CUDA allocator requests.\n"
            "  --context-parallel C (default: the recipe's dist.context_parallel): the plan of one rank\n"
            "  holding T / C tokens of every instance (docs/distributed.md), K/V gathered\n"
            "  dist.cp_head_stride KV heads at a time.\n"
            "  --shard grads|full [--shard-group G]: the per-GPU plan of dist.shard: grads (ZeRO-2: Adam\n"
            "  and gradient sharded) or full (ZeRO-3; HSDP over groups of G ranks): also the master,\n"
            "  two gathered parts of weights.\n"
            "  CPU: also the per-core GEMM peaks MFU is measured against, per instruction set this CPU\n"
            "  has (fp32 sgemm; bf16 amx, avx512bf16, emulated), as cached by runs and `olmo bench`.\n"
            "  --lr-at S1,S2,...: a recipe's learning rate at those optimizer steps (step 1 = the first\n"
            "  update), %%.17g, by the schedule the run trains with (schedule.*, its length t_max).\n");
}

int cmd_info(int argc, char **argv) {
    if (argc < 2 || cli_wants_help(argc, argv)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int world = 1, C = 0, group = 0;
    const char *backend = "cpu", *lr_at = NULL, *shard = "optim";
    const char *what = argv[1];
    char **ov = xcalloc((size_t)argc, sizeof(char *));
    int nov = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--world") && i + 1 < argc) world = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--lr-at") && i + 1 < argc) lr_at = argv[++i];
        else if (!strcmp(argv[i], "--context-parallel") && i + 1 < argc) C = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--shard") && i + 1 < argc) shard = argv[++i];
        else if (!strcmp(argv[i], "--shard-group") && i + 1 < argc) group = atoi(argv[++i]);
        else ov[nov++] = argv[i];
    }
    if (world < 1) die_input("--world must be >= 1");
    if (strcmp(shard, "optim") && strcmp(shard, "grads") && strcmp(shard, "full"))
        die_input("--shard: expected optim, grads or full, got '%s'", shard);
    if (group < 0 || (group > 0 && world % group))
        die_input("--shard-group %d does not divide --world %d (dist.shard_group: groups of consecutive ranks)", group,
                  world);
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) die_input("--backend: expected cpu or cuda, got '%s'", backend);
    // Not a preset and not a YAML recipe: a checkpoint (an HF directory, a run, a checkpoint, a model file).
    const size_t wl = strlen(what);
    struct stat ws;
    if (!model_preset_find(what) && stat(what, &ws) == 0 &&
        (S_ISDIR(ws.st_mode) || !(wl > 4 && (!strcmp(what + wl - 4, ".yml") || (wl > 5 && !strcmp(what + wl - 5, ".yaml")))))) {
        if (nov || lr_at) die_input("info: %s is a checkpoint: key=value and --lr-at need a recipe", what);
        free(ov);
        return info_model_source(what);
    }
    Recipe r;
    recipe_defaults(&r);
    const ModelPreset *pre = model_preset_find(what);
    ModelConfig cfg;
    int seq_len, micro;
    if (pre && lr_at) die_input("--lr-at needs a recipe (its schedule), not the preset '%s'", what);
    if (pre) {
        cfg = pre->cfg;
        model_config_derive(&cfg);
        seq_len = !strcmp(what, "olmo3-7b") ? 8192 : 1024;
        micro = 1;
        printf("%s: %s\n", pre->name, pre->about);
        if (nov) {   // key=value on a preset: a recipe of defaults around it (model.*, train.seq_len, ...)
            // The keys a recipe must have that a preset's plan does not use, the user's after them.
            char **all = xcalloc((size_t)nov + 3, sizeof(char *));
            static char *fixed[] = {"data.paths=unused-by-olmo-info", "train.max_steps=1", "schedule.name=constant"};
            memcpy(all, fixed, sizeof fixed);
            memcpy(all + 3, ov, sizeof(char *) * (size_t)nov);
            recipe_load_for_model(&r, &cfg, seq_len, what, nov + 3, all);
            free(all);
            cfg = recipe_model_config(&r);
            seq_len = r.seq_len;
            micro = r.micro_batch;
            printf("with");
            for (int i = 0; i < nov; i++) printf(" %s", ov[i]);
            printf("\n");
        }
    } else {
        recipe_load(&r, what, nov, ov);
        cfg = recipe_model_config(&r);
        seq_len = r.seq_len;
        micro = r.micro_batch;
        printf("recipe %s (model %s)\n", what, r.model_preset[0] ? r.model_preset : "explicit dims");
        if (lr_at) print_lr_at(&r, lr_at);
    }
    if (C == 0) C = pre ? 1 : r.context_parallel;
    const int head_stride = r.cp_head_stride;
    if (C < 1 || world % C || seq_len % (2 * C) || cfg.n_kv_heads % head_stride)
        die_input("--context-parallel %d: needs C >= 1 dividing --world %d and train.seq_len %d divisible by 2C "
                  "(dist.cp_head_stride %d must divide n_kv_heads %d)", C, world, seq_len, head_stride,
                  cfg.n_kv_heads);
    size_t n = model_num_params(&cfg), emb = model_num_params_embedding(&cfg);
    size_t n_real_vocab = n - 2 * (size_t)(cfg.padded_vocab - cfg.vocab_size) * cfg.d_model;
    printf("model: d_model %d, layers %d, heads %d / kv heads %d, head_dim %d, mlp %d, vocab %d (padded %d), window %d, full every %d\n",
           cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.mlp_hidden, cfg.vocab_size,
           cfg.padded_vocab, cfg.sliding_window, cfg.full_attn_every);
    printf("parameters: %zu total (padded vocab), %zu with vocab %d\n", n, n_real_vocab, cfg.vocab_size);
    printf("            %zu non-embedding (LM head included), %zu embedding\n", n - emb, emb);
    double f1 = model_flops_per_token_olmo_core(&cfg, seq_len), f2 = model_flops_per_token_window(&cfg, seq_len);
    printf("FLOPs/token at seq_len %d (training, fwd+bwd):\n", seq_len);
    printf("  sliding-window-aware count (min(window, T)):   %.4g GFLOP   (MFU's count; current OLMo-core's)\n", f2 / 1e9);
    printf("  OLMo-core v2.3 count (6N + 12 L H Dh T):        %.4g GFLOP   (metrics: mfu_olmo_core_v2_3)\n", f1 / 1e9);
    double P = (double)n;
    // Context parallelism: the activations of T / C tokens plus its gather buffers (graph.h).
    const GraphCP cp = {C, 0, seq_len, head_stride, NULL};
    double act32 = (double)model_activation_bytes(&cfg, micro, seq_len / C, 0) +
                   (double)graph_plan_bytes_cp(&cfg, micro, seq_len, DT_F32, 0, &cp) -
                   (double)graph_plan_bytes(&cfg, micro, seq_len / C, DT_F32, 0);
    // The deterministic gradient tree (optim.h GradAcc) holds up to floor(log2(k)) + 1
    // full gradient buffers for k micro-batches per rank.
    int k = pre ? 1 : (r.global_batch / r.micro_batch + world / C - 1) / (world / C);   // the largest block
    if (k < 1) k = 1;
    int tree = 1;
    while ((1 << tree) <= k) tree++;
    printf("memory per rank at world size %d, micro-batch %d x %d tokens%s:\n", world, micro, seq_len,
           C > 1 ? " (context parallel: T / C tokens of each on this rank)" : "");
    printf(" fp32 (CPU backend): params 4 + gradient tree 4 x %d (%d micro-batch%s per rank) + Adam 8/W bytes per parameter\n",
           tree, k, k > 1 ? "es" : "");
    print_bytes("params + gradient tree", P * 4 * (1 + tree));
    print_bytes("Adam m, v (ZeRO-1 shard)", P * 8 / world);
    print_bytes("activations (saved + scratch)", act32);
    print_bytes("total", P * 4 * (1 + tree) + P * 8 / world + act32);
    printf(" bf16 mixed precision (OLMo 3): bf16 params 2 + fp32 grads 4 + fp32 master/m/v 12/W per parameter\n");
    print_bytes("bf16 params + fp32 grads", P * 6);
    print_bytes("fp32 master + Adam (ZeRO-1 shard)", P * 12 / world);
    print_bytes("activations (bf16, about half of fp32)", act32 / 2);
    print_bytes("total", P * 6 + P * 12 / world + act32 / 2);
    // The host side of a checkpoint (src/train/ckpt_save.c): at the step boundary each rank
    // copies its state (every rank its shard at W > 1, ckpt_shard.h; one rank the whole) to
    // host memory, written from there in the background with ckpt.async; on a GPU this is
    // host RAM beside the device state.
    {
        const int G = group ? group : world;
        size_t *b = xmalloc(sizeof(size_t) * (size_t)(G + 1));
        dist_shard_bounds(n, G, b);
        printf(" checkpoints: the host snapshot of %s state (weights, Adam m, v), written in the background (ckpt.async)\n",
               G > 1 ? "each rank's shard of the" : "the whole");
        print_bytes(G > 1 ? "host RAM, checkpoint snapshot (shard, 12 B/param)" : "host RAM, checkpoint snapshot (12 B/param)",
                    (double)ckpt_shard_snapshot_bytes(b[0], b[1]));
        free(b);
    }
    print_load_memory(&cfg, seq_len);
    if (!strcmp(backend, "cuda")) print_cuda(&cfg, world, group, !strcmp(shard, "full") ? 2 : !strcmp(shard, "grads"), micro, seq_len, C, head_stride);
    else print_peaks();
    free(ov);
    return 0;
}
