/* main.c — the `packdata` command: its sub-commands (pack / info / verify / extract) as a table,
 * dispatched by the command-line layer (fl_cli_table.h), which also writes `packdata --help`. */
#include <stdio.h>

#include "fl_cli.h"
#include "fl_cli_table.h"
#include "packdata.h"

static void version(FILE *out) { fl_cli_print_version(out, PD_TOOL); }

static const fl_cli_cmd *const commands[] = {&pd_pack_cmd, &pd_info_cmd, &pd_verify_cmd,
                                             &pd_extract_cmd, NULL};

const fl_cli_tool pd_tool = {
    .name = PD_TOOL,
    .synopsis = "usage: packdata COMMAND [args]\n"
                "\n"
                "Pack images + labels into fastload datasets and inspect them.\n",
    .cmds = commands,
    .epilog = "Exit status: 0 ok, 1 bad input or data error, 2 usage error.\n",
    .version = version,
};

int main(int argc, char **argv) { return fl_cli_dispatch(&pd_tool, argc, argv); }
