/* main.c — the `fastload` command: `bench` measures the loader, `digest` fingerprints its batch
 * stream; both are thin front ends over libfastload (loader/fastload.h), dispatched from a table
 * by the command-line layer (fl_cli_table.h), which also writes `fastload --help`. */
#include <stdio.h>

#include "fastload.h"
#include "fastload_cli.h"
#include "fl_cli_table.h"
#include "run_options.h"

static void version(FILE *out)
{
    fprintf(out, "fastload %s (libfastload %s)\n", FASTLOAD_VERSION, fl_version());
}

static const fl_cli_cmd *const commands[] = {&fastload_bench_cmd, &fastload_digest_cmd, NULL};

static const fl_cli_tool tool = {
    .name = "fastload",
    .synopsis = "usage: fastload COMMAND [options]\n",
    .cmds = commands,
    .epilog = "Datasets are made by packdata.\n",
    .version = version,
};

int main(int argc, char **argv) { return fl_cli_dispatch(&tool, argc, argv); }
