// main.c: the `olmo` binary: dispatches to one subcommand per concern.
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "train/backend.h"
#include "util/blas_core.h"
#include "util/common.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} Command;

static const Command COMMANDS[] = {
    {"train", cmd_train, "train a model from a YAML recipe (key=value overrides)"},
    {"info", cmd_info, "parameter counts, FLOPs/token and memory of a preset, recipe or checkpoint"},
    {"tokenize", cmd_tokenize, "text on stdin to token ids (or --decode ids to text)"},
    {"prepare", cmd_prepare, "turn JSONL/text corpora into OLMo-core token files"},
    {"data", cmd_data, "inspect a recipe's dataset (e.g. `olmo data order`)"},
    {"bench", cmd_bench, "training throughput and MFU, side by side with PyTorch"},
    {"eval", cmd_eval, "held-out perplexity sets and multiple-choice tasks of a checkpoint"},
    {"export-hf", cmd_export_hf, "write a Hugging Face Olmo3 directory (config.json, model.safetensors, tokenizer)"},
    {"export-gguf", cmd_export_gguf, "write a GGUF file for llama.cpp / ollama / LM Studio (f32, f16, bf16, q8_0)"},
    {"import-hf", cmd_import_hf, "read a Hugging Face Olmo3 directory into an OLMo checkpoint + recipe.yml"},
    {"generate", cmd_generate, "sample text from a checkpoint (KV cache; greedy or top-p)"},
    {"compare", cmd_compare, "is run B a reproduction of run A? held-out gaps at landmarks, token KL"},
    {"ckpt", cmd_ckpt, "check a checkpoint's (or a whole run's) content checksums: `olmo ckpt verify PATH`"},
    {"report", cmd_report, "one self-contained HTML report (SVG charts) of one or more runs"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

int cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: olmo <command> [args]   (olmo <command> --help for details; olmo --version)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-11s %s\n", COMMANDS[i].name, COMMANDS[i].help);
}

#ifndef OLMO_GIT_REV
#define OLMO_GIT_REV "unknown"
#endif

// `olmo --version`: the commit it was built from (Makefile: git describe) and what it was
// built with.
static void version(void) {
    printf("olmo.c %s (", OLMO_GIT_REV);
#ifdef OLMO_MPI
    printf("MPI");
#else
    printf("no MPI");
#endif
    printf(backend_built("cuda") ? ", CUDA backend" : ", no CUDA backend");
    printf(")\n");
}

// An unknown command: the nearest one when it is a typo (at most 2 edits), else the list.
static int unknown_command(const char *name) {
    int best = -1, best_d = 3;
    for (size_t i = 0; i < NCOMMANDS; i++) {
        int d = edit_distance(name, COMMANDS[i].name);
        if (d < best_d) best_d = d, best = (int)i;
    }
    if (best >= 0) {
        fprintf(stderr, "olmo: error: unknown command '%s' (did you mean '%s'?)\n", name, COMMANDS[best].name);
        return 2;
    }
    fprintf(stderr, "olmo: error: unknown command '%s'\n", name);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    blas_core_init(argv);
    // Freed memory stays in the heap for the next call: the kernels' per-call scratch
    // (attention's per-thread blocks and packed operands, a few MiB a call) would otherwise
    // be mapped and unmapped on every call, and each fresh page faulted in and zeroed by the
    // kernel (~10% of bf16 attention's time, docs/performance.md).
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        version();
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    return unknown_command(argv[1]);
}
