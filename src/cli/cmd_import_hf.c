// cmd_import_hf.c: `olmo import-hf HF_DIR OUT_DIR`: the arguments; src/io/hf.c (hf_import)
// reads the Hugging Face Olmo3 directory and writes the OLMo checkpoint + recipe.yml.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "io/hf.h"

static void import_usage(FILE *f) {
    fprintf(f,
            "usage: olmo import-hf HF_DIR OUT_DIR\n"
            "\n"
            "Read a Hugging Face Olmo3 directory (config.json + model.safetensors, or shards with\n"
            "model.safetensors.index.json; F32/BF16/F16) and write OUT_DIR/model.safetensors in\n"
            "the OLMo layout (embed_tokens and lm_head padded to a multiple of 128 rows with zero\n"
            "rows) and OUT_DIR/recipe.yml with the model dims (for olmo eval / olmo generate, or to\n"
            "copy into a training recipe). docs/hf.md. Bad input exits 2.\n");
}

int cmd_import_hf(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) { import_usage(stdout); return 0; }
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') { import_usage(stderr); return 2; }
    hf_import(argv[1], argv[2]);
    return 0;
}
