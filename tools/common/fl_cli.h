/* fl_cli.h — small helpers shared by the fastload command-line front ends (packdata, the
 * `fastload` bench tool, trainfast): option parsing, human-readable sizes/rates/durations,
 * size strings ("256M"), a progress bar with rate and ETA, and a tiny JSON writer.
 *
 * These helpers may print (they are for front ends); none of them exits the process. */
#ifndef FL_CLI_H
#define FL_CLI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* Non-zero when `arg` is "-h" or "--help". */
int fl_cli_is_help(const char *arg);
/* Non-zero when `arg` is "-V" or "--version". */
int fl_cli_is_version(const char *arg);

/* ---- options and their values ------------------------------------------------------------
 * Every front end parses its options with these, so that all tools treat a missing, empty or
 * malformed value the same way: exit status 2 (FL_EXIT_USAGE) after ONE line on stderr that
 * starts with the option's name:
 *     "<tool>: error: --quality: expected an integer from 1 to 100 (got 'nan')"
 * An option given twice takes its last value; every value given is checked. */

/* Match an option that takes a value, accepting both "--name VALUE" and "--name=VALUE".
 * argv[*i] is the current argument. On a match returns 1, stores the value in *value and
 * advances *i past a separate value argument. Returns 0 when argv[*i] is another option, and -1
 * after printing the error when the value is missing (the option is last on the line, or the
 * next argument is another long option "--x": write --name=--x if that really is the value) or
 * empty. `tool` is used only for that message and may be NULL. */
int fl_cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value,
                     const char *tool);

/* Match a flag (an option without a value). Returns 1 when `arg` is `name`, 0 when it is
 * something else, -1 after printing "<name>: takes no value" when it is "name=...". */
int fl_cli_flag(const char *arg, const char *name, const char *tool);

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

/* Format a byte count: "512 B", "1.5 KiB", "23.4 MiB", "118 MiB" (one decimal below 100). Writes at most `cap` bytes
 * (NUL-terminated) into buf and returns buf. */
char *fl_cli_human_bytes(uint64_t bytes, char *buf, size_t cap);
/* Format a count with an SI prefix: "950", "2.3 k", "1.2 M", "118 k". Returns buf. */
char *fl_cli_human_count(double n, char *buf, size_t cap);
/* Format a rate: fl_cli_human_rate(2345, "img/s") → "2.3 k img/s"; with unit "B/s" the binary
 * byte form is used ("12.3 MiB/s"). Returns buf. */
char *fl_cli_human_rate(double per_second, const char *unit, char *buf, size_t cap);
/* Format a duration: "0.42 s", "12.3 s", "4m 05s", "2h 03m". Returns buf. */
char *fl_cli_human_duration(double seconds, char *buf, size_t cap);

/* Monotonic clock in seconds. */
double fl_cli_now(void);

/* ---- progress bar --------------------------------------------------------------------------
 * Drawn on stderr, redrawn at most ~10 times a second, only when stderr is a terminal and
 * `quiet` is 0; otherwise every call is a cheap no-op. Not thread-safe: one thread updates. */
typedef struct fl_progress fl_progress;

/* Start a bar labelled `label` for `total` units ("img"; 0 total = unknown: no ETA, no bar).
 * Returns NULL on allocation failure; every fl_progress_* function accepts NULL. */
fl_progress *fl_progress_start(const char *label, uint64_t total, const char *unit, int quiet);
/* Report `done` units completed so far (absolute, not a delta). */
void fl_progress_update(fl_progress *p, uint64_t done);
/* Erase the bar line and free. */
void fl_progress_finish(fl_progress *p);
/* Non-zero when this progress bar is actually drawing. */
int fl_progress_active(const fl_progress *p);

/* ---- JSON writer ---------------------------------------------------------------------------
 * Builds JSON text in a growable buffer, inserting commas itself. Strings are escaped per
 * RFC 8259 (quotes, backslash, control characters as \u00XX; UTF-8 passed through).
 * Usage:
 *     fl_json j; fl_json_init(&j);
 *     fl_json_begin_object(&j);
 *     fl_json_key(&j, "records"); fl_json_uint(&j, 70000);
 *     fl_json_key(&j, "classes"); fl_json_begin_array(&j); fl_json_string(&j, "T-shirt"); ...
 *     fl_json_end_array(&j);
 *     fl_json_end_object(&j);
 *     puts(fl_json_text(&j)); fl_json_free(&j);
 * On allocation failure the writer latches an error (fl_json_failed) and further calls are
 * ignored. Nesting is limited to 32 levels. */
typedef struct fl_json {
    char *buf;
    size_t len, cap;
    int depth;
    int failed;
    unsigned char need_comma[32]; /* per nesting level: a value was already written */
    unsigned char after_key;      /* a key was just written: no comma before the value */
} fl_json;

void fl_json_init(fl_json *j);
void fl_json_free(fl_json *j);
/* The text so far, NUL-terminated (never NULL; "" when empty or failed). */
const char *fl_json_text(const fl_json *j);
int fl_json_failed(const fl_json *j);
void fl_json_begin_object(fl_json *j);
void fl_json_end_object(fl_json *j);
void fl_json_begin_array(fl_json *j);
void fl_json_end_array(fl_json *j);
void fl_json_key(fl_json *j, const char *key);
void fl_json_string(fl_json *j, const char *s);
/* A string of `len` bytes (may contain NUL, escaped as \u0000). */
void fl_json_string_n(fl_json *j, const char *s, size_t len);
void fl_json_int(fl_json *j, int64_t v);
void fl_json_uint(fl_json *j, uint64_t v);
/* Finite doubles printed with up to 6 significant digits (%.6g); NaN/Inf become null. */
void fl_json_double(fl_json *j, double v);
void fl_json_bool(fl_json *j, int v);
void fl_json_null(fl_json *j);
/* Insert pre-formatted JSON text as one value (the caller vouches it is valid). */
void fl_json_raw(fl_json *j, const char *json_text);

/* Write `s` (len bytes) as a quoted, escaped JSON string to `out`. */
void fl_json_fputs(FILE *out, const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
