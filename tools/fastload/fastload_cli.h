/* fastload_cli.h — the subcommands of the `fastload` tool and the small helpers they share. */
#ifndef FASTLOAD_CLI_H
#define FASTLOAD_CLI_H

#include <stdio.h>

#include "fl_cli_table.h"

/* The commands: argv[0] is the command name; returns the exit status. */
int cmd_bench(const fl_cli_tool *tool, int argc, char **argv);
int cmd_digest(const fl_cli_tool *tool, int argc, char **argv);

/* Resident / peak resident set size of this process in MiB (0 when /proc is unreadable). */
void cli_rss_mib(double *rss, double *peak);

#endif
