/* fl_cli.h — the value side of the command-line layer of the fastload front ends (packdata,
 * fastload, trainfast): strict parsing of numbers and sizes ("256M"), the one-line option errors,
 * version and error printing. The option tables, getopt_long and the generated --help are in
 * fl_cli_table.h. Human-readable units and the progress bar are in fl_progress.h (included
 * here); the JSON writer is in fl_json.h.
 *
 * These helpers may print (they are for front ends); none of them exits the process. */
#ifndef FL_CLI_H
#define FL_CLI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fl_json.h"     /* the JSON writer (common/) */
#include "fl_progress.h" /* human-readable sizes, rates, durations; the progress bar (common/) */

#ifdef __cplusplus
extern "C" {
#endif

/* Exit statuses every fastload tool uses. */
enum { FL_EXIT_OK = 0, FL_EXIT_DATA = 1, FL_EXIT_USAGE = 2 };

/* Version string of the project ("0.1.0"), set by the build. */
const char *fl_cli_version(void);

/* Print "<tool> (fastload) <version>" and a one-line build description to `out`. */
void fl_cli_print_version(FILE *out, const char *tool);

/* Print "<tool>: error: <message>\n" to stderr (printf-style). */
void fl_cli_error(const char *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "<tool>: warning: <message>\n" to stderr. */
void fl_cli_warn(const char *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Finish an output stream a tool wrote its result to (stdout, a --report FILE): flush it, check
 * its error flag (a write that failed earlier, e.g. ENOSPC on a full disk or /dev/full) and close
 * it. `what` names it in the message ("stdout", "--report out.tsv"). Returns 0 when every byte
 * was written (stdout is flushed and checked, not closed); otherwise prints "<tool>: error: <what>:
 * cannot write: <reason>" and returns FL_EXIT_DATA. fl_cli_dispatch calls it for stdout after every
 * command, so a result that did not reach its file is never an exit 0. */
int fl_cli_close_output(const char *tool, FILE *f, const char *what);

/* ---- options and their values ------------------------------------------------------------
 * The option tables (fl_cli_table.h) check every value with these, so that all tools treat a
 * missing, empty or malformed value the same way: exit status 2 (FL_EXIT_USAGE) after ONE line
 * on stderr that starts with the option's name:
 *     "<tool>: error: --quality: expected an integer from 1 to 100 (got 'nan')"
 * An option given twice takes its last value; every value given is checked. */

/* An argument as a message quotes it: itself, or its first 40 characters and its length
 * ("xxxx... (10000 characters)"). Writes into buf (96 bytes suffice) and returns buf. */
const char *fl_cli_quote(const char *arg, char *buf, size_t cap);

/* Print "<tool>: error: <opt>: <reason> (got '<value>')" (printf-style reason; a long value is
 * shortened to its first 40 characters; value NULL: no "(got ...)"). */
void fl_cli_opt_error(const char *tool, const char *opt, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parse a decimal unsigned integer (the whole string, digits only: no sign, no space, no
 * trailing junk, no overflow) within [min, max]. Returns 0 on success, -1 otherwise (*out
 * untouched). */
int fl_cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Same for a signed integer (an optional '-' then digits). */
int fl_cli_parse_int(const char *s, long min, long max, long *out);
/* A finite decimal number ("0.1", "5e-4", "-2"; no nan/inf, no hex, no overflow to infinity,
 * no trailing junk) within [min, max], or (min, max] when `open_min` is non-zero. */
int fl_cli_parse_double(const char *s, double min, double max, int open_min, double *out);

/* Parse a size: a number (may have a fraction) with an optional binary suffix K, M, G, T
 * (also KB/KiB, MB/MiB, ...; case-insensitive; powers of 1024) or B. "256M" → 268435456,
 * "1.5G", "4096". Returns 0 on success, -1 on a malformed or overflowing string. */
int fl_cli_parse_size(const char *s, uint64_t *out);

/* The value of option `opt` as a number within a range: on failure print the one-line error
 * naming `opt` and the accepted range, and return -1; 0 on success. */
int fl_cli_opt_u64(const char *tool, const char *opt, const char *v, uint64_t min, uint64_t max,
                   uint64_t *out);
int fl_cli_opt_u32(const char *tool, const char *opt, const char *v, uint32_t min, uint32_t max,
                   uint32_t *out);
int fl_cli_opt_int(const char *tool, const char *opt, const char *v, long min, long max, long *out);
int fl_cli_opt_double(const char *tool, const char *opt, const char *v, double min, double max,
                      int open_min, double *out);
int fl_cli_opt_float(const char *tool, const char *opt, const char *v, double min, double max,
                     int open_min, float *out);
/* A size ("256M") within [min, max] bytes. */
int fl_cli_opt_size(const char *tool, const char *opt, const char *v, uint64_t min, uint64_t max,
                    uint64_t *out);

/* Install handler (sigaction with sa_flags `flags`, e.g. SA_RESETHAND) for each of the n signals
 * in sigs that the process does not ignore: a signal ignored when the tool starts (nohup ignores
 * SIGHUP, a script's background job SIGINT) stays ignored, as the caller asked. */
void fl_cli_catch_signals(const int *sigs, size_t n, void (*handler)(int), int flags);

#ifdef __cplusplus
}
#endif
#endif
