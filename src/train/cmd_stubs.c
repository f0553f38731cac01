// cmd_stubs.c: temporary entry points, replaced as each subcommand lands.
#include <stdio.h>
#include "cli.h"
