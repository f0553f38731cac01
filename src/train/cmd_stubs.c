// cmd_stubs.c: temporary entry points, replaced as each subcommand lands.
#include <stdio.h>
#include "cli.h"
int cmd_bench(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "olmo bench: not built yet\n"); return 1; }
