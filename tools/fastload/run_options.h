/* run_options.h — the command lines of `fastload bench` and `fastload digest` (their option
 * tables, fl_cli_table.h): parsed into an fl_loader_options plus the run length. */
#ifndef FASTLOAD_CLI_RUN_OPTIONS_H
#define FASTLOAD_CLI_RUN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "fastload.h"
#include "fl_cli_table.h"

typedef struct run_options {
    const char *path;         /* dataset directory (DST of packdata) */
    fl_loader_options opt;    /* what the loader is created with */
    uint64_t epochs;          /* epochs to run (default 1) */
    uint64_t max_batches;     /* stop after this many batches (0 = no limit) */
    int json;                 /* --json: one JSON object on stdout */
    int quiet;                /* --quiet: no per-epoch lines, no library notes */
    const char *augment_text; /* as given, for reports ("rrc,flip") */
    int memcpy_mode;          /* bench --memcpy: measure single-thread memcpy instead */
    uint64_t memcpy_bytes;    /* buffer size for --memcpy (default 256 MiB) */
} run_options;

/* Which subcommand is parsing: options valid for it differ slightly. */
typedef enum run_kind { RUN_BENCH = 0, RUN_DIGEST = 1 } run_kind;

/* The two commands (their option tables and run functions), dispatched by main.c. */
extern const fl_cli_cmd fastload_bench_cmd, fastload_digest_cmd;

/* Parse argv (argv[0] is the subcommand name) with that command's table. Returns 0 to run, 1
 * when --help/--version was printed (exit 0), 2 on a usage error (one line on stderr). */
int run_options_parse(const fl_cli_tool *tool, run_kind kind, int argc, char **argv,
                      run_options *ro);

/* Text names used in reports. */
const char *run_order_name(fl_order o);
const char *run_io_name(fl_io_mode m);

/* Tell L where the run ends (fl_loader_set_max_batches): --epochs whole epochs of
 * batches_per_epoch from the start (or --batches, when fewer), so that its workers read and decode
 * nothing past the last batch the run reads (a deep ring would fill with the next epoch, work the
 * run's figures would count). A run starting mid-epoch (--start-batch) keeps no end. */
void run_bound_loader(fl_loader *L, const run_options *ro, uint64_t batches_per_epoch);

/* Library log sink that prints "fastload: note: ..." on stderr (user = run_options*). */
void run_log_stderr(void *user, int level, const char *msg);

#endif
