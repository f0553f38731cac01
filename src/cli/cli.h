// cli.h: the subcommands of the `olmo` binary. Each returns the process exit status
// (0 ok, 2 bad input, 1 internal failure) and handles its own --help. Each lives in
// src/cli/cmd_<name>.c (argument parsing, the command's own output), over the library
// the other folders of src/ export; main.c dispatches to them. cmd_generate is still in
// src/model/generate.c.
#ifndef OLMO_CLI_H
#define OLMO_CLI_H

int cmd_train(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_data_verify(int argc, char **argv);   // `olmo data verify` (argv[0] = "verify")
int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_export_hf(int argc, char **argv);
int cmd_export_gguf(int argc, char **argv);
int cmd_import_hf(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);

// True when argv holds -h or --help.
int cli_wants_help(int argc, char **argv);

#endif
