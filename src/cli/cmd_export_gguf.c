// cmd_export_gguf.c: `olmo export-gguf CKPT OUT.gguf [--type f32|f16|bf16|q8_0] [--max-pos N]
// [--tokenizer FILE]`: the options; src/io/gguf_export.c writes the GGUF file llama.cpp,
// ollama and LM Studio load (docs/gguf.md).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/gguf_export.h"
#include "io/hf.h"
#include "util/common.h"

static void export_gguf_usage(FILE *f) {
    fprintf(f,
            "usage: olmo export-gguf CKPT OUT.gguf [--type f32|f16|bf16|q8_0] [--max-pos N] [--tokenizer FILE]\n"
            "\n"
            "Write a GGUF v3 file that llama.cpp (and ollama, LM Studio) loads as an OLMo 3 model\n"
            "(architecture olmo2 with its sliding-window pattern and YaRN; docs/gguf.md): the\n"
            "weights with their padded vocab rows, the dolma2 tokenizer (pre-tokenizer dbrx, no BOS).\n"
            "Streams tensor by tensor (memory: the largest tensor in fp32), writes OUT.gguf.tmp.PID\n"
            "and renames it, with a progress bar on stderr. What llama.cpp cannot represent is refused\n"
            "(exit 2) before anything is written.\n"
            "CKPT: a run directory, a checkpoint directory, a model.safetensors whose shape is known,\n"
            "or an HF directory (as export-hf takes it).\n"
            "\n"
            "  --type T          matrices in f32 (default), f16, bf16 or q8_0; norms always f32\n"
            "  --max-pos N       context_length (default: the run's train.seq_len, else %d; with YaRN\n"
            "                    factor x original context, which N must equal)\n"
            "  --tokenizer FILE  tokenizer.json (default: env OLMO_TOKENIZER, else dolma2)\n",
            HF_DEFAULT_MAX_POS);
}

int cmd_export_gguf(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { export_gguf_usage(stdout); return 0; }
    const char *ckpt = NULL, *out = NULL, *tok_path = NULL;
    int max_pos = 0;
    GgmlType type = GGML_F32;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            const char *t = argv[++i];
            if (!strcmp(t, "f32")) type = GGML_F32;
            else if (!strcmp(t, "f16")) type = GGML_F16;
            else if (!strcmp(t, "bf16")) type = GGML_BF16;
            else if (!strcmp(t, "q8_0")) type = GGML_Q8_0;
            else die_input("export-gguf: --type must be f32, f16, bf16 or q8_0, got '%s'", t);
        } else if (!strcmp(argv[i], "--max-pos") && i + 1 < argc) {
            char *e;
            long v = strtol(argv[++i], &e, 10);
            if (*e || v <= 0 || v > INT_MAX) die_input("export-gguf: --max-pos must be a positive integer, got '%s'", argv[i]);
            max_pos = (int)v;
        } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_path = argv[++i];
        else if (argv[i][0] == '-') { export_gguf_usage(stderr); die_input("export-gguf: unknown option '%s'", argv[i]); }
        else if (!ckpt) ckpt = argv[i];
        else if (!out) out = argv[i];
        else die_input("export-gguf: unexpected argument '%s'", argv[i]);
    }
    if (!ckpt || !out) { export_gguf_usage(stderr); return 2; }
    gguf_export(ckpt, out, type, tok_path, max_pos);
    return 0;
}
