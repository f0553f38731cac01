// cmd_export_hf.c: `olmo export-hf CKPT OUT_DIR [--max-pos N] [--tokenizer FILE]`: the
// options; src/io/hf.c (hf_export) writes the Hugging Face Olmo3 directory (docs/hf.md).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/hf.h"
#include "util/common.h"

static void export_usage(FILE *f) {
    fprintf(f,
            "usage: olmo export-hf CKPT OUT_DIR [--max-pos N] [--tokenizer FILE]\n"
            "\n"
            "Write a Hugging Face Olmo3ForCausalLM directory (docs/hf.md): config.json,\n"
            "model.safetensors (F32, HF names, embed_tokens and lm_head with their padded rows\n"
            "as trained: vocab_size is the padded count, as in AI2's configs), tokenizer.json\n"
            "(a copy of the dolma2 tokenizer), tokenizer_config.json, generation_config.json.\n"
            "CKPT: a run directory, a checkpoint directory, or a model.safetensors file whose\n"
            "shape is known (olmo_config metadata, train_state.json or a recipe.yml near it).\n"
            "\n"
            "  --max-pos N       max_position_embeddings (default: the run's train.seq_len, else %d)\n"
            "  --tokenizer FILE  tokenizer.json to copy (default: env OLMO_TOKENIZER, else dolma2)\n",
            HF_DEFAULT_MAX_POS);
}

int cmd_export_hf(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { export_usage(stdout); return 0; }
    const char *ckpt = NULL, *out = NULL, *tok_path = NULL;
    int max_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-pos") && i + 1 < argc) {
            char *e;
            long v = strtol(argv[++i], &e, 10);
            if (*e || v <= 0 || v > INT_MAX) die_input("export-hf: --max-pos must be a positive integer, got '%s'", argv[i]);
            max_pos = (int)v;
        } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (argv[i][0] == '-') { export_usage(stderr); die_input("export-hf: unknown option '%s'", argv[i]); }
        else if (!ckpt) ckpt = argv[i];
        else if (!out) out = argv[i];
        else die_input("export-hf: unexpected argument '%s'", argv[i]);
    }
    if (!ckpt || !out) { export_usage(stderr); return 2; }

    hf_export(ckpt, out, max_pos, tok_path);
    return 0;
}
