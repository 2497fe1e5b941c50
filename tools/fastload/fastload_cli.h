/* fastload_cli.h — the subcommands of the `fastload` tool and the small helpers they share. */
#ifndef FASTLOAD_CLI_H
#define FASTLOAD_CLI_H

#include <stdio.h>

int cmd_bench(int argc, char **argv);
int cmd_digest(int argc, char **argv);

/* Resident / peak resident set size of this process in MiB (0 when /proc is unreadable). */
void cli_rss_mib(double *rss, double *peak);

#endif
