// cli.h: forwards to cli/cli.h, the subcommands' header, for src/model/generate.c (its
// `#include "cli.h"`). Delete this file when cmd_generate moves to src/cli/cmd_generate.c.
#include "cli/cli.h"
