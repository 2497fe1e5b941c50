/* main.c — the `packdata` command: dispatches to pack / info / verify / extract. */
#include <stdio.h>
#include <string.h>

#include "fl_cli.h"
#include "packdata.h"

static const char help[] =
"usage: packdata COMMAND [args]\n"
"\n"
"Pack images + labels into fastload datasets and inspect them.\n"
"\n"
"commands:\n"
"  pack SRC DST [options]     pack an ImageFolder, list file, CSV, IDX or CIFAR source\n"
"  info DST [--json]          records, classes, shards, bytes, schema, options of a dataset\n"
"  verify DST [--decode]      check every record's checksum (and that each image decodes)\n"
"  extract DST INDEX [-o F]   write one record's payload (original bytes, or raw pixels as PNG)\n"
"\n"
"Run 'packdata COMMAND --help' for each command's options.\n"
"Exit status: 0 ok, 1 bad input or data error, 2 usage error.\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(help, stderr);
        return FL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (fl_cli_is_help(cmd) || !strcmp(cmd, "help")) {
        fputs(help, stdout);
        return FL_EXIT_OK;
    }
    if (fl_cli_is_version(cmd)) {
        fl_cli_print_version(stdout, PD_TOOL);
        return FL_EXIT_OK;
    }
    if (!strcmp(cmd, "pack")) return pd_cmd_pack(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return pd_cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return pd_cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "extract")) return pd_cmd_extract(argc - 1, argv + 1);
    fl_cli_error(PD_TOOL, "unknown command '%s' (commands: pack, info, verify, extract; see packdata --help)", cmd);
    return FL_EXIT_USAGE;
}
